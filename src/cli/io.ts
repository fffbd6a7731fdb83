/** What the CLI commands share: reading the file an argument names, and printing a cell's result as text. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { MIME } from '../core/engine/outputs';
import type { CellResult, ProgressUpdate } from '../core/engine/types';
import { formatFinding, type Finding } from '../core/findings';
import { parseCell, positionAt, rangeOfPath } from '../core/notebook/cellSource';
import { decodeUtf8, NotebookFormatError, parseNotebook } from '../core/notebook/format';
import { CELL_LANGUAGE } from '../core/notebook/runNotebook';
import { UsageError } from './usage';

/**
 * The absolute path of the file an argument names, and its text. Bytes that are not UTF-8 are
 * refused (a NotebookFormatError naming the line), never read as U+FFFD that a save would keep.
 */
export function readArgFile(arg: string): { file: string; text: string } {
  const file = path.resolve(arg);
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(file);
  } catch (e) {
    throw new UsageError(`cannot read ${arg}: ${(e as NodeJS.ErrnoException).code}`);
  }
  return { file, text: decodeUtf8(bytes) };
}

/**
 * The notebook an argument names, parsed; undefined (with the reason on stderr, for exit 1) when
 * its file is not a notebook InfLab can open.
 */
export function readArgNotebook(
  arg: string,
): { file: string; text: string; nb: ReturnType<typeof parseNotebook> } | undefined {
  try {
    const { file, text } = readArgFile(arg);
    return { file, text, nb: parseNotebook(text) };
  } catch (e) {
    if (e instanceof NotebookFormatError) {
      console.error(`${arg}: ${e.message}`);
      return undefined;
    }
    throw e;
  }
}

/** A cell to run, with where its source starts in the file (so a finding can say file:line:col). */
export interface SourceCell {
  /** Index in the notebook (or document number in a YAML file). */
  index: number;
  source: string;
  /** Maps a 0-based line/column in the cell to a 1-based "line:col" in the file, when it can. */
  at(line: number, col: number): string | undefined;
}

/** Split a multi-document YAML file into cells, each knowing the file line it starts on. */
export function yamlCells(text: string): SourceCell[] {
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  const out: SourceCell[] = [];
  for (const d of list) {
    const [start, , end] = d.range;
    const raw = text.slice(start, end);
    const marker = /^---[^\n]*\n?/.exec(raw)?.[0].length ?? 0;
    const source = raw.slice(marker);
    if (source.trim() === '') continue;
    const first = positionAt(text, start + marker);
    out.push({
      index: out.length,
      source,
      at: (line, col) => `${first.line + line + 1}:${(line === 0 ? first.character : 0) + col + 1}`,
    });
  }
  return out;
}

/**
 * The inflab code cells of a notebook file. A cell's line in the file is found where the notebook
 * layout (one JSON string per source line) holds it; where the file is laid out otherwise, a
 * finding names the cell and its own line instead.
 */
