import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { analyzeCells, createNotebookContext, restoreResult, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';
import { parseCell, rangeOfPath } from '../../src/core/notebook/cellSource';

const SETUP = 'setup: day4\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nweights: bf16\nkv_cache: bf16\n';
const ROOFLINE = 'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 16, 64, 128]\n';

test('a setup then a decode-roofline cell run in one context and share values', async () => {
  const nb = createNotebookContext(os.tmpdir());
  const s = await runCell(SETUP, 0, nb);
  assert.equal(s.ok, true, JSON.stringify(s.error));
  assert.equal(nb.defaultSetup?.gpu.id, 'a100-sxm4-80gb');
  const r = await runCell(ROOFLINE + 'name: roof\n', 1, nb);
  assert.equal(r.ok, true, JSON.stringify(r.error));
  assert.equal(r.kind, 'predict: decode-roofline');
  assert.equal(nb.named.get('roof'), r);
  const rows = r.values.rows as { batch: number; aggregate_tok_s: number }[];
  assert.deepEqual(
    rows.map((x) => x.batch),
    [1, 16, 64, 128],
  );
  // Outputs: a table (html + plain), and a plot carrying both the Vega-Lite spec and an SVG.
  const mimes = r.outputs.map((o) => o.items.map((i) => i.mime));
  assert.ok(mimes.some((m) => m.includes(MIME.html) && m.includes(MIME.plain)));
  const plot = r.outputs.find((o) => o.items.some((i) => i.mime === MIME.vegaLite6));
  assert.ok(plot, 'plot output');
  assert.match(String(plot!.items.find((i) => i.mime === MIME.svg)?.data), /^<svg/);
  // Values ride along with the first output.
  assert.ok(r.outputs[0].items.some((i) => i.mime === MIME.values));
});

test('an unknown kind says which kinds exist and suggests the nearest', async () => {
  const nb = createNotebookContext(os.tmpdir());
  const r = await runCell('predcit: floors\n', 0, nb);
  assert.equal(r.ok, false);
  assert.match(r.error!.message, /did you mean "predict"/);
  const v = await runCell('predict: decode-rooflin\n', 0, nb);
  assert.match(v.error!.message, /did you mean "predict: decode-roofline"/);
});

test('a schema error lands on the line of the offending key with what to write instead', () => {
  const cells = [SETUP, 'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 2]\nbatchs: 4\n'];
  const [f0, f1] = analyzeCells(cells, os.tmpdir());
  assert.deepEqual(f0, []);
  const unknown = f1.find((f) => f.code === 'unknown-key');
  assert.ok(unknown, JSON.stringify(f1));
  assert.deepEqual(unknown!.path, ['batchs']);
  assert.match(unknown!.message, /did you mean "batch"/);
  const range = rangeOfPath(parseCell(cells[1]), unknown!.path);
  assert.equal(range.start.line, 3);
});

test('a missing unit is an error on that line', () => {
  const cells = [
    SETUP,
    'predict: decode-roofline\ncontext: 1k tokens\n',
    'setup: x\ngpu: {bandwidth: 2039, memory: 80 GiB, bf16: 312 TFLOPS}\nmodel: qwen3-8b\n',
  ];
  const f = analyzeCells(cells, os.tmpdir())[2];
  const e = f.find((x) => x.severity === 'error');
  assert.ok(e, JSON.stringify(f));
  assert.deepEqual(e!.path, ['gpu', 'bandwidth']);
  assert.match(e!.message, /needs a unit/);
  assert.match(e!.message, /GB\/s/);
});

test('a cell without a setup says how to add one', async () => {
  const nb = createNotebookContext(os.tmpdir());
  const r = await runCell(ROOFLINE, 0, nb);
  assert.equal(r.ok, false);
  assert.equal(r.error!.code, 'needs-setup');
  assert.match(r.error!.message, /setup cell/);
});

test('setup keys inline override the setup for that cell alone', async () => {
  const nb = createNotebookContext(os.tmpdir());
  await runCell(SETUP, 0, nb);
  const fp8 = await runCell(ROOFLINE + 'weights: fp8\ngpu: h100-sxm\n', 1, nb);
  assert.equal(fp8.ok, true, JSON.stringify(fp8.error));
  const bf16 = await runCell(ROOFLINE, 2, nb);
  assert.equal(nb.defaultSetup?.gpu.id, 'a100-sxm4-80gb');
  assert.ok((fp8.values.weights_bytes as number) < (bf16.values.weights_bytes as number));
});

test('a named setup is used by name; an unknown name is an error with a suggestion', async () => {
  const nb = createNotebookContext(os.tmpdir());
  await runCell(SETUP, 0, nb);
  await runCell('setup: h100\ngpu: h100-sxm\n', 1, nb);
  assert.equal(nb.defaultSetup?.name, 'h100');
  assert.equal(nb.defaultSetup?.model.id, 'qwen3-8b', 'a setup inherits what it leaves out');
  const r = await runCell(ROOFLINE + 'setup: day4\n', 2, nb);
  assert.equal(r.ok, true);
  const bad = await runCell(ROOFLINE + 'setup: day5\n', 3, nb);
  assert.equal(bad.ok, false);
  assert.match(bad.error!.message, /No setup named "day5".*did you mean "day4"/);
});

test('YAML syntax errors are reported, never thrown', async () => {
  const nb = createNotebookContext(os.tmpdir());
  const r = await runCell('predict: [decode\n  : :', 0, nb);
  assert.equal(r.ok, false);
  assert.equal(r.error!.code, 'yaml-syntax');
});

test('cancellation before start is honoured', async () => {
  const nb = createNotebookContext(os.tmpdir());
  const ac = new AbortController();
  ac.abort();
  const r = await runCell(SETUP, 0, nb, { signal: ac.signal });
  assert.equal(r.ok, false);
  assert.equal(r.error!.code, 'cancelled');
});

test('a saved result is restored from its outputs for the cells after it', async () => {
  const nb = createNotebookContext(os.tmpdir());
  await runCell(SETUP, 0, nb);
  const r = await runCell(ROOFLINE + 'name: roof\n', 1, nb);
  const fresh = createNotebookContext(os.tmpdir());
  restoreResult(SETUP, 0, [], fresh);
  assert.equal(fresh.defaultSetup?.name, 'day4');
  const restored = restoreResult(ROOFLINE + 'name: roof\n', 1, r.outputs, fresh);
  assert.deepEqual(restored?.values.rows, r.values.rows);
  assert.equal(fresh.named.get('roof')?.values.decode_step_floor_ms, r.values.decode_step_floor_ms);
});

test('a setup cell redefining an earlier name shows and registers its own GPU', async () => {
  const nb = createNotebookContext(os.tmpdir());
  await runCell(SETUP, 0, nb);
  const again = await runCell('setup: day4\ngpu: h100-sxm\n', 1, nb);
  assert.equal(again.values.gpu, 'h100-sxm');
  assert.match(String(again.outputs[0].items.find((i) => i.mime === MIME.plain)?.data), /h100-sxm/);
  assert.equal(nb.setups.get('day4')?.gpu.id, 'h100-sxm');
});

test('an unknown key is never offered a rename onto a key the cell already has (the quick fix would duplicate it)', () => {
  const [, fs] = analyzeCells(
    [
      'setup: s\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b',
      'bench: sweep\ninput: 1000\noutput: 100\nconcurrency: [1]\nbatch: 8\nrequets: 5',
    ],
    '.',
  );
  const batch = fs.find((f) => f.code === 'unknown-key' && f.path?.includes('batch'))!;
  assert.equal(batch.quickFix, undefined, 'no "rename batch to bench": bench is the kind key, already there');
  const requets = fs.find((f) => f.code === 'unknown-key' && f.path?.includes('requets'))!;
  assert.equal(requets.quickFix?.title, 'Rename "requets" to "requests"');
});
