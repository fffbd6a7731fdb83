/** Cost: a setup's rental price turns every predicted throughput into $ per million tokens. */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import type { CellResult } from '../../src/core/engine/types';
import { dollarsPerMtok } from '../../src/core/physics';

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
  assert.match(bad.error!.message, /1\.20 \$\/h/);
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
