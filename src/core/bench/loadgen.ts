/**
 * Load shapes for one sweep point.
 *
 * - Closed loop: `concurrency` requests in flight, each refilled as one completes (fixes L).
 * - Open loop: arrivals at `rate` req/s, Poisson (burstiness 1) or gamma (shape = burstiness), with
 *   an optional concurrency cap (fixes λ). Latencies count from the *scheduled* send time; how late
 *   each request really left (dispatch lag) is reported.
 *
 * Warm-up requests run first at the point's load and are not recorded. Request bodies are built
 * before the measured window when the request count is known. The load generator samples its own
 * in-flight count on a timer (for Little's law) and the event loop's delay (the client's lag).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Loop } from '../facts/schema';
import type { Dispatcher } from 'undici';
import { buildBody, now, sendRequest, type ClientConfig, type RawResult, type RequestSpec } from './client';
import { distribution, type Dist, type RequestRecord } from './metrics';
import { interArrivals, type PlannedPrompt, type PromptSource, type SessionSource } from './prompts';
import { loadThreads, runPointThreads, ShardStartError } from './shards';

export interface PointLoad {
  loop: Loop;
  /** Closed loop: requests in flight. Open loop: an optional cap. */
  concurrency?: number;
  /** Open loop: requests per second. */
  rate?: number;
  /** Gamma shape of inter-arrival times; 1 = Poisson. */
  burstiness?: number;
  /** Requests in the point (or durationMs). */
  requests?: number;
  /** Issue new requests for this long, then wait for those in flight. */
  durationMs?: number;
  warmup?: number;
  outputTokens: number;
  /** Seed for the arrival process (open loop). */
  seed: number;
}

