/**
 * What a token costs: a setup's rental price over a throughput.
 *
 *   $ per million tokens = $/h of every GPU the setup rents / (tok/s × 3,600 s/h) × 10^6
 *
 * Output tokens (what a provider sells), total tokens (prompt + output), and goodput: the output
 * tokens of the requests that met every SLO, the tokens a provider can sell under its promise.
 * Pure functions, no I/O.
 */
import type { Setup } from '../engine/types';
import type { Fact, Point } from '../facts/schema';
import { gpuCounts } from '../physics/parallel';
import { fmtNum } from '../units';

export { parsePrice, priceSchema, type Price } from './price';

/** The formula, as the outputs show it beside the numbers. */
export const COST_FORMULA = '$ per M tokens = $/h of every GPU / (tok/s × 3,600) × 10^6';

/**
 * $ per hour of the whole setup: a per-GPU price times every GPU it uses (tensor × pipeline × data
 * parallel), a per-node price as it is; undefined when the setup has no price.
 */
export function setupPricePerHour(setup: Pick<Setup, 'price' | 'parallel'>): number | undefined {
  const p = setup.price;
  if (!p) return undefined;
  return p.per === 'node' ? p.usdPerHour : p.usdPerHour * gpuCounts(setup).total;
}

/** "$1.20/h per GPU × 8 GPUs = $9.60/h", "$9.60/h per node (8 GPUs)". */
export function priceWords(setup: Pick<Setup, 'price' | 'parallel'>): string {
  const p = setup.price;
  if (!p) return 'no price';
  const n = gpuCounts(setup).total;
  const gpus = `${n} GPU${n > 1 ? 's' : ''}`;
  if (p.per === 'node') return `${fmtUsd(p.usdPerHour)}/h per node (${gpus})`;
  return n > 1
    ? `${fmtUsd(p.usdPerHour)}/h per GPU × ${gpus} = ${fmtUsd(p.usdPerHour * n)}/h`
    : `${fmtUsd(p.usdPerHour)}/h per GPU`;
}

/** $ per million tokens at `tokPerS` tokens/s for a deployment renting at `perHour` $/h (Infinity at 0 tok/s). */
export function dollarsPerMtok(perHour: number, tokPerS: number): number {
  return tokPerS > 0 ? (perHour / (tokPerS * 3600)) * 1e6 : Infinity;
}

/** "$1.20" */
export function fmtUsd(v: number): string {
  return `$${fmtNum(v, v >= 100 ? 0 : 2)}`;
}

/** "$0.108/Mtok"; "—" for no throughput. */
export function fmtDollarsPerMtok(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return '—';
  return `$${v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toFixed(3)}/Mtok`;
}

/** A point's throughputs as costs: output, total and (with SLOs) goodput tokens. */
export interface TokenCosts {
  usd_per_hour: number;
  usd_per_mtok_output: number;
  usd_per_mtok_total: number;
  /** Output tokens of the requests that met every SLO; absent without SLOs. */
  usd_per_mtok_goodput?: number;
}

/** The costs of one point's throughputs (tok/s) at `perHour`. */
export function tokenCosts(
  perHour: number,
  t: { output_tok_s: number; total_tok_s: number; good_tok_s?: number },
): TokenCosts {
  return {
    usd_per_hour: perHour,
    usd_per_mtok_output: dollarsPerMtok(perHour, t.output_tok_s),
    usd_per_mtok_total: dollarsPerMtok(perHour, t.total_tok_s),
    ...(t.good_tok_s !== undefined ? { usd_per_mtok_goodput: dollarsPerMtok(perHour, t.good_tok_s) } : {}),
  };
}

/** The cost facts of a point (finite ones; a point that served nothing states no cost). */
export function costFacts(
  c: Partial<TokenCosts> | undefined,
  common: { point?: Point; at?: (string | number)[]; source?: string },
): Fact[] {
  if (!c || typeof c !== 'object') return [];
  const out: Fact[] = [];
  const perHour = typeof c.usd_per_hour === 'number' && Number.isFinite(c.usd_per_hour) ? c.usd_per_hour : undefined;
  for (const [metric, v] of [
    ['output', c.usd_per_mtok_output],
    ['total', c.usd_per_mtok_total],
    ['goodput', c.usd_per_mtok_goodput],
  ] as const)
    if (typeof v === 'number' && Number.isFinite(v) && v >= 0)
      out.push({
        kind: 'cost',
        metric,
        usd_per_mtok: v,
        ...(perHour !== undefined ? { usd_per_hour: perHour } : {}),
        ...common,
      });
  return out;
}

/** A saving in words: "saves $0.041/Mtok (38%)", "costs $0.020/Mtok more (+15%)", "the same". */
export function savingWords(now: number, alt: number): string {
  if (!Number.isFinite(now) || !Number.isFinite(alt)) return '—';
  const d = now - alt;
  const pct = now > 0 ? Math.abs(d / now) * 100 : 0;
  if (Math.abs(d) < 5e-4 * Math.max(now, 1e-9)) return 'the same';
  return d > 0
    ? `saves ${fmtDollarsPerMtok(d)} (${fmtNum(pct, 0)}%)`
    : `costs ${fmtDollarsPerMtok(-d)} more (+${fmtNum(pct, 0)}%)`;
}
