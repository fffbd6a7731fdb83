/**
 * inflab ink NOTEBOOK --cell N|NAME [--out PATH]: put a prediction in ink now (core/notebook/inkCell):
 * run that one cell with the cells above read back from their saved outputs, freeze its outputs
 * with the time and the inputs' hash, and write the notebook back (atomically; never over edits
 * saved meanwhile).
 */
import * as path from 'node:path';
import { writeFileAtomic } from '../../core/notebook/atomicWrite';
import { serializeNotebook } from '../../core/notebook/format';
import { cellIndexOf, inkCell } from '../../core/notebook/inkCell';
import { command, type CommandSpec, type Parsed } from '../args';
import { onInterrupt } from '../interrupt';
import { cannotWrite, changedOnDisk, locate, notebookCells, printCellText, readArgNotebook } from '../io';
import { cliServices } from '../services';
import { UsageError } from '../usage';

export const inkSpec: CommandSpec = {
  name: 'ink',
  args: 'NOTEBOOK',
  summary:
    'put a prediction in ink: run that one cell and freeze its outputs with the time and its inputs, in the notebook itself',
  options: {
    cell: {
      type: 'string',
      value: 'N|NAME',
      help: 'the prediction: its number as "inflab run" prints it ([N], from 0), or its name:',
    },
    out: { type: 'string', value: 'PATH', help: 'write the notebook to PATH instead of over NOTEBOOK' },
    quiet: { type: 'boolean', help: 'print nothing but errors' },
  },
  notes:
    'Only a "predict: …" cell can be inked. The cells above are not run again: their saved outputs are read back\n' +
    '(run the notebook first if they never ran). A cell already in ink is left as it is: running it again\n' +
    '(inflab run) keeps the original and adds a revision. Exit 0 inked (or already in ink), 1 the cell failed\n' +
    'or the notebook could not be written (it is then unchanged), 2 usage error.',
};

export const inkCommand = command(inkSpec, async ({ values, positionals }: Parsed): Promise<number> => {
  if (positionals.length !== 1 || typeof values.cell !== 'string')
    throw new UsageError('give one notebook and the cell to ink: inflab ink NOTEBOOK --cell N|NAME [--out PATH]');
  const display = positionals[0];
  const read = readArgNotebook(display);
  if (!read) return 1;
  const { file, text, nb } = read;
  let index: number;
  try {
    index = cellIndexOf(nb, values.cell);
  } catch (e) {
    throw new UsageError(`--cell ${values.cell}: ${(e as Error).message}`);
  }
  const out = values.out ? path.resolve(String(values.out)) : file;
  const unwritable = cannotWrite(out, { create: true });
  if (unwritable) {
    console.error(`${display}: ${unwritable}; nothing was inked`);
    return 1;
  }
  const services = cliServices();
  const ac = new AbortController();
  const offSig = onInterrupt(() => ac.abort());
  try {
    const r = await inkCell(nb, index, path.dirname(file), services, { signal: ac.signal });
    if (r.status === 'already') {
      if (!values.quiet) console.log(`${display}: ${r.message}`);
      return 0;
    }
    if (r.status === 'refused') throw new UsageError(r.message);
    if (r.status === 'failed') {
      const cells = new Map(notebookCells(text).map((c) => [c.index, c]));
      printCellText(r.result, '', (f) => locate(display, cells.get(index), f));
      console.error(`${display}: ${r.message}`);
      return ac.signal.aborted ? 130 : 1;
    }
    // Never over edits saved while the cell ran: the notebook is read again just before writing.
    if (out === file && changedOnDisk(file, text)) {
      console.error(
        `${display} changed on disk while the cell ran, so it was not overwritten and nothing was inked: run inflab ink again`,
      );
      return 1;
    }
    try {
      writeFileAtomic(out, serializeNotebook(r.notebook));
    } catch (e) {
      console.error(`${display}: ${(e as Error).message}`);
      return 1;
    }
    if (!values.quiet) {
      printCellText(r.result, '');
      console.log(`cell [${index}] in ink since ${r.at}; wrote ${path.relative(process.cwd(), out) || out}`);
    }
    return 0;
  } finally {
    offSig();
    await services.close();
  }
});
