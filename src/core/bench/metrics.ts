/**
 * Benchmark metrics, as vLLM's `vllm bench serve` defines them (so numbers compare with what users
 * already know), computed from per-request records:
 *
 *   TTFT  = first chunk carrying text (answer or reasoning) − latency origin
 *   TTFT content = first chunk carrying answer text − latency origin (reasoning models; when it differs)
 *   ITL   = gaps between successive chunks that carry text (per chunk, not per token), pooled over requests
 *
 * A chunk "carries text" when its choice has non-empty text / delta.content (or reasoning_content,
 * reasoning, tool_calls): a stream's role chunk, llama.cpp's empty last chunk (finish_reason and
 * usage only) and usage chunks are not tokens, as in SGLang's bench_serving and vLLM's
 * benchmark_serving.py before `vllm bench` (`if data["choices"][0]["text"]`); the current
 * `vllm bench serve` client also counts chunks whose text is empty (its own server sends none).
 *   TPOT  = (E2E − TTFT) / (output_tokens − 1), per request with more than one output token
 *   E2E   = last content chunk − latency origin
 *   throughputs = totals over completed requests / the point's wall time
 *   goodput = requests meeting every per-request SLO / wall time
 *
 * The latency origin is the actual send time in a closed loop and the *scheduled* send time in an
 * open loop (so a client that falls behind its schedule shows it as latency, not as a lower rate).
 * Percentiles interpolate linearly between order statistics (numpy's default), like vLLM.
 *
 * Pure functions, no I/O: the simulator and the audit may import this file.
 */
import { pKey, sloMisses, statQuantile, type SloSpec } from '../facts/stat';
import { LatencySample } from '../stats/sample';

/** Why a request did not end cleanly. `missing-usage`, `bad-usage` and `no-done` are soft: the request counts. */
export type ErrorKind =
  | 'connect'
  | 'reset'
  | 'timeout'
  | 'rate-limited'
  | 'server-error'
  | 'bad-request'
  /** An HTTP 3xx: redirects are not followed. */
  | 'redirect'
  | 'malformed-sse'
  | 'malformed-json'
  | 'api-error'
  | 'truncated'
  | 'empty'
  | 'cancelled'
  | 'missing-usage'
  /** Usage that is not a count (negative, fractional, not a number): output tokens counted from chunks. */
  | 'bad-usage'
  | 'no-done'
  | 'client';

/** What a request ended with, whatever clock its times are on. */
export interface RequestOutcome {
  promptTokens?: number;
  /** From usage.completion_tokens; without usage, the number of content chunks (an estimate). */
  outputTokens?: number;
  cachedTokens?: number;
  /** True when the request counts as completed (no error, or a soft one). */
  ok: boolean;
  errorKind?: ErrorKind;
  /** Never contains request headers (the API key); bodies are truncated. */
  errorMessage?: string;
  httpStatus?: number;
  /** 1 when the request was sent again on a fresh connection after its first connection closed before any response byte. */
  retries?: number;
  /** The first attempt's error, when the request was retried. */
  retryError?: string;
}

/** One request, as the client saw it. Times are ms on a monotonic clock, relative to the point's start. */
export interface RequestRecord extends RequestOutcome {
  /** Index within the point (warm-up requests are not recorded). */
  id: number;
  /** When the load shape wanted it sent (closed loop: when a slot freed and the request was issued). */
  scheduledMs: number;
  /** When the request was written to a connection (the client's own wait for one is sentMs − scheduledMs). */
  sentMs: number;
  /** Arrival of each chunk that carried text (answer or reasoning), in order. Empty if none came. */
  chunkMs: number[];
  /** Arrival of the first chunk with answer text, when reasoning chunks came before it (else chunkMs[0]). */
  firstContentMs?: number;
  /** When the response ended (after usage / [DONE], or at the error). */
  endMs: number;
  /** A workload plan's lengths for this request (prompt tokens where the client knows them, max_tokens); absent: the point's. */
  requestedInput?: number;
  requestedOutput?: number;
}

export interface Dist {
  n: number;
  mean: number;
  median: number;
  std: number;
  min: number;
  max: number;
  /** Percentiles by name: { p90: …, p99: … } */
  p: Record<string, number>;
  /** Present when the percentiles come from a sketch (a very large sample): their error bound. */
  approx?: { relative_error: number; method: string };
}

export type { SloLimit, SloSpec } from '../facts/stat';

