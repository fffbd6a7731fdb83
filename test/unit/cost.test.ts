/** Cost: a setup's rental price turns every predicted throughput into $ per million tokens. */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import type { CellResult } from '../../src/core/engine/types';
import { nodeFiles } from '../../src/core/host/files';
import { runInflab } from '../support/cli';
import { dollarsPerMtok, fmtDollarsPerMtok, parsePrice } from '../../src/core/cost';
import { factName } from '../../src/core/facts';
import { SimEndpoints } from '../../src/core/sim/endpoints';
import { parseQuantity } from '../../src/core/units';

async function run(...cells: string[]): Promise<CellResult[]> {
  const nb = createNotebookContext(os.tmpdir());
  const out: CellResult[] = [];
  for (let i = 0; i < cells.length; i++) out.push(await runCell(cells[i], i, nb));
  return out;
}

test('the lab: an A100 at $1.20/h, 3,088 tok/s raw against 640 tok/s within the SLO is 4.8× the cost per token', () => {
  const raw = dollarsPerMtok(1.2, 3088);
  const slo = dollarsPerMtok(1.2, 640);
  // 1.20 $/h / (3,088 tok/s × 3,600 s/h) × 10^6 tokens.
  assert.equal(raw.toFixed(4), ((1.2 / (3088 * 3600)) * 1e6).toFixed(4));
  assert.equal(raw.toFixed(3), '0.108');
  assert.equal((slo / raw).toFixed(1), '4.8');
});

test('price per GPU or per node; a bad price says how to write one', async () => {
  const [a, b, bad] = await run(
    'setup: a\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nprice: 1.20 $/h\n',
    'setup: b\ngpu: h100-sxm\nmodel: llama-3.1-70b\ntensor_parallel: 8\nprice: 24 $/h per node\n',
    'setup: c\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nprice: 1.20\n',
  );
  assert.equal(a.values.price_per_gpu_hour, 1.2);
  assert.equal(b.values.price_per_gpu_hour, 3);
  assert.equal(b.values.price_per_hour, 24);
  assert.equal(bad.ok, false);
  // YAML reads `1.20` as the number 1.2: the message writes it back with the unit it lacks.
  assert.match(bad.error!.message, /price 1\.2 needs a unit: write "1\.2 \$\/h" \(per GPU\)/);
  assert.equal(bad.findings.find((f) => f.code === 'schema')!.fix, 'price: 1.20 $/h');
});

test('a priced setup shows $/Mtok beside the predicted serving throughput and the decode roofline', async () => {
  const [, sv, roof] = await run(
    'setup: a\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nprice: 1.20 $/h\n',
    'predict: serving\ninput: 1000\noutput: 100\nconcurrency: [1, 16]\nrequests: 32\n',
    'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 64]\n',
  );
  assert.equal(sv.ok, true, JSON.stringify(sv.error));
  const pts = sv.values.points as {
    metrics: { output_throughput: number; total_token_throughput: number };
    cost: { usd_per_mtok_output: number; usd_per_mtok_total: number };
  }[];
  for (const p of pts) {
    assert.equal(p.cost.usd_per_mtok_output, (1.2 / (p.metrics.output_throughput * 3600)) * 1e6);
    assert.equal(p.cost.usd_per_mtok_total, (1.2 / (p.metrics.total_token_throughput * 3600)) * 1e6);
  }
  const text = (r: CellResult) =>
    r.outputs
      .flatMap((o) => o.items)
      .map((i) => String(i.data))
      .join('\n');
  assert.match(text(sv), /\$ per M output tok/);
  assert.match(text(roof), /\$ per M tok/);
  // Batch 64 shares the rent over 64 streams: far cheaper per token than batch 1.
  const rows = roof.values.rows as { aggregate_tok_s: number }[];
  assert.ok(dollarsPerMtok(1.2, rows[1].aggregate_tok_s) < dollarsPerMtok(1.2, rows[0].aggregate_tok_s) / 20);
  // An unpriced setup has no cost.
  const [, plain] = await run(
    'setup: a\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n',
    'predict: serving\ninput: 100\noutput: 10\nconcurrency: [1]\nrequests: 2\n',
  );
  assert.equal((plain.values.points as { cost?: unknown }[])[0].cost, undefined);
});

