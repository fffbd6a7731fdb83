/**
 * The .inflab file format: JSON with a format version, validated with zod on read, written with a
 * stable key order, two-space indentation and a trailing newline. Cell sources are stored as arrays
 * of lines so a one-line edit is a one-line diff; JSON output data stays JSON.
 */
import { z } from 'zod';
import { isJsonMime } from '../engine/outputs';

export const FORMAT_VERSION = 1;

const outputItemSchema = z.object({ mime: z.string().min(1), data: z.unknown() }).strict();
const outputSchema = z.object({ items: z.array(outputItemSchema), metadata: z.record(z.string(), z.unknown()).optional() }).strict();

const lastRunSchema = z
  .object({
    executionOrder: z.number().int().optional(),
    success: z.boolean().optional(),
    startTime: z.number().optional(),
    endTime: z.number().optional(),
  })
  .strict();

const cellSchema = z
  .object({
    kind: z.enum(['code', 'markdown']),
    language: z.string().min(1),
    source: z.array(z.string()),
    metadata: z.record(z.string(), z.unknown()).optional(),
    lastRun: lastRunSchema.optional(),
    outputs: z.array(outputSchema).optional(),
  })
  .strict();

const fileSchema = z
  .object({
    inflab: z.number().int().positive(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    cells: z.array(cellSchema),
  })
  .strict();

export type NotebookCellFile = z.infer<typeof cellSchema>;
export type NotebookFile = z.infer<typeof fileSchema>;

export interface NbOutputItem {
  mime: string;
  data: unknown;
}
export interface NbCell {
  kind: 'code' | 'markdown';
  language: string;
  source: string;
  metadata?: Record<string, unknown>;
  lastRun?: z.infer<typeof lastRunSchema>;
  outputs?: { items: NbOutputItem[]; metadata?: Record<string, unknown> }[];
}
export interface Notebook {
  metadata?: Record<string, unknown>;
  cells: NbCell[];
}

export class NotebookFormatError extends Error {
  constructor(
    message: string,
    /** 1-based line in the file, where known. */
    public readonly line?: number,
    /** Where in the file's JSON the problem is (schema errors), e.g. ["cells", 3, "source"]. */
    public readonly path?: (string | number)[],
  ) {
    super(message);
    this.name = 'NotebookFormatError';
  }
}

const NOT_CHANGED = 'The file was not changed.';

/**
 * Parse file text. Throws NotebookFormatError naming what is wrong and where (line and column for
 * broken JSON, the JSON path and its line for a schema problem); never guesses and never returns a
 * partial notebook. An empty (or whitespace-only) file is a new, empty notebook. A leading UTF-8
 * byte-order mark is ignored.
 */
export function parseNotebook(text: string): Notebook {
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.trim() === '') return { cells: [] };
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    const err = jsonSyntaxError(text) ?? { offset: text.length, what: (e as Error).message };
    const { line, column } = lineColumn(text, err.offset);
    const truncated = err.offset >= text.trimEnd().length;
    throw new NotebookFormatError(
      `Not valid JSON at line ${line}, column ${column}: ${err.what}.` +
        (truncated ? ' The file ends early: it looks truncated (an interrupted save or copy); restore it from a backup or version control.' : ' Fix the JSON there (or restore the file from a backup or version control).') +
        ` ${NOT_CHANGED}`,
      line,
    );
  }
  if (json && typeof json === 'object' && typeof (json as any).inflab === 'number' && (json as any).inflab > FORMAT_VERSION) {
    throw new NotebookFormatError(
      `This notebook uses .inflab format version ${(json as any).inflab}, newer than this InfLab understands (version ${FORMAT_VERSION}). Update the InfLab extension to open it. ${NOT_CHANGED}`,
      lineOfPath(text, ['inflab']),
      ['inflab'],
    );
  }
  const r = fileSchema.safeParse(json);
  if (!r.success) {
    const i = r.error.issues[0];
    const path = issuePath(i);
    const where = path.length ? pathText(path) : 'the top level';
    const line = lineOfPath(text, path);
    throw new NotebookFormatError(
      `Not a valid .inflab notebook: at ${where}${line ? ` (line ${line})` : ''}: ${i.message}${hint(path, i)}` +
        `${r.error.issues.length > 1 ? ` (and ${r.error.issues.length - 1} more problem${r.error.issues.length > 2 ? 's' : ''})` : ''}. ${NOT_CHANGED}`,
      line,
      path,
    );
  }
  // Built from the JSON itself (which the schema accepted as it is): zod's copies of records drop
  // keys such as "__proto__", and metadata is the user's data.
  const file = json as NotebookFile;
  const nb: Notebook = { cells: file.cells.map(cellFromFile) };
  if (file.metadata !== undefined) nb.metadata = file.metadata;
  return nb;
}