export interface SummarizeOptions {
  /** 'sent' for a closed loop, 'scheduled' for an open loop. Default 'sent'. */
  latencyFrom?: 'sent' | 'scheduled';
  /** Percentiles to report besides the median, e.g. [90, 99]. Default [90, 99]. */
  percentiles?: number[];
  slo?: SloSpec;
  /**
   * Wall time of the point in ms (vLLM's benchmark_duration). Default: from the earliest
   * scheduled/sent time to the latest end.
   */
  durationMs?: number;
  /**
   * Time-averaged number of requests in flight the client observed during the point (sampled by
   * the load generator, independent of the records), for Little's law.
   */
  observedInFlight?: number;
}

export interface PointMetrics {
  completed: number;
  failed: number;
  /** failed / (completed + failed) */
  failure_rate: number;
  errors: Record<string, number>;
  duration_s: number;
  total_input_tokens: number;
  total_output_tokens: number;
  cached_tokens: number;
  /** completed / duration */
  request_throughput: number;
  /** Σ output tokens / duration */
  output_throughput: number;
  /** (Σ input + Σ output tokens) / duration */
  total_token_throughput: number;
  /** requests meeting every SLO / duration (undefined without an SLO) */
  goodput?: number;
  good_requests?: number;
  /** Σ output tokens of the requests meeting every SLO (undefined without an SLO): what a goodput-priced token counts. */
  good_output_tokens?: number;
  /** Every SLO's stat within its limit (undefined without one) */
  slo_met?: boolean;
  ttft_ms: Dist;
  /** Time to the first chunk with answer text, when some request had reasoning chunks before it. */
  ttft_content_ms?: Dist;
  tpot_ms: Dist;
  itl_ms: Dist;
  e2e_ms: Dist;
  little: LittleLaw;
  /** Requests sent a second time on a fresh connection (their first connection closed before any response). */
  retried: number;
}

export interface LittleLaw {
  /** Completion rate λ = completed / duration, req/s. */
  lambda: number;
  /** Mean time in system W (E2E of completed requests), s. */
  w_s: number;
  /** λ·W */
  predicted_in_flight: number;
  /** Time-averaged in-flight count the client observed (undefined if not sampled). */
  observed_in_flight?: number;
  /** λ·W / observed − 1 (undefined if not sampled). */
  error?: number;
}

