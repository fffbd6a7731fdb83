import * as path from 'node:path';
import { createNotebookContext, runCell, jsonSafe } from '../../core/engine/engine';
import { command, type CommandSpec, type Parsed } from '../args';
import { cliServices } from '../services';
import { cellsOfFile, locate, printCellText, readArgFile, yamlCells } from '../io';
import { NotebookFormatError } from '../../core/notebook/format';
import { UsageError } from '../usage';

/** Split a multi-document YAML file into cell sources, keeping each document's own text. */
export function splitDocuments(text: string): string[] {
  return yamlCells(text).map((c) => c.source);
}

export const evalSpec: CommandSpec = {
  name: 'eval',
  args: 'FILE',
  summary:
    'run each cell of FILE in one context and print its outputs (FILE: YAML documents separated by ---, or a .inflab notebook, which is not written)',
  options: {
    json: { type: 'boolean', help: 'print one {kind, name, values, facts, findings} per cell as JSON instead' },
  },
};

export const evalCommand = command(evalSpec, async ({ values, positionals }: Parsed): Promise<number> => {
  if (positionals.length !== 1)
    throw new UsageError('give one file: inflab eval FILE.yaml (or NOTEBOOK.inflab) [--json]');
  let file: string, text: string;
  try {
    ({ file, text } = readArgFile(positionals[0]));
  } catch (e) {
    if (e instanceof NotebookFormatError) throw new UsageError(`${positionals[0]}: ${e.message}`);
    throw e;
  }
  const cells = cellsOfFile(file, text);
  const services = cliServices();
  const ctx = createNotebookContext(path.dirname(file), services);
  const out: unknown[] = [];
  let ok = true;
  try {
    for (const c of cells) {
      const r = await runCell(c.source, c.index, ctx);
      ok &&= r.ok;
      out.push({
        kind: r.kind,
        name: r.name ?? null,
        values: jsonSafe(r.values),
        facts: r.facts,
        findings: r.findings,
        ...(r.error ? { error: r.error } : {}),
      });
      if (!values.json) {
        console.log(`# [${c.index}] ${r.kind}${r.name ? ` (${r.name})` : ''}${r.ok ? '' : ' — FAILED'}`);
        printCellText(r, '', (f) => locate(positionals[0], c, f));
        console.log();
      }
    }
  } finally {
    await services.close();
  }
  if (values.json) console.log(JSON.stringify(out, null, 2));
  return ok ? 0 : 1;
});