test('price: the units parser reads a rental price per GPU or per node, in $/h, $/min or $/s, as text or a mapping', () => {
  const ok = (v: unknown) => {
    const r = parsePrice(v);
    assert.equal(typeof r, 'object', `${JSON.stringify(v)}: ${String(r)}`);
    return r as Exclude<ReturnType<typeof parsePrice>, string>;
  };
  assert.deepEqual(
    [ok('1.20 $/h'), ok('$1.20/h'), ok('1.20 USD/hour'), ok('0.02 $/min'), ok('1.20 $/h per GPU')].map((p) => [
      Number(p.usdPerHour.toFixed(9)),
      p.per,
    ]),
    [
      [1.2, 'gpu'],
      [1.2, 'gpu'],
      [1.2, 'gpu'],
      [1.2, 'gpu'],
      [1.2, 'gpu'],
    ],
  );
  assert.deepEqual([ok('9.60 $/h per node').usdPerHour, ok('9.60 $/h per node').per], [9.6, 'node']);
  assert.deepEqual([ok({ node: '9.60 $/h' }).usdPerHour, ok({ node: '9.60 $/h' }).per], [9.6, 'node']);
  assert.equal(ok({ gpu: '2.50 $/h' }).per, 'gpu');
  // The same quantity through the shared parser: one definition of $/h.
  const q = parseQuantity('1.20 $/h', { dims: ['price_rate'] });
  assert.ok(q.ok && Math.abs(q.quantity.value - 1.2 / 3600) < 1e-15);
  const c = parseQuantity('0.108 $/Mtok', { dims: ['cost_per_token'] });
  assert.ok(c.ok && Math.abs(c.quantity.value - 0.108e-6) < 1e-18);
});

test('a bad price says what to write instead', () => {
  const msg = (v: unknown) => {
    const r = parsePrice(v);
    assert.equal(typeof r, 'string', `${JSON.stringify(v)} was accepted`);
    return r as string;
  };
  assert.match(msg(1.2), /needs a unit: write "1\.2 \$\/h" \(per GPU\)/);
  assert.match(msg('1.20'), /needs a unit: write "1\.20 \$\/h"/);
  assert.match(msg('1.20 $/month'), /unknown unit "\$\/month".*\$\/h/);
  assert.match(msg('1.20 GB/s'), /is a bandwidth, but a rental price is needed/);
  assert.match(msg('0 $/h'), /must be more than zero/);
  assert.match(msg({ gpu: '1 $/h', node: '8 $/h' }), /one key, gpu or node/);
  assert.match(msg({ rack: '1 $/h' }), /one key, gpu or node .*not rack/);
  assert.match(msg([1]), /rental price: write "1\.20 \$\/h"/);
});

test('a priced per-node setup: the node’s price is the whole setup’s, whatever GPUs it counts', async () => {
  const [node, sv] = await run(
    'setup: n\ngpu: h100-sxm\nmodel: qwen3-8b\ndata_parallel: 2\nprice: {node: 8.00 $/h}\n',
    'predict: serving\ninput: 200\noutput: 20\nconcurrency: [4]\nrequests: 8\n',
  );
  assert.equal(node.values.price_per_hour, 8);
  assert.equal(node.values.price_per_gpu_hour, 4);
  const p = (
    sv.values.points as { metrics: { output_throughput: number }; cost: { usd_per_mtok_output: number } }[]
  )[0];
  assert.equal(p.cost.usd_per_mtok_output, (8 / (p.metrics.output_throughput * 3600)) * 1e6);
  assert.ok(sv.facts.some((f) => f.kind === 'cost' && f.metric === 'output' && f.usd_per_hour === 8));
});

