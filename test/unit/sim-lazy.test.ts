/**
 * Lazy decoding (SimEngine.setTokenIds(false), what LoadRun asks for): steady decoders advance in
 * bulk instead of one visit per request per step. It must give exactly the results of the
 * step-by-step reference (LoadOptions.stepByStep): the same records, load figures, metrics and
 * engine counters, bit for bit, over scenarios that reach every branch (chunked prefill cut at the
 * last request, preemptions in a bulk step, recomputes with earlier output, sampled EOS,
 * max_model_len, prefix hits, data parallelism, sessions, length distributions, slices).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MetricsAccumulator } from '../../src/core/bench/metrics';
import { findGpu, findModel } from '../../src/core/catalog';
import type { Setup } from '../../src/core/engine/types';
import { createEngine, SimEngine, type Engine, type EngineOptions } from '../../src/core/sim/engine';
import { LoadRun, type LoadOptions } from '../../src/core/sim/load';
import { Mulberry32 } from '../../src/core/sim/rng';
import { RequestPlanner } from '../../src/core/workload/plan';
import { lengthSpec, sessionSpec, sharedPrefixSpec } from '../../src/core/workload/spec';

const setup: Setup = {
  name: 'lazy',
  gpu: findGpu('a100-sxm4-80gb')!,
  model: findModel('qwen3-8b')!,
  weights: 'bf16',
  kvCache: 'bf16',
  endpoint: 'sim',
};

interface Outcome {
  points: unknown[];
  counters: unknown;
  lazy?: SimEngine['lazySteps'];
}

function lazyStats(e: Engine) {
  const list = e instanceof SimEngine ? [e] : e.replicas;
  const sum = { bulk: 0, preempting: 0, irregular: 0, full: 0 };
  for (const r of list) for (const k of Object.keys(sum) as (keyof typeof sum)[]) sum[k] += r.lazySteps[k];
  return sum;
}

/** Run the points on one engine (shared, as predict: serving shares it), lazily or step by step. */
function run(
  opts: Omit<EngineOptions, 'setup'> & { setup?: Setup },
  points: (LoadOptions & { planOf?: () => RequestPlanner })[],
  stepByStep: boolean,
  slice = Infinity,
): Outcome {
  const e = createEngine({ setup, ...opts });
  const out: unknown[] = [];
  for (const { planOf, ...p } of points) {
    const load = new LoadRun(e, { ...p, plan: planOf?.(), stepByStep });
    while (!load.advance(slice));
    const r = load.result();
    const m = load.metrics?.result({ observedInFlight: r.observedInFlight, durationMs: r.durationS * 1000 });
    // Records mode: the metrics summarizeRecords would give, to compare the lazy gaps too.
    const fromRecords = new MetricsAccumulator({ latencyFrom: 'sent' });
    for (const rec of r.records) fromRecords.addRecord(rec);
    out.push({ ...r, metrics: m ?? fromRecords.result({ durationMs: r.durationS * 1000 }) });
  }
  return {
    points: out,
    counters: { ...e.counters, now: e.now, free: e.freeBlocks, hit: e.rollingHitRate, waiting: e.waiting },
    lazy: stepByStep ? undefined : lazyStats(e),
  };
}

const len = (v: unknown) => lengthSpec.parse(v);

const SCENARIOS: Record<
  string,
  () => [Omit<EngineOptions, 'setup'>, (LoadOptions & { planOf?: () => RequestPlanner })[]]