export function notebookCells(text: string): SourceCell[] {
  const nb = parseNotebook(text);
  const lines = text.split('\n');
  const sourceLines = lines.flatMap((l, i) => (/^\s*"source": \[\s*$/.test(l) ? [i] : []));
  const sameLayout = sourceLines.length === nb.cells.length;
  return nb.cells.flatMap((c, index) => {
    if (c.kind !== 'code' || c.language !== CELL_LANGUAGE) return [];
    const srcLines = c.source.split('\n');
    const open = sameLayout ? sourceLines[index] : -1;
    const holds =
      open >= 0 &&
      srcLines.every((s, k) => {
        try {
          return JSON.parse(lines[open + 1 + k].trim().replace(/,$/, '')) === s;
        } catch {
          return false;
        }
      });
    return [
      {
        index,
        source: c.source,
        at: (line: number, col: number) => {
          if (!holds) return undefined;
          const l = lines[open + 1 + line];
          return `${open + 2 + line}:${l.indexOf('"') + 2 + col}`;
        },
      },
    ];
  });
}

/** The cells of a file `inflab eval` or `inflab run` was given: a notebook, or YAML documents. */
export function cellsOfFile(file: string, text: string): SourceCell[] {
  if (file.endsWith('.inflab') || /^\s*\{/.test(text)) {
    try {
      return notebookCells(text);
    } catch (e) {
      if (e instanceof NotebookFormatError) throw new UsageError(`${file}: ${e.message}`);
      throw e;
    }
  }
  return yamlCells(text);
}

/** "file:line:col" (or "file: cell N, line L") for a finding of a cell. */
export function locate(display: string, cell: SourceCell | undefined, f: Pick<Finding, 'path' | 'offset'>): string {
  if (!cell) return display;
  let pos = { line: 0, character: 0 };
  try {
    pos = rangeOfPath(parseCell(cell.source), f.path, f.offset).start;
  } catch {
    // an unparsable cell: its first line
  }
  const at = cell.at(pos.line, pos.character);
  return at ? `${display}:${at}` : `${display}: cell ${cell.index}, line ${pos.line + 1}:${pos.character + 1}`;
}

/**
 * A cell's plain-text outputs, each followed by `gap` (findings and errors are printed on their
 * own), then each finding once, with where it is. The error is printed only when no finding
 * already says it.
 */
export function printCellText(
  r: CellResult,
  gap = '',
  where: (f: Pick<Finding, 'path' | 'offset'>) => string = () => '',
): void {
  for (const o of r.outputs) {
    const plain = o.items.find((it) => it.mime === MIME.plain);
    if (plain && !o.items.some((it) => it.mime === MIME.findings || it.mime === MIME.error))
      console.log(String(plain.data) + gap);
  }
  const prefix = (f: Pick<Finding, 'path' | 'offset'>) => {
    const w = where(f);
    return w ? `${w}: ` : '';
  };
  if (r.error && !r.findings.some((f) => f.severity === 'error'))
    console.log(`${prefix({ path: r.error.path })}error [${r.error.code}]: ${r.error.message}`);
  for (const f of r.findings) console.log(prefix(f) + formatFinding(f));
}

/**
 * Say before a run, not after it, that a result file cannot be written: its folder must exist (or
 * is made, with `create`) and be writable. Returns what is wrong, or undefined.
 */
/**
 * Whether `file` now holds other text than `text` (what was read before the cells ran): edits saved
 * meanwhile are never overwritten. A file gone or unreadable counts as unchanged (it is written back).
 */
export function changedOnDisk(file: string, text: string): boolean {
  let now: string | undefined;
  try {
    now = fs.readFileSync(file, 'utf8');
  } catch {
    return false;
  }
  return now !== text;
}

export function cannotWrite(file: string, { create = false } = {}): string | undefined {
  const dir = path.dirname(path.resolve(file));
  try {
    if (create) fs.mkdirSync(dir, { recursive: true });
    if (!fs.statSync(dir).isDirectory()) throw Object.assign(new Error('not a folder'), { code: 'ENOTDIR' });
    fs.accessSync(dir, fs.constants.W_OK);
    return undefined;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? `the folder ${dir} does not exist: create it first`
        : code === 'EACCES'
          ? `the folder ${dir} is not writable`
          : `${dir}: ${code ?? (e as Error).message}`;
    return `cannot write ${file}: ${why}`;
  }
}

/**
 * Progress on stderr: on a terminal one line rewritten in place (\r); in a file or a pipe, one line
 * per finished step (an update that carries outputs: a bench point), never a \r.
 */
export function progressPrinter(prefix = ''): { update(u: ProgressUpdate): void; end(): void } {
  const tty = process.stderr.isTTY === true;
  let last = '';
  let open = false;
  return {
    update(u) {
      if (!u.message || u.message === last) return;
      last = u.message;
      const line = `${prefix}${u.message}`;
      if (tty) {
        process.stderr.write(`\r${line.slice(0, 100).padEnd(100)}`);
        open = true;
      } else if (u.outputs) process.stderr.write(`${line}\n`);
    },
    end() {
      if (open) process.stderr.write('\n');
      open = false;
      last = '';
    },
  };
}
