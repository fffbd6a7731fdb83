/**
 * A short sweep against the simulated endpoint, which writes a vLLM-format log as it serves; the
 * audit of that log must find the sweep's points as segments and the KV pool the setup predicts.
 * One fixed seed for every point (the prefix-cache trap) must show up as contamination in the
 * later points and not in the first.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { analyzeFacts, auditFile } from '../../src/core/audit';
import { runSweepHere } from '../../src/core/bench/sweep';
import { kvPool } from '../../src/core/physics/kvPool';
import { defaultSimSetup, startSimServer } from '../../src/core/sim/server';

test("the simulated endpoint's log of a three-point sweep audits into three segments", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-audit-sim-'));
  const log = path.join(dir, 'sim-vllm.log');
  const setup = defaultSimSetup();
  // Speed 3, not more: a faster clock makes the server's own timing slip (on a busy machine) a large
  // share of each step, and the stats ticks then catch points between their waves.
  const sim = await startSimServer({ setup, speed: 3, log, statsIntervalS: 1 });
  const concurrency = [1, 4, 16];
  try {
    const r = await runSweepHere({
      endpoint: sim.url,
      vocab: setup.model.vocab,
      input: 256,
      output: 64,
      concurrency,
      // In simulated time (the sweep reports a sped-up simulator in its own time): 4 s of wall a point.
      durationMs: 12_000,
      seed: { mode: 'fixed', value: 7 },
      scrape: false,
      rttProbes: 1,
      keepRecords: false,
    });
    assert.equal(r.points.length, 3);
  } finally {
    await sim.close();
  }
  try {
    const { facts } = await auditFile(log);
    const { timeline, findings } = analyzeFacts(facts, { setup });
    const segs = timeline.segments;
    assert.equal(facts.unknown_lines, 0);
    assert.equal(facts.pool_tokens?.value, kvPool(setup).pool_tokens);
    assert.ok(
      findings.some((f) => f.code === 'audit-kv-pool-matches'),
      findings.map((f) => f.code).join(', '),
    );
    assert.equal(segs.length, 3, JSON.stringify(segs.map((s) => [s.windows, s.load, s.peak_running, s.starts_after])));
    // Each segment reaches its point's concurrency; the tick at a transition may catch the next
    // point ramping in, so a peak may read above c, never at the next point's level.
    segs.forEach((s, k) =>
      assert.ok(
        s.peak_running >= concurrency[k] && s.peak_running < 2 * concurrency[k],
        JSON.stringify(segs.map((x) => [x.windows, x.load, x.peak_running])),
      ),
    );
    const cont = findings.filter((f) => f.code === 'audit-prefix-cache-contamination');
    assert.ok(!cont.some((f) => /segment 1 /.test(f.message)), cont.map((f) => f.message).join('\n'));
    assert.ok(cont.length >= 1, "a fixed seed reuses the first point's prompts later");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
