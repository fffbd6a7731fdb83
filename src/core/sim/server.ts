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
import { fileURLToPath } from 'node:url';
import { MessageChannel, receiveMessageOnPort, type Worker } from 'node:worker_threads';
import { startWorker } from '../host/worker';
import * as fs from 'node:fs';
import {
  emptyView,
  ENDS_JSON,
  ENDS_STREAM,
  wallMs,
  inThreadClock,
  unpackState,
  type ClockInit,
  type EngineView,
  type FromClock,
  type StepBatch,
  type ToClock,
} from './clock';
import type { EngineConfig, EngineOptions } from './engine';
import { fileLogSink, VllmLog } from './log';
import { renderMetrics, SimMetrics } from './prom';
import { chatPrompt, detokenize, tokenize } from './tokenizer';

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
   * time (performance.now(), ms) the step was due to end, when its writes started, when the first
   * response's bytes and the last were handed to the kernel, and whether it was so late that the
   * engine's clock restarts from the wall clock (a host stall). firstMs − dueMs is the step's
   * lateness as /metrics counts it (inflab:sim_step_lateness_*).
   */
  onStepWritten?: (step: {
    dueMs: number;
    startMs: number;
    firstMs: number;
    endMs: number;
    tokens: number;
    stalled: boolean;
    /** When the clock handed the step over (its own lateness is clockMs − dueMs). */
    clockMs: number;
    /** Each chunk's lateness (handed to its socket − due, ms), in the order written; valid during the call. */
    chunkLateMs: Float64Array;
    /**
     * Per stream that had a chunk in the step before: this chunk's lateness − that one's, the error
     * the simulator adds to the inter-token gap a client measures (ms); valid during the call.
     */
    itlErrorMs: Float64Array;
  }) => void;
  /**
   * Where the real-time loop runs: 'here' (default: this thread, which also writes the sockets) or
   * 'worker' (a thread of its own, so the HTTP side's request handling and garbage collections
   * cannot stall the schedule; this thread when a worker cannot start). Measured by `npm run perf`
   * (section 2): the sockets' writes stay on this thread and are most of its time, so the worker
   * takes only the engine and the text off it; which tail is lower depends on the machine.
   */
  clock?: 'worker' | 'here';
}

