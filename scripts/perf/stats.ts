/** Small helpers shared by the perf sections: a summary (percentiles as the bench computes them), rounding, a table. */
import { percentileSorted } from '../../src/core/bench/metrics';

export function summary(xs: number[] | Float64Array): {
  n: number;
  p50: number;
  p99: number;
  mean: number;
  max: number;
} {
  const s = Float64Array.from(xs).sort();
  let sum = 0;
  for (const v of s) sum += v;
  return {
    n: s.length,
    p50: r3(percentileSorted(s, 50)),
    p99: r3(percentileSorted(s, 99)),
    mean: r3(sum / s.length),
    max: r3(s[s.length - 1]),
  };
}

export const r3 = (x: number) => (Number.isFinite(x) ? Math.round(x * 1000) / 1000 : x);
export const r1 = (x: number) => (Number.isFinite(x) ? Math.round(x * 10) / 10 : x);

/** A plain-text table with right-aligned numeric columns. */
export function table(head: string[], rows: (string | number)[][]): string {
  const cells = [head, ...rows.map((r) => r.map((c) => (typeof c === 'number' ? fmt(c) : c)))];
  const w = head.map((_, i) => Math.max(...cells.map((r) => String(r[i] ?? '').length)));
  const line = (r: (string | number)[]) =>
    r.map((c, i) => (i === 0 ? String(c).padEnd(w[i]) : String(c).padStart(w[i]))).join('  ');
  return [line(cells[0]), w.map((x) => '-'.repeat(x)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

function fmt(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  if (Number.isInteger(x)) return x.toLocaleString('en-US');
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(x).toLocaleString('en-US');
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  return x.toFixed(2);
}
