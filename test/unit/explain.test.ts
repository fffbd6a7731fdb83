/**
 * Measured beside predicted, automatically: a bench's points against the serving prediction in
 * force, with the causes of each gap named from the run's facts (src/core/explain).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { MIME } from '../../src/core/engine/outputs';
import type { Fact, Point } from '../../src/core/facts';
import { parseNotebook } from '../../src/core/notebook/format';
import { runNotebook } from '../../src/core/notebook/runNotebook';
import { SimEndpoints } from '../../src/core/sim/endpoints';
import { verdictRows, type Prediction } from '../../src/core/explain/verdict';

const root = path.resolve(import.meta.dirname, '../..');
const fixture = path.join(root, 'test/fixtures/notebooks/day4-explained.inflab');

type Row = {
  point: string;
  quantity: string;
  predicted: number;
  measured: number;
  ratio: number;
  ok: boolean;
  causes: string[];
};

test('a Day-4-shaped notebook on sim: every bench point beside its prediction, with causes, and no compare cell', async () => {
  const nb = parseNotebook(fs.readFileSync(fixture, 'utf8'));
  assert.ok(!nb.cells.some((c) => c.source.startsWith('compare:')), 'no hand-written compare');
  const sims = new SimEndpoints(2);
  try {
    const run = await runNotebook(nb, path.dirname(fixture), { simEndpoint: (s) => sims.url(s) });
    const byName = new Map(run.results.map((r) => [r.result.name, r.result]));
    for (const r of run.results) assert.ok(r.result.ok, `${r.result.kind}: ${r.result.error?.message}`);

    // The sweep has the ink's shape: judged against it, every point, every quantity, a number each side.
    const sweep = byName.get('sweep')!;
    const v = sweep.values.verdict as { against: { origin: string; cell?: string }; rows: Row[] };
    assert.equal(v.against.origin, 'above');
    assert.equal(v.against.cell, 'ink');
    assert.deepEqual([...new Set(v.rows.map((r) => r.point))], ['c=1', 'c=4', 'c=16']);
    assert.deepEqual(
      [...new Set(v.rows.map((r) => r.quantity))],
      ['output tok/s', 'TTFT median', 'TPOT median', 'ITL p99'],
    );
    const ink = byName.get('ink')!.values.points as { concurrency: number; metrics: { output_throughput: number } }[];
    for (const r of v.rows) {
      assert.ok(r.predicted > 0 && r.measured > 0, JSON.stringify(r));
      assert.ok(Math.abs(r.ratio - r.measured / r.predicted) < 1e-9);
      // A gap outside the tolerance carries its causes, or is said to be unexplained.
      if (r.ok === false) assert.ok(Array.isArray(r.causes));
    }
    // The predicted side is the ink's own number at that point.
    const tput = v.rows.filter((r) => r.quantity === 'output tok/s').map((r) => r.predicted);
    assert.deepEqual(
      tput,
      ink.map((p) => p.metrics.output_throughput),
    );
    // The table is in the cell's outputs, beside the summary.
    const text = sweep.outputs
      .flatMap((o) => o.items)
      .filter((i) => i.mime === MIME.plain)
      .map((i) => String(i.data))
      .join('\n');
    assert.match(text, /Measured against predicted — predict: serving "ink"/);

    // The trap: no prediction of its shape above, so it ran its own; its second point was served
    // from the prefix cache, and the verdict says so on the TTFT row.
    const trap = byName.get('trap')!.values.verdict as { against: { origin: string }; rows: Row[] };
    assert.equal(trap.against.origin, 'own');
    const ttft2 = trap.rows.find((r) => r.point === 'c=2' && r.quantity === 'TTFT median')!;
    assert.equal(ttft2.ok, false);
    assert.ok(ttft2.ratio < 0.9, `TTFT ratio ${ttft2.ratio}`);
    assert.ok(ttft2.causes.includes('prefix-cache-hits'), JSON.stringify(ttft2));
    // The first point's prompts were new to the server: no cache hit is named there.
    const ttft1 = trap.rows.find((r) => r.point === 'c=1' && r.quantity === 'TTFT median')!;
    assert.ok(!ttft1.causes.includes('prefix-cache-hits'));
  } finally {
    await sims.close();
  }
});

// ---- each cause from its evidence (facts as a bench and a serving prediction state them) ----

const at = (c: number): { point: Point; at: (string | number)[] } => ({
  point: { loop: 'closed', concurrency: c },
  at: ['concurrency', 0],
});
const lat = (metric: 'ttft' | 'tpot' | 'itl', stat: string, ms: number, c = 8): Fact => ({
  kind: 'latency',
  metric,
  stat,
  ms,
  ...at(c),
});
const tput = (tok_s: number, c = 8): Fact => ({ kind: 'throughput', metric: 'output', tok_s, ...at(c) });

/** A point: throughput, TTFT/TPOT medians, ITL median and p99. */
function point(o: { tok: number; ttft: number; tpot: number; itl50?: number; itl99?: number }, c = 8): Fact[] {
  return [
    tput(o.tok, c),
    lat('ttft', 'p50', o.ttft, c),
    lat('tpot', 'p50', o.tpot, c),
    lat('itl', 'p50', o.itl50 ?? o.tpot, c),
    lat('itl', 'p99', o.itl99 ?? o.tpot * 1.2, c),
  ];
}

