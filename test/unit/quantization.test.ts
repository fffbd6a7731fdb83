/**
 * Quantization as checkpoints ship it: fp8/int8/int4 releases quantize the linear layers and keep
 * the embedding table, lm_head and the norms in bf16. Expected values are computed here from the
 * Llama-3.1-70B and Qwen3-8B config.json numbers; and the physics checks that catch impossible
 * KV figures (item 7 of the lab's issue list).
 */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { findModel } from '../../src/core/catalog';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import type { CellResult } from '../../src/core/engine/types';
import { weightsBytes } from '../../src/core/physics';

const GiB = 2 ** 30;
// Llama-3.1-70B: hidden 8192, 80 layers, vocab 128256, untied lm_head.
const H = 8192;
const L = 80;
const EMB = 128256 * H;
const NORMS = L * 2 * H + H;
const LINEAR = L * (H * H + 2 * H * 8 * 128 + H * H + 3 * H * 28672);
const OVERHEAD = 0.404 * GiB; // default activation peak + non-torch (docs/physics.md's ≈0.4 GiB)

async function run(...cells: string[]): Promise<CellResult[]> {
  const nb = createNotebookContext(os.tmpdir());
  const out: CellResult[] = [];
  for (let i = 0; i < cells.length; i++) out.push(await runCell(cells[i], i, nb));
  return out;
}

const text = (r: CellResult) =>
  r.outputs
    .flatMap((o) => o.items)
    .map((i) => String(i.data))
    .join('\n');

test('fp8 70B: the linear layers at 1 byte, embeddings, lm_head and norms at 2: 67.7 GiB, not 65.71', async () => {
  const real = LINEAR * 1 + (2 * EMB + NORMS) * 2;
  assert.equal((real / GiB).toFixed(1), '67.7');
  const m = findModel('llama-3.1-70b')!;
  assert.equal(weightsBytes(m, 'fp8', ['embeddings', 'lm_head', 'norms']), real);
  // The uniform count everything-at-fp8 (what the setup gives with unquantized: none).
  assert.equal((weightsBytes(m, 'fp8') / GiB).toFixed(2), '65.71');
  const [s, none] = await run(
    'setup: d5\ngpu: h100-sxm\nmodel: llama-3.1-70b\nweights: fp8\n',
    'setup: d5u\ngpu: h100-sxm\nmodel: llama-3.1-70b\nweights: fp8\nunquantized: none\n',
  );
  assert.equal(s.values.weights_bytes, real);
  assert.deepEqual(s.values.unquantized, ['embeddings', 'lm_head', 'norms']);
  assert.equal(none.values.weights_bytes, weightsBytes(m, 'fp8'));
  assert.match(text(s), /kept at 16 bits\s+embeddings, lm_head, norms/);
});

test('fp8 70B on one H100: the pool within 5% of vLLM’s formula with bf16 embeddings', async () => {
  const [, p] = await run('setup: d5\ngpu: h100-sxm\nmodel: llama-3.1-70b\nweights: fp8\n', 'predict: kv-pool\n');
  assert.equal(p.ok, true, JSON.stringify(p.error));
  const W = LINEAR + (2 * EMB + NORMS) * 2;
  // vLLM V1: 0.9 × 80 GiB − weights − activations and non-torch, in blocks of 16 × 80 layers × 8 × 128 × 2 × 2 B.
  const vllm = Math.floor((0.9 * 80 * GiB - W - OVERHEAD) / (16 * L * 8 * 128 * 2 * 2)) * 16;
  const got = p.values.pool_tokens as number;
  assert.ok(Math.abs(got / vllm - 1) < 0.05, `${got} vs ${vllm}`);
  // The uniform count over-predicts that pool by about half.
  const [, u] = await run(
    'setup: u\ngpu: h100-sxm\nmodel: llama-3.1-70b\nweights: fp8\nunquantized: none\n',
    'predict: kv-pool\n',
  );
  assert.ok((u.values.pool_tokens as number) / vllm > 1.3);
});

