/**
 * One registry of findings: every finding a bench run deserves is a check rule over the run's
 * facts, made once. Each code belongs to one rule; a point with N issues gets N findings; the
 * bench kind itself makes none; and the vocabulary hint reaches a user whose setup names another
 * model than the one a vLLM server runs.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { summarizeRecords, type RequestRecord } from '../../src/core/bench/metrics';
import { toColumnar } from '../../src/core/bench/records';
import type { ReportSpec } from '../../src/core/bench/report';
import type { SweepResult } from '../../src/core/bench/sweep';
import { ruleList } from '../../src/core/checks';
import { createNotebookContext, prepareCell, runCell } from '../../src/core/engine/engine';
import { checkFacts, type Fact } from '../../src/core/facts';
import { nodeFiles } from '../../src/core/host/files';
import { sweepFacts, sweepFindings } from '../support/benchFindings';
import { startScriptedServer } from '../support/scriptedServer';

test('each finding code is produced by exactly one rule', () => {
  const owner = new Map<string, string>();
  for (const r of ruleList())
    for (const code of Object.keys(r.codes)) {
      assert.ok(!owner.has(code), `${code} is claimed by ${owner.get(code)} and ${r.id}`);
      owner.set(code, r.id);
    }
  // The bench's findings are among them (they were made in bench/report.ts and bench/quality.ts).
  for (const code of [
    'bench-failures',
    'bench-stream-quirks',
    'client-loop-lag',
    'client-read-bursts',
    'dispatch-lag',
    'prefix-cache-contaminated',
    'bench-retries',
    'usage-prompt-drift',
    'server-counters-disagree',
    'load-below-concurrency',
    'bench-vocabulary',
    'rtt-unreliable',
    'bench-note',
    'bench-failure-policy',
  ])
    assert.ok(owner.has(code), `${code} has a rule`);
});

/** 16 requests at "concurrency 32": 2 failed, 1 without a usage chunk, 1 retried, prompts 25% longer than sent. */
function troubledSweep(): SweepResult {
  const records: RequestRecord[] = Array.from({ length: 16 }, (_, i) => ({
    id: i,
    scheduledMs: i * 10,
    sentMs: i * 10,
    chunkMs: i < 2 ? [] : [i * 10 + 5, i * 10 + 6, i * 10 + 7, i * 10 + 8],
    endMs: i * 10 + 9,
    promptTokens: i < 2 ? undefined : 40,
    outputTokens: i < 2 ? undefined : 4,
    ok: i >= 2,
    ...(i < 2 ? { errorKind: 'bad-request' as const, errorMessage: 'HTTP 400: bad', httpStatus: 400 } : {}),
    ...(i === 2 ? { errorKind: 'missing-usage' as const, promptTokens: undefined, outputTokens: 4 } : {}),
    ...(i === 3 ? { retries: 1, retryError: 'other side closed (UND_ERR_SOCKET)' } : {}),
  }));
  const metrics = summarizeRecords(records, { durationMs: 200 });
  return {
    endpoint: 'http://127.0.0.1:1',
    model: 'm',
    metricsAvailable: true,
    notes: ['GET /v1/models answered HTTP 404'],
    runId: 'r',
    thread: 'main',
    rtt: {
      method: 'tcp-connect',
      path: '127.0.0.1:1',
      n: 4,
      median_ms: 9,
      min_ms: 8,
      reliable: false,
      unreliable_reason: 'the probe is slow',
    },
    stopped: { reason: 'failure-policy', afterPoint: 0, message: 'stopped: 12.5% failed' },
    points: [
      {
        index: 0,
        loop: 'closed',
        concurrency: 32,
        seed: 1,
        metrics,
        contaminated: true,
        contaminationReason: 'server prefix-cache hit rate 80.0% (Δhits/Δqueries) > 10%',
        durationMs: 200,
        t0EpochMs: 0,
        observedInFlight: 1,
        maxInFlight: 16,
        loopLag: { mean_ms: 10, p50_ms: 5, p99_ms: 31, max_ms: 40 },
        warmup: { requests: 0, promptTokens: 0, outputTokens: 0, unknown: 0 },
        cancelled: false,
        records: toColumnar(records),
        usage: {
          requests: 14,
          with_usage: 13,
          requested_input: 32,
          prompt_tokens_mean: 40,
          prompt_drift: 40 / 32 - 1,
          requested_output: 4,
          completion_tokens_mean: 4,
          completion_mismatch: 0,
          fewer_tokens_than_chunks: 0,
          tokens_per_chunk: 1,
          bad_usage: 0,
        },
        serverCounters: {
          server: 'vLLM',
          dialect: 'vllm',
          prompt_counter: 'all',
          generation: { client: 56, server: 112, diff: 56, rel: 1 },
          unknown_requests: 0,
          agree: false,
        },
        load: { concurrency: 32, requests: 16, peak_in_flight: 16, short: true, fewer_requests_than_concurrency: true },
      },
    ],
  } as SweepResult;
}

