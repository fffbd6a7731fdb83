/**
 * inflab export NOTEBOOK (--html | --md) [--out PATH]: the executed notebook as a self-contained
 * HTML page, or as Markdown with its plots as SVG files beside it (core/export).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { exportHtml, exportMarkdown } from '../../core/export';
import { writeFileAtomic } from '../../core/notebook/atomicWrite';
import { command, type CommandSpec, type Parsed } from '../args';
import { readArgNotebook } from '../io';
import { UsageError } from '../usage';

export const exportSpec: CommandSpec = {
  name: 'export',
  args: 'NOTEBOOK',
  summary: 'the notebook as one self-contained HTML page, or as Markdown with its plots as SVG files beside it',
  options: {
    html: { type: 'boolean', help: 'write one HTML page (tables, findings, plots inline; no network)' },
    md: { type: 'boolean', help: 'write Markdown, with the plots as SVG files in NAME-plots/ beside it' },
    out: { type: 'string', value: 'PATH', help: 'where to write (default: beside the notebook, .html or .md)' },
  },
};

export const exportCommand = command(exportSpec, async ({ values, positionals }: Parsed): Promise<number> => {
  if (positionals.length !== 1 || !!values.html === !!values.md)
    throw new UsageError('give one notebook and one format: inflab export NOTEBOOK --html|--md [--out PATH]');
  const read = readArgNotebook(positionals[0]);
  if (!read) return 1;
  const { file, nb } = read;
  const ext = values.html ? '.html' : '.md';
  const out = path.resolve((values.out as string | undefined) ?? file.replace(/\.inflab$/, '') + ext);
  if (out === file) throw new UsageError(`--out ${values.out} is the notebook itself: name another file`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  if (values.html) writeFileAtomic(out, exportHtml(nb));
  else {
    const assets = `${path.basename(out).replace(/\.md$/, '')}-plots`;
    const { markdown, files } = exportMarkdown(nb, assets);
    for (const f of files) {
      fs.mkdirSync(path.dirname(path.join(path.dirname(out), f.name)), { recursive: true });
      writeFileAtomic(path.join(path.dirname(out), f.name), f.data);
    }
    writeFileAtomic(out, markdown);
    if (files.length)
      console.log(
        `wrote ${files.length} plot(s) to ${path.relative(process.cwd(), path.join(path.dirname(out), assets)) || assets}`,
      );
  }
  console.log(`wrote ${path.relative(process.cwd(), out) || out}`);
  return 0;
});
