/**
 * Closed-form inference physics (PHYSICS.md). Pure functions over a setup; base units throughout
 * (bytes, seconds, FLOP, FLOP/s, tokens). Each formula's name travels with its number so a cell can
 * say which one it used.
 */
import { DTYPE_BYTES, type Dtype, type Gpu, type ModelSpec } from '../catalog/types';
import type { Setup } from '../engine/types';

export interface PeakInfo {
  /** Dtype whose peak is used. */
  dtype: Dtype;
  /** FLOP/s (dense). */
  peak: number;
  /** Why this dtype, when it is not the weights' own. */
  note?: string;
}

/**
 * Peak FLOP/s for the dtype the matmuls run in: the weights' dtype when the card has native support
 * for it (fp8 on Hopper/Ada, int8 W8A8), else bf16 (weight-only quantization dequantizes into bf16
 * matmuls, and int4 always computes in bf16).
 */
export function computePeakInfo(gpu: Gpu, weights: Dtype): PeakInfo {
  if (weights !== 'int4' && gpu.peak[weights]) return { dtype: weights, peak: gpu.peak[weights]! };
  const fallback: Dtype = gpu.peak.bf16
    ? 'bf16'
    : gpu.peak.fp16
      ? 'fp16'
      : ((Object.keys(gpu.peak)[0] as Dtype) ?? 'bf16');
  const why =
    weights === 'int4'
      ? 'int4 weights are dequantized into bf16 matmuls'
      : `${gpu.id} has no native ${weights} peak; ${weights} weights are dequantized into ${fallback} matmuls`;
  return { dtype: fallback, peak: gpu.peak[fallback] ?? NaN, note: why };
}

export function computePeak(gpu: Gpu, weights: Dtype): number {
  return computePeakInfo(gpu, weights).peak;
}

/** Bytes of the whole checkpoint in the weights' dtype (what sits in GPU memory). */
export function weightsBytes(model: ModelSpec, weights: Dtype): number {
  return model.params.total * DTYPE_BYTES[weights];
}

/**
 * Which expert weights a MoE decode step reads: `active` (only the k routed experts, right at batch
 * 1), `total` (every expert, right at large batch), or `expected` (the expected number of distinct
 * experts B tokens route to, E·(1 − (1 − k/E)^B) per layer, with uniform routing).
 */
export type MoeWeights = 'active' | 'total' | 'expected';
export const MOE_WEIGHTS: MoeWeights[] = ['active', 'total', 'expected'];

/** Parameters one decode step reads at batch B (all of them for a dense model). */
export function paramsReadPerStep(model: ModelSpec, assumption: MoeWeights = 'expected', batch = 1): number {
  const { total, active } = model.params;
  if (!model.moe || assumption === 'total') return total;
  if (assumption === 'active') return active;
  const E = model.moe.experts;
  const k = model.moe.expertsPerToken;
  const perExpert = (total - active) / (E - k); // one expert, summed over the sparse layers
  const distinct = E * (1 - Math.pow(1 - k / E, Math.max(1, batch)));
  return active + (distinct - k) * perExpert;
}

/** Bytes one decode step reads for weights. */
export function weightsReadPerStep(
  model: ModelSpec,
  weights: Dtype,
  assumption: MoeWeights = 'expected',
  batch = 1,
): number {
  return paramsReadPerStep(model, assumption, batch) * DTYPE_BYTES[weights];
}

/** KV bytes per token = 2 (K and V) × layers × kv_heads × head_dim × bytes. */
export function kvBytesPerToken(model: ModelSpec, kvCache: Dtype): number {
  return 2 * model.layers * model.kvHeads * model.headDim * DTYPE_BYTES[kvCache];
}

/** Ridge point = peak / bandwidth, FLOP per byte: above it a kernel is compute-bound. */
export function ridgePoint(setup: Setup): number {
  return computePeak(setup.gpu, setup.weights) / setup.gpu.bandwidth;
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
  /** Weight bytes a batch-1 step reads (the active experts for a MoE). */
  weights_read_bytes: number;
  kv_bytes_per_token: number;
  kv_bytes_per_request: number;
  decode_step_floor_ms: number;
  ceiling_tok_s: number;
  half_saturation_batch: number;
  asymptote_tok_s: number;
  compute_roof_tok_s: number;
  /** A batch where compute starts to bind (the knee); null when the bandwidth asymptote stays below the compute roof. */
  knee_batch: number | null;
  peak_flops: number;
  peak_dtype: Dtype;
  bandwidth: number;
  moe_weights: MoeWeights | null;
  rows: DecodeRow[];
}

export interface DecodeOptions {
  moeWeights?: MoeWeights;
}

/**
 * Batched decode at context c: a step reads the weights once and each request's KV, and does
 * 2·params FLOPs per token. Aggregate f(B) = BW·B / (W + kv(c)·B), capped by the compute roof
 * peak / (2·params).
 */
