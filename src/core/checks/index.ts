/**
 * Physics checks: rules that turn impossible numbers into findings. Each rule takes a cell's
 * values (typed or computed) and the setup, and returns findings with a path into the cell.
 *
 * The engine calls runChecks after static analysis (the facts a cell's own keys state, as the
 * user types) and after each run (the run's facts). Rules read facts, grouped per point by
 * measurements.ts; no rule reads a value by its name.
 */
import { finding, type Finding } from '../findings';
import { AUDIT_RULES } from './audit';
import { BENCH_RULES } from './bench';
import { weightsFit } from './fit';
import { LATENCY_RULES } from './latency';
import { MEMORY_RULES } from './memory';
import { METHOD_RULES } from './method';
import type { CheckInput, CheckRule, Rule } from './types';

export type { CheckInput, CheckRule, Rule } from './types';

/** Every rule, with its id. A plain function may stand here too (it then has no id of its own). */
export const RULES: (CheckRule | Rule)[] = [
  ...LATENCY_RULES,
  ...MEMORY_RULES,
  ...METHOD_RULES,
  ...BENCH_RULES,
  ...AUDIT_RULES,
  weightsFit,
];

const ruleId = (r: CheckRule | Rule, i: number) => (typeof r === 'function' ? r.name || `rule-${i}` : r.id);

export function runChecks(input: CheckInput): Finding[] {
  return RULES.flatMap((r, i) => {
    try {
      return typeof r === 'function' ? r(input) : r.check(input);
    } catch (e) {
      // One broken rule must not take the cell's other findings with it.
      return [
        finding('info', 'check-failed', `Check ${ruleId(r, i)} could not run: ${(e as Error)?.message ?? e}`, []),
      ];
    }
  });
}

/** Finding code → the short cause a compare table shows ("prefix-cache hit?"). */
export function causeTag(code: string): string | undefined {
  for (const r of RULES) if (typeof r !== 'function' && code in r.codes) return r.codes[code];
  return undefined;
}

/** The rules with ids, for documentation and tests. */
export function ruleList(): CheckRule[] {
  return RULES.filter((r): r is CheckRule => typeof r !== 'function');
}