const spec: ReportSpec = {
  loop: 'closed',
  input: 32,
  output: 4,
  requests: 16,
  seed: { mode: 'fixed', value: 7 },
  percentiles: [90, 99],
};

test('a bench point with 8 issues (and a run with 3) gives exactly 11 findings, one per issue, from the rules', () => {
  const fs = sweepFindings(troubledSweep(), spec, { bench: 'sweep', concurrency: [32], seed: 7, on_failure: {} });
  // Little's law cannot be tested over 16 requests, one point repeats no seed, and an RTT probe that
  // is not quoted is not weighed against the TTFT: only the bench's rules speak.
  const bench = fs;
  assert.deepEqual(
    bench.map((f) => f.code).sort(),
    [
      'bench-failure-policy',
      'bench-failures',
      'bench-note',
      'bench-retries',
      'bench-stream-quirks',
      'client-loop-lag',
      'load-below-concurrency',
      'prefix-cache-contaminated',
      'rtt-unreliable',
      'server-counters-disagree',
      'usage-prompt-drift',
    ].sort(),
  );
  const by = (code: string) => bench.find((f) => f.code === code)!;
  // The messages, severities and places a user saw before the rules made them.
  assert.equal(by('bench-failures').severity, 'warning');
  assert.equal(
    by('bench-failures').message,
    'c=32: 2 of 16 requests failed (12.5%): bad-request ×2. First: HTTP 400: bad',
  );
  assert.deepEqual(by('bench-failures').path, ['concurrency', 0]);
  assert.equal(
    by('bench-stream-quirks').message,
    'c=32: 1 stream(s) without a usage chunk (output tokens counted from chunks)',
  );
  assert.match(
    by('bench-retries').message,
    /^c=32: 1 of 16 requests were sent a second time.*\(first: other side closed \(UND_ERR_SOCKET\)\)/,
  );
  assert.match(
    by('usage-prompt-drift').message,
    /^c=32: the server counted 40(\.0)? prompt tokens per request .* against 32 sent \(\+25(\.0)?%\)/,
  );
  assert.match(
    by('server-counters-disagree').message,
    /generation tokens 112 \(server\) vs 56 \(client\), \+56 \(\+100(\.0)?%\)/,
  );
  assert.match(by('load-below-concurrency').message, /^c=32: only 16 requests, .*not 32$/);
  assert.equal(
    by('client-loop-lag').message,
    "c=32: the client's event loop lagged 31.0 ms at p99 during the point; latencies carry up to that much client error",
  );
  assert.deepEqual(by('prefix-cache-contaminated').quickFix?.edit, { path: ['seed'], value: 'per-point' });
  assert.equal(by('rtt-unreliable').message, 'The network RTT probe is not quoted: the probe is slow.');
  assert.deepEqual(by('bench-failure-policy').path, ['on_failure']);
  assert.equal(by('bench-failure-policy').severity, 'warning');
  assert.equal(bench.length, 11);
  // A point with no trouble states its facts and gets no bench finding.
  const quiet = troubledSweep();
  quiet.points = [];
  quiet.notes = [];
  delete quiet.stopped;
  delete quiet.rtt;
  assert.deepEqual(
    sweepFindings(quiet, spec).map((f) => f.code),
    [],
  );
  assert.ok(sweepFacts(troubledSweep(), spec).some((f) => f.kind === 'in-flight' && f.peak === 16));
});

