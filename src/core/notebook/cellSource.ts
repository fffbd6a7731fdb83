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
  const doc = parseDocument(source, { lineCounter, prettyErrors: false, uniqueKeys: true, logLevel: 'error' });
  const errors: Finding[] = [];
  for (const e of doc.errors) {
    const pos = positionAt(source, e.pos[0]);
    // A syntax error has no path; its offsets place it.
    errors.push(
      finding(
        'error',
        'yaml-syntax',
        `YAML: ${yamlMessage(e.message)} (line ${pos.line + 1}, column ${pos.character + 1})`,
        [],
        {
          offset: [clampOffset(source, e.pos[0]), clampOffset(source, e.pos[1])],
        },
      ),
    );
  }
  // An unquoted reference with [0] inside {…} gives a cascade of YAML errors: one finding instead.
  const refs = errors.length ? unquotedReferences(source) : [];
  if (refs.length)
    errors.splice(
      0,
      errors.length,
      ...refs.map((r) =>
        finding(
          'error',
          'unquoted-reference',
          `YAML reads the [ ] in ${r.text} as a list: inside {…} quote the reference, "${r.text}"`,
          [],
          {
            offset: r.offset,
            fix: `write "${r.text}" (with the quotes), or put the row's keys on their own lines`,
            quickFix: {
              title: `Quote "${r.text}"`,
              edit: { path: [], value: JSON.stringify(r.text), as: 'text', offset: r.offset },
            },
          },
        ),
      ),
    );
  let data: unknown;
  try {
    data = errors.length ? undefined : doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    errors.push(finding('error', 'yaml-syntax', `YAML: ${yamlMessage((e as Error).message)}`));
  }
  const out: ParsedCell = { source, doc, lineCounter, data, errors };
  if (!errors.length) {
    if (data === null || data === undefined) {
      out.errors.push(
        finding('error', 'empty-cell', 'The cell is empty: start it with a kind, e.g. "predict: decode-roofline"'),
      );
    } else if (!isMap(doc.contents)) {
      out.errors.push(
        finding(
          'error',
          'not-a-mapping',
          'A cell is a YAML mapping whose first key names its kind, e.g. "setup: day4" or "predict: floors"',
        ),
      );
    } else {
      const first = doc.contents.items[0];
      out.kindKey = isScalar(first?.key) ? String(first.key.value) : undefined;
      out.kindValue =
        first && isScalar(first.value) ? first.value.value : first?.value ? (first.value as Node).toJSON() : undefined;
    }
  }
  return out;
}

function firstLine(s: string): string {
  return s.split('\n')[0];
}

/** The yaml package's message, with what to write instead where it does not say. */
function yamlMessage(message: string): string {
  const m = firstLine(message);
  if (/call stack/i.test(m))
    return 'the cell nests too deeply to read (more levels of [ ], { } or indentation than a cell needs): flatten it';
  if (/alias count|resource exhaustion/i.test(m))
    return 'too many aliases (*name) expand here: write the values out instead of repeating aliases';
  return m;
}

/**
 * Line starts with line breaks counted as an editor counts them (\r\n, \r or \n), so a position
 * computed here is the position VS Code shows, whatever the cell's line endings. Computed from the
 * text itself: the yaml LineCounter only knows the lines the parser reached before an error.
 */
const LINE_STARTS = new Map<string, number[]>();
function lineStarts(source: string): number[] {
  let starts = LINE_STARTS.get(source);
  if (starts) return starts;
  starts = [0];
  for (let i = 0; i < source.length; i++) {
    const c = source.charCodeAt(i);
    if (c === 10) starts.push(i + 1);
    else if (c === 13) {
      if (source.charCodeAt(i + 1) === 10) i++;
      starts.push(i + 1);
    }
  }
  if (LINE_STARTS.size > 64) LINE_STARTS.clear();
  LINE_STARTS.set(source, starts);
  return starts;
}

/** Offset just past the text of line `i` (before its line break). */
function lineEnd(source: string, starts: number[], i: number): number {
  if (i + 1 >= starts.length) return source.length;
  const next = starts[i + 1];
  return source.charCodeAt(next - 1) === 10 && source.charCodeAt(next - 2) === 13 ? next - 2 : next - 1;
}

