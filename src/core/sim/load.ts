/**
 * A load generator in virtual time: the client side of a benchmark point run against a SimEngine
 * with no clock. Closed loop (`concurrency`: a new request leaves the moment one finishes, like
 * `vllm bench serve --max-concurrency`) or open loop (`rate`: Poisson arrivals, like
 * `--request-rate`). Prompts are random token ids from the point's seed (vLLM's random dataset), so
 * one seed reused across points regenerates the same prompts: the prefix-cache trap.
 */
import { MetricsAccumulator, type RequestRecord } from '../bench/metrics';
import type { SloSpec } from '../facts/stat';
import type { RequestPlanner, SessionCursor } from '../workload/plan';
import {
  generatedPromptHashes,
  type DecodeRun,
  type Engine,
  type EngineCounters,
  type SimRequest,
  type StepResult,
} from './engine';
import { expVariate, Mulberry32, mulberry32 } from './rng';

export interface LoadOptions {
  input: number;
  output: number;
  requests: number;
  /** Closed loop: requests in flight. */
  concurrency?: number;
  /** Open loop: Poisson arrival rate, requests/s (Infinity: all at once). */
  rate?: number;
  /** Seed of the prompt generator (and of open-loop arrivals). */
  seed: number;
  /** Default true (fixed output lengths, as a benchmark sets). */
  ignoreEos?: boolean;
  /**
   * The workload's requests (lengths, shared prefixes, a trace's arrivals): replaces the random
   * fixed-length prompts of `input`/`output`, which then only describe the mean.
   */
  plan?: RequestPlanner;
  /**
   * Summarize as the point runs (LoadRun.metrics) instead of keeping every output token's time in
   * `records`, which then stays empty: what a point of a real trace's size (10⁸ tokens) needs. The
   * metrics are the ones summarizeRecords gives for the records (exact below the sketch threshold).
   */
  metricsOnly?: boolean;
  /**
   * Visit every running request at every step, with token ids (the engine's reference path, and
   * what the records were pinned on), instead of letting steady decoders advance in bulk. The same
   * results either way; test/unit/sim-lazy.test.ts holds them equal.
   */
  stepByStep?: boolean;
  /** metricsOnly: the per-request SLOs goodput counts against (facts/stat.ts SloSpec). */
  slo?: SloSpec;
}

/** A request's record while it runs in metricsOnly mode: its first and last chunk instead of them all. */
interface Tracked extends RequestRecord {
  firstMs: number;
  lastMs: number;
  chunks: number;
}

export interface LoadResult {
  /** Every request's record (empty with metricsOnly). */
  records: RequestRecord[];
  /** From the point's start to the last request's end, s. */
  durationS: number;
  /** Time-averaged number of requests in the engine (running + waiting), sampled per step. */
  observedInFlight: number;
  /** Time-averaged number of sequences per step while busy. */
  meanBatch: number;
  steps: number;
  prefixQueries: number;
  prefixHits: number;
  preemptions: number;
  /** Where the point's wall time went, s, summed over replicas: decode reads, extra time prefills added, step overhead, idle. */
  time: { decodeS: number; prefillS: number; overheadS: number; idleS: number };
}

/** Random prompt token ids in [1, vocab), one request after another from one generator. */
export function promptGenerator(seed: number, vocab: number): (len: number) => Uint32Array {
  const rng = new Mulberry32(seed);
  const span = vocab - 1;
  return (len) => {
    const a = new Uint32Array(len);
    rng.fill(a, 0, len, 1, span);
    return a;
  };
}

/** Engine steps one runLoad may take (a guard against a load that never drains). */
const MAX_STEPS = 50_000_000;

/**
 * One benchmark point in progress: `advance` runs it in slices (so a caller can yield between
 * them), `result` gives the point's figures once `done`. runLoad runs it in one go.
 */
