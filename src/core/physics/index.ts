/**
 * Closed-form inference physics (docs/physics.md). Pure functions over a setup; base units throughout
 * (bytes, seconds, FLOP, FLOP/s, tokens). Each formula's name travels with its number so a cell can
 * say which one it used.
 */
import { DTYPE_BYTES, type Dtype, type Gpu, type ModelSpec, type WidePart } from '../catalog/types';
import type { Setup } from '../engine/types';
import {
  commSecondsPerStep,
  kvBytesPerTokenPerGpu,
  layersPerStage,
  parallelOf,
  residentWeightsPerGpu,
  type CommTerm,
} from './parallel';

export * from './parallel';

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

/**
 * Parameters a quantized checkpoint keeps at 16 bits: the embedding table, lm_head (the same
 * tensor when tied) and the norms, as listed in `wide`. fp8/int8/int4 releases (llm-compressor,
 * AutoAWQ, GPTQ, ModelOpt) quantize the linear layers and leave these in bf16.
 */
export function wideParams(model: ModelSpec, wide: readonly WidePart[] | undefined): number {
  if (!wide?.length) return 0;
  const p = model.params;
  let n = 0;
  const emb = wide.includes('embeddings');
  if (emb) n += p.embedding;
  // A tied lm_head is the embedding tensor: counted once.
  if (wide.includes('lm_head') && !(model.tiedEmbeddings && emb)) n += model.tiedEmbeddings ? p.embedding : p.lmHead;
  if (wide.includes('norms')) n += p.norms ?? 0;
  return n;
}

/** Bytes of `params` parameters, `wideN` of them at 16 bits and the rest at the weights' dtype. */
function mixedBytes(params: number, wideN: number, weights: Dtype): number {
  const b = DTYPE_BYTES[weights];
  return (params - wideN) * b + wideN * Math.max(b, 2);
}

/**
 * Bytes of the whole checkpoint (what sits in GPU memory): every parameter at the weights' dtype,
 * except the `wide` parts at 16 bits. Without `wide`, the uniform count params × bytes.
 */
