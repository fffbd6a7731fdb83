/** `compare` cells: predicted against measured, references into named cells, verdicts, causes, curves. */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { analyzeCells, createNotebookContext, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';
import type { CellResult } from '../../src/core/engine/types';
import { SimEndpoints } from '../../src/core/sim/endpoints';

const SETUP = 'setup: day4\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n';
const ROOFLINE = 'predict: decode-roofline\nname: roofline\ncontext: 1k tokens\nbatch: [1, 8, 64]\n';
const VALIDATION = 'record: day4 validation run\nbatch: 1\nprompt: 1000 tokens\nper_user: 88.4 tok/s\nstep: 11.3 ms\n';
const SWEEP = 'record: day4\nprompt: 1000 tokens\nttft: 23 ms\n';

async function run(cells: string[]): Promise<CellResult[]> {
  const nb = createNotebookContext(os.tmpdir());
  const out: CellResult[] = [];
  for (let i = 0; i < cells.length; i++) out.push(await runCell(cells[i], i, nb));
  return out;
}

type Row = {
  quantity: string;
  predicted: string;
  measured: string;
  ratio?: number;
  ok?: boolean;
  verdict: string;
  cause: string;
};
const rowsOf = (r: CellResult) => r.values.rows as Row[];

test('literal rows: ratio = measured / predicted, ✅ within the tolerance and ❌ outside it', async () => {
  const cmp = [
    'compare: literals',
    'tolerance: 10%',
    'rows:',
    '  - {quantity: decode, predicted: 100 tok/s, measured: 95 tok/s}',
    '  - {quantity: step, predicted: 8.03 ms, measured: 11.3 ms}',
    '  - {quantity: tight, predicted: 100 tok/s, measured: 95 tok/s, tolerance: 2%}',
  ].join('\n');
  const [, r] = await run([SETUP, cmp]);
  assert.equal(r.ok, true, JSON.stringify(r.error));
  const rows = rowsOf(r);
  assert.equal(rows[0].verdict, '✅');
  assert.ok(Math.abs(rows[0].ratio! - 0.95) < 1e-12);
  assert.equal(rows[1].verdict, '❌');
  assert.ok(Math.abs(rows[1].ratio! - 11.3 / 8.03) < 1e-9);
  assert.equal(rows[2].verdict, '❌', 'a row may carry its own tolerance');
  assert.equal(r.values.passed, 1);
  assert.equal(r.values.failed, 2);
  const text = r.outputs
    .flatMap((o) => o.items)
    .filter((i) => i.mime === MIME.plain)
    .map((i) => String(i.data))
    .join('\n');
  assert.match(text, /quantity\s+predicted\s+measured\s+ratio\s+verdict\s+cause/);
  assert.match(text, /1 within, 2 outside ±10%/);
});

test('references: CELL.rows[0].key into a prediction, CELL.key (unit suffix implied) into a record', async () => {
  const cmp = [
    'compare: day4 verdict',
    'rows:',
    '  - {quantity: batch-1 decode, predicted: "roofline.rows[0].per_user_tok_s", measured: day4 validation run.per_user}',
    '  - {quantity: decode step, predicted: roofline.decode_step_floor_ms, measured: day4 validation run.step_ms}',
  ].join('\n');
  const res = await run([SETUP, ROOFLINE, VALIDATION, cmp]);
  const r = res[3];
  assert.equal(r.ok, true, JSON.stringify(r.error));
  const rows = rowsOf(r);
  const predictedPerUser = (res[1].values.rows as { per_user_tok_s: number }[])[0].per_user_tok_s;
  assert.ok(Math.abs(rows[0].ratio! - 88.4 / predictedPerUser) < 1e-9);
  assert.equal(rows[0].measured, '88.4 tok/s');
  assert.equal(rows[1].predicted, '8.03 ms');
  assert.equal(rows[1].measured, '11.3 ms');
  assert.ok(Math.abs(rows[1].ratio! - 11.3 / (res[1].values.decode_step_floor_ms as number)) < 1e-9);
});

test('the cause column comes from the checks on the measured fact: the TTFT row reads "prefix-cache hit?"', async () => {
  const cmp = [
    'compare: ttft',
    'rows:',
    '  - {quantity: first token, predicted: 52.5 ms, measured: day4.ttft}',
    // A literal says what it is with fact:, or by a quantity that is a fact name.
    '  - {quantity: first token (typed), predicted: 52.5 ms, measured: 23 ms, prompt: 1000 tokens, fact: ttft.p50}',
    '  - {quantity: TTFT, predicted: 52.5 ms, measured: 70 ms, prompt: 1000 tokens}',
    // A prose label with a literal: no fact, so no check (the label is not guessed at).
    '  - {quantity: time to first token, predicted: 52.5 ms, measured: 23 ms, prompt: 1000 tokens}',
  ].join('\n');
  const res = await run([SETUP, SWEEP, cmp]);
  const r = res[2];
  const rows = rowsOf(r);
  assert.equal(rows[0].cause, 'prefix-cache hit?');
  assert.equal(rows[1].cause, 'prefix-cache hit?');
  assert.equal(rows[2].cause, '');
  assert.equal(rows[3].cause, '');
  const fs = r.findings.filter((f) => f.code === 'ttft-below-prefill-floor');
  assert.deepEqual(
    fs.map((f) => f.path),
    [
      ['rows', 0, 'measured'],
      ['rows', 1, 'measured'],
    ],
  );
});

test('as the user types, literal rows are checked and the finding stands on the measured line', () => {
  const cmp = 'compare: typed\nrows:\n  - {quantity: TTFT, predicted: 52.5 ms, measured: 23 ms, prompt: 1000 tokens}\n';
  const fs = analyzeCells([SETUP, cmp], os.tmpdir())[1];
  assert.deepEqual(
    fs.map((f) => [f.code, f.path]),
    [['ttft-below-prefill-floor', ['rows', 0, 'measured']]],
  );
  assert.equal(fs[0].quickFix, undefined);
});

test('curves: roofline rows[*] against typed sweep numbers by batch — a row per shared batch and a plot of both', async () => {
  const cmp = [
    'compare: curve',
    'rows:',
    '  - quantity: aggregate tok/s',
    '    predicted: "roofline.rows[*].aggregate_tok_s"',
    '    measured: {1: 88.4 tok/s, 64: 2530 tok/s, 256: 4000 tok/s}',
    '    x: batch',
  ].join('\n');
  const res = await run([SETUP, ROOFLINE, cmp]);
  const r = res[2];
  assert.equal(r.ok, true, JSON.stringify(r.error));
  const rows = rowsOf(r);
  assert.deepEqual(
    rows.map((x) => x.quantity),
    ['aggregate tok/s @ batch 1', 'aggregate tok/s @ batch 64'],
  );
  const agg64 = (res[1].values.rows as { batch: number; aggregate_tok_s: number }[]).find(
    (x) => x.batch === 64,
  )!.aggregate_tok_s;
  assert.ok(Math.abs(rows[1].ratio! - 2530 / agg64) < 1e-9);
  const spec = r.outputs.flatMap((o) => o.items).find((i) => i.mime === MIME.vegaLite6)?.data as {
    data: { values: { x: number; series: string; y: number }[] };
  };
  assert.ok(spec, 'a Vega-Lite plot');
  const pts = spec.data.values;
  assert.deepEqual(
    pts.filter((p) => p.series === 'predicted').map((p) => p.x),
    [1, 8, 64],
  );
  assert.deepEqual(
    pts.filter((p) => p.series === 'measured').map((p) => p.x),
    [1, 64, 256],
  );
  assert.ok(
    r.outputs.some((o) => o.items.some((i) => i.mime === MIME.svg && String(i.data).includes('<svg'))),
    'and its SVG',
  );
});

test('a bare number takes the unit of the other side', async () => {
  const [, r] = await run([SETUP, 'compare: bare\nrows:\n  - {quantity: step, predicted: 8 ms, measured: 10}\n']);
  assert.equal(rowsOf(r)[0].measured, '10 ms');
  assert.ok(Math.abs(rowsOf(r)[0].ratio! - 1.25) < 1e-12);
});

test('a reference that does not resolve fails on its line and names what there is', async () => {
  const res = await run([
    SETUP,
    VALIDATION,
    'compare: bad\nrows:\n  - {quantity: x, predicted: 100 tok/s, measured: day4 validaton run.per_user}\n  - {quantity: y, predicted: 1 ms, measured: 1 ms}\n',
  ]);
  const r = res[2];
  assert.equal(r.ok, false);
  assert.deepEqual(r.error!.path, ['rows', 0, 'measured']);
  assert.match(r.error!.message, /no cell named "day4 validaton run"; named cells: day4 validation run/);
  const res2 = await run([
    SETUP,
    VALIDATION,
    'compare: bad key\nrows:\n  - {quantity: x, predicted: 100 tok/s, measured: day4 validation run.tpot}\n',
  ]);
  assert.match(res2[2].error!.message, /has no "tpot"; it has: .*per_user_tok_s/);
});

test('unlike quantities are refused: a time against a token rate', async () => {
  const [, r] = await run([SETUP, 'compare: units\nrows:\n  - {quantity: x, predicted: 10 ms, measured: 88 tok/s}\n']);
  assert.equal(r.ok, false);
  assert.deepEqual(r.error!.path, ['rows', 0]);
  assert.match(r.error!.message, /different kinds of quantity/);
});

const P95 = 'record: cold\nprompt: 1000 tokens\nbatch: 1\nttft_p95: 23 ms\nkv_pool: 410240 tokens\n';

test('CELL.fact(NAME): the unit is the fact’s, and the check is the one for that fact whatever the row is called', async () => {
  const cmp = [
    'compare: facts',
    'rows:',
    // Neither label says TTFT: the fact does (the old code guessed from the label and checked nothing here).
    '  - {quantity: the cold start, predicted: 52.5 ms, measured: cold.fact(ttft.p95)}',
    '  - {quantity: the cold start (by value path), predicted: 52.5 ms, measured: cold.ttft_p95}',
    '  - {quantity: pool, predicted: 400000 tokens, measured: cold.fact(kv_pool)}',
    // Any spelling of a stat names the same fact.
    '  - {quantity: spelled, predicted: 23 ms, measured: cold.fact(TTFT_p95)}',
  ].join('\n');
  const [, , r] = await run([SETUP, P95, cmp]);
  assert.equal(r.ok, true, JSON.stringify(r.error));
  const rows = rowsOf(r);
  assert.equal(rows[0].measured, '23 ms');
  assert.equal(rows[0].cause, 'prefix-cache hit?');
  assert.equal(rows[1].cause, 'prefix-cache hit?', 'a value path is matched to the fact it states');
  assert.equal(rows[2].measured, '410,240 tokens');
  assert.ok(Math.abs(rows[2].ratio! - 410_240 / 400_000) < 1e-12);
  assert.equal(rows[3].verdict, '✅');
  assert.deepEqual(
    r.findings.filter((f) => f.code === 'ttft-below-prefill-floor').map((f) => f.path),
    [
      ['rows', 0, 'measured'],
      ['rows', 1, 'measured'],
      ['rows', 3, 'measured'],
    ],
  );
});

test('a fact stated along a curve: the roofline’s curve fact against measured points, paired by batch', async () => {
  const cmp = [
    'compare: curve facts',
    'rows:',
    '  - quantity: aggregate',
    '    predicted: roofline.fact(curve.output_throughput)',
    '    measured: {1: 88.4 tok/s, 64: 2530 tok/s}',
  ].join('\n');
  const res = await run([SETUP, ROOFLINE, cmp]);
  const r = res[2];
  assert.equal(r.ok, true, JSON.stringify(r.error));
  assert.deepEqual(
    rowsOf(r).map((x) => x.quantity),
    ['aggregate @ batch 1', 'aggregate @ batch 64'],
  );
  const agg64 = (res[1].values.rows as { batch: number; aggregate_tok_s: number }[]).find(
    (x) => x.batch === 64,
  )!.aggregate_tok_s;
  assert.ok(Math.abs(rowsOf(r)[1].ratio! - 2530 / agg64) < 1e-9);
});

test('a bad fact reference lists what the cell offers, nearest first, with units', async () => {
  const res = await run([
    SETUP,
    P95,
    'compare: bad\nrows:\n  - {quantity: x, predicted: 50 ms, measured: cold.fact(ttft.p96)}\n',
  ]);
  const r = res[2];
  assert.equal(r.ok, false);
  assert.deepEqual(r.error!.path, ['rows', 0, 'measured']);
  assert.match(
    r.error!.message,
    /"cold" has no fact "ttft\.p96"; it offers \(nearest first\): cold\.fact\(ttft\.p95\) \(ms, at batch 1\); .*cold\.fact\(kv_pool\) \(tokens/,
  );
  // A bad value path lists the facts too.
  const res2 = await run([
    SETUP,
    P95,
    'compare: bad\nrows:\n  - {quantity: x, predicted: 50 ms, measured: cold.tpot}\n',
  ]);
  assert.match(res2[2].error!.message, /has no "tpot"; it has: .*; its facts: .*cold\.fact\(ttft\.p95\) \(ms/);
  const res3 = await run([
    SETUP,
    P95,
    'compare: bad\nrows:\n  - {quantity: x, predicted: 50 ms, measured: cold.fact(ttft.p95 @ batch=8)}\n',
  ]);
  assert.match(res3[2].error!.message, /has no point at batch 8 \(it has batch 1\)/);
});

test('a sweep’s fact is a curve over its points; @ concurrency=N picks one', async () => {
  const sims = new SimEndpoints(50);
  try {
    const nb = createNotebookContext(os.tmpdir(), { simEndpoint: (s) => sims.url(s) });
    await runCell(`${SETUP}endpoint: sim`, 0, nb);
    const bench = await runCell(
      'bench: sweep\nname: sweep\ninput: 200\noutput: 8\nconcurrency: [1, 4]\nrequests: 8\npercentiles: [50, 95]',
      1,
      nb,
    );
    assert.ok(bench.ok, bench.error?.message);
    const r = await runCell(
      [
        'compare: sweep',
        'rows:',
        '  - {quantity: p95 TTFT, predicted: {1: 10 ms, 4: 10 ms}, measured: sweep.fact(ttft.p95)}',
        '  - {quantity: p95 TTFT at 4, predicted: 10 ms, measured: sweep.fact(ttft.p95 @ concurrency=4)}',
        '  - {quantity: tok/s at c=4, predicted: 100 tok/s, measured: sweep.fact(output_throughput @ c=4)}',
      ].join('\n'),
      2,
      nb,
    );
    assert.ok(r.ok, r.error?.message);
    const rows = rowsOf(r);
    assert.deepEqual(
      rows.map((x) => x.quantity),
      ['p95 TTFT @ concurrency 1', 'p95 TTFT @ concurrency 4', 'p95 TTFT at 4', 'tok/s at c=4'],
    );
    const points = bench.values.points as {
      concurrency: number;
      ttft_ms: { p95: number };
      output_throughput: number;
    }[];
    assert.ok(Math.abs(rows[2].ratio! - points[1].ttft_ms.p95 / 10) < 1e-9);
    assert.match(rows[2].measured, /\d (ms|s)$/, 'in the fact’s unit, a time');
    assert.ok(Math.abs(rows[3].ratio! - points[1].output_throughput / 100) < 1e-9);
  } finally {
    await sims.close();
  }
});