export class LoadRun {
  readonly closed: boolean;
  readonly N: number;
  readonly t0: number;
  readonly records: RequestRecord[] = [];
  sent = 0;
  done = 0;
  steps = 0;
  private readonly gen: (len: number) => Uint32Array;
  private readonly c0: EngineCounters;
  private readonly arrivals: number[] = [];
  private inFlightInt = 0;
  private batchInt = 0;
  private busy = 0;
  private readonly time = { decodeS: 0, prefillS: 0, overheadS: 0, idleS: 0 };
  private endsMs = new Float64Array(64);
  private drained = false;
  /** metricsOnly: the point's metrics so far (latencies from the send time, which is the arrival). */
  readonly metrics: MetricsAccumulator | undefined;
  private lastEndMs = 0;
  /** Multi-turn sessions: each request's conversation, and the next turns waiting out their think time. */
  private readonly cursorOf = new Map<RequestRecord, SessionCursor>();
  private readonly pending: { at: number; cursor: SessionCursor }[] = [];
  /**
   * The engine runs without token ids (lazy decoding: steady decoders advance in bulk), as it may
   * when this load owns every request in it; `restoreIds` says to give the ids back when done.
   */
  private readonly lazy: boolean;
  private restoreIds = false;
  /** Lazy decoding with records: each replica's step ends (ms), from its first step in this load. */
  private readonly stepLog: number[][] = [];
  private readonly stepLogBase: number[] = [];
  /** Lazy decoding: ids the prompt generator would have drawn so far (where the next prompt starts in its stream). */
  private genOffset = 0;

  constructor(
    readonly engine: Engine,
    readonly o: LoadOptions,
  ) {
    this.metrics = o.metricsOnly
      ? new MetricsAccumulator({ latencyFrom: 'sent', ...(o.slo?.length ? { slo: o.slo } : {}) })
      : undefined;
    this.closed = o.concurrency !== undefined;
    if (this.closed === (o.rate !== undefined))
      throw new Error('give either concurrency (closed loop) or rate (open loop)');
    this.N = Math.max(0, Math.floor(o.requests));
    this.t0 = engine.now;
    this.gen = promptGenerator(o.seed, engine.cfg.vocab);
    this.c0 = { ...engine.counters };
    // Nothing here reads a token id: let steady decoders advance in bulk when every request in the
    // engine will be this load's (same records and metrics as step by step; sim-golden pins them).
    this.lazy = !o.stepByStep && !engine.hasWork() && !engine.cfg.speculative;
    if (this.lazy) {
      this.restoreIds = engine.tokenIds;
      engine.setTokenIds(false);
    } else engine.setTokenIds(true);
    if (!this.closed) {
      // Open-loop arrival times.
      const r = mulberry32((o.seed ^ 0xa5a5a5a5) >>> 0);
      let t = this.t0;
      for (let i = 0; i < this.N; i++) {
        const traced = o.plan?.arrivalOf(i);
        if (traced !== undefined) t = this.t0 + traced;
        else if (Number.isFinite(o.rate!)) t += expVariate(r, 1 / o.rate!);
        this.arrivals.push(t);
      }
    } else {
      const c = Math.max(1, Math.floor(o.concurrency!));
      for (let i = 0; i < Math.min(c, this.N); i++) this.send(this.t0, this.sessionFor());
    }
  }

  /** True once every request has finished (or the load cannot progress). */
  get finished(): boolean {
    const f = this.drained || this.done >= this.N || this.steps >= MAX_STEPS;
    if (f && this.restoreIds) {
      this.restoreIds = false;
      this.engine.setTokenIds(true);
    }
    return f;
  }

  /** A new conversation when the plan has sessions (closed loop only). */
  private sessionFor(): SessionCursor | undefined {
    return this.closed && this.o.plan?.sessions ? this.o.plan.startSession() : undefined;
  }

