/**
 * The real-time simulator reports how late it ran (its own inflab:sim_* counters on /metrics), the
 * bench reads them per point, and the bench report states them, so the simulator's jitter is not
 * mistaken for the simulated server's latency. No timing is asserted: only that it is counted,
 * carried and said.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runSweep } from '../../src/core/bench';
import { simLatenessFact } from '../../src/core/bench/report';
import { startSimServer } from '../../src/core/sim/server';

test('a bench against the simulator carries and states the simulator’s own step lateness per point', async () => {
  const sim = await startSimServer({ speed: 20 });
  try {
    const text0 = sim.metricsText();
    assert.match(text0, /^inflab:sim_steps_total\{[^}]*\} 0\.0$/m);
    const r = await runSweep(
      { endpoint: sim.url, vocab: 151936, input: 32, output: 8, concurrency: [2, 4], requests: 4, runId: 'late' },
      { worker: 'off' },
    );
    assert.equal(r.points.length, 2);
    for (const p of r.points) {
      const l = p.evidence?.sim_lateness;
      assert.ok(l, 'the point has the simulator’s lateness');
      assert.ok(l.steps >= 8, `steps ${l.steps}`);
      assert.deepEqual(Object.keys(l.over_share).sort(), ['1', '10', '5', '50']);
      assert.ok(l.max_ms !== undefined && l.max_ms >= 0);
    }
    const fact = simLatenessFact(r);
    assert.ok(fact);
    assert.match(fact[0], /simulator lateness/);
    assert.match(fact[1], /c=2: \d+ steps, mean [\d.]+ ms late, [\d.]+% > 5 ms, [\d.]+% > 10 ms, max/);
    assert.match(fact[1], /c=4:/);
    // The max gauge is "since the last read": an idle server reads 0 the second time.
    sim.metricsText();
    assert.match(sim.metricsText(), /^inflab:sim_step_lateness_max_seconds\{[^}]*\} 0\.0$/m);
  } finally {
    await sim.close();
  }
});

test('a bench against a server without those counters states nothing about simulator lateness', () => {
  assert.equal(simLatenessFact({ points: [] }), undefined);
});
