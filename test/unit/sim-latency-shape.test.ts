/**
 * The simulator's latency shape (issue 16 item 6). With fixed lengths and ignore_eos a closed loop
 * on an 8,192-token budget stays in synchronized waves: eight refills enter one ~700 ms step
 * together, and the rest of the time every step is a plain decode (p99 ITL ≈ median). vLLM's own
 * default budget for `vllm serve` on an A100 is 2,048 tokens: refills enter one or two a step,
 * every prefill stalls the running streams for one step, and the p99 ITL is many times the median,
 * as the real lab saw. Throughput must stay where it was.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { findGpu } from '../../src/core/catalog';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import type { ServingPoint } from '../../src/core/kinds/predictServing';
import { vllmServerDefaults } from '../../src/core/sim/engine';

/**
 * `predict: serving` output tok/s for Qwen3-8B bf16 on an A100 SXM4, 1k in / 1k out, 200 requests,
 * per-point seeds, measured on main before the latency-shape change (commit c1cc3ef). Then the p99
 * ITL at C=64 was 20.52 ms against an 18.17 ms median, and at C=128 546.13 ms against 22.68 ms.
 */
const BEFORE: Record<number, number> = { 1: 87.01, 64: 2367.06, 128: 3227.3 };

async function serving(extra = ''): Promise<ServingPoint[]> {
  const ctx = createNotebookContext(process.cwd(), {});
  assert.ok((await runCell('setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n', 0, ctx)).ok);
  const r = await runCell(`predict: serving\ninput: 1000\noutput: 1000\nconcurrency: [1, 64, 128]\n${extra}`, 1, ctx);
  assert.ok(r.ok, JSON.stringify(r.error ?? r.findings));
  return (r.values as { points: ServingPoint[] }).points;
}

test("vLLM's scheduler defaults by card: an A100 gets 2,048 tokens and 256 sequences, an H100 8,192 and 1,024", () => {
  assert.deepEqual(vllmServerDefaults(findGpu('a100-sxm4-80gb')!), { maxNumSeqs: 256, maxNumBatchedTokens: 2048 });
  assert.deepEqual(vllmServerDefaults(findGpu('h100-sxm')!), { maxNumSeqs: 1024, maxNumBatchedTokens: 8192 });
  assert.deepEqual(vllmServerDefaults(findGpu('h200')!), { maxNumSeqs: 1024, maxNumBatchedTokens: 8192 });
  // Under 70 GiB: the small defaults, whatever the card.
  assert.deepEqual(vllmServerDefaults(findGpu('l40s')!), { maxNumSeqs: 256, maxNumBatchedTokens: 2048 });
});

test('at C=64 the p99 ITL is at least 4× the median, C=128 no longer stalls on whole-budget steps, and throughput stays within 3%', async () => {
  const points = await serving();
  for (const p of points) {
    const before = BEFORE[p.concurrency!];
    const now = p.metrics.output_throughput;
    assert.ok(
      Math.abs(now / before - 1) <= 0.03,
      `C=${p.concurrency}: ${now.toFixed(2)} tok/s against ${before} before`,
    );
  }
  const c64 = points.find((p) => p.concurrency === 64)!.metrics.itl_ms;
  assert.ok(c64.p.p99 >= 4 * c64.median, `C=64 ITL p99 ${c64.p.p99} ms against median ${c64.median} ms`);
  // A step holds at most 2,048 prefill tokens now: its stall is under half the 546 ms of eight whole prompts.
  const c128 = points.find((p) => p.concurrency === 128)!.metrics.itl_ms;
  assert.ok(c128.p.p99 < 546.13 / 2, `C=128 ITL p99 ${c128.p.p99} ms`);
  assert.ok(c128.p.p99 >= 4 * c128.median, `C=128 ITL p99 ${c128.p.p99} ms against median ${c128.median} ms`);
});

test('the mechanism is the token budget: 8,192 tokens on the same card brings the synchronized waves back', async () => {
  const c64 = (await serving('max_num_batched_tokens: 8192\n')).find((p) => p.concurrency === 64)!.metrics.itl_ms;
  assert.ok(c64.p.p99 < 1.5 * c64.median, `C=64 ITL p99 ${c64.p.p99} ms against median ${c64.median} ms`);
});

test('the shape is deterministic in the seed: the same cell twice gives the same latencies', async () => {
  const a = await serving('requests: 100\n');
  const b = await serving('requests: 100\n');
  assert.deepEqual(
    a.map((p) => p.metrics.itl_ms),
    b.map((p) => p.metrics.itl_ms),
  );
});
