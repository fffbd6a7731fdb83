/**
 * The vLLM V1 KV-cache pool: available = total × gpu_memory_utilization − weights − activation
 * peak − non-torch memory; blocks = floor(available / (page_size × layers)) with page_size =
 * 2 × block_size × kv_heads × head_dim × bytes; tokens = blocks × block_size.
 */
import { DTYPE_BYTES } from '../catalog/types';
import type { Setup } from '../engine/types';
import { GiB } from '../units';
import { kvBytesPerToken, weightsBytes } from './index';

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
  total_memory_bytes: number;
  gpu_memory_utilization: number;
  budget_bytes: number;
  weights_bytes: number;
  activation_peak_bytes: number;
  non_torch_bytes: number;
  available_kv_bytes: number;
  available_kv_gib: number;
  /** Where available_kv_bytes came from: the budget formula, or a log's printed value. */
  available_from: 'formula' | 'given';
  kv_bytes_per_token: number;
  page_size_bytes: number;
  blocks: number;
  pool_tokens: number;
  /** The pool in bytes actually used by whole blocks. */
  pool_bytes: number;
  max_model_len: number;
  /** Requests of max_model_len tokens that fit at once (vLLM's "Maximum concurrency … x"). */
  max_concurrency: number;
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
  const weights = weightsBytes(m, setup.weights);
  const act = opts.activationPeakBytes ?? DEFAULT_ACTIVATION_PEAK_BYTES;
  const nonTorch = opts.nonTorchBytes ?? DEFAULT_NON_TORCH_BYTES;
  const given = opts.availableKvBytes !== undefined;
  const available = given ? opts.availableKvBytes! : budget - weights - act - nonTorch;
  const pageSize = 2 * BLOCK_SIZE * m.kvHeads * m.headDim * DTYPE_BYTES[setup.kvCache];
  const blocks = Math.max(0, Math.floor(available / (pageSize * m.layers)));
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
    page_size_bytes: pageSize,
    blocks,
    pool_tokens: tokens,
    pool_bytes: blocks * pageSize * m.layers,
    max_model_len: maxLen,
    max_concurrency: tokens / maxLen,
  };
}