  /** Closed loop: a finished request makes room for the next (its session's next turn after the think time). */
  private refill(rec: RequestRecord, end: number) {
    if (!this.closed || this.sent + this.pending.length >= this.N) return;
    const cursor = this.cursorOf.get(rec);
    this.cursorOf.delete(rec);
    if (cursor && !cursor.done) {
      const at = end + this.o.plan!.thinkS;
      let i = this.pending.length;
      while (i > 0 && this.pending[i - 1].at > at) i--;
      this.pending.splice(i, 0, { at, cursor });
    } else this.send(end, this.sessionFor());
  }

  private send(at: number, cursor?: SessionCursor) {
    const o = this.o;
    const id = this.sent++;
    const planned = cursor ? cursor.next() : o.plan?.next();
    let prompt: ArrayLike<number>;
    let blockHashes: number[] | undefined;
    if (planned) prompt = planned.prompt;
    else if (this.lazy) {
      // Lazy decoding reads no id: the generated prompt is named by where it lies in the generator's stream.
      const len = Math.trunc(o.input);
      prompt = { length: len };
      blockHashes = this.engine.cfg.prefixCaching
        ? generatedPromptHashes(o.seed, this.engine.cfg.vocab, this.genOffset, len)
        : [];
      this.genOffset += len;
    } else prompt = this.gen(o.input);
    const output = planned ? planned.output : o.output;
    const req = this.engine.add({
      id: `load-${this.t0}-${id}`,
      prompt,
      blockHashes,
      maxTokens: output,
      minTokens: o.ignoreEos === false ? 0 : output,
      ignoreEos: o.ignoreEos !== false,
      arrival: at,
    });
    const ms = (at - this.t0) * 1000;
    const rec: RequestRecord = {
      id,
      scheduledMs: ms,
      sentMs: ms,
      chunkMs: [],
      endMs: ms,
      promptTokens: prompt.length,
      outputTokens: 0,
      cachedTokens: 0,
      ok: false,
    };
    if (this.metrics) Object.assign(rec, { firstMs: NaN, lastMs: NaN, chunks: 0 });
    else this.records.push(rec);
    req.tag = rec;
    if (cursor) this.cursorOf.set(rec, cursor);
  }

  /** Run engine steps until the load is done or about `maxSteps` steps have run. Returns `finished`. */
  advance(maxSteps = Infinity): boolean {
    const engine = this.engine;
    const closed = this.closed;
    const N = this.N;
    const arrivals = this.arrivals;
    const stop = Math.min(MAX_STEPS, this.steps + maxSteps);
    const pending = this.pending;
    while (this.done < N && this.steps < stop && !this.drained) {
      if (!closed) while (this.sent < N && arrivals[this.sent] <= engine.now) this.send(arrivals[this.sent]);
      while (pending.length && pending[0].at <= engine.now) {
        const p = pending.shift()!;
        this.send(p.at, p.cursor);
      }
      if (!engine.hasWork()) {
        if (!closed && this.sent < N) {
          engine.advanceTo(arrivals[this.sent]);
          continue;
        }
        if (pending.length) {
          engine.advanceTo(pending[0].at);
          continue;
        }
        this.drained = true;
        break;
      }
      // Stretches of pure-decode steps run in one call (the same results as step by step).
      const next = !closed && this.sent < N ? arrivals[this.sent] : pending.length ? pending[0].at : Infinity;
      const run = this.lazy ? undefined : engine.decodeRun(Math.min(4096, stop - this.steps), next);
      if (run) this.onRun(run);
      else this.onStep(engine.step(true)!);
    }
    return this.finished;
  }