test('a priced bench on sim shows $/Mtok beside each throughput and goodput, as facts compare reads', async () => {
  const sims = new SimEndpoints(20);
  try {
    const nb = createNotebookContext(os.tmpdir(), { simEndpoint: (s) => sims.url(s) });
    await runCell('setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: sim\nprice: 1.20 $/h\n', 0, nb);
    const cell = (slo: string) =>
      `bench: sweep\nname: sweep\ninput: 200\noutput: 8\nconcurrency: [1, 4]\nrequests: 8\nslo: {ttft_p99: ${slo}}\npredicted: none\n`;
    const loose = await runCell(cell('10 min'), 1, nb);
    assert.ok(loose.ok, loose.error?.message);
    type P = {
      concurrency: number;
      duration_s: number;
      output_throughput: number;
      total_token_throughput: number;
      cost: {
        usd_per_hour: number;
        usd_per_mtok_output: number;
        usd_per_mtok_total: number;
        usd_per_mtok_goodput: number | null;
      };
    };
    const pts = loose.values.points as P[];
    assert.equal(pts.length, 2);
    const near = (a: number, b: number) => assert.ok(Math.abs(a / b - 1) < 2e-3, `${a} vs ${b}`);
    for (const p of pts) {
      assert.equal(p.cost.usd_per_hour, 1.2);
      // The values' throughputs are rounded to 0.001 tok/s; the costs come from the unrounded ones.
      near(p.cost.usd_per_mtok_output, (1.2 / (p.output_throughput * 3600)) * 1e6);
      near(p.cost.usd_per_mtok_total, (1.2 / (p.total_token_throughput * 3600)) * 1e6);
      // Every request met a 10-minute SLO: the tokens served within it are every output token.
      assert.equal(p.cost.usd_per_mtok_goodput, p.cost.usd_per_mtok_output);
    }
    const text = outputText(loose);
    assert.match(text, /out tok\/s\s+\$\/M out tok\s+\$\/M tok \(in\+out\)/);
    assert.match(text, /goodput req\/s\s+\$\/M tok within SLO/);
    for (const p of pts) assert.ok(text.includes(fmtDollarsPerMtok(p.cost.usd_per_mtok_output)));
    assert.match(text, /Cost at \$1\.20\/h: \$ per M tokens = \$\/h of every GPU \/ \(tok\/s × 3,600\) × 10\^6/);
    assert.match(text, /cheapest meeting the SLOs: c=\d/);
    // Facts: cost.output, cost.total, cost.goodput at each point.
    const names = loose.facts.filter((f) => f.kind === 'cost').map((f) => `${factName(f)}@${f.point?.concurrency}`);
    assert.deepEqual(names.sort(), [
      'cost.goodput@1',
      'cost.goodput@4',
      'cost.output@1',
      'cost.output@4',
      'cost.total@1',
      'cost.total@4',
    ]);
    const cmp = await runCell(
      'compare: cost\nrows:\n  - {quantity: $/Mtok at c=4, predicted: 1 $/Mtok, measured: sweep.fact(cost.output @ c=4)}\n',
      2,
      nb,
    );
    assert.ok(cmp.ok, cmp.error?.message);
    const row = (cmp.values.rows as { ratio: number }[])[0];
    near(row.ratio, pts[1].cost.usd_per_mtok_output / 1);

    // An SLO no request meets: no token is served within it, so it has no price per token.
    const strict = await runCell(cell('1 µs'), 3, nb);
    assert.ok(strict.ok, strict.error?.message);
    for (const p of strict.values.points as P[]) assert.equal(p.cost.usd_per_mtok_goodput, null);
    assert.match(outputText(strict), /no point met the SLOs/);
    assert.ok(!strict.facts.some((f) => f.kind === 'cost' && f.metric === 'goodput'));
  } finally {
    await sims.close();
  }
});

test("a priced bench's verdict table reads each throughput, predicted and measured, as $/Mtok too", async () => {
  const sims = new SimEndpoints(20);
  try {
    const nb = createNotebookContext(os.tmpdir(), { simEndpoint: (s) => sims.url(s) });
    await runCell('setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: sim\nprice: 1.20 $/h\n', 0, nb);
    const r = await runCell(
      'bench: sweep\nname: sweep\ninput: 200\noutput: 8\nconcurrency: [1, 4]\nrequests: 8\n',
      1,
      nb,
    );
    assert.ok(r.ok, r.error?.message);
    const text = outputText(r);
    const table = text.slice(text.indexOf('Measured against predicted'));
    assert.ok(table.length < text.length, 'the bench judged its points against a prediction');
    type Row = { quantity: string; predicted?: number; measured?: number };
    const rows = ((r.values.verdict as { rows: Row[] }).rows ?? []).filter((x) => x.quantity === 'output tok/s');
    assert.ok(rows.length > 0);
    for (const row of rows)
      for (const v of [row.predicted, row.measured])
        if (v !== undefined)
          assert.ok(table.includes(fmtDollarsPerMtok((1.2 / (v * 3600)) * 1e6)), `${v} tok/s priced`);
    assert.match(table, /\$ per million output tokens at \$1\.20\/h/);
  } finally {
    await sims.close();
  }
});