const predicted = (facts: Fact[]): Prediction => ({
  facts: [
    ...facts,
    { kind: 'parameter', name: 'step_overhead', value: 0.00327, unit: 's', origin: 'default' },
    { kind: 'parameter', name: 'prefill_mfu', value: 0.6, origin: 'default' },
  ],
  label: 'test',
  origin: 'above',
});

const causesOf = (rows: ReturnType<typeof verdictRows>, quantity: string, point = 'c=8') =>
  rows.find((r) => r.quantity === quantity && r.point === point)?.causes.map((c) => c.code) ?? [];

test('prefix-cache hits explain a TTFT below the prediction; without them the gap is prefill speed', () => {
  const pred = predicted([...point({ tok: 1000, ttft: 200, tpot: 12 }), { kind: 'prefix-hits', rate: 0, ...at(8) }]);
  const hit = verdictRows(
    [
      ...point({ tok: 1050, ttft: 40, tpot: 12 }),
      { kind: 'prefix-hits', rate: 0.93, source: 'server /metrics', ...at(8) },
    ],
    pred,
  );
  assert.deepEqual(causesOf(hit, 'TTFT median'), ['prefix-cache-hits']);
  const clean = verdictRows(
    [...point({ tok: 1000, ttft: 140, tpot: 12 }), { kind: 'prefix-hits', rate: 0.01, ...at(8) }],
    pred,
  );
  assert.deepEqual(causesOf(clean, 'TTFT median'), ['prefill-speed']);
  // Within the tolerance: no cause is named at all.
  assert.deepEqual(causesOf(clean, 'TPOT median'), []);
  assert.equal(clean.find((r) => r.quantity === 'TPOT median')!.ok, true);
});

test('preemptions, client lag and the simulator’s lateness explain slower points; queueing a later first token', () => {
  const pred = predicted([
    ...point({ tok: 1000, ttft: 200, tpot: 12 }),
    { kind: 'engine', metric: 'preemptions', value: 0, ...at(8) },
  ]);
  const rows = verdictRows(
    [
      ...point({ tok: 700, ttft: 320, tpot: 17, itl99: 20 }),
      { kind: 'engine', metric: 'preemptions', value: 14, ...at(8) },
      { kind: 'engine', metric: 'waiting_peak', value: 6, ...at(8) },
      { kind: 'client-lag', metric: 'event-loop', stat: 'p99', ms: 45, ...at(8) },
      { kind: 'client-lag', metric: 'dispatch', stat: 'p99', ms: 30, ...at(8) },
      { kind: 'engine', metric: 'sim_late_share', value: 0.2, ...at(8) },
    ],
    pred,
  );
  const tok = causesOf(rows, 'output tok/s');
  for (const c of ['preemptions', 'client-bound', 'simulator-late', 'step-overhead'])
    assert.ok(tok.includes(c), `${c} in ${tok}`);
  const ttft = causesOf(rows, 'TTFT median');
  assert.ok(ttft.includes('queueing'), ttft.join());
  // A queue explains the first token, not the tokens after it.
  assert.ok(!causesOf(rows, 'TPOT median').includes('queueing'));
});