test('Day 5 on an A100: fp8 weights read fewer bytes, the prefill stays at the bf16 peak, and the cell says why', async () => {
  const a100 = 'setup: a\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n';
  const [, bf, f8] = await run(
    a100,
    'predict: floors\nprompt: 1000\n',
    'predict: floors\nprompt: 1000\nweights: fp8\nkv_cache: fp8\n',
  );
  // Qwen3-8B: 151,936 × 4,096 embedding and lm_head (untied), 36 × 2 × 4,096 + 4,096 + 36 × 2 × 128 norms.
  const m = findModel('qwen3-8b')!;
  const wide = 2 * 151936 * 4096 + (36 * 2 * 4096 + 4096 + 36 * 2 * 128);
  const fp8Bytes = (m.params.total - wide) * 1 + wide * 2;
  assert.equal(f8.values.weights_bytes, fp8Bytes);
  const ratio = (f8.values.decode_step_floor_ms as number) / (bf.values.decode_step_floor_ms as number);
  assert.ok(Math.abs(ratio - fp8Bytes / (2 * m.params.total)) < 1e-9, `${ratio}`);
  assert.ok(ratio > 0.5, 'the bf16 embeddings keep the fp8 floor above half');
  // No fp8 tensor cores on an A100: the prefill floor is the bf16 one, and the cell says so.
  assert.equal(f8.values.prefill_floor_ms, bf.values.prefill_floor_ms);
  assert.match(text(f8), /no native fp8 peak/);
  // On an H100 the fp8 peak halves the prefill floor.
  const [, h] = await run(
    'setup: h\ngpu: h100-sxm\nmodel: qwen3-8b\n',
    'predict: floors\nprompt: 1000\nweights: fp8\nkv_cache: fp8\n',
  );
  const [, hb] = await run('setup: h\ngpu: h100-sxm\nmodel: qwen3-8b\n', 'predict: floors\nprompt: 1000\n');
  // 989 / 1,979 TFLOP/s (the data sheet rounds the fp8 peak).
  assert.ok(
    Math.abs((h.values.prefill_floor_ms as number) / (hb.values.prefill_floor_ms as number) - 989 / 1979) < 1e-9,
  );
});

test('the simulator at fp8: a batch-1 step reads the fp8 bytes, and the fp8 KV pool holds twice the tokens', async () => {
  const a100 = 'setup: a\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n';
  const cell = 'predict: serving\ninput: 1000\noutput: 64\nconcurrency: [1]\nrequests: 4\n';
  const [, bf] = await run(a100, cell);
  const [, f8] = await run(a100 + 'weights: fp8\nkv_cache: fp8\n', cell);
  const tpot = (r: CellResult) =>
    (r.values.points as { metrics: { tpot_ms: { median: number } } }[])[0].metrics.tpot_ms.median;
  const ovh = 3.27;
  const m = findModel('qwen3-8b')!;
  const wide = 2 * 151936 * 4096 + (36 * 2 * 4096 + 4096 + 36 * 2 * 128);
  const floorBf = ((2 * m.params.total) / 2039e9) * 1e3;
  const floor8 = (((m.params.total - wide) * 1 + wide * 2) / 2039e9) * 1e3;
  // TPOT = floor + KV reads of ~1k tokens + overhead; the KV term is a few percent of the step.
  assert.ok(Math.abs(tpot(bf) / (floorBf + ovh) - 1) < 0.05, `bf16 ${tpot(bf)}`);
  assert.ok(Math.abs(tpot(f8) / (floor8 + ovh) - 1) < 0.05, `fp8 ${tpot(f8)}`);
  const pool = (r: CellResult) => (r.values.assumptions as { kv_pool_tokens: number }).kv_pool_tokens;
  assert.ok(pool(f8) > 2 * pool(bf), `${pool(f8)} vs ${pool(bf)}`);
  assert.match(text(f8), /no native fp8 peak/);
});

test('kv-pool: an available_kv that implies negative activations and non-torch memory is an error', async () => {
  const [, r] = await run(
    'setup: a\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n',
    'predict: kv-pool\navailable_kv: 110 GiB\n',
  );
  const f = r.findings.find((x) => x.code === 'kv-pool-available-impossible');
  assert.ok(f, r.findings.map((x) => x.code).join(', '));
  assert.equal(f.severity, 'error');
  assert.match(f.message, /implies activations \+ non-torch memory of -/);
  const [, ok] = await run(
    'setup: a\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n',
    'predict: kv-pool\navailable_kv: 56.34 GiB\n',
  );
  assert.equal(
    ok.findings.some((x) => x.code === 'kv-pool-available-impossible'),
    false,
  );
});

test('record: available_kv above what the card could ever leave is impossible, not a GB/GiB slip', async () => {
  // 70 GiB on an 80 GiB card with 15.26 GiB of weights: above 64.74 GiB, and 70 / 56.34 is no unit ratio.
  const [, r] = await run('setup: a\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n', 'record: run\navailable_kv: 70 GiB\n');
  const codes = r.findings.map((x) => x.code);
  assert.ok(codes.includes('available-kv-impossible'), codes.join(', '));
  assert.equal(codes.includes('gb-gib-slip'), false);
  // 60.5 GB (= 56.34 GiB written in GB) stays a slip.
  const [, s] = await run('setup: a\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n', 'record: run\navailable_kv: 56.34 GB\n');
  assert.ok(s.findings.some((x) => x.code === 'gb-gib-slip'));
});

test('record: a TPOT under the decode floor names speculative decoding (and how far it may go) or a wrong model', async () => {
  const [, r] = await run('setup: a\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n', 'record: run\ntpot: 5 ms\n');
  const f = r.findings.find((x) => x.code === 'tpot-below-decode-floor');
  assert.ok(f);
  assert.match(f.cause!, /Speculative decoding/);
  assert.match(f.cause!, /floor \/ \(k \+ 1\)/);
  assert.match(f.cause!, /4\.0\d ms at k = 1/);
  assert.match(f.cause!, /wrong model/);
});