  private onRun(run: DecodeRun) {
    const K = run.steps;
    const ends = run.ends;
    const t0 = this.t0;
    if (this.endsMs.length < K) this.endsMs = new Float64Array(Math.max(K, 2 * this.endsMs.length));
    const endsMs = this.endsMs;
    const time = this.time;
    const { durations, decodeMemS, prefillExtraS, inSystem, numSeqs, overheadS } = run;
    for (let k = 0; k < K; k++) {
      const d = durations[k];
      this.inFlightInt += inSystem * d;
      this.batchInt += numSeqs * d;
      this.busy += d;
      time.decodeS += decodeMemS[k];
      time.prefillS += prefillExtraS[k];
      time.overheadS += overheadS;
      endsMs[k] = (ends[k] - t0) * 1000;
    }
    this.steps += K;
    const reqs = run.reqs;
    const metrics = this.metrics;
    if (metrics) {
      // Every sequence of the stretch has the same gaps after its first chunk in it: one add per step.
      // (and their gaps into it are mostly one value too: the step before it ended for all of them at once).
      let m = 0;
      let gap = NaN;
      let gaps = 0;
      for (let i = 0; i < reqs.length; i++) {
        const t = reqs[i].tag as Tracked | undefined;
        if (!t) continue;
        m++;
        if (t.chunks) {
          const g = endsMs[0] - t.lastMs;
          if (g === gap) gaps++;
          else {
            if (gaps) metrics.addItl(gap, gaps);
            gap = g;
            gaps = 1;
          }
        } else t.firstMs = endsMs[0];
        t.lastMs = endsMs[K - 1];
        t.chunks += K;
      }
      if (gaps) metrics.addItl(gap, gaps);
      if (m) for (let k = 1; k < K; k++) metrics.addItl(endsMs[k] - endsMs[k - 1], m);
    } else
      for (let i = 0; i < reqs.length; i++) {
        const rec = reqs[i].tag as RequestRecord | undefined;
        if (!rec) continue;
        const c = rec.chunkMs;
        for (let k = 0; k < K; k++) c.push(endsMs[k]);
      }
    if (run.finished.length) this.onFinished(run.finished, ends[K - 1]);
  }

  private onFinished(list: SimRequest[], end: number) {
    const endMs = (end - this.t0) * 1000;
    for (const r of list) {
      const rec = r.tag as RequestRecord | undefined;
      if (!rec) continue;
      rec.endMs = endMs;
      rec.outputTokens = r.numOutput;
      rec.cachedTokens = r.cachedTokens;
      rec.ok = true;
      r.tag = undefined;
      this.done++;
      if (this.metrics) this.summarize(rec as Tracked);
      this.refill(rec, end);
    }
  }

