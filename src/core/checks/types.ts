/** Types shared by the check rules (kept apart from index.ts so rule files do not import the registry). */
import type { NotebookContext, Setup } from '../engine/types';
import type { Fact } from '../facts/schema';
import type { Finding } from '../findings';

export interface CheckInput {
  /** Kind id as the engine names it: "record", "compare", "bench: sweep", "audit", "predict: decode-roofline". */
  kind: string;
  /** The cell as its kind's zod schema parsed it (quantities are Quantity objects). */
  cell: unknown;
  /** The values the cell's run produced; absent during static analysis (as the user types). */
  values?: Record<string, unknown>;
  /** The facts the cell states: a run's, or (as the user types) what the cell's own keys state. */
  facts?: Fact[];
  setup?: Setup;
  notebook: NotebookContext;
  cellIndex: number;
}

export type Rule = (input: CheckInput) => Finding[];

/** A rule with an id: `codes` are the finding codes it may emit, each with a short cause tag. */
export interface CheckRule {
  id: string;
  /** One line: what the rule catches. */
  summary: string;
  /** The cell keys and value names it reads (documentation; shown by the report and tests). */
  reads: string[];
  /** Finding code → the short cause a compare table shows in its cause column. */
  codes: Record<string, string>;
  check: Rule;
}
