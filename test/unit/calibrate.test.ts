/**
 * Calibration: `predict: serving` with `calibrate: CELL` fits step_overhead and prefill_mfu to a
 * cell's measured points (its facts), shows them with their uncertainty and the residual at every
 * point, and predicts other points with the fitted values carried over.
 */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import type { CellResult } from '../../src/core/engine/types';
import { factsOf } from '../../src/core/facts';
import { startSimServer } from '../../src/core/sim/server';

const SETUP = 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: sim';
/** The simulated server's true parameters, away from the model's defaults (3.27 ms, 0.6). */
const TRUE = { stepOverheadS: 0.005, prefillMfu: 0.45 };

const text = (r: CellResult) =>
  r.outputs
    .flatMap((o) => o.items)
    .filter((i) => i.mime === 'text/plain')
    .map((i) => String(i.data))
    .join('\n');

type Fit = { name: string; value: number; sigma?: number; ci95?: number };
type Point = { concurrency: number; metrics: { output_throughput: number; tpot_ms: { median: number } } };

test('calibrated on C=1 and C=16 of the simulated engine, it predicts C=64 and C=128 of the same engine within 5%, and recovers its parameters', async () => {
  const nb = createNotebookContext(os.tmpdir());
  await runCell(SETUP, 0, nb);
  // The simulator at its true parameters, run at C=1 and C=16 in virtual time: the measured points.
  const measured = await runCell(
    `predict: serving\nname: sim sweep\ninput: 512\noutput: 64\nconcurrency: [1, 16]\nrequests: 32\nprefill_mfu: ${TRUE.prefillMfu}\nstep_overhead: ${TRUE.stepOverheadS * 1e3} ms`,
    1,
    nb,
  );
  assert.ok(measured.ok, measured.error?.message);
  // The same simulator at C=64 and C=128: what the calibrated prediction must reach.
  const truth = await runCell(
    `predict: serving\nname: truth\ninput: 512\noutput: 64\nconcurrency: [64, 128]\nrequests: 256\nprefill_mfu: ${TRUE.prefillMfu}\nstep_overhead: ${TRUE.stepOverheadS * 1e3} ms`,
    2,
    nb,
  );
  const cal = await runCell(
    'predict: serving\nname: calibrated\ninput: 512\noutput: 64\nconcurrency: [64, 128]\nrequests: 256\ncalibrate: sim sweep',
    3,
    nb,
  );
  assert.ok(cal.ok, cal.error?.message);
  const c = cal.values.calibration as { fitted: Fit[]; residuals: { point: string; residual: number }[]; dof: number };
  const fit = new Map(c.fitted.map((f) => [f.name, f]));
  for (const [name, truthValue] of [
    ['step_overhead', TRUE.stepOverheadS],
    ['prefill_mfu', TRUE.prefillMfu],
  ] as const) {
    const f = fit.get(name)!;
    assert.ok(f.sigma !== undefined && f.ci95 !== undefined, `${name} has an uncertainty`);
    assert.ok(
      Math.abs(f.value - truthValue) <= f.ci95! + 1e-9 * truthValue,
      `${name} ${f.value} ± ${f.ci95} vs ${truthValue}`,
    );
  }
  // The residual at every measured point: 3 quantities × 2 points.
  assert.deepEqual(
    c.residuals.map((r) => r.point),
    ['c=1', 'c=1', 'c=1', 'c=16', 'c=16', 'c=16'],
  );
  assert.equal(c.dof, 4);
  const got = cal.values.points as Point[];
  const want = truth.values.points as Point[];
  got.forEach((p, i) => {
    const r = p.metrics.output_throughput / want[i].metrics.output_throughput;
    assert.ok(
      Math.abs(r - 1) <= 0.05,
      `C=${p.concurrency}: predicted ${p.metrics.output_throughput} against ${want[i].metrics.output_throughput}`,
    );
    const t = p.metrics.tpot_ms.median / want[i].metrics.tpot_ms.median;
    assert.ok(Math.abs(t - 1) <= 0.05, `C=${p.concurrency} TPOT ratio ${t}`);
  });
  // What carried over is said, and stated as facts a bench verdict reads (fitted, with σ, from the cell).
  assert.match(text(cal), /Calibrated on "sim sweep"/);
  assert.match(text(cal), /Carried over to this prediction: step_overhead, prefill_mfu/);
  const params = factsOf(cal.facts, 'parameter');
  assert.deepEqual(
    params.map((p) => [p.name, p.origin, p.from]),
    [
      ['step_overhead', 'fitted', 'sim sweep'],
      ['prefill_mfu', 'fitted', 'sim sweep'],
    ],
  );
  // An uncalibrated prediction of the same points with the defaults misses them: the fit is what closes the gap.
  const plain = await runCell('predict: serving\ninput: 512\noutput: 64\nconcurrency: [64, 128]\nrequests: 256', 4, nb);
  const off = (plain.values.points as Point[]).map(
    (p, i) => p.metrics.output_throughput / want[i].metrics.output_throughput,
  );
  assert.ok(
    off.some((r) => Math.abs(r - 1) > 0.05),
    `defaults already within 5%: ${off}`,
  );
});

