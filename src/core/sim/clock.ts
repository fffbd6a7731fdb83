/**
 * The simulator's real-time loop: the engine against the wall clock, and what each step's tokens
 * mean for each response (SSE chunk text, or a non-streamed response's JSON). It runs on the HTTP
 * server's thread (`inThreadClock`, the default) or in a worker thread of its own (clockWorker.ts,
 * SimServerOptions.clock 'worker') so that the HTTP side's work (parsing requests, its garbage
 * collections) cannot stall the schedule. Either way the HTTP side (server.ts) gets one message
 * per step: the step's due time, and every response's bytes for that step in one buffer, which it
 * writes to the sockets.
 *
 * Steps run back to back on an absolute schedule: step k's tokens leave at t0 + end_k / speed.
 * Host work does not stretch the simulated steps: a step that leaves a little late is followed by
 * steps that catch up, so the schedule does not drift. The engine's clock jumps to the wall clock
 * when it was idle (a request arrives at an idle engine), and after a host stall (a step more than
 * two steps' wall time late, and over 2 ms: the thread was not scheduled), as a real engine's GPU
 * waits for a stalled host instead of bursting the backlog afterwards.
 *
 * Times between the threads are wallMs(): performance.now() has a time origin per thread.
 */
import type { Setup } from '../engine/types';
import {
  createEngine,
  type EngineConfig,
  type EngineCounters,
  type EngineOptions,
  type SimRequest,
  type SpecCounters,
} from './engine';
import { E2E_BUCKETS, ITL_BUCKETS, SimMetrics, TTFT_BUCKETS, type Histogram } from './prom';
import { idToChar } from './tokenizer';

/**
 * Ms on one clock for every thread of the process: performance.now() from this thread's time
 * origin. (process.hrtime is one clock too, but it can run at another rate than performance.now()
 * on some hosts, and the HTTP side measures with performance.now().)
 */
export const wallMs = () => performance.timeOrigin + performance.now();

export interface ClockInit {
  setup: Setup;
  engine?: Omit<EngineOptions, 'setup'>;
  speed: number;
  modelName: string;
  /** wallMs() at the server's start: simulated time 0. */
  t0: number;
}

/** A new request, with what its response's bytes are made of. */
export interface ClockAdd {
  type: 'add';
  /** The HTTP side's number for the response. */
  rid: number;
  id: string;
  kind: 'completion' | 'chat';
  stream: boolean;
  includeUsage: boolean;
  continuous: boolean;
  createdAt: number;
  prompt: Uint32Array;
  maxTokens: number;
  minTokens: number;
  ignoreEos: boolean;
  /** wallMs() when the request arrived. */
  arrival: number;
}

export type ToClock = ClockAdd | { type: 'abort'; rid: number };

/** Response flags in a StepBatch. */
export const ENDS_STREAM = 1;
export const ENDS_JSON = 2;

/** One step's output for the HTTP side, in the order the engine gave the tokens (a stable order: see `offs`). */
export interface StepBatch {
  type: 'step';
  /** wallMs() the step was due. */
  due: number;
  /** wallMs() the clock handed the batch over. */
  sent: number;
  /** Simulated seconds of the step. */
  duration: number;
  tokens: number;
  n: number;
  rids: Int32Array;
  /** 0: more to come; ENDS_STREAM: the response ends with these bytes; ENDS_JSON: they are the whole JSON body. */
  ends: Uint8Array;
  /**
   * Four per response, into `bytes`: [frame start, payload start, payload end, frame end]. A stream's
   * payload (its SSE text) is framed as an HTTP/1.1 chunk (what res.write would send for it); a
   * JSON body or an empty payload is not (frame = payload).
   */
  offs: Int32Array;
  bytes: Uint8Array;
  /** The engine's counters and gauges and the metrics after the step (packState). */
  state: Float64Array;
}

export type FromClock =
  { type: 'ready'; cfg: EngineConfig; state: Float64Array } | StepBatch | { type: 'state'; state: Float64Array };

// ---------------------------------------------------------------- the state mirror

const COUNTERS: (keyof EngineCounters)[] = [
  'prefixQueries',
  'prefixHits',
  'preemptions',
  'promptTokens',
  'generationTokens',
  'finished',
  'steps',
  'busyS',
];
const FINISHED = ['length', 'stop', 'abort'] as const;
const HISTS = ['ttft', 'e2e', 'itl'] as const;
const STATE_LEN =
  COUNTERS.length + 4 + FINISHED.length + 6 + TTFT_BUCKETS.length + E2E_BUCKETS.length + ITL_BUCKETS.length;

