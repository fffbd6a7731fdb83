/** Small builders the kinds use to state facts: non-finite numbers state nothing. */
import type { Setup } from '../engine/types';
import type { Fact, Point } from './schema';
import { canonicalStat, type LatencyMetric } from './stat';

/** The number, when it is a finite one. */
export function fin(x: unknown): number | undefined {
  return typeof x === 'number' && Number.isFinite(x) ? x : undefined;
}

type Common = { point?: Point; at?: (string | number)[]; source?: string };

/**
 * Latency facts from a summary that keeps mean, median and percentiles by key (p90, p99, p99_9,
 * as the bench and the simulator write them); every stat it holds becomes a fact.
 */
export function latencyFacts(metric: LatencyMetric, d: unknown, common: Common): Fact[] {
  return statsOf(d).map(({ stat, ms }) => ({ kind: 'latency', metric, stat, ms, ...common }));
}

/**
 * The stats of a summary in ms (mean, median, percentiles by key), each in its one spelling;
 * negative and non-finite numbers state nothing. With `extremes`, also max, and a p50 kept by key
 * where the summary has no median (the client's loop lag is {p50, p99, max}).
 */
export function statsOf(d: unknown, extremes = false): { stat: string; ms: number }[] {
  if (typeof d !== 'object' || d === null) return [];
  const o = d as Record<string, unknown>;
  const out: { stat: string; ms: number }[] = [];
  const put = (stat: string, v: unknown) => {
    const ms = fin(v);
    if (ms !== undefined && ms >= 0) out.push({ stat, ms });
  };
  put('mean', o.mean);
  put('p50', o.median);
  const p = typeof o.p === 'object' && o.p !== null ? (o.p as Record<string, unknown>) : o;
  for (const [k, v] of Object.entries(p)) {
    const stat = /^p\d/.test(k) ? canonicalStat(k) : undefined;
    if (stat && (stat !== 'p50' || (extremes && o.median === undefined))) put(stat, v);
  }
  if (extremes) put('max', o.max);
  return out;
}

/**
 * The setup a cell ran on, as one fact: the setup cell's own (with its endpoint), a bench that
 * measured on it, a prediction made for it.
 */
export function setupFact(s: Setup, o: { source?: string; endpoint?: boolean } = {}): Extract<Fact, { kind: 'setup' }> {
  return {
    kind: 'setup',
    name: s.name,
    gpu: s.gpu.id,
    model: s.model.id,
    weights: s.weights,
    kv_cache: s.kvCache,
    ...(o.endpoint && s.endpoint ? { endpoint: s.endpoint } : {}),
    params_total: s.model.params.total,
    params_active: s.model.params.active,
    ...(o.source ? { source: o.source } : {}),
  };
}
