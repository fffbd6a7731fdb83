import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { formatFinding } from '../../core/findings';
import { NotebookFormatError, parseNotebook, serializeNotebook } from '../../core/notebook/format';
import { runNotebook } from '../../core/notebook/runNotebook';
import { cliServices } from '../services';
import { readArgFile } from '../io';
import { UsageError } from '../usage';
import { writeFileAtomic } from '../../core/notebook/atomicWrite';

export async function runCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { out: { type: 'string' }, quiet: { type: 'boolean' } },
  });
  if (positionals.length !== 1) throw new UsageError('give one notebook: inflab run NOTEBOOK [--out PATH]');
  const { file, text } = readArgFile(positionals[0]);
  let nb;
  try {
    nb = parseNotebook(text);
  } catch (e) {
    if (e instanceof NotebookFormatError) {
      console.error(`${positionals[0]}: ${e.message}`);
      return 1;
    }
    throw e;
  }
  const services = cliServices();
  const ac = new AbortController();
  const onSig = () => ac.abort();
  process.once('SIGINT', onSig);
  try {
    const { notebook, results } = await runNotebook(nb, path.dirname(file), services, {
      signal: ac.signal,
      onCell(i, r) {
        if (values.quiet) return;
        const status = r.ok ? 'ok' : 'FAILED';
        console.log(
          `[${i}] ${r.kind}${r.name ? ` (${r.name})` : ''}: ${status} in ${Math.round(r.durationMs ?? 0)} ms`,
        );
        if (r.error) console.log(`    ${r.error.message.split('\n').join('\n    ')}`);
        for (const f of r.findings) console.log(`    ${formatFinding(f).split('\n').join('\n    ')}`);
      },
    });
    let out = values.out ? path.resolve(values.out) : file;
    // Never overwrite edits saved while the cells ran: write the executed notebook beside it instead.
    let changed = false;
    if (out === file) {
      let now: string | undefined;
      try {
        now = fs.readFileSync(file, 'utf8');
      } catch {
        // gone or unreadable: write it back
      }
      if (now !== undefined && now !== text) {
        changed = true;
        const stem = file.replace(/\.inflab$/, '');
        out = `${stem}.executed.inflab`;
        for (let n = 2; fs.existsSync(out); n++) out = `${stem}.executed-${n}.inflab`;
      }
    }
    try {
      fs.mkdirSync(path.dirname(out), { recursive: true });
      writeFileAtomic(out, serializeNotebook(notebook));
    } catch (e) {
      console.error(`${positionals[0]}: ${(e as Error).message}`);
      return 1;
    }
    if (changed) {
      console.error(
        `${positionals[0]} changed on disk while its cells ran, so it was not overwritten; the executed notebook is in ${path.relative(process.cwd(), out) || out}`,
      );
      return 1;
    }
    if (!values.quiet) console.log(`wrote ${path.relative(process.cwd(), out) || out}`);
    return results.every((r) => r.ok) ? 0 : 1;
  } finally {
    process.off('SIGINT', onSig);
    await services.close();
  }
}
