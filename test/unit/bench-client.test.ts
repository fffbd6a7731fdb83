/**
 * The bench client against a scripted server on 127.0.0.1 with known TTFT and ITL that records
 * when it really wrote each chunk: measured TTFT/ITL against the server's own record, Little's law,
 * the request knobs, per-point seeds, open loop, cancel, and the worker thread (from source and
 * bundled).
 *
 * Stated tolerance (measured on a 2-core machine running other test files at the same time):
 * the client's arrival time of a chunk trails the server's write by a median well under 1 ms and a
 * p99 of a few ms; asserted: median TTFT error ≤ 5 ms (or, on a busy machine, ≤ the client's own
 * reported event-loop lag p99, its stated error bar), median ITL within 10% of the server's.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import * as esbuild from 'esbuild';
import { resolveWorkerScript, runSweep } from '../../src/core/bench';
import { createAgent, now, sendRequest, type ClientConfig } from '../../src/core/bench/client';
import { percentile } from '../../src/core/bench/metrics';
import { fromColumnar } from '../../src/core/bench/records';
import type { PointResult, SweepOptions } from '../../src/core/bench/sweep';
import { startScriptedServer, type ScriptedServer } from '../support/scriptedServer';

const base = (s: ScriptedServer, o: Partial<SweepOptions> = {}): SweepOptions => ({
  endpoint: s.url,
  vocab: 151936,
  input: 64,
  output: 16,
  concurrency: [1],
  requests: 8,
  ...o,
});

/** Client-vs-server timing errors, matched per request by X-Request-Id. */
function errors(s: ScriptedServer, p: PointResult, runId: string) {
  const recs = fromColumnar(p.records!);
  const ttftErr: number[] = [];
  const itlClient: number[] = [];
  const itlServer: number[] = [];
  for (const r of recs) {
    const srv = s.requests.find((q) => q.requestId === `inflab-${runId}-p${p.index}-r${r.id}`);
    assert.ok(srv, `server saw request ${r.id}`);
    assert.equal(srv!.chunkEpochMs.length, r.chunkMs.length);
    // True TTFT as the client should see it: server's first write − client's send.
    const sentEpoch = p.t0EpochMs + r.sentMs;
    const trueTtft = srv!.chunkEpochMs[0] - sentEpoch;
    ttftErr.push(r.chunkMs[0] - r.sentMs - trueTtft);
    for (let i = 1; i < r.chunkMs.length; i++) {
      itlClient.push(r.chunkMs[i] - r.chunkMs[i - 1]);
      itlServer.push(srv!.chunkEpochMs[i] - srv!.chunkEpochMs[i - 1]);
    }
  }
  return { ttftErr, itlClient, itlServer };
}

test('measured TTFT and ITL match the server’s own record; Little’s law closes (worker thread)', async (t) => {
  const s = await startScriptedServer({ ttftMs: 50, itlMs: 10 });
  try {
    const r = await runSweep(base(s, { output: 16, concurrency: [1, 8], requests: 16, runId: 'acc' }));
    assert.equal(r.thread, 'worker');
    assert.equal(r.points.length, 2);
    for (const p of r.points) {
      assert.equal(p.metrics.completed, 16);
      const e = errors(s, p, 'acc');
      const med = percentile(e.ttftErr, 50);
      const p99 = percentile(e.ttftErr, 99);
      const itlC = percentile(e.itlClient, 50);
      const itlS = percentile(e.itlServer, 50);
      t.diagnostic(
        `c=${p.concurrency}: TTFT error median ${med.toFixed(3)} ms p99 ${p99.toFixed(3)} ms; ITL median client ${itlC.toFixed(3)} vs server ${itlS.toFixed(3)} ms; Little ${p.metrics.little.predicted_in_flight.toFixed(3)} vs ${p.observedInFlight.toFixed(3)}; loop lag p99 ${p.loopLag.p99_ms.toFixed(2)} ms`,
      );
      // The client reports its own event-loop lag as the error bar of its latencies; on a busy
      // machine that bar can exceed 5 ms, and the claim under test is that the error stays inside it.
      const bound = Math.max(5, p.loopLag.p99_ms);
      assert.ok(med >= -0.5 && med <= bound, `median TTFT error ${med} ms (bound ${bound} ms)`);
      assert.ok(Math.abs(itlC - itlS) / itlS <= 0.1, `ITL median ${itlC} vs ${itlS}`);
      // Nominal timings, loosely (the server's timers slip too).
      assert.ok(
        p.metrics.ttft_ms.median >= 49 && p.metrics.ttft_ms.median < 80,
        `TTFT median ${p.metrics.ttft_ms.median}`,
      );
      assert.ok(
        Math.abs(p.metrics.little.error!) < 0.05,
        `Little's law: λW ${p.metrics.little.predicted_in_flight} vs L ${p.observedInFlight}`,
      );
      assert.ok(Math.abs(p.observedInFlight - p.concurrency!) / p.concurrency! < 0.1);
    }
    // TPOT of a request with n chunks at 10 ms: (E2E − TTFT)/(n − 1) ≈ 10 ms.
    assert.ok(Math.abs(r.points[0].metrics.tpot_ms.median - 10) < 1);
    assert.ok(r.rtt && r.rtt.median_ms > 0 && r.rtt.n >= 1);
  } finally {
    await s.close();
  }
});

