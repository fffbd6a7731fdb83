/**
 * The cell language: YAML whose first key names the kind. Parsed with the `yaml` package keeping
 * source ranges, so any finding's path (["slo", "ttft_p99"]) maps back to the line that holds it.
 */
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node, type Pair } from 'yaml';
import { finding, type CellPath, type Finding } from '../findings';

export interface Position {
  line: number; // 0-based
  character: number; // 0-based
}
export interface SourceRange {
  start: Position;
  end: Position;
}

export interface ParsedCell {
  source: string;
  doc: Document.Parsed;
  lineCounter: LineCounter;
  /** The plain JS value of the document (undefined when the YAML did not parse). */
  data: unknown;
  /** First key of the mapping, e.g. "predict", and its value, e.g. "decode-roofline". */
  kindKey?: string;
  kindValue?: unknown;
  /** YAML syntax errors and structural errors, with paths or ranges. */
  errors: Finding[];
}

export function parseCell(source: string): ParsedCell {
  const lineCounter = new LineCounter();
  const doc = parseDocument(source, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const errors: Finding[] = [];
  for (const e of doc.errors) {
    const pos = lineCounter.linePos(e.pos[0]);
    errors.push({
      ...finding('error', 'yaml-syntax', `YAML: ${firstLine(e.message)} (line ${pos.line}, column ${pos.col})`, []),
      related: [{ message: `line ${pos.line}` }],
      // A syntax error has no path; keep its offset so the adapter can place it.
      ...({ offset: e.pos } as object),
    });
  }
  let data: unknown;
  try {
    data = errors.length ? undefined : doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    errors.push(finding('error', 'yaml-syntax', `YAML: ${(e as Error).message}`));
  }
  const out: ParsedCell = { source, doc, lineCounter, data, errors };
  if (!errors.length) {
    if (data === null || data === undefined) {
      out.errors.push(finding('error', 'empty-cell', 'The cell is empty: start it with a kind, e.g. "predict: decode-roofline"'));
    } else if (!isMap(doc.contents)) {
      out.errors.push(
        finding('error', 'not-a-mapping', 'A cell is a YAML mapping whose first key names its kind, e.g. "setup: day4" or "predict: floors"'),
      );
    } else {
      const first = doc.contents.items[0];
      out.kindKey = isScalar(first?.key) ? String(first.key.value) : undefined;
      out.kindValue = first && isScalar(first.value) ? first.value.value : first?.value ? (first.value as Node).toJSON() : undefined;
    }
  }
  return out;
}

function firstLine(s: string): string {
  return s.split('\n')[0];
}

function toPos(lc: LineCounter, offset: number): Position {
  const p = lc.linePos(offset);
  return { line: p.line - 1, character: p.col - 1 };
}

/** Range of the whole first line (the kind line); where a finding with no better place goes. */
function firstLineRange(cell: ParsedCell): SourceRange {
  const firstNonEmpty = cell.source.split('\n').findIndex((l) => l.trim() && !l.trim().startsWith('#'));
  const line = Math.max(0, firstNonEmpty);
  const len = cell.source.split('\n')[line]?.length ?? 0;
  return { start: { line, character: 0 }, end: { line, character: len } };
}

/**
 * The range that holds a path: for a mapping key, from the key to the end of its value (so a
 * diagnostic covers `ttft: 23 ms`); for a list element, the element. A path that does not exist
 * falls back to its longest existing prefix, then to the kind line.
 */
export function rangeOfPath(cell: ParsedCell, path: CellPath, offset?: [number, number]): SourceRange {
  const lc = cell.lineCounter;
  if (offset) return { start: toPos(lc, offset[0]), end: toPos(lc, Math.max(offset[0], offset[1])) };
  for (let n = path.length; n > 0; n--) {
    const r = rangeOfExactPath(cell, path.slice(0, n));
    if (r) return r;
  }
  return firstLineRange(cell);
}

function rangeOfExactPath(cell: ParsedCell, path: CellPath): SourceRange | undefined {
  let node: unknown = cell.doc.contents;
  let pair: Pair | undefined;
  for (const seg of path) {
    pair = undefined;
    if (isMap(node)) {
      pair = node.items.find((p) => (isScalar(p.key) ? String(p.key.value) : String(p.key)) === String(seg)) as Pair | undefined;
      if (!pair) return undefined;
      node = pair.value;
    } else if (isSeq(node) && typeof seg === 'number') {
      node = node.items[seg];
      if (!node) return undefined;
    } else return undefined;
  }
  const lc = cell.lineCounter;
  const keyNode = pair?.key as Node | undefined;
  const valNode = node as Node | undefined;
  const start = keyNode?.range?.[0] ?? valNode?.range?.[0];
  const end = valNode?.range?.[1] ?? keyNode?.range?.[1];
  if (start === undefined || end === undefined) return undefined;
  // A block value's range ends at the start of the next key: trim trailing whitespace/newlines.
  let e = end;
  while (e > start && /\s/.test(cell.source[e - 1] ?? '')) e--;
  return { start: toPos(lc, start), end: toPos(lc, e) };
}

/** The path whose key or value covers a position (deepest first); used by hovers. */
export function pathAt(cell: ParsedCell, pos: Position): { path: CellPath; value: unknown } | undefined {
  const offset = offsetOf(cell.source, pos);
  let best: { path: CellPath; value: unknown } | undefined;
  const walk = (node: unknown, path: CellPath): void => {
    if (isMap(node)) {
      for (const p of node.items) {
        const k = isScalar(p.key) ? String(p.key.value) : String(p.key);
        const kr = (p.key as Node)?.range;
        const vr = (p.value as Node)?.range;
        const s = kr?.[0] ?? vr?.[0];
        const e = vr?.[1] ?? kr?.[1];
        if (s !== undefined && e !== undefined && offset >= s && offset <= e) {
          best = { path: [...path, k], value: isScalar(p.value) ? p.value.value : (p.value as Node | null)?.toJSON?.() };
          walk(p.value, [...path, k]);
        }
      }
    } else if (isSeq(node)) {
      node.items.forEach((it, i) => {
        const r = (it as Node)?.range;
        if (r && offset >= r[0] && offset <= r[1]) {
          best = { path: [...path, i], value: isScalar(it) ? it.value : (it as Node).toJSON() };
          walk(it, [...path, i]);
        }
      });
    }
  };
  walk(cell.doc.contents, []);
  return best;
}

export function offsetOf(source: string, pos: Position): number {
  const lines = source.split('\n');
  let off = 0;
  for (let i = 0; i < pos.line && i < lines.length; i++) off += lines[i].length + 1;
  return off + pos.character;
}

/**
 * Set the value at a path, as a minimal text edit: an existing value is replaced in place (the rest
 * of the line, its comment and the other keys keep their bytes); a missing top-level key is
 * appended as a new line. Anything else falls back to re-printing the document.
 */
export function setValueInSource(source: string, path: CellPath, yamlValue: string): string {
  const lineCounter = new LineCounter();
  const doc = parseDocument(source, { lineCounter });
  if (!doc.errors.length && path.length) {
    const parentPath = path.slice(0, -1);
    const parent = parentPath.length ? doc.getIn(parentPath, true) : doc.contents;
    const last = path[path.length - 1];
    if (isMap(parent)) {
      const pair = parent.items.find((p) => (isScalar(p.key) ? String(p.key.value) : String(p.key)) === String(last));
      const range = (pair?.value as Node | undefined)?.range;
      if (pair && range) {
        let end = range[1];
        while (end > range[0] && /\s/.test(source[end - 1] ?? '')) end--;
        return source.slice(0, range[0]) + yamlValue + source.slice(end);
      }
      if (!pair && parentPath.length === 0) {
        const body = source.endsWith('\n') ? source : source + '\n';
        return `${body}${String(last)}: ${yamlValue}\n`;
      }
    }
  }
  doc.setIn(path, parseDocument(yamlValue).contents);
  return doc.toString({ lineWidth: 0 });
}