/** What the HTTP side knows of the engine: its counters and gauges as of the last step it was sent. */
export interface EngineView {
  readonly cfg: EngineConfig;
  readonly counters: EngineCounters;
  readonly numRunning: number;
  readonly waiting: number;
  readonly kvUsage: number;
  readonly rollingHitRate: number;
  /** Speculative decoding's counters, when the engine drafts. */
  readonly spec?: SpecCounters;
}

interface Gauges {
  counters: EngineCounters;
  numRunning: number;
  waiting: number;
  kvUsage: number;
  rollingHitRate: number;
  spec?: SpecCounters;
}

function packState(e: Gauges, m: SimMetrics): Float64Array {
  const spec = e.spec?.acceptedPerPos.length ? e.spec : undefined;
  const a = new Float64Array(STATE_LEN + (spec ? 3 + spec.acceptedPerPos.length : 0));
  let i = 0;
  const c = e.counters;
  for (const k of COUNTERS) a[i++] = c[k];
  a[i++] = e.numRunning;
  a[i++] = e.waiting;
  a[i++] = e.kvUsage;
  a[i++] = e.rollingHitRate;
  for (const k of FINISHED) a[i++] = m.finished[k] ?? 0;
  for (const h of HISTS) {
    const x: Histogram = m[h];
    a[i++] = x.sum;
    a[i++] = x.count;
    for (let j = 0; j < x.counts.length; j++) a[i++] = x.counts[j];
  }
  if (spec) {
    a[i++] = spec.drafts;
    a[i++] = spec.draftTokens;
    a[i++] = spec.acceptedTokens;
    for (const v of spec.acceptedPerPos) a[i++] = v;
  }
  return a;
}

/** Copy a packed state into the HTTP side's view and metrics (its lateness is its own). */
export function unpackState(a: Float64Array, view: Gauges, m: SimMetrics) {
  let i = 0;
  for (const k of COUNTERS) view.counters[k] = a[i++];
  view.numRunning = a[i++];
  view.waiting = a[i++];
  view.kvUsage = a[i++];
  view.rollingHitRate = a[i++];
  for (const k of FINISHED) m.finished[k] = a[i++];
  for (const h of HISTS) {
    const x: Histogram = m[h];
    x.sum = a[i++];
    x.count = a[i++];
    for (let j = 0; j < x.counts.length; j++) x.counts[j] = a[i++];
  }
  const sp = view.spec;
  if (sp && a.length > i) {
    sp.drafts = a[i++];
    sp.draftTokens = a[i++];
    sp.acceptedTokens = a[i++];
    for (let j = 0; j < sp.acceptedPerPos.length; j++) sp.acceptedPerPos[j] = a[i++];
  }
}

/** A mirror to unpack into: what SimServer.engine is. */
export function emptyView(cfg: EngineConfig): EngineView & Gauges {
  const counters = Object.fromEntries(COUNTERS.map((k) => [k, 0])) as unknown as EngineCounters;
  const k = cfg.speculative?.k;
  const spec = k
    ? { drafts: 0, draftTokens: 0, acceptedTokens: 0, acceptedPerPos: new Array<number>(k).fill(0) }
    : undefined;
  return { cfg, counters, numRunning: 0, waiting: 0, kvUsage: 0, rollingHitRate: 0, ...(spec ? { spec } : {}) };
}

// ---------------------------------------------------------------- responses

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

/**
 * A response in flight, on the clock's side: `prepare` collects what a step's tokens mean for it
 * and `seal` builds the text (SSE, or the final JSON) before the step is due; `take` hands that text
 * over at the step's time (one write, or the end, per response per step). A step that yields several
 * tokens of one request (speculative decoding: the accepted drafts and the bonus token) sends them as
 * one chunk, as vLLM does (its output processor streams a step's new_token_ids as one delta).
 */
