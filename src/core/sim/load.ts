/**
 * A load generator in virtual time: the client side of a benchmark point run against a SimEngine
 * with no clock. Closed loop (`concurrency`: a new request leaves the moment one finishes, like
 * `vllm bench serve --max-concurrency`) or open loop (`rate`: Poisson arrivals, like
 * `--request-rate`). Prompts are random token ids from the point's seed (vLLM's random dataset), so
 * one seed reused across points regenerates the same prompts: the prefix-cache trap.
 */
import type { RequestRecord } from '../bench/metrics';
import type { SimEngine } from './engine';
import { expVariate, mulberry32 } from './rng';

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
}

export interface LoadResult {
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
  /** Where the point's wall time went, s: decode reads, extra time prefills added, step overhead, idle. */
  time: { decodeS: number; prefillS: number; overheadS: number; idleS: number };
}

/** Random prompt token ids in [1, vocab), one request after another from one generator. */
export function promptGenerator(seed: number, vocab: number): (len: number) => Uint32Array {
  const rand = mulberry32(seed);
  return (len) => {
    const a = new Uint32Array(len);
    for (let i = 0; i < len; i++) a[i] = 1 + Math.floor(rand() * (vocab - 1));
    return a;
  };
}

export function runLoad(engine: SimEngine, o: LoadOptions): LoadResult {
  const closed = o.concurrency !== undefined;
  if (closed === (o.rate !== undefined)) throw new Error('give either concurrency (closed loop) or rate (open loop)');
  const N = Math.max(0, Math.floor(o.requests));
  const t0 = engine.now;
  const gen = promptGenerator(o.seed, engine.cfg.vocab);
  const records: RequestRecord[] = [];
  const c0 = { ...engine.counters };
  let sent = 0;
  let done = 0;
  const send = (at: number) => {
    const id = sent++;
    const prompt = gen(o.input);
    const req = engine.add({ id: `load-${t0}-${id}`, prompt, maxTokens: o.output, minTokens: o.ignoreEos === false ? 0 : o.output, ignoreEos: o.ignoreEos !== false, arrival: at });
    const ms = (at - t0) * 1000;
    const rec: RequestRecord = { id, scheduledMs: ms, sentMs: ms, chunkMs: [], endMs: ms, promptTokens: o.input, outputTokens: 0, cachedTokens: 0, ok: false };
    records.push(rec);
    req.tag = rec;
  };
  // Open-loop arrival times.
  const arrivals: number[] = [];
  if (!closed) {
    const r = mulberry32((o.seed ^ 0xa5a5a5a5) >>> 0);
    let t = t0;
    for (let i = 0; i < N; i++) {
      if (Number.isFinite(o.rate!)) t += expVariate(r, 1 / o.rate!);
      arrivals.push(t);
    }
  } else {
    const c = Math.max(1, Math.floor(o.concurrency!));
    for (let i = 0; i < Math.min(c, N); i++) send(t0);
  }

  let inFlightInt = 0;
  let batchInt = 0;
  let busy = 0;
  let steps = 0;
  const time = { decodeS: 0, prefillS: 0, overheadS: 0, idleS: 0 };
  const maxSteps = 50_000_000;
  while (done < N && steps < maxSteps) {
    if (!closed) while (sent < N && arrivals[sent] <= engine.now) send(arrivals[sent]);
    if (!engine.hasWork()) {
      if (!closed && sent < N) {
        engine.advanceTo(arrivals[sent]);
        continue;
      }
      break;
    }
    const res = engine.step()!;
    steps++;
    inFlightInt += res.inSystem * res.duration;
    batchInt += res.numSeqs * res.duration;
    busy += res.duration;
    time.decodeS += res.decodeMemS;
    time.prefillS += res.prefillExtraS;
    time.overheadS += res.overheadS;
    const endMs = (res.end - t0) * 1000;
    for (const ev of res.tokens) {
      const rec = ev.req.tag as RequestRecord | undefined;
      if (!rec) continue;
      rec.chunkMs.push(endMs);
      if (ev.finished) {
        rec.endMs = endMs;
        rec.outputTokens = ev.req.output.length;
        rec.cachedTokens = ev.req.cachedTokens;
        rec.ok = true;
        ev.req.tag = undefined;
        done++;
        if (closed && sent < N) send(res.end);
      }
    }
    for (const r of res.dropped) {
      const rec = r.tag as RequestRecord | undefined;
      if (!rec) continue;
      rec.endMs = endMs;
      rec.errorKind = 'bad-request';
      rec.errorMessage = 'the request does not fit in the KV pool';
      r.tag = undefined;
      done++;
      if (closed && sent < N) send(res.end);
    }
  }
  let tEnd = t0;
  for (const r of records) tEnd = Math.max(tEnd, t0 + r.endMs / 1000);
  const durationS = tEnd - t0;
  time.idleS = Math.max(0, durationS - busy);
  return {
    records,
    durationS,
    observedInFlight: durationS > 0 ? inFlightInt / durationS : 0,
    meanBatch: busy > 0 ? batchInt / busy : 0,
    steps,
    prefixQueries: engine.counters.prefixQueries - c0.prefixQueries,
    prefixHits: engine.counters.prefixHits - c0.prefixHits,
    preemptions: engine.counters.preemptions - c0.preemptions,
    time,
  };
}
