/**
 * Bench under faults, against real servers on 127.0.0.1: every request ends recorded with the
 * right error kind and a message, points report their failure rate, the sweep follows its failure
 * policy, nothing throws; and a planted API key appears nowhere in what a bench writes.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { runSweep } from '../../src/core/bench';
import { fromColumnar } from '../../src/core/bench/records';
import type { SweepOptions } from '../../src/core/bench/sweep';
import { benchCommand } from '../../src/cli/commands/bench';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import type { CellResult } from '../../src/core/engine/types';
import { serializeNotebook } from '../../src/core/notebook/format';
import { closedPort, startScriptedServer, type Fault } from '../support/scriptedServer';

const opts = (endpoint: string, o: Partial<SweepOptions> = {}): SweepOptions => ({
  endpoint,
  vocab: 32000,
  input: 32,
  output: 6,
  concurrency: [1],
  requests: 2,
  idleTimeoutMs: 400,
  doneGraceMs: 150,
  ...o,
});

const CASES: {
  name: string;
  fault: Fault;
  kind: string | undefined;
  ok: boolean;
  status?: number;
  message?: RegExp;
}[] = [
  {
    name: 'reset mid-stream',
    fault: { kind: 'reset', afterChunks: 2 },
    kind: 'reset',
    ok: false,
    message: /after 2 chunks/,
  },
  {
    name: 'HTTP 429 with a body',
    fault: { kind: 'status', status: 429, body: '{"error":{"message":"Too many requests, slow down"}}' },
    kind: 'rate-limited',
    ok: false,
    status: 429,
    message: /HTTP 429: .*slow down/,
  },
  {
    name: 'HTTP 500 with a body',
    fault: { kind: 'status', status: 500, body: 'Internal Server Error: CUDA error' },
    kind: 'server-error',
    ok: false,
    status: 500,
    message: /CUDA error/,
  },
  {
    name: 'HTTP 503 with a body',
    fault: { kind: 'status', status: 503, body: '{"error":"engine overloaded"}' },
    kind: 'server-error',
    ok: false,
    status: 503,
    message: /overloaded/,
  },
  {
    name: 'stall (no bytes) → per-request timeout',
    fault: { kind: 'stall', afterChunks: 1, ms: 5000 },
    kind: 'timeout',
    ok: false,
  },
  {
    name: 'malformed SSE',
    fault: { kind: 'malformed-sse', afterChunks: 1 },
    kind: 'malformed-sse',
    ok: false,
    message: /not an SSE line/,
  },
  {
    name: 'malformed JSON in a chunk',
    fault: { kind: 'malformed-json', afterChunks: 2 },
    kind: 'malformed-json',
    ok: false,
    message: /not JSON/,
  },
  {
    name: 'an error object in the stream',
    fault: { kind: 'stream-error', afterChunks: 1 },
    kind: 'api-error',
    ok: false,
    message: /engine died/,
  },
  {
    name: 'stream closed early (no usage, no [DONE])',
    fault: { kind: 'close-early', afterChunks: 3 },
    kind: 'truncated',
    ok: false,
  },
  { name: 'missing usage', fault: { kind: 'no-usage' }, kind: 'missing-usage', ok: true },
  { name: 'never sends [DONE]', fault: { kind: 'no-done' }, kind: 'no-done', ok: true },
  { name: 'a trickle of one byte at a time', fault: { kind: 'trickle' }, kind: undefined, ok: true },
];

for (const c of CASES) {
  test(`fault: ${c.name}`, async () => {
    const s = await startScriptedServer({ ttftMs: 5, itlMs: 2, fault: () => c.fault });
    try {
      // A trickle delivers an event only when its last byte lands, one setImmediate per byte: on a
      // loaded machine that can pass the 400 ms idle limit the stall cases need, so it gets its own.
      const r = await runSweep(opts(s.url, c.fault.kind === 'trickle' ? { idleTimeoutMs: 10_000 } : {}), {
        worker: 'off',
      });
      assert.equal(r.points.length, 1);
      const p = r.points[0];
      const recs = fromColumnar(p.records!);
      assert.equal(recs.length, 2);
      for (const x of recs) {
        assert.equal(x.errorKind, c.kind, `${c.name}: ${x.errorKind} ${x.errorMessage}`);
        assert.equal(x.ok, c.ok);
        if (c.kind) assert.ok(x.errorMessage && x.errorMessage.length > 5);
        if (c.status) assert.equal(x.httpStatus, c.status);
        if (c.message) assert.match(x.errorMessage!, c.message);
        if (c.ok) assert.equal(x.outputTokens, 6);
      }
      assert.equal(p.metrics.failure_rate, c.ok ? 0 : 1);
      assert.equal(p.metrics.errors[c.kind ?? 'none'] ?? 0, c.kind ? 2 : 0);
    } finally {
      await s.close();
    }
  });
}

test('fault: connection refused, and the failure policy stops the sweep', async () => {
  const port = await closedPort();
  const r = await runSweep(opts(`http://127.0.0.1:${port}`, { concurrency: [1, 2, 4], stopAbove: 0.5 }), {
    worker: 'off',
  });
  assert.equal(r.points.length, 1);
  assert.deepEqual(r.points[0].metrics.errors, { connect: 2 });
  assert.equal(r.stopped?.reason, 'failure-policy');
  assert.match(r.stopped!.message, /100% of requests failed/);
  assert.ok(r.notes.some((n) => /cannot reach/.test(n)));
  // "continue" runs every point anyway.
  const r2 = await runSweep(opts(`http://127.0.0.1:${port}`, { concurrency: [1, 2] }), { worker: 'off' });
  assert.equal(r2.points.length, 2);
  assert.equal(r2.stopped, undefined);
});

test('a point reports its failure share when only some requests fail', async () => {
  const s = await startScriptedServer({
    ttftMs: 3,
    itlMs: 1,
    fault: ({ index }) => (index % 4 === 1 ? { kind: 'status', status: 503, body: 'busy' } : undefined),
  });
  try {
    const r = await runSweep(opts(s.url, { requests: 8, concurrency: [1, 2], stopAbove: 0.5 }), { worker: 'off' });
    assert.equal(r.points.length, 2);
    // Requests 1, 5, 9, 13 of the 16 the server saw (after the probe GETs, which are not counted) fail.
    const failed = r.points.reduce((n, p) => n + p.metrics.failed, 0);
    assert.equal(failed, 4);
    assert.ok(r.points.every((p) => p.metrics.failure_rate === 0.25));
  } finally {
    await s.close();
  }
});

const KEY = 'sk-inflab-PLANTED-7f3a9c1e5b2d4f6a8c0e';

test('a planted API key appears nowhere: records, errors, outputs, values, findings, notebook, CLI output and JSON', async () => {
  const faults: Fault[] = [
    { kind: 'echo-headers', status: 502 },
    { kind: 'reset', afterChunks: 1 },
    { kind: 'status', status: 401, body: `{"error":"bad key Bearer ${KEY}"}` },
  ];
  const s = await startScriptedServer({
    ttftMs: 3,
    itlMs: 1,
    metrics: 'current',
    fault: ({ index }) => faults[index % 4],
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-key-'));
  const written: string[] = [];
  try {
    const nb = createNotebookContext(dir, { getApiKey: async () => KEY });
    const cells = [
      `setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: ${s.url}`,
      `bench: sweep\ninput: 16\noutput: 4\nconcurrency: [1, 2]\nrequests: 8\non_failure: continue`,
    ];
    const results: CellResult[] = [];
    for (let i = 0; i < cells.length; i++)
      results.push(await runCell(cells[i], i, nb, { onProgress: (u) => written.push(JSON.stringify(u)) }));
    assert.ok(results[1].ok, results[1].error?.message);
    // The key was used (the server saw Authorization) and failures were recorded with their bodies.
    assert.ok(s.requests.every((q) => q.hadAuthorization));
    const values = results[1].values as any;
    assert.ok(values.points[0].errors['bad-request'] >= 1 || values.points[1].errors['bad-request'] >= 1);
    assert.ok(values.points.some((p: any) => p.errors['server-error'] >= 1));
    written.push(JSON.stringify(results));
    const text = serializeNotebook({
      cells: cells.map((source, i) => ({
        kind: 'code',
        language: 'inflab',
        source,
        outputs: results[i].outputs.map((o) => ({ items: o.items })),
      })),
    });
    written.push(text);
    assert.match(text, /\[redacted\]/);
    // The CLI, with the key in the environment.
    const jsonFile = path.join(dir, 'out.json');
    const logged: string[] = [];
    const log = console.log;
    const errw = process.stderr.write.bind(process.stderr);
    const prevKey = process.env.INFLAB_API_KEY;
    process.env.INFLAB_API_KEY = KEY;
    console.log = (...a: unknown[]) => void logged.push(a.map(String).join(' '));
    (process.stderr as any).write = (chunk: unknown) => (logged.push(String(chunk)), true);
    let code: number;
    try {
      code = await benchCommand([
        '--endpoint',
        s.url,
        '--input',
        '16',
        '--output',
        '4',
        '--concurrency',
        '1,2',
        '--requests',
        '4',
        '--json',
        jsonFile,
        '--stop-above',
        '100%',
        '--gpu',
        'a100-sxm4-80gb',
        '--model',
        'qwen3-8b',
      ]);
    } finally {
      console.log = log;
      (process.stderr as any).write = errw;
      if (prevKey === undefined) delete process.env.INFLAB_API_KEY;
      else process.env.INFLAB_API_KEY = prevKey;
    }
    assert.equal(code, 0);
    written.push(logged.join('\n'), fs.readFileSync(jsonFile, 'utf8'));
    const json = JSON.parse(fs.readFileSync(jsonFile, 'utf8'));
    assert.ok('mean_ttft_ms' in json.vllm[0] && 'p99_itl_ms' in json.vllm[0] && 'output_throughput' in json.vllm[0]);
    for (const w of written) {
      assert.ok(!w.includes(KEY), 'the key leaked');
      assert.ok(!w.includes(KEY.slice(10)), 'part of the key leaked');
    }
  } finally {
    await s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
