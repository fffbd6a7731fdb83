/**
 * Physics checks: rules that turn impossible numbers into findings. Each rule takes a cell's
 * values (typed or computed) and the setup, and returns findings with a path into the cell.
 */
import type { Finding } from '../findings';
import type { NotebookContext, Setup } from '../engine/types';

export interface CheckInput {
  kind: string;
  cell: unknown;
  values?: Record<string, unknown>;
  setup?: Setup;
  notebook: NotebookContext;
  cellIndex: number;
}

export type Rule = (input: CheckInput) => Finding[];

export const RULES: Rule[] = [];

export function runChecks(input: CheckInput): Finding[] {
  return RULES.flatMap((r) => r(input));
}
