/**
 * Does the setup run at all? A model whose weights do not fit the GPUs it is given (a 70B bf16
 * model on one 80 GB card), or a parallel layout vLLM refuses, makes every prediction for it
 * fiction: an error on every predict cell, with the layout that would fit.
 */
import type { Setup } from '../engine/types';
import { finding, type Finding } from '../findings';
import { kvPool } from '../physics/kvPool';
import { parallelOf, parallelProblems, setupWeightsResident } from '../physics';
import { fmtBytes, fmtIn } from '../units';
import { serverKnob } from './measurements';
import type { CheckInput, CheckRule } from './types';

/** The smallest tensor_parallel (a divisor of the heads, up to 8) whose pool holds at least one block. */
function smallestFittingTp(setup: Setup, util: number | undefined): number | undefined {
  for (const tp of [2, 4, 8]) {
    const s: Setup = { ...setup, parallel: { ...parallelOf(setup), tp } };
    if (parallelProblems(s).length) continue;
    if (kvPool(s, { gpuMemoryUtilization: util }).blocks > 0) return tp;
  }
  return undefined;
}

export function fitFindings(setup: Setup, path: (string | number)[], cellIndex: number): Finding[] {
  const out: Finding[] = [];
  const related =
    setup.cellIndex !== undefined && setup.cellIndex !== cellIndex
      ? [{ message: `setup "${setup.name}"`, cellIndex: setup.cellIndex, path: ['model'] }]
      : undefined;
  for (const p of parallelProblems(setup))
    out.push(finding('error', 'parallel-layout', `${p}.`, path, { ...(related ? { related } : {}) }));
  const util = serverKnob(setup, 'gpu_memory_utilization');
  const pool = kvPool(setup, { gpuMemoryUtilization: util });
  const resident = setupWeightsResident(setup);
  const { tp, pp } = parallelOf(setup);
  const gpus = tp * pp;
  if (pool.blocks > 0) return out;
  const where = gpus === 1 ? `one ${setup.gpu.id}` : `each of ${gpus} × ${setup.gpu.id} (TP ${tp}, PP ${pp})`;
  const over = resident.bytes > setup.gpu.memory;
  const tpFit = smallestFittingTp(setup, util);
  const fixes = [
    tpFit && tpFit > tp ? `tensor_parallel: ${tpFit}` : undefined,
    setup.weights === 'bf16' || setup.weights === 'fp16' ? 'weights: fp8 (or int4)' : undefined,
    'a card with more memory',
  ].filter(Boolean);
  out.push(
    finding(
      'error',
      'weights-do-not-fit',
      over
        ? `${setup.model.name} ${setup.weights} needs ${fmtBytes(resident.bytes)} of weights on ${where}, more than its ${fmtBytes(setup.gpu.memory)}: vLLM cannot load it, and nothing this cell predicts can run.`
        : `${setup.model.name} ${setup.weights} leaves no room for the KV cache on ${where}: ${fmtIn(pool.budget_bytes, 'GiB')} budget (gpu_memory_utilization ${pool.gpu_memory_utilization}) − ${fmtBytes(resident.bytes)} weights − ${fmtBytes(pool.activation_peak_bytes + pool.non_torch_bytes)} activations and non-torch = ${fmtBytes(pool.available_kv_bytes)}; vLLM stops with "No available memory for the cache blocks".`,
      path,
      {
        cause: 'The weights alone fill the card: the model needs more GPUs, fewer bytes per weight, or a larger card.',
        fix: `use ${fixes.join(', or ')}`,
        ...(related ? { related } : {}),
      },
    ),
  );
  return out;
}

export const weightsFit: CheckRule = {
  id: 'weights-fit',
  summary: 'A model whose weights do not fit the GPUs of the setup, or a parallel layout vLLM refuses',
  reads: ['setup: gpu, model, weights, tensor_parallel, pipeline_parallel, gpu_memory_utilization'],
  codes: { 'weights-do-not-fit': 'does not fit the GPUs', 'parallel-layout': 'impossible parallel layout' },
  check(input: CheckInput) {
    if (!input.setup || !input.kind.startsWith('predict')) return [];
    return fitFindings(input.setup, ['predict'], input.cellIndex);
  },
};