class Response {
  /** The last token (or the drop) is prepared: the next take ends the response. */
  ended = false;
  /** Aborted by the client: nothing more is sent. */
  closed = false;
  /** Already in this step's list of responses to write. */
  inStep = false;
  private out = '';
  private text = '';
  /** This step's tokens (their text) and whether the request finished in it. */
  private stepText = '';
  private stepTokens = 0;
  private stepLast = 0;
  private stepFinished = false;
  private stepReq: SimRequest | undefined;
  private roleSent = false;
  private readonly tpl: [string, string] | undefined;
  constructor(
    readonly a: ClockAdd,
    private readonly modelName: string,
  ) {
    const { id, createdAt, kind } = a;
    const object = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    // An ordinary content chunk (not the last, no per-chunk usage) is a template around the piece:
    // the same bytes JSON.stringify gives for the object below, without building it per token.
    this.tpl =
      a.stream && !(a.includeUsage && a.continuous)
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
  }
  private sse(obj: unknown) {
    this.out += `data: ${JSON.stringify(obj)}\n\n`;
  }
  private usage(r: SimRequest) {
    return {
      prompt_tokens: r.numPrompt,
      total_tokens: r.numPrompt + r.output.length,
      completion_tokens: r.output.length,
      prompt_tokens_details: { cached_tokens: r.cachedTokens },
    };
  }
  /** A token of this step (or, with token −1, the request's drop). */
  prepare(token: number, finished: boolean, r: SimRequest) {
    if (this.closed || this.ended) return;
    this.stepReq = r;
    if (token >= 0) {
      this.stepText += idToChar(token);
      this.stepTokens++;
      this.stepLast = token;
    }
    if (finished) this.stepFinished = true;
  }
  /** This step's text, built once from every token it gave the request. */
  seal() {
    const r = this.stepReq;
    if (!r || this.closed || this.ended) return;
    const finished = this.stepFinished;
    const pieces = this.stepText;
    const tokens = this.stepTokens;
    this.stepReq = undefined;
    this.stepText = '';
    this.stepTokens = 0;
    this.stepFinished = false;
    const { id, createdAt, kind, includeUsage, continuous } = this.a;
    const model = this.modelName;
    const object = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    const finishReason = r.finishReason === 'abort' ? 'abort' : (r.finishReason ?? null);
    if (this.a.stream) {
      if (tokens) {
        if (kind === 'chat' && !this.roleSent) {
          this.roleSent = true;
          this.sse({
            id,
            object,
            created: createdAt,
            model,
            choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
            usage: includeUsage && continuous ? this.usage(r) : null,
          });
        }
        if (!finished && this.tpl)
          this.out += this.tpl[0] + (tokens === 1 ? pieceJsonOf(this.stepLast) : JSON.stringify(pieces)) + this.tpl[1];
        else {
          const fr = finished ? finishReason : null;
          const u = includeUsage && continuous ? this.usage(r) : null;
          if (kind === 'chat')
            this.sse({
              id,
              object,
              created: createdAt,
              model,
              choices: [
                {
                  index: 0,
                  delta: { content: pieces },
                  logprobs: null,
                  finish_reason: fr,
                  ...(finished ? { stop_reason: null } : {}),
                },
              ],
              usage: u,
            });
          else
            this.sse({
              id,
              object,
              created: createdAt,
              model,
              choices: [{ index: 0, text: pieces, logprobs: null, finish_reason: fr, stop_reason: null }],
              usage: u,
            });
        }
      }
      if (finished) {
        if (includeUsage) this.sse({ id, object, created: createdAt, model, choices: [], usage: this.usage(r) });
        this.out += 'data: [DONE]\n\n';
      }
    } else {
      this.text += pieces;
      if (finished) {
        const text = this.text;
        const choice =
          kind === 'chat'
            ? {
                index: 0,
                message: { role: 'assistant', content: text, refusal: null, tool_calls: [], reasoning_content: null },
                logprobs: null,
                finish_reason: finishReason,
                stop_reason: null,
              }
            : { index: 0, text, logprobs: null, finish_reason: finishReason, stop_reason: null, prompt_logprobs: null };
        this.out = JSON.stringify({
          id,
          object: kind === 'chat' ? 'chat.completion' : 'text_completion',
          created: createdAt,
          model,
          choices: [choice],
          usage: this.usage(r),
          prompt_logprobs: null,
        });
      }
    }
    if (finished) this.ended = true;
  }
  /** The prepared text and how it ends the response (0, ENDS_STREAM, ENDS_JSON). */
  take(): [string, number] {
    const out = this.out;
    this.out = '';
    this.inStep = false;
    return [out, this.ended ? (this.a.stream ? ENDS_STREAM : ENDS_JSON) : 0];
  }
}

