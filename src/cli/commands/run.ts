import * as fs from 'node:fs';
import * as path from 'node:path';
import { serializeNotebook } from '../../core/notebook/format';
import { runNotebook } from '../../core/notebook/runNotebook';
import { writeFileAtomic } from '../../core/notebook/atomicWrite';
import { command, type CommandSpec, type Parsed } from '../args';
import { cliServices } from '../services';
import {
  cannotWrite,
  changedOnDisk,
  locate,
  notebookCells,
  printCellText,
  progressPrinter,
  readArgNotebook,
} from '../io';
import { UsageError } from '../usage';
import { onInterrupt } from '../interrupt';

export const runSpec: CommandSpec = {
  name: 'run',
  args: 'NOTEBOOK',
  summary:
    'run every code cell in order and write the executed notebook (beside the input as NAME.executed.inflab unless told)',
  options: {
    out: { type: 'string', value: 'PATH', help: 'write the executed notebook to PATH' },
    'in-place': { type: 'boolean', help: 'write the executed notebook over NOTEBOOK itself' },
    quiet: { type: 'boolean', help: 'print nothing but errors (no cell outputs, no progress)' },
  },
  notes:
    'Ctrl-C stops after the cell running (a bench keeps its finished points, marked partial); cells that did\nnot run keep their saved outputs, and the notebook is written as far as it got (exit 130).',
};

/** Where the executed notebook goes: --out, the input itself with --in-place, else NAME.executed.inflab beside it. */
function outPath(file: string, values: Parsed['values']): string {
  if (values.out && values['in-place']) throw new UsageError('give --out PATH or --in-place, not both');
  if (values.out) return path.resolve(String(values.out));
  if (values['in-place']) return file;
  return `${file.replace(/\.inflab$/, '')}.executed.inflab`;
}

export const runCommand = command(runSpec, async ({ values, positionals }: Parsed): Promise<number> => {
  if (positionals.length !== 1)
    throw new UsageError('give one notebook: inflab run NOTEBOOK [--out PATH | --in-place] [--quiet]');
  const display = positionals[0];
  const read = readArgNotebook(display);
  if (!read) return 1;
  const { file, text, nb } = read;
  const out = outPath(file, values);
  // A folder that cannot take the file is said before any cell runs, not after an hour of bench.
  const unwritable = cannotWrite(out, { create: true });
  if (unwritable) {
    console.error(`${display}: ${unwritable}; nothing was run`);
    return 1;
  }
  const cells = new Map(notebookCells(text).map((c) => [c.index, c]));
  const services = cliServices();
  const ac = new AbortController();
  const offSig = onInterrupt(() => {
    ac.abort();
    console.error('\ninterrupted: stopping after the cell running; cells not run keep their saved outputs');
  });
  const progress = progressPrinter();
  try {
    const { notebook, results, interrupted } = await runNotebook(nb, path.dirname(file), services, {
      signal: ac.signal,
      onProgress: (i, u) => {
        if (!values.quiet) progress.update({ ...u, message: u.message && `[${i}] ${u.message}` });
      },
      onCell(i, r) {
        progress.end();
        if (values.quiet) {
          for (const f of r.findings.filter((x) => x.severity === 'error'))
            console.error(`${locate(display, cells.get(i), f)}: ${f.message}`);
          return;
        }
        const status = r.ok ? 'ok' : 'FAILED';
        console.log(
          `# [${i}] ${r.kind}${r.name ? ` (${r.name})` : ''}: ${status} in ${Math.round(r.durationMs ?? 0)} ms`,
        );
        printCellText(r, '', (f) => locate(display, cells.get(i), f));
        console.log();
      },
    });
    // In place: never overwrite edits saved while the cells ran; write the executed notebook beside it instead.
    let target = out;
    let changed = false;
    if (out === file && changedOnDisk(file, text)) {
      changed = true;
      const stem = file.replace(/\.inflab$/, '');
      target = `${stem}.executed.inflab`;
      for (let n = 2; fs.existsSync(target); n++) target = `${stem}.executed-${n}.inflab`;
    }
    try {
      writeFileAtomic(target, serializeNotebook(notebook));
    } catch (e) {
      console.error(`${display}: ${(e as Error).message}`);
      return 1;
    }
    const shown = path.relative(process.cwd(), target) || target;
    if (changed) {
      console.error(
        `${display} changed on disk while its cells ran, so it was not overwritten; the executed notebook is in ${shown}`,
      );
      return 1;
    }
    if (!values.quiet) console.log(`wrote ${shown}`);
    if (interrupted) return 130;
    return results.every((r) => r.result.ok) ? 0 : 1;
  } finally {
    offSig();
    await services.close();
  }
});