test('a given parameter is held, not fitted; one measured point is refused with what to add', async () => {
  const nb = createNotebookContext(os.tmpdir());
  await runCell(SETUP, 0, nb);
  await runCell(
    'predict: serving\nname: two\ninput: 256\noutput: 16\nconcurrency: [1, 8]\nrequests: 8\nprefill_mfu: 0.4\nstep_overhead: 4 ms',
    1,
    nb,
  );
  const held = await runCell(
    'predict: serving\ninput: 256\noutput: 16\nconcurrency: [32]\nrequests: 32\nstep_overhead: 4 ms\ncalibrate: two',
    2,
    nb,
  );
  assert.ok(held.ok, held.error?.message);
  const c = held.values.calibration as { fitted: Fit[]; fixed: { name: string }[] };
  assert.deepEqual(
    c.fitted.map((f) => f.name),
    ['prefill_mfu'],
  );
  assert.deepEqual(
    c.fixed.map((f) => f.name),
    ['step_overhead'],
  );
  assert.ok(Math.abs(c.fitted[0].value - 0.4) < 1e-3, String(c.fitted[0].value));
  await runCell('predict: serving\nname: one\ninput: 256\noutput: 16\nconcurrency: [1]\nrequests: 4', 3, nb);
  const refused = await runCell('predict: serving\ninput: 256\noutput: 16\nconcurrency: [8]\ncalibrate: one', 4, nb);
  assert.equal(refused.ok, false);
  assert.match(refused.error!.message, /two or more measured points/);
  assert.deepEqual(refused.error!.path, ['calibrate']);
  const missing = await runCell(
    'predict: serving\ninput: 256\noutput: 16\nconcurrency: [8]\ncalibrate: nowhere',
    5,
    nb,
  );
  assert.match(missing.error!.message, /not a cell above/);
});

test('calibrate: on a bench sweep against the simulated endpoint: fitted values with σ, a residual per measured point, the bench’s setup named', async () => {
  // The simulated server runs at other parameters than the model's defaults; timing on a shared
  // machine is not asserted here (the accuracy test above runs the same engine in virtual time).
  const nb0 = createNotebookContext(os.tmpdir());
  await runCell(SETUP, 0, nb0);
  const sim = await startSimServer({ setup: nb0.setups.get('lab')!, speed: 10, engine: TRUE });
  try {
    const nb = createNotebookContext(os.tmpdir());
    await runCell(`setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: ${sim.url}`, 0, nb);
    const bench = await runCell(
      'bench: sweep\nname: sweep\ninput: 256\noutput: 16\nconcurrency: [1, 4]\nrequests: 8\npredicted: none',
      1,
      nb,
    );
    assert.ok(bench.ok, bench.error?.message);
    assert.equal(factsOf(bench.facts, 'setup')[0].name, 'lab');
    const cal = await runCell(
      'predict: serving\ninput: 256\noutput: 16\nconcurrency: [16]\nrequests: 16\ncalibrate: sweep',
      2,
      nb,
    );
    assert.ok(cal.ok, cal.error?.message);
    const c = cal.values.calibration as {
      fitted: Fit[];
      residuals: { point: string; measured: number; fitted: number }[];
    };
    assert.deepEqual(
      c.fitted.map((f) => f.name),
      ['step_overhead', 'prefill_mfu'],
    );
    for (const f of c.fitted) assert.ok(Number.isFinite(f.value) && f.sigma !== undefined, JSON.stringify(f));
    assert.deepEqual([...new Set(c.residuals.map((r) => r.point))], ['c=1', 'c=4']);
    for (const r of c.residuals) assert.ok(r.measured > 0 && r.fitted > 0);
    assert.match(text(cal), /Residuals of the fit at every measured point of "sweep"/);
  } finally {
    await sim.close();
  }
});
