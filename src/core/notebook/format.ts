/**
 * The .inflab file format: JSON with a format version, validated with zod on read, written with a
 * stable key order, two-space indentation for the document's structure and a trailing newline.
 * Cell sources are stored as arrays of lines so a one-line edit is a one-line diff; output data
 * stays JSON, each item's data on one line of compact JSON (see serializeNotebook). Any JSON layout
 * is read, including files written before output data went on one line.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { isJsonMime } from '../engine/outputs';

export const FORMAT_VERSION = 1;

const outputItemSchema = z.object({ mime: z.string().min(1), data: z.unknown() }).strict();
const outputSchema = z
  .object({ items: z.array(outputItemSchema), metadata: z.record(z.string(), z.unknown()).optional() })
  .strict();

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
/** An output item as the editor holds it: its data as bytes (see itemToBytes). */
export interface NbOutputBytes {
  mime: string;
  bytes: Uint8Array;
}
export interface NbCell<I = NbOutputItem> {
  kind: 'code' | 'markdown';
  language: string;
  source: string;
  metadata?: Record<string, unknown>;
  lastRun?: z.infer<typeof lastRunSchema>;
  outputs?: { items: I[]; metadata?: Record<string, unknown> }[];
}
export interface Notebook<I = NbOutputItem> {
  metadata?: Record<string, unknown>;
  cells: NbCell<I>[];
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
 * byte-order mark is ignored. Bytes are decoded as UTF-8 and refused where they are not (decodeUtf8).
 *
 * JSON that JSON.parse accepts but would read lossily is refused too, with its line and column, so
 * that a save never rewrites it silently: a key twice in one object (the first would be dropped),
 * a number a double cannot hold exactly (9007199254740993, 1e400), nesting deeper than MAX_DEPTH.
 */
export function parseNotebook(content: string | Uint8Array): Notebook {
  return parseText(typeof content === 'string' ? content : decodeUtf8(content), false);
}

/** parseNotebook of decoded text; `checked`: refuseLossy already accepted this text. */
function parseText(text: string, checked: boolean): Notebook {
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.trim() === '') return { cells: [] };
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    if (e instanceof RangeError) throw tooDeep(); // nesting deeper than JSON.parse's stack
    const err = jsonSyntaxError(text) ?? { offset: text.length, what: (e as Error).message };
    const { line, column } = lineColumn(text, err.offset);
    const truncated = err.offset >= text.trimEnd().length;
    throw new NotebookFormatError(
      `Not valid JSON at line ${line}, column ${column}: ${err.what}.` +
        (truncated
          ? ' The file ends early: it looks truncated (an interrupted save or copy); restore it from a backup or version control.'
          : ' Fix the JSON there (or restore the file from a backup or version control).') +
        ` ${NOT_CHANGED}`,
      line,
    );
  }
  if (!checked) refuseLossy(text);
  if (
    json &&
    typeof json === 'object' &&
    typeof (json as any).inflab === 'number' &&
    (json as any).inflab > FORMAT_VERSION
  ) {
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
  const nb: Notebook = { cells: file.cells.map((c) => cellFromFile(c)) };
  if (file.metadata !== undefined) nb.metadata = file.metadata;
  return nb;
}

type FileItem = { mime: string; data: unknown };
const plainItem = (it: FileItem): NbOutputItem => ({ mime: it.mime, data: it.data });

