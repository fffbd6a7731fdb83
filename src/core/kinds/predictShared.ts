/** Pieces the predict kinds share: a ratio key ("0.9" or "90%"), setup words, server knobs. */
import { z } from 'zod';
import type { Setup } from '../engine/types';
import { computePeakInfo } from '../physics';
import { fmtIn, parseQuantity } from '../units';
import { numberOf } from '../values';

/** A fraction written as a number in (0, 1] or a percentage: `0.9`, `90%`. */
export const fraction = z.union([z.number(), z.string()]).transform((v, ctx): number => {
  let f: number;
  if (typeof v === 'number') f = v;
  else {
    const r = parseQuantity(v, { dims: ['ratio'] });
    if (!r.ok) {
      ctx.addIssue({ code: 'custom', message: `"${v}" is not a fraction: write 0.9 or 90%` });
      return z.NEVER;
    }
    f = r.quantity.value;
  }
  if (!(f > 0 && f <= 1)) {
    ctx.addIssue({
      code: 'custom',
      message: `${v} is outside (0, 1]: write a fraction such as 0.9, or a percentage such as 90%`,
    });
    return z.NEVER;
  }
  return f;
});

/** A knob a setup cell carried (numbers, or quantities parsed by the setup schema). */
export function serverNumber(setup: Setup | undefined, key: string): number | undefined {
  const v = setup?.server?.[key];
  return typeof v === 'number' && !Number.isFinite(v) ? undefined : numberOf(v);
}

/** "Qwen3-8B bf16 (KV bf16) on a100-sxm4-80gb" */
export function setupLabel(s: Setup): string {
  return `${s.model.name} ${s.weights}${s.kvCache !== s.weights ? ` (KV ${s.kvCache})` : ''} on ${s.gpu.id}`;
}

/** "312 TFLOP/s (bf16, dense)" plus why that dtype, when it is not the weights' own. */
export function peakWords(s: Setup): string {
  const p = computePeakInfo(s.gpu, s.weights);
  return `${fmtIn(p.peak, 'TFLOP/s', p.peak >= 1e14 ? 0 : 1)} (${p.dtype}, dense)${p.note ? `; ${p.note}` : ''}`;
}
