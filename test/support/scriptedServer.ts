/**
 * A scripted OpenAI-compatible streaming server for tests: known TTFT and ITL, injectable faults,
 * a toy prefix cache with vLLM-named /metrics counters, and a record of every request with the
 * true time (epoch ms, sub-ms) each chunk was handed to the socket.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

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
  | { kind: 'echo-headers'; status: number };

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
}

export interface ScriptedServer {
  url: string;
  port: number;
  requests: ServedRequest[];
  counters: { queries: number; hits: number; preemptions: number; running: number; waiting: number };
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

export async function startScriptedServer(o: ScriptedServerOptions = {}): Promise<ScriptedServer> {
  const ttft = o.ttftMs ?? 50;
  const itl = o.itlMs ?? 10;
  const model = o.model ?? 'scripted-model';
  const requests: ServedRequest[] = [];
  const counters = { queries: 0, hits: 0, preemptions: 0, running: 0, waiting: 0 };
  const blocks = new Set<string>();
  const sockets = new Set<import('node:net').Socket>();
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
      gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', counters.running) +
      gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', counters.waiting) +
      `# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.\n# TYPE vllm:time_to_first_token_seconds histogram\n` +
      `vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="${model}"} ${requests.length}\nvllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="${model}"} ${requests.length}\n` +
      `vllm:time_to_first_token_seconds_count{model_name="${model}"} ${requests.length}\nvllm:time_to_first_token_seconds_sum{model_name="${model}"} ${(requests.length * ttft) / 1000}\n`
    );
  };

  const server = http.createServer((req, res) => {
    const arrived = epoch();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = req.url ?? '/';
      if (req.method === 'GET' && (url === '/v1/models' || url === '/health' || url === '/metrics')) {
        if (url === '/health') return void res.end();
        if (url === '/metrics') {
          if (!o.metrics) {
            res.writeHead(404, { 'content-type': 'text/plain' });
            return void res.end('Not Found');
          }
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
          return void res.end(metricsText());
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(
          JSON.stringify({
            object: 'list',
            data: [{ id: model, object: 'model', max_model_len: o.maxModelLen ?? 40960 }],
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
      const promptTokens = ids.length || (chat ? String(body.messages?.[0]?.content ?? '').split(' ').length : 0);
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
      const id = `cmpl-${index}`;
      const created = Math.floor(Date.now() / 1000);
      const chunkJson = (k: number) =>
        chat
          ? JSON.stringify({
              id,
              object: 'chat.completion.chunk',
              created,
              model,
              choices: [
                {
                  index: 0,
                  delta: { content: ` t${k}` },
                  logprobs: null,
                  finish_reason: k === outputTokens - 1 ? 'length' : null,
                },
              ],
              usage: null,
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
                  finish_reason: k === outputTokens - 1 ? 'length' : null,
                  stop_reason: null,
                },
              ],
              usage: null,
            });
      const usage = {
        prompt_tokens: promptTokens,
        total_tokens: promptTokens + outputTokens,
        completion_tokens: outputTokens,
        ...(o.reportCachedTokens ? { prompt_tokens_details: { cached_tokens: hitTokens } } : {}),
      };
      const usageJson = JSON.stringify({
        id,
        object: chat ? 'chat.completion.chunk' : 'text_completion',
        created,
        model,
        choices: [],
        usage,
      });

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

      const trickle = fault?.kind === 'trickle';
      const write = (s: string, done?: () => void) => {
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
      const finishStream = () => {
        if (fault?.kind === 'no-usage') {
          write('data: [DONE]\n\n', () => res.end());
          return;
        }
        write(`data: ${usageJson}\n\n`, () => {
          if (fault?.kind === 'no-done') return; // keep the stream open
          write('data: [DONE]\n\n', () => res.end());
        });
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
        if (k >= outputTokens) return finishStream();
        const kk = k;
        if (fault?.kind === 'pairs' && kk + 1 < outputTokens) {
          write(`data: ${chunkJson(kk)}\n\ndata: ${chunkJson(kk + 1)}\n\n`, () =>
            rec.chunkEpochMs.push(epoch(), epoch()),
          );
          k += 2;
          if (k >= outputTokens) return finishStream();
          return later(firstAt + k * itl - performance.now(), sendNext);
        }
        write(`data: ${chunkJson(kk)}\n\n`, () => rec.chunkEpochMs.push(epoch()));
        k++;
        if (k >= outputTokens) return finishStream();
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
    counters,
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