test("the bench kind makes no finding itself; a vLLM server that rejects the setup model's token ids gets the vocabulary hint once per point", async () => {
  // vLLM validates prompt ids in vllm/v1/engine/processor.py (_validate_model_input, read at
  // commit 01055a4b): `ValueError(f"Token id {max_input_id} is out of vocabulary")`, answered by
  // the OpenAI server as HTTP 400 with ErrorResponse {error: {message, type, param, code}}
  // (vllm/entrypoints/openai/protocol.py at 0052bed3, the v0.10/v0.11 shape).
  const served = 128256; // a Llama-3 vocabulary; the setup names Qwen3-8B (151,936 ids)
  const s = await startScriptedServer({
    ttftMs: 2,
    itlMs: 1,
    model: 'meta-llama/Llama-3.2-1B',
    fault: ({ body }) => {
      const ids = Array.isArray(body?.prompt) ? (body.prompt as number[]) : [];
      const max = Math.max(0, ...ids);
      if (max < served) return undefined;
      return {
        kind: 'status',
        status: 400,
        body: JSON.stringify({
          error: { message: `Token id ${max} is out of vocabulary`, type: 'BadRequestError', param: null, code: 400 },
        }),
      };
    },
  });
  try {
    const nb = createNotebookContext('.', {});
    await runCell(`setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nendpoint: ${s.url}`, 0, nb);
    const source =
      'bench: sweep\ninput: 64\noutput: 4\nconcurrency: [1, 2]\nrequests: 6\nseed: per-point\nwarmup: 0\non_failure: continue';
    // The kind only measures and states facts.
    const p = prepareCell(source, 1, nb);
    const out = await p.kind!.run(p.cell, {
      notebook: nb,
      setup: p.setup,
      cellIndex: 1,
      signal: new AbortController().signal,
      progress: () => {},
    });
    assert.deepEqual(out.findings ?? [], []);
    assert.ok((out.facts ?? []).some((f) => f.kind === 'requests' && f.failed > 0));

    const r = await runCell(source, 1, nb);
    assert.ok(r.ok, r.error?.message);
    const vocab = r.findings.filter((f) => f.code === 'bench-vocabulary');
    assert.deepEqual(
      vocab.map((f) => f.path),
      [
        ['concurrency', 0],
        ['concurrency', 1],
      ],
    );
    assert.match(
      vocab[0].message,
      /^c=1: requests failed on the prompt's token ids \(HTTP 400: .*Token id \d+ is out of vocabulary.*\): the ids are drawn for the setup's vocabulary \(151936\)$/,
    );
    assert.equal(vocab[0].fix, 'name the model the server runs in the setup (its vocabulary bounds the ids)');
    assert.equal(r.findings.filter((f) => f.code === 'bench-failures').length, 2, 'one failures finding per point');
  } finally {
    await s.close();
  }
});