// ---------------------------------------------------------------- the batch

const enc = new TextEncoder();
/** Room before a chunk's payload for its chunked-encoding header (up to 8 hex digits and CRLF). */
const FRAME_HEAD = 10;
const CRLF = 0x0d0a;

/**
 * One step's batch from the responses it touched: each response's text encoded once, and a stream's
 * framed as an HTTP/1.1 chunk (`<hex length>\r\n<payload>\r\n`, the bytes node:http's res.write
 * puts on the wire for it) so the HTTP side can hand it to the socket as it is.
 */
function buildBatch(
  pending: Response[],
  byRid: Map<number, unknown>,
  due: number,
  duration: number,
  tokens: number,
  state: Float64Array,
): StepBatch {
  const n = pending.length;
  const rids = new Int32Array(n);
  const ends = new Uint8Array(n);
  const offs = new Int32Array(4 * n);
  const texts: string[] = new Array(n);
  let cap = 0;
  for (let k = 0; k < n; k++) {
    const s = pending[k];
    const [text, end] = s.take();
    rids[k] = s.a.rid;
    ends[k] = end;
    texts[k] = text;
    cap += text.length * 3 + FRAME_HEAD + 2;
    if (end) byRid.delete(s.a.rid);
  }
  const bytes = new Uint8Array(cap);
  const view = new DataView(bytes.buffer);
  let off = 0;
  for (let k = 0; k < n; k++) {
    const framed = ends[k] !== ENDS_JSON && texts[k].length > 0;
    const p0 = framed ? off + FRAME_HEAD : off;
    const len = enc.encodeInto(texts[k], bytes.subarray(p0)).written;
    let f0 = p0;
    let f1 = p0 + len;
    if (framed) {
      const head = len.toString(16);
      f0 = p0 - head.length - 2;
      for (let i = 0; i < head.length; i++) bytes[f0 + i] = head.charCodeAt(i);
      view.setUint16(p0 - 2, CRLF);
      view.setUint16(f1, CRLF);
      f1 += 2;
    }
    offs[4 * k] = f0;
    offs[4 * k + 1] = p0;
    offs[4 * k + 2] = p0 + len;
    offs[4 * k + 3] = f1;
    off = f1;
  }
  return { type: 'step', due, sent: 0, duration, tokens, n, rids, ends, offs, bytes, state };
}

// ---------------------------------------------------------------- the loop

/** How the loop waits for a step's due time (hrMs); resolves early once `closed` is set. */
export type Sleeper = (due: number) => Promise<void> | void;

export interface SimClockHandle {
  cfg: EngineConfig;
  onMessage(m: ToClock): void;
  close(): void;
}

/**
 * The loop, wherever it runs: `post` hands each message to the HTTP side (with the buffers to
 * transfer), `sleep` waits for a due time. Messages from the HTTP side go to `onMessage`.
 */