  private onStep(res: StepResult) {
    this.steps++;
    this.inFlightInt += res.inSystem * res.duration;
    this.batchInt += res.numSeqs * res.duration;
    this.busy += res.duration;
    const time = this.time;
    time.decodeS += res.decodeMemS;
    time.prefillS += res.prefillExtraS;
    time.overheadS += res.overheadS;
    const t0 = this.t0;
    const endMs = (res.end - t0) * 1000;
    const metrics = this.metrics;
    // Lazy decoding with records: this replica's step ends, for the tokens its steady decoders got in bulk.
    let log: number[] | undefined;
    let base = 0;
    if (this.lazy && !metrics) {
      log = this.stepLog[res.replica];
      if (!log) {
        log = this.stepLog[res.replica] = [];
        this.stepLogBase[res.replica] = res.index;
      }
      base = this.stepLogBase[res.replica];
      log[res.index - base] = endMs;
    }
    // metricsOnly: the sequences that had a token in the step before share one gap, added once with their count.
    let gap = NaN;
    let gaps = 0;
    const tokens = res.tokens;
    const bulk = res.bulk;
    const split = res.bulkBefore;
    for (let i = 0; i <= tokens.length; i++) {
      // The steady decoders' tokens (lazy decoding), where they fall in schedule order.
      const c = !bulk || !metrics ? 0 : split.length ? (i < split.length ? split[i] : 0) : i === res.bulkAt ? bulk : 0;
      if (c) {
        const g = endMs - (res.start - t0) * 1000;
        if (g === gap) gaps += c;
        else {
          if (gaps) metrics!.addItl(gap, gaps);
          gap = g;
          gaps = c;
        }
      }
      if (i === tokens.length) break;
      const ev = tokens[i];
      const rec = ev.req.tag as RequestRecord | undefined;
      if (!rec) continue;
      if (ev.lazy) {
        // The tokens it got in bulk since its previous event.
        if (metrics) {
          const t = rec as Tracked;
          t.chunks += ev.lazy;
          t.lastMs = (ev.req.prevTokenTime - t0) * 1000;
        } else for (let k = ev.lazyFrom; k < ev.lazyFrom + ev.lazy; k++) rec.chunkMs.push(log![k - base]);
      }
      if (metrics) {
        const t = rec as Tracked;
        if (t.chunks++) {
          const g = endMs - t.lastMs;
          if (g === gap) gaps++;
          else {
            if (gaps) metrics.addItl(gap, gaps);
            gap = g;
            gaps = 1;
          }
        } else t.firstMs = endMs;
        t.lastMs = endMs;
      } else rec.chunkMs.push(endMs);
      if (ev.finished) {
        rec.endMs = endMs;
        rec.outputTokens = ev.req.numOutput;
        rec.cachedTokens = ev.req.cachedTokens;
        rec.ok = true;
        ev.req.tag = undefined;
        this.done++;
        if (metrics) this.summarize(rec as Tracked);
        this.refill(rec, res.end);
      }
    }
    if (gaps) metrics!.addItl(gap, gaps);
    for (const r of res.dropped) {
      const rec = r.tag as RequestRecord | undefined;
      if (!rec) continue;
      rec.endMs = endMs;
      rec.errorKind = 'bad-request';
      rec.errorMessage = 'the request does not fit in the KV pool';
      r.tag = undefined;
      this.done++;
      if (metrics) this.summarize(rec as Tracked);
      this.refill(rec, res.end);
    }
  }

  /** metricsOnly: a request that ended, into the point's metrics (as summarizeRecords would take its record). */
  private summarize(t: Tracked) {
    this.lastEndMs = Math.max(this.lastEndMs, t.endMs);
    const l: { ttft?: number; e2e?: number; tpot?: number } = {};
    if (t.ok && t.chunks) {
      l.ttft = t.firstMs - t.sentMs;
      l.e2e = t.lastMs - t.sentMs;
      const out = t.outputTokens ?? t.chunks;
      if (out > 1) l.tpot = (l.e2e - l.ttft) / (out - 1);
    }
    this.metrics!.addRequest({
      ok: t.ok,
      errorKind: t.errorKind,
      scheduledMs: t.scheduledMs,
      sentMs: t.sentMs,
      endMs: t.endMs,
      promptTokens: t.promptTokens,
      outputTokens: t.outputTokens ?? t.chunks,
      cachedTokens: t.cachedTokens,
      ...l,
    });
  }

  result(): LoadResult {
    const engine = this.engine;
    const t0 = this.t0;
    let tEnd = t0 + this.lastEndMs / 1000;
    for (const r of this.records) tEnd = Math.max(tEnd, t0 + r.endMs / 1000);
    const durationS = tEnd - t0;
    // Busy time sums over the replicas of a data-parallel engine: idle is what is left of all of them.
    const time = { ...this.time, idleS: Math.max(0, durationS * engine.replicaCount - this.busy) };
    return {
      records: this.records,
      durationS,
      observedInFlight: durationS > 0 ? this.inFlightInt / durationS : 0,
      meanBatch: this.busy > 0 ? this.batchInt / this.busy : 0,
      steps: this.steps,
      prefixQueries: engine.counters.prefixQueries - this.c0.prefixQueries,
      prefixHits: engine.counters.prefixHits - this.c0.prefixHits,
      preemptions: engine.counters.preemptions - this.c0.preemptions,
      time,
    };
  }
}

export function runLoad(engine: Engine, o: LoadOptions): LoadResult {
  const run = new LoadRun(engine, o);
  run.advance();
  return run.result();
}
