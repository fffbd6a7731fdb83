/**
 * What a token costs: a rental price per GPU-hour over a throughput. $ per million tokens =
 * price per hour of every GPU serving / (tokens per second × 3,600) × 10^6.
 */
import type { Setup } from '../engine/types';
import { gpuCounts } from './parallel';

/** $ per hour of every GPU the setup uses (tp × pp × dp), or undefined when it has no price. */
export function setupPricePerHour(setup: Pick<Setup, 'price' | 'parallel'>): number | undefined {
  return setup.price ? setup.price.perGpuHour * gpuCounts(setup).total : undefined;
}

/** $ per million tokens at `tokPerS` tokens/s for a deployment renting at `perHour` $/h. */
export function dollarsPerMtok(perHour: number, tokPerS: number): number {
  return tokPerS > 0 ? (perHour / (tokPerS * 3600)) * 1e6 : Infinity;
}

/** "$0.108/Mtok" */
export function fmtDollarsPerMtok(v: number): string {
  if (!Number.isFinite(v)) return '—';
  return `$${v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toFixed(3)}/Mtok`;
}
