/**
 * A scripted OpenAI-compatible streaming server for tests: known TTFT and ITL, injectable faults,
 * a toy prefix cache with vLLM-named /metrics counters, and a record of every request with the
 * true time (epoch ms, sub-ms) each chunk was handed to the socket.
 *
 * `flavor` makes it behave as another server does, from that server's source:
 *
 * - 'llamacpp': llama.cpp's llama-server (tools/server/server-task.cpp at 00efb3e, and the
 *   examples/server metrics handler of the 2024 builds). Completions end with a chunk whose text is
 *   "" and which carries finish_reason, usage and timings; chat streams open with a
 *   `delta: {role, content: null}` chunk and end with `delta: {}` + finish_reason, then a
 *   `choices: []` usage chunk. /v1/models lists `meta.n_vocab`; /metrics serves `llamacpp:*`
 *   counters without labels (prompt_tokens_total counts the prompt tokens it processed). Every
 *   response says `Keep-Alive: timeout=5, max=100` (cpp-httplib), yet the connection is closed
 *   after each streamed response.
 * - 'sglang': SGLang's `sglang:*` metrics (python/sglang/srt/metrics/collector.py:
 *   prompt_tokens_total, generation_tokens_total, cached_tokens_total, num_running_reqs,
 *   num_queue_reqs, token_usage).
 */
import * as http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import * as zlib from 'node:zlib';

export type Fault =
  | { kind: 'reset'; afterChunks: number }
  | { kind: 'status'; status: number; body: string }
  | { kind: 'stall'; afterChunks: number; ms: number }
  | { kind: 'malformed-sse'; afterChunks: number }
  | { kind: 'malformed-json'; afterChunks: number }
  | { kind: 'stream-error'; afterChunks: number }
  | { kind: 'no-usage' }
  /** Usage is sent, then the stream stays open without [DONE]. */
  | { kind: 'no-done' }
  /** The body ends (cleanly) after some chunks: no usage, no [DONE]. */
  | { kind: 'close-early'; afterChunks: number }
  /** Every byte of the stream in its own write. */
  | { kind: 'trickle' }
  /** Content chunks two to a write (what a client sees when it reads late): every second gap is ~0. */
  | { kind: 'pairs' }
  /** An error body that echoes the request's headers (a careless proxy), to test redaction. */
  | { kind: 'echo-headers'; status: number }
  /** HTTP 401 whose body echoes the bearer token in hex, spelled out with spaces, and reversed. */
  | { kind: 'echo-key-encoded' }
  /** After some chunks, vLLM's older unwrapped ErrorResponse chunk ({"object":"error",…}), then [DONE]. */
  | { kind: 'object-error'; afterChunks: number }
  /** After some chunks, an SSE `event: error` with a JSON message, then [DONE]. */
  | { kind: 'event-error'; afterChunks: number }
  /** After some chunks, llama.cpp's `error: {json}` line (2024 builds), then [DONE]. */
  | { kind: 'error-line'; afterChunks: number }
  /** Content chunks for ever (never finishes). */
  | { kind: 'endless' }
  /** After some chunks, `: ping` comments for ever and no more data. */
  | { kind: 'pings'; afterChunks: number; everyMs: number }
  /** Every line ends with CR alone (allowed by the SSE spec). */
  | { kind: 'cr-only' }
  /** An HTTP redirect with a Location header. */
  | { kind: 'redirect'; status: number; location: string }
  /** An error status with a gzip-encoded body (content-encoding: gzip). */
  | { kind: 'gzip-status'; status: number; body: string }
  /** The usage chunk reports these numbers instead of the true ones. */
  | { kind: 'usage'; completion?: number; prompt?: number };

export interface ServedRequest {
  index: number;
  requestId?: string;
  path: string;
  arrivedEpochMs: number;
  /** When each content chunk was written to the socket. */
  chunkEpochMs: number[];
  prompt: unknown;
  body: any;
  promptTokens: number;
  outputTokens: number;
  cachedTokens: number;
  hadAuthorization: boolean;
  /** The Authorization header as received (the planted-key tests check which key reached which host). */
  authorization?: string;
  fault?: Fault['kind'];
}