test('requests carry the benchmark knobs: exact prompt ids, ignore_eos, min = max tokens, top_p/top_k, usage, no seed', async () => {
  const s = await startScriptedServer({ ttftMs: 5, itlMs: 1 });
  try {
    await runSweep(base(s, { input: 100, output: 7, requests: 3, worker: undefined } as any), { worker: 'off' });
    for (const q of s.requests) {
      const b = q.body;
      assert.equal(b.prompt.length, 100);
      assert.ok(b.prompt.every((x: number) => Number.isInteger(x) && x >= 0 && x < 151936));
      assert.equal(b.ignore_eos, true);
      assert.equal(b.max_tokens, 7);
      assert.equal(b.min_tokens, 7);
      assert.equal(b.stream, true);
      assert.deepEqual(b.stream_options, { include_usage: true });
      assert.ok(b.top_p > 0 && b.top_p < 1 && b.top_k > 0);
      assert.ok(!('seed' in b));
      assert.equal(b.model, 'scripted-model');
      assert.match(q.requestId!, /^inflab-.+-p0-r\d$/);
    }
  } finally {
    await s.close();
  }
});

test('per-point seeds give disjoint prompt sets; a fixed seed repeats them', async () => {
  const s = await startScriptedServer({ ttftMs: 2, itlMs: 1 });
  try {
    const blocks = (point: number, runId: string) => {
      const set = new Set<string>();
      for (const q of s.requests.filter((x) => x.requestId?.startsWith(`inflab-${runId}-p${point}-`))) {
        const ids = q.prompt as number[];
        for (let i = 0; i + 16 <= ids.length; i += 16) set.add(ids.slice(0, i + 16).join(','));
      }
      return set;
    };
    await runSweep(
      base(s, { concurrency: [1, 2, 4], requests: 6, output: 2, runId: 'pp', seed: { mode: 'per-point', base: 1 } }),
      { worker: 'off' },
    );
    const sets = [0, 1, 2].map((i) => blocks(i, 'pp'));
    assert.equal(sets[0].size, 6 * 4);
    for (let i = 0; i < 3; i++)
      for (let j = i + 1; j < 3; j++)
        assert.equal([...sets[i]].filter((b) => sets[j].has(b)).length, 0, `points ${i} and ${j} share a prompt block`);
    await runSweep(
      base(s, { concurrency: [1, 2], requests: 6, output: 2, runId: 'fx', seed: { mode: 'fixed', value: 9 } }),
      { worker: 'off' },
    );
    assert.deepEqual([...blocks(0, 'fx')].sort(), [...blocks(1, 'fx')].sort());
  } finally {
    await s.close();
  }
});

