/** What the CLI commands share: reading the file an argument names, and printing a cell's result as text. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { MIME } from '../core/engine/outputs';
import type { CellResult } from '../core/engine/types';
import { formatFinding } from '../core/findings';
import { UsageError } from './usage';

/** The absolute path of the file an argument names, and its text. */
export function readArgFile(arg: string): { file: string; text: string } {
  const file = path.resolve(arg);
  try {
    return { file, text: fs.readFileSync(file, 'utf8') };
  } catch (e) {
    throw new UsageError(`cannot read ${arg}: ${(e as NodeJS.ErrnoException).code}`);
  }
}

/** A cell's plain-text outputs, each followed by `gap` (findings and errors are printed on their own), then its error and its findings. */
export function printCellText(r: CellResult, gap = ''): void {
  for (const o of r.outputs) {
    const plain = o.items.find((it) => it.mime === MIME.plain);
    if (plain && !o.items.some((it) => it.mime === MIME.findings || it.mime === MIME.error))
      console.log(String(plain.data) + gap);
  }
  if (r.error) console.log(`error: ${r.error.message}`);
  for (const f of r.findings) console.log(formatFinding(f));
}