export function decodeRoofline(
  setup: Setup,
  context: number,
  batches: number[],
  opts: DecodeOptions = {},
): DecodeRoofline {
  const { gpu, model } = setup;
  const moe = model.moe ? (opts.moeWeights ?? 'expected') : undefined;
  const W = (B: number) => weightsReadPerStep(model, setup.weights, moe, B);
  const kvTok = kvBytesPerToken(model, setup.kvCache);
  const kvReq = kvTok * context;
  const { peak, dtype } = computePeakInfo(gpu, setup.weights);
  const flopsPerToken = 2 * model.params.active;
  const step = (B: number) => {
    const tMem = (W(B) + kvReq * B) / gpu.bandwidth;
    const tCompute = (flopsPerToken * B) / peak;
    return { t: Math.max(tMem, tCompute), bound: tCompute > tMem ? ('compute' as const) : ('bandwidth' as const) };
  };
  const rows = batches.map((B): DecodeRow => {
    const { t, bound } = step(B);
    return { batch: B, step_ms: t * 1e3, per_user_tok_s: 1 / t, aggregate_tok_s: B / t, bound };
  });
  const W1 = W(1);
  // Half saturation: the batch whose KV traffic equals the weight traffic, W(B) = kv(c)·B.
  let half = kvReq > 0 ? W1 / kvReq : Infinity;
  if (moe === 'expected' && kvReq > 0) {
    let lo = 0;
    let hi = Math.max(1, W(1e9) / kvReq);
    for (let i = 0; i < 100; i++) {
      const mid = (lo + hi) / 2;
      if (W(mid) > kvReq * mid) lo = mid;
      else hi = mid;
    }
    half = (lo + hi) / 2;
  } else if (moe === 'total' && kvReq > 0) half = W1 / kvReq;
  const asymptote = kvReq > 0 ? gpu.bandwidth / kvReq : Infinity;
  const computeRoof = peak / flopsPerToken;
  let knee: number | null = null;
  if (asymptote > computeRoof) {
    // Compute binds once 2·params·B / peak ≥ (W + kv·B) / BW.
    for (let B = 1; B <= 1 << 20; B *= 2) {
      if (step(B).bound === 'compute') {
        let lo = B / 2;
        let hi = B;
        for (let i = 0; i < 60; i++) {
          const mid = (lo + hi) / 2;
          if (step(mid).bound === 'compute') hi = mid;
          else lo = mid;
        }
        knee = hi;
        break;
      }
    }
  }
  return {
    context,
    weights_bytes: weightsBytes(model, setup.weights),
    weights_read_bytes: W1,
    kv_bytes_per_token: kvTok,
    kv_bytes_per_request: kvReq,
    decode_step_floor_ms: (W1 / gpu.bandwidth) * 1e3,
    ceiling_tok_s: gpu.bandwidth / W1,
    half_saturation_batch: half,
    asymptote_tok_s: asymptote,
    compute_roof_tok_s: computeRoof,
    knee_batch: knee,
    peak_flops: peak,
    peak_dtype: dtype,
    bandwidth: gpu.bandwidth,
    moe_weights: moe ?? null,
    rows,
  };
}

/** Prefill compute floor, simple form: 2 · params · prompt tokens / peak (seconds); active params for a MoE. */
export function prefillFloorSimple(setup: Setup, promptTokens: number): number {
  return (2 * setup.model.params.active * promptTokens) / computePeak(setup.gpu, setup.weights);
}

export interface PrefillCount {
  /** 2 · (active − embedding − lm_head) · N: every linear layer for every prompt token. */
  linear_flops: number;
  /** 2 · vocab · hidden: lm_head for the last token only (the one the first output token needs). */
  lm_head_flops: number;
  /** Causal attention: QKᵀ and AV, 2 FLOP per multiply-add, over N(N+1)/2 query–key pairs. */
  attention_flops: number;
  total_flops: number;
  seconds: number;
}

/**
 * Prefill compute floor, stricter count: no FLOPs for the embedding gather, lm_head on the last
 * token only, plus causal attention 4 · layers · heads · head_dim · N(N+1)/2.
 */
export function prefillFloorStrict(setup: Setup, promptTokens: number): PrefillCount {
  const m = setup.model;
  const N = promptTokens;
  const lmHeadParams = m.vocab * m.hidden;
  const nonEmbedding = m.params.active - m.params.embedding - (m.tiedEmbeddings ? 0 : m.params.lmHead);
  const linear = 2 * nonEmbedding * N;
  const lmHead = 2 * lmHeadParams;
  const attention = 4 * m.layers * m.heads * m.headDim * ((N * (N + 1)) / 2);
  const total = linear + lmHead + attention;
  return {
    linear_flops: linear,
    lm_head_flops: lmHead,
    attention_flops: attention,
    total_flops: total,
    seconds: total / computePeak(setup.gpu, setup.weights),
  };
}

export interface OperatingPoint {
  label: string;
  /** FLOP per byte of HBM traffic. */
  intensity: number;
  /** FLOP/s the roofline allows at that intensity: min(peak, BW · I). */
  attainable_flops: number;
  bound: 'bandwidth' | 'compute';
}

/** A decode step at batch B and context c: 2·params·B FLOP over W + kv(c)·B bytes. */
export function decodePoint(setup: Setup, context: number, batch: number, moe?: MoeWeights): OperatingPoint {
  const m = setup.model;
  const bytes = weightsReadPerStep(m, setup.weights, moe, batch) + kvBytesPerToken(m, setup.kvCache) * context * batch;
  const flops = 2 * m.params.active * batch;
  return point(setup, `decode B=${batch}`, flops / bytes);
}

/** A prefill of N tokens: 2·params·N FLOP over the weights read once plus N tokens of KV written. */
export function prefillPoint(setup: Setup, promptTokens: number): OperatingPoint {
  const m = setup.model;
  const bytes = weightsBytes(m, setup.weights) + kvBytesPerToken(m, setup.kvCache) * promptTokens;
  const flops = 2 * m.params.active * promptTokens;
  return point(setup, `prefill N=${promptTokens}`, flops / bytes);
}

function point(setup: Setup, label: string, intensity: number): OperatingPoint {
  const peak = computePeak(setup.gpu, setup.weights);
  const bw = setup.gpu.bandwidth * intensity;
  return { label, intensity, attainable_flops: Math.min(peak, bw), bound: bw < peak ? 'bandwidth' : 'compute' };
}