test('open loop: latencies from the scheduled time, dispatch lag reported, rate close to the asked one', async () => {
  const s = await startScriptedServer({ ttftMs: 20, itlMs: 2 });
  try {
    const r = await runSweep(
      base(s, { concurrency: undefined, rate: [40], requests: 40, output: 4, seed: { mode: 'per-point', base: 3 } }),
      { worker: 'off' },
    );
    const p = r.points[0];
    assert.equal(p.loop, 'open');
    assert.equal(p.metrics.completed, 40);
    assert.ok(p.dispatchLagMs && p.dispatchLagMs.n === 40);
    const recs = fromColumnar(p.records!);
    const early = recs.filter((x) => x.sentMs < x.scheduledMs - 0.01);
    assert.equal(early.length, 0, `sent before schedule: ${JSON.stringify(early.slice(0, 2))}`);
    // TTFT counted from the schedule is never below the one counted from the send.
    assert.ok(p.metrics.ttft_ms.median >= 20, `TTFT median ${p.metrics.ttft_ms.median}`);
    // 40 arrivals at 40 req/s: the schedule spans about a second (Poisson: loose bounds).
    const span = recs[recs.length - 1].scheduledMs;
    assert.ok(span > 400 && span < 2500, `schedule span ${span} ms`);
  } finally {
    await s.close();
  }
});

test('cancel mid-sweep keeps the finished points', async () => {
  const s = await startScriptedServer({ ttftMs: 20, itlMs: 5 });
  try {
    const ac = new AbortController();
    const seen: number[] = [];
    const r = await runSweep(base(s, { concurrency: [1, 2, 4, 8], requests: 8, output: 10 }), {
      signal: ac.signal,
      onPoint: (p) => {
        seen.push(p.index);
        if (p.index === 1) ac.abort();
      },
    });
    assert.equal(r.thread, 'worker');
    assert.deepEqual(seen, [0, 1]);
    assert.equal(r.points.length, 2);
    assert.equal(r.stopped?.reason, 'cancelled');
    assert.ok(r.points.every((p) => p.metrics.completed === 8));
  } finally {
    await s.close();
  }
});