function cellFromFile(c: NotebookCellFile): NbCell {
  const cell: NbCell = { kind: c.kind, language: c.language, source: c.source.join('\n') };
  if (c.metadata !== undefined) cell.metadata = c.metadata;
  if (c.lastRun !== undefined) cell.lastRun = c.lastRun;
  if (c.outputs !== undefined)
    cell.outputs = c.outputs.map((o) => {
      const out: NonNullable<NbCell['outputs']>[number] = { items: o.items.map((it) => ({ mime: it.mime, data: it.data })) };
      if (o.metadata !== undefined) out.metadata = o.metadata;
      return out;
    });
  return cell;
}

/** The issue's path, extended by the key for an unrecognized key so the line points at it. */
function issuePath(i: z.core.$ZodIssue): (string | number)[] {
  const path = i.path.map((p) => (typeof p === 'symbol' ? String(p) : p));
  if (i.code === 'unrecognized_keys' && i.keys.length) return [...path, i.keys[0]];
  return path;
}

function pathText(path: (string | number)[]): string {
  return path.map((p, k) => (typeof p === 'number' ? `[${p}]` : k === 0 ? p : `.${p}`)).join('');
}

/** What to write instead, for the places people edit by hand. */
function hint(path: (string | number)[], i: z.core.$ZodIssue): string {
  const last = path[path.length - 1];
  if (path.length === 1 && last === 'inflab') return `; the file starts with {"inflab": ${FORMAT_VERSION}, "cells": [...]}`;
  if (path.length === 1 && last === 'cells') return '; "cells" is a list of cells: "cells": [{"kind": "code", "language": "inflab", "source": ["..."]}]';
  if (path.length === 0) return `; an .inflab file is a JSON object: {"inflab": ${FORMAT_VERSION}, "cells": [...]}`;
  if (last === 'source' || (path[path.length - 2] === 'source' && typeof last === 'number'))
    return '; a cell\'s source is a list of lines (strings): "source": ["setup: lab", "gpu: a100-sxm4-80gb"]';
  if (last === 'kind' && i.code !== 'unrecognized_keys') return '; write "kind": "code" or "kind": "markdown"';
  if (last === 'data' || last === 'mime') return '; each output item is {"mime": "text/plain", "data": ...}';
  if (i.code === 'unrecognized_keys') return '; remove that key';
  return '';
}

/** 1-based line and column of an offset. */
function lineColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, column: offset - lineStart + 1 };
}

/**
 * A small JSON scanner, used only when JSON.parse failed (whose messages do not always say where)
 * or to find the line of a path in a file that did parse. Returns the first syntax error.
 */
function jsonSyntaxError(text: string): { offset: number; what: string } | undefined {
  const s = new JsonScanner(text);
  try {
    s.value(0, false);
    s.ws();
    if (s.i < text.length) s.fail('unexpected text after the end of the notebook');
  } catch (e) {
    if (e instanceof JsonScanError) return { offset: e.offset, what: e.what };
    return undefined; // e.g. nesting deeper than the stack: fall back to JSON.parse's message
  }
  return undefined;
}

/** Line of the value at a JSON path (or of its nearest existing parent); undefined if unknown. */
function lineOfPath(text: string, path: (string | number)[]): number | undefined {
  const s = new JsonScanner(text, path);
  try {
    s.value(0, true);
  } catch {
    // found it (JsonScanError), or nesting deeper than the stack: use what was found so far
  }
  return s.found === undefined ? undefined : lineColumn(text, s.found).line;
}

const STRICT_NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const NUMBER_PREFIX = /-?\d*(?:\.\d*)?(?:[eE][+-]?\d*)?/y;

class JsonScanError {
  constructor(
    public readonly offset: number,
    public readonly what: string,
  ) {}
}

class JsonScanner {
  i = 0;
  /** Offset of the deepest prefix of `target` seen so far. */
  found?: number;
  private foundDepth = -1;
  constructor(
    private readonly t: string,
    private readonly target?: (string | number)[],
  ) {}

