/**
 * Import a Hugging Face config.json: the architecture numbers, and the parameter count computed from
 * them (attention q/k/v/o with GQA, Qwen3's q/k norms, gated MLP or routed experts plus router,
 * norms, embeddings and lm_head). Parameter counts are never typed by hand.
 */
import { z } from 'zod';
import type { ModelSpec } from './types';

export const hfConfigSchema = z
  .object({
    model_type: z.string().optional(),
    architectures: z.array(z.string()).optional(),
    hidden_size: z.number().int().positive(),
    num_hidden_layers: z.number().int().positive(),
    num_attention_heads: z.number().int().positive(),
    num_key_value_heads: z.number().int().positive().optional(),
    head_dim: z.number().int().positive().nullish(),
    intermediate_size: z.number().int().positive(),
    vocab_size: z.number().int().positive(),
    tie_word_embeddings: z.boolean().optional(),
    max_position_embeddings: z.number().int().positive().optional(),
    attention_bias: z.boolean().optional(),
    // MoE (Qwen3-MoE / Qwen2-MoE: num_experts; Mixtral: num_local_experts)
    num_experts: z.number().int().positive().optional(),
    num_local_experts: z.number().int().positive().optional(),
    num_experts_per_tok: z.number().int().positive().optional(),
    moe_intermediate_size: z.number().int().positive().optional(),
    shared_expert_intermediate_size: z.number().int().positive().optional(),
    decoder_sparse_step: z.number().int().positive().optional(),
    mlp_only_layers: z.array(z.number().int()).optional(),
  })
  .passthrough();

export type HfConfig = z.infer<typeof hfConfigSchema>;

export function modelFromHfConfig(cfg: HfConfig, id: string, source: string): ModelSpec {
  const h = cfg.hidden_size;
  const L = cfg.num_hidden_layers;
  const heads = cfg.num_attention_heads;
  const kvHeads = cfg.num_key_value_heads ?? heads;
  const headDim = cfg.head_dim ?? h / heads;
  const vocab = cfg.vocab_size;
  const tied = cfg.tie_word_embeddings ?? false;
  const type = cfg.model_type ?? '';
  const isQwen3 = type.startsWith('qwen3');

  const bias = cfg.attention_bias ? heads * headDim + 2 * kvHeads * headDim : 0;
  const qkNorm = isQwen3 ? 2 * headDim : 0;
  const attn = h * heads * headDim + 2 * h * kvHeads * headDim + heads * headDim * h + bias + qkNorm;
  const norms = 2 * h;
  const denseMlp = 3 * h * cfg.intermediate_size;

  const experts = cfg.num_experts ?? cfg.num_local_experts;
  let totalLayers = 0;
  let activeLayers = 0;
  let moe: ModelSpec['moe'];
  if (experts && cfg.num_experts_per_tok) {
    const ei = cfg.moe_intermediate_size ?? cfg.intermediate_size;
    const k = cfg.num_experts_per_tok;
    const step = cfg.decoder_sparse_step ?? 1;
    const denseOnly = new Set(cfg.mlp_only_layers ?? []);
    const shared = cfg.shared_expert_intermediate_size ? 3 * h * cfg.shared_expert_intermediate_size + h : 0;
    moe = {
      experts,
      expertsPerToken: k,
      expertIntermediate: ei,
      sharedIntermediate: cfg.shared_expert_intermediate_size,
    };
    for (let l = 0; l < L; l++) {
      const sparse = !denseOnly.has(l) && (l + 1) % step === 0;
      if (sparse) {
        const router = h * experts;
        totalLayers += attn + norms + router + experts * 3 * h * ei + shared;
        activeLayers += attn + norms + router + k * 3 * h * ei + shared;
      } else {
        totalLayers += attn + norms + denseMlp;
        activeLayers += attn + norms + denseMlp;
      }
    }
  } else {
    totalLayers = activeLayers = L * (attn + norms + denseMlp);
  }
  const embedding = vocab * h;
  const lmHead = vocab * h;
  const finalNorm = h;
  const total = totalLayers + finalNorm + embedding + (tied ? 0 : lmHead);
  const active = activeLayers + finalNorm + embedding + (tied ? 0 : lmHead);
  return {
    id,
    name: id,
    layers: L,
    hidden: h,
    heads,
    kvHeads,
    headDim,
    intermediate: cfg.intermediate_size,
    vocab,
    tiedEmbeddings: tied,
    maxPosition: cfg.max_position_embeddings ?? 4096,
    moe,
    params: { total, active, embedding, lmHead, norms: L * (norms + qkNorm) + finalNorm },
    source,
  };
}
