/**
 * Several GPUs: Llama-3.1-70B on H100s with tensor_parallel, pipeline_parallel and data_parallel,
 * through the physics, the kv-pool, the decode roofline and the simulated serving sweep; and the
 * 70B bf16 model that does not fit one 80 GB card, an error in every predict cell. Expected values
 * are computed here from the config.json numbers and the data sheets, not read back from the code.
 */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { findGpu, findModel } from '../../src/core/catalog';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import type { CellResult, Setup } from '../../src/core/engine/types';
import { decodeRoofline, kvHeadsPerGpu } from '../../src/core/physics';
import { kvPool } from '../../src/core/physics/kvPool';

const GiB = 2 ** 30;
// Llama-3.1-70B config.json: hidden 8192, 80 layers, 64 heads, 8 KV heads × 128, vocab 128256, MLP 28672.
const H = 8192;
const L = 80;
const V = 128256;
const EMB = V * H;
const NORMS = L * 2 * H + H;
const LINEAR = L * (H * H + 2 * H * 8 * 128 + H * H + 3 * H * 28672);
const TOTAL = LINEAR + NORMS + 2 * EMB;
// H100 SXM: 3,350 GB/s HBM; NVLink 900 GB/s bidirectional → 450 GB/s each way; α 5 µs (the catalog's assumption).
const BW = 3350e9;
const LINK = 450e9;
const ALPHA = 5e-6;
// The default activation peak + non-torch memory (0.25 + 0.154 GiB, docs/physics.md's ≈0.4 GiB).
const OVERHEAD = 0.404 * GiB;

async function run(...cells: string[]): Promise<CellResult[]> {
  const nb = createNotebookContext(os.tmpdir());
  const out: CellResult[] = [];
  for (let i = 0; i < cells.length; i++) out.push(await runCell(cells[i], i, nb));
  return out;
}

const SETUP70 = 'setup: big\ngpu: h100-sxm\nmodel: llama-3.1-70b\n';
const TP4 = SETUP70 + 'tensor_parallel: 4\n';

function setup(over: Partial<Setup> = {}): Setup {
  return {
    name: 't',
    gpu: findGpu('h100-sxm')!,
    model: findModel('llama-3.1-70b')!,
    weights: 'bf16',
    kvCache: 'bf16',
    ...over,
  };
}

test('70B bf16 on one 80 GB card is an error in every predict cell', async () => {
  const cells = [
    'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 64]\n',
    'predict: floors\nprompt: 1000\n',
    'predict: kv-pool\n',
    'predict: roofline\n',
    'predict: serving\ninput: 100\noutput: 10\nconcurrency: [1]\nrequests: 2\n',
  ];
  const [, ...rs] = await run(SETUP70, ...cells);
  for (const [i, r] of rs.entries()) {
    const f = r.findings.find((x) => x.code === 'weights-do-not-fit');
    assert.ok(f, `cell ${cells[i].split('\n')[0]}: ${r.findings.map((x) => x.code).join(', ')}`);
    assert.equal(f.severity, 'error');
    assert.match(f.message, /141\.11 GB/);
    assert.match(f.fix!, /tensor_parallel: 2/);
  }
  // With four GPUs the same cells carry no such error.
  const [, ok] = await run(TP4, cells[0]);
  assert.equal(
    ok.findings.some((x) => x.code === 'weights-do-not-fit'),
    false,
  );
});

test('TP 4: per-GPU weights, vLLM per-worker pool (kv heads / 4 per GPU)', async () => {
  const [s, p] = await run(TP4, 'predict: kv-pool\n');
  assert.equal(s.ok && p.ok, true, JSON.stringify(p.error));
  assert.equal(s.values.params_total, TOTAL);
  // Linear layers and the vocab-parallel embedding and lm_head split four ways; norms replicated.
  const perGpu = ((LINEAR + 2 * EMB) * 2) / 4 + NORMS * 2;
  assert.equal(s.values.weights_per_gpu_bytes, perGpu);
  assert.equal(p.values.weights_bytes, perGpu);
  // Each worker: 2 KV heads × 128 × 80 layers × 2 B × 2 (K, V) per token; blocks of 16.
  const kvGpu = 2 * L * 2 * 128 * 2;
  assert.equal(p.values.kv_bytes_per_token_per_gpu, kvGpu);
  const available = 0.9 * 80 * GiB - perGpu - OVERHEAD;
  const tokens = Math.floor(available / (kvGpu * 16)) * 16;
  assert.ok(Math.abs((p.values.pool_tokens as number) / tokens - 1) < 1e-3, `${p.values.pool_tokens} vs ${tokens}`);
  assert.ok((p.values.pool_tokens as number) > 500_000);
});