  fail(what: string, at = this.i): never {
    throw new JsonScanError(at, at >= this.t.length ? 'the file ends in the middle of the JSON' : what);
  }
  ws(): void {
    const t = this.t;
    while (this.i < t.length) {
      const c = t.charCodeAt(this.i);
      if (c === 32 || c === 10 || c === 13 || c === 9) this.i++;
      else break;
    }
  }
  /** Only values on the target path are compared; the rest of the file is just scanned. */
  value(depth: number, onPath: boolean, keyAt?: number): void {
    this.ws();
    if (onPath && depth > this.foundDepth) {
      this.found = keyAt ?? this.i;
      this.foundDepth = depth;
      if (depth === this.target!.length) throw new JsonScanError(this.found, 'found');
    }
    const t = this.t;
    const c = t[this.i];
    if (c === '{') {
      this.i++;
      this.ws();
      if (t[this.i] === '}') {
        this.i++;
        return;
      }
      for (;;) {
        this.ws();
        if (t[this.i] !== '"') this.fail(`expected a "quoted" property name, found ${this.show()}`);
        const at = this.i;
        const raw = this.string();
        let key = raw;
        if (raw.includes('\\')) {
          try {
            key = JSON.parse(`"${raw}"`) as string; // "ce\u006cls" is "cells"
          } catch {
            // a bad escape: reported by the scan itself
          }
        }
        this.ws();
        if (t[this.i] !== ':') this.fail(`expected ":" after the property name "${key.slice(0, 40)}", found ${this.show()}`);
        this.i++;
        this.value(depth + 1, onPath && String(this.target![depth]) === key, at);
        this.ws();
        if (t[this.i] === ',') {
          this.i++;
          continue;
        }
        if (t[this.i] === '}') {
          this.i++;
          return;
        }
        this.fail(`expected "," or "}" after a property value, found ${this.show()}`);
      }
    }
    if (c === '[') {
      this.i++;
      this.ws();
      if (t[this.i] === ']') {
        this.i++;
        return;
      }
      for (let n = 0; ; n++) {
        this.value(depth + 1, onPath && String(this.target![depth]) === String(n));
        this.ws();
        if (t[this.i] === ',') {
          this.i++;
          continue;
        }
        if (t[this.i] === ']') {
          this.i++;
          return;
        }
        this.fail(`expected "," or "]" after a list element, found ${this.show()}`);
      }
    }
    if (c === '"') {
      this.string();
      return;
    }
    if (c === '-' || (c >= '0' && c <= '9')) {
      // A number cut off by the end of the file ("176." or "1e") is a truncation, not a typo.
      NUMBER_PREFIX.lastIndex = this.i;
      if (NUMBER_PREFIX.test(t) && NUMBER_PREFIX.lastIndex === t.length && this.i > 0) this.fail('', t.length);
      STRICT_NUMBER.lastIndex = this.i;
      if (STRICT_NUMBER.test(t)) {
        this.i = STRICT_NUMBER.lastIndex;
        return;
      }
    }
    // So is a literal cut off by the end of the file.
    if (this.t.length - this.i < 5 && ['true', 'false', 'null'].some((l) => l.startsWith(t.slice(this.i)) && l !== t.slice(this.i))) this.fail('', t.length);
    for (const lit of ['true', 'false', 'null']) {
      if (t.startsWith(lit, this.i)) {
        this.i += lit.length;
        return;
      }
    }
    this.fail(`expected a value (a string, number, object, list, true, false or null), found ${this.show()}`);
  }
  /** Offset of the next backslash at or after `nextBs`'s search start (cached: files are big). */
  private nextBs = -2;
  private backslashFrom(from: number): number {
    if (this.nextBs === -1 || (this.nextBs >= from && this.nextBs !== -2)) return this.nextBs;
    this.nextBs = this.t.indexOf('\\', from);
    return this.nextBs;
  }
  private string(): string {
    const t = this.t;
    const start = ++this.i;
    for (;;) {
      const j = t.indexOf('"', this.i);
      const bs = this.backslashFrom(this.i);
      if (j === -1) this.fail('unterminated string', t.length);
      if (bs !== -1 && bs < j) {
        this.checkControl(this.i, bs);
        const e = t[bs + 1];
        if (e === undefined || (e === 'u' && bs + 6 > t.length && /^[0-9a-fA-F]*$/.test(t.slice(bs + 2)))) this.fail('', t.length);
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(t.slice(bs + 2, bs + 6))) this.fail('bad \\u escape in a string (write \\u followed by four hex digits)', bs);
          this.i = bs + 6;
        } else if ('"\\/bfnrt'.includes(e)) this.i = bs + 2;
        else this.fail(`bad escape "\\${e}" in a string`, bs);
        continue;
      }
      this.checkControl(this.i, j);
      this.i = j + 1;
      return t.slice(start, j);
    }
  }
  private checkControl(from: number, to: number): void {
    for (let k = from; k < to; k++) {
      if (this.t.charCodeAt(k) < 0x20) this.fail('a raw control character (such as a line break) inside a string; write it escaped, e.g. \\n', k);
    }
  }
  private show(): string {
    if (this.i >= this.t.length) return 'the end of the file';
    const ch = this.t[this.i];
    return JSON.stringify(ch);
  }
}