test('token drift and output shortfall are read from the server’s usage', () => {
  const pred = predicted(point({ tok: 1000, ttft: 100, tpot: 12 }));
  const rows = verdictRows(
    [
      ...point({ tok: 800, ttft: 130, tpot: 12 }),
      {
        kind: 'usage',
        with_usage: 64,
        prompt_tokens_requested: 1000,
        prompt_tokens_mean: 1180,
        output_tokens_requested: 256,
        output_tokens_mean: 190,
        output_mismatched: 40,
        fewer_tokens_than_chunks: 0,
        bad_usage: 0,
        source: 'server usage',
        ...at(8),
      },
    ],
    pred,
  );
  assert.ok(causesOf(rows, 'TTFT median').includes('token-drift'));
  const tok = causesOf(rows, 'output tok/s');
  assert.ok(tok.includes('output-shortfall') && tok.includes('token-drift'), tok.join());
  const words = rows
    .find((r) => r.quantity === 'output tok/s')!
    .causes.find((c) => c.code === 'output-shortfall')!.words;
  assert.match(words, /190(\.0)? of 256 tokens/);
  assert.match(words, /40 of 64 requests short/);
});

test('a TPOT gap of the same ms at every point is named step overhead; an ITL tail past the prediction is prefill interference', () => {
  const pred = predicted([
    ...point({ tok: 80, ttft: 90, tpot: 11.3 }, 1),
    ...point({ tok: 1000, ttft: 300, tpot: 14 }, 16),
  ]);
  const rows = verdictRows(
    [
      ...point({ tok: 68, ttft: 92, tpot: 13.4 }, 1),
      ...point({ tok: 870, ttft: 305, tpot: 16.1, itl50: 15, itl99: 90 }, 16),
    ],
    pred,
  );
  const at1 = rows.find((r) => r.point === 'c=1' && r.quantity === 'TPOT median')!;
  assert.deepEqual(
    at1.causes.map((c) => c.code),
    ['step-overhead'],
  );
  assert.match(at1.causes[0].words, /the same at every point/);
  assert.match(at1.causes[0].words, /model: 3\.27 ms per step/);
  assert.ok(causesOf(rows, 'ITL p99', 'c=16').includes('prefill-interference'));
  // Nothing in this run explains the ITL tail at c=1 being fine: no cause is named for a row within.
  assert.deepEqual(causesOf(rows, 'ITL p99', 'c=1'), []);
});

test('a gap no evidence explains is said to be unexplained, and a throughput between predicted points is read off the curve', () => {
  const pred = predicted([
    {
      kind: 'curve',
      x: 'concurrency',
      y: 'output_throughput',
      unit: 'tok/s',
      points: [
        { x: 4, y: 400 },
        { x: 16, y: 1000 },
      ],
      label: 'predict: serving',
      source: 'predict: serving',
    },
  ]);
  const rows = verdictRows(point({ tok: 500, ttft: 100, tpot: 12 }), pred);
  const r = rows.find((x) => x.quantity === 'output tok/s')!;
  assert.equal(r.interpolated, true);
  // log-linear between (4, 400) and (16, 1000) at 8: halfway, 700.
  assert.ok(Math.abs(r.predicted! - 700) < 1e-9);
  assert.equal(r.ok, false);
  assert.deepEqual(r.causes, []);
  // Latencies were not predicted at c=8: those rows have no ratio.
  assert.equal(rows.find((x) => x.quantity === 'TTFT median')!.ratio, undefined);
});
