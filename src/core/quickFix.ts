/**
 * Quick fixes as edits of a cell's text: what a finding's quickFix says, applied with the smallest
 * change (the rest of the cell, its comments and layout keep their bytes). The editor adapter only
 * turns the result into a WorkspaceEdit.
 */
import { isMap, isScalar, LineCounter, parseDocument, type Node, type Pair } from 'yaml';
import type { QuickFix } from './findings';
import { setValueInSource } from './notebook/cellSource';

/** The cell's text with the fix applied (unchanged when the fix no longer fits the text). */
export function applyQuickFix(source: string, fix: QuickFix): string {
  const e = fix.edit;
  if (e.as === 'text') {
    if (!e.offset) return source;
    const [s, t] = e.offset;
    if (s < 0 || t > source.length || s > t) return source;
    return source.slice(0, s) + e.value + source.slice(t);
  }
  if (e.as === 'key') return renameKey(source, e.path, e.value);
  return setValueInSource(source, e.path, e.value);
}

/** Rename the key at `path` in place (its value, comment and position unchanged). */
function renameKey(source: string, path: (string | number)[], to: string): string {
  const doc = parseDocument(source, { lineCounter: new LineCounter() });
  if (doc.errors.length || !path.length) return source;
  const parentPath = path.slice(0, -1);
  const parent = parentPath.length ? doc.getIn(parentPath, true) : doc.contents;
  if (!isMap(parent)) return source;
  const last = String(path[path.length - 1]);
  const pair = parent.items.find((p) => (isScalar(p.key) ? String(p.key.value) : String(p.key)) === last) as
    Pair | undefined;
  const r = (pair?.key as Node | undefined)?.range;
  if (!r) return source;
  return source.slice(0, r[0]) + to + source.slice(r[1]);
}