export interface ScriptedServerOptions {
  ttftMs?: number;
  itlMs?: number;
  model?: string;
  maxModelLen?: number;
  fault?: (req: { index: number; body: any; path: string }) => Fault | undefined;
  /** Count prompt blocks of 16 tokens seen before (vLLM-style prefix cache) and expose the counters. */
  prefixCache?: boolean;
  /** Report usage.prompt_tokens_details.cached_tokens. */
  reportCachedTokens?: boolean;
  /** Expose /metrics: with current names, the pre-mid-2025 names, or not at all. */
  metrics?: 'current' | 'old' | false;
  /** Refuse with this status and body when the bearer token differs. */
  requireKey?: string;
  /** Behave as this server does (see the header). Default: vLLM. */
  flavor?: 'vllm' | 'llamacpp' | 'sglang';
  /** Close each connection this long after a streamed response ends (0: at once); a request written on it meanwhile is dropped unseen. */
  closeAfterStreamMs?: number;
  /** vLLM's stream_options.continuous_usage_stats: usage in every chunk. Default: when the request asks for it. */
  continuousUsage?: boolean;
  /** Truncate prompts to this many tokens (the server's slot size), as usage.prompt_tokens then says. */
  maxPromptTokens?: number;
  /** Chat: send this many `reasoning_content` deltas before the answer's content deltas. */
  reasoningChunks?: number;
  /** Chat: the reasoning field's name (vLLM: reasoning_content; newer: reasoning). */
  reasoningField?: 'reasoning_content' | 'reasoning';
  /** Vocabulary size reported by llama.cpp's /v1/models meta (default 32000). */
  vocab?: number;
}

export interface ScriptedServer {
  url: string;
  port: number;
  requests: ServedRequest[];
  /** Bodies of POST /tokenize (vLLM flavor). */
  tokenizeCalls: any[];
  counters: {
    queries: number;
    hits: number;
    preemptions: number;
    running: number;
    waiting: number;
    promptTokens: number;
    generationTokens: number;
  };
  /** Connections the server closed after a streamed response, and requests it dropped unseen on them. */
  closed: { connections: number; dropped: number };
  close(): Promise<void>;
}

const epoch = () => performance.timeOrigin + performance.now();

function hashBlocks(ids: number[]): string[] {
  const out: string[] = [];
  let h = 2166136261;
  for (let b = 0; b + 16 <= ids.length; b += 16) {
    for (let i = b; i < b + 16; i++) {
      h ^= ids[i] & 0xffff;
      h = Math.imul(h, 16777619);
      h ^= ids[i] >>> 16;
      h = Math.imul(h, 16777619);
    }
    out.push(`${b}:${h >>> 0}`);
  }
  return out;
}

/** A text prompt's tokens here: one a space-separated word, plus a BOS (vLLM adds special tokens by default). */
const textTokens = (text: string) => text.split(/\s+/).filter(Boolean).length + 1;