test('what_if on a decode roofline: each alternative priced at its own tok/s and $/h, and what it saves', async () => {
  const roof = 'predict: decode-roofline\ncontext: 2k tokens\nbatch: [1, 64]\n';
  const [, r, fp8, h100] = await run(
    'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nprice: 1.20 $/h\n',
    `${roof}what_if:\n  - weights: fp8\n  - tensor_parallel: 2\n  - {name: an H100, gpu: h100-sxm, price: 2.50 $/h}\n`,
    `${roof}weights: fp8\n`,
    `${roof}gpu: h100-sxm\nprice: 2.50 $/h\n`,
  );
  assert.equal(r.ok, true, JSON.stringify(r.error));
  type Alt = {
    alternative: string;
    usd_per_hour: number;
    points: { x: number; usd_per_mtok_output: number; saves_usd_per_mtok: number }[];
    saves_usd_per_mtok: number;
  };
  const alts = r.values.what_if as Alt[];
  assert.deepEqual(
    alts.map((a) => [a.alternative, a.usd_per_hour]),
    [
      ['weights: fp8', 1.2],
      ['tensor_parallel: 2', 2.4],
      ['an H100', 2.5],
    ],
  );
  const agg = (c: CellResult) => (c.values.rows as { aggregate_tok_s: number }[]).map((x) => x.aggregate_tok_s);
  const now = agg(r).map((t) => dollarsPerMtok(1.2, t));
  // The fp8 alternative is what a cell with weights: fp8 predicts, priced the same.
  agg(fp8).forEach((t, i) => {
    assert.equal(alts[0].points[i].usd_per_mtok_output, dollarsPerMtok(1.2, t));
    assert.equal(alts[0].points[i].saves_usd_per_mtok, now[i] - dollarsPerMtok(1.2, t));
  });
  agg(h100).forEach((t, i) => assert.equal(alts[2].points[i].usd_per_mtok_output, dollarsPerMtok(2.5, t)));
  // fp8 halves the weight bytes a bandwidth-bound step reads: cheaper per token at batch 1.
  assert.ok(alts[0].points[0].saves_usd_per_mtok > 0);
  const text = outputText(r);
  assert.match(text, /What if — \$ per million output tokens against bf16 on a100-sxm4-80gb at \$1\.20\/h per GPU/);
  assert.match(text, /weights: fp8 .*\(−\d+%\).*saves \$[\d.]+\/Mtok/);
});

test('what_if says what is missing: a GPU without its price, a setup without one, a key it cannot change', async () => {
  const [, noPrice] = await run(
    'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nprice: 1.20 $/h\n',
    'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1]\nwhat_if: [{gpu: h100-sxm}]\n',
  );
  assert.equal(noPrice.ok, true);
  const f = noPrice.findings.find((x) => x.code === 'what-if-price')!;
  assert.deepEqual(f.path, ['what_if', 0, 'gpu']);
  assert.match(f.message, /changes the GPU to h100-sxm: give its rental price too/);
  assert.equal(f.fix, '{gpu: h100-sxm, price: 2.50 $/h}');
  const [, unpriced] = await run(
    'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n',
    'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1]\nwhat_if: [{weights: fp8}]\n',
  );
  assert.match(unpriced.findings.find((x) => x.code === 'what-if-price')!.message, /the setup has no price/);
  const [, badKey] = await run(
    'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nprice: 1.20 $/h\n',
    'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1]\nwhat_if: [{model: llama-3.1-8b}]\n',
  );
  assert.equal(badKey.ok, false);
  assert.match(badKey.error!.message, /"model" is not a setup key an alternative may change: use gpu, weights/);
  const [, badPrice] = await run(
    'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nprice: 1.20 $/h\n',
    'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1]\nwhat_if: [{tensor_parallel: 2, price: 3}]\n',
  );
  const bp = badPrice.findings.find((x) => x.path.join('.') === 'what_if.0.price')!;
  assert.match(bp.message, /price 3 needs a unit/);
});

test('what_if on predict: serving simulates the same load on each alternative', async () => {
  const sv = 'predict: serving\ninput: 500\noutput: 50\nconcurrency: [1, 16]\nrequests: 32\n';
  const [, r, fp8] = await run(
    'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nprice: 1.20 $/h\n',
    `${sv}what_if: [{weights: fp8}]\n`,
    `${sv}weights: fp8\n`,
  );
  assert.equal(r.ok, true, JSON.stringify(r.error));
  const alt = (r.values.what_if as { points: { x: number; tok_s: number; usd_per_mtok_output: number }[] }[])[0];
  const fp8Points = fp8.values.points as { concurrency: number; metrics: { output_throughput: number } }[];
  assert.deepEqual(
    alt.points.map((p) => [p.x, p.tok_s, p.usd_per_mtok_output]),
    fp8Points.map((p) => [
      p.concurrency,
      p.metrics.output_throughput,
      dollarsPerMtok(1.2, p.metrics.output_throughput),
    ]),
  );
  assert.match(outputText(r), /What if — .*\n.*c=1\s+c=16/);
});

