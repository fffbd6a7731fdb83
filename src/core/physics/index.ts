/**
 * Closed-form inference physics (PHYSICS.md). Pure functions over a setup; base units throughout
 * (bytes, seconds, FLOP/s, tokens).
 */
import { DTYPE_BYTES, type Dtype, type Gpu, type ModelSpec } from '../catalog/types';
import type { Setup } from '../engine/types';

/** Peak FLOP/s for the dtype the matmuls run in (weights' dtype; int4 weights compute in bf16). */
export function computePeak(gpu: Gpu, weights: Dtype): number {
  const d: Dtype = weights === 'int4' ? 'bf16' : weights;
  return gpu.peak[d] ?? gpu.peak.bf16 ?? gpu.peak.fp16 ?? Object.values(gpu.peak)[0] ?? NaN;
}

export function weightsBytes(model: ModelSpec, weights: Dtype): number {
  return model.params.total * DTYPE_BYTES[weights];
}

/** Bytes one decode step reads for weights: the active parameters (all of them for a dense model). */
export function weightsReadPerStep(model: ModelSpec, weights: Dtype, assumption: 'active' | 'total' = 'active'): number {
  return (assumption === 'active' ? model.params.active : model.params.total) * DTYPE_BYTES[weights];
}

/** KV bytes per token = 2 (K and V) × layers × kv_heads × head_dim × bytes. */
export function kvBytesPerToken(model: ModelSpec, kvCache: Dtype): number {
  return 2 * model.layers * model.kvHeads * model.headDim * DTYPE_BYTES[kvCache];
}

export interface DecodeRow {
  batch: number;
  step_ms: number;
  per_user_tok_s: number;
  aggregate_tok_s: number;
  bound: 'bandwidth' | 'compute';
}

export interface DecodeRoofline {
  context: number;
  weights_bytes: number;
  kv_bytes_per_token: number;
  decode_step_floor_ms: number;
  ceiling_tok_s: number;
  half_saturation_batch: number;
  asymptote_tok_s: number;
  compute_roof_tok_s: number;
  rows: DecodeRow[];
}

/**
 * Batched decode at context c: a step reads the weights once and each request's KV, and does
 * 2·params FLOPs per token. Aggregate f(B) = BW·B / (W + kv(c)·B), capped by the compute roof.
 */
export function decodeRoofline(setup: Setup, context: number, batches: number[]): DecodeRoofline {
  const { gpu, model } = setup;
  const W = weightsReadPerStep(model, setup.weights);
  const kvTok = kvBytesPerToken(model, setup.kvCache);
  const kvReq = kvTok * context;
  const peak = computePeak(gpu, setup.weights);
  const flopsPerToken = 2 * model.params.active;
  const rows = batches.map((B): DecodeRow => {
    const tMem = (W + kvReq * B) / gpu.bandwidth;
    const tCompute = (flopsPerToken * B) / peak;
    const t = Math.max(tMem, tCompute);
    return { batch: B, step_ms: t * 1e3, per_user_tok_s: 1 / t, aggregate_tok_s: B / t, bound: tCompute > tMem ? 'compute' : 'bandwidth' };
  });
  return {
    context,
    weights_bytes: weightsBytes(model, setup.weights),
    kv_bytes_per_token: kvTok,
    decode_step_floor_ms: (W / gpu.bandwidth) * 1e3,
    ceiling_tok_s: gpu.bandwidth / W,
    half_saturation_batch: kvReq > 0 ? W / kvReq : Infinity,
    asymptote_tok_s: kvReq > 0 ? gpu.bandwidth / kvReq : Infinity,
    compute_roof_tok_s: peak / flopsPerToken,
    rows,
  };
}

/** Prefill compute floor, simple form: 2 · params · prompt tokens / peak (seconds). */
export function prefillFloorSimple(setup: Setup, promptTokens: number): number {
  return (2 * setup.model.params.total * promptTokens) / computePeak(setup.gpu, setup.weights);
}
