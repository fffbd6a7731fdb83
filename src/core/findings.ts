/**
 * A finding is what every check, schema error and physics rule produces. It carries a path inside
 * the cell (["ttft"], ["slo", "ttft_p99"]); only the editor adapter turns that path into a range.
 */
export type Severity = 'error' | 'warning' | 'info';

export type CellPath = (string | number)[];

export interface RelatedInfo {
  message: string;
  /** Index of the cell the related value lives in (notebook order), when known. */
  cellIndex?: number;
  path?: CellPath;
}

export interface QuickFix {
  title: string;
  /**
   * Set (or replace) the value at `path` with this YAML scalar/flow text. With `as: 'key'`, rename
   * the key at `path` to `value` instead; with `as: 'text'`, replace the characters `offset` of the
   * cell with `value` (for a cell whose YAML does not parse). applyQuickFix (quickFix.ts) applies it.
   */
  edit: { path: CellPath; value: string; as?: 'value' | 'key' | 'text'; offset?: [number, number] };
}

export interface Finding {
  severity: Severity;
  /** Stable rule id, e.g. "ttft-below-prefill-floor". */
  code: string;
  message: string;
  path: CellPath;
  cause?: string;
  fix?: string;
  related?: RelatedInfo[];
  quickFix?: QuickFix;
  /** Character offsets [start, end) in the cell, for a finding that has no path (a YAML syntax error). */
  offset?: [number, number];
}

export function finding(
  severity: Severity,
  code: string,
  message: string,
  path: CellPath = [],
  extra: Partial<Pick<Finding, 'cause' | 'fix' | 'related' | 'quickFix' | 'offset'>> = {},
): Finding {
  return { severity, code, message, path, ...extra };
}

/** The same finding reached twice (analysis while typing and after a run) is shown once. */
export function dedupeFindings(fs: Finding[]): Finding[] {
  const seen = new Set<string>();
  return fs.filter((f) => {
    const k = `${f.code}|${f.path.join('.')}|${f.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** One line of text per finding, as the CLI prints them. */
export function formatFinding(f: Finding): string {
  const where = f.path.length ? ` at ${f.path.join('.')}` : '';
  let s = `${f.severity} [${f.code}]${where}: ${f.message}`;
  if (f.cause) s += `\n    cause: ${f.cause}`;
  if (f.fix) s += `\n    fix: ${f.fix}`;
  return s;
}

/** Raised by a cell's run when it cannot go on; becomes an error output with the path's line. */
export class CellError extends Error {
  constructor(
    message: string,
    public readonly path: CellPath = [],
    public readonly code = 'cell-error',
  ) {
    super(message);
    this.name = 'CellError';
  }
}
