/**
 * The simulated vLLM endpoint: an OpenAI-compatible HTTP server (node:http, 127.0.0.1) in front of
 * a SimEngine driven by the wall clock. Each engine step's tokens leave at the step's simulated end
 * time divided by `speed`, so a real client measures the simulated latencies (× 1/speed).
 *
 * Endpoints: POST /v1/completions, POST /v1/chat/completions (SSE streaming like vLLM, with
 * stream_options.include_usage), GET /v1/models, POST /tokenize, POST /detokenize, GET /health,
 * GET /metrics, GET /version. Errors are OpenAI-style: {"error": {message, type, param, code}}.
 */
import { randomBytes } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { findGpu, findModel } from '../catalog';
import type { Setup } from '../engine/types';
import { createEngine, type Engine, type EngineOptions, type SimRequest, type StepResult } from './engine';
import { fileLogSink, VllmLog } from './log';
import { renderMetrics, SimMetrics } from './prom';
import { chatPrompt, detokenize, idToChar, tokenize } from './tokenizer';

export interface SimServerOptions {
  /** GPU, model, dtypes and server knobs (setup.server); default Qwen3-8B bf16 on an A100 SXM4 80GB. */
  setup?: Setup;
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  /** Simulated seconds per wall-clock second (default 1; 10 = ten times faster). */
  speed?: number;
  /** Engine knobs (override setup.server): maxNumSeqs, maxNumBatchedTokens, prefixCaching, prefillMfu, stepOverheadS, numGpuBlocks, seed, … */
  engine?: Omit<EngineOptions, 'setup'>;
  /** Name in /v1/models and responses (default: the model's catalog id). Requests may also use the model's display name. */
  servedModelName?: string;
  /** vLLM-format log: a file path (appended), 'stdout', 'stderr', a line callback, or false (default). */
  log?: string | ((line: string) => void) | false;
  /** Where a log file's first write failure is said (default stderr); serving goes on. */
  onLogWarning?: (message: string) => void;
  /** Seconds of wall time between stats lines (default 10, as vLLM). */
  statsIntervalS?: number;
  /**
   * For measurement: called after each step's tokens were handed to the sockets, with the wall
   * time (performance.now(), ms) the step was due to end, when its writes started and ended, and
   * whether it was so late that the engine's clock restarts from the wall clock (a host stall).
   */
  onStepWritten?: (step: { dueMs: number; startMs: number; endMs: number; tokens: number; stalled: boolean }) => void;
}

export interface SimServer {
  url: string;
  port: number;
  host: string;
  model: string;
  engine: Engine;
  /** Prometheus text, as GET /metrics returns it. */
  metricsText(): string;
  close(): Promise<void>;
}

export function defaultSimSetup(): Setup {
  return {
    name: 'sim',
    gpu: findGpu('a100-sxm4-80gb')!,
    model: findModel('qwen3-8b')!,
    weights: 'bf16',
    kvCache: 'bf16',
    endpoint: 'sim',
  };
}

// ---- request bodies ----
const tokenIds = z.array(z.number().int().min(0));
const streamOptions = z
  .looseObject({ include_usage: z.boolean().nullish(), continuous_usage_stats: z.boolean().nullish() })
  .nullish();