export function weightsBytes(model: ModelSpec, weights: Dtype, wide?: readonly WidePart[]): number {
  return mixedBytes(model.params.total, wideParams(model, wide), weights);
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

/** Bytes one decode step reads for weights (the `wide` parts at 16 bits), on one GPU. */
export function weightsReadPerStep(
  model: ModelSpec,
  weights: Dtype,
  assumption: MoeWeights = 'expected',
  batch = 1,
  wide?: readonly WidePart[],
): number {
  return mixedBytes(paramsReadPerStep(model, assumption, batch), wideParams(model, wide), weights);
}

/** A checkpoint's bytes by part: embedding, lm_head (0 when tied), norms, and the total. */
export function weightPartsBytes(model: ModelSpec, weights: Dtype, wide?: readonly WidePart[]) {
  const b = DTYPE_BYTES[weights];
  const w = (part: WidePart) => (wide?.includes(part) ? Math.max(b, 2) : b);
  const p = model.params;
  // A tied lm_head is the embedding tensor: at 16 bits if either name is kept wide.
  const embB = model.tiedEmbeddings && wide?.includes('lm_head') ? Math.max(b, 2) : w('embeddings');
  return {
    total: weightsBytes(model, weights, wide),
    embedding: p.embedding * embB,
    lmHead: model.tiedEmbeddings ? 0 : p.lmHead * w('lm_head'),
    norms: (p.norms ?? 0) * w('norms'),
  };
}

/** Weight bytes on the fullest GPU of a setup (all of them on one GPU), and which stage that is. */
export function setupWeightsResident(setup: Setup): { bytes: number; stage: 'only' | 'first' | 'last' } {
  return residentWeightsPerGpu(setup, weightPartsBytes(setup.model, setup.weights, setup.unquantized));
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
  /** Time the GPUs spend talking in one step (all-reduces and stage sends), ms; 0 on one GPU. */
  comm_ms: number;
  /** Pipeline bubble: the fraction of stage time idle because fewer microbatches than stages are in flight. */
  bubble: number;
}

export interface DecodeRoofline {
  context: number;
  weights_bytes: number;
  /** Weight bytes a batch-1 step reads (the active experts for a MoE), over the whole replica. */
  weights_read_bytes: number;
  /** Weight bytes resident on the fullest GPU. */
  weights_per_gpu_bytes: number;
  kv_bytes_per_token: number;
  /** KV bytes one token costs one GPU (its heads and its stage's layers). */
  kv_bytes_per_token_per_gpu: number;
  kv_bytes_per_request: number;
  /** Weight read time over the stages a token passes + the batch-1 communication, ms. */
  decode_step_floor_ms: number;
  /** Batch-1 communication of one step, ms (0 on one GPU). */
  comm_floor_ms: number;
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
  tensor_parallel: number;
  pipeline_parallel: number;
  data_parallel: number;
  rows: DecodeRow[];
}

export interface DecodeOptions {
  moeWeights?: MoeWeights;
}

/**
 * Batched decode at context c: a step reads the weights once and each request's KV, and does
 * 2·params FLOPs per token. Aggregate f(B) = BW·B / (W + kv(c)·B), capped by the compute roof
 * peak / (2·params). On several GPUs (one replica; `dp` replicas multiply it): each GPU reads its
 * 1/(tp·pp) of the weights and its heads' KV, a layer adds two all-reduces, and with pp stages up
 * to pp microbatches of B/pp are in flight; a token's step is pp stage times plus the sends.
 */
export function decodeRoofline(
  setup: Setup,
  context: number,
  batches: number[],
  opts: DecodeOptions = {},
): DecodeRoofline {
  const { gpu, model } = setup;
  const par = parallelOf(setup);
  const { tp, pp } = par;
  const moe = model.moe ? (opts.moeWeights ?? 'expected') : undefined;
  const W = (B: number) => weightsReadPerStep(model, setup.weights, moe, B, setup.unquantized);
  const kvTok = kvBytesPerToken(model, setup.kvCache);
  const kvReq = kvTok * context;
  const kvGpu = kvBytesPerTokenPerGpu(setup);
  const stageShare = layersPerStage(model, pp) / model.layers;
  const { peak, dtype } = computePeakInfo(gpu, setup.weights);
  const flopsPerToken = 2 * model.params.active;
  const comm = (b: number): CommTerm => commSecondsPerStep(setup, b);
  /** One stage, microbatch b: its share of the weights and KV, or of the FLOPs, plus its layers' all-reduces. */
  const stage = (b: number, B: number) => {
    const tMem = ((W(B) * stageShare) / tp + kvGpu * context * b) / gpu.bandwidth;
    const tCompute = (flopsPerToken * stageShare * b) / tp / peak;
    return { tMem, tCompute };
  };
  const step = (B: number) => {
    const m = Math.min(pp, Math.max(1, B));
    const b = B / m;
    const { tMem, tCompute } = stage(b, B);
    const c = comm(b);
    const t = pp * Math.max(tMem, tCompute) + c.total_s;
    return {
      t,
      comm: c.total_s,
      bubble: 1 - m / pp,
      bound: tCompute > tMem ? ('compute' as const) : ('bandwidth' as const),
    };
  };
  const rows = batches.map((B): DecodeRow => {
    const { t, bound, comm: c, bubble } = step(B);
    return {
      batch: B,
      step_ms: t * 1e3,
      per_user_tok_s: 1 / t,
      aggregate_tok_s: B / t,
      bound,
      comm_ms: c * 1e3,
      bubble,
    };
  });
  const W1 = W(1);
  const gpuKvReq = kvGpu * context * tp * pp; // the KV a replica reads per request, summed over its GPUs
  // Half saturation: the batch whose KV traffic equals the weight traffic, W(B) = kv(c)·B.
  let half = kvReq > 0 ? W1 / gpuKvReq : Infinity;
  if (moe === 'expected' && kvReq > 0) {
    let lo = 0;
    let hi = Math.max(1, W(1e9) / gpuKvReq);
    for (let i = 0; i < 100; i++) {
      const mid = (lo + hi) / 2;
      if (W(mid) > gpuKvReq * mid) lo = mid;
      else hi = mid;
    }
    half = (lo + hi) / 2;
  }
  const asymptote = kvReq > 0 ? (gpu.bandwidth * tp * pp) / gpuKvReq : Infinity;
  const computeRoof = (peak * tp * pp) / flopsPerToken;
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
  const comm1 = comm(1).total_s;
  const floor = (W1 * stageShare * pp) / tp / gpu.bandwidth + comm1;
  return {
    context,
    weights_bytes: weightsBytes(model, setup.weights, setup.unquantized),
    weights_read_bytes: W1,
    weights_per_gpu_bytes: setupWeightsResident(setup).bytes,
    kv_bytes_per_token: kvTok,
    kv_bytes_per_token_per_gpu: kvGpu,
    kv_bytes_per_request: kvReq,
    decode_step_floor_ms: floor * 1e3,
    comm_floor_ms: comm1 * 1e3,
    ceiling_tok_s: 1 / floor,
    half_saturation_batch: half,
    asymptote_tok_s: asymptote,
    compute_roof_tok_s: computeRoof,
    knee_batch: knee,
    peak_flops: peak,
    peak_dtype: dtype,
    bandwidth: gpu.bandwidth,
    moe_weights: moe ?? null,
    tensor_parallel: tp,
    pipeline_parallel: pp,
    data_parallel: par.dp,
    rows,
  };
}

/**
 * The decode step floor of a setup (batch 1): the weight reads of every stage a token passes, on
 * its TP share, plus the batch-1 all-reduces and sends. Seconds.
 */
export function decodeFloorSeconds(setup: Setup, moe?: MoeWeights): number {
  const { tp, pp } = parallelOf(setup);
  const share = (layersPerStage(setup.model, pp) * pp) / setup.model.layers;
  const W = weightsReadPerStep(setup.model, setup.weights, moe, 1, setup.unquantized);
  return (W * share) / tp / setup.gpu.bandwidth + commSecondsPerStep(setup, 1).total_s;
}

/**
 * Prefill compute floor, simple form: 2 · params · prompt tokens / peak (seconds); active params for
 * a MoE. A TP group computes one prompt together (÷ tp); pipeline stages run it one after another.
 */
export function prefillFloorSimple(setup: Setup, promptTokens: number): number {
  return (2 * setup.model.params.active * promptTokens) / computePeak(setup.gpu, setup.weights) / parallelOf(setup).tp;
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
    seconds: total / computePeak(setup.gpu, setup.weights) / parallelOf(setup).tp,
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
  const bytes =
    weightsReadPerStep(m, setup.weights, moe, batch, setup.unquantized) +
    kvBytesPerToken(m, setup.kvCache) * context * batch;
  const flops = 2 * m.params.active * batch;
  return point(setup, `decode B=${batch}`, flops / bytes);
}

/** A prefill of N tokens: 2·params·N FLOP over the weights read once plus N tokens of KV written. */
export function prefillPoint(setup: Setup, promptTokens: number): OperatingPoint {
  const m = setup.model;
  const bytes = weightsBytes(m, setup.weights, setup.unquantized) + kvBytesPerToken(m, setup.kvCache) * promptTokens;
  const flops = 2 * m.params.active * promptTokens;
  return point(setup, `prefill N=${promptTokens}`, flops / bytes);
}

function point(setup: Setup, label: string, intensity: number): OperatingPoint {
  const peak = computePeak(setup.gpu, setup.weights);
  const bw = setup.gpu.bandwidth * intensity;
  return { label, intensity, attainable_flops: Math.min(peak, bw), bound: bw < peak ? 'bandwidth' : 'compute' };
}

/**
 * What one forward pass costs one GPU of a replica, as the simulator's step formula reads it:
 * step = max((weights + kv · Σctx) / bandwidth, (flops · tokens + attn · pairs) / (peak · mfu))
 *        + commFixed + commPerToken · tokens.
 * On tp × pp GPUs the reads and FLOPs are one GPU's share over every stage a batch passes (the
 * stages run one after another), and communication is every layer's two all-reduces plus the
 * stage sends (commSecondsPerStep).
 */
export interface StepShape {
  /** Weight bytes one step reads on one GPU, over the stages (W / tp). */
  weightsBytes: number;
  /** KV bytes a token of context costs one GPU, over the stages (its TP rank's heads, every layer). */
  kvBytesPerToken: number;
  bandwidth: number;
  /** Dense peak FLOP/s of the matmuls' dtype (computePeak), before any MFU. */
  peak: number;
  /** 2 · active params / tp, per token. */
  flopsPerToken: number;
  /** 4 · layers · heads · head_dim / tp, per (query, key) pair. */
  attnFlopsPerPair: number;
  /** The α of every all-reduce and stage send, s. */
  commFixedS: number;
  /** The bytes of every all-reduce and send over β, per token of the pass, s. */
  commPerTokenS: number;
}

export function stepShape(setup: Setup): StepShape {
  const m = setup.model;
  const par = parallelOf(setup);
  const stages = (layersPerStage(m, par.pp) * par.pp) / m.layers;
  const comm0 = commSecondsPerStep(setup, 0).total_s;
  return {
    weightsBytes: (weightsReadPerStep(m, setup.weights, 'expected', 1, setup.unquantized) * stages) / par.tp,
    kvBytesPerToken: kvBytesPerTokenPerGpu(setup) * par.pp,
    bandwidth: setup.gpu.bandwidth,
    peak: computePeak(setup.gpu, setup.weights),
    flopsPerToken: (2 * m.params.active * stages) / par.tp,
    attnFlopsPerPair: (4 * m.layers * m.heads * m.headDim * stages) / par.tp,
    commFixedS: comm0,
    commPerTokenS: commSecondsPerStep(setup, 1).total_s - comm0,
  };
}
