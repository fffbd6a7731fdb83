/**
 * Repeats: a point run N times with fresh prompts gives N values of each statistic; their mean and
 * its 95% confidence interval (Student t over the N runs, stats/ci.ts) are what the point reports.
 * Read from a bench run's values (the per-run points benchValues writes), so a saved notebook
 * yields the same means and facts without rerunning.
 */
import { canonicalStat, metricKey } from '../facts/stat';
import { DEFAULT_LEVEL, meanCi } from '../stats/ci';
import { LATENCIES, RATES, type MeanTarget } from './meanKeys';
import { fin } from '../facts/make';
import { isObj } from '../values';

/** One interval: the mean is the value beside it. */
export interface CiValue {
  lo: number;
  hi: number;
  /** Half-width of the interval. */
  half: number;
  /** Standard deviation over the runs (n − 1). */
  sd: number;
  n: number;
  level: number;
}

/** A point's mean over its repeats: the load, the runs, each stat's mean under its key, and `ci` per key. */
export type MeanRow = Record<string, unknown> & {
  n: number;
  slot: number;
  runs: number[];
  ci: Record<string, CiValue>;
};

/** The statistics each run of a point reports, by the key its mean is written under. */
function runStats(p: Record<string, unknown>): Map<string, { value: number; target: MeanTarget }> {
  const out = new Map<string, { value: number; target: MeanTarget }>();
  for (const { from, target } of RATES) {
    const v = fin(p[from]);
    if (v !== undefined) out.set(target.key, { value: v, target });
  }
  for (const metric of LATENCIES) {
    const d = p[`${metric}_ms`];
    if (!isObj(d)) continue;
    for (const [k, x] of Object.entries(d)) {
      const v = fin(x);
      const stat = k === 'mean' ? 'mean' : canonicalStat(k.replace(/^p(\d+)_(\d+)$/, 'p$1.$2'));
      if (v === undefined || !stat || k === 'n' || k === 'std') continue;
      const key = `${metricKey(metric, stat)}_ms`;
      out.set(key, { value: v, target: { key, of: { kind: 'latency', metric, stat }, unit: 'ms' } });
    }
  }
  return out;
}

/**
 * The means of a run's points grouped by their place in the plan (`slot`), for every group run more
 * than once; empty when nothing was repeated.
 */
export function repeatMeans(points: unknown[], level = DEFAULT_LEVEL): MeanRow[] {
  const groups = new Map<number, { i: number; p: Record<string, unknown> }[]>();
  points.forEach((p, i) => {
    if (!isObj(p) || fin(p.slot) === undefined) return;
    const g = groups.get(p.slot as number) ?? [];
    g.push({ i, p });
    groups.set(p.slot as number, g);
  });
  const rows: MeanRow[] = [];
  for (const [slot, runs] of [...groups].sort((a, b) => a[0] - b[0])) {
    if (runs.length < 2) continue;
    const first = runs[0].p;
    const row: MeanRow = {
      ...(fin(first.rate) !== undefined ? { rate: first.rate } : {}),
      ...(fin(first.concurrency) !== undefined ? { concurrency: first.concurrency } : {}),
      slot,
      n: runs.length,
      runs: runs.map((r) => r.i),
      ci: {},
    };
    const stats = runs.map((r) => runStats(r.p));
    for (const [key] of stats[0]) {
      const xs = stats.map((s) => s.get(key)?.value).filter((x): x is number => x !== undefined);
      const ci = xs.length === runs.length ? meanCi(xs, level) : undefined;
      if (!ci) continue;
      row[key] = round(ci.mean);
      row.ci[key] = { lo: round(ci.lo), hi: round(ci.hi), half: round(ci.half), sd: round(ci.sd), n: ci.n, level };
    }
    rows.push(row);
  }
  return rows;
}

const round = (x: number) => Math.round(x * 1000) / 1000;