export interface SimServer {
  url: string;
  port: number;
  host: string;
  model: string;
  /** The engine's counters and gauges, as of the last step the HTTP side was sent. */
  engine: EngineView;
  /** Where the real-time loop runs ('worker' or 'here'). */
  clock: 'worker' | 'here';
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

/** A response on the HTTP side: written by the step batches of the clock. */
interface Live {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  /**
   * A stream's socket, when its chunks may be written to it directly: the headers are on it and the
   * response is chunked (not an HTTP/1.0 client's, nor a pipelined request's still waiting for its turn).
   */
  socket: import('node:net').Socket | undefined;
  /** Ended by us, or the client went away. */
  closed: boolean;
  /** The lateness of its last chunk (wall ms), for onStepWritten; NaN before the first. */
  late: number;
}

/** The clock thread's script: the bundle beside this one (dist/sim-worker.js), or the source. */
export function clockScript(): string | undefined {
  for (const rel of ['./sim-worker.js', './clockWorker.ts']) {
    try {
      const p = fileURLToPath(new URL(rel, import.meta.url));
      if (fs.existsSync(p)) return p;
    } catch {
      // not a file URL: no worker
    }
  }
  return undefined;
}

export interface ClockLink {
  cfg: EngineConfig;
  kind: 'worker' | 'here';
  send(m: ToClock, transfer?: ArrayBuffer[]): void;
  /** A step's writes are done (the clock thread waits for them before it hands over the next). */
  written(): void;
  /** Between requests: if a step is due (or handed over and waiting in the queue), write it now. */
  poll(): void;
  close(): Promise<void>;
}

/** The clock in a worker thread; rejects when the thread cannot start. (Exported for tests.) */
export function workerClock(script: string, init: ClockInit, onMessage: (m: FromClock) => void): Promise<ClockLink> {
  return new Promise((resolve, reject) => {
    // [0]: close; [1]: steps this side has written; [2]: messages the clock has posted (clockWorker.ts).
    const ctl = new Int32Array(new SharedArrayBuffer(12));
    // The clock's messages come on a channel of their own, which this side can also read synchronously.
    const { port1: from, port2: out } = new MessageChannel();
    let got = 0;
    let w: Worker;
    try {
      w = startWorker(script, { init, ctl, out }, [out]);
    } catch (e) {
      reject(e as Error);
      return;
    }
    let ready = false;
    from.on('message', (m: FromClock) => {
      got++;
      if (!ready && m.type === 'ready') {
        ready = true;
        // The HTTP server keeps the process alive; the clock thread alone does not.
        w.unref();
        from.unref();
        resolve({
          cfg: m.cfg,
          kind: 'worker',
          send: (x, transfer) => w.postMessage(x, transfer ?? []),
          written: () => {
            Atomics.add(ctl, 1, 1);
            Atomics.notify(ctl, 1);
          },
          poll: () => {
            while (Atomics.load(ctl, 2) > got) {
              const r = receiveMessageOnPort(from);
              if (!r) break;
              got++;
              onMessage(r.message as FromClock);
            }
          },
          close: async () => {
            Atomics.store(ctl, 0, 1);
            Atomics.notify(ctl, 0);
            Atomics.notify(ctl, 1);
            await w.terminate();
            from.close();
          },
        });
      }
      onMessage(m);
    });
    w.once('error', (e) => {
      if (!ready) reject(e);
    });
    w.once('exit', (code) => {
      if (!ready) reject(new Error(`the clock thread exited (${code}) before it started`));
    });
  });
}

export async function startSimServer(opts: SimServerOptions = {}): Promise<SimServer> {
  const setup = opts.setup ?? defaultSimSetup();
  const speed = opts.speed && opts.speed > 0 ? opts.speed : 1;
  const host = opts.host ?? '127.0.0.1';
  const metrics = new SimMetrics();
  const created = Math.floor(Date.now() / 1000);
  const t0 = wallMs();
  const perfOffset = performance.timeOrigin;

  // ---- the clock: the engine against the wall clock (clock.ts), in a thread of its own ----
  const live = new Map<number, Live>();
  let view: ReturnType<typeof emptyView> | undefined;
  // Per chunk written, for onStepWritten only: its lateness and its stream's inter-token error.
  let chunkLate = new Float64Array(1024);
  let itlError = new Float64Array(1024);
  const onStep = (b: StepBatch) => {
    unpackState(b.state, view!, metrics);
    const due = b.due - perfOffset;
    const start = performance.now();
    const buf = Buffer.from(b.bytes.buffer, b.bytes.byteOffset, b.bytes.byteLength);
    const { rids, ends, offs } = b;
    const measure = opts.onStepWritten !== undefined;
    if (measure && chunkLate.length < b.n) {
      chunkLate = new Float64Array(2 * b.n);
      itlError = new Float64Array(2 * b.n);
    }
    let chunks = 0;
    let gaps = 0;
    let first = NaN;
    for (let k = 0; k < b.n; k++) {
      const l = live.get(rids[k]);
      if (!l || l.closed) continue;
      const f0 = offs[4 * k];
      const p0 = offs[4 * k + 1];
      const p1 = offs[4 * k + 2];
      const f1 = offs[4 * k + 3];
      const end = ends[k];
      if (end === ENDS_JSON) {
        l.closed = true;
        live.delete(rids[k]);
        l.res.writeHead(200, { 'content-type': 'application/json', 'content-length': p1 - p0 });
        l.res.end(buf.subarray(p0, p1));
        accessLog(l.req, 200);
      } else {
        // A stream's chunk goes straight to its socket, framed (the bytes res.write would send),
        // in one write: res.write would cork the socket until the next tick, after every response of the step.
        if (f1 > f0) {
          if (l.socket) l.socket.write(buf.subarray(f0, f1));
          else l.res.write(buf.subarray(p0, p1));
        }
        if (end === ENDS_STREAM) {
          l.closed = true;
          live.delete(rids[k]);
          l.res.end();
        }
      }
      if (first !== first) first = performance.now();
      if (measure && f1 > f0) {
        // (A response without its own socket's chunk leaves at the next tick: not timed here.)
        const late = performance.now() - due;
        chunkLate[chunks++] = late;
        if (l.late === l.late) itlError[gaps++] = late - l.late;
        l.late = late;
      }
    }
    const endMs = performance.now();
    clock!.written();
    // The step's lateness: when its first response's bytes were handed to the kernel. The others
    // follow one socket after another in the engine's order, the same from step to step, so each
    // stream's offset in that order is constant and not in the gaps between its tokens
    // (itlErrorMs measures what is).
    if (first !== first) first = endMs;
    metrics.lateness.observe(first - due);
    if (opts.onStepWritten)
      opts.onStepWritten({
        dueMs: due,
        startMs: start,
        firstMs: first,
        endMs,
        tokens: b.tokens,
        stalled: endMs - due > Math.max(2, (2000 * b.duration) / speed),
        clockMs: b.sent - perfOffset,
        chunkLateMs: chunkLate.subarray(0, chunks),
        itlErrorMs: itlError.subarray(0, gaps),
      });
  };
  const onClock = (m: FromClock) => {
    // The ready message is the first, in either kind of clock.
    if (m.type === 'ready') view = emptyView(m.cfg);
    if (m.type === 'step') onStep(m);
    else unpackState(m.state, view!, metrics);
  };
  const init: ClockInit = { setup, engine: opts.engine, speed, modelName: '', t0 };
  init.modelName = opts.servedModelName ?? setup.model.id;
  let clock: ClockLink | undefined;
  const script = opts.clock === 'worker' ? clockScript() : undefined;
  if (script) clock = await workerClock(script, init, onClock).catch(() => undefined);
  if (!clock) {
    const h = inThreadClock(init, onClock);
    clock = {
      cfg: h.cfg,
      kind: 'here',
      send: (m) => h.onMessage(m),
      written: () => undefined,
      poll: () => h.poll(),
      close: async () => h.close(),
    };
  }
  const engine = view!;
  const cfg = clock.cfg;
  const modelName = init.modelName;
  const acceptedNames = new Set([modelName, setup.model.id, setup.model.name]);
  const poolTokens = cfg.numGpuBlocks * cfg.blockSize;
  let closing = false;
  let nextRid = 1;

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
    // Requests that arrive together are handled one after another in one turn of the event loop:
    // a step that falls due meanwhile is written between them, not after the last.
    clock!.poll();
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
    clock!.poll();
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
    const arrival = wallMs();
    const id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomBytes(16).toString('hex')}`;
    const stream = !!body.stream;
    if (stream) {
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
      });
      res.flushHeaders();
      accessLog(req, 200);
    }
    const rid = nextRid++;
    // After flushHeaders the header is on the socket, unless the socket is not the response's yet.
    const socket =
      stream && res.chunkedEncoding && res.socket === req.socket && !res.writableLength
        ? (res.socket ?? undefined)
        : undefined;
    const l: Live = { req, res, socket, closed: false, late: NaN };
    live.set(rid, l);
    const prompt = Uint32Array.from(ids);
    clock!.send(
      {
        type: 'add',
        rid,
        id,
        kind,
        stream,
        includeUsage: !!body.stream_options?.include_usage,
        continuous: !!body.stream_options?.continuous_usage_stats,
        createdAt: Math.floor(Date.now() / 1000),
        prompt,
        maxTokens,
        minTokens: body.min_tokens ?? 0,
        ignoreEos: !!body.ignore_eos,
        arrival,
      },
      [prompt.buffer],
    );
    res.on('close', () => {
      if (l.closed) return;
      l.closed = true;
      live.delete(rid);
      if (!closing) clock!.send({ type: 'abort', rid });
    });
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
      // vLLM v0.11's shapes (vllm/entrypoints/openai/protocol.py at ec3b890): TokenizeCompletionRequest
      // {model, prompt, add_special_tokens} or TokenizeChatRequest {model, messages, …}; TokenizeResponse
      // {count, max_model_len, tokens, token_strs}. The bench counts dataset text with it.
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
    clock: clock.kind,
    metricsText: () => renderMetrics(engine, metrics, modelName),
    async close() {
      if (closing) return;
      closing = true;
      const stopped = clock!.close();
      if (statsTimer) clearInterval(statsTimer);
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      await stopped;
      logFile?.close();
    },
  };
}
