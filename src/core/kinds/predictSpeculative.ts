/**
 * `predict: speculative` — what speculative decoding buys: draft length k and acceptance (one rate
 * α, or vLLM's measured per-position rates) → expected tokens per target step, the step cost with
 * the draft model, the per-user speedup at each batch, its bound, and the batch where it stops
 * paying (the verify step turns compute-bound). Formulas: physics/speculative.ts.
 */
import { z } from 'zod';
import { findModel } from '../catalog';
import { factsOutput, tableOutput } from '../engine/outputs';
import { oneOrMany, positiveInt, quantity } from '../engine/schema';
import type { KindModule } from '../engine/types';
import type { Fact } from '../facts';
import { fin } from '../facts/make';
import { finding } from '../findings';
import { commSecondsPerStep, decodeFloorSeconds, parallelOf, parallelWords } from '../physics';
import { acceptanceProblem, speculativePlan, type SpeculativeRow } from '../physics/speculative';
import { acceptanceOf, acceptanceSchema, draftProblem, draftSchema } from './speculativeKeys';
import { fmtBytes, fmtNum } from '../units';
import { setupLabel } from './predictShared';

const schema = z
  .object({
    predict: z.literal('speculative'),
    /** num_speculative_tokens */
    k: positiveInt,
    acceptance: acceptanceSchema,
    /** A catalog model id, or {params: N} for a draft known only by its size (bf16 weights). */
    draft: draftSchema,
    context: quantity('tokens', { bare: 'tokens', positive: true }),
    batch: oneOrMany(positiveInt).default([1, 2, 4, 8, 16, 32, 64, 128, 256]),
    step_overhead: quantity('time', { min: 0 }).optional(),
    draft_overhead: quantity('time', { min: 0 }).optional(),
    mfu: z.number().gt(0).max(1).optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    const msg = acceptanceProblem(c.k, acceptanceOf(c.acceptance));
    if (msg) ctx.addIssue({ code: 'custom', message: msg, path: ['acceptance'] });
    const d = draftProblem(c.draft);
    if (d) ctx.addIssue({ code: 'custom', message: d, path: ['draft'] });
  });

type Cell = z.output<typeof schema>;

/** What a speculative prediction states: the per-user curves with and without it, and the TPOT floor it allows. */
function speculativeFacts(v: Record<string, unknown>): Fact[] {
  const source = 'predict: speculative';
  const rows = (Array.isArray(v.rows) ? v.rows : []) as Record<string, unknown>[];
  const curve = (key: string, label: string): Fact[] => {
    const points = rows
      .map((r) => ({ x: fin(r.batch), y: fin(r[key]) }))
      .filter((p): p is { x: number; y: number } => p.x !== undefined && p.y !== undefined);
    return points.length
      ? [{ kind: 'curve', x: 'batch', y: 'per_user_throughput', unit: 'tok/s', points, label, source }]
      : [];
  };
  const out: Fact[] = [
    ...curve('per_user_spec_tok_s', 'speculative decoding (per user)'),
    ...curve('per_user_plain_tok_s', 'plain decoding (per user)'),
  ];
  const floor = fin(v.spec_tpot_floor_ms);
  if (floor !== undefined)
    out.push({
      kind: 'floor',
      metric: 'tpot-speculative',
      ms: floor,
      formula: 'W / BW / expected tokens per step',
      source,
    });
  return out;
}

