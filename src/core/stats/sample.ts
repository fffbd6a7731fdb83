/**
 * A sample of latencies (ms) for percentiles at any size: exact while it holds at most
 * `exactLimit` values (the same numbers `distribution` gives, bit for bit), then a mergeable HDR
 * histogram (hdr-histogram-js, 3 significant digits on integer nanoseconds) whose percentiles are
 * within SKETCH_RELATIVE_ERROR of the exact ones. Count, mean, std, min and max stay exact
 * (running sums). The histogram holds values ≥ 0 (a negative one counts as 0 in its percentiles;
 * min, mean and std keep it). Values can come with a count: a simulated decode stretch gives every sequence in
 * the batch the same gap, so a step costs one add however many streams it serves.
 */
import Float64HistogramModule from 'hdr-histogram-js/dist/Float64Histogram';
import { distribution, pKey, type Dist } from '../bench/metrics';

/** Values kept exactly before the sample becomes a histogram (16 MB of doubles). */
export const EXACT_LIMIT = 1 << 21;
/**
 * The histogram's percentile error, relative to the value: 3 significant digits give buckets at
 * most 1/1024 of their value wide, and a percentile reads the bucket's middle.
 */
export const SKETCH_RELATIVE_ERROR = 1 / 2048;
// The package is CommonJS with `exports.default`: a bundler gives the class, Node's ESM loader the exports object.
type Float64Histogram = InstanceType<typeof Float64HistogramModule>;
const Float64Histogram: typeof Float64HistogramModule =
  (Float64HistogramModule as unknown as { default?: typeof Float64HistogramModule }).default ?? Float64HistogramModule;

/** The sketch records integer nanoseconds. */
const NS_PER_MS = 1e6;
const ns = (ms: number) => (ms > 0 ? Math.round(ms * NS_PER_MS) : 0);

export class LatencySample {
  private values: Float64Array | undefined = new Float64Array(64);
  private hist: Float64Histogram | undefined;
  private n = 0;
  // Exact running figures (Welford's mean and sum of squared deviations, weighted).
  private mean = 0;
  private m2 = 0;
  private lo = Infinity;
  private hi = -Infinity;

  constructor(readonly exactLimit = EXACT_LIMIT) {}

  get count(): number {
    return this.n;
  }

  /** True once the sample is a histogram (its percentiles approximate). */
  get sketched(): boolean {
    return this.hist !== undefined;
  }

  add(v: number, count = 1): void {
    if (!(count > 0)) return;
    const n = this.n + count;
    const d = v - this.mean;
    this.mean += (d * count) / n;
    this.m2 += d * count * (v - this.mean);
    if (v < this.lo) this.lo = v;
    if (v > this.hi) this.hi = v;
    if (this.values && n > this.exactLimit) this.toHistogram();
    if (this.values) {
      let a = this.values;
      if (n > a.length) {
        a = new Float64Array(Math.min(Math.max(n, 2 * a.length), this.exactLimit));
        a.set(this.values.subarray(0, this.n));
        this.values = a;
      }
      if (count === 1) a[this.n] = v;
      else a.fill(v, this.n, n);
    } else this.hist!.recordValueWithCount(ns(v), count);
    this.n = n;
  }

  /** Add every value of another sample (either may be exact or a histogram). */
  merge(o: LatencySample): void {
    if (!o.n) return;
    const n = this.n + o.n;
    const d = o.mean - this.mean;
    this.m2 += o.m2 + (d * d * this.n * o.n) / n;
    this.mean += (d * o.n) / n;
    this.lo = Math.min(this.lo, o.lo);
    this.hi = Math.max(this.hi, o.hi);
    if (this.values && o.values && n <= this.exactLimit) {
      if (n > this.values.length) {
        const a = new Float64Array(Math.min(Math.max(n, 2 * this.values.length), this.exactLimit));
        a.set(this.values.subarray(0, this.n));
        this.values = a;
      }
      this.values.set(o.values.subarray(0, o.n), this.n);
    } else {
      if (this.values) this.toHistogram();
      if (o.hist) this.hist!.add(o.hist);
      else for (let i = 0; i < o.n; i++) this.hist!.recordValue(ns(o.values![i]));
    }
    this.n = n;
  }

  /** The Dist `distribution` gives: exactly the same while exact; from the histogram after, with the error stated. */
  dist(percentiles: number[] = [90, 99]): Dist {
    if (this.values) return distribution(this.values.subarray(0, this.n), percentiles);
    const h = this.hist!;
    const at = (p: number) =>
      Math.min(this.hi, Math.max(this.lo, h.medianEquivalentValue(h.getValueAtPercentile(p)) / NS_PER_MS));
    const p: Record<string, number> = {};
    for (const q of percentiles) p[pKey(q)] = at(q);
    return {
      n: this.n,
      mean: this.mean,
      median: at(50),
      std: Math.sqrt(this.m2 / this.n),
      min: this.lo,
      max: this.hi,
      p,
      approx: { relative_error: SKETCH_RELATIVE_ERROR, method: 'HDR histogram, 3 significant digits' },
    };
  }

  private toHistogram() {
    const h = new Float64Histogram(1, 2, 3);
    h.autoResize = true;
    const a = this.values!;
    // Equal values arrive in runs (a step's gap, added with its count): one record per run.
    for (let i = 0; i < this.n;) {
      const v = a[i];
      let j = i + 1;
      while (j < this.n && a[j] === v) j++;
      h.recordValueWithCount(ns(v), j - i);
      i = j;
    }
    this.hist = h;
    this.values = undefined;
  }
}
