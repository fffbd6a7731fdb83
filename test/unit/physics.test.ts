/**
 * docs/physics.md's check values for Qwen3-8B bf16 on an A100 SXM4 80GB, reproduced from the closed
 * forms; and the same formulas under other dtypes, MoE assumptions and cards.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { findGpu, findModel } from '../../src/core/catalog';
import type { Setup } from '../../src/core/engine/types';
import {
  computePeakInfo,
  decodePoint,
  decodeRoofline,
  kvBytesPerToken,
  paramsReadPerStep,
  prefillFloorSimple,
  prefillFloorStrict,
  prefillPoint,
  ridgePoint,
  weightsBytes,
} from '../../src/core/physics';
import { kvPool } from '../../src/core/physics/kvPool';

const GiB = 2 ** 30;

function setup(
  gpu = 'a100-sxm4-80gb',
  model = 'qwen3-8b',
  weights: Setup['weights'] = 'bf16',
  kvCache: Setup['kvCache'] = weights,
): Setup {
  return { name: 't', gpu: findGpu(gpu)!, model: findModel(model)!, weights, kvCache };
}

const near = (actual: number, expected: number, relTol: number, what: string) =>
  assert.ok(
    Math.abs(actual / expected - 1) <= relTol,
    `${what}: ${actual} is not within ${relTol * 100}% of ${expected}`,
  );

const S = setup();

test('KV bytes per token 147,456 B; 0.147 GB per 1k-token request; weights 16.38 GB', () => {
  assert.equal(kvBytesPerToken(S.model, 'bf16'), 147_456);
  assert.equal((kvBytesPerToken(S.model, 'bf16') * 1000) / 1e9, 0.147456);
  assert.equal((weightsBytes(S.model, 'bf16') / 1e9).toFixed(2), '16.38');
});

test('decode step floor 8.03 ms; ceiling 124.5 tok/s per user', () => {
  const r = decodeRoofline(S, 1000, [1]);
  assert.equal(r.decode_step_floor_ms.toFixed(2), '8.03');
  assert.equal(r.ceiling_tok_s.toFixed(1), '124.5');
});

test('batched decode at 1k context follows f(B) = 2,039·B / (16.38 + 0.147·B)', () => {
  const batches = [1, 16, 64, 128];
  const r = decodeRoofline(S, 1000, batches);
  const f = (B: number) => (2039 * B) / (16.38 + 0.147 * B);
  for (const row of r.rows) {
    // docs/physics.md's form rounds W and kv(c) to 16.38 and 0.147 GB; the exact bytes differ by < 0.5%.
    near(row.aggregate_tok_s, f(row.batch), 0.005, `f(${row.batch})`);
    assert.equal(row.bound, 'bandwidth');
    near(row.per_user_tok_s * row.batch, row.aggregate_tok_s, 1e-12, 'aggregate = B × per-user');
  }
  assert.deepEqual(
    r.rows.map((x) => Math.round(x.aggregate_tok_s)),
    [123, 1741, 5054, 7403],
  );
});

test('half-saturation ≈111, asymptote ≈13,870 tok/s, compute roof ≈19,000 tok/s above it: no knee', () => {
  const r = decodeRoofline(S, 1000, [1, 128]);
  assert.equal(Math.round(r.half_saturation_batch), 111);
  // Exactly BW / kv(c) = 2,039 GB/s / 147.456 MB = 13,828 tok/s. docs/physics.md's ≈13,870 divides by
  // kv rounded to 0.147 GB; the two agree within 0.5%.
  assert.equal(Math.round(r.asymptote_tok_s), 13_828);
  near(r.asymptote_tok_s, 13_870, 0.005, 'asymptote');
  assert.equal(Math.round(r.compute_roof_tok_s / 1000) * 1000, 19_000);
  assert.ok(r.compute_roof_tok_s > r.asymptote_tok_s);
  assert.equal(r.knee_batch, null);
});

test('live context (1k → 2k while decoding) uses the mean, 1.5k, and lowers the asymptote', () => {
  const fixed = decodeRoofline(S, 1000, [64]);
  const live = decodeRoofline(S, 1500, [64]);
  assert.equal(Math.round(live.asymptote_tok_s), Math.round(2039e9 / (147456 * 1500)));
  assert.ok(live.rows[0].aggregate_tok_s < fixed.rows[0].aggregate_tok_s);
});

test('prefill floor 52.5 ms (2·params·N/peak); stricter count ≈45.5 ms', () => {
  assert.equal((prefillFloorSimple(S, 1000) * 1e3).toFixed(1), '52.5');
  const strict = prefillFloorStrict(S, 1000);
  assert.equal((strict.seconds * 1e3).toFixed(1), '45.5');
  // Its parts: linear layers without the embedding gather, one lm_head row, causal attention.
  assert.equal(strict.linear_flops, 2 * 6_946_075_648 * 1000);
  assert.equal(strict.lm_head_flops, 2 * 151_936 * 4096);
  assert.equal(strict.attention_flops, 4 * 36 * 32 * 128 * ((1000 * 1001) / 2));
});

test('ridge point ≈153 FLOP/byte', () => {
  assert.equal(Math.round(ridgePoint(S)), 153);
  assert.equal(decodePoint(S, 1000, 1).bound, 'bandwidth');
  assert.equal(prefillPoint(S, 1000).bound, 'compute');
});

test('kv pool: 0.9 × 80 GiB − 15.26 GiB − ≈0.4 GiB = 56.34 GiB → 410,240 tokens', () => {
  const p = kvPool(S);
  assert.equal(p.available_kv_gib.toFixed(2), '56.34');
  assert.equal(p.pool_tokens, 410_240);
  assert.equal(p.pool_tokens % 16, 0);
  assert.equal(p.max_concurrency.toFixed(2), '10.02'); // vLLM: "Maximum concurrency for 40,960 tokens per request: 10.02x"
  near((p.activation_peak_bytes + p.non_torch_bytes) / GiB, 0.4, 0.02, 'default overhead');
  // From the number the log printed.
  assert.equal(kvPool(S, { availableKvBytes: 56.34 * GiB }).pool_tokens, 410_240);
  // Every knob moves it the way it should.
  assert.ok(kvPool(S, { gpuMemoryUtilization: 0.8 }).pool_tokens < p.pool_tokens);
  assert.ok(kvPool(S, { activationPeakBytes: 2 * GiB }).pool_tokens < p.pool_tokens);
  assert.equal(kvPool(S, { maxModelLen: 8192 }).max_concurrency, 410_240 / 8192);
});

test('the GB/GiB slip: an 80 GB card and a 3 GB activation guess lose over 10% of the pool', () => {
  const slip: Setup = { ...S, gpu: { ...S.gpu, memory: 80e9 } };
  const p = kvPool(slip, { activationPeakBytes: 3e9 });
  // The V1 formula on those inputs: 0.9 × 80e9 − 16.38e9 − 3e9 − 0.154 GiB, in whole 16-token blocks.
  assert.equal(p.pool_tokens, 355_712);
  const under = 1 - p.pool_tokens / 410_240;
  assert.ok(under > 0.105, `${under}`);
  // The card-size slip alone, with the default activations: 8.8% under.
  assert.equal(kvPool(slip).pool_tokens, 374_240);
});

test('dtypes: fp8 weights and KV halve the bytes each step reads; the peak follows the card', () => {
  const fp8 = setup('h100-sxm', 'qwen3-8b', 'fp8', 'fp8');
  const bf = setup('h100-sxm');
  assert.equal(kvBytesPerToken(fp8.model, fp8.kvCache), 73_728);
  const a = decodeRoofline(fp8, 1000, [1]);
  const b = decodeRoofline(bf, 1000, [1]);
  near(a.decode_step_floor_ms, b.decode_step_floor_ms / 2, 1e-12, 'fp8 step floor');
  assert.equal(computePeakInfo(fp8.gpu, 'fp8').peak, 1979e12);
  assert.equal(computePeakInfo(fp8.gpu, 'fp8').dtype, 'fp8');
  // No native fp8 on an A100: fp8 weights are dequantized into bf16 matmuls, and the note says so.
  const a100 = computePeakInfo(findGpu('a100-sxm4-80gb')!, 'fp8');
  assert.equal(a100.dtype, 'bf16');
  assert.equal(a100.peak, 312e12);
  assert.match(a100.note!, /no native fp8/);
  assert.equal(computePeakInfo(findGpu('a100-sxm4-80gb')!, 'int8').peak, 624e12);
  assert.equal(computePeakInfo(findGpu('h100-sxm')!, 'int4').dtype, 'bf16');
  assert.equal(weightsBytes(S.model, 'int4'), S.model.params.total / 2);
  // KV dtype alone: fp8 KV doubles the pool.
  const kv8 = kvPool({ ...S, kvCache: 'fp8' });
  assert.equal(kv8.blocks, Math.floor(kv8.available_kv_bytes / (65_536 / 2) / 36));
  assert.ok(Math.abs(kv8.pool_tokens - 2 * 410_240) <= 2 * 16, `${kv8.pool_tokens}`); // whole blocks either way
});

test('MoE: active, total or expected experts read per step', () => {
  const moe = setup('h100-sxm', 'qwen3-30b-a3b');
  const m = moe.model;
  assert.equal(paramsReadPerStep(m, 'active', 64), m.params.active);
  assert.equal(paramsReadPerStep(m, 'total', 1), m.params.total);
  // Expected distinct experts: k at batch 1, approaching E at large batch.
  assert.equal(paramsReadPerStep(m, 'expected', 1), m.params.active);
  assert.ok(paramsReadPerStep(m, 'expected', 8) > m.params.active);
  near(paramsReadPerStep(m, 'expected', 4096), m.params.total, 1e-6, 'all experts at large batch');
  const active = decodeRoofline(moe, 1000, [1, 64], { moeWeights: 'active' });
  const total = decodeRoofline(moe, 1000, [1, 64], { moeWeights: 'total' });
  const expected = decodeRoofline(moe, 1000, [1, 64], { moeWeights: 'expected' });
  assert.equal(active.moe_weights, 'active');
  assert.ok(active.rows[1].aggregate_tok_s > expected.rows[1].aggregate_tok_s);
  assert.ok(expected.rows[1].aggregate_tok_s > total.rows[1].aggregate_tok_s);
  assert.equal(expected.rows[0].step_ms, active.rows[0].step_ms);
  assert.equal(decodeRoofline(S, 1000, [1]).moe_weights, null);
  // Compute per token follows the active parameters either way.
  assert.equal(active.compute_roof_tok_s, total.compute_roof_tok_s);
});

test('long context turns decode compute-bound nowhere, but a huge batch at short context does', () => {
  const r = decodeRoofline(S, 16, [1, 4096]);
  assert.ok(r.compute_roof_tok_s < r.asymptote_tok_s);
  assert.ok(r.knee_batch !== null && r.knee_batch > 111);
  assert.equal(r.rows[1].bound, 'compute');
});