test('the worker script resolves from source, and the bundled worker runs a sweep', async () => {
  assert.match(resolveWorkerScript()!, /worker\.ts$/);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-worker-'));
  const s = await startScriptedServer({ ttftMs: 5, itlMs: 1 });
  try {
    const out = path.join(dir, 'bench-worker.js');
    await esbuild.build({
      entryPoints: [path.resolve('src/core/bench/worker.ts')],
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node20',
      outfile: out,
      logLevel: 'error',
      define: { 'import.meta.url': 'importMetaUrl' },
      banner: { js: 'const importMetaUrl = require("url").pathToFileURL(__filename).href;' },
    });
    fs.writeFileSync(path.join(dir, 'package.json'), '{"type":"commonjs"}');
    const r = await runSweep(base(s, { requests: 3, output: 3 }), { worker: out });
    assert.equal(r.thread, 'worker');
    assert.equal(r.points[0].metrics.completed, 3);
    // A worker that cannot start falls back to this thread.
    const bad = path.join(dir, 'broken-worker.js');
    fs.writeFileSync(bad, 'throw new Error("broken");');
    const r2 = await runSweep(base(s, { requests: 2, output: 2 }), { worker: bad });
    assert.equal(r2.thread, 'main');
    assert.equal(r2.points[0].metrics.completed, 2);
  } finally {
    await s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('chat completions stream too', async () => {
  const s = await startScriptedServer({ ttftMs: 5, itlMs: 1 });
  try {
    const r = await runSweep(base(s, { api: 'chat', requests: 2, output: 5, input: 20 }), { worker: 'off' });
    assert.equal(r.points[0].metrics.completed, 2);
    assert.equal(r.points[0].metrics.total_output_tokens, 10);
    assert.equal(s.requests[s.requests.length - 1].path, '/v1/chat/completions');
    assert.ok(s.requests.every((q) => !('seed' in q.body)));
  } finally {
    await s.close();
  }
});

/**
 * `body` with a scripted server answering after ttftMs then a token every itlMs, a client agent of
 * `connections` connections to it and a plain completions config; both closed after.
 */
async function withConnections(
  server: { ttftMs: number; itlMs: number },
  connections: number,
  body: (agent: ReturnType<typeof createAgent>, cfg: ClientConfig) => Promise<void>,
) {
  const s = await startScriptedServer(server);
  const agent = createAgent(connections);
  try {
    const cfg: ClientConfig = {
      baseUrl: s.url,
      api: 'completions',
      model: 'scripted',
      idleTimeoutMs: 10_000,
      requestTimeoutMs: 0,
      doneGraceMs: 1000,
      topP: 1,
      topK: -1,
      temperature: 0,
    };
    await body(agent, cfg);
  } finally {
    await agent.close();
    await s.close();
  }
}

test('a request that waits for a connection is timed from when it was written, not from when it was issued', async () => {
  // One connection, two requests issued together: the second can only be written once the first is done.
  await withConnections({ ttftMs: 40, itlMs: 5 }, 1, async (agent, cfg) => {
    const spec = { prompt: [1, 2, 3], outputTokens: 4 };
    const issued = now();
    const [a, b] = await Promise.all([sendRequest(agent, cfg, spec), sendRequest(agent, cfg, spec)]);
    assert.ok(a.ok && b.ok, `${a.errorMessage ?? ''} ${b.errorMessage ?? ''}`);
    const [first, second] = a.sentAt <= b.sentAt ? [a, b] : [b, a];
    assert.ok(first.sentAt >= issued);
    // Written after the first response ended, so its TTFT does not include the wait for the connection.
    assert.ok(second.sentAt >= first.endAt, `second written at ${second.sentAt}, first ended at ${first.endAt}`);
    assert.ok(second.chunkAt[0] - second.sentAt < second.chunkAt[0] - issued);
  });
});

test("Little's law closes when requests wait for a connection: in flight counts from the write, as E2E does", async () => {
  const { runPoint } = await import('../../src/core/bench/loadgen');
  const { promptSource } = await import('../../src/core/bench/prompts');
  const { summarizeRecords } = await import('../../src/core/bench/metrics');
  const { LITTLE_TOLERANCE } = await import('../../src/core/checks/method');
  // Requests of ≈ 250 ms, so the few ms between a stream's last chunk and its end (the usage chunk,
  // [DONE], a busy event loop) stay a small share of each request's time in flight.
  // Concurrency 8 through 2 connections: 6 of the 8 issued requests always wait for a connection,
  // a wait that is the client's, outside every E2E. Counted from the issue, L would be ≈ 8 against
  // λ·W ≈ 2 (Little's law 75% off); counted from the write, both are ≈ 2.
  await withConnections({ ttftMs: 100, itlMs: 10 }, 2, async (agent, cfg) => {
    const run = await runPoint(
      agent,
      cfg,
      { loop: 'closed', concurrency: 8, requests: 24, outputTokens: 16, seed: 1 },
      promptSource(1, 16, 1000),
      { threads: 1, samplePeriodMs: 2 },
    );
    assert.ok(run.records.every((r) => r.ok));
    assert.ok(run.maxInFlight <= 2, `at most 2 written at once, peak ${run.maxInFlight}`);
    const m = summarizeRecords(run.records, { durationMs: run.durationMs, observedInFlight: run.observedInFlight });
    // The client that held less than its concurrency is named by the peak, not by Little's law.
    const { runChecks } = await import('../../src/core/checks');
    const { createNotebookContext } = await import('../../src/core/engine/engine');
    const peak = runChecks({
      kind: 'bench: sweep',
      cell: {},
      facts: [
        {
          kind: 'in-flight',
          peak: run.maxInFlight,
          requests: 24,
          concurrency: 8,
          point: { loop: 'closed', concurrency: 8 },
          at: ['concurrency', 0],
        },
      ],
      notebook: createNotebookContext(os.tmpdir()),
      cellIndex: 0,
    });
    assert.deepEqual(
      peak.map((f) => f.code),
      ['load-peak-short'],
    );
    assert.match(peak[0].message, /^c=8: at most 2 requests were ever written to the server at once, not 8/);
    assert.ok(
      Math.abs(m.little.error!) <= LITTLE_TOLERANCE,
      `λ·W ${m.little.predicted_in_flight.toFixed(3)} against L ${run.observedInFlight.toFixed(3)} (error ${(m.little.error! * 100).toFixed(1)}%)`,
    );
  });
});
