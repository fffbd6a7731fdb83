/**
 * The vLLM V1 KV-cache pool: available = total × gpu_memory_utilization − weights − activation
 * peak − non-torch memory; blocks = floor(available / (page_size × layers)) with page_size =
 * 2 × block_size × kv_heads × head_dim × bytes; tokens = blocks × block_size.
 *
 * On several GPUs every worker sizes its own pool from its own memory, weights and layers (vLLM
 * V1: each worker reports its available KV memory, and the engine takes the smallest number of
 * blocks across workers): weights are the fullest GPU's, kv_heads those of one TP rank, layers
 * those of one pipeline stage. A token then occupies one block slot on every GPU of the replica,
 * so the replica's pool in tokens is one worker's; data-parallel replicas each have their own.
 */
import { DTYPE_BYTES } from '../catalog/types';
import type { Setup } from '../engine/types';
import { GiB } from '../units';
import { kvBytesPerToken, setupWeightsResident } from './index';
import { kvBytesPerTokenPerGpu, kvHeadsPerGpu, layersPerStage, parallelOf } from './parallel';

export const BLOCK_SIZE = 16;

export interface KvPoolOptions {
  gpuMemoryUtilization?: number;
  /** Peak activation memory of the profiling forward pass, bytes. */
  activationPeakBytes?: number;
  /** CUDA context, NCCL and other non-torch memory, bytes. */
  nonTorchBytes?: number;
  /**
   * The "Available KV cache memory" a vLLM log printed, bytes: when given, the pool is sized from it
   * and the budget terms above are only shown, not subtracted.
   */
  availableKvBytes?: number;
  maxModelLen?: number;
}

export interface KvPool {
  /** Memory of one GPU (each worker sizes its pool from its own card). */
  total_memory_bytes: number;
  gpu_memory_utilization: number;
  budget_bytes: number;
  /** Weight bytes on the fullest GPU (all of them on one GPU). */
  weights_bytes: number;
  activation_peak_bytes: number;
  non_torch_bytes: number;
  available_kv_bytes: number;
  available_kv_gib: number;
  /** Where available_kv_bytes came from: the budget formula, or a log's printed value. */
  available_from: 'formula' | 'given';
  kv_bytes_per_token: number;
  /** KV bytes one token costs one worker (its KV heads, its stage's layers). */
  kv_bytes_per_token_per_gpu: number;
  /** Layers of one worker's stage, KV heads of one worker. */
  layers_per_gpu: number;
  kv_heads_per_gpu: number;
  page_size_bytes: number;
  blocks: number;
  pool_tokens: number;
  /** The pool in bytes actually used by whole blocks. */
  pool_bytes: number;
  max_model_len: number;
  /** Requests of max_model_len tokens that fit at once (vLLM's "Maximum concurrency … x"). */
  max_concurrency: number;
  /** Data-parallel replicas, each with a pool of pool_tokens; the deployment holds both multiplied. */
  data_parallel: number;
  pool_tokens_all_replicas: number;
}

/**
 * Defaults when activation peak and non-torch memory are not measured, calibrated on the real run
 * (Qwen3-8B bf16, A100 80GB, gpu_memory_utilization 0.9): 72 GiB − 15.26 GiB of weights left
 * "Available KV cache memory: 56.34 GiB", so the two together were ≈0.40 GiB. The split between
 * them is a rough guess (a profiling pass over the default batched-token budget, plus the CUDA
 * context and cuBLAS workspaces); override either with a measured value.
 */
export const DEFAULT_ACTIVATION_PEAK_BYTES = 0.25 * GiB;
export const DEFAULT_NON_TORCH_BYTES = 0.154 * GiB;
export const DEFAULT_GPU_MEMORY_UTILIZATION = 0.9;

export function kvPool(setup: Setup, opts: KvPoolOptions = {}): KvPool {
  const m = setup.model;
  const util = opts.gpuMemoryUtilization ?? DEFAULT_GPU_MEMORY_UTILIZATION;
  const total = setup.gpu.memory;
  const budget = total * util;
  const { tp, pp, dp } = parallelOf(setup);
  const weights = setupWeightsResident(setup).bytes;
  const act = opts.activationPeakBytes ?? DEFAULT_ACTIVATION_PEAK_BYTES;
  const nonTorch = opts.nonTorchBytes ?? DEFAULT_NON_TORCH_BYTES;
  const given = opts.availableKvBytes !== undefined;
  const available = given ? opts.availableKvBytes! : budget - weights - act - nonTorch;
  const heads = kvHeadsPerGpu(m, tp);
  const layers = layersPerStage(m, pp);
  const pageSize = 2 * BLOCK_SIZE * heads * m.headDim * DTYPE_BYTES[setup.kvCache];
  const blocks = Math.max(0, Math.floor(available / (pageSize * layers)));
  const tokens = blocks * BLOCK_SIZE;
  const maxLen = opts.maxModelLen ?? m.maxPosition;
  return {
    total_memory_bytes: total,
    gpu_memory_utilization: util,
    budget_bytes: budget,
    weights_bytes: weights,
    activation_peak_bytes: act,
    non_torch_bytes: nonTorch,
    available_kv_bytes: available,
    available_kv_gib: available / GiB,
    available_from: given ? 'given' : 'formula',
    kv_bytes_per_token: kvBytesPerToken(m, setup.kvCache),
    kv_bytes_per_token_per_gpu: kvBytesPerTokenPerGpu(setup),
    layers_per_gpu: layers,
    kv_heads_per_gpu: heads,
    page_size_bytes: pageSize,
    blocks,
    pool_tokens: tokens,
    pool_bytes: blocks * pageSize * layers,
    max_model_len: maxLen,
    max_concurrency: tokens / maxLen,
    data_parallel: dp,
    pool_tokens_all_replicas: tokens * dp,
  };
}