export function startClock(
  init: ClockInit,
  post: (m: FromClock, transfer?: ArrayBuffer[]) => void,
  sleep: Sleeper,
): SimClockHandle {
  const { speed, t0 } = init;
  const engine = createEngine({ ...(init.engine ?? {}), setup: init.setup });
  const metrics = new SimMetrics();
  const byRid = new Map<number, { r: Response; id: string }>();
  const vnow = () => ((wallMs() - t0) / 1000) * speed;
  let looping = false;
  let closing = false;
  const yieldTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
  const state = () => packState(engine, metrics);

  const pending: Response[] = [];
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
        // Build every response's text for the step before it is due.
        pending.length = 0;
        for (const ev of res.tokens) {
          const s = ev.req.tag as Response | undefined;
          if (!s) continue;
          s.prepare(ev.token, ev.finished, ev.req);
          if (!s.inStep) pending.push(s);
          s.inStep = true;
        }
        for (const r of res.dropped) {
          const s = r.tag as Response | undefined;
          if (!s) continue;
          s.prepare(-1, true, r);
          if (!s.inStep) pending.push(s);
          s.inStep = true;
        }
        for (const s of pending) s.seal();
        const due = t0 + (res.end / speed) * 1000;
        // Everything the HTTP side needs is built before the step is due (the metrics, the state
        // after the step, every response's bytes, framed for the wire): after the wait, only the hand-over.
        // A request's tokens of one step are one output (speculative decoding gives several): one
        // TTFT or inter-token observation per output, as vLLM's IterationStats records them.
        let prev: SimRequest | undefined;
        for (const ev of res.tokens) {
          const r = ev.req;
          if (r !== prev) {
            if (r.firstTokenTime === r.lastTokenTime) metrics.ttft.observe(r.firstTokenTime - r.arrival);
            else metrics.itl.observe(r.lastTokenTime - r.prevTokenTime);
          }
          prev = r;
          if (ev.finished) {
            metrics.e2e.observe(r.finishTime - r.arrival);
            metrics.finished[r.finishReason ?? 'stop'] = (metrics.finished[r.finishReason ?? 'stop'] ?? 0) + 1;
          }
        }
        const batch = buildBatch(pending, byRid, due, res.duration, res.tokens.length, state());
        pending.length = 0;
        await sleep(due);
        if (closing) break;
        const sent = wallMs();
        batch.sent = sent;
        post(batch, [
          batch.rids.buffer,
          batch.ends.buffer,
          batch.offs.buffer,
          batch.bytes.buffer,
          batch.state.buffer,
        ] as ArrayBuffer[]);
        stalled = sent - due > Math.max(2, (2000 * res.duration) / speed);
        // Let requests that arrived meanwhile (and aborts) in before the next step is scheduled.
        await yieldTurn();
      }
    } finally {
      looping = false;
      if (!closing) {
        const st = state();
        post({ type: 'state', state: st }, [st.buffer as ArrayBuffer]);
      }
    }
  };

  const handle: SimClockHandle = {
    cfg: engine.cfg,
    onMessage(m) {
      if (closing) return;
      if (m.type === 'add') {
        const resp = new Response(m, init.modelName);
        const sim = engine.add({
          id: m.id,
          prompt: m.prompt,
          maxTokens: m.maxTokens,
          minTokens: m.minTokens,
          ignoreEos: m.ignoreEos,
          arrival: ((m.arrival - t0) / 1000) * speed,
        });
        sim.tag = resp;
        byRid.set(m.rid, { r: resp, id: m.id });
        if (!looping) void loop();
      } else if (m.type === 'abort') {
        const x = byRid.get(m.rid);
        if (!x) return;
        byRid.delete(m.rid);
        x.r.closed = true;
        if (engine.abort(x.id)) metrics.finished.abort++;
        if (!looping) {
          const st = state();
          post({ type: 'state', state: st }, [st.buffer as ArrayBuffer]);
        }
      }
    },
    close() {
      closing = true;
    },
  };
  const st = state();
  post({ type: 'ready', cfg: engine.cfg, state: st }, [st.buffer as ArrayBuffer]);
  return handle;
}

/**
 * The loop on the calling thread (no worker): waits with a timer to about a millisecond before the
 * due time, then turns of the event loop (so I/O is still served while it waits). `poll` (called by
 * the HTTP side between requests) ends the wait once the due time has passed, so a burst of
 * arriving requests handled in one turn of the event loop does not hold the step back until its end.
 */
export function inThreadClock(init: ClockInit, post: (m: FromClock) => void): SimClockHandle & { poll(): void } {
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let wake: (() => void) | undefined;
  let dueAt = Infinity;
  /** Which wait a pending timer or immediate belongs to (a later wait ignores an earlier one's). */
  let gen = 0;
  const done = () => {
    const w = wake;
    if (!w) return;
    wake = undefined;
    dueAt = Infinity;
    if (timer) clearTimeout(timer);
    timer = undefined;
    w();
  };
  const sleep = (due: number) =>
    new Promise<void>((resolve) => {
      const mine = ++gen;
      wake = resolve;
      dueAt = due;
      const tick = () => {
        if (mine !== gen) return;
        const left = due - wallMs();
        if (closed || left <= 0) done();
        else if (left > 2) timer = setTimeout(tick, left - 1.5);
        else setImmediate(tick);
      };
      tick();
    });
  const h = startClock(init, post, sleep);
  return {
    cfg: h.cfg,
    onMessage: h.onMessage,
    poll() {
      if (wake && wallMs() >= dueAt) done();
    },
    close() {
      closed = true;
      h.close();
      done();
    },
  };
}
