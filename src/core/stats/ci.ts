/**
 * Confidence intervals for the mean of a few repeated measurements (Student's t, the sample
 * standard deviation with n − 1), and whether two such means differ by more than their noise
 * (Welch's t interval for the difference, Welch–Satterthwaite degrees of freedom). The t quantile
 * comes from jstat.
 */
import jStat from 'jstat';

export const DEFAULT_LEVEL = 0.95;

/** The quantile of Student's t with `df` degrees of freedom: P(T ≤ x) = p. */
export function tQuantile(p: number, df: number): number {
  if (!(p > 0 && p < 1) || !(df > 0))
    throw new RangeError(`t quantile needs 0 < p < 1 and df > 0 (got p ${p}, df ${df})`);
  return jStat.studentt.inv(p, df);
}

/** A mean with its confidence interval over n repeats. */
export interface MeanCi {
  n: number;
  mean: number;
  /** Sample standard deviation (n − 1). */
  sd: number;
  /** Half-width: t(1 − (1 − level)/2, n − 1) · sd / √n. */
  half: number;
  lo: number;
  hi: number;
  level: number;
}

/** The mean of `xs` with its `level` confidence interval; undefined below two finite values. */
export function meanCi(xs: readonly number[], level = DEFAULT_LEVEL): MeanCi | undefined {
  const v = xs.filter(Number.isFinite);
  const n = v.length;
  if (n < 2) return undefined;
  const mean = v.reduce((s, x) => s + x, 0) / n;
  const sd = Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1));
  const half = tQuantile(1 - (1 - level) / 2, n - 1) * (sd / Math.sqrt(n));
  return { n, mean, sd, half, lo: mean - half, hi: mean + half, level };
}

/** A mean known with its spread (a CI's n and sd), or a single number with no spread (n = 1, sd = 0). */
export interface Estimate {
  mean: number;
  sd: number;
  n: number;
}

export interface Difference {
  /** b − a. */
  diff: number;
  /** Half-width of the difference's interval at `level`. */
  half: number;
  lo: number;
  hi: number;
  df: number;
  level: number;
  /** The interval excludes zero: the difference is larger than the noise. */
  beyondNoise: boolean;
}

/**
 * The interval for b − a at `level`: Welch's when both sides have a spread, else the side with one
 * against the other as a fixed number (a one-sample t interval). Undefined when neither side has one.
 */
export function difference(a: Estimate, b: Estimate, level = DEFAULT_LEVEL): Difference | undefined {
  const va = a.n >= 2 ? (a.sd * a.sd) / a.n : 0;
  const vb = b.n >= 2 ? (b.sd * b.sd) / b.n : 0;
  const terms = [...(a.n >= 2 ? [{ v: va, df: a.n - 1 }] : []), ...(b.n >= 2 ? [{ v: vb, df: b.n - 1 }] : [])];
  if (!terms.length) return undefined;
  const v = va + vb;
  const diff = b.mean - a.mean;
  // Welch–Satterthwaite; with one side fixed it reduces to that side's n − 1. Zero spread on both: no noise at all.
  const denom = terms.reduce((s, t) => s + (t.v * t.v) / t.df, 0);
  const df = denom > 0 ? (v * v) / denom : terms.reduce((s, t) => s + t.df, 0);
  const half = v > 0 ? tQuantile(1 - (1 - level) / 2, df) * Math.sqrt(v) : 0;
  return { diff, half, lo: diff - half, hi: diff + half, df, level, beyondNoise: diff - half > 0 || diff + half < 0 };
}