test('predict: serving states facts and the rules speak once: the fixed-seed trap, and a setup whose weights do not fit', async () => {
  const { analyzeCells } = await import('../../src/core/engine/engine');
  const { runChecks } = await import('../../src/core/checks');
  const nb = createNotebookContext('.', {});
  await runCell('setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b', 0, nb);
  const trap = 'predict: serving\ninput: 200\noutput: 8\nconcurrency: [2, 4]\nrequests: 8\nseed: 42';
  // As the user types: one finding for the trap (the kind had its own copy beside the rule).
  const typed = analyzeCells(['setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b', trap], '.')[1];
  assert.equal(typed.filter((f) => f.code === 'fixed-seed-prefix-cache').length, 1);
  const ran = await runCell(trap, 1, nb);
  assert.ok(ran.ok, ran.error?.message);
  assert.equal(ran.findings.filter((f) => f.code === 'fixed-seed-prefix-cache').length, 1);
  assert.deepEqual(ran.findings.find((f) => f.code === 'fixed-seed-prefix-cache')!.path, ['seed']);

  // Weights that do not fit: the kind simulates nothing and says nothing; the weights-fit rule says it, once.
  await runCell('setup: big\ngpu: a100-sxm4-80gb\nmodel: llama-3.1-70b', 2, nb);
  const p = prepareCell('predict: serving\ninput: 200\noutput: 8\nconcurrency: [2]\nrequests: 4', 3, nb);
  const out = await p.kind!.run(p.cell, {
    notebook: nb,
    setup: p.setup,
    cellIndex: 3,
    signal: new AbortController().signal,
    progress: () => {},
  });
  assert.deepEqual(out.findings ?? [], []);
  const checked = runChecks({
    kind: 'predict: serving',
    cell: p.cell,
    facts: out.facts,
    setup: p.setup,
    notebook: nb,
    cellIndex: 3,
  });
  assert.equal(checked.filter((f) => f.code === 'weights-do-not-fit').length, 1);
});

// ------------------------------------------------------------------------------------------------
// The audit's findings (were made in audit/findings.ts, audit/logFindings.ts and audit/metrics.ts).

const AUDIT_CODES: Record<string, string[]> = {
  'audit-kv-pool': ['audit-kv-pool-workers-differ', 'audit-kv-pool-matches', 'audit-kv-pool-mismatch'],
  'audit-prefix-cache': ['audit-prefix-cache-contamination'],
  'audit-interference': ['audit-prefill-decode-interference'],
  'audit-heartbeat': ['audit-heartbeat-not-instrument'],
  'audit-sampler': ['audit-sampler-fallback', 'audit-sampler-selected'],
  'audit-preemptions': ['audit-preemptions'],
  'audit-kv-cache-full': ['audit-kv-cache-full'],
  'audit-crashes': [
    'audit-out-of-memory',
    'audit-kv-cache-too-small',
    'audit-engine-died',
    'audit-traceback',
    'audit-error-lines',
  ],
  'audit-log-reading': [
    'audit-parse-warning',
    'audit-long-lines',
    'audit-not-a-server-log',
    'audit-no-stats',
    'audit-unknown-lines',
    'audit-informative-unknown',
  ],
};

test('each audit rule is registered once and owns its codes', () => {
  const rules = ruleList();
  for (const [id, codes] of Object.entries(AUDIT_CODES)) {
    const mine = rules.filter((r) => r.id === id);
    assert.equal(mine.length, 1, `${id} is registered once`);
    assert.deepEqual(Object.keys(mine[0].codes).sort(), [...codes].sort(), `${id}'s codes`);
  }
});

/** Facts as an audit run states them (every one must validate), the log a one-file vLLM V1 log. */
function auditFactSet(extra: unknown[], log: Record<string, unknown> = {}): Fact[] {
  const raw = [
    {
      kind: 'log',
      server: 'vllm',
      format: 'v1',
      files: [{ path: 'logs/vllm.log', first_line: 1, lines: 100 }],
      lines: 100,
      windows: 10,
      crashes: 0,
      ...log,
    },
    ...extra,
  ];
  const { facts, findings } = checkFacts(raw);
  assert.deepEqual(findings, [], 'every fact validates');
  return facts;
}

const UNITS = { t: 's', interval: 's', prompt: 'tok/s', generation: 'tok/s', kv_usage: '%', prefix_hit: '%' };
/** A log-windows fact, 10 s apart from line 20, one line each; columns default to a quiet busy window. */
function windowsFact(n: number, cols: Record<string, (number | null)[]> = {}) {
  const fill = (v: number) => Array.from({ length: n }, () => v);
  return {
    kind: 'log-windows',
    units: UNITS,
    interval: 10,
    line: Array.from({ length: n }, (_, i) => 20 + i),
    t: Array.from({ length: n }, (_, i) => i * 10),
    prompt: fill(100),
    generation: fill(1000),
    running: fill(8),
    waiting: fill(0),
    preemptions: fill(0),
    kv_usage: fill(20),
    prefix_hit: fill(0),
    ...cols,
  };
}
function segmentFact(first: number, last: number, over: Record<string, unknown> = {}) {
  return {
    kind: 'log-segment',
    index: 0,
    first,
    last,
    windows: last - first + 1,
    starts_after: 'start',
    start_stamp: '07-25 10:00:00',
    end_stamp: '07-25 10:00:50',
    load: 8,
    preemptions: 0,
    generation: 1000,
    units: { generation: 'tok/s', prefix_hit_max: '%' },
    log_lines: { first: 20 + first, last: 20 + last },
    ...over,
  };
}

