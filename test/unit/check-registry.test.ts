/**
 * One registry of findings: every finding a bench run deserves is a check rule over the run's
 * facts, made once. Each code belongs to one rule; a point with N issues gets N findings; the
 * bench kind itself makes none; and the vocabulary hint reaches a user whose setup names another
 * model than the one a vLLM server runs.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { summarizeRecords, type RequestRecord } from '../../src/core/bench/metrics';
import { toColumnar } from '../../src/core/bench/records';
import type { ReportSpec } from '../../src/core/bench/report';
import type { SweepResult } from '../../src/core/bench/sweep';
import { ruleList } from '../../src/core/checks';
import { createNotebookContext, prepareCell, runCell } from '../../src/core/engine/engine';
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
