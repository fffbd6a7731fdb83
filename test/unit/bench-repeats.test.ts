/**
 * Repeats: the runs of a point grouped by their place in the plan give each stat's mean with its
 * Student-t interval, published as `ci` facts that validate against the fact schema; each repeat
 * of a point gets its own prompt seed, deterministic in the base seed.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ciFacts } from '../../src/core/bench/meanKeys';
import { repeatMeans } from '../../src/core/bench/repeats';
import { listSequence, stepSeed } from '../../src/core/bench/sequence';
import { factSchema } from '../../src/core/facts/schema';

const run = (slot: number, tok: number, ttftP99: number) => ({
  concurrency: 4,
  slot,
  output_throughput: tok,
  ttft_ms: { n: 10, mean: ttftP99 / 2, median: ttftP99 / 2, std: 1, p99: ttftP99 },
});

test('three runs of a point: means with the 95% interval t(0.975, 2) · s / √3, as ci facts', () => {
  const points = [run(0, 100, 50), run(0, 104, 54), run(0, 102, 52), { ...run(1, 300, 80), concurrency: 8 }];
  const means = repeatMeans(points);
  assert.equal(means.length, 1, 'a point run once has no interval');
  const m = means[0];
  assert.equal(m.n, 3);
  assert.deepEqual(m.runs, [0, 1, 2]);
  assert.equal(m.output_throughput_tok_s, 102);
  // s = 2, half = 4.303 · 2 / √3 = 4.968
  assert.ok(Math.abs(m.ci.output_throughput_tok_s.half - 4.968) < 1e-3, String(m.ci.output_throughput_tok_s.half));
  assert.equal(m.ttft_p99_ms, 52);
  const facts = ciFacts(means, 'closed', 'concurrency');
  for (const f of facts) assert.ok(factSchema.safeParse(f).success, JSON.stringify(f));
  const tok = facts.find((f) => f.kind === 'ci' && f.of.kind === 'throughput') as any;
  assert.equal(tok.unit, 'tok/s');
  assert.deepEqual(tok.point, { loop: 'closed', concurrency: 4 });
  const p99 = facts.find((f) => f.kind === 'ci' && f.of.kind === 'latency' && f.of.stat === 'p99') as any;
  assert.equal(p99.of.metric, 'ttft');
  assert.ok(p99.lo < 52 && p99.hi > 52);
});

test('each repeat of a point has its own seed, the first the point’s own, all deterministic', () => {
  const seq = listSequence([{ concurrency: 1 }, { concurrency: 2 }], 3);
  const steps = [];
  for (let s = seq.next(); s; s = seq.next()) steps.push(s);
  assert.equal(steps.length, 6);
  const seeds = steps.map((s) => stepSeed({ mode: 'per-point', base: 7 }, s));
  assert.equal(new Set(seeds).size, 6);
  assert.deepEqual(
    steps.map((s) => [s.slot, s.repeat]),
    [
      [0, 0],
      [0, 1],
      [0, 2],
      [1, 0],
      [1, 1],
      [1, 2],
    ],
  );
  const again = listSequence([{ concurrency: 1 }, { concurrency: 2 }], 3);
  const seeds2 = [];
  for (let s = again.next(); s; s = again.next()) seeds2.push(stepSeed({ mode: 'per-point', base: 7 }, s));
  assert.deepEqual(seeds2, seeds);
});
