/**
 * Statistics as data. A stat is written once, as a string ('mean', 'median', 'p50', 'p95', 'p99.9',
 * 'max'), and parsed here, in one place: every table, SLO, check and comparison asks this module
 * what a stat means, so a new percentile needs no code anywhere else.
 */

/** The key a distribution keeps a percentile under: p90, p99, p99_9. */
export function pKey(p: number): string {
  return `p${String(p).replace('.', '_')}`;
}

/** A parsed statistic: the mean, an extreme, or a percentile q in (0, 100). */
export type Stat = { kind: 'mean' } | { kind: 'min' } | { kind: 'max' } | { kind: 'pct'; q: number };

/** The latency metrics a stat applies to (vLLM's definitions; step and rtt are ours). */
export const LATENCY_METRICS = ['ttft', 'tpot', 'itl', 'e2e', 'step', 'rtt'] as const;
export type LatencyMetric = (typeof LATENCY_METRICS)[number];

/**
 * Parse a stat: mean | avg | min | max | median | pNN | pNN.N | pNN_N (the bench's own key form).
 * 'median' is p50. Undefined when the text is no stat.
 */
export function parseStat(text: string): Stat | undefined {
  const s = text.trim().toLowerCase();
  if (s === 'mean' || s === 'avg' || s === 'average') return { kind: 'mean' };
  if (s === 'min') return { kind: 'min' };
  if (s === 'max') return { kind: 'max' };
  if (s === 'median') return { kind: 'pct', q: 50 };
  const m = /^p(\d{1,2}(?:[._]\d+)?)$/.exec(s);
  if (!m) return undefined;
  const q = Number(m[1].replace('_', '.'));
  return q > 0 && q < 100 ? { kind: 'pct', q } : undefined;
}

/** The one spelling of a stat: 'mean', 'min', 'max', 'p50', 'p95', 'p99.9'. */
export function statName(s: Stat): string {
  return s.kind === 'pct' ? `p${s.q}` : s.kind;
}

/** Canonical spelling of a stat text ('median' → 'p50', 'p99_9' → 'p99.9'); undefined when it is none. */
export function canonicalStat(text: string): string | undefined {
  const s = parseStat(text);
  return s && statName(s);
}

/** The percentile a stat stands for (mean and extremes have none). */
export function statQuantile(text: string): number | undefined {
  const s = parseStat(text);
  return s?.kind === 'pct' ? s.q : undefined;
}

/** Words for messages: 'TTFT p95', 'TTFT' for the mean. */
export function statWords(metric: string, stat: string): string {
  const m = metric.toUpperCase();
  return stat === 'mean' ? m : `${m} ${stat}`;
}

/**
 * A key that names a metric and a stat, the way a record cell or an SLO writes it: `ttft` (the
 * mean), `ttft_p95`, `tpot_p99.9`, `e2e_median`. Undefined when the key is not of that form.
 */
export function parseMetricKey(key: string): { metric: LatencyMetric; stat: string } | undefined {
  const m = /^([a-z0-9]+?)(?:_(.+))?$/.exec(key);
  if (!m || !(LATENCY_METRICS as readonly string[]).includes(m[1])) return undefined;
  const metric = m[1] as LatencyMetric;
  if (m[2] === undefined) return { metric, stat: 'mean' };
  const stat = canonicalStat(m[2]);
  return stat ? { metric, stat } : undefined;
}

/** The key a record or an SLO writes for a metric and stat: ttft, ttft_p95. */
export function metricKey(metric: string, stat: string): string {
  return stat === 'mean' ? metric : `${metric}_${stat}`;
}

/** Value of a stat read from a distribution that keeps mean/median/min/max and percentiles by pKey. */
export function statOf(
  d: { mean: number; median: number; min?: number; max?: number; p: Record<string, number> },
  stat: string,
): number | undefined {
  const s = parseStat(stat);
  if (!s) return undefined;
  if (s.kind === 'mean') return d.mean;
  if (s.kind === 'min') return d.min;
  if (s.kind === 'max') return d.max;
  if (s.q === 50) return d.median;
  return d.p[pKey(s.q)];
}

/** The per-request latencies an SLO may bound (vLLM's goodput: ttft, tpot, e2el). */
export const SLO_METRICS = ['ttft', 'tpot', 'e2e'] as const;
export type SloMetric = (typeof SLO_METRICS)[number];

/**
 * One service-level objective, `ttft_p95: 200 ms`: a request is good when its own TTFT is at most
 * 200 ms (goodput counts the requests that meet every limit), and the point meets the SLO when
 * the stat of its distribution (here the p95) is at most the limit. Any stat: the percentile it
 * needs is computed whatever percentiles the cell asked for.
 */
export interface SloLimit {
  metric: SloMetric;
  /** Canonical stat (stat.ts): mean, p50, p95, p99.9 … */
  stat: string;
  ms: number;
}
export type SloSpec = SloLimit[];

/** An SLO key (ttft_p95, tpot_p99.9, e2e_median, ttft for the mean); undefined when it is none. */
export function parseSloKey(key: string): { metric: SloMetric; stat: string } | undefined {
  const k = parseMetricKey(key);
  return k && (SLO_METRICS as readonly string[]).includes(k.metric)
    ? { metric: k.metric as SloMetric, stat: k.stat }
    : undefined;
}

/** An SLO from its keys and limits in ms: {ttft_p95: 200} → [{metric: 'ttft', stat: 'p95', ms: 200}]. */
export function sloOf(limits: Record<string, number | undefined>): SloSpec {
  const out: SloSpec = [];
  for (const [key, ms] of Object.entries(limits)) {
    const k = parseSloKey(key);
    if (!k)
      throw new Error(
        `"${key}" is not an SLO key: write METRIC_STAT, e.g. ttft_p95 (metrics: ${SLO_METRICS.join(', ')})`,
      );
    if (ms !== undefined) out.push({ ...k, ms });
  }
  return out;
}

/** An SLO limit a point missed: the value its stat read (undefined: not measured). */
export interface SloMiss {
  limit: SloLimit;
  value?: number;
}

/**
 * The limits of `slo` a point's distributions miss: a stat over its limit, or not measured at all,
 * except TPOT (every request one token long has none, and misses no TPOT limit).
 */
export function sloMisses(
  dists: Partial<Record<`${SloMetric}_ms`, Parameters<typeof statOf>[0] | undefined>>,
  slo: SloSpec,
): SloMiss[] {
  const out: SloMiss[] = [];
  for (const l of slo) {
    const d = dists[`${l.metric}_ms`];
    const v = d ? statOf(d, l.stat) : undefined;
    if (v === undefined || Number.isNaN(v)) {
      if (l.metric !== 'tpot') out.push({ limit: l });
    } else if (v > l.ms) out.push({ limit: l, value: v });
  }
  return out;
}
