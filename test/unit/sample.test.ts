/**
 * LatencySample (stats/sample.ts): exact — the same Dist as `distribution`, bit for bit — up to its
 * threshold, then an HDR histogram whose percentiles stay within the stated relative error; counts,
 * merges. And LoadRun's metricsOnly mode: the same PointMetrics summarizeRecords gives for the
 * records of the same point (closed and open loop, decode stretches and single steps).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { distribution, summarizeRecords } from '../../src/core/bench/metrics';
import { SimEngine } from '../../src/core/sim/engine';
import { LoadRun, runLoad } from '../../src/core/sim/load';
import { mulberry32 } from '../../src/core/sim/rng';
import { defaultSimSetup } from '../../src/core/sim/server';
import { LatencySample, SKETCH_RELATIVE_ERROR } from '../../src/core/stats/sample';

/** Log-normal latencies around 10 ms from a seeded generator. */
function latencies(n: number, seed = 7): number[] {
  const r = mulberry32(seed);
  return Array.from({ length: n }, () => {
    const u = Math.max(1e-12, r());
    const v = r();
    return 10 * Math.exp(0.8 * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v));
  });
}

test('below its threshold the sample gives exactly what distribution gives', () => {
  const xs = latencies(5000);
  const s = new LatencySample(10_000);
  for (const x of xs) s.add(x);
  assert.equal(s.sketched, false);
  assert.deepStrictEqual(s.dist([90, 99, 99.9]), distribution(xs, [90, 99, 99.9]));
});

test('a value with a count is that many values', () => {
  const s = new LatencySample(100);
  s.add(3, 4);
  s.add(1);
  s.add(2, 2);
  assert.deepStrictEqual(s.dist([90]), distribution([3, 3, 3, 3, 1, 2, 2], [90]));
});

test('past its threshold the sample is a histogram: percentiles within the stated error, count, mean, min, max exact', () => {
  const xs = latencies(60_000);
  const s = new LatencySample(1000);
  for (const x of xs) s.add(x);
  assert.equal(s.sketched, true);
  const d = s.dist([90, 99, 99.9]);
  const e = distribution(xs, [90, 99, 99.9]);
  assert.equal(d.n, e.n);
  assert.equal(d.min, e.min);
  assert.equal(d.max, e.max);
  assert.ok(Math.abs(d.mean - e.mean) <= 1e-9 * e.mean);
  assert.ok(Math.abs(d.std - e.std) <= 1e-9 * e.std);
  assert.deepEqual(d.approx?.relative_error, SKETCH_RELATIVE_ERROR);
  // One rank's difference (the histogram does not interpolate) is far below the bucket width here.
  for (const [got, want] of [
    [d.median, e.median],
    [d.p.p90, e.p.p90],
    [d.p.p99, e.p.p99],
    [d.p.p99_9, e.p.p99_9],
  ])
    assert.ok(Math.abs(got - want) <= 2 * SKETCH_RELATIVE_ERROR * want, `${got} vs ${want}`);
});

test('merging samples, exact or sketched, is adding their values', () => {
  const xs = latencies(4000, 1);
  const ys = latencies(3000, 2);
  const a = new LatencySample(10_000);
  const b = new LatencySample(10_000);
  xs.forEach((x) => a.add(x));
  ys.forEach((y) => b.add(y));
  a.merge(b);
  assert.deepStrictEqual(a.dist(), distribution([...xs, ...ys]));
  const c = new LatencySample(500);
  const d = new LatencySample(500);
  xs.forEach((x) => c.add(x));
  ys.forEach((y) => d.add(y));
  c.merge(d);
  const e = distribution([...xs, ...ys]);
  assert.equal(c.dist().n, e.n);
  assert.ok(Math.abs(c.dist().p.p99 - e.p.p99) <= 2 * SKETCH_RELATIVE_ERROR * e.p.p99);
});

for (const shape of [
  { concurrency: 24, requests: 120 },
  { rate: 40, requests: 120 },
]) {
  test(`metricsOnly gives the metrics summarizeRecords gives for the records (${Object.keys(shape)[0]})`, () => {
    const setup = defaultSimSetup();
    const o = { input: 300, output: 90, seed: 3, ...shape };
    const full = runLoad(new SimEngine({ setup }), o);
    const want = summarizeRecords(full.records, {
      observedInFlight: full.observedInFlight,
      durationMs: full.durationS * 1000,
    });
    const run = new LoadRun(new SimEngine({ setup }), { ...o, metricsOnly: true });
    while (!run.advance(50));
    const r = run.result();
    assert.equal(r.records.length, 0);
    assert.equal(r.steps, full.steps);
    assert.equal(r.durationS, full.durationS);
    const got = run.metrics!.result({ observedInFlight: r.observedInFlight, durationMs: r.durationS * 1000 });
    assert.deepStrictEqual(got, want);
    assert.equal(got.itl_ms.n, 120 * 89);
  });
}