export async function startScriptedServer(o: ScriptedServerOptions = {}): Promise<ScriptedServer> {
  const ttft = o.ttftMs ?? 50;
  const itl = o.itlMs ?? 10;
  const model = o.model ?? 'scripted-model';
  const requests: ServedRequest[] = [];
  const tokenizeCalls: any[] = [];
  const counters = {
    queries: 0,
    hits: 0,
    preemptions: 0,
    running: 0,
    waiting: 0,
    promptTokens: 0,
    generationTokens: 0,
  };
  const closed = { connections: 0, dropped: 0 };
  const flavor = o.flavor ?? 'vllm';
  const blocks = new Set<string>();
  const sockets = new Set<Socket>();
  /** Sockets that will be closed after their streamed response: a request arriving on one is dropped. */
  const closing = new WeakSet<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(
      () => {
        timers.delete(t);
        fn();
      },
      Math.max(0, ms),
    );
    timers.add(t);
  };

  const metricsText = () => {
    if (flavor === 'llamacpp') {
      const c = (name: string, help: string, v: number) =>
        `# HELP llamacpp:${name} ${help}\n# TYPE llamacpp:${name} counter\nllamacpp:${name} ${v}\n`;
      const g = (name: string, help: string, v: number) =>
        `# HELP llamacpp:${name} ${help}\n# TYPE llamacpp:${name} gauge\nllamacpp:${name} ${v}\n`;
      return (
        c('prompt_tokens_total', 'Number of prompt tokens processed.', counters.promptTokens) +
        c('prompt_seconds_total', 'Prompt process time', 0.5) +
        c('tokens_predicted_total', 'Number of generation tokens processed.', counters.generationTokens) +
        c('tokens_predicted_seconds_total', 'Predict process time', 1.5) +
        g('kv_cache_usage_ratio', 'KV-cache usage. 1 means 100 percent usage.', Math.min(1, counters.running * 0.01)) +
        g('requests_processing', 'Number of request processing.', counters.running) +
        g('requests_deferred', 'Number of request deferred.', counters.waiting)
      );
    }
    if (flavor === 'sglang') {
      const lbl = `{model_name="${model}"}`;
      const c = (name: string, help: string, v: number) =>
        `# HELP sglang:${name} ${help}\n# TYPE sglang:${name} counter\nsglang:${name}${lbl} ${v.toFixed(1)}\nsglang:${name.replace(/_total$/, '')}_created${lbl} 1.7e9\n`;
      const g = (name: string, help: string, v: number) =>
        `# HELP sglang:${name} ${help}\n# TYPE sglang:${name} gauge\nsglang:${name}${lbl} ${v}\n`;
      return (
        c('prompt_tokens_total', 'Number of prefill tokens processed.', counters.promptTokens) +
        c('generation_tokens_total', 'Number of generation tokens processed.', counters.generationTokens) +
        c('cached_tokens_total', 'Number of cached prompt tokens.', counters.hits) +
        g('num_running_reqs', 'The number of running requests.', counters.running) +
        g('num_queue_reqs', 'The number of requests in the waiting queue.', counters.waiting) +
        g('token_usage', 'The token usage.', Math.min(1, counters.running * 0.01))
      );
    }
    const old = o.metrics === 'old';
    const lbl = `{engine="0",model_name="${model}"}`;
    const counter = (name: string, help: string, v: number) =>
      `# HELP ${name} ${help}\n# TYPE ${name} counter\n${name}_total${lbl} ${v.toFixed(1)}\n${name}_created${lbl} 1.7e9\n`;
    const gauge = (name: string, help: string, v: number) =>
      `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${name}${lbl} ${v}\n`;
    return (
      (old
        ? counter(
            'vllm:gpu_prefix_cache_queries',
            'GPU prefix cache queries, in terms of number of queried tokens.',
            counters.queries,
          ) +
          counter(
            'vllm:gpu_prefix_cache_hits',
            'GPU prefix cache hits, in terms of number of cached tokens.',
            counters.hits,
          ) +
          gauge(
            'vllm:gpu_cache_usage_perc',
            'GPU KV-cache usage. 1 means 100 percent usage.',
            Math.min(1, counters.running * 0.01),
          )
        : counter(
            'vllm:prefix_cache_queries',
            'Prefix cache queries, in terms of number of queried tokens.',
            counters.queries,
          ) +
          counter('vllm:prefix_cache_hits', 'Prefix cache hits, in terms of number of cached tokens.', counters.hits) +
          gauge(
            'vllm:kv_cache_usage_perc',
            'KV-cache usage. 1 means 100 percent usage.',
            Math.min(1, counters.running * 0.01),
          )) +
      counter('vllm:num_preemptions', 'Cumulative number of preemption from the engine.', counters.preemptions) +
      counter('vllm:prompt_tokens', 'Number of prefill tokens processed.', counters.promptTokens) +
      counter('vllm:generation_tokens', 'Number of generation tokens processed.', counters.generationTokens) +
      gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', counters.running) +
      gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', counters.waiting) +
      `# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.\n# TYPE vllm:time_to_first_token_seconds histogram\n` +
      `vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="${model}"} ${requests.length}\nvllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="${model}"} ${requests.length}\n` +
      `vllm:time_to_first_token_seconds_count{model_name="${model}"} ${requests.length}\nvllm:time_to_first_token_seconds_sum{model_name="${model}"} ${(requests.length * ttft) / 1000}\n`
    );
  };

  const server = http.createServer((req, res) => {
    const arrived = epoch();
    const socket = req.socket;
    if (closing.has(socket)) {
      // The server has decided to close this connection: what comes on it now is never seen.
      closed.dropped++;
      return void socket.destroy();
    }
    // cpp-httplib advertises keep-alive on every response.
    if (flavor === 'llamacpp') res.setHeader('keep-alive', 'timeout=5, max=100');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = req.url ?? '/';
      if (req.method === 'GET' && (url === '/v1/models' || url === '/health' || url === '/metrics')) {
        if (url === '/health') return void res.end();
        if (url === '/metrics') {
          if (!o.metrics && flavor === 'vllm') {
            res.writeHead(404, { 'content-type': 'text/plain' });
            return void res.end('Not Found');
          }
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
          return void res.end(metricsText());
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        const entry =
          flavor === 'llamacpp'
            ? {
                id: model,
                object: 'model',
                created: Math.floor(Date.now() / 1000),
                owned_by: 'llamacpp',
                meta: {
                  vocab_type: 2,
                  n_vocab: o.vocab ?? 32000,
                  n_ctx_train: 4096,
                  n_embd: 2048,
                  n_params: 1e9,
                  size: 6e8,
                },
              }
            : { id: model, object: 'model', max_model_len: o.maxModelLen ?? 40960 };
        return void res.end(JSON.stringify({ object: 'list', data: [entry] }));
      }
      if (req.method === 'POST' && url === '/tokenize' && flavor === 'vllm') {
        // vLLM v0.11's /tokenize (protocol.py TokenizeResponse), counting as the completions below do.
        let b: any;
        try {
          b = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          b = {};
        }
        tokenizeCalls.push(b);
        const count =
          typeof b.prompt === 'string'
            ? textTokens(b.prompt)
            : String(b.messages?.[0]?.content ?? '').split(' ').length;
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(
          JSON.stringify({
            count,
            max_model_len: o.maxModelLen ?? 40960,
            tokens: new Array(count).fill(1),
            token_strs: null,
          }),
        );
      }
      if (req.method !== 'POST' || (url !== '/v1/completions' && url !== '/v1/chat/completions')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        return void res.end(
          JSON.stringify({ error: { message: `no route ${req.method} ${url}`, type: 'NotFoundError', code: 404 } }),
        );
      }
      let body: any;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' });
        return void res.end(
          JSON.stringify({ error: { message: 'body is not JSON', type: 'BadRequestError', code: 400 } }),
        );
      }
      const index = requests.length;
      const chat = url === '/v1/chat/completions';
      const prompt = chat ? body.messages : body.prompt;
      const ids: number[] = Array.isArray(prompt) && typeof prompt[0] === 'number' ? prompt : [];
      const asked =
        ids.length ||
        (chat
          ? String(body.messages?.[0]?.content ?? '').split(' ').length
          : typeof prompt === 'string'
            ? textTokens(prompt)
            : 0);
      const promptTokens = o.maxPromptTokens !== undefined ? Math.min(asked, o.maxPromptTokens) : asked;
      const outputTokens = Number(body.max_tokens ?? 16);
      const fault = o.fault?.({ index, body, path: url });
      const auth = req.headers.authorization;
      const rec: ServedRequest = {
        index,
        requestId: req.headers['x-request-id'] as string | undefined,
        path: url,
        arrivedEpochMs: arrived,
        chunkEpochMs: [],
        prompt,
        body,
        promptTokens,
        outputTokens,
        cachedTokens: 0,
        hadAuthorization: !!auth,
        authorization: auth,
        fault: fault?.kind,
      };
      requests.push(rec);
      if (o.requireKey !== undefined && auth !== `Bearer ${o.requireKey}`) {
        res.writeHead(401, { 'content-type': 'application/json' });
        return void res.end(
          JSON.stringify({ error: { message: 'invalid API key', type: 'AuthenticationError', code: 401 } }),
        );
      }
      if (fault?.kind === 'status') {
        res.writeHead(fault.status, { 'content-type': 'application/json' });
        return void res.end(fault.body);
      }
      if (fault?.kind === 'echo-headers') {
        res.writeHead(fault.status, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify({ error: { message: 'bad gateway', request_headers: req.headers } }));
      }
      if (fault?.kind === 'echo-key-encoded') {
        const token = String(auth ?? '').replace(/^Bearer /, '');
        res.writeHead(401, { 'content-type': 'application/json' });
        return void res.end(
          JSON.stringify({
            error: {
              message: `invalid key (hex ${Buffer.from(token).toString('hex')}; spelled ${[...token].join(' ')}; reversed ${[...token].reverse().join('')})`,
              type: 'AuthenticationError',
              code: 401,
            },
          }),
        );
      }
      if (fault?.kind === 'redirect') {
        res.writeHead(fault.status, { location: fault.location });
        return void res.end();
      }
      if (fault?.kind === 'gzip-status') {
        res.writeHead(fault.status, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        return void res.end(zlib.gzipSync(fault.body));
      }
      // Prefix cache (token counters, like vLLM's).
      let hitTokens = 0;
      if (o.prefixCache && ids.length) {
        const bs = hashBlocks(ids);
        for (const b of bs) {
          if (!blocks.has(b)) break;
          hitTokens += 16;
        }
        for (const b of bs) blocks.add(b);
        counters.queries += ids.length;
        counters.hits += hitTokens;
      }
      rec.cachedTokens = hitTokens;
      // llama.cpp counts the prompt tokens it processed (a reused prefix is not); vLLM and SGLang all of them.
      counters.promptTokens += flavor === 'llamacpp' ? promptTokens - hitTokens : promptTokens;
      const id = `cmpl-${index}`;
      const created = Math.floor(Date.now() / 1000);
      const continuous = o.continuousUsage ?? !!body.stream_options?.continuous_usage_stats;
      const reasoning = chat ? Math.min(outputTokens, o.reasoningChunks ?? 0) : 0;
      const usageAt = (k: number) => ({
        prompt_tokens: promptTokens,
        total_tokens: promptTokens + k,
        completion_tokens: k,
      });
      const chunkJson = (k: number) => {
        const last = k === outputTokens - 1;
        if (flavor === 'llamacpp')
          return chat
            ? JSON.stringify({
                choices: [{ finish_reason: null, index: 0, delta: { content: ` t${k}` } }],
                created,
                id,
                model,
                system_fingerprint: 'b0-scripted',
                object: 'chat.completion.chunk',
              })
            : JSON.stringify({
                choices: [{ text: ` t${k}`, index: 0, logprobs: null, finish_reason: null }],
                created,
                model,
                system_fingerprint: 'b0-scripted',
                object: 'text_completion',
                id,
              });
        const usage = continuous ? usageAt(k + 1) : null;
        return chat
          ? JSON.stringify({
              id,
              object: 'chat.completion.chunk',
              created,
              model,
              choices: [
                {
                  index: 0,
                  delta:
                    k < reasoning ? { [o.reasoningField ?? 'reasoning_content']: ` r${k}` } : { content: ` t${k}` },
                  logprobs: null,
                  finish_reason: last ? 'length' : null,
                },
              ],
              usage,
            })
          : JSON.stringify({
              id,
              object: 'text_completion',
              created,
              model,
              choices: [
                {
                  index: 0,
                  text: ` t${k}`,
                  logprobs: null,
                  finish_reason: last ? 'length' : null,
                  stop_reason: null,
                },
              ],
              usage,
            });
      };
      const u = fault?.kind === 'usage' ? fault : undefined;
      const usage = {
        prompt_tokens: u?.prompt ?? promptTokens,
        total_tokens: promptTokens + outputTokens,
        completion_tokens: u?.completion ?? outputTokens,
        ...(o.reportCachedTokens ? { prompt_tokens_details: { cached_tokens: hitTokens } } : {}),
      };
      const timings = { prompt_n: promptTokens, prompt_ms: 1.5, predicted_n: outputTokens, predicted_ms: 30 };
      /** The events that end a stream, before [DONE]. */
      const endEvents = (): string[] => {
        if (flavor === 'llamacpp')
          return chat
            ? [
                JSON.stringify({
                  choices: [{ finish_reason: 'length', index: 0, delta: {} }],
                  created,
                  id,
                  model,
                  system_fingerprint: 'b0-scripted',
                  object: 'chat.completion.chunk',
                }),
                JSON.stringify({
                  choices: [],
                  created,
                  id,
                  model,
                  system_fingerprint: 'b0-scripted',
                  object: 'chat.completion.chunk',
                  usage,
                  timings,
                }),
              ]
            : [
                JSON.stringify({
                  choices: [{ text: '', index: 0, logprobs: null, finish_reason: 'length' }],
                  created,
                  model,
                  system_fingerprint: 'b0-scripted',
                  object: 'text_completion',
                  usage,
                  id,
                  timings,
                }),
              ];
        return [
          JSON.stringify({
            id,
            object: chat ? 'chat.completion.chunk' : 'text_completion',
            created,
            model,
            choices: [],
            usage,
          }),
        ];
      };

      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
      res.flushHeaders();
      counters.running++;
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        counters.running--;
      };
      res.on('close', end);
      /** End the response; llama-server-like servers then close the connection (after closeAfterStreamMs). */
      const endStream = () => {
        const closeMs = o.closeAfterStreamMs ?? (flavor === 'llamacpp' ? 0 : undefined);
        if (closeMs !== undefined) {
          closing.add(socket);
          res.end(() => {
            counters.generationTokens += rec.chunkEpochMs.length;
            later(closeMs, () => {
              closed.connections++;
              socket.destroy();
            });
          });
          return;
        }
        res.end(() => (counters.generationTokens += rec.chunkEpochMs.length));
      };

      const trickle = fault?.kind === 'trickle';
      const crOnly = fault?.kind === 'cr-only';
      const write = (s0: string, done?: () => void) => {
        const s = crOnly ? s0.replace(/\n/g, '\r') : s0;
        if (!trickle) {
          res.write(s);
          done?.();
          return;
        }
        // One queue, so the bytes of successive chunks never interleave.
        for (const b of Buffer.from(s, 'utf8')) trickleQueue.push(b);
        if (done) trickleDone.push([trickleQueue.length, done]);
        if (!trickling) pump();
      };
      const trickleQueue: number[] = [];
      const trickleDone: [number, () => void][] = [];
      let trickling = false;
      let sent = 0;
      const pump = () => {
        trickling = true;
        if (res.destroyed) return;
        if (sent >= trickleQueue.length) {
          trickling = false;
          return;
        }
        res.write(Buffer.of(trickleQueue[sent++]));
        while (trickleDone.length && trickleDone[0][0] <= sent) trickleDone.shift()![1]();
        setImmediate(pump);
      };
      const firstAt = performance.now() + ttft * Math.max(0.1, 1 - (promptTokens ? hitTokens / promptTokens : 0));
      let k = 0;
      const total = fault?.kind === 'endless' ? Infinity : outputTokens;
      const finishStream = () => {
        if (fault?.kind === 'no-usage') {
          write('data: [DONE]\n\n', endStream);
          return;
        }
        write(
          endEvents()
            .map((e) => `data: ${e}\n\n`)
            .join(''),
          () => {
            if (fault?.kind === 'no-done') return; // keep the stream open
            write('data: [DONE]\n\n', endStream);
          },
        );
      };
      const sendNext = () => {
        if (res.destroyed) return end();
        const after = 'afterChunks' in (fault ?? {}) ? (fault as { afterChunks: number }).afterChunks : -1;
        if (k === after) {
          switch (fault!.kind) {
            case 'reset':
              res.socket?.resetAndDestroy();
              return end();
            case 'malformed-sse':
              res.write('this is not an SSE line\n\n');
              break;
            case 'malformed-json':
              res.write('data: {"choices": [{"text": "x"}, oops}\n\n');
              break;
            case 'stream-error':
              res.write(
                `data: ${JSON.stringify({ error: { message: 'engine died', type: 'InternalServerError', code: 500 } })}\n\n`,
              );
              break;
            case 'object-error':
              return write(
                `data: ${JSON.stringify({ object: 'error', message: 'prompt too long for the KV cache', type: 'BadRequestError', param: null, code: 400 })}\n\ndata: [DONE]\n\n`,
                endStream,
              );
            case 'event-error':
              return write(
                `event: error\ndata: ${JSON.stringify({ message: 'upstream model crashed', type: 'server_error' })}\n\ndata: [DONE]\n\n`,
                endStream,
              );
            case 'error-line':
              return write(
                `error: ${JSON.stringify({ code: 500, message: 'llama_decode failed: KV cache is full', type: 'server_error' })}\n\ndata: [DONE]\n\n`,
                endStream,
              );
            case 'pings': {
              const f = fault as { everyMs: number };
              const ping = () => {
                if (res.destroyed) return end();
                write(': ping\n\n');
                later(f.everyMs, ping);
              };
              return ping();
            }
            case 'close-early':
              return void res.end();
            case 'stall': {
              const f = fault as { ms: number };
              const resumeK = k;
              return later(f.ms, () => {
                k = resumeK;
                emit();
              });
            }
          }
        }
        emit();
      };
      const emit = () => {
        if (res.destroyed) return end();
        if (k >= total) return finishStream();
        const kk = k;
        if (fault?.kind === 'pairs' && kk + 1 < total) {
          write(`data: ${chunkJson(kk)}\n\ndata: ${chunkJson(kk + 1)}\n\n`, () =>
            rec.chunkEpochMs.push(epoch(), epoch()),
          );
          k += 2;
          if (k >= total) return finishStream();
          return later(firstAt + k * itl - performance.now(), sendNext);
        }
        // llama.cpp's chat stream opens with a role chunk, in the same write as the first token.
        const role =
          kk === 0 && chat && flavor === 'llamacpp'
            ? `data: ${JSON.stringify({ choices: [{ finish_reason: null, index: 0, delta: { role: 'assistant', content: null } }], created, id, model, system_fingerprint: 'b0-scripted', object: 'chat.completion.chunk' })}\n\n`
            : '';
        write(`${role}data: ${chunkJson(kk)}\n\n`, () => rec.chunkEpochMs.push(epoch()));
        k++;
        if (k >= total) return finishStream();
        later(firstAt + k * itl - performance.now(), sendNext);
      };
      later(firstAt - performance.now(), sendNext);
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (s) => {
    s.setNoDelay(true);
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    tokenizeCalls,
    counters,
    closed,
    close: () =>
      new Promise<void>((r) => {
        for (const t of timers) clearTimeout(t);
        timers.clear();
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A port nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const p = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return p;
}