test('each audit rule fires on a fact set built for it, from the facts alone, once per condition', async () => {
  const { runChecks } = await import('../../src/core/checks');
  const nb = createNotebookContext('.', {});
  await runCell('setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b', 0, nb);
  const setup = nb.defaultSetup;
  const run = (facts: Fact[], cell: Record<string, unknown> = {}) =>
    runChecks({ kind: 'audit', cell: { audit: 'logs/vllm.log', ...cell }, facts, setup, notebook: nb, cellIndex: 1 });
  const codes = (fs: { code: string }[]) => fs.map((f) => f.code).filter((c) => c.startsWith('audit-'));
  const GiB = 2 ** 30;
  const pool = (over: Record<string, unknown> = {}) => ({
    kind: 'kv-pool',
    tokens: 410240,
    available_bytes: 56.34 * GiB,
    source: 'log',
    log_lines: { tokens: 8, available_bytes: 7 },
    ...over,
  });

  // audit-kv-pool: the log's pool against the setup (the sweep fixture's 410,240 tokens match it).
  const matches = run(auditFactSet([pool()]));
  assert.deepEqual(codes(matches), ['audit-kv-pool-matches']);
  assert.match(matches[0].message, /410,240 tokens \(line 8\)/, 'cites the line that printed the pool');
  assert.deepEqual(matches[0].path, ['audit']);
  assert.deepEqual(
    codes(run(auditFactSet([pool({ tokens: 300000, available_bytes: undefined, log_lines: { tokens: 8 } })]))),
    ['audit-kv-pool-mismatch'],
  );
  const workers = run(
    auditFactSet([
      pool({
        workers: [
          { tokens: 410240, line: 8 },
          { tokens: 409600, line: 9 },
        ],
      }),
    ]),
  );
  assert.equal(codes(workers)[0], 'audit-kv-pool-workers-differ');
  assert.equal(codes(workers).filter((c) => c === 'audit-kv-pool-workers-differ').length, 1);
  assert.match(workers[0].message, /lines 8, 9/);
  // Without the log fact (a saved notebook's values restated as facts) the rule says nothing.
  assert.deepEqual(codes(run(checkFacts([pool({ log_lines: undefined })]).facts)), []);

  // audit-prefix-cache: a rise over two windows past the threshold.
  const hits = [0, 20, 30, 40];
  const cont = run(
    auditFactSet([windowsFact(4, { prefix_hit: hits }), segmentFact(0, 3, { prefix_hit_max: 40 })], { windows: 4 }),
  );
  assert.deepEqual(codes(cont), ['audit-prefix-cache-contamination']);
  assert.match(cont[0].message, /rising in 3 of 4 windows, lines 21, 22, 23/);
  assert.deepEqual(
    codes(
      run(auditFactSet([windowsFact(4, { prefix_hit: hits }), segmentFact(0, 3, { prefix_hit_max: 40 })]), {
        hit_threshold: 50,
      }),
    ),
    [],
    "the cell's hit_threshold",
  );

  // audit-interference: prefill floods alternating with decode windows.
  const inter = run(
    auditFactSet([
      windowsFact(6, { generation: [1000, 100, 1000, 100, 1000, 100], prompt: [0, 5000, 0, 5000, 0, 5000] }),
      segmentFact(0, 5),
    ]),
  );
  assert.deepEqual(codes(inter), ['audit-prefill-decode-interference']);
  assert.match(inter[0].message, /3 of 6 windows are prefill floods/);

  // audit-heartbeat: a two-window run with idle windows on both sides.
  const hb = run(
    auditFactSet([
      windowsFact(4, { generation: [0, 58.8, 58.8, 0], prompt: [0, 100, 100, 0], running: [0, 1, 1, 0] }),
      segmentFact(1, 2, { starts_after: 'idle', generation: 58.8 }),
    ]),
  );
  assert.deepEqual(codes(hb), ['audit-heartbeat-not-instrument']);
  assert.match(hb[0].message, /58\.8 tok\/s\) is a lower bound/);

  // audit-sampler: the fallback, at its line.
  const sampler = (s: string) => ({
    kind: 'sampling',
    sampler: s,
    text: 'Falling back to the PyTorch-native implementation of top-p & top-k sampling.',
    backends: [{ sampler: s, line: 5 }],
    source: 'log',
    log_lines: { sampler: 5 },
  });
  const fb = run(auditFactSet([sampler('fallback')]));
  assert.deepEqual(codes(fb), ['audit-sampler-fallback']);
  assert.match(fb[0].message, /^Sampler fallback at line 5/);
  assert.deepEqual(codes(run(auditFactSet([sampler('flashinfer')]))), ['audit-sampler-selected']);

  // audit-preemptions and audit-kv-cache-full: one segment, pinned full with requests waiting.
  const full = run(
    auditFactSet([
      windowsFact(4, { waiting: [0, 12, 10, 0], preemptions: [0, 3, 1, 0], kv_usage: [80, 99.6, 99.1, 90] }),
      segmentFact(0, 3, { preemptions: 4 }),
    ]),
  );
  assert.deepEqual(codes(full), ['audit-preemptions', 'audit-kv-cache-full']);
  assert.match(full[0].message, /Preemptions: 4 in segment 1/);
  assert.match(full[1].message, /2 of 4 windows .*lines 21, 22/);
  assert.deepEqual(
    codes(
      run(
        auditFactSet([windowsFact(4, { waiting: [0, 12, 10, 0], kv_usage: [80, 99.6, 99.1, 90] }), segmentFact(0, 3)]),
        { kv_full: 99.9 },
      ),
    ),
    [],
    "the cell's kv_full",
  );
  const v0 = run(
    auditFactSet([
      {
        kind: 'log-lines',
        what: 'preemption-warning',
        count: 2,
        samples: [
          { line: 30, cumulative: 50 },
          { line: 40, cumulative: 100 },
        ],
        last: { line: 40, cumulative: 100 },
      },
    ]),
  );
  assert.deepEqual(codes(v0), ['audit-preemptions']);
  assert.match(v0[0].message, /warned 2 time\(s\).*cumulative 100/);

  // audit-crashes: each kind of failure, once.
  const crash = (crash: string, line: number, over: Record<string, unknown> = {}) => ({
    kind: 'log-crash',
    crash,
    line,
    phase: 'serving',
    text: `${crash} happened`,
    ...over,
  });
  const crashes = run(
    auditFactSet(
      [
        crash('oom', 3, { phase: 'startup', after: 'weights' }),
        crash('kv-too-small', 4, { phase: 'startup' }),
        crash('engine-dead', 50),
        crash('traceback', 48),
        crash('error', 49),
      ],
      { crashes: 5 },
    ),
  );
  assert.deepEqual(codes(crashes), [
    'audit-out-of-memory',
    'audit-kv-cache-too-small',
    'audit-engine-died',
    'audit-traceback',
    'audit-error-lines',
  ]);
  assert.match(crashes[0].message, /after the weights loaded .* at line 3: "oom happened"\.$/);

  // audit-log-reading: each thing about the log itself.
  const lines = (what: string, count: number, over: Record<string, unknown> = {}) => ({
    kind: 'log-lines',
    what,
    count,
    samples: [{ line: 7, text: 'queue_depth: 3' }],
    ...over,
  });
  const reading = run(
    auditFactSet(
      [
        lines('cannot-be-right', 1, { samples: [{ line: 12, what: 'prefix cache hit rate 340%' }] }),
        lines('too-long', 1, { samples: [{ line: 2 }], max_bytes: 3 * 2 ** 20, limit_bytes: 2 ** 20 }),
        lines('unknown', 50),
        lines('informative', 1),
      ],
      { windows: 0 },
    ),
  );
  assert.deepEqual(codes(reading), [
    'audit-parse-warning',
    'audit-long-lines',
    'audit-no-stats',
    'audit-unknown-lines',
    'audit-informative-unknown',
  ]);
  assert.match(reading[0].message, /prefix cache hit rate 340% \(line 12\)/);
  assert.deepEqual(codes(run(auditFactSet([], { server: undefined, windows: 0 }))), ['audit-not-a-server-log']);

  // A /metrics snapshot: the same rules, from its counters.
  const snap = run(
    checkFacts([
      {
        kind: 'metrics-snapshot',
        samples: 40,
        bad_lines: 0,
        gpu_blocks: 25640,
        block_size: 16,
        prefix_hits: 90000,
        prefix_queries: 200000,
        prefix_metric: 'vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total',
        preemptions: 7,
        waiting: 3,
        kv_usage: 0.97,
        source: '/metrics',
      },
    ]).facts,
  );
  assert.deepEqual(codes(snap), [
    'audit-kv-pool-matches',
    'audit-prefix-cache-contamination',
    'audit-preemptions',
    'audit-kv-cache-full',
  ]);
  assert.match(snap[1].message, /since the server started: 45\.0%/);

  // Another kind's facts are not an audit's.
  assert.deepEqual(
    codes(
      runChecks({
        kind: 'record',
        cell: {},
        facts: auditFactSet([pool()]),
        setup,
        notebook: nb,
        cellIndex: 1,
      }),
    ),
    [],
  );
});