function outputText(r: CellResult): string {
  return r.outputs
    .flatMap((o) => o.items)
    .filter((i) => i.mime === 'text/plain')
    .map((i) => String(i.data))
    .join('\n');
}

test('predict: serving with an SLO: goodput and $ per M tokens served within it, beside the raw price', async () => {
  const [, r] = await run(
    'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nprice: 1.20 $/h\n',
    'predict: serving\ninput: 1000\noutput: 100\nconcurrency: [1, 64]\nrequests: 128\nslo: {ttft_p99: 300 ms}\n',
  );
  assert.equal(r.ok, true, JSON.stringify(r.error));
  type P = {
    concurrency: number;
    metrics: {
      output_throughput: number;
      goodput: number;
      good_requests: number;
      good_output_tokens: number;
      duration_s: number;
    };
    cost: { usd_per_mtok_output: number; usd_per_mtok_goodput: number };
  };
  const pts = r.values.points as P[];
  for (const p of pts) {
    // ignore_eos: every request within the SLO served its 100 output tokens.
    assert.equal(p.metrics.good_output_tokens, p.metrics.good_requests * 100);
    assert.equal(
      p.cost.usd_per_mtok_goodput,
      (1.2 / ((p.metrics.good_output_tokens / p.metrics.duration_s) * 3600)) * 1e6,
    );
    assert.ok(p.cost.usd_per_mtok_goodput >= p.cost.usd_per_mtok_output);
  }
  assert.ok(r.facts.some((f) => f.kind === 'request-rate' && f.metric === 'goodput' && f.point?.concurrency === 64));
  assert.ok(r.facts.some((f) => f.kind === 'cost' && f.metric === 'goodput' && f.point?.concurrency === 64));
  assert.match(outputText(r), /goodput req\/s\s+\$ per M tok within SLO/);
  assert.match(outputText(r), /Goodput: requests meeting every SLO \(ttft p99 ≤ 300 ms\) \/ duration/);
});

test('imported results and typed-in records read as $/Mtok under a priced setup', async () => {
  const dir = path.join(import.meta.dirname, '../fixtures/imports');
  const nb = createNotebookContext(dir, { ...nodeFiles() });
  await runCell('setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nprice: 1.20 $/h\n', 0, nb);
  const imp = await runCell('import: vllm-save-result.json', 1, nb);
  assert.ok(imp.ok, imp.error?.message);
  const p = (imp.values.points as { output_throughput_tok_s: number }[])[0];
  const cost = imp.facts.find((f) => f.kind === 'cost' && f.metric === 'output');
  assert.ok(cost && cost.kind === 'cost');
  assert.equal(cost.usd_per_mtok, dollarsPerMtok(1.2, p.output_throughput_tok_s));
  assert.match(outputText(imp), /output tok\/s\s+total tok\/s\s+req\/s\s+\$\/M out tok\s+\$\/M tok \(in\+out\)/);
  assert.ok(outputText(imp).includes(fmtDollarsPerMtok(dollarsPerMtok(1.2, p.output_throughput_tok_s))));

  const rec = await runCell('record: lab run\nconcurrency: 128\noutput_throughput: 3,088 tok/s\n', 2, nb);
  assert.ok(rec.ok, rec.error?.message);
  const rc = rec.facts.find((f) => f.kind === 'cost');
  assert.ok(rc && rc.kind === 'cost');
  assert.deepEqual([rc.metric, rc.usd_per_mtok, rc.point?.concurrency], ['output', dollarsPerMtok(1.2, 3088), 128]);
  assert.match(outputText(rec), /3,088 tok\/s \(\$0\.108\/Mtok at \$1\.20\/h per GPU\)/);
});

test('inflab bench --price: the sweep on sim reads as $/Mtok; a price without its unit is a usage error saying what to write', async () => {
  const ok = await runInflab(
    [
      'bench',
      '--endpoint',
      'sim',
      '--price',
      '1.20 $/h',
      '--input',
      '100',
      '--output',
      '8',
      '--concurrency',
      '1',
      '--requests',
      '4',
    ],
    { source: true },
  );
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /out tok\/s\s+\$\/M out tok\s+\$\/M tok \(in\+out\)/);
  assert.match(ok.stdout, /Cost at \$1\.20\/h: \$ per M tokens = /);
  const bad = await runInflab(['bench', '--endpoint', 'sim', '--price', '1.20', '--concurrency', '1'], {
    source: true,
  });
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--price: price 1\.2 needs a unit: write "1\.2 \$\/h" \(per GPU\)/);
});