const common = {
  model: z.string().nullish(),
  max_tokens: z.number().int().min(1).nullish(),
  min_tokens: z.number().int().min(0).nullish(),
  ignore_eos: z.boolean().nullish(),
  stream: z.boolean().nullish(),
  stream_options: streamOptions,
  n: z.number().int().min(1).max(1, { message: 'the simulated endpoint supports n = 1 only' }).nullish(),
  temperature: z.number().min(0).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.number().int().nullish(),
  seed: z.number().int().nullish(),
};
const completionBody = z.looseObject({
  ...common,
  prompt: z.union([z.string(), tokenIds.min(1), z.array(z.string()).length(1), z.array(tokenIds.min(1)).length(1)], {
    error: 'prompt must be a string or a list of token ids, e.g. "prompt": "Hello" or "prompt": [9707, 1879]',
  }),
});
const contentPart = z.looseObject({ type: z.string(), text: z.string().optional() });
const chatBody = z.looseObject({
  ...common,
  max_completion_tokens: z.number().int().min(1).nullish(),
  messages: z
    .array(z.looseObject({ role: z.string(), content: z.union([z.string(), z.array(contentPart)]).nullish() }), {
      error: 'messages must be a list like [{"role": "user", "content": "Hello"}]',
    })
    .min(1, { message: 'messages must hold at least one message' }),
});
const tokenizeBody = z.union([
  z.looseObject({ prompt: z.string(), model: z.string().nullish() }),
  z.looseObject({ messages: chatBody.shape.messages, model: z.string().nullish() }),
]);
const detokenizeBody = z.looseObject({ tokens: tokenIds, model: z.string().nullish() });

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = 'BadRequestError',
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

function zodMessage(e: z.ZodError): string {
  return e.issues
    .map((i) => {
      const p = i.path.join('.');
      return p && !i.message.startsWith(p) ? `${p}: ${i.message}` : i.message;
    })
    .join('; ');
}

/** The largest request body the simulator reads (64 MiB: far beyond any context); larger is a 413. */
export const MAX_BODY = 64 * 1024 * 1024;
/**
 * After a body passes MAX_BODY, how much more of it (and for how long) is read and dropped before
 * the 413 is sent and the connection closed: a server that closes with the client's bytes unread
 * resets the connection, and the client never sees the answer. A body larger still is answered
 * when this runs out.
 */
const DRAIN_BYTES = 64 * 1024 * 1024;
const DRAIN_MS = 10_000;

/**
 * The request body as text, or an HttpError 413 saying the limit once the body (or its declared
 * Content-Length) is over MAX_BODY: then nothing more is kept, the rest is read and dropped (up to
 * DRAIN_BYTES and DRAIN_MS), and the 413 is answered with `Connection: close`.
 */
function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let chunks: Buffer[] = [];
    let n = 0;
    let over = false;
    let timer: NodeJS.Timeout | undefined;
    const declared = Number(req.headers['content-length']);
    const refuse = (ended = false) => {
      clearTimeout(timer);
      req.pause();
      const size = ended
        ? `${n} bytes`
        : Number.isFinite(declared) && declared > n
          ? `${declared} bytes (its Content-Length)`
          : `over ${n} bytes`;
      reject(
        new HttpError(
          413,
          `The request body is ${size}, over the simulator's limit of ${MAX_BODY} bytes (64 MiB): send a shorter prompt, or the prompt as token ids`,
          'RequestEntityTooLarge',
        ),
      );
    };
    const overLimit = () => {
      over = true;
      chunks = [];
      timer = setTimeout(() => refuse(), DRAIN_MS);
    };
    if (Number.isFinite(declared) && declared > MAX_BODY) overLimit();
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (!over && n > MAX_BODY) overLimit();
      if (!over) chunks.push(c);
      else if (n > MAX_BODY + DRAIN_BYTES) refuse();
    });
    req.on('end', () => (over ? refuse(true) : resolve(Buffer.concat(chunks).toString('utf8'))));
    req.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

/**
 * A response in flight. The engine loop computes a step ahead of its due time: `prepare` builds
 * what the step's token means for this response (SSE text, or the final JSON) while the loop waits,
 * `flush` hands it to the socket at the step's time: one write (or end) per response per step.
 */
interface Stream {
  prepare(token: number, finished: boolean, req: SimRequest): void;
  flush(): void;
}

/** JSON text of a one-character piece, cached by token id. */
const pieceJson: string[] = [];
function pieceJsonOf(token: number): string {
  let j = token < 65536 ? pieceJson[token] : undefined;
  if (j === undefined) {
    j = JSON.stringify(idToChar(token));
    if (token < 65536) pieceJson[token] = j;
  }
  return j;
}

