/**
 * Compare rows over benches run with `repeats:` (on sim, a real HTTP server on 127.0.0.1): a
 * reference reads each point's mean over its runs (its `ci` fact), once per point, and the row says
 * whether measured − predicted is larger than the noise — Welch's interval when both sides are means
 * over repeats, the measured side's t interval against a fixed prediction otherwise.
 */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';
import type { CellResult } from '../../src/core/engine/types';
import type { FactOf } from '../../src/core/facts';
import { SimEndpoints } from '../../src/core/sim/endpoints';
import { difference } from '../../src/core/stats/ci';

const SETUP = 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: sim';
const bench = (name: string, input: number, concurrency: string) =>
  `bench: sweep\nname: ${name}\ninput: ${input}\noutput: 4\nconcurrency: ${concurrency}\nrequests: 6\nrepeats: 3\npercentiles: [50, 99]\npredicted: none`;

const ttftP50 = (r: CellResult, c: number) =>
  r.facts.find(
    (f): f is FactOf<'ci'> =>
      f.kind === 'ci' &&
      f.of.kind === 'latency' &&
      f.of.metric === 'ttft' &&
      f.of.stat === 'p50' &&
      f.point?.concurrency === c,
  )!;

test('compare rows over repeated benches read the means and say whether a difference is beyond the noise', async () => {
  const sims = new SimEndpoints(1);
  try {
    const nb = createNotebookContext(os.tmpdir(), { simEndpoint: (s) => sims.url(s) });
    await runCell(SETUP, 0, nb);
    // A 4,096-token prompt takes two 2,048-token prefill steps on the A100; a 128-token one a sliver of one.
    const short = await runCell(bench('short', 128, '[1, 2]'), 1, nb);
    const long = await runCell(bench('long', 4096, '[1]'), 2, nb);
    assert.ok(short.ok && long.ok, short.error?.message ?? long.error?.message);
    const a = ttftP50(short, 1);
    const b = ttftP50(long, 1);
    assert.ok(a && b && a.n === 3 && b.n === 3, 'each point has a ci fact over its three runs');
    const half = b.hi - b.mean;
    assert.ok(half > 0, 'three runs with fresh prompts do not measure the same TTFT to the nanosecond');
    const near = b.mean + half / 4;
    const far = b.mean + 3 * half;
    const r = await runCell(
      [
        'compare: prompt length',
        'rows:',
        '  - {quantity: TTFT p50 128 vs 4096, predicted: short.fact(ttft.p50 @ c=1), measured: long.fact(ttft.p50 @ c=1)}',
        `  - {quantity: near, predicted: ${near} ms, measured: long.fact(ttft.p50 @ c=1)}`,
        `  - {quantity: far, predicted: ${far} ms, measured: long.fact(ttft.p50 @ c=1)}`,
        '  - {quantity: curve, predicted: {1: 20 ms, 2: 20 ms}, measured: short.fact(ttft.p50)}',
      ].join('\n'),
      3,
      nb,
    );
    assert.ok(r.ok, r.error?.message);
    const rows = r.values.rows as any[];
    // A repeated sweep's fact is one number per point: the mean over its runs, not one per run.
    assert.deepEqual(
      rows.map((x) => x.quantity),
      ['TTFT p50 128 vs 4096', 'near', 'far', 'curve @ concurrency 1', 'curve @ concurrency 2'],
    );
    assert.ok(Math.abs(parseFloat(rows[0].measured) - b.mean) < 0.01 * b.mean, `${rows[0].measured} vs ${b.mean}`);
    // Both sides means over repeats: Welch's interval on measured − predicted, as stats/ci.ts computes it.
    const w = difference({ mean: a.mean, sd: a.sd, n: a.n }, { mean: b.mean, sd: b.sd, n: b.n })!;
    const d0 = rows[0].difference;
    assert.ok(
      Math.abs(d0.diff - w.diff) < 1e-6 * Math.abs(w.diff) && Math.abs(d0.df - w.df) < 1e-9,
      JSON.stringify(d0),
    );
    assert.ok(Math.abs(d0.hi - d0.lo - 2 * w.half) < 1e-6 * w.half + 1e-9);
    assert.equal(d0.unit, 'ms');
    assert.equal(d0.beyond, true, `a 4,096-token prefill against a 128-token one: ${rows[0].noise}`);
    assert.match(rows[0].noise, /^beyond the noise: Δ \+[\d.,]+ m?s ± [\d.,]+ m?s \(95%, Welch\)$/);
    // Against a fixed prediction: the measured mean's own interval (t over the 3 runs), in or out.
    assert.equal(rows[1].difference.beyond, false, rows[1].noise);
    assert.match(rows[1].noise, /^within the noise: Δ −.*\(95%, t over the 3 runs\)$/);
    assert.ok(Math.abs(rows[1].difference.df - 2) < 1e-9);
    assert.equal(rows[2].difference.beyond, true, rows[2].noise);
    // A literal curve against the repeated sweep's means: each point judged against its own runs' noise.
    for (const row of rows.slice(3)) assert.match(row.noise ?? '', /the noise/, JSON.stringify(row));
    const text = r.outputs
      .flatMap((o) => o.items)
      .filter((i) => i.mime === MIME.plain)
      .map((i) => String(i.data))
      .join('\n');
    assert.match(text, /against the noise/);
    assert.match(text, /beyond the noise when it excludes zero/);
  } finally {
    await sims.close();
  }
});

test('rows without repeats carry no noise column', async () => {
  const r = await runCell(
    'compare: plain\nrows:\n  - {quantity: TTFT, predicted: 50 ms, measured: 52 ms}',
    0,
    createNotebookContext(os.tmpdir()),
  );
  assert.ok(r.ok, r.error?.message);
  assert.equal((r.values.rows as any[])[0].noise, undefined);
  const text = r.outputs.flatMap((o) => o.items).map((i) => String(i.data));
  assert.ok(!text.some((t) => /against the noise/.test(t)));
});
