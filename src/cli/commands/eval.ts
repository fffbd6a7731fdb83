import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { createNotebookContext, runCell, jsonSafe } from '../../core/engine/engine';
import { cliServices } from '../services';
import { printCellText, readArgFile } from '../io';
import { UsageError } from '../usage';

/** Split a multi-document YAML file into cell sources, keeping each document's own text. */
export function splitDocuments(text: string): string[] {
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  return list
    .map((d) => {
      const [start, , end] = d.range;
      return text.slice(start, end).replace(/^---[^\n]*\n?/, '');
    })
    .filter((s) => s.trim() !== '');
}

export async function evalCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { json: { type: 'boolean' } },
  });
  if (positionals.length !== 1) throw new UsageError('give one YAML file: inflab eval FILE.yaml [--json]');
  const { file, text } = readArgFile(positionals[0]);
  const services = cliServices();
  const ctx = createNotebookContext(path.dirname(file), services);
  const out: unknown[] = [];
  let ok = true;
  try {
    const cells = splitDocuments(text);
    for (let i = 0; i < cells.length; i++) {
      const r = await runCell(cells[i], i, ctx);
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
        console.log(`# [${i}] ${r.kind}${r.name ? ` (${r.name})` : ''}${r.ok ? '' : ' — FAILED'}`);
        printCellText(r);
        console.log();
      }
    }
  } finally {
    await services.close();
  }
  if (values.json) console.log(JSON.stringify(out, null, 2));
  return ok ? 0 : 1;
}
