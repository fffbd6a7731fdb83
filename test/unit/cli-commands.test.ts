/**
 * The CLI's conventions, through the built dist/cli.js: --help on every command, a wrong flag named
 * with the nearest right one, --version, `inflab catalog`, `inflab eval` on a notebook, findings
 * with file:line:col printed once, and `inflab run`'s output paths.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { before, test } from 'node:test';
import { GPUS, MODELS } from '../../src/core/catalog';
import { parseNotebook, serializeNotebook } from '../../src/core/notebook/format';
import { buildCli, ROOT, runInflabSync } from '../support/cli';

const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));

before(buildCli);

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-cmd-'));
const COMMANDS = ['run', 'ink', 'eval', 'bench', 'audit', 'sim', 'catalog'];

test('every command takes --help: exit 0, its own options on stdout', () => {
  for (const c of COMMANDS) {
    const r = runInflabSync([c, '--help']);
    assert.equal(r.status, 0, `${c}: ${r.stderr}`);
    assert.match(r.stdout, new RegExp(`^inflab ${c}\\b`), c);
    assert.match(r.stdout, /--help/, c);
    assert.equal(r.stderr, '', c);
  }
  assert.match(runInflabSync(['run', '--help']).stdout, /--in-place/);
});

test('--version prints the package version', () => {
  for (const a of ['--version', '-v']) {
    const r = runInflabSync([a]);
    assert.equal(r.status, 0);
    assert.equal(r.stdout.trim(), pkg.version);
  }
});

test('the top-level usage lists every flag of every command', () => {
  const usage = runInflabSync(['--help']).stdout;
  for (const c of COMMANDS) {
    const help = runInflabSync([c, '--help']).stdout;
    const flags = [...help.matchAll(/^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)/gm)]
      .map((m) => m[1])
      .filter((f) => f !== '--help');
    assert.ok(flags.length > 0 || c === 'eval', c);
    for (const f of flags) assert.ok(usage.includes(`[${f}`), `inflab --help lists ${c} ${f}`);
  }
});

test("README's CLI section names every command and every flag", () => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## The CLI'), readme.indexOf('\n## ', readme.indexOf('## The CLI') + 5));
  for (const c of COMMANDS) {
    assert.ok(section.includes(`inflab ${c}`), `README lists inflab ${c}`);
    const help = runInflabSync([c, '--help']).stdout;
    for (const m of help.matchAll(/^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)/gm))
      assert.ok(
        new RegExp(`${m[1]}(?![a-z0-9-])`).test(section),
        `README's CLI section lacks inflab ${c} ${m[1]}: add it (inflab ${c} --help says what it takes)`,
      );
  }
});

test('a wrong flag gets a message naming it and the nearest right one; a missing value says what it takes', () => {
  const r = runInflabSync(['bench', '--endpoint', 'sim', '--concurency', '4']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /unknown option --concurency; did you mean --concurrency\?/);
  const o = runInflabSync(['run', 'x.inflab', '--outt', 'y.inflab']);
  assert.equal(o.status, 2);
  assert.match(o.stderr, /unknown option --outt; did you mean --out\?/);
  const v = runInflabSync(['run', 'x.inflab', '--out']);
  assert.equal(v.status, 2);
  assert.match(v.stderr, /--out needs a value: --out PATH/);
  const s = runInflabSync(['sim', '--prot', '8000']);
  assert.match(s.stderr, /unknown option --prot; did you mean --port\?/);
  assert.doesNotMatch(r.stderr + o.stderr + v.stderr, /\n\s+at /, 'no stack trace');
});

test('inflab catalog lists every GPU and model id; catalog gpus only the GPUs', () => {
  const all = runInflabSync(['catalog']);
  assert.equal(all.status, 0, all.stderr);
  for (const g of GPUS) assert.match(all.stdout, new RegExp(`^${g.id}\\s`, 'm'), g.id);
  for (const m of MODELS) assert.match(all.stdout, new RegExp(`^${m.id}\\s`, 'm'), m.id);
  const gpus = runInflabSync(['catalog', 'gpus']);
  assert.ok(!MODELS.some((m) => new RegExp(`^${m.id}\\s`, 'm').test(gpus.stdout)));
  const json = JSON.parse(runInflabSync(['catalog', 'models', '--json']).stdout);
  assert.deepEqual(
    json.models.map((m: { id: string }) => m.id),
    MODELS.map((m) => m.id),
  );
  assert.equal(runInflabSync(['catalog', 'tpus']).status, 2);
});

const NB = {
  cells: [
    { kind: 'markdown' as const, language: 'markdown', source: '# notes' },
    { kind: 'code' as const, language: 'inflab', source: 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b' },
    { kind: 'code' as const, language: 'inflab', source: 'predict: floors\nname: floors\nprompt: 1,000 tokens' },
  ],
};

test('inflab eval takes a notebook: its code cells run in order, the file is not written', () => {
  const d = tmp();
  const f = path.join(d, 'n.inflab');
  const text = serializeNotebook(NB);
  fs.writeFileSync(f, text);
  const r = runInflabSync(['eval', f, '--json']);
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(
    out.map((c: { kind: string }) => c.kind),
    ['setup', 'predict: floors'],
  );
  assert.equal(out[1].values.prefill_floor_ms > 0, true);
  assert.equal(fs.readFileSync(f, 'utf8'), text);
  assert.deepEqual(fs.readdirSync(d), ['n.inflab']);
});

test('a finding is printed once, with file:line:col, for YAML files and notebooks', () => {
  const d = tmp();
  const y = path.join(d, 'cells.yaml');
  // The unknown GPU is on line 6, column 1 of the file (the second document).
  fs.writeFileSync(
    y,
    'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n---\npredict: floors\ngpu: h100\nprompt: 1k tokens\n',
  );
  const r = runInflabSync(['eval', y]);
  assert.equal(r.status, 1);
  const lines = r.stdout.split('\n').filter((l) => l.includes('Unknown GPU "h100"'));
  assert.equal(lines.length, 1, r.stdout);
  assert.ok(lines[0].startsWith(`${y}:6:1: error [unknown-gpu]`), lines[0]);

  const nb = path.join(d, 'n.inflab');
  const text = serializeNotebook({
    cells: [NB.cells[1], { kind: 'code', language: 'inflab', source: 'predict: floors\nprompt: 1k tokens\ncontxt: 4' }],
  });
  fs.writeFileSync(nb, text);
  const n = runInflabSync(['eval', nb]);
  const hit = n.stdout.split('\n').filter((l) => l.includes('Unknown key "contxt"'));
  assert.equal(hit.length, 1, n.stdout);
  const m = /^(.*):(\d+):(\d+): error/.exec(hit[0]);
  assert.ok(m, hit[0]);
  // The line it names is the line of the file that holds "contxt: 4".
  const fileLine = text.split('\n')[Number(m[2]) - 1];
  assert.equal(fileLine.slice(Number(m[3]) - 1, Number(m[3]) - 1 + 'contxt'.length), 'contxt', fileLine);
});

test('inflab run writes NAME.executed.inflab beside the input by default, the input only with --in-place', () => {
  const d = tmp();
  const f = path.join(d, 'day.inflab');
  const text = serializeNotebook(NB);
  fs.writeFileSync(f, text);
  const r = runInflabSync(['run', f]);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(fs.readFileSync(f, 'utf8'), text, 'the input is untouched');
  const executed = parseNotebook(fs.readFileSync(path.join(d, 'day.executed.inflab'), 'utf8'));
  assert.equal(executed.cells[2].lastRun?.success, true);
  // Each cell's text output is printed, as eval prints it.
  assert.match(r.stdout, /prefill floor, simple/);
  assert.match(r.stdout, /wrote .*day\.executed\.inflab/);

  const q = runInflabSync(['run', f, '--quiet', '--out', path.join(d, 'q.inflab')]);
  assert.equal(q.status, 0, q.stderr);
  assert.equal(q.stdout, '');

  assert.equal(runInflabSync(['run', f, '--in-place', '--out', path.join(d, 'x.inflab')]).status, 2);
  const i = runInflabSync(['run', f, '--in-place']);
  assert.equal(i.status, 0, i.stderr);
  assert.ok(
    parseNotebook(fs.readFileSync(f, 'utf8')).cells[2].outputs?.length,
    'in place: the outputs are in the input',
  );
});