test('an audit of a real-format vLLM log gives exactly one finding per condition, each citing the line that holds its number; the audit kind makes none itself', async () => {
  // Line formats from vLLM's own source as docs/ summarises them (v0.12: "Engine 000: …, Waiting: N
  // reqs, Preemptions: N, GPU KV cache usage …"; startup lines of gpu_worker.py / kv_cache_utils.py;
  // the sampler fallback of topk_topp_sampler.py).
  const lines: string[] = [
    'INFO 07-25 10:01:07 [default_loader.py:262] Loading weights took 3.91 seconds',
    'INFO 07-25 10:01:08 [gpu_model_runner.py:1846] Model loading took 15.2683 GiB and 4.731526 seconds',
    'INFO 07-25 10:01:30 [gpu_worker.py:255] Available KV cache memory: 56.34 GiB',
    'INFO 07-25 10:01:30 [kv_cache_utils.py:833] GPU KV cache size: 410,240 tokens',
    'INFO 07-25 10:01:30 [kv_cache_utils.py:837] Maximum concurrency for 40,960 tokens per request: 10.02x',
    'WARNING 07-25 10:02:00 [topk_topp_sampler.py:69] FlashInfer is not available. Falling back to the PyTorch-native implementation of top-p & top-k sampling. For the best performance, please install FlashInfer.',
  ];
  const at = (cond: string) => lines.push(cond) && lines.length;
  const stats = (hhmmss: string, o: { run: number; wait: number; pre: number; kv: number; hit: number; gen: number }) =>
    at(
      `(APIServer pid=4650) INFO 07-25 ${hhmmss} [loggers.py:248] Engine 000: Avg prompt throughput: ${(o.gen / 2).toFixed(1)} tokens/s, Avg generation throughput: ${o.gen.toFixed(1)} tokens/s, Running: ${o.run} reqs, Waiting: ${o.wait} reqs, Preemptions: ${o.pre}, GPU KV cache usage: ${o.kv.toFixed(1)}%, Prefix cache hit rate: ${o.hit.toFixed(1)}%`,
    );
  // Point 1: steady, nothing to say. Then idle (V1 prints no stats line while idle).
  for (let s = 0; s < 6; s++) stats(`10:03:${s}0`, { run: 16, wait: 0, pre: 0, kv: 30, hit: 0, gen: 1500 });
  // Point 2: its requests hit the prefix cache (the rolling rate rises every window).
  const risen = [12, 25, 38, 45, 50, 50].map((hit, s) =>
    stats(`10:10:${s}0`, { run: 64, wait: 0, pre: 0, kv: 60, hit, gen: 4000 }),
  );
  // Point 3: the pool is full with requests waiting, requests are preempted, and one request failed.
  const full: number[] = [];
  for (let s = 0; s < 6; s++) {
    full.push(stats(`10:20:${s}0`, { run: 96, wait: 12, pre: s < 2 ? 3 : 0, kv: 99.6, hit: 50, gen: 5000 }));
    if (s === 2)
      at('(APIServer pid=4650) ERROR 07-25 10:20:25 [serving_completion.py:140] Error in preprocessing prompt inputs');
  }
  const errorLine = full[2] + 1;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-audit-rules-'));
  try {
    fs.mkdirSync(path.join(dir, 'logs'));
    fs.writeFileSync(path.join(dir, 'logs', 'vllm.log'), lines.join('\n') + '\n');
    const nb = createNotebookContext(dir, nodeFiles());
    assert.ok((await runCell('setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b', 0, nb)).ok);
    const source = 'audit: logs/vllm.log\nplot: false';
    // The kind only reads and states facts.
    const p = prepareCell(source, 1, nb);
    const out = await p.kind!.run(p.cell, {
      notebook: nb,
      setup: p.setup,
      cellIndex: 1,
      signal: new AbortController().signal,
      progress: () => {},
    });
    assert.deepEqual(out.findings ?? [], []);
    assert.deepEqual(
      [...new Set((out.facts ?? []).map((f) => f.kind))],
      ['kv-pool', 'weights', 'sampling', 'log', 'log-windows', 'log-segment', 'log-crash'],
    );

    const r = await runCell(source, 1, nb);
    assert.ok(r.ok, r.error?.message);
    assert.deepEqual(
      r.findings.map((f) => f.code),
      [
        'audit-kv-pool-matches',
        'audit-prefix-cache-contamination',
        'audit-heartbeat-not-instrument',
        'audit-sampler-fallback',
        'audit-preemptions',
        'audit-kv-cache-full',
        'audit-error-lines',
      ],
    );
    const by = (code: string) => r.findings.find((f) => f.code === code)!;
    assert.match(by('audit-kv-pool-matches').message, /the log's 410,240 tokens \(line 4\)/);
    assert.match(by('audit-sampler-fallback').message, /^Sampler fallback at line 6:/);
    assert.match(
      by('audit-prefix-cache-contamination').message,
      /segment 2 .*from 0\.0% before it to a peak of 50\.0%/,
    );
    assert.match(
      by('audit-prefix-cache-contamination').message,
      new RegExp(`rising in 5 of 6 windows, lines ${risen.slice(0, 4).join(', ')} and 1 more\\)`),
    );
    assert.match(by('audit-preemptions').message, /^Preemptions: 6 in segment 3/);
    assert.deepEqual(
      by('audit-preemptions').related?.map((x) => x.message),
      [`line ${full[0]}: 3 preemption(s)`, `line ${full[1]}: 3 preemption(s)`],
    );
    assert.match(
      by('audit-kv-cache-full').message,
      new RegExp(`6 of 6 windows .*lines ${full.slice(0, 4).join(', ')} and 2 more`),
    );
    assert.match(
      by('audit-error-lines').message,
      new RegExp(`^1 error line in the log: line ${errorLine}: "Error in preprocessing`),
    );
    for (const f of r.findings) assert.deepEqual(f.path, ['audit'], `${f.code} stands on the audit key`);
    // The facts the rules read are the cell's, beside its values.
    const windows = r.facts.find((f) => f.kind === 'log-windows');
    assert.ok(windows && windows.kind === 'log-windows');
    assert.deepEqual(windows.line.slice(6, 12), risen);
    assert.deepEqual(windows.units.kv_usage, '%');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
