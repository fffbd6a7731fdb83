/**
 * `predict: floors` — the times no server can beat for a setup: the prefill compute floor of N
 * prompt tokens (two formulas, each named), the decode step floor, the ridge point.
 */
import { z } from 'zod';
import { factsOutput } from '../engine/outputs';
import { quantity } from '../engine/schema';
import type { KindModule } from '../engine/types';
import type { Fact } from '../facts';
import { fin } from '../facts/make';
import {
  computePeakInfo,
  decodeFloorSeconds,
  kvBytesPerToken,
  prefillFloorSimple,
  prefillFloorStrict,
  ridgePoint,
  weightsBytes,
} from '../physics';
import { fmtBytes, fmtNum } from '../units';
import { peakWords, setupLabel } from './predictShared';

const schema = z
  .object({
    predict: z.literal('floors'),
    /** Prompt tokens of one request (`input:` is the same key, as a bench cell spells it). */
    prompt: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    input: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
  })
  .strict()
  .refine((c) => !(c.prompt && c.input), {
    message: 'Give "prompt:" or "input:", not both (they are the same key)',
    path: ['input'],
  });

type Cell = z.output<typeof schema>;

export const SIMPLE_FORMULA = '2 · params · N / peak';
export const STRICT_FORMULA =
  '(2 · non-embedding params · N + 2 · vocab · hidden + 4 · layers · heads · head_dim · N(N+1)/2) / peak';

/** What a floors prediction states: the floors, the per-user ceiling, the ridge point, the weights. */
function floorFacts(v: Record<string, unknown>): Fact[] {
  const source = 'predict: floors';
  const out: Fact[] = [];
  const prompt = fin(v.prompt_tokens);
  const floor = (metric: 'prefill' | 'prefill-strict' | 'decode-step', ms: unknown, formula: unknown) => {
    const x = fin(ms);
    if (x !== undefined)
      out.push({
        kind: 'floor',
        metric,
        ms: x,
        ...(metric === 'decode-step' || prompt === undefined ? {} : { prompt_tokens: prompt }),
        formula: String(formula),
        source,
      });
  };
  floor('prefill', v.prefill_floor_ms, v.prefill_floor_formula ?? SIMPLE_FORMULA);
  floor('prefill-strict', v.prefill_floor_strict_ms, v.prefill_floor_strict_formula ?? STRICT_FORMULA);
  floor('decode-step', v.decode_step_floor_ms, 'W / BW');
  const ceiling = fin(v.ceiling_tok_s);
  if (ceiling !== undefined)
    out.push({ kind: 'ceiling', metric: 'per-user', tok_s: ceiling, formula: 'BW / W', source });
  const ridge = fin(v.ridge_flop_per_byte);
  const peak = fin(v.peak_flops);
  const bw = fin(v.bandwidth);
  if (ridge !== undefined && peak !== undefined && bw !== undefined)
    out.push({
      kind: 'roofline',
      ridge_flop_per_byte: ridge,
      peak_flop_s: peak,
      bandwidth_bytes_s: bw,
      dtype: String(v.peak_dtype),
      source,
    });
  const w = fin(v.weights_bytes);
  if (w !== undefined) out.push({ kind: 'weights', bytes: w, source });
  if (prompt !== undefined) out.push({ kind: 'tokens', metric: 'prompt', tokens: prompt, source });
  return out;
}

export const floorsKind: KindModule<Cell> = {
  key: 'predict',
  variant: 'floors',
  summary: 'predict: floors — prefill compute floor, decode step floor, ridge point',
  schema,
  needsSetup: true,
  migrate: floorFacts,
  async run(cell, ctx) {
    const s = ctx.setup!;
    const N = (cell.prompt ?? cell.input)?.value ?? 1000;
    const peak = computePeakInfo(s.gpu, s.weights);
    const simple = prefillFloorSimple(s, N);
    const strict = prefillFloorStrict(s, N);
    // On several GPUs each reads its share, plus the all-reduces (physics/parallel).
    const decodeFloor = decodeFloorSeconds(s);
    const ridge = ridgePoint(s);
    const prefillBw = weightsBytes(s.model, s.weights, s.unquantized) / s.gpu.bandwidth;
    const values = {
      prompt_tokens: N,
      prefill_floor_ms: simple * 1e3,
      prefill_floor_formula: SIMPLE_FORMULA,
      prefill_floor_strict_ms: strict.seconds * 1e3,
      prefill_floor_strict_formula: STRICT_FORMULA,
      prefill_flops: 2 * s.model.params.active * N,
      prefill_flops_strict: strict.total_flops,
      prefill_attention_flops: strict.attention_flops,
      prefill_weight_read_ms: prefillBw * 1e3,
      decode_step_floor_ms: decodeFloor * 1e3,
      ceiling_tok_s: 1 / decodeFloor,
      ridge_flop_per_byte: ridge,
      peak_flops: peak.peak,
      peak_dtype: peak.dtype,
      bandwidth: s.gpu.bandwidth,
      weights_bytes: weightsBytes(s.model, s.weights, s.unquantized),
      kv_bytes_per_token: kvBytesPerToken(s.model, s.kvCache),
    };
    const facts: [string, string][] = [
      [`prefill floor, simple: ${SIMPLE_FORMULA}`, `${fmtNum(values.prefill_floor_ms, 1)} ms`],
      [
        'prefill floor, stricter count: no embedding gather, lm_head on the last token, + causal attention',
        `${fmtNum(values.prefill_floor_strict_ms, 1)} ms`,
      ],
      ['  of which causal attention', `${fmtNum((strict.attention_flops / peak.peak) * 1e3, 2)} ms`],
      [
        'prefill weight read (W / BW; prefill is compute-bound above it)',
        `${fmtNum(values.prefill_weight_read_ms, 2)} ms`,
      ],
      ['decode step floor = W / BW', `${fmtNum(values.decode_step_floor_ms, 2)} ms`],
      ['per-user decode ceiling = BW / W', `${fmtNum(values.ceiling_tok_s, 1)} tok/s`],
      ['ridge point = peak / BW', `${fmtNum(ridge, 0)} FLOP/byte`],
      ['peak used', peakWords(s)],
      ['weights W', fmtBytes(values.weights_bytes)],
    ];
    return {
      values,
      facts: floorFacts(values),
      outputs: [
        factsOutput(
          `Floors — ${setupLabel(s)}, prompt ${fmtNum(N, 0)} tokens`,
          facts,
          'A measured TTFT below the prefill floor is not a prefill (a prefix-cache hit, or a different prompt length); a step below the decode floor is not reading the weights.',
        ),
      ],
    };
  },
};
