/**
 * Speculative decoding in closed form. A draft proposes k tokens; the target verifies all k + 1
 * positions in one step and keeps the accepted prefix plus one token of its own (the bonus token).
 *
 * Acceptance as vLLM counts it (vllm/v1/spec_decode/metrics.py, SpecDecodingStats and
 * SpecDecodingProm, vLLM v0.10–v0.11): per draft, the accepted tokens are a prefix; per-position
 * acceptance p_i = accepted at position i / drafts (p_1 ≥ p_2 ≥ …), the draft acceptance rate is
 * accepted / drafted tokens, and the mean acceptance length is 1 + accepted / drafts. So:
 *
 *   expected tokens per target step  E = 1 + Σ_{i=1..k} p_i
 *   with one rate α for every token (p_i = α^i):  E = (1 − α^(k+1)) / (1 − α)
 *
 * Step cost (the simulator's step formula, sim/engine.ts, with q tokens per sequence):
 *
 *   step(q, B) = max((W + kv·c·B) / BW, (2·params·B·q + attention) / (peak·mfu)) + overhead
 *   plain      = step_target(1, B)
 *   speculative = step_target(k + 1, B) + k · step_draft(1, B)     (k draft passes, one verify)
 *
 * Per-user rate: plain 1 / plain, speculative E / speculative. At batch 1 the verify step reads the
 * same weights as a plain one, so the speedup approaches E when the draft is cheap (the bound); as B
 * grows the verify step's (k + 1)·B tokens turn it compute-bound, and past some batch the drafted
 * tokens that get rejected cost more than the steps they save: speculative decoding stops paying.
 */
import type { Setup } from '../engine/types';
import type { ModelSpec } from '../catalog/types';
import { computePeak, parallelOf, stepShape, type StepShape } from './index';

/** Acceptance: one rate α for every draft token, or vLLM's per-position rates p_1 ≥ p_2 ≥ … ≥ p_k. */
export type Acceptance = number | readonly number[];

/** The per-position rates p_1..p_k an acceptance stands for. */
export function perPosition(k: number, a: Acceptance): number[] {
  if (typeof a === 'number') return Array.from({ length: k }, (_, i) => a ** (i + 1));
  return a.slice(0, k);
}

/**
 * A message saying what to change, or undefined when k and the acceptance describe a draft: α in
 * [0, 1]; per-position rates each in [0, 1], never rising (a token is accepted only after the ones
 * before it), and k of them.
 */
export function acceptanceProblem(k: number, a: Acceptance): string | undefined {
  if (!(Number.isInteger(k) && k >= 1)) return `k must be a whole number ≥ 1 (num_speculative_tokens), got ${k}`;
  if (typeof a === 'number')
    return a >= 0 && a <= 1 ? undefined : `acceptance must be in [0, 1] (e.g. 0.7 or 70%), got ${a}`;
  if (a.length !== k)
    return `acceptance lists ${a.length} per-position rates for k = ${k}: give one per draft position (vLLM's "Per-position acceptance rate")`;
  for (let i = 0; i < a.length; i++) {
    if (!(a[i] >= 0 && a[i] <= 1)) return `per-position acceptance ${i + 1} is ${a[i]}: each must be in [0, 1]`;
    if (i > 0 && a[i] > a[i - 1] + 1e-9)
      return `per-position acceptance rises from ${a[i - 1]} to ${a[i]} at position ${i + 1}: a draft token is accepted only when every one before it was, so the rates cannot rise`;
  }
  return undefined;
}

/** Expected tokens one target step emits: 1 + Σ p_i ((1 − α^(k+1)) / (1 − α) for one rate α). */
export function expectedTokensPerStep(k: number, a: Acceptance): number {
  if (typeof a === 'number') return a === 1 ? k + 1 : (1 - a ** (k + 1)) / (1 - a);
  return 1 + perPosition(k, a).reduce((s, p) => s + p, 0);
}

/** The draft: a model of the catalog (or a config), or only its parameter count (bf16 weights, no KV term). */
export type Draft = { model: ModelSpec } | { params: number };

/**
 * The draft's step shape: a catalog model on the target's GPUs and tensor-parallel group (vLLM runs
 * the draft at the target's tensor_parallel_size unless told otherwise), at the setup's weight
 * dtype; a draft known only by its size is 2 bytes a parameter with no KV, attention or
 * communication term (its architecture is unknown).
 */
export function draftShape(setup: Setup, draft: Draft): StepShape {
  if ('model' in draft)
    return stepShape({
      ...setup,
      model: draft.model,
      unquantized: undefined,
      parallel: { ...parallelOf(setup), pp: 1 },
    });
  const tp = parallelOf(setup).tp;
  const P = (draft as { params: number }).params;
  return {
    weightsBytes: (2 * P) / tp,
    kvBytesPerToken: 0,
    bandwidth: setup.gpu.bandwidth,
    peak: computePeak(setup.gpu, setup.weights),
    flopsPerToken: (2 * P) / tp,
    attnFlopsPerPair: 0,
    commFixedS: 0,
    commPerTokenS: 0,
  };
}

/**
 * One pass of a step shape over B sequences of q new tokens each whose contexts sum to ctxSum
 * tokens, s: the weights and KV read once, or the FLOPs at peak·mfu, whichever is longer, plus
 * the pass's all-reduces (the simulator's step formula).
 */