function cellFromFile<I = NbOutputItem>(
  c: NotebookCellFile,
  item: (it: FileItem) => I = plainItem as unknown as (it: FileItem) => I,
): NbCell<I> {
  const cell: NbCell<I> = { kind: c.kind, language: c.language, source: c.source.join('\n') };
  if (c.metadata !== undefined) cell.metadata = c.metadata;
  if (c.lastRun !== undefined) cell.lastRun = c.lastRun;
  if (c.outputs !== undefined)
    cell.outputs = c.outputs.map((o) => {
      const out: NonNullable<NbCell<I>['outputs']>[number] = { items: o.items.map(item) };
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
  if (path.length === 1 && last === 'inflab')
    return `; the file starts with {"inflab": ${FORMAT_VERSION}, "cells": [...]}`;
  if (path.length === 1 && last === 'cells')
    return '; "cells" is a list of cells: "cells": [{"kind": "code", "language": "inflab", "source": ["..."]}]';
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
    /** Valid JSON that JSON.parse would read lossily (strict scans only), not a syntax error. */
    public readonly lossy = false,
  ) {}
}

/**
 * Deepest nesting of objects and lists a notebook file may have, counted from the file's top level
 * (the format itself uses 8 at most: cells, a cell, its outputs, an output, its items, an item, its
 * data). Deeper files are refused at open: saving them (JSON.stringify, the key sorting) and the
 * engine recurse, and run out of stack some thousands of levels down, after every cell has run.
 */
export const MAX_DEPTH = 256;

/**
 * Why a JSON number literal cannot be kept exactly as a JavaScript number, or undefined: beyond
 * the largest double (1e400 becomes Infinity, saved as null), below the smallest (1e-400 becomes
 * 0), or more digits than a double holds (9007199254740993 becomes 9007199254740992). Compared as
 * decimal digits with the shortest form JSON.stringify writes, so every number this module wrote
 * passes, and so does 1.50 or 1e5 (the same value, written another way).
 */
function numberLoss(raw: string): string | undefined {
  const v = Number(raw);
  const shown = raw.length > 40 ? `${raw.slice(0, 40)}…` : raw;
  const asString = `write it as a string ("${shown}") to keep it exactly`;
  if (!Number.isFinite(v))
    return `the number ${shown} is beyond the largest number a JSON reader holds (about 1.8e308): it would be saved as null; ${asString}`;
  if (String(v) === raw) return undefined;
  const a = decimalDigits(raw);
  const b = decimalDigits(String(Math.abs(v)));
  if (a.digits === b.digits && (a.exp === b.exp || !a.digits)) return undefined;
  if (v === 0) return `the number ${shown} is too small to hold: it would be saved as 0; ${asString}`;
  return `the number ${shown} has more digits than a JSON reader keeps: it would be saved as ${String(v)} (whole numbers are exact only up to 2^53 = 9007199254740992); ${asString}`;
}

/** A decimal literal as significant digits D and exponent E, its value 0.D × 10^E. */
function decimalDigits(raw: string): { digits: string; exp: number } {
  const m = /^-?(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(raw);
  if (!m) return { digits: raw, exp: 0 };
  const all = m[1] + (m[2] ?? '');
  const lead = all.length - all.replace(/^0+/, '').length;
  return { digits: all.slice(lead).replace(/0+$/, ''), exp: m[1].length - lead + Number(m[3] ?? 0) };
}

/**
 * Throws a NotebookFormatError, with the line and column, for JSON that JSON.parse reads lossily
 * (see parseNotebook). Returns true when the text scanned as valid JSON, false when it has a
 * syntax error (which parseText reports, with its line).
 */
function refuseLossy(text: string): boolean {
  const s = new JsonScanner(text, undefined, true);
  try {
    s.value(0, false);
    s.ws();
    return s.i >= text.length;
  } catch (e) {
    if (e instanceof RangeError) throw tooDeep();
    if (!(e instanceof JsonScanError) || !e.lossy) return false;
    const { line, column } = lineColumn(text, e.offset);
    throw new NotebookFormatError(
      `Refused at line ${line}, column ${column}: ${e.what}. InfLab opens only what it can save back without loss. ${NOT_CHANGED}`,
      line,
    );
  }
}

function tooDeep(): NotebookFormatError {
  return new NotebookFormatError(
    `Refused: the JSON nests more than ${MAX_DEPTH} levels deep, the most InfLab opens (saving deeper data would run out of stack); flatten the deepest metadata. ${NOT_CHANGED}`,
  );
}

const fatalDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * A notebook file's bytes as text, refusing bytes that are not UTF-8 (decoded leniently they would
 * become U+FFFD, and a save would write that): the error names the line, column and byte of the
 * first one. The CLI reads the files it is given through this.
 */
export function decodeUtf8(bytes: Uint8Array): string {
  try {
    return fatalDecoder.decode(bytes);
  } catch {
    const at = firstBadByte(bytes);
    let line = 1;
    let lineStart = 0;
    for (let k = 0; k < at; k++) {
      if (bytes[k] === 10) {
        line++;
        lineStart = k + 1;
      }
    }
    const column = decoder.decode(bytes.subarray(lineStart, at)).length + 1;
    throw new NotebookFormatError(
      `Refused at line ${line}, column ${column}: byte ${at} (0x${(bytes[at] ?? 0).toString(16).padStart(2, '0')}) is not UTF-8 text; opened, it would become U+FFFD and be saved so. Convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8) and open it again. ${NOT_CHANGED}`,
      line,
    );
  }
}

/** Offset of the first byte that does not start (or continue) a valid UTF-8 sequence. */
function firstBadByte(bytes: Uint8Array): number {
  // Decoding leniently and encoding back gives the same bytes up to the first bad one.
  const again = encoder.encode(decoder.decode(bytes));
  let at = 0;
  while (at < bytes.length && at < again.length && bytes[at] === again[at]) at++;
  // The character of the re-encoded text holding the first difference is a U+FFFD put in for the
  // bad bytes (its first bytes may match them, e.g. a cut-short 0xEF 0xBF): it starts where they do.
  while (at > 0 && (again[at] & 0xc0) === 0x80) at--;
  return at;
}

class JsonScanner {
  i = 0;
  /** Offset of the deepest prefix of `target` seen so far. */
  found?: number;
  private foundDepth = -1;
  constructor(
    private readonly t: string,
    private readonly target?: (string | number)[],
    /** Also stop at what JSON.parse accepts but would lose: see refuseLossy. */
    private readonly strict = false,
  ) {}

  fail(what: string, at = this.i): never {
    throw new JsonScanError(at, at >= this.t.length ? 'the file ends in the middle of the JSON' : what);
  }
  /** Valid JSON that would be read lossily (strict scans). */
  lossy(what: string, at = this.i): never {
    throw new JsonScanError(at, what, true);
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
    if (this.strict && depth >= MAX_DEPTH && (c === '{' || c === '['))
      this.lossy(
        `the JSON nests more than ${MAX_DEPTH} levels deep here, the most InfLab opens (saving deeper data would run out of stack); flatten the data here`,
      );
    if (c === '{') {
      this.i++;
      this.ws();
      if (t[this.i] === '}') {
        this.i++;
        return;
      }
      const seen = this.strict ? new Map<string, number>() : undefined;
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
        if (seen) {
          const first = seen.get(key);
          if (first !== undefined)
            this.lossy(
              `the key ${JSON.stringify(key.length > 40 ? `${key.slice(0, 40)}…` : key)} appears twice in one object (first at line ${lineColumn(t, first).line}); a JSON reader keeps only the last, so the first would be silently lost. Remove or rename one of them`,
              at,
            );
          seen.set(key, at);
        }
        this.ws();
        if (t[this.i] !== ':')
          this.fail(`expected ":" after the property name "${key.slice(0, 40)}", found ${this.show()}`);
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
    // At most 15 digits (and no exponent): a double holds every such decimal exactly (DBL_DIG).
    if (this.strict && (c === '-' || (c >= '0' && c <= '9'))) {
      // JSON.parse checks the syntax: here only whether the number is kept exactly.
      const start = this.i;
      let end = start + 1;
      let exp = false;
      for (; end < t.length; end++) {
        const d = t.charCodeAt(end);
        if (d === 101 || d === 69)
          exp = true; // e E
        else if (!((d >= 48 && d <= 57) || d === 46 || d === 43 || d === 45)) break; // 0-9 . + -
      }
      this.i = end;
      if (end - start > 15 || exp) {
        const loss = numberLoss(t.slice(start, end));
        if (loss) this.lossy(loss, start);
      }
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
    if (
      this.t.length - this.i < 5 &&
      ['true', 'false', 'null'].some((l) => l.startsWith(t.slice(this.i)) && l !== t.slice(this.i))
    )
      this.fail('', t.length);
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
        if (e === undefined || (e === 'u' && bs + 6 > t.length && /^[0-9a-fA-F]*$/.test(t.slice(bs + 2))))
          this.fail('', t.length);
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(t.slice(bs + 2, bs + 6)))
            this.fail('bad \\u escape in a string (write \\u followed by four hex digits)', bs);
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
    // A strict scan looks only for what is lossy: JSON.parse finds the syntax errors.
    if (this.strict) return;
    for (let k = from; k < to; k++) {
      if (this.t.charCodeAt(k) < 0x20)
        this.fail('a raw control character (such as a line break) inside a string; write it escaped, e.g. \\n', k);
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
 *
 * Layout: the document structure (cells, sources, metadata, lastRun, outputs and their items) is
 * pretty-printed with two-space indentation, as JSON.stringify(…, null, 2) writes it; each output
 * item's `data` is one line of compact JSON (sorted keys, no spaces). So a cell source is one line
 * per source line (a one-line edit is a one-line diff) while 50 MB of bench records or a plot spec
 * stay about 50 MB on disk instead of one number per line. The parser reads any JSON layout: files
 * written before this layout (data pretty-printed too; same format version 1) open as they are,
 * and saving them writes this layout.
 *
 * Cell sources are split on "\n" only: a "\r" of a CRLF line ending stays at the end of its line
 * (shown as "\r" in the JSON), so sources round-trip byte for byte whatever their line endings.
 * What JSON cannot hold is made explicit rather than silently dropped: an output item whose data is
 * undefined (or a function) is written as null, and lastRun numbers that are not finite are left
 * out. The structure is checked against the schema and every item's data is written by
 * JSON.stringify, so a file this writes is always a file parseNotebook reads, without parsing it
 * again.
 */
export function serializeNotebook(nb: Notebook): string {
  return layout(nb, (it) => compactData(it.data)).join('');
}

/**
 * The file's parts in order: the pretty-printed structure as text, each item's data as `dataOf`
 * gives it (one line of JSON, as text or as UTF-8 bytes). The structure is checked against the
 * schema first; nothing is returned for a notebook that cannot be saved.
 */
function layout<I extends { mime: string }>(
  nb: Notebook<I>,
  dataOf: (it: I) => string | Uint8Array,
): (string | Uint8Array)[] {
  const file: Record<string, unknown> = { inflab: FORMAT_VERSION };
  if (nb.metadata && Object.keys(nb.metadata).length) file.metadata = sortKeys(nb.metadata);
  // The skeleton (what the schema checks): item data is written separately, one line each.
  const items: I[] = [];
  file.cells = nb.cells.map((c) => {
    const cell: Record<string, unknown> = { kind: c.kind, language: c.language, source: c.source.split('\n') };
    if (c.metadata && Object.keys(c.metadata).length) cell.metadata = sortKeys(c.metadata);
    const lastRun = c.lastRun && cleanLastRun(c.lastRun);
    if (lastRun && Object.keys(lastRun).length) cell.lastRun = sortKeys(lastRun);
    if (c.outputs && c.outputs.length)
      cell.outputs = c.outputs.map((o) => {
        const out: Record<string, unknown> = {
          items: o.items.map((it) => {
            items.push(it);
            return { mime: it.mime, data: null };
          }),
        };
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
  return new Writer(items.map(dataOf)).file(file);
}

/** Writes the layout described at serializeNotebook. */
class Writer {
  private readonly parts: (string | Uint8Array)[] = [];
  private next = 0;
  constructor(private readonly data: (string | Uint8Array)[]) {}

  file(f: Record<string, unknown>): (string | Uint8Array)[] {
    const p = this.parts;
    p.push(`{\n  "inflab": ${JSON.stringify(f.inflab)}`);
    if (f.metadata !== undefined) p.push(',\n  "metadata": ', pretty(f.metadata, '  '));
    p.push(',\n  "cells": ');
    this.list(f.cells as Record<string, unknown>[], '  ', (c, ind) => this.cell(c, ind));
    p.push('\n}\n');
    return p;
  }

  private list<T>(xs: T[], ind: string, each: (x: T, ind: string) => void): void {
    const p = this.parts;
    if (!xs.length) {
      p.push('[]');
      return;
    }
    const inner = ind + '  ';
    p.push('[');
    xs.forEach((x, k) => {
      p.push(k ? ',\n' : '\n', inner);
      each(x, inner);
    });
    p.push('\n', ind, ']');
  }

  private cell(c: Record<string, unknown>, ind: string): void {
    const p = this.parts;
    const inner = ind + '  ';
    p.push(
      `{\n${inner}"kind": ${JSON.stringify(c.kind)},\n${inner}"language": ${JSON.stringify(c.language)},\n${inner}"source": `,
      pretty(c.source, inner),
    );
    if (c.metadata !== undefined) p.push(`,\n${inner}"metadata": `, pretty(c.metadata, inner));
    if (c.lastRun !== undefined) p.push(`,\n${inner}"lastRun": `, pretty(c.lastRun, inner));
    if (c.outputs !== undefined) {
      p.push(`,\n${inner}"outputs": `);
      this.list(c.outputs as Record<string, unknown>[], inner, (o, oi) => this.output(o, oi));
    }
    p.push('\n', ind, '}');
  }

  private output(o: Record<string, unknown>, ind: string): void {
    const p = this.parts;
    const inner = ind + '  ';
    p.push(`{\n${inner}"items": `);
    this.list(o.items as { mime: string }[], inner, (it, ii) => {
      const d = ii + '  ';
      p.push(`{\n${d}"mime": ${JSON.stringify(it.mime)},\n${d}${DATA_KEY}`, this.data[this.next++], '\n', ii, '}');
    });
    if (o.metadata !== undefined) p.push(`,\n${inner}"metadata": `, pretty(o.metadata, inner));
    p.push('\n', ind, '}');
  }
}

/** How an item's data starts its line in the file. */
const DATA_KEY = '"data": ';

/** JSON.stringify(v, null, 2), indented to sit at `ind` (JSON strings hold no raw line breaks). */
function pretty(v: unknown, ind: string): string {
  return JSON.stringify(v, null, 2).replace(/\n/g, '\n' + ind);
}

/** One line of compact JSON with sorted keys; null for what JSON cannot hold (undefined, a function). */
function compactData(v: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(canonical(v));
  } catch (e) {
    // A BigInt or a cycle: said, not written.
    throw new NotebookFormatError(
      `Cannot save this notebook: an output holds data JSON cannot store (${(e as Error).message}). Clear that output and save again. Nothing was written; the file on disk is unchanged.`,
    );
  }
  return text ?? 'null';
}

function cleanLastRun(l: NonNullable<NbCell['lastRun']>): NonNullable<NbCell['lastRun']> {
  const out: NonNullable<NbCell['lastRun']> = {};
  if (typeof l.executionOrder === 'number' && Number.isSafeInteger(l.executionOrder))
    out.executionOrder = l.executionOrder;
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
      if (k === '__proto__')
        Object.defineProperty(o, k, { value: x, enumerable: true, writable: true, configurable: true });
      else o[k] = x;
    }
    return o;
  }
  return v;
}

/**
 * The value with every object's keys in sorted order, copying only the objects (and the arrays
 * above them) that are not sorted already: output data read from a file this wrote is returned as
 * it is, so 50 MB of numeric arrays are walked once and never copied. JSON.stringify of the result
 * equals JSON.stringify(sortKeys(v)).
 */
function canonical(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < v.length; i++) {
      const x = v[i];
      if (x === null || typeof x !== 'object') continue;
      const y = canonical(x);
      if (y !== x) {
        copy ??= v.slice();
        copy[i] = y;
      }
    }
    return copy ?? v;
  }
  if (typeof (v as { toJSON?: unknown }).toJSON === 'function') return v;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  let sorted = true;
  for (let i = 1; i < keys.length; i++) {
    if (keys[i - 1] > keys[i]) {
      sorted = false;
      break;
    }
  }
  let changed: Map<string, unknown> | undefined;
  for (const k of keys) {
    const x = o[k];
    if (x === null || typeof x !== 'object') continue;
    const y = canonical(x);
    if (y !== x) (changed ??= new Map()).set(k, y);
  }
  if (sorted && !changed) return v;
  const out: Record<string, unknown> = {};
  for (const k of sorted ? keys : keys.slice().sort()) {
    const x = changed?.has(k) ? changed.get(k) : o[k];
    if (k === '__proto__')
      Object.defineProperty(out, k, { value: x, enumerable: true, writable: true, configurable: true });
    else out[k] = x;
  }
  return out;
}

const encoder = new TextEncoder();
/** Keeps a leading U+FEFF: it is part of an item's text (a file's own is dropped where it is read). */
const decoder = new TextDecoder('utf-8', { ignoreBOM: true });

/**
 * Output item data to bytes (what VS Code holds) and back: JSON mimes as JSON (compact, keys in
 * the file's order), text as UTF-8.
 */
export function itemToBytes(item: NbOutputItem): Uint8Array {
  if (!isJsonMime(item.mime) && typeof item.data === 'string') return encoder.encode(item.data);
  const text = JSON.stringify(canonical(item.data));
  if (text === undefined) return new Uint8Array();
  const bytes = encoder.encode(text);
  knownLines.add(bytes); // JSON.stringify wrote it: one line of valid JSON, in the file's form
  return bytes;
}

export function itemFromBytes(mime: string, bytes: Uint8Array): NbOutputItem {
  const text = decoder.decode(bytes);
  if (isJsonMime(mime)) {
    try {
      return { mime, data: JSON.parse(text) };
    } catch {
      return { mime, data: text };
    }
  }
  return { mime, data: text };
}

// ---------------------------------------------------------------- the editor's open and save

/**
 * Open a file for the editor, whose output items are bytes: parseNotebook followed by itemToBytes
 * for every item, without turning 50 MB of output data into objects and back into text. A file
 * in this format's layout (each item's data one line) is read as its structure, parsed on its own,
 * plus each data line, which is checked with JSON.parse and handed to the editor as it is. Any
 * other layout, and any file with a problem, goes through parseNotebook, so the errors (and what
 * is accepted) are exactly parseNotebook's.
 */
export function parseNotebookBytes(content: Uint8Array | string): Notebook<NbOutputBytes> {
  let text = typeof content === 'string' ? content : decodeUtf8(content);
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  // What JSON.parse accepts but would lose is refused first, for both paths (one scan); a syntax
  // error is said first, as parseNotebook does (a truncated file is told as truncated).
  let scanned: boolean;
  try {
    scanned = refuseLossy(text);
  } catch (e) {
    parseText(text, false); // throws: the syntax error, or this refusal
    throw e;
  }
  const fast = scanned ? parseDataLines(text) : undefined;
  if (fast) return fast;
  const nb = parseText(text, scanned);
  const out: Notebook<NbOutputBytes> = {
    cells: nb.cells.map((c) => ({ ...c, outputs: c.outputs?.map((o) => ({ ...o, items: o.items.map(editorBytes) })) })),
  };
  for (const c of out.cells) if (c.outputs === undefined) delete c.outputs;
  if (nb.metadata !== undefined) out.metadata = nb.metadata;
  return out;
}

/**
 * Save what the editor holds: the bytes serializeNotebook writes for the notebook that
 * itemFromBytes gives back (`isJson` says which mimes hold JSON), without parsing and re-writing
 * item data the file already holds: bytes this module has seen to be one line of valid JSON (a
 * data line read by parseNotebookBytes, bytes from itemToBytes, or data this function wrote before)
 * are written as they are. So an unchanged notebook saves byte for byte as it was read, and a data
 * line written by hand in another valid form (spaces, another key order) is kept as it was, where
 * the CLI (serializeNotebook) would write the compact form.
 */
export function serializeNotebookBytes(
  nb: Notebook<NbOutputBytes>,
  isJson: (mime: string) => boolean = isJsonMime,
): Uint8Array {
  return concatBytes(layout(nb, (it) => savedData(it, isJson)));
}

/** The editor's bytes for an item read through parseNotebook (any layout). */
function editorBytes(it: NbOutputItem): NbOutputBytes {
  return { mime: it.mime, bytes: itemToBytes(it) };
}

/** One item's data line when saving from bytes. */
function savedData(it: NbOutputBytes, isJson: (mime: string) => boolean): string | Uint8Array {
  if (!isJson(it.mime)) return JSON.stringify(decoder.decode(it.bytes));
  const key = knownLines.key(it.bytes);
  if (knownLines.has(key)) {
    knownLines.add(key); // recently used: forgotten last
    return it.bytes;
  }
  const text = decoder.decode(it.bytes);
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return JSON.stringify(text); // not JSON after all: kept as the text, as itemFromBytes does
  }
  const line = compactData(data);
  if (line === text) knownLines.add(key);
  return line;
}

/**
 * Bytes known to be one line of valid JSON, by SHA-256 of their content (so a save need not parse
 * output data it has already checked). Bounded: the oldest are forgotten first.
 */
const knownLines = new (class {
  private readonly seen = new Map<string, true>();
  key(bytes: Uint8Array): string {
    return createHash('sha256').update(bytes).digest('base64');
  }
  has(key: string): boolean {
    return this.seen.has(key);
  }
  add(bytesOrKey: Uint8Array | string): void {
    const key = typeof bytesOrKey === 'string' ? bytesOrKey : this.key(bytesOrKey);
    this.seen.delete(key);
    this.seen.set(key, true);
    if (this.seen.size > 100_000) this.seen.delete(this.seen.keys().next().value!);
  }
})();

/** The placeholder a data line is replaced by while the structure is parsed (never in a real file). */
const PLACEHOLDER = '\u0000inflab-data-line:';
const PLACEHOLDER_IN_FILE = JSON.stringify(PLACEHOLDER).slice(1, -1);

/**
 * The fast path of parseNotebookBytes: undefined whenever the file is not (entirely) in the
 * one-line-data layout or has any problem; the caller then uses parseNotebook.
 */
function parseDataLines(text: string): Notebook<NbOutputBytes> | undefined {
  if (text.includes(PLACEHOLDER_IN_FILE)) return undefined;
  const skeleton: string[] = [];
  const lines: string[] = [];
  let copied = 0;
  let pos = 0;
  for (;;) {
    const at = text.indexOf(DATA_KEY, pos);
    if (at === -1) break;
    let lineStart = at;
    while (lineStart > 0 && text.charCodeAt(lineStart - 1) === 32) lineStart--;
    const nl = text.indexOf('\n', at);
    const lineEnd = nl === -1 ? text.length : nl;
    if (lineStart === 0 || text.charCodeAt(lineStart - 1) !== 10 || !followsMime(text, lineStart - 1, at - lineStart)) {
      pos = at + 1;
      continue;
    }
    const start = at + DATA_KEY.length;
    let end = lineEnd;
    while (
      end > start &&
      (text.charCodeAt(end - 1) === 13 || text.charCodeAt(end - 1) === 32 || text.charCodeAt(end - 1) === 9)
    )
      end--;
    const line = text.slice(start, end);
    if (line === '{' || line === '[') return undefined; // data over several lines: the earlier layout
    skeleton.push(text.slice(copied, start), `"${PLACEHOLDER_IN_FILE}${lines.length}"`);
    lines.push(line);
    copied = end;
    pos = lineEnd;
  }
  if (!lines.length) return undefined;
  skeleton.push(text.slice(copied));
  let json: unknown;
  try {
    json = JSON.parse(skeleton.join(''));
  } catch {
    return undefined;
  }
  if (!json || typeof json !== 'object' || (json as { inflab?: unknown }).inflab !== FORMAT_VERSION) return undefined;
  if (!fileSchema.safeParse(json).success) return undefined;
  const file = json as NotebookFile;
  let next = 0;
  let broken = false;
  const item = (it: FileItem): NbOutputBytes => {
    if (broken) return { mime: it.mime, bytes: new Uint8Array() };
    if (it.data !== `${PLACEHOLDER}${next}`) {
      // An item written some other way (by hand): as parseNotebook would give it.
      if (typeof it.data === 'string' && it.data.startsWith(PLACEHOLDER)) broken = true;
      return editorBytes(it);
    }
    const line = lines[next++];
    let data: unknown;
    try {
      data = JSON.parse(line);
    } catch {
      broken = true; // parseNotebook says where
      return { mime: it.mime, bytes: new Uint8Array() };
    }
    if (!isJsonMime(it.mime) && typeof data === 'string') return { mime: it.mime, bytes: encoder.encode(data) };
    const bytes = encoder.encode(line);
    knownLines.add(bytes);
    return { mime: it.mime, bytes };
  };
  const nb: Notebook<NbOutputBytes> = { cells: file.cells.map((c) => cellFromFile(c, item)) };
  // Every data line replaced must have been an item's data, in order.
  if (broken || next !== lines.length) return undefined;
  if (file.metadata !== undefined) nb.metadata = file.metadata;
  return nb;
}

/** Whether the line before the one starting after `nl` is an item's `"mime": …` at the same indent. */
function followsMime(text: string, nl: number, indent: number): boolean {
  let start = nl;
  for (let k = 0; start > 0 && text.charCodeAt(start - 1) !== 10; k++) {
    if (k > indent + 300) return false;
    start--;
  }
  for (let k = 0; k < indent; k++) if (text.charCodeAt(start + k) !== 32) return false;
  return text.startsWith('"mime": "', start + indent);
}

/** Text parts encoded as UTF-8 and byte parts as they are, in one array. */
function concatBytes(parts: (string | Uint8Array)[]): Uint8Array {
  const chunks: Uint8Array[] = [];
  let run: string[] = [];
  const flush = () => {
    if (run.length) chunks.push(encoder.encode(run.join('')));
    run = [];
  };
  for (const p of parts) {
    if (typeof p === 'string') run.push(p);
    else {
      flush();
      chunks.push(p);
    }
  }
  flush();
  if (chunks.length === 1) return chunks[0];
  let n = 0;
  for (const c of chunks) n += c.length;
  const out = new Uint8Array(n);
  n = 0;
  for (const c of chunks) {
    out.set(c, n);
    n += c.length;
  }
  return out;
}
