/**
 * Several GPUs: tensor parallelism (each layer's matmuls split over `tp` GPUs, two all-reduces per
 * layer), pipeline parallelism (the layers split into `pp` stages, activations sent stage to stage)
 * and data parallelism (`dp` independent replicas behind one endpoint). What each GPU holds and
 * reads, and what the GPUs say to each other, as vLLM shards a model:
 *
 * - weights: every linear layer's columns or rows split over the TP ranks (the vocab-parallel
 *   embedding and lm_head too); norms replicated; layers split over the PP stages, the embedding on
 *   the first stage and lm_head on the last (both when tied and pp > 1);
 * - KV: a TP rank holds kv_heads / tp heads (one, replicated, when tp > kv_heads, as vLLM does), a
 *   PP stage its layers' KV;
 * - all-reduce: after attention's o_proj and after the MLP's down_proj, tokens × hidden × 2 bytes
 *   (bf16 activations) each, ring all-reduce time α + 2(n−1)/n · bytes / β over the card's link;
 * - pipeline: one send of the hidden states and the residual per stage boundary.
 */
import type { Interconnect, ModelSpec } from '../catalog/types';
import { DTYPE_BYTES } from '../catalog/types';
import type { Setup } from '../engine/types';

export interface Parallel {
  tp: number;
  pp: number;
  dp: number;
}

export function parallelOf(setup: Pick<Setup, 'parallel'>): Parallel {
  return setup.parallel ?? { tp: 1, pp: 1, dp: 1 };
}

/** GPUs of one replica (tp × pp) and of the deployment (× dp). */
export function gpuCounts(setup: Pick<Setup, 'parallel'>): { replica: number; total: number } {
  const p = parallelOf(setup);
  return { replica: p.tp * p.pp, total: p.tp * p.pp * p.dp };
}

/** KV heads one TP rank holds: kv_heads / tp, at least one (vLLM replicates a KV head when tp > kv_heads). */
export function kvHeadsPerGpu(model: ModelSpec, tp: number): number {
  return Math.max(1, Math.floor(model.kvHeads / tp));
}

/** Layers of the largest pipeline stage (vLLM splits them as evenly as it can). */
export function layersPerStage(model: ModelSpec, pp: number): number {
  return Math.ceil(model.layers / pp);
}

/** KV bytes one token costs one GPU of the largest stage: 2 × stage layers × kv heads per rank × head_dim × bytes. */
export function kvBytesPerTokenPerGpu(setup: Setup): number {
  const { tp, pp } = parallelOf(setup);
  const m = setup.model;
  return 2 * layersPerStage(m, pp) * kvHeadsPerGpu(m, tp) * m.headDim * DTYPE_BYTES[setup.kvCache];
}

/** Ways a setup's parallelism cannot run (vLLM refuses these at start-up). */
export function parallelProblems(setup: Setup): string[] {
  const { tp, pp } = parallelOf(setup);
  const m = setup.model;
  const out: string[] = [];
  if (m.heads % tp !== 0)
    out.push(`tensor_parallel ${tp} does not divide the ${m.heads} attention heads of ${m.name} (vLLM requires it)`);
  else if (tp > m.kvHeads && tp % m.kvHeads !== 0)
    out.push(`tensor_parallel ${tp} is neither a divisor nor a multiple of the ${m.kvHeads} KV heads of ${m.name}`);
  if (pp > m.layers) out.push(`pipeline_parallel ${pp} is more stages than the ${m.layers} layers of ${m.name}`);
  if ((tp > 1 || pp > 1) && !setup.gpu.interconnect)
    out.push(`${setup.gpu.id} has no interconnect in the catalog: give one (link_bandwidth, link_latency) in the gpu`);
  return out;
}

/** Ring all-reduce of `bytes` over n GPUs: α + 2(n−1)/n · bytes / β (0 on one GPU). */
export function allReduceSeconds(link: Interconnect | undefined, n: number, bytes: number): number {
  if (n <= 1) return 0;
  if (!link) return NaN;
  return link.latency + ((2 * (n - 1)) / n) * (bytes / link.bandwidth);
}

/** A point-to-point send between pipeline stages: α + bytes / β. */
export function p2pSeconds(link: Interconnect | undefined, bytes: number): number {
  if (!link) return NaN;
  return link.latency + bytes / link.bandwidth;
}

/** Bytes of one token's activations on the wire (hidden × bf16). */
export const ACTIVATION_BYTES = 2;

export interface CommTerm {
  /** All-reduces one step does over the whole model: 2 per layer (o_proj, down_proj) when tp > 1. */
  allreduces: number;
  /** Bytes of each all-reduce: tokens × hidden × 2. */
  allreduce_bytes: number;
  /** Their total time, s. */
  allreduce_s: number;
  /** Stage-to-stage sends of hidden states and residual, pp − 1 of them, s. */
  p2p_s: number;
  /** allreduce_s + p2p_s */
  total_s: number;
}

/**
 * What the GPUs of a replica say to each other in one forward pass of `tokens` tokens (decode: the
 * batch; prefill: the chunk), in the order the token meets it: every layer's two all-reduces, then
 * the stage boundaries.
 */
export function commSecondsPerStep(setup: Setup, tokens: number): CommTerm {
  const { tp, pp } = parallelOf(setup);
  const m = setup.model;
  const link = setup.gpu.interconnect;
  const bytes = tokens * m.hidden * ACTIVATION_BYTES;
  const n = tp > 1 ? 2 * m.layers : 0;
  const ar = n ? n * allReduceSeconds(link, tp, bytes) : 0;
  const p2p = pp > 1 ? (pp - 1) * p2pSeconds(link, 2 * bytes) : 0;
  return { allreduces: n, allreduce_bytes: bytes, allreduce_s: ar, p2p_s: p2p, total_s: ar + p2p };
}

/**
 * The GPU holding the most weight bytes, as vLLM places them: each stage's layers / tp, norms
 * replicated, the embedding / tp on the first stage, lm_head / tp on the last (one tensor when
 * tied on a single stage). `bytesOf(params, wideParams)` prices a parameter count.
 */
export function residentWeightsPerGpu(
  setup: Setup,
  parts: { total: number; embedding: number; lmHead: number; norms: number },
): { bytes: number; stage: 'only' | 'first' | 'last' } {
  const { tp, pp } = parallelOf(setup);
  const m = setup.model;
  const layerBytes = parts.total - parts.embedding - parts.lmHead - parts.norms;
  const stageShare = layersPerStage(m, pp) / m.layers;
  const layer = (layerBytes * stageShare) / tp + parts.norms * stageShare;
  if (pp === 1) return { bytes: layer + (parts.embedding + parts.lmHead) / tp, stage: 'only' };
  // With pp > 1 a tied lm_head is a second copy of the embedding on the last stage.
  const lm = m.tiedEmbeddings ? parts.embedding : parts.lmHead;
  const first = layer + parts.embedding / tp;
  const last = layer + lm / tp;
  return first >= last ? { bytes: first, stage: 'first' } : { bytes: last, stage: 'last' };
}

/** "TP 4 × PP 1 × DP 1 = 4 GPUs" */
export function parallelWords(setup: Pick<Setup, 'parallel'>): string {
  const p = parallelOf(setup);
  const n = p.tp * p.pp * p.dp;
  return n === 1 ? '1 GPU' : `TP ${p.tp} × PP ${p.pp} × DP ${p.dp} = ${n} GPUs`;
}