> = {
  // The perf case in small: 2k/1k at 256 on an A100 (2,048-token budget): prefill chunks cut at the
  // last request, a pool too small for the batch (preemptions, recomputes with earlier output).
  'A100 defaults, 2k/1k at 64, pool of 2,000 blocks': () => [
    { numGpuBlocks: 2000 },
    [{ input: 2048, output: 1024, requests: 160, concurrency: 64, seed: 1 }],
  ],
  'sampled EOS, open loop, prefix trap (same seed twice)': () => [
    { seed: 4, eosMeanTokens: 30, maxNumBatchedTokens: 8192 },
    [
      { input: 400, output: 200, requests: 120, rate: 20, seed: 7, ignoreEos: false },
      { input: 400, output: 200, requests: 120, rate: 20, seed: 7, ignoreEos: false },
      { input: 100, output: 50, requests: 60, rate: Infinity, seed: 8, ignoreEos: false },
    ],
  ],
  'max_model_len and max_num_seqs': () => [
    { maxModelLen: 700, maxNumSeqs: 12 },
    [{ input: 500, output: 400, requests: 60, concurrency: 20, seed: 3, ignoreEos: false }],
  ],
  'caching off, tight pool': () => [
    { prefixCaching: false, numGpuBlocks: 400 },
    [{ input: 700, output: 300, requests: 40, concurrency: 16, seed: 5 }],
  ],
  'data parallel, shared prefixes and length distributions': () => [
    { setup: { ...setup, server: { data_parallel: 2 } } as Setup, maxNumBatchedTokens: 1024 },
    [
      {
        input: 300,
        output: 200,
        requests: 150,
        concurrency: 48,
        seed: 11,
        planOf: () =>
          new RequestPlanner({
            input: len({
              dist: 'lognormal',
              mean: '300 tokens',
              std: '200 tokens',
              min: '16 tokens',
              max: '1500 tokens',
            }),
            output: len({ mean: '200 tokens', range_ratio: 0.8 }),
            seed: 11,
            vocab: setup.model.vocab,
            sharedPrefix: sharedPrefixSpec.parse({ length: '512 tokens', groups: 4 }),
          }),
      },
    ],
  ],
  'multi-turn sessions with think time': () => [
    { numGpuBlocks: 1500 },
    [
      {
        input: 200,
        output: 150,
        requests: 90,
        concurrency: 10,
        seed: 13,
        planOf: () =>
          new RequestPlanner({
            input: len('200 tokens'),
            output: len('150 tokens'),
            seed: 13,
            vocab: setup.model.vocab,
            sessions: sessionSpec.parse({ turns: 3, think_time: '0.5 s' }),
          }),
      },
    ],
  ],
};

for (const [name, make] of Object.entries(SCENARIOS)) {
  for (const metricsOnly of [false, true]) {
    test(`lazy decoding = step by step: ${name}${metricsOnly ? ' (metricsOnly)' : ' (records)'}`, () => {
      const [opts, points] = make();
      const pts = points.map((p) => ({ ...p, metricsOnly }));
      const ref = run(opts, pts, true);
      const got = run(opts, pts, false);
      assert.deepEqual(got.points, ref.points);
      assert.deepEqual(got.counters, ref.counters);
      // The bulk path ran (this is what the test is about), not only the full steps.
      assert.ok(got.lazy!.bulk > got.lazy!.full, JSON.stringify(got.lazy));
    });
  }
}

test('lazy decoding in slices of 1 and 7 steps gives the same records', () => {
  const [opts, points] = SCENARIOS['A100 defaults, 2k/1k at 64, pool of 2,000 blocks']();
  const ref = run(opts, points, true);
  for (const slice of [1, 7])
    assert.deepEqual(run(opts, points, false, slice).points, ref.points, `slices of ${slice}`);
});

test('lazy decoding: a bulk step that preempts, and recomputes with earlier output, are both reached', () => {
  // What the A100 scenario is there for: preemptions handled inside bulk steps.
  const [opts, points] = SCENARIOS['A100 defaults, 2k/1k at 64, pool of 2,000 blocks']();
  const got = run(opts, points, false);
  const p = got.points[0] as { preemptions: number };
  const l = got.lazy!;
  assert.ok(p.preemptions > 10, `preemptions: ${p.preemptions}`);
  assert.ok(l.preempting > 10 && l.irregular > 10, JSON.stringify(l));
  // Only the first step (no steady decoder yet) visits every request.
  assert.equal(l.full, 1, JSON.stringify(l));
});

test('the engine gives its token ids back when the load is done', () => {
  const e = new SimEngine({ setup });
  const load = new LoadRun(e, { input: 64, output: 8, requests: 4, concurrency: 2, seed: 1 });
  assert.equal(e.tokenIds, false);
  while (!load.advance());
  assert.equal(e.tokenIds, true);
  const r = e.add({ prompt: new Uint32Array(20).fill(5), maxTokens: 3 });
  while (e.step());
  assert.equal(r.output.length, 3);
  assert.equal(r.numOutput, 3);
});

test('Mulberry32.skip(n) lands where n calls of next() do', () => {
  for (const n of [0, 1, 7, 1000, 123_456]) {
    const a = new Mulberry32(99);
    const b = new Mulberry32(99);
    for (let i = 0; i < n; i++) a.next();
    b.skip(n);
    assert.equal(b.next(), a.next(), `n = ${n}`);
  }
});

test('generated prompts named by their place in the stream hit the cache where their ids would (the prefix trap)', () => {
  const [opts, points] = SCENARIOS['sampled EOS, open loop, prefix trap (same seed twice)']();
  const got = run(opts, points, false);
  const [first, second] = got.points as { prefixHits: number; prefixQueries: number }[];
  // The second point resends the first point's prompts: most of its prompt blocks are hits.
  assert.ok(second.prefixHits > 0.5 * second.prefixQueries, JSON.stringify(second));
  assert.ok(first.prefixHits < 0.05 * first.prefixQueries, JSON.stringify(first));
  assert.deepEqual(got.points, run(opts, points, true).points);
});
