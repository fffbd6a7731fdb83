/**
 * Confidence intervals over repeats: the t quantile (jstat) against the printed Student t table,
 * a mean's 95% interval worked by hand, and Welch's interval for a difference.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { difference, meanCi, tQuantile } from '../../src/core/stats/ci';

test('the t quantile matches the Student t table (two-sided 95% and 99%)', () => {
  // t(0.975, df) and t(0.995, df) from the standard table, to its 3 decimals.
  const table: [number, number, number][] = [
    [1, 12.706, 63.657],
    [2, 4.303, 9.925],
    [4, 2.776, 4.604],
    [9, 2.262, 3.25],
    [29, 2.045, 2.756],
  ];
  for (const [df, t95, t99] of table) {
    assert.ok(Math.abs(tQuantile(0.975, df) - t95) < 5e-4, `df ${df}: ${tQuantile(0.975, df)}`);
    assert.ok(Math.abs(tQuantile(0.995, df) - t99) < 5e-4, `df ${df}: ${tQuantile(0.995, df)}`);
  }
  assert.throws(() => tQuantile(1, 3), /0 < p < 1/);
});

test('a mean over runs: t(0.975, n − 1) · s / √n either side', () => {
  const ci = meanCi([10, 12, 11, 13, 9])!;
  // mean 11, s = √2.5, half = 2.776 · √2.5 / √5 = 1.963
  assert.equal(ci.mean, 11);
  assert.ok(Math.abs(ci.sd - Math.sqrt(2.5)) < 1e-12);
  assert.ok(Math.abs(ci.half - 1.963) < 1e-3, String(ci.half));
  assert.ok(Math.abs(ci.lo - (11 - ci.half)) < 1e-12 && Math.abs(ci.hi - (11 + ci.half)) < 1e-12);
  assert.equal(meanCi([5]), undefined, 'one run has no interval');
});

test('a difference is beyond the noise only when its interval excludes zero', () => {
  const a = { mean: 100, sd: 2, n: 3 };
  // Welch: se = √(4/3 + 4/3), df = 4: half = 2.776 · 1.633 = 4.53.
  const near = difference(a, { mean: 103, sd: 2, n: 3 })!;
  assert.ok(Math.abs(near.df - 4) < 1e-9);
  assert.ok(Math.abs(near.half - 4.533) < 1e-2, String(near.half));
  assert.equal(near.beyondNoise, false);
  assert.equal(difference(a, { mean: 110, sd: 2, n: 3 })!.beyondNoise, true);
  // Against a single number, the side with runs carries all the noise (a one-sample interval).
  const one = difference({ mean: 104, sd: 0, n: 1 }, a)!;
  assert.ok(Math.abs(one.df - 2) < 1e-9);
  assert.equal(one.beyondNoise, false);
  assert.equal(difference({ mean: 1, sd: 0, n: 1 }, { mean: 2, sd: 0, n: 1 }), undefined);
});