export interface LagStats {
  mean_ms: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

export interface PointRun {
  records: RequestRecord[];
  /** Point start → last request end, ms. */
  durationMs: number;
  /** performance.timeOrigin + performance.now() at the point's t = 0, to align with other clocks. */
  t0EpochMs: number;
  /** Time average of the sampled in-flight count over the point (a request counts from its write, as its E2E does). */
  observedInFlight: number;
  maxInFlight: number;
  /** Open loop: actual − scheduled send time. */
  dispatchLagMs?: Dist;
  /** The event loop's delay in the thread generating the load, during the point. */
  loopLag: LagStats;
  cancelled: boolean;
  /** What the warm-up requests (not recorded) made the server count: for the server-counter cross-check. */
  warmup: WarmupTotals;
}

export interface WarmupTotals {
  requests: number;
  /** Σ usage.prompt_tokens / completion_tokens of the warm-up requests that reported usage. */
  promptTokens: number;
  outputTokens: number;
  /** Warm-up requests that reached the server but reported no usage (their tokens are not known). */
  unknown: number;
}

export interface RunPointOptions {
  signal?: AbortSignal;
  /** Prefix for X-Request-Id. */
  requestIdPrefix?: string;
  /** Called after each measured request ends (progress). */
  onRequest?(done: number, total: number | undefined): void;
  /** In-flight sampling period, ms. */
  samplePeriodMs?: number;
  /** Load threads for a closed-loop point with a request count (default: see shards.ts; 1 = this thread). */
  threads?: number;
  /** The worker script for load threads (default: found beside this code). */
  workerScript?: string;
  /** First request id (and X-Request-Id number) of this share of a point split across threads. */
  idOffset?: number;
  warmIdOffset?: number;
}

const MAX_REQUESTS = 1_000_000;

export async function runPoint(
  dispatcher: Dispatcher,
  cfg: ClientConfig,
  load: PointLoad,
  prompts: PromptSource,
  opts: RunPointOptions = {},
): Promise<PointRun> {
  const signal = opts.signal;
  // A plan that holds a fixed number of requests (a trace's rows, a schedule's arrivals) runs them all, or `requests` of them.
  if (prompts.size !== undefined && Number.isFinite(prompts.size))
    load = { ...load, requests: Math.min(load.requests ?? prompts.size, prompts.size) };
  // Many streams: split the point across load threads (shards.ts), each with its own event loop.
  // Conversations are not split: a session's turns follow one another on one stream.
  if (load.loop === 'closed' && load.requests !== undefined && !prompts.session) {
    const threads = loadThreads(Math.max(1, load.concurrency ?? 1), opts.threads);
    if (threads > 1) {
      try {
        return await runPointThreads(threads, cfg, load, prompts, opts);
      } catch (e) {
        if (!(e instanceof ShardStartError)) throw e;
        // no worker thread available: run here
      }
    }
  }
  const prefix = opts.requestIdPrefix ?? 'inflab';
  const idOffset = opts.idOffset ?? 0;
  const warmIdOffset = opts.warmIdOffset ?? 0;
  const spec = (i: number, tag: 'w' | 'r', p: PlannedPrompt = drawPrompt(prompts, tag)): Prepared => {
    const outputTokens = p.outputTokens ?? load.outputTokens;
    return {
      prompt: [],
      outputTokens,
      requestId: `${prefix}-${tag}${i + (tag === 'w' ? warmIdOffset : idOffset)}`,
      body: buildBody(cfg, { prompt: p.prompt, outputTokens }),
      arrivalS: p.arrivalS,
      // Only a plan's requests carry their own lengths (fixed-length records stay as they were).
      ...(p.outputTokens !== undefined ? { requestedOutput: outputTokens } : {}),
      ...(p.inputTokens !== undefined ? { requestedInput: p.inputTokens } : {}),
    };
  };

  // Warm-up: at the point's concurrency, not recorded.
  const warm = Math.max(0, load.warmup ?? 0);
  const warmup: WarmupTotals = { requests: 0, promptTokens: 0, outputTokens: 0, unknown: 0 };
  if (warm && !signal?.aborted) {
    const par = Math.max(1, Math.min(warm, load.concurrency ?? 1));
    let next = 0;
    await Promise.all(
      Array.from({ length: par }, async () => {
        while (next < warm && !signal?.aborted) {
          const i = next++;
          const r = await sendRequest(dispatcher, cfg, spec(i, 'w'), signal);
          warmup.requests++;
          if (r.ok && r.promptTokens !== undefined && r.outputTokens !== undefined) {
            warmup.promptTokens += r.promptTokens;
            warmup.outputTokens += r.outputTokens;
          } else if (r.httpStatus) warmup.unknown++;
        }
      }),
    );
  }

  const total = load.requests;
  // Conversations are drawn as they go (which conversation a stream starts next depends on timing).
  const pre =
    total !== undefined && !prompts.session ? Array.from({ length: total }, (_, i) => spec(i, 'r')) : undefined;
  const bodyOf = (i: number) => (pre ? pre[i] : spec(i, 'r'));

  const records: RequestRecord[] = [];
  const LAG_RES_MS = 5;
  const lag = monitorEventLoopDelay({ resolution: LAG_RES_MS });
  lag.enable();
  const t0 = now();
  const t0EpochMs = performance.timeOrigin + t0;
  let inFlight = 0;
  let maxInFlight = 0;
  let sampleSum = 0;
  let sampleN = 0;
  const sampler = setInterval(() => {
    sampleSum += inFlight;
    sampleN++;
  }, opts.samplePeriodMs ?? 5);
  let doneCount = 0;
  const lags: number[] = [];

  const record = (id: number, scheduledAbs: number, r: RawResult, body: Prepared) => {
    const rec: RequestRecord = {
      id: id + idOffset,
      scheduledMs: scheduledAbs - t0,
      sentMs: r.sentAt - t0,
      chunkMs: r.chunkAt.map((t) => t - t0),
      endMs: r.endAt - t0,
      ok: r.ok,
    };
    if (body.requestedInput !== undefined) rec.requestedInput = body.requestedInput;
    if (body.requestedOutput !== undefined) rec.requestedOutput = body.requestedOutput;
    if (r.promptTokens !== undefined) rec.promptTokens = r.promptTokens;
    if (r.outputTokens !== undefined) rec.outputTokens = r.outputTokens;
    if (r.cachedTokens !== undefined) rec.cachedTokens = r.cachedTokens;
    if (r.errorKind) rec.errorKind = r.errorKind;
    if (r.errorMessage) rec.errorMessage = r.errorMessage;
    if (r.httpStatus !== undefined && r.httpStatus !== 200) rec.httpStatus = r.httpStatus;
    if (r.firstContentAt !== undefined) rec.firstContentMs = r.firstContentAt - t0;
    if (r.retries) {
      rec.retries = r.retries;
      if (r.retryError) rec.retryError = r.retryError;
    }
    records[id] = rec;
    doneCount++;
    opts.onRequest?.(doneCount, total);
  };
  // Issued (the open loop's cap counts these) and in flight: written to a connection and not yet
  // ended. A request counts in flight from the instant its E2E starts (the write, not the issue:
  // a wait for a connection is the client's), so λ·W and the observed L measure the same thing.
  let issuedNow = 0;
  const send = async (id: number, scheduledAbs: number, body: Prepared = bodyOf(id)) => {
    issuedNow++;
    let counted = false;
    const r = await sendRequest(dispatcher, cfg, body, signal, () => {
      counted = true;
      inFlight++;
      if (inFlight > maxInFlight) maxInFlight = inFlight;
    });
    if (counted) inFlight--;
    issuedNow--;
    record(id, scheduledAbs, r, body);
  };
  const limit = total ?? MAX_REQUESTS;
  const deadline = load.durationMs !== undefined ? t0 + load.durationMs : Infinity;

  try {
    if (load.loop === 'closed' && prompts.session) {
      // Multi-turn sessions: each stream holds one conversation at a time, its next turn sent one
      // think time after the previous answer ended; a finished conversation makes way for a new one.
      const c = Math.max(1, load.concurrency ?? 1);
      const thinkMs = (prompts.thinkS ?? 0) * 1000;
      let issued = 0;
      await Promise.all(
        Array.from({ length: c }, async () => {
          let conv: SessionSource | undefined;
          while (issued < limit && !signal?.aborted) {
            // The turn is reserved when the one before it ends: a conversation in its think time
            // keeps its place (as the virtual-time load does), so no new one takes it meanwhile.
            const id = issued++;
            if (!conv || conv.done) conv = prompts.session!();
            else if (thinkMs > 0) await sleep(thinkMs, signal);
            if (signal?.aborted) break;
            const t = now();
            if (t >= deadline) break;
            await send(id, t, spec(id, 'r', conv.next()));
          }
        }),
      );
    } else if (load.loop === 'closed') {
      const c = Math.max(1, load.concurrency ?? 1);
      let issued = 0;
      await Promise.all(
        Array.from({ length: c }, async () => {
          while (issued < limit && !signal?.aborted) {
            const t = now();
            if (t >= deadline) break;
            const id = issued++;
            await send(id, t);
          }
        }),
      );
    } else {
      const rate = load.rate!;
      const count = total ?? Math.min(MAX_REQUESTS, Math.ceil(((load.durationMs ?? 0) / 1000) * rate * 1.5) + 16);
      // A trace or a rate schedule sets each send time; else Poisson (or gamma) gaps at `rate`.
      const planned = pre?.length && pre[0].arrivalS !== undefined ? pre : undefined;
      const gaps = planned ? [] : interArrivals(load.seed, rate, count, load.burstiness ?? 1);
      const cap = load.concurrency ?? Infinity;
      const running = new Set<Promise<void>>();
      let slotFree: (() => void) | undefined;
      let at = t0;
      for (let i = 0; i < count && !signal?.aborted; i++) {
        at = planned ? t0 + (planned[i].arrivalS ?? 0) * 1000 : at + gaps[i] * 1000;
        if (at - t0 >= (load.durationMs ?? Infinity)) break;
        const wait = at - now();
        if (wait > 1) await sleep(wait - 1, signal);
        // Timers may fire a little early on the monotonic clock; yield (not spin) until the schedule.
        for (let k = 0; k < 10_000 && now() < at && !signal?.aborted; k++)
          await new Promise<void>((r) => setImmediate(r));
        if (signal?.aborted) break;
        while (issuedNow >= cap && !signal?.aborted) await new Promise<void>((res) => (slotFree = res));
        lags.push(now() - at);
        const p = send(i, at).then(() => {
          running.delete(p);
          const f = slotFree;
          slotFree = undefined;
          f?.();
        });
        running.add(p);
      }
      await Promise.all(running);
    }
  } finally {
    clearInterval(sampler);
    lag.disable();
  }
  const dense = records.filter(Boolean);
  const end = dense.reduce((m, r) => Math.max(m, r.endMs), 0);
  // The histogram records whole timer intervals; the lag is what exceeds the timer's period.
  const ns = (v: number) => (Number.isFinite(v) ? Math.max(0, v / 1e6 - LAG_RES_MS) : 0);
  return {
    records: dense,
    durationMs: end,
    t0EpochMs,
    observedInFlight: sampleN ? sampleSum / sampleN : NaN,
    maxInFlight,
    dispatchLagMs: load.loop === 'open' ? distribution(lags, [90, 99]) : undefined,
    loopLag: {
      mean_ms: ns(lag.mean),
      p50_ms: ns(lag.percentile(50)),
      p99_ms: ns(lag.percentile(99)),
      max_ms: ns(lag.max),
    },
    cancelled: !!signal?.aborted,
    warmup,
  };
}

/** A prepared request: its body built, and (trace, schedule) when the plan sends it. */
type Prepared = RequestSpec & { arrivalS?: number; requestedInput?: number; requestedOutput?: number };

/** The next prompt of a point: a warm-up's own when the plan keeps them apart, else the plan's (or the fixed-length source's). */
export function drawPrompt(prompts: PromptSource, tag: 'w' | 'r'): PlannedPrompt {
  if (tag === 'w' && prompts.warmup) return prompts.warmup();
  return prompts.request ? prompts.request() : { prompt: prompts.next() };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((res) => {
    if (signal?.aborted) return res();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      res();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
