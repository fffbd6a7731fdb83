/**
 * The findings a bench cell's run gets for a sweep result, made as the engine makes them: the
 * sweep's values become facts (kinds/benchFacts.ts), validated like a run's, and the check rules
 * run over them. Tests that hold a SweepResult use this instead of a second path to findings.
 */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { benchValues, type ReportSpec } from '../../src/core/bench/report';
import type { SweepResult } from '../../src/core/bench/sweep';
import { runChecks } from '../../src/core/checks';
import { createNotebookContext, jsonSafe } from '../../src/core/engine/engine';
import { checkFacts, type Fact } from '../../src/core/facts';
import type { Finding } from '../../src/core/findings';
import { benchFacts } from '../../src/core/kinds/benchFacts';

/** The cell a spec stands for, when a test has none. */
export function cellOf(r: Pick<SweepResult, 'points'>, spec: ReportSpec): Record<string, unknown> {
  return {
    bench: 'sweep',
    seed: spec.seed.mode === 'fixed' ? spec.seed.value : 'per-point',
    [spec.loop === 'open' ? 'rate' : 'concurrency']: r.points.map((p) =>
      spec.loop === 'open' ? p.rate : p.concurrency,
    ),
  };
}

/** The facts a bench run states for this result (every one validates). */
export function sweepFacts(r: SweepResult, spec: ReportSpec, cell = cellOf(r, spec)): Fact[] {
  const { facts, findings } = checkFacts(jsonSafe(benchFacts(benchValues(r, spec), cell)));
  assert.deepEqual(findings, [], 'every fact the run states validates');
  return facts;
}

export function sweepFindings(r: SweepResult, spec: ReportSpec, cell = cellOf(r, spec)): Finding[] {
  return runChecks({
    kind: 'bench: sweep',
    cell,
    facts: sweepFacts(r, spec, cell),
    notebook: createNotebookContext(os.tmpdir()),
    cellIndex: 0,
  });
}
