/**
 * `bench: capacity` end to end against the simulated endpoint (a real HTTP server on 127.0.0.1):
 * the search brackets and bisects to the stated precision, every probe is shown with its SLO result,
 * Little's-law closure and /metrics prefix-hit delta, and the answer is re-probed (with the load
 * above it) with fresh prompts and met the SLOs again; run once more with `repeats:`, the rate it
 * found meets the SLO on every repeat.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { analyzeCells, createNotebookContext, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';
import type { CellResult, Services } from '../../src/core/engine/types';

const plain = (r: CellResult) =>
  r.outputs.map((o) => String(o.items.find((i) => i.mime === MIME.plain)?.data ?? '')).join('\n');

async function withSim<T>(fn: (services: Services) => Promise<T>): Promise<T> {
  const { startSimServer } = await import('../../src/core/sim/server');
  let sim: { url: string; close(): Promise<void> } | undefined;
  const services: Services = {
    async simEndpoint(setup) {
      sim ??= await startSimServer({ setup, speed: 1 });
      return sim.url;
    },
  };
  try {
    return await fn(services);
  } finally {
    await sim?.close();
  }
}

// An A100 serving 512-token prompts: the simulator's per-card vLLM scheduler prefills about 21 of
// them a second, so the search's answer lies well inside 16..256 req/s. Near-regular arrivals
// (gamma shape 16) and a median-TTFT SLO make the boundary the server's saturation (past it the
// queue grows through the probe), not the shared host's scheduling noise, which moves a p99 far
// more than a median.
const SETUP = 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: sim';
const WORKLOAD = 'input: 512\noutput: 4\nburstiness: 16\nrequests: 100\nslo: {ttft_p50: 500 ms}';
const CAPACITY = `bench: capacity\n${WORKLOAD}\nrate: {start: 16 req/s, max: 256 req/s}\nprecision: 25%\nmax_probes: 16\nbase_seed: 11`;

test('bench: capacity on sim finds the highest rate meeting the SLO, to the stated precision, re-probes it with fresh prompts, and the rate meets the SLO again on every repeat', async () => {
  await withSim(async (services) => {
    const nb = createNotebookContext('.', services);
    await runCell(SETUP, 0, nb);
    const r = await runCell(CAPACITY, 1, nb);
    assert.ok(r.ok, r.error?.message);
    const v = r.values as any;
    const c = v.capacity;
    assert.equal(c.key, 'rate');
    assert.ok(c.converged, JSON.stringify(c));
    assert.ok(c.best > 0 && c.failAt > c.best && c.failAt < 256, JSON.stringify(c));
    assert.ok((c.failAt - c.best) / c.best <= 0.25, 'bisected to the stated precision');
    // Every probe is a point with its verdict; the first ones bracket by doubling (or halving) from the start.
    const probes = v.points.map((p: any) => p.probe);
    assert.ok(probes.every((p: any) => p && typeof p.pass === 'boolean'));
    assert.equal(v.points[0].rate, 16);
    assert.equal(v.points[1].rate, probes[0].pass ? 32 : 8);
    for (const p of v.points.filter((q: any) => !q.probe.pass)) assert.ok(p.probe.why.length > 0, 'a miss says why');
    // The verdict is the SLO read off the point's own metrics.
    for (const p of v.points) assert.equal(p.probe.pass, p.ttft_ms.median <= 500 && p.failure_rate <= 0.01);
    // The answer met the SLOs every time it was measured, the last time on its re-probe.
    assert.equal(c.confirm.best, true);
    const at = v.points.map((p: any, i: number) => ({ ...p, i }));
    const last = at.filter((p: any) => p.probe.phase === 'confirm' && p.rate === c.best).pop();
    assert.ok(last && last.probe.pass, 'the answer was re-probed and met the SLOs again');
    const again = at.find((p: any) => p.probe.phase === 'confirm' && p.rate === c.failAt && p.i > last.i);
    assert.ok(again, 'the failing load above the answer was re-probed too');
    assert.equal(c.confirm.failAt, again.probe.pass);
    // Every probe had fresh prompts: the seeds differ, and the server's prefix cache had nothing to hit.
    assert.equal(new Set(v.points.map((p: any) => p.seed)).size, v.points.length);
    for (const p of v.points)
      assert.ok(p.server.prefix_hit_rate < 0.02, `probe ${p.probe.probe} hit ${p.server.prefix_hit_rate}`);
    const text = plain(r);
    assert.match(text, /re-probed with fresh prompts: [\d.]+ req\/s met the SLOs again/);
    assert.match(text, /λ·W vs L/);
    assert.match(text, /prefix hit \(Δhits \/ Δqueries\)/);
    assert.match(text, /precision [\d.]+% \(asked ≤ 25(\.0)?%\)/);
    for (const p of v.points) assert.ok(p.little.lambda_w > 0 && p.little.observed_in_flight > 0);
    const plot = r.outputs.flatMap((o) => o.items).find((i) => i.mime === MIME.vegaLite6);
    assert.match(JSON.stringify(plot?.data), /measured \/ SLO limit/);
    // The answer is a fact later cells can read.
    const fact = r.facts.find((f) => f.kind === 'request-rate' && f.metric === 'capacity') as any;
    assert.equal(fact?.req_s, c.best);

    // The found rate, run again with `repeats:` (fresh prompts each run): its SLO result holds every time.
    const rep = await runCell(`bench: rate\n${WORKLOAD}\nrate: [${c.best} req/s]\nrepeats: 2\nbase_seed: 12`, 2, nb);
    assert.ok(rep.ok, rep.error?.message);
    const rv = rep.values as any;
    assert.equal(rv.points.length, 2);
    assert.deepEqual(
      rv.points.map((p: any) => [p.rate, p.slot, p.repeat]),
      [
        [c.best, 0, 0],
        [c.best, 0, 1],
      ],
    );
    assert.notEqual(rv.points[0].seed, rv.points[1].seed, 'each repeat has its own prompts');
    for (const p of rv.points) assert.equal(p.slo_met, true, `repeat ${p.repeat + 1}: TTFT p50 ${p.ttft_ms.median} ms`);
    // Its mean over the repeats with a 95% interval, as a ci fact at the rate.
    const ci = rep.facts.find(
      (f) => f.kind === 'ci' && f.of.kind === 'latency' && f.of.metric === 'ttft' && f.of.stat === 'p50',
    ) as any;
    assert.ok(ci, JSON.stringify(rep.facts.filter((f) => f.kind === 'ci')));
    assert.equal(ci.n, 2);
    assert.deepEqual(ci.point, { loop: 'open', req_s: c.best });
    assert.ok(ci.lo <= ci.mean && ci.mean <= ci.hi && ci.mean <= 500);
  });
});

test('bench: capacity says what to write when the search or its SLO is missing', () => {
  const a = analyzeCells([SETUP, 'bench: capacity\ninput: 128\noutput: 4\nslo: {ttft_p99: 300 ms}'], '.');
  assert.ok(
    a[1].some((f) => /Say what to search/.test(f.message)),
    JSON.stringify(a[1]),
  );
  const b = analyzeCells([SETUP, 'bench: capacity\ninput: 128\noutput: 4\nrate: {start: 1 req/s}'], '.');
  assert.ok(
    b[1].some((f) => /needs an SLO/.test(f.message)),
    JSON.stringify(b[1]),
  );
});
