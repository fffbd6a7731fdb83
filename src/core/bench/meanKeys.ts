/**
 * The keys a point's means are written under (ttft_p99_ms, output_throughput_tok_s), what each is a
 * mean of, and the `ci` facts read back from them. Kept apart from repeats.ts (which computes the
 * intervals) so that reading a saved notebook's facts loads no statistics library.
 */
import type { Fact, Point } from '../facts';
import { canonicalStat, type LatencyMetric } from '../facts/stat';
import { fin } from '../facts/make';
import { isObj } from '../values';

/** What a mean is of: a latency stat, a token rate or a request rate, with the key it is written under. */
export interface MeanTarget {
  key: string;
  of:
    | { kind: 'latency'; metric: LatencyMetric; stat: string }
    | { kind: 'throughput'; metric: 'output' | 'total' }
    | { kind: 'request-rate'; metric: 'completed' | 'goodput' };
  unit: 'ms' | 'tok/s' | 'req/s';
}

export const RATES: { from: string; target: MeanTarget }[] = [
  {
    from: 'output_throughput',
    target: { key: 'output_throughput_tok_s', of: { kind: 'throughput', metric: 'output' }, unit: 'tok/s' },
  },
  {
    from: 'total_token_throughput',
    target: { key: 'total_token_throughput_tok_s', of: { kind: 'throughput', metric: 'total' }, unit: 'tok/s' },
  },
  {
    from: 'request_throughput',
    target: { key: 'request_throughput_req_s', of: { kind: 'request-rate', metric: 'completed' }, unit: 'req/s' },
  },
  { from: 'goodput', target: { key: 'goodput_req_s', of: { kind: 'request-rate', metric: 'goodput' }, unit: 'req/s' } },
];
export const LATENCIES: LatencyMetric[] = ['ttft', 'tpot', 'itl', 'e2e'];

/** The target a mean key stands for ("ttft_p99_ms" → TTFT p99 in ms). */
export function meanTarget(key: string): MeanTarget | undefined {
  const r = RATES.find((x) => x.target.key === key);
  if (r) return r.target;
  const m = /^([a-z0-9]+?)_(.+)_ms$|^([a-z0-9]+)_ms$/.exec(key);
  if (!m) return undefined;
  const metric = (m[1] ?? m[3]) as LatencyMetric;
  if (!LATENCIES.includes(metric)) return undefined;
  const stat = m[2] === undefined ? 'mean' : canonicalStat(m[2]);
  return stat ? { key, of: { kind: 'latency', metric, stat }, unit: 'ms' } : undefined;
}

/** The `ci` facts of a run's means: each the mean of a stat over the repeats, with its interval. */
export function ciFacts(means: unknown[], loop: 'open' | 'closed' | undefined, pointsKey: string): Fact[] {
  const out: Fact[] = [];
  for (const row of means) {
    if (!isObj(row) || !isObj(row.ci)) continue;
    const concurrency = fin(row.concurrency);
    const rate = fin(row.rate);
    const point: Point = {
      ...(loop ? { loop } : {}),
      ...(concurrency !== undefined ? { concurrency } : {}),
      ...(rate !== undefined ? { req_s: rate } : {}),
    };
    for (const [key, c] of Object.entries(row.ci)) {
      const target = meanTarget(key);
      const mean = fin(row[key]);
      if (!target || !isObj(c) || mean === undefined) continue;
      const [lo, hi, sd, n, level] = [fin(c.lo), fin(c.hi), fin(c.sd), fin(c.n), fin(c.level)];
      if (lo === undefined || hi === undefined || sd === undefined || n === undefined || level === undefined) continue;
      out.push({
        kind: 'ci',
        of: target.of,
        unit: target.unit,
        mean,
        lo,
        hi,
        sd,
        n,
        level,
        method: 'student-t',
        point,
        at: fin(row.slot) !== undefined ? [pointsKey, row.slot as number] : [pointsKey],
        source: 'client',
      });
    }
  }
  return out;
}