/** numpy.percentile with linear interpolation, on a sorted array. */
export function percentileSorted(sorted: ArrayLike<number>, p: number): number {
  const n = sorted.length;
  if (!n) return NaN;
  if (n === 1) return sorted[0];
  const rank = (p / 100) * (n - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(n - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

export function percentile(values: ArrayLike<number>, p: number): number {
  return percentileSorted(Float64Array.from(values).sort(), p);
}

/** The middle value (the mean of the two middle ones for an even count); NaN when empty. */
export function median(xs: number[]): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export { pKey };

/** mean, median, std, min, max and the requested percentiles of a sample. NaN everywhere when empty. */
export function distribution(values: ArrayLike<number>, percentiles: number[] = [90, 99]): Dist {
  const s = Float64Array.from(values).sort();
  const n = s.length;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += s[i];
  const mean = n ? sum / n : NaN;
  let sq = 0;
  for (let i = 0; i < n; i++) sq += (s[i] - mean) ** 2;
  const p: Record<string, number> = {};
  for (const q of percentiles) p[pKey(q)] = percentileSorted(s, q);
  return {
    n,
    mean,
    median: percentileSorted(s, 50),
    std: n ? Math.sqrt(sq / n) : NaN,
    min: n ? s[0] : NaN,
    max: n ? s[n - 1] : NaN,
    p,
  };
}

/** The per-request latencies of one record (ms); undefined fields when the record has no chunks. */
export function requestLatencies(r: RequestRecord, latencyFrom: 'sent' | 'scheduled' = 'sent') {
  const origin = latencyFrom === 'scheduled' ? r.scheduledMs : r.sentMs;
  const n = r.chunkMs.length;
  if (!n) return { ttft: undefined, e2e: undefined, tpot: undefined };
  const ttft = r.chunkMs[0] - origin;
  const e2e = r.chunkMs[n - 1] - origin;
  const out = r.outputTokens ?? n;
  const tpot = out > 1 ? (e2e - ttft) / (out - 1) : undefined;
  return { ttft, e2e, tpot };
}

/** What one request contributes besides its ITLs (which go to MetricsAccumulator.addItl). */
export interface RequestTotals {
  ok: boolean;
  errorKind?: ErrorKind;
  scheduledMs: number;
  sentMs: number;
  endMs: number;
  promptTokens?: number;
  /** Output tokens (usage, or the chunk count). */
  outputTokens: number;
  cachedTokens?: number;
  /** Latencies from the point's origin (requestLatencies); undefined when no chunk came. */
  ttft?: number;
  /** Time to the first answer chunk when reasoning chunks came first (else ttft). */
  ttftContent?: number;
  e2e?: number;
  tpot?: number;
  /** Sent a second time on a fresh connection. */
  retried?: boolean;
}

/**
 * A point's metrics built up one request at a time, so a caller that never holds every chunk time
 * (the simulator in virtual time, at the scale of real traces) gets the same PointMetrics as
 * summarizeRecords. The samples are exact up to a few million values, then sketches (stats/sample.ts).
 */
export class MetricsAccumulator {
  readonly ttft = new LatencySample();
  readonly tpot = new LatencySample();
  readonly itl = new LatencySample();
  readonly e2e = new LatencySample();
  /** Time to the first answer chunk (equal to TTFT unless reasoning came first). */
  readonly ttftContent = new LatencySample();
  private reasoned = false;
  private retried = 0;
  private readonly errors: Record<string, number> = {};
  private completed = 0;
  private failed = 0;
  private inTok = 0;
  private outTok = 0;
  private cached = 0;
  private good = 0;
  private goodOut = 0;
  private t0 = Infinity;
  private t1 = -Infinity;

  constructor(private readonly opts: SummarizeOptions = {}) {}

  /** A whole record: its totals and its gaps. */
  addRecord(r: RequestRecord): void {
    const from = this.opts.latencyFrom ?? 'sent';
    const l = r.ok ? requestLatencies(r, from) : {};
    if (r.firstContentMs !== undefined) this.reasoned = true;
    this.addRequest({
      retried: !!r.retries,
      ttftContent:
        r.ok && r.firstContentMs !== undefined
          ? r.firstContentMs - (from === 'scheduled' ? r.scheduledMs : r.sentMs)
          : undefined,
      ok: r.ok,
      errorKind: r.errorKind,
      scheduledMs: r.scheduledMs,
      sentMs: r.sentMs,
      endMs: r.endMs,
      promptTokens: r.promptTokens,
      outputTokens: r.outputTokens ?? r.chunkMs.length,
      cachedTokens: r.cachedTokens,
      ...l,
    });
    if (r.ok) for (let i = 1; i < r.chunkMs.length; i++) this.itl.add(r.chunkMs[i] - r.chunkMs[i - 1]);
  }

  addRequest(r: RequestTotals): void {
    this.t0 = Math.min(this.t0, r.scheduledMs, r.sentMs);
    this.t1 = Math.max(this.t1, r.endMs);
    if (r.errorKind) this.errors[r.errorKind] = (this.errors[r.errorKind] ?? 0) + 1;
    if (r.retried) this.retried++;
    if (!r.ok) {
      this.failed++;
      return;
    }
    this.completed++;
    this.inTok += r.promptTokens ?? 0;
    this.outTok += r.outputTokens;
    this.cached += r.cachedTokens ?? 0;
    if (r.ttft !== undefined) this.ttft.add(r.ttft);
    if (r.ttftContent !== undefined) {
      this.reasoned = true;
      this.ttftContent.add(r.ttftContent);
    } else if (r.ttft !== undefined) this.ttftContent.add(r.ttft);
    if (r.e2e !== undefined) this.e2e.add(r.e2e);
    if (r.tpot !== undefined) this.tpot.add(r.tpot);
    const slo = this.opts.slo;
    // A request without a TPOT (one output token) or an E2E cannot miss a limit on it.
    if (slo?.length && r.ttft !== undefined && slo.every((l) => (r[l.metric] ?? 0) <= l.ms)) {
      this.good++;
      this.goodOut += r.outputTokens;
    }
  }

  /** `count` gaps of `ms` between successive chunks of completed requests. */
  addItl(ms: number, count = 1): void {
    this.itl.add(ms, count);
  }

  /** The point's metrics; `over` adds or replaces options known only at the end (durationMs, observedInFlight). */
  result(over: SummarizeOptions = {}): PointMetrics {
    const opts = { ...this.opts, ...over };
    // An SLO on a percentile needs that percentile, whichever percentiles were asked for.
    const asked = opts.percentiles ?? [90, 99];
    const slo = opts.slo ?? [];
    const needed = slo.map((l) => statQuantile(l.stat)).filter((q): q is number => q !== undefined && q !== 50);
    const pcts = [...asked, ...needed.filter((q, i) => !asked.includes(q) && needed.indexOf(q) === i)];
    const { completed, failed } = this;
    const durationMs = opts.durationMs ?? (completed + failed ? this.t1 - this.t0 : 0);
    const dur = durationMs / 1000;
    const rate = (x: number) => (dur > 0 ? x / dur : NaN);
    const dists = {
      ttft_ms: this.ttft.dist(pcts),
      tpot_ms: this.tpot.dist(pcts),
      itl_ms: this.itl.dist(pcts),
      e2e_ms: this.e2e.dist(pcts),
    };
    const lambda = rate(completed);
    const wS = dists.e2e_ms.n ? dists.e2e_ms.mean / 1000 : NaN;
    const little: LittleLaw = { lambda, w_s: wS, predicted_in_flight: lambda * wS };
    if (opts.observedInFlight !== undefined) {
      little.observed_in_flight = opts.observedInFlight;
      little.error = opts.observedInFlight > 0 ? little.predicted_in_flight / opts.observedInFlight - 1 : NaN;
    }
    const m: PointMetrics = {
      completed,
      failed,
      failure_rate: completed + failed ? failed / (completed + failed) : 0,
      errors: this.errors,
      duration_s: dur,
      total_input_tokens: this.inTok,
      total_output_tokens: this.outTok,
      cached_tokens: this.cached,
      request_throughput: rate(completed),
      output_throughput: rate(this.outTok),
      total_token_throughput: rate(this.inTok + this.outTok),
      ...dists,
      little,
      retried: this.retried,
    };
    if (this.reasoned) m.ttft_content_ms = this.ttftContent.dist(pcts);
    if (slo.length) {
      m.good_requests = this.good;
      m.good_output_tokens = this.goodOut;
      m.goodput = rate(this.good);
      m.slo_met = completed > 0 && sloMisses(dists, slo).length === 0;
    }
    return m;
  }
}

/** Summarize one point's records into vLLM-style metrics. */
export function summarizeRecords(records: RequestRecord[], opts: SummarizeOptions = {}): PointMetrics {
  const acc = new MetricsAccumulator(opts);
  for (const r of records) acc.addRecord(r);
  return acc.result();
}

/** The formula behind each metric, for the outputs (shown beside the numbers). */
export const FORMULAS: Record<string, string> = {
  ttft: 'TTFT = first chunk carrying text (answer or reasoning) − send time (open loop: scheduled send time)',
  ttft_content: 'TTFT content = first chunk carrying answer text − send time (after any reasoning chunks)',
  itl: 'ITL = gap between successive chunks that carry text (per chunk, pooled over requests; role, empty and usage-only chunks are not counted, as in SGLang bench_serving)',
  tpot: 'TPOT = (E2E − TTFT) / (output_tokens − 1), requests with > 1 output token',
  e2e: 'E2E = last chunk carrying text − send time (open loop: scheduled send time)',
  request_throughput: 'request throughput = completed / duration',
  output_throughput: 'output throughput = Σ usage.completion_tokens / duration',
  total_token_throughput: 'total-token throughput = (Σ prompt + Σ completion tokens) / duration',
  goodput: 'goodput = requests meeting every SLO / duration',
  little:
    "Little's law: L = λ·W, λ = completed / duration, W = mean E2E; against L observed = time-averaged in-flight count (each request from its write to its end, the instant E2E counts from)",
  failure_rate: 'failure rate = failed / (completed + failed)',
  hit_rate: 'prefix-cache hit rate = Δ vllm:prefix_cache_hits / Δ vllm:prefix_cache_queries over the point',
};

/**
 * vLLM `--save-result` field names for one point (ms for latencies, per-second throughputs), so a
 * notebook's numbers can be compared with files users already have.
 */
export function toVllmResult(m: PointMetrics, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const out: Record<string, unknown> = {
    ...extra,
    duration: m.duration_s,
    completed: m.completed,
    failed: m.failed,
    total_input_tokens: m.total_input_tokens,
    total_output_tokens: m.total_output_tokens,
    request_throughput: m.request_throughput,
    output_throughput: m.output_throughput,
    total_token_throughput: m.total_token_throughput,
  };
  if (m.goodput !== undefined) out.request_goodput = m.goodput;
  for (const [name, d] of [
    ['ttft', m.ttft_ms],
    ['tpot', m.tpot_ms],
    ['itl', m.itl_ms],
    ['e2el', m.e2e_ms],
  ] as const) {
    out[`mean_${name}_ms`] = d.mean;
    out[`median_${name}_ms`] = d.median;
    out[`std_${name}_ms`] = d.std;
    for (const [k, v] of Object.entries(d.p)) out[`${k}_${name}_ms`] = v;
  }
  return out;
}
