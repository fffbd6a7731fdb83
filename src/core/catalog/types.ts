/** Hardware and model descriptions, in base units (bytes, bytes/s, FLOP/s). */

export type Dtype = 'bf16' | 'fp16' | 'fp8' | 'int8' | 'int4';
export const DTYPES: Dtype[] = ['bf16', 'fp16', 'fp8', 'int8', 'int4'];

export const DTYPE_BYTES: Record<Dtype, number> = { bf16: 2, fp16: 2, fp8: 1, int8: 1, int4: 0.5 };

/** Parts of a checkpoint that quantized releases keep at 16 bits. */
export type WidePart = 'embeddings' | 'lm_head' | 'norms';
export const WIDE_PARTS: WidePart[] = ['embeddings', 'lm_head', 'norms'];

export interface Gpu {
  id: string;
  name: string;
  /** HBM bandwidth, bytes/s. */
  bandwidth: number;
  /** Device memory, bytes. */
  memory: number;
  /** Dense peak FLOP/s per compute dtype (no sparsity). Missing = not supported natively. */
  peak: Partial<Record<Dtype, number>>;
  /** Where the numbers come from (data sheet name). */
  source: string;
  /** The GPU-to-GPU link tensor and pipeline parallelism talk over (absent: a single card only). */
  interconnect?: Interconnect;
}

/**
 * GPU-to-GPU link, per GPU. `bandwidth` is one direction (a ring all-reduce sends and receives at
 * once, so the unidirectional figure is what bounds it: half the bidirectional total data sheets
 * print). `latency` is the fixed time of one small all-reduce (launch, synchronization, the hops);
 * it is an assumption stated beside every number that uses it, and a custom GPU may override it.
 */
export interface Interconnect {
  name: string;
  /** Bytes/s per GPU, one direction. */
  bandwidth: number;
  /** Seconds per small all-reduce (the α of α + bytes/β). */
  latency: number;
  source: string;
}

export interface ModelSpec {
  id: string;
  name: string;
  layers: number;
  hidden: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  vocab: number;
  tiedEmbeddings: boolean;
  maxPosition: number;
  moe?: { experts: number; expertsPerToken: number; expertIntermediate: number; sharedIntermediate?: number };
  params: {
    /** Every parameter in the checkpoint. */
    total: number;
    /** Parameters one token's forward pass touches (total for a dense model). */
    active: number;
    /** Input embedding table (gathered, not multiplied). */
    embedding: number;
    /** Output projection (lm_head); equals embedding when tied, and then not counted twice in total. */
    lmHead: number;
    /** RMSNorm/LayerNorm weights (per layer, the final norm, Qwen3's q/k norms). */
    norms?: number;
  };
  source: string;
}