export const speculativeKind: KindModule<Cell> = {
  key: 'predict',
  variant: 'speculative',
  summary:
    'predict: speculative — tokens per target step, step cost with a draft, the speedup and where it stops paying',
  schema,
  needsSetup: true,
  migrate: speculativeFacts,
  analyze(_cell, ctx) {
    if (ctx.setup && parallelOf(ctx.setup).pp > 1)
      return [
        finding(
          'info',
          'speculative-pipeline',
          'predict: speculative runs the target over its pipeline stages one after another and the draft on one stage’s tensor-parallel group: the overlap of stages is not modelled',
          ['predict'],
        ),
      ];
    return [];
  },
  async run(cell, ctx) {
    const setup = ctx.setup!;
    const draftModel = typeof cell.draft === 'string' ? findModel(cell.draft) : undefined;
    if (typeof cell.draft === 'string' && !draftModel) throw new Error(`draft: ${cell.draft} is not in the catalog`);
    const { ENGINE_DEFAULTS } = await import('../sim/engine');
    const acceptance = acceptanceOf(cell.acceptance);
    const stepOverheadS = cell.step_overhead?.value ?? ENGINE_DEFAULTS.stepOverheadS;
    const draftOverheadS = cell.draft_overhead?.value ?? 0;
    const mfu = cell.mfu ?? ENGINE_DEFAULTS.prefillMfu;
    const plan = speculativePlan(setup, {
      k: cell.k,
      acceptance,
      draft: draftModel ? { model: draftModel } : { params: (cell.draft as { params: number }).params },
      context: cell.context.value,
      batches: cell.batch,
      stepOverheadS,
      draftOverheadS,
      mfu,
    });
    const floor = decodeFloorSeconds(setup);
    const tp = parallelOf(setup).tp;
    const comm = commSecondsPerStep(setup, cell.k + 1);
    const x = (v: number) => `${fmtNum(v, 2)}×`;
    const table = tableOutput<SpeculativeRow>(
      `Speculative decoding — ${setupLabel(setup)}, k = ${cell.k}, draft ${draftModel ? draftModel.name : `${fmtNum((cell.draft as { params: number }).params / 1e9, 2)} B params`}, context ${fmtNum(cell.context.value, 0)} tokens`,
      [
        { key: 'batch', label: 'batch' },
        { key: 'plain_step_ms', label: 'plain step (ms)', fmt: (v) => fmtNum(v, 2) },
        { key: 'draft_ms', label: `draft ×${cell.k} (ms)`, fmt: (v) => fmtNum(v, 2) },
        { key: 'verify_ms', label: `verify ${cell.k + 1} tok (ms)`, fmt: (v) => fmtNum(v, 2) },
        { key: 'verify_bound', label: 'verify bound' },
        { key: 'per_user_plain_tok_s', label: 'per user plain', fmt: (v) => fmtNum(v, 1) },
        { key: 'per_user_spec_tok_s', label: 'per user spec.', fmt: (v) => fmtNum(v, 1) },
        { key: 'aggregate_spec_tok_s', label: 'aggregate spec.', fmt: (v) => fmtNum(v, 0) },
        { key: 'speedup', label: 'speedup', fmt: x },
      ],
      plan.rows,
      `tokens per target step E = 1 + Σ p_i${typeof acceptance === 'number' ? ` = (1 − α^(k+1)) / (1 − α) with α = ${fmtNum(acceptance, 3)}` : ''}; speculative step = verify (k + 1 tokens per sequence) + k draft passes; speedup = (E / speculative step) / (1 / plain step).`,
    );
    const specFloorS = floor / plan.tokens_per_step;
    const summary = factsOutput(
      'What speculation buys',
      [
        ['expected tokens per target step', fmtNum(plan.tokens_per_step, 3)],
        ['per-position acceptance', plan.per_position.map((p) => fmtNum(p, 3)).join(', ')],
        ['draft acceptance rate (accepted / drafted)', `${fmtNum(100 * plan.draft_acceptance_rate, 1)}%`],
        ['speedup bound (free draft, verify as cheap as a plain step)', x(plan.speedup_bound)],
        [
          'TPOT floor with speculation',
          `${fmtNum(specFloorS * 1e3, 2)} ms = ${fmtNum(floor * 1e3, 2)} ms decode floor / ${fmtNum(plan.tokens_per_step, 2)} (never below ${fmtNum((floor / (cell.k + 1)) * 1e3, 2)} ms = floor / (k + 1))`,
        ],
        [
          'verify step compute-bound from batch',
          plan.compute_bound_batch !== undefined ? String(plan.compute_bound_batch) : 'beyond 4,096',
        ],
        [
          'stops paying (speedup ≤ 1) from batch',
          plan.break_even_batch !== undefined ? String(plan.break_even_batch) : 'beyond 4,096',
        ],
        ['draft weights per pass', `${fmtBytes(plan.draft_bytes)}${tp > 1 ? ' per GPU' : ''}`],
        ...(tp > 1
          ? ([
              [
                'GPUs',
                `${parallelWords(setup)}: the target's and the draft's weights, KV and FLOPs split ${tp} ways, and every layer's two all-reduces in each pass`,
              ],
              [
                'all-reduces of a verify step at batch 1',
                `${comm.allreduces} × ${fmtBytes(comm.allreduce_bytes)} (${cell.k + 1} tokens): ${fmtNum(comm.allreduce_s * 1e3, 3)} ms`,
              ],
            ] as [string, string][])
          : []),
        [
          'step_overhead',
          `${fmtNum(stepOverheadS * 1e3, 2)} ms${cell.step_overhead ? '' : ' (default: the simulator’s)'}`,
        ],
        [
          'draft_overhead',
          `${fmtNum(draftOverheadS * 1e3, 2)} ms per draft pass${cell.draft_overhead ? '' : ' (default: none)'}`,
        ],
        ['mfu', `${mfu}${cell.mfu === undefined ? ' (default: the simulator’s prefill_mfu)' : ''}`],
      ],
      'Acceptance as vLLM counts it (vllm/v1/spec_decode/metrics.py): per-position rate = accepted at that position / drafts; mean acceptance length = 1 + accepted / drafts.',
    );
    const values = {
      k: cell.k,
      per_position: plan.per_position,
      tokens_per_step: plan.tokens_per_step,
      draft_acceptance_rate: plan.draft_acceptance_rate,
      speedup_bound: plan.speedup_bound,
      decode_floor_ms: floor * 1e3,
      spec_tpot_floor_ms: specFloorS * 1e3,
      compute_bound_batch: plan.compute_bound_batch,
      break_even_batch: plan.break_even_batch,
      rows: plan.rows,
    };
    return { values, facts: speculativeFacts(values), outputs: [summary, table] };
  },
};
