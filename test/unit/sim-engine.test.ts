/**
 * The simulated vLLM engine in virtual time: its physics against docs/physics.md, and the serving
 * behaviours the real lab saw (overhead, prefill interference, the prefix-cache trap, Little's law,
 * preemption). No timed assertions: the speed of a full sweep is reported as a diagnostic.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { summarizeRecords } from '../../src/core/bench/metrics';
import { findGpu, findModel } from '../../src/core/catalog';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import type { Setup } from '../../src/core/engine/types';
import { decodeRoofline, prefillFloorSimple } from '../../src/core/physics';
import { ENGINE_DEFAULTS, SimEngine } from '../../src/core/sim/engine';
import { promptGenerator, runLoad } from '../../src/core/sim/load';

const setup: Setup = {
  name: 'day4',
  gpu: findGpu('a100-sxm4-80gb')!,
  model: findModel('qwen3-8b')!,
  weights: 'bf16',
  kvCache: 'bf16',
  endpoint: 'sim',
};
const rel = (a: number, b: number) => Math.abs(a / b - 1);

test('batch-1 decode step = decode floor (+ one request KV) + step overhead ≈ 11.3 ms', () => {
  const e = new SimEngine({ setup });
  const floorS = e.cfg.weightsBytes / e.cfg.bandwidth;
  assert.ok(Math.abs(floorS * 1e3 - 8.03) < 0.005, `floor ${floorS * 1e3} ms`);
  assert.equal(e.cfg.stepOverheadS, 0.00327);
  e.add({ prompt: promptGenerator(1, e.cfg.vocab)(16), maxTokens: 4, ignoreEos: true });
  const prefill = e.step()!;
  assert.equal(prefill.prefillTokens, 16);
  assert.equal(prefill.tokens.length, 1, 'the step that completes the prompt samples the first token');
  const decode = e.step()!;
  assert.equal(decode.decodeTokens, 1);
  assert.equal(decode.prefillTokens, 0);
  const expected = (e.cfg.weightsBytes + e.cfg.kvBytesPerToken * 17) / e.cfg.bandwidth + e.cfg.stepOverheadS;
  assert.ok(rel(decode.duration, expected) < 1e-12);
  assert.ok(Math.abs(decode.duration * 1e3 - 11.3) < 0.02, `step ${decode.duration * 1e3} ms`);
  // The overhead is calibratable: with none, the step is the floor.
  const bare = new SimEngine({ setup, stepOverheadS: 0 });
  bare.add({ prompt: [1], maxTokens: 2, ignoreEos: true });
  bare.step();
  assert.ok(rel(bare.step()!.duration, floorS) < 1e-4);
});

test('the KV pool comes from the kv-pool prediction: 410,240 tokens in 16-token blocks', () => {
  const e = new SimEngine({ setup });
  assert.equal(e.cfg.numGpuBlocks * 16, 410_240);
  assert.equal(e.kvUsage, 0);
});

test('chunked prefill: a prompt over max_num_batched_tokens takes several steps, each within the budget', () => {
  const e = new SimEngine({ setup, maxNumBatchedTokens: 8192 });
  e.add({ prompt: promptGenerator(2, e.cfg.vocab)(20_000), maxTokens: 2, ignoreEos: true });
  const steps = [e.step()!, e.step()!, e.step()!];
  assert.deepEqual(
    steps.map((s) => s.prefillTokens),
    [8192, 8192, 3616],
  );
  assert.deepEqual(
    steps.map((s) => s.tokens.length),
    [0, 0, 1],
  );
  // Compute-bound: each full chunk costs at least its FLOPs at the stated MFU.
  const flops = 2 * setup.model.params.active * 8192;
  assert.ok(steps[0].duration > flops / (e.cfg.peak * e.cfg.prefillMfu));
});

test('closed-loop concurrency curve lies below the decode roofline, and the gap grows with concurrency', () => {
  const e = new SimEngine({ setup });
  const input = 1000;
  const output = 300;
  const rows = [1, 4, 16, 64].map((c, i) => {
    const r = runLoad(e, { input, output, requests: Math.max(16, 2 * c), concurrency: c, seed: 100 + i });
    const m = summarizeRecords(r.records, { durationMs: r.durationS * 1000 });
    const roof = decodeRoofline(setup, input + output / 2, [c]).rows[0].aggregate_tok_s;
    return { c, sim: m.output_throughput, roof, gap: roof - m.output_throughput, ratio: m.output_throughput / roof };
  });
  for (const r of rows) assert.ok(r.sim < r.roof, `c=${r.c}: ${r.sim} ≥ roofline ${r.roof}`);
  for (let i = 1; i < rows.length; i++) {
    assert.ok(rows[i].gap > rows[i - 1].gap, `absolute gap grows: ${rows.map((r) => r.gap.toFixed(0))}`);
    assert.ok(
      rows[i].ratio < rows[i - 1].ratio + 0.005,
      `fraction of the roofline does not recover: ${rows.map((r) => r.ratio.toFixed(3))}`,
    );
  }
  assert.ok(rows[0].ratio > 0.6 && rows[0].ratio < 0.8, 'batch 1 runs at about 71% of the ceiling (11.3 vs 8.03 ms)');
  assert.ok(rows[3].ratio < rows[0].ratio - 0.1, `batch 64 loses much more: ${rows.map((r) => r.ratio.toFixed(3))}`);
});

test('p99 ITL is far above the median once prefills pack into decode steps; not when they never do', () => {
  const open = runLoad(new SimEngine({ setup }), { input: 1000, output: 300, requests: 60, rate: 2, seed: 7 });
  const mo = summarizeRecords(open.records, { latencyFrom: 'scheduled' });
  assert.ok(mo.itl_ms.p.p99 > 4 * mo.itl_ms.median, `open loop: p99 ${mo.itl_ms.p.p99} vs median ${mo.itl_ms.median}`);
  const solo = runLoad(new SimEngine({ setup }), { input: 1000, output: 300, requests: 4, concurrency: 1, seed: 7 });
  const ms = summarizeRecords(solo.records);
  assert.ok(ms.itl_ms.p.p99 < 1.05 * ms.itl_ms.median, `batch 1: p99 ${ms.itl_ms.p.p99} vs median ${ms.itl_ms.median}`);
});

test('prefix-cache trap: the same prompt set run twice gets TTFT below the prefill floor with caching on, not with it off', () => {
  const floorMs = prefillFloorSimple(setup, 1000) * 1e3;
  assert.ok(Math.abs(floorMs - 52.5) < 0.1);
  for (const prefixCaching of [true, false]) {
    const e = new SimEngine({ setup, prefixCaching });
    const spec = { input: 1000, output: 50, requests: 16, concurrency: 4, seed: 42 };
    const first = runLoad(e, spec);
    const second = runLoad(e, spec);
    const t1 = summarizeRecords(first.records).ttft_ms;
    const t2 = summarizeRecords(second.records).ttft_ms;
    assert.ok(t1.min > floorMs, `first pass never beats the floor (${t1.min} ms)`);
    if (prefixCaching) {
      assert.ok(t2.median < floorMs, `second pass: median TTFT ${t2.median} ms < floor ${floorMs} ms`);
      assert.ok(second.prefixHits / second.prefixQueries > 0.95, 'hit rate = hits / queries ≈ 1 on the repeat');
      assert.equal(first.prefixHits, 0);
      assert.ok(
        second.records.every((r) => (r.cachedTokens ?? 0) >= 992),
        'cached_tokens: every full block but the last token',
      );
    } else {
      assert.ok(t2.min > floorMs, `caching off: TTFT ${t2.min} ms stays above the floor`);
      assert.equal(second.prefixQueries, 0);
    }
  }
});

test('prefix cache evicts least-recently-used blocks when the pool needs them', () => {
  const e = new SimEngine({ setup, numGpuBlocks: 200 }); // 3,200 tokens
  const spec = { input: 1000, output: 16, requests: 1, concurrency: 1 };
  runLoad(e, { ...spec, seed: 1 });
  const again = runLoad(e, { ...spec, seed: 1 });
  assert.ok(again.prefixHits >= 992, 'kept while the pool has room');
  for (let s = 2; s < 6; s++) runLoad(e, { ...spec, seed: s }); // 4 other prompts push it out
  const evicted = runLoad(e, { ...spec, seed: 1 });
  assert.equal(evicted.prefixHits, 0);
});

test("Little's law holds on the simulator's own output (engine occupancy against λ·W)", () => {
  for (const load of [{ concurrency: 8 }, { rate: 3 }]) {
    const r = runLoad(new SimEngine({ setup }), { input: 500, output: 200, requests: 80, seed: 3, ...load });
    const m = summarizeRecords(r.records, {
      latencyFrom: 'concurrency' in load ? 'sent' : 'scheduled',
      observedInFlight: r.observedInFlight,
      durationMs: r.durationS * 1000,
    });
    assert.equal(m.completed, 80);
    assert.ok(
      Math.abs(m.little.error!) < 0.02,
      `${JSON.stringify(load)}: λW ${m.little.predicted_in_flight} vs L ${r.observedInFlight}`,
    );
  }
});

test('preemptions appear when the pool is too small, and every request still finishes with its tokens', () => {
  const spec = { input: 500, output: 500, requests: 16, concurrency: 8, seed: 9 };
  const small = runLoad(new SimEngine({ setup, numGpuBlocks: 300 }), spec); // 4,800 tokens for up to 8,000 live
  assert.ok(small.preemptions > 0, 'preempted');
  assert.ok(small.records.every((r) => r.ok && r.outputTokens === 500 && r.chunkMs.length === 500));
  const big = runLoad(new SimEngine({ setup }), spec);
  assert.equal(big.preemptions, 0);
  const ms = summarizeRecords(small.records);
  const mb = summarizeRecords(big.records);
  assert.ok(ms.itl_ms.max > mb.itl_ms.max, 'a preempted request recomputes: its stream stalls');
});

test('max_num_seqs caps the batch; the rest wait', () => {
  const e = new SimEngine({ setup, maxNumSeqs: 4 });
  const gen = promptGenerator(5, e.cfg.vocab);
  for (let i = 0; i < 10; i++) e.add({ prompt: gen(32), maxTokens: 8, ignoreEos: true });
  const s = e.step()!;
  assert.equal(s.numSeqs, 4);
  assert.equal(e.numRunning, 4);
  assert.equal(e.waiting, 6);
});

test('EOS: sampled lengths without ignore_eos, min_tokens respected, max_tokens caps', () => {
  const e = new SimEngine({ setup, eosMeanTokens: 20, seed: 11 });
  const gen = promptGenerator(6, e.cfg.vocab);
  const reqs = Array.from({ length: 40 }, () => e.add({ prompt: gen(16), maxTokens: 200, minTokens: 5 }));
  for (let i = 0; i < 10_000 && e.hasWork(); i++) e.step();
  const lens = reqs.map((r) => r.output.length);
  assert.ok(lens.every((n) => n >= 5 && n <= 200));
  assert.ok(new Set(lens).size > 5, 'lengths vary');
  assert.ok(reqs.some((r) => r.finishReason === 'stop'));
  const capped = new SimEngine({ setup });
  const r = capped.add({ prompt: [1, 2, 3], maxTokens: 7, ignoreEos: true });
  while (capped.hasWork()) capped.step();
  assert.equal(r.output.length, 7);
  assert.equal(r.finishReason, 'length');
});

test('deterministic: the same seed gives the same records', () => {
  const run = () =>
    runLoad(new SimEngine({ setup }), { input: 300, output: 50, requests: 20, rate: 5, seed: 4 }).records.map((r) => [
      r.sentMs,
      r.chunkMs[0],
      r.endMs,
    ]);
  assert.deepEqual(run(), run());
});

test('predict: serving reports bench metrics per point, the roofline decomposition and its assumptions', async () => {
  const ctx = createNotebookContext(process.cwd(), {});
  assert.ok((await runCell('setup: day4\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n', 0, ctx)).ok);
  const r = await runCell(
    'predict: serving\ninput: 1000 tokens\noutput: 100 tokens\nconcurrency: [1, 8]\nrequests: 16\n',
    1,
    ctx,
  );
  assert.ok(r.ok, JSON.stringify(r.error ?? r.findings));
  const v = r.values as any;
  assert.equal(v.points.length, 2);
  for (const p of v.points) {
    for (const k of ['ttft_ms', 'tpot_ms', 'itl_ms', 'e2e_ms'])
      assert.ok(Number.isFinite(p.metrics[k].median) && Number.isFinite(p.metrics[k].p.p99), k);
    assert.ok(p.simulated_tok_s < p.roofline_with_overhead_tok_s && p.roofline_with_overhead_tok_s < p.roofline_tok_s);
    assert.ok(Math.abs(p.roofline_tok_s - p.overhead_loss_tok_s - p.prefill_loss_tok_s - p.simulated_tok_s) < 1e-6);
    assert.equal(p.preemptions, 0);
  }
  assert.equal(v.assumptions.prefill_mfu, ENGINE_DEFAULTS.prefillMfu);
  const text = r.outputs
    .flatMap((o) => o.items.filter((i) => i.mime === 'text/plain').map((i) => String(i.data)))
    .join('\n');
  for (const k of [
    'prefill_mfu',
    'step_overhead',
    'max_num_seqs',
    'max_num_batched_tokens',
    'prefix_caching',
    '(default',
  ])
    assert.ok(text.includes(k), k);
  assert.ok(
    r.outputs.some((o) => o.items.some((i) => i.mime === 'image/svg+xml')),
    'a plot',
  );

  const trap = await runCell(
    'predict: serving\ninput: 1000 tokens\noutput: 20 tokens\nconcurrency: [4, 4]\nrequests: 8\nseed: 42\n',
    2,
    ctx,
  );
  assert.ok(trap.findings.some((f) => f.code === 'fixed-seed-prefix-cache' && f.path[0] === 'seed'));
  assert.ok(trap.findings.some((f) => f.code === 'ttft-below-prefill-floor'));
  const both = await runCell('predict: serving\ninput: 100\noutput: 10\nconcurrency: 2\nrate: 1\n', 3, ctx);
  assert.ok(!both.ok || both.findings.some((f) => f.severity === 'error'));
});

test('speed: 8 concurrency points × 200 requests of 1k in / 1k out in virtual time (reported, not asserted)', (t) => {
  const e = new SimEngine({ setup });
  const t0 = performance.now();
  let steps = 0;
  for (const [i, c] of [1, 2, 4, 8, 16, 32, 64, 128].entries())
    steps += runLoad(e, { input: 1000, output: 1000, requests: 200, concurrency: c, seed: i }).steps;
  const ms = performance.now() - t0;
  t.diagnostic(
    `sim sweep 8×200×(1k in/1k out): ${ms.toFixed(0)} ms wall, ${steps} engine steps, ${(e.counters.generationTokens / 1e6).toFixed(2)} M tokens`,
  );
  assert.equal(e.counters.finished, 1600);
});