test('TP 4 decode roofline: the all-reduce term, 2 × layers × (α + 2(n−1)/n · B·hidden·2 / β)', async () => {
  const [, r] = await run(TP4, 'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 64]\n');
  assert.equal(r.ok, true, JSON.stringify(r.error));
  const rows = r.values.rows as { batch: number; step_ms: number; comm_ms: number }[];
  const ar = (B: number) => 2 * L * (ALPHA + ((2 * 3) / 4) * ((B * H * 2) / LINK));
  const kvReq = 2 * L * 8 * 128 * 2 * 1000;
  for (const row of rows) {
    assert.ok(Math.abs(row.comm_ms / (ar(row.batch) * 1e3) - 1) < 1e-9, `comm at B=${row.batch}`);
    const mem = (TOTAL * 2 + kvReq * row.batch) / 4 / BW;
    assert.ok(Math.abs(row.step_ms / ((mem + ar(row.batch)) * 1e3) - 1) < 1e-9, `step at B=${row.batch}`);
  }
  assert.equal(r.values.tensor_parallel, 4);
  const text = r.outputs
    .flatMap((o) => o.items)
    .map((i) => String(i.data))
    .join('\n');
  assert.match(text, /all-reduce/);
  assert.match(text, /NVLink 4/);
  // One GPU of the four reads a quarter: the batch-1 ceiling is about 4× the (impossible) single card's.
  const one = decodeRoofline(setup(), 1000, [1]).rows[0].per_user_tok_s;
  const four = 1000 / rows[0].step_ms;
  assert.ok(four > 3.5 * one && four < 4 * one, `${four} vs ${one}`);
});

test('TP 4 sweep on the simulator: a batch-1 step is the roofline step plus the overhead', async () => {
  const [, sv, roof] = await run(
    TP4,
    'predict: serving\ninput: 1000\noutput: 100\nconcurrency: [1, 32]\nrequests: 40\n',
    'predict: decode-roofline\ninput: 1000\noutput: 100\nbatch: [1]\n',
  );
  assert.equal(sv.ok, true, JSON.stringify(sv.error));
  const pts = sv.values.points as { metrics: { tpot_ms: { median: number }; output_throughput: number } }[];
  const step = (roof.values.rows as { step_ms: number }[])[0].step_ms;
  const overhead = (sv.values.assumptions as { step_overhead_s: number }).step_overhead_s * 1e3;
  // The simulated TPOT at C=1 is the step time (live context), within the KV growth of 100 tokens.
  assert.ok(Math.abs(pts[0].metrics.tpot_ms.median / (step + overhead) - 1) < 0.01, `${pts[0].metrics.tpot_ms.median}`);
  assert.ok(pts[1].metrics.output_throughput > 10 * pts[0].metrics.output_throughput);
});

test('pipeline parallel: stages hold their layers; a lone request leaves the other stages idle (the bubble)', () => {
  const s = setup({ parallel: { tp: 1, pp: 2, dp: 1 } });
  const r = decodeRoofline(s, 1000, [1, 2, 64]);
  assert.equal(r.rows[0].bubble, 0.5);
  assert.equal(r.rows[1].bubble, 0);
  // 40 layers per stage: a block is 16 tokens × 40 layers × 8 heads × 128 × 2 × 2 B.
  const p = kvPool(s);
  assert.equal(p.layers_per_gpu, 40);
  assert.equal(p.page_size_bytes * p.layers_per_gpu, 16 * 40 * 8 * 128 * 2 * 2);
  // The first stage holds 40 layers and the embedding; the last 40 layers, lm_head and the final norm.
  assert.equal(p.weights_bytes, (LINEAR / 2) * 2 + ((NORMS - H) / 2) * 2 + EMB * 2 + (H * 2) / 2);
});

test('data parallel: replicas multiply the pool and the throughput, not the per-GPU numbers', () => {
  const one = setup({ parallel: { tp: 4, pp: 1, dp: 1 } });
  const two = setup({ parallel: { tp: 4, pp: 1, dp: 2 } });
  assert.equal(kvPool(two).pool_tokens, kvPool(one).pool_tokens);
  assert.equal(kvPool(two).pool_tokens_all_replicas, 2 * kvPool(one).pool_tokens);
});

test('KV heads replicate when tp exceeds them; a tp that does not divide the heads is an error', async () => {
  assert.equal(kvHeadsPerGpu(findModel('llama-3.1-70b')!, 16), 1);
  assert.equal(kvHeadsPerGpu(findModel('llama-3.1-70b')!, 4), 2);
  const [, r] = await run(SETUP70 + 'tensor_parallel: 3\n', 'predict: floors\n');
  const f = r.findings.find((x) => x.code === 'parallel-layout');
  assert.ok(f);
  assert.match(f.message, /does not divide the 64 attention heads/);
  const [bad] = await run(SETUP70 + 'tensor_parallel: 2.5\n');
  assert.equal(bad.ok, false);
  assert.match(bad.error!.message, /tensor_parallel/);
});

test('data_parallel: 2 replicas behind one endpoint serve C=64 as two engines of C=32 each', async () => {
  const a100 = 'setup: d\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n';
  const cell = (c: number) => `predict: serving\ninput: 1000\noutput: 200\nconcurrency: [${c}]\nrequests: 128\n`;
  const [, two] = await run(a100 + 'data_parallel: 2\n', cell(64));
  const [, one] = await run(a100, cell(32));
  assert.equal(two.ok && one.ok, true, JSON.stringify(two.error ?? one.error));
  const tput = (r: CellResult) => (r.values.points as { simulated_tok_s: number }[])[0].simulated_tok_s;
  const ratio = tput(two) / (2 * tput(one));
  assert.ok(Math.abs(ratio - 1) < 0.05, `dp=2 at C=64: ${tput(two)} vs 2 × ${tput(one)}`);
  // Each replica ran about half the batch.
  const batch = (two.values.points as { mean_batch: number }[])[0].mean_batch;
  assert.ok(batch > 24 && batch <= 32, `mean batch per replica ${batch}`);
});