export function passSeconds(sh: StepShape, ctxSum: number, B: number, q: number, mfu: number): number {
  const mem = (sh.weightsBytes + sh.kvBytesPerToken * ctxSum) / sh.bandwidth;
  const comp = (sh.flopsPerToken * B * q + sh.attnFlopsPerPair * ctxSum * q) / (sh.peak * mfu);
  return Math.max(mem, comp) + sh.commFixedS + sh.commPerTokenS * B * q;
}

/** One draft pass over B sequences whose contexts sum to ctxSum tokens, s. */
export function draftPassSeconds(setup: Setup, draft: Draft, ctxSum: number, B: number, mfu: number): number {
  return passSeconds(draftShape(setup, draft), ctxSum, B, 1, mfu);
}

export interface SpeculativeOptions {
  k: number;
  acceptance: Acceptance;
  draft: Draft;
  /** Context each sequence attends to, tokens. */
  context: number;
  batches: number[];
  /** Per target step (scheduler, sampler, launches), s. */
  stepOverheadS: number;
  /** Per draft pass, s. */
  draftOverheadS: number;
  /** Fraction of the dense peak the matmuls reach when compute-bound. */
  mfu: number;
}

export interface SpeculativeRow {
  batch: number;
  plain_step_ms: number;
  verify_ms: number;
  draft_ms: number;
  spec_step_ms: number;
  verify_bound: 'bandwidth' | 'compute';
  per_user_plain_tok_s: number;
  per_user_spec_tok_s: number;
  aggregate_plain_tok_s: number;
  aggregate_spec_tok_s: number;
  speedup: number;
}

export interface SpeculativePlan {
  k: number;
  per_position: number[];
  tokens_per_step: number;
  /** Draft acceptance rate as vLLM logs it: accepted / drafted tokens = Σ p_i / k. */
  draft_acceptance_rate: number;
  /** The speedup if drafting were free and verifying cost a plain step: E. */
  speedup_bound: number;
  /** Bytes of weights one draft pass reads. */
  draft_bytes: number;
  rows: SpeculativeRow[];
  /** Smallest batch (1..4096) whose verify step is compute-bound, if any. */
  compute_bound_batch?: number;
  /** Smallest batch (1..4096) where speculation no longer pays (speedup ≤ 1), if any. */
  break_even_batch?: number;
}

/** The per-user rate, the step costs and the speedup at each batch, and where speculation stops paying. */
export function speculativePlan(setup: Setup, o: SpeculativeOptions): SpeculativePlan {
  // Per GPU of the replica: the target's share of weights, KV and FLOPs, and its all-reduces, which
  // carry (k + 1) tokens a sequence in the verify step.
  const sh = stepShape(setup);
  const ds = draftShape(setup, o.draft);
  const c = o.context;
  const Wd = ds.weightsBytes;
  const target = (q: number, B: number) => {
    const mem = (sh.weightsBytes + sh.kvBytesPerToken * c * B) / sh.bandwidth;
    const comp = (sh.flopsPerToken * B * q + sh.attnFlopsPerPair * c * B * q) / (sh.peak * o.mfu);
    return {
      t: passSeconds(sh, c * B, B, q, o.mfu),
      bound: comp > mem ? ('compute' as const) : ('bandwidth' as const),
    };
  };
  const E = expectedTokensPerStep(o.k, o.acceptance);
  const row = (B: number): SpeculativeRow => {
    const plain = target(1, B).t + o.stepOverheadS;
    const v = target(o.k + 1, B);
    const draft = o.k * (passSeconds(ds, c * B, B, 1, o.mfu) + o.draftOverheadS);
    const spec = v.t + o.stepOverheadS + draft;
    return {
      batch: B,
      plain_step_ms: plain * 1e3,
      verify_ms: (v.t + o.stepOverheadS) * 1e3,
      draft_ms: draft * 1e3,
      spec_step_ms: spec * 1e3,
      verify_bound: v.bound,
      per_user_plain_tok_s: 1 / plain,
      per_user_spec_tok_s: E / spec,
      aggregate_plain_tok_s: B / plain,
      aggregate_spec_tok_s: (B * E) / spec,
      speedup: E / spec / (1 / plain),
    };
  };
  let compute_bound_batch: number | undefined;
  let break_even_batch: number | undefined;
  for (let B = 1; B <= 4096 && (compute_bound_batch === undefined || break_even_batch === undefined); B++) {
    if (compute_bound_batch === undefined && target(o.k + 1, B).bound === 'compute') compute_bound_batch = B;
    if (break_even_batch === undefined && row(B).speedup <= 1) break_even_batch = B;
  }
  const p = perPosition(o.k, o.acceptance);
  return {
    k: o.k,
    per_position: p,
    tokens_per_step: E,
    draft_acceptance_rate: p.reduce((s, x) => s + x, 0) / o.k,
    speedup_bound: E,
    draft_bytes: Wd,
    rows: o.batches.map(row),
    ...(compute_bound_batch !== undefined ? { compute_bound_batch } : {}),
    ...(break_even_batch !== undefined ? { break_even_batch } : {}),
  };
}