function clampOffset(source: string, offset: number): number {
  return Math.max(0, Math.min(source.length, Number.isFinite(offset) ? offset : 0));
}

/** The 0-based line and character of an offset (clamped into the text). */
export function positionAt(source: string, offset: number): Position {
  const starts = lineStarts(source);
  const o = clampOffset(source, offset);
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid] <= o) lo = mid;
    else hi = mid - 1;
  }
  return { line: lo, character: Math.min(o, lineEnd(source, starts, lo)) - starts[lo] };
}

function toPos(cell: ParsedCell, offset: number): Position {
  return positionAt(cell.source, offset);
}

/** Range of the whole first line (the kind line); where a finding with no better place goes. */
function firstLineRange(cell: ParsedCell): SourceRange {
  const starts = lineStarts(cell.source);
  const text = (i: number) => cell.source.slice(starts[i], lineEnd(cell.source, starts, i));
  let line = 0;
  for (let i = 0; i < starts.length; i++) {
    const t = text(i).trim();
    if (t && !t.startsWith('#')) {
      line = i;
      break;
    }
  }
  return { start: { line, character: 0 }, end: { line, character: text(line).length } };
}

/**
 * The range that holds a path: for a mapping key, from the key to the end of its value (so a
 * diagnostic covers `ttft: 23 ms`); for a list element, the element. A path that does not exist
 * falls back to its longest existing prefix, then to the kind line.
 */
export function rangeOfPath(cell: ParsedCell, path: CellPath, offset?: [number, number]): SourceRange {
  if (offset) return { start: toPos(cell, offset[0]), end: toPos(cell, Math.max(offset[0], offset[1])) };
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
      pair = node.items.find((p) => (isScalar(p.key) ? String(p.key.value) : String(p.key)) === String(seg)) as
        Pair | undefined;
      if (!pair) return undefined;
      node = pair.value;
    } else if (isSeq(node) && typeof seg === 'number') {
      node = node.items[seg];
      if (!node) return undefined;
    } else return undefined;
  }
  const keyNode = pair?.key as Node | undefined;
  const valNode = node as Node | undefined;
  const start = keyNode?.range?.[0] ?? valNode?.range?.[0];
  const end = valNode?.range?.[1] ?? keyNode?.range?.[1];
  if (start === undefined || end === undefined) return undefined;
  // A block value's range ends at the start of the next key: trim trailing whitespace/newlines.
  let e = end;
  while (e > start && /\s/.test(cell.source[e - 1] ?? '')) e--;
  return { start: toPos(cell, start), end: toPos(cell, e) };
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
          best = {
            path: [...path, k],
            value: isScalar(p.value) ? p.value.value : (p.value as Node | null)?.toJSON?.(),
          };
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
  const starts = lineStarts(source);
  const line = Math.max(0, Math.min(pos.line, starts.length - 1));
  return Math.min(starts[line] + Math.max(0, pos.character), lineEnd(source, starts, line));
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

/**
 * A reference like `roofline.rows[0].per_user_tok_s` written unquoted inside a flow mapping
 * (`{quantity: …, predicted: roofline.rows[0]…}`): YAML reads `[0]` as a list and reports a cascade
 * of syntax errors. Found here so that the cell gets one finding that says to quote it, with the fix.
 */
export function unquotedReferences(source: string): { offset: [number, number]; text: string }[] {
  const out: { offset: [number, number]; text: string }[] = [];
  // key: value inside a flow mapping, the value unquoted and holding [n] or [*] after a name.
  const re = /([{,]\s*[A-Za-z_][\w ]*:\s*)([^\s"'{}[\],][^"'{},]*?\w\[(?:\d+|\*)\][^,{}]*?)(\s*[,}])/g;
  for (let m = re.exec(source); m; m = re.exec(source)) {
    const start = m.index + m[1].length;
    const value = m[2].replace(/\s+$/, '');
    out.push({ offset: [start, start + value.length], text: value });
    re.lastIndex = start + value.length;
  }
  return out;
}