/** Split JSON.stringify(make(sentinel)) around the sentinel's JSON, so a chunk is prefix + JSON(piece) + suffix, byte for byte. */
function chunkTemplate(make: (piece: string) => unknown): [string, string] {
  const sentinel = '\u0000piece\u0000';
  const text = JSON.stringify(make(sentinel));
  const at = text.indexOf(JSON.stringify(sentinel));
  return [`data: ${text.slice(0, at)}`, `${text.slice(at + JSON.stringify(sentinel).length)}\n\n`];
}

export async function startSimServer(opts: SimServerOptions = {}): Promise<SimServer> {
  const setup = opts.setup ?? defaultSimSetup();
  const speed = opts.speed && opts.speed > 0 ? opts.speed : 1;
  const host = opts.host ?? '127.0.0.1';
  const engine = createEngine({ ...(opts.engine ?? {}), setup });
  const cfg = engine.cfg;
  const modelName = opts.servedModelName ?? setup.model.id;
  const acceptedNames = new Set([modelName, setup.model.id, setup.model.name]);
  const poolTokens = cfg.numGpuBlocks * cfg.blockSize;
  const metrics = new SimMetrics();
  const created = Math.floor(Date.now() / 1000);

  // ---- log sink ----
  let logFile: ReturnType<typeof fileLogSink> | undefined;
  let write: ((line: string) => void) | undefined;
  if (typeof opts.log === 'function') write = opts.log;
  else if (opts.log === 'stdout') write = (l) => process.stdout.write(l + '\n');
  else if (opts.log === 'stderr') write = (l) => process.stderr.write(l + '\n');
  else if (typeof opts.log === 'string' && opts.log) {
    // A full disk or an unwritable file never stops serving: warned once (log.ts).
    logFile = fileLogSink(opts.log, opts.onLogWarning ?? ((m) => process.stderr.write(`inflab sim: ${m}\n`)));
    write = logFile.write;
  }
  const log = write ? new VllmLog({ write }) : undefined;

  // ---- the engine loop against the wall clock ----
  // Steps run back to back on an absolute schedule: step k's tokens leave at t0 + end_k / speed.
  // Host work (writes, request handling) does not stretch the simulated steps: a step that leaves a
  // little late is followed by steps that catch up, so the schedule does not drift. The engine's
  // clock jumps to the wall clock when it was idle (a request arrives at an idle engine), and after
  // a host stall (a step more than two steps' wall time late, and over 2 ms: the process was not
  // scheduled, a GC pause), as a real engine's GPU waits for a stalled host instead of bursting the
  // backlog afterwards (at a high speed factor a few ms late would otherwise be a burst of steps).
  const t0 = performance.now();
  const vnow = () => ((performance.now() - t0) / 1000) * speed;
  let looping = false;
  let closing = false;
  let timer: NodeJS.Timeout | undefined;
  let wake: (() => void) | undefined;
  const immediate = () => new Promise<void>((resolve) => setImmediate(resolve));
  /** Wait until performance.now() ≥ due: a timer to about a millisecond before, then polling turns of the event loop (I/O still served). */
  const sleepUntil = async (due: number) => {
    const left = due - performance.now();
    if (left > 2)
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, left - 1.5);
      });
    for (let i = 0; i < 1e6 && !closing && performance.now() < due; i++) await immediate();
  };
  const pending: Stream[] = [];
  /** Build every response's text for a step, before it is due. */
  const prepare = (res: StepResult) => {
    pending.length = 0;
    for (const ev of res.tokens) {
      const s = ev.req.tag as Stream | undefined;
      if (!s) continue;
      s.prepare(ev.token, ev.finished, ev.req);
      pending.push(s);
    }
    for (const r of res.dropped) {
      const s = r.tag as Stream | undefined;
      if (!s) continue;
      s.prepare(-1, true, r);
      pending.push(s);
    }
  };
  /** At the step's time: metrics, then one write (or end) per response. */
  const dispatch = (res: StepResult) => {
    for (const ev of res.tokens) {
      const r = ev.req;
      if (r.output.length === 1) metrics.ttft.observe(r.firstTokenTime - r.arrival);
      else metrics.itl.observe(r.lastTokenTime - r.prevTokenTime);
      if (ev.finished) {
        metrics.e2e.observe(r.finishTime - r.arrival);
        metrics.finished[r.finishReason ?? 'stop'] = (metrics.finished[r.finishReason ?? 'stop'] ?? 0) + 1;
      }
    }
    for (let i = 0; i < pending.length; i++) pending[i].flush();
    pending.length = 0;
  };
  const loop = async () => {
    looping = true;
    try {
      let idle = true;
      let stalled = false;
      while (!closing && engine.hasWork()) {
        if (idle || stalled) engine.advanceTo(vnow());
        const res = engine.step();
        if (!res) break;
        idle = false;
        prepare(res);
        const due = t0 + (res.end / speed) * 1000;
        await sleepUntil(due);
        if (closing) break;
        const start = performance.now();
        dispatch(res);
        const end = performance.now();
        metrics.lateness.observe(end - due);
        stalled = end - due > Math.max(2, (2000 * res.duration) / speed);
        if (opts.onStepWritten)
          opts.onStepWritten({ dueMs: due, startMs: start, endMs: end, tokens: res.tokens.length, stalled });
      }
    } finally {
      looping = false;
      wake = undefined;
    }
  };
  const kick = () => {
    if (!looping && !closing) void loop();
  };

  // ---- periodic stats line (wall clock, like vLLM) ----
  let statsTimer: NodeJS.Timeout | undefined;
  if (log) {
    const every = (opts.statsIntervalS ?? 10) * 1000;
    let last = { t: performance.now(), prompt: 0, gen: 0, pre: 0 };
    let lastActive = false;
    statsTimer = setInterval(() => {
      const now = performance.now();
      const c = engine.counters;
      const dt = (now - last.t) / 1000;
      const p = (c.promptTokens - last.prompt) / dt;
      const g = (c.generationTokens - last.gen) / dt;
      const active = p > 0 || g > 0;
      if (active || lastActive)
        log.stats({
          promptTokensPerS: p,
          generationTokensPerS: g,
          running: engine.numRunning,
          waiting: engine.waiting,
          preemptions: c.preemptions - last.pre,
          kvUsage: engine.kvUsage,
          prefixHitRate: engine.rollingHitRate,
        });
      lastActive = active;
      last = { t: now, prompt: c.promptTokens, gen: c.generationTokens, pre: c.preemptions };
    }, every);
    statsTimer.unref();
  }

  // ---- HTTP ----
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer((req, res) => {
    handle(req, res).catch((e) => {
      const err =
        e instanceof HttpError
          ? e
          : new HttpError(500, `internal error: ${(e as Error).message}`, 'InternalServerError');
      if (!res.headersSent) {
        // The body was dropped (and may not have been read to its end): the connection closes.
        if (err.status === 413) res.setHeader('connection', 'close');
        sendJson(req, res, err.status, {
          error: { message: err.message, type: err.type, param: err.param, code: err.status },
        });
      } else res.end();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('clientError', (_e, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    else socket.destroy();
  });
  server.keepAliveTimeout = 5000;
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;

  const remoteOf = (req: http.IncomingMessage) =>
    `${req.socket.remoteAddress ?? '127.0.0.1'}:${req.socket.remotePort ?? 0}`;
  const accessLog = (req: http.IncomingMessage, status: number) =>
    log?.access(remoteOf(req), req.method ?? 'GET', req.url ?? '/', status);

  function sendJson(req: http.IncomingMessage, res: http.ServerResponse, status: number, body: unknown) {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
    accessLog(req, status);
  }

  async function jsonBody(req: http.IncomingMessage): Promise<unknown> {
    const text = await readBody(req);
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new HttpError(
        400,
        `The request body is not valid JSON (${(e as Error).message}): send a JSON object such as {"prompt": "Hello", "max_tokens": 16}`,
      );
    }
  }

  function parse<T>(schema: z.ZodType<T>, body: unknown): T {
    if (body === null || typeof body !== 'object' || Array.isArray(body))
      throw new HttpError(400, 'The request body must be a JSON object, e.g. {"prompt": "Hello", "max_tokens": 16}');
    const r = schema.safeParse(body);
    if (!r.success)
      throw new HttpError(400, zodMessage(r.error), 'BadRequestError', r.error.issues[0]?.path.join('.') || null);
    return r.data;
  }

  function checkModel(name: string | null | undefined) {
    if (name && !acceptedNames.has(name))
      throw new HttpError(404, `The model \`${name}\` does not exist.`, 'NotFoundError', 'model');
  }

  function checkLength(promptLen: number, maxTokens: number | null | undefined): number {
    const maxLen = cfg.maxModelLen;
    if (maxTokens == null) {
      if (promptLen >= maxLen)
        throw new HttpError(
          400,
          `This model's maximum context length is ${maxLen} tokens. However, you requested ${promptLen} tokens in the messages, Please reduce the length of the messages.`,
          'BadRequestError',
          'messages',
        );
    } else if (promptLen + maxTokens > maxLen) {
      throw new HttpError(
        400,
        `This model's maximum context length is ${maxLen} tokens. However, you requested ${promptLen + maxTokens} tokens (${promptLen} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
        'BadRequestError',
        'max_tokens',
      );
    }
    const out = maxTokens ?? maxLen - promptLen;
    if (promptLen + out > poolTokens)
      throw new HttpError(
        400,
        `The request needs ${promptLen + out} tokens of KV cache but the whole pool holds ${poolTokens} (GPU KV cache size): lower max_tokens or the prompt length.`,
        'BadRequestError',
        'max_tokens',
      );
    return out;
  }

  function toIds(prompt: string | number[] | string[] | number[][]): number[] {
    let ids: number[];
    if (typeof prompt === 'string') ids = tokenize(prompt, cfg.vocab);
    else if (typeof prompt[0] === 'string') ids = tokenize(prompt[0] as string, cfg.vocab);
    else if (Array.isArray(prompt[0])) ids = prompt[0] as number[];
    else ids = prompt as number[];
    const bad = ids.find((t) => t >= cfg.vocab);
    if (bad !== undefined)
      throw new HttpError(
        400,
        `Token id ${bad} is out of vocabulary (vocab_size ${cfg.vocab}): use ids in [0, ${cfg.vocab})`,
        'BadRequestError',
        'prompt',
      );
    if (!ids.length)
      throw new HttpError(400, 'The prompt is empty: send at least one token', 'BadRequestError', 'prompt');
    return ids;
  }

  async function generate(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    kind: 'completion' | 'chat',
    body: z.output<typeof completionBody> | z.output<typeof chatBody>,
    ids: number[],
    maxTokens: number,
  ) {
    const id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomBytes(16).toString('hex')}`;
    const createdAt = Math.floor(Date.now() / 1000);
    const object = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    const stream = !!body.stream;
    const includeUsage = !!body.stream_options?.include_usage;
    const continuous = !!body.stream_options?.continuous_usage_stats;
    let text = '';
    /** The response is over: ended by us, or the client went away. */
    let closed = false;
    /** The last token (or the drop) is prepared: the next flush ends the response. */
    let ended = false;
    /** Text prepared for the next flush. */
    let out = '';
    let finalBody: unknown;
    const usage = (r: SimRequest) => ({
      prompt_tokens: r.numPrompt,
      total_tokens: r.numPrompt + r.output.length,
      completion_tokens: r.output.length,
      prompt_tokens_details: { cached_tokens: r.cachedTokens },
    });
    const sse = (obj: unknown) => {
      out += `data: ${JSON.stringify(obj)}\n\n`;
    };
    // An ordinary content chunk (not the last, no per-chunk usage) is a template around the piece:
    // the same bytes JSON.stringify gives for the object below, without building it per token.
    const tpl =
      stream && !(includeUsage && continuous)
        ? chunkTemplate((piece) =>
            kind === 'chat'
              ? {
                  id,
                  object,
                  created: createdAt,
                  model: modelName,
                  choices: [{ index: 0, delta: { content: piece }, logprobs: null, finish_reason: null }],
                  usage: null,
                }
              : {
                  id,
                  object,
                  created: createdAt,
                  model: modelName,
                  choices: [{ index: 0, text: piece, logprobs: null, finish_reason: null, stop_reason: null }],
                  usage: null,
                },
          )
        : undefined;
    if (stream) {
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
      });
      res.flushHeaders();
      accessLog(req, 200);
    }
    const finishReason = (r: SimRequest) => (r.finishReason === 'abort' ? 'abort' : (r.finishReason ?? null));
    const s: Stream = {
      prepare(token, finished, r) {
        if (closed || ended) return;
        if (stream) {
          if (token >= 0) {
            if (kind === 'chat' && r.output.length === 1) {
              sse({
                id,
                object,
                created: createdAt,
                model: modelName,
                choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
                usage: includeUsage && continuous ? usage(r) : null,
              });
            }
            if (!finished && tpl) out += tpl[0] + pieceJsonOf(token) + tpl[1];
            else {
              const piece = idToChar(token);
              const fr = finished ? finishReason(r) : null;
              const u = includeUsage && continuous ? usage(r) : null;
              if (kind === 'chat')
                sse({
                  id,
                  object,
                  created: createdAt,
                  model: modelName,
                  choices: [
                    {
                      index: 0,
                      delta: { content: piece },
                      logprobs: null,
                      finish_reason: fr,
                      ...(finished ? { stop_reason: null } : {}),
                    },
                  ],
                  usage: u,
                });
              else
                sse({
                  id,
                  object,
                  created: createdAt,
                  model: modelName,
                  choices: [{ index: 0, text: piece, logprobs: null, finish_reason: fr, stop_reason: null }],
                  usage: u,
                });
            }
          }
          if (finished) {
            if (includeUsage) sse({ id, object, created: createdAt, model: modelName, choices: [], usage: usage(r) });
            out += 'data: [DONE]\n\n';
          }
        } else {
          if (token >= 0) text += idToChar(token);
          if (finished) {
            const choice =
              kind === 'chat'
                ? {
                    index: 0,
                    message: {
                      role: 'assistant',
                      content: text,
                      refusal: null,
                      tool_calls: [],
                      reasoning_content: null,
                    },
                    logprobs: null,
                    finish_reason: finishReason(r),
                    stop_reason: null,
                  }
                : {
                    index: 0,
                    text,
                    logprobs: null,
                    finish_reason: finishReason(r),
                    stop_reason: null,
                    prompt_logprobs: null,
                  };
            finalBody = {
              id,
              object: kind === 'chat' ? 'chat.completion' : 'text_completion',
              created: createdAt,
              model: modelName,
              choices: [choice],
              usage: usage(r),
              prompt_logprobs: null,
            };
          }
        }
        if (finished) ended = true;
      },
      flush() {
        if (closed) {
          out = '';
          return;
        }
        if (ended) {
          closed = true;
          if (stream) res.end(out);
          else sendJson(req, res, 200, finalBody);
        } else if (out) res.write(out);
        out = '';
      },
    };
    const sim = engine.add({
      id,
      prompt: ids,
      maxTokens,
      minTokens: body.min_tokens ?? 0,
      ignoreEos: !!body.ignore_eos,
      arrival: vnow(),
    });
    sim.tag = s;
    res.on('close', () => {
      if (closed) return;
      closed = true;
      if (engine.abort(id)) metrics.finished.abort++;
    });
    kick();
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const route = `${req.method} ${url.pathname}`;
    const routes: Record<string, () => Promise<void> | void> = {
      'GET /health': () => {
        res.writeHead(200, { 'content-length': 0 });
        res.end();
        accessLog(req, 200);
      },
      'GET /version': () => sendJson(req, res, 200, { version: '0.12.0' }),
      'GET /metrics': () => {
        const text = renderMetrics(engine, metrics, modelName);
        res.writeHead(200, {
          'content-type': 'text/plain; version=0.0.4; charset=utf-8',
          'content-length': Buffer.byteLength(text),
        });
        res.end(text);
        accessLog(req, 200);
      },
      'GET /v1/models': () =>
        sendJson(req, res, 200, {
          object: 'list',
          data: [
            {
              id: modelName,
              object: 'model',
              created,
              owned_by: 'vllm',
              root: modelName,
              parent: null,
              max_model_len: cfg.maxModelLen,
              // Not in vLLM: tells a client this is the simulator running `speed`× faster than
              // simulated time, so it can report latencies in simulated time.
              inflab_sim_speed: speed,
              permission: [
                {
                  id: `modelperm-${created}`,
                  object: 'model_permission',
                  created,
                  allow_create_engine: false,
                  allow_sampling: true,
                  allow_logprobs: true,
                  allow_search_indices: false,
                  allow_view: true,
                  allow_fine_tuning: false,
                  organization: '*',
                  group: null,
                  is_blocking: false,
                },
              ],
            },
          ],
        }),
      'POST /tokenize': async () => {
        const b = parse(tokenizeBody, await jsonBody(req));
        checkModel(b.model);
        const text =
          'prompt' in b && typeof b.prompt === 'string'
            ? b.prompt
            : chatPrompt(
                (b as { messages: { role: string; content?: string | null | { type: string; text?: string }[] }[] })
                  .messages,
              );
        const tokens = tokenize(text, cfg.vocab);
        sendJson(req, res, 200, { count: tokens.length, max_model_len: cfg.maxModelLen, tokens, token_strs: null });
      },
      'POST /detokenize': async () => {
        const b = parse(detokenizeBody, await jsonBody(req));
        checkModel(b.model);
        const bad = b.tokens.find((t) => t >= cfg.vocab);
        if (bad !== undefined)
          throw new HttpError(
            400,
            `Token id ${bad} is out of vocabulary (vocab_size ${cfg.vocab})`,
            'BadRequestError',
            'tokens',
          );
        sendJson(req, res, 200, { prompt: detokenize(b.tokens) });
      },
      'POST /v1/completions': async () => {
        const b = parse(completionBody, await jsonBody(req));
        checkModel(b.model);
        const ids = toIds(b.prompt);
        const maxTokens = checkLength(ids.length, b.max_tokens ?? 16);
        await generate(req, res, 'completion', b, ids, maxTokens);
      },
      'POST /v1/chat/completions': async () => {
        const b = parse(chatBody, await jsonBody(req));
        checkModel(b.model);
        const ids = tokenize(chatPrompt(b.messages), cfg.vocab);
        const maxTokens = checkLength(ids.length, b.max_completion_tokens ?? b.max_tokens);
        await generate(req, res, 'chat', b, ids, maxTokens);
      },
    };
    const fn = routes[route];
    if (fn) return fn();
    const known = Object.keys(routes).some((k) => k.endsWith(` ${url.pathname}`));
    req.resume();
    if (known) sendJson(req, res, 405, { detail: 'Method Not Allowed' });
    else sendJson(req, res, 404, { detail: 'Not Found' });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: opts.port ?? 0, host, backlog: 4096 }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  log?.startup(cfg, modelName, host, port);
  const url = `http://${host}:${port}`;

  return {
    url,
    port,
    host,
    model: modelName,
    engine,
    metricsText: () => renderMetrics(engine, metrics, modelName),
    async close() {
      if (closing) return;
      closing = true;
      if (timer) clearTimeout(timer);
      wake?.();
      if (statsTimer) clearInterval(statsTimer);
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      logFile?.close();
    },
  };
}