/**
 * Serialize with stable key order and a trailing newline; the same notebook gives the same bytes.
 * Cell sources are split on "\n" only: a "\r" of a CRLF line ending stays at the end of its line
 * (shown as "\r" in the JSON), so sources round-trip byte for byte whatever their line endings.
 * What JSON cannot hold is made explicit rather than silently dropped: an output item whose data is
 * undefined is written as null, and lastRun numbers that are not finite are left out. The result is
 * checked against the schema so that a file this writes is always a file parseNotebook reads.
 */
export function serializeNotebook(nb: Notebook): string {
  const file: Record<string, unknown> = { inflab: FORMAT_VERSION };
  if (nb.metadata && Object.keys(nb.metadata).length) file.metadata = sortKeys(nb.metadata);
  file.cells = nb.cells.map((c) => {
    const cell: Record<string, unknown> = { kind: c.kind, language: c.language, source: c.source.split('\n') };
    if (c.metadata && Object.keys(c.metadata).length) cell.metadata = sortKeys(c.metadata);
    const lastRun = c.lastRun && cleanLastRun(c.lastRun);
    if (lastRun && Object.keys(lastRun).length) cell.lastRun = sortKeys(lastRun);
    if (c.outputs && c.outputs.length)
      cell.outputs = c.outputs.map((o) => {
        const out: Record<string, unknown> = { items: o.items.map((it) => ({ mime: it.mime, data: it.data === undefined ? null : sortKeys(it.data) })) };
        if (o.metadata && Object.keys(o.metadata).length) out.metadata = sortKeys(o.metadata);
        return out;
      });
    return cell;
  });
  const r = fileSchema.safeParse(file);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new NotebookFormatError(
      `Cannot save this notebook: at ${pathText(issuePath(i))}: ${i.message}. Nothing was written; the file on disk is unchanged.`,
      undefined,
      issuePath(i),
    );
  }
  return JSON.stringify(file, null, 2) + '\n';
}

function cleanLastRun(l: NonNullable<NbCell['lastRun']>): NonNullable<NbCell['lastRun']> {
  const out: NonNullable<NbCell['lastRun']> = {};
  if (typeof l.executionOrder === 'number' && Number.isSafeInteger(l.executionOrder)) out.executionOrder = l.executionOrder;
  if (typeof l.success === 'boolean') out.success = l.success;
  if (typeof l.startTime === 'number' && Number.isFinite(l.startTime)) out.startTime = l.startTime;
  if (typeof l.endTime === 'number' && Number.isFinite(l.endTime)) out.endTime = l.endTime;
  return out;
}

/** A copy with object keys sorted; "__proto__" and other odd keys are kept as plain data. */
function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    if (typeof (v as { toJSON?: unknown }).toJSON === 'function') return v; // Dates etc.: JSON.stringify decides
    const o: Record<string, unknown> = {};
    for (const k of Object.keys(v as object).sort()) {
      const x = sortKeys((v as Record<string, unknown>)[k]);
      if (k === '__proto__') Object.defineProperty(o, k, { value: x, enumerable: true, writable: true, configurable: true });
      else o[k] = x;
    }
    return o;
  }
  return v;
}

/** Output item data to bytes (what VS Code holds) and back: JSON mimes as JSON, text as UTF-8. */
export function itemToBytes(item: NbOutputItem): Uint8Array {
  const text = isJsonMime(item.mime) || typeof item.data !== 'string' ? JSON.stringify(item.data) : (item.data as string);
  return new TextEncoder().encode(text);
}

export function itemFromBytes(mime: string, bytes: Uint8Array): NbOutputItem {
  const text = new TextDecoder().decode(bytes);
  if (isJsonMime(mime)) {
    try {
      return { mime, data: JSON.parse(text) };
    } catch {
      return { mime, data: text };
    }
  }
  return { mime, data: text };
}
