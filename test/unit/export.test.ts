/**
 * Export: a self-contained HTML page (markdown rendered, tables, findings, plots as inline SVG,
 * nothing active, nothing fetched) and Markdown with SVG files beside it; deterministic, so a
 * re-run of unchanged deterministic cells exports the same bytes. The CLI command writes both.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { before, test } from 'node:test';
import { exportHtml, exportMarkdown, inert } from '../../src/core/export';
import { parseNotebook, serializeNotebook, type Notebook } from '../../src/core/notebook/format';
import { runNotebook } from '../../src/core/notebook/runNotebook';
import { buildCli, runInflabSync } from '../support/cli';

const NB: Notebook = {
  cells: [
    { kind: 'markdown', language: 'markdown', source: '# Day 4 write-up\n\nThe **roofline** first.' },
    { kind: 'code', language: 'inflab', source: 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n' },
    {
      kind: 'code',
      language: 'inflab',
      source: 'predict: decode-roofline\nname: roofline\ncontext: 1k tokens\nbatch: [1, 8, 64]\n',
    },
    {
      kind: 'code',
      language: 'inflab',
      source: 'record: run\nbatch: 1\nprompt: 1000 tokens\nper_user: 88.4 tok/s\nttft: 23 ms\n',
    },
    {
      kind: 'code',
      language: 'inflab',
      source:
        'compare: verdict\ntolerance: 30%\nrows:\n  - {quantity: batch-1 decode, predicted: "roofline.rows[0].per_user_tok_s", measured: run.per_user}\n',
    },
  ],
};

async function executed(): Promise<Notebook> {
  return (await runNotebook(NB, os.tmpdir(), {})).notebook;
}

let first: Notebook;
before(async () => {
  first = await executed();
});

test('re-running unchanged deterministic cells gives byte-identical outputs and the same export', async () => {
  const second = await executed();
  const outputs = (nb: Notebook) => JSON.stringify(nb.cells.map((c) => c.outputs ?? []));
  assert.equal(outputs(second), outputs(first));
  assert.equal(exportHtml(second), exportHtml(first));
  assert.equal(exportMarkdown(second).markdown, exportMarkdown(first).markdown);
});

test('the HTML page: markdown rendered, YAML, tables, findings, the verdict with its word, plots inline', () => {
  const html = exportHtml(first);
  assert.match(html, /^<!DOCTYPE html>/);
  assert.match(html, /<title>Day 4 write-up<\/title>/);
  assert.match(html, /<h1>Day 4 write-up<\/h1>/);
  assert.match(html, /<strong>roofline<\/strong>/);
  assert.match(html, /<pre class="source"><code>predict: decode-roofline/);
  assert.ok((html.match(/<svg/g) ?? []).length >= 2, 'the roofline and the compare plots inline');
  assert.match(html, /<table>/);
  assert.match(html, /✅ within/, 'the verdict carries a word beside its glyph');
  assert.match(html, /ttft-below-prefill-floor/, 'findings are in the page');
  assert.doesNotMatch(html, /<script/i);
  assert.doesNotMatch(html, /\s(?:src|href)="https?:/i, 'nothing is fetched from the network');
  assert.doesNotMatch(html, /application\/vnd\.inflab/, 'no raw values or records');
});

test('Markdown: pipe tables, the YAML in fences, each plot an SVG file named by position', () => {
  const { markdown, files } = exportMarkdown(first, 'day4-plots');
  assert.match(markdown, /^# Day 4 write-up/);
  assert.match(markdown, /```yaml\npredict: decode-roofline/);
  assert.match(markdown, /\| batch \|/);
  assert.ok(files.length >= 2);
  for (const f of files) {
    assert.match(f.name, /^day4-plots\/cell-\d+-\d+\.svg$/);
    assert.ok(f.data.startsWith('<svg'), f.name);
    assert.ok(markdown.includes(`](${f.name})`), `${f.name} is linked`);
  }
});

test('inert strips scripts, handlers and network references from saved outputs', () => {
  const dirty =
    '<div onclick="x()"><script>alert(1)</script><img src="https://evil.example/p.png"><a href="javascript:x()">a</a><svg onload="y()"><foreignObject></foreignObject></svg></div>';
  const clean = inert(dirty);
  assert.doesNotMatch(clean, /script|onclick|onload|https:|javascript:|foreignObject/i);
  const nb: Notebook = {
    cells: [
      {
        kind: 'code',
        language: 'inflab',
        source: 'record: x\n',
        outputs: [{ items: [{ mime: 'text/html', data: dirty }] }],
      },
    ],
  };
  assert.doesNotMatch(exportHtml(nb), /<script|onclick|evil\.example/);
});

test('inflab export --html and --md write the page, and the Markdown with its plots beside it', () => {
  buildCli();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-export-'));
  const file = path.join(dir, 'day4.inflab');
  fs.writeFileSync(file, serializeNotebook(first));
  const cli = (args: string[]) => runInflabSync(args, { cwd: dir });
  const h = cli(['export', file, '--html']);
  assert.equal(h.status, 0, h.stderr);
  assert.equal(
    fs.readFileSync(path.join(dir, 'day4.html'), 'utf8'),
    exportHtml(parseNotebook(fs.readFileSync(file, 'utf8'))),
  );
  const m = cli(['export', file, '--md', '--out', path.join(dir, 'share', 'write-up.md')]);
  assert.equal(m.status, 0, m.stderr);
  const md = fs.readFileSync(path.join(dir, 'share', 'write-up.md'), 'utf8');
  const svgs = fs.readdirSync(path.join(dir, 'share', 'write-up-plots'));
  assert.ok(svgs.length >= 2 && svgs.every((s) => md.includes(`write-up-plots/${s}`)), svgs.join());
  assert.equal(cli(['export', file]).status, 2, 'no format is a usage error');
  assert.equal(cli(['export', file, '--html', '--out', file]).status, 2, 'never over the notebook itself');
});
