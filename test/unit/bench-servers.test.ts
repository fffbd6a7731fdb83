/**
 * The bench against the servers people really run, as scripted servers that behave the way those
 * servers' sources say (test/support/scriptedServer.ts names the versions): llama.cpp's
 * llama-server, vLLM's continuous usage stats and error chunks, SGLang's metrics, and hostile
 * servers (endless streams, pings, lying usage, truncated prompts, reasoning deltas).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sloOf } from '../../src/core/facts/stat';
import { runSweep } from '../../src/core/bench';
import { createAgent, getText, sendRequest, type ClientConfig } from '../../src/core/bench/client';
import { saveResultArrays } from '../../src/core/bench/saveResult';
import { rttVerdict } from '../../src/core/bench/crosscheck';
import { fromColumnar } from '../../src/core/bench/records';
import { benchValues, runFacts, summaryTable, type ReportSpec } from '../../src/core/bench/report';
import type { SweepOptions, SweepResult } from '../../src/core/bench/sweep';
import { MIME } from '../../src/core/engine/outputs';
import { sweepFindings } from '../support/benchFindings';
import { startScriptedServer, type ScriptedServerOptions } from '../support/scriptedServer';

const opts = (endpoint: string, o: Partial<SweepOptions> = {}): SweepOptions => ({
  endpoint,
  vocab: 32000,
  input: 32,
  output: 8,
  concurrency: [1],
  requests: 3,
  idleTimeoutMs: 2000,
  doneGraceMs: 150,
  ...o,
});

const spec = (o: Partial<ReportSpec> = {}): ReportSpec => ({
  loop: 'closed',
  input: 32,
  output: 8,
  requests: 3,
  seed: { mode: 'per-point', base: 1 },
  percentiles: [90, 99],
  ...o,
});

async function withServer<T>(
  o: ScriptedServerOptions,
  fn: (url: string, s: Awaited<ReturnType<typeof startScriptedServer>>) => Promise<T>,
) {
  const s = await startScriptedServer({ ttftMs: 3, itlMs: 1, ...o });
  try {
    return await fn(s.url, s);
  } finally {
    await s.close();
  }
}

const plain = (o: { items: { mime: string; data: unknown }[] }) =>
  String(o.items.find((i) => i.mime === MIME.plain)!.data);
const codes = (r: SweepResult, sp = spec()) => sweepFindings(r, sp).map((f) => f.code);

test('llama.cpp stream: a 64-token request gives 64 text chunks and 63 ITL gaps (its empty last chunk is no token), completions and chat', async () => {
  for (const api of ['completions', 'chat'] as const)
    await withServer({ flavor: 'llamacpp' }, async (url) => {
      const r = await runSweep(opts(url, { api, output: 64, requests: 2 }), { worker: 'off' });
      const recs = fromColumnar(r.points[0].records!);
      for (const x of recs) {
        assert.equal(x.errorKind, undefined, `${api}: ${x.errorMessage}`);
        assert.equal(x.chunkMs.length, 64, api);
        assert.equal(x.outputTokens, 64);
      }
      assert.equal(r.points[0].metrics.itl_ms.n, 2 * 63, api);
    });
});

test('a server that closes every keep-alive connection after a streamed response: 1,000 requests at concurrency 8, no failures, retries recorded', async () => {
  await withServer({ flavor: 'llamacpp', ttftMs: 0, itlMs: 0, closeAfterStreamMs: 20 }, async (url, s) => {
    const r = await runSweep(opts(url, { output: 2, concurrency: [8], requests: 1000 }), { worker: 'off' });
    const p = r.points[0];
    assert.equal(p.metrics.failed, 0, JSON.stringify(p.metrics.errors));
    assert.equal(p.metrics.completed, 1000);
    // Requests written on a closing connection were dropped unseen, sent again, and say so; the
    // server saw every request exactly once.
    assert.ok(s.closed.dropped > 0, 'the server dropped requests written on closing connections');
    assert.ok(p.metrics.retried >= s.closed.dropped);
    assert.equal(s.requests.length, 1000);
    const recs = fromColumnar(p.records!);
    assert.equal(recs.filter((x) => x.retries === 1).length, p.metrics.retried);
    assert.match(recs.find((x) => x.retries)!.retryError!, /closed before any response/);
    assert.ok(codes(r).includes('bench-retries'));
    assert.match(plain(summaryTable(r, spec({ requests: 1000 }), 't')), /1000\/1000 \(\d+ retried\)/);
  });
});

test('RTT is a TCP connect: it stays below the TTFT it is quoted in even when GET /v1/models is slow, and says how many probes', async () => {
  await withServer({ ttftMs: 50 }, async (url) => {
    const r = await runSweep(opts(url, { rttProbes: 4 }), { worker: 'off' });
    assert.equal(r.rtt!.n, 4);
    assert.equal(r.rtt!.method, 'tcp-connect');
    assert.ok(r.rtt!.median_ms < r.points[0].metrics.ttft_ms.median);
    assert.equal(r.rtt!.reliable, true);
    assert.match(plain(summaryTable(r, spec(), 't')), /median of 4 TCP connects/);
  });
  // A probe above a median TTFT is not quoted.
  const v = rttVerdict(26.3, [3.4, 9]);
  assert.equal(v.reliable, false);
  assert.match(v.reason!, /26\.30 ms.*3\.40 ms/);
});

test("vLLM's continuous_usage_stats (usage in every chunk): the stream is read to its end, no [DONE] wait after the first chunk", async () => {
  await withServer({ continuousUsage: true, itlMs: 20 }, async (url) => {
    const r = await runSweep(opts(url, { output: 20, doneGraceMs: 100 }), { worker: 'off' });
    for (const x of fromColumnar(r.points[0].records!)) {
      assert.equal(x.errorKind, undefined, x.errorMessage);
      assert.equal(x.chunkMs.length, 20);
      assert.equal(x.outputTokens, 20);
      // E2E spans the whole stream (19 gaps of 20 ms), not the grace period after the first chunk.
      assert.ok(x.chunkMs[19] - x.chunkMs[0] >= 19 * 20 * 0.9);
    }
  });
});

test("errors in the stream are API errors with the server's message: vLLM's unwrapped error chunk, an SSE error event, llama.cpp's error: line", async () => {
  const cases = [
    { kind: 'object-error' as const, message: /prompt too long for the KV cache/ },
    { kind: 'event-error' as const, message: /upstream model crashed/ },
    { kind: 'error-line' as const, message: /llama_decode failed: KV cache is full/ },
  ];
  for (const c of cases)
    await withServer({ fault: () => ({ kind: c.kind, afterChunks: 2 }) }, async (url) => {
      const r = await runSweep(opts(url, { requests: 2 }), { worker: 'off' });
      for (const x of fromColumnar(r.points[0].records!)) {
        assert.equal(x.errorKind, 'api-error', `${c.kind}: ${x.errorKind} ${x.errorMessage}`);
        assert.equal(x.ok, false);
        assert.match(x.errorMessage!, c.message);
      }
    });
});

test('usage that cannot be true is flagged: 1,000 tokens over 8 chunks, and negative counts', async () => {
  await withServer({ fault: () => ({ kind: 'usage', completion: 1000 }) }, async (url) => {
    const r = await runSweep(opts(url), { worker: 'off' });
    const p = r.points[0];
    assert.equal(p.usage!.completion_mismatch, 3);
    assert.equal(p.usage!.tokens_per_chunk, 125);
    const c = codes(r);
    assert.ok(c.includes('usage-implausible') && c.includes('usage-output-drift'), c.join());
  });
  await withServer({ fault: () => ({ kind: 'usage', completion: -5 }) }, async (url) => {
    const r = await runSweep(opts(url), { worker: 'off' });
    const p = r.points[0];
    for (const x of fromColumnar(p.records!)) {
      assert.equal(x.errorKind, 'bad-usage');
      assert.equal(x.ok, true);
      assert.equal(x.outputTokens, 8, 'counted from chunks');
    }
    assert.ok(p.metrics.output_throughput > 0);
    assert.ok(codes(r).includes('usage-not-a-count'));
  });
});

test("prompt drift and the server's vocabulary: usage.prompt_tokens against the request, meta.n_vocab from llama.cpp's /v1/models, a model the setup does not name", async () => {
  await withServer(
    { flavor: 'llamacpp', maxPromptTokens: 20, vocab: 5000, model: 'llama-3.2-1b-q4_k_m.gguf' },
    async (url, s) => {
      const r = await runSweep(opts(url, { vocab: 151936, setupModel: ['qwen3-8b', 'Qwen3-8B'] }), { worker: 'off' });
      const p = r.points[0];
      assert.equal(p.usage!.prompt_tokens_mean, 20);
      assert.ok(Math.abs(p.usage!.prompt_drift! - (20 / 32 - 1)) < 1e-9);
      assert.ok(codes(r).includes('usage-prompt-drift'));
      assert.deepEqual(r.vocab, { size: 5000, source: 'server', server: 5000, setup: 151936 });
      for (const q of s.requests) assert.ok((q.prompt as number[]).every((id) => id < 5000));
      assert.ok(
        r.notes.some((n) => /serves "llama-3\.2-1b-q4_k_m\.gguf", the setup names "Qwen3-8B"/.test(n)),
        r.notes.join('\n'),
      );
      const facts = plain(runFacts({ ...r }, spec()));
      assert.match(facts, /20(\.0)? per request by usage\.prompt_tokens, against 32 sent/);
    },
  );
});

test("server telemetry beyond vLLM: llama.cpp's llamacpp:* and SGLang's sglang:* counters, cross-checked against the client's token totals", async () => {
  for (const flavor of ['llamacpp', 'sglang', 'vllm'] as const)
    await withServer({ flavor, metrics: 'current' }, async (url) => {
      const r = await runSweep(opts(url, { warmup: 2 }), { worker: 'off' });
      assert.equal(r.metricsAvailable, true, flavor);
      assert.equal(r.telemetry!.dialect, flavor);
      const c = r.points[0].serverCounters!;
      assert.ok(c, flavor);
      // 3 measured + 2 warm-up requests of 8 output tokens.
      assert.deepEqual(c.generation, { client: 40, server: 40, diff: 0, rel: 0 }, flavor);
      assert.equal(c.prompt!.client, 5 * 32);
      assert.equal(c.agree, true);
      const facts = plain(runFacts(r, spec()));
      assert.match(
        facts,
        /server counter cross-check\s.*generation tokens 40 \(server\) vs 40 \(client\), equal/,
        flavor,
      );
    });
});

test('a point with fewer requests than its concurrency is warned, and the table shows the peak in flight', async () => {
  await withServer({}, async (url) => {
    const r = await runSweep(opts(url, { concurrency: [16], requests: 8 }), { worker: 'off' });
    const p = r.points[0];
    assert.equal(p.load!.peak_in_flight, 8);
    assert.equal(p.load!.fewer_requests_than_concurrency, true);
    assert.ok(codes(r).includes('load-below-concurrency'));
    assert.match(plain(summaryTable(r, spec(), 't')), /c=16 \(peak 8\)/);
  });
});

test('an SLO on the p99 is judged on the p99 even when the percentiles asked for leave it out', async () => {
  await withServer({}, async (url) => {
    const r = await runSweep(opts(url, { percentiles: [90], slo: sloOf({ ttft_p99: 10_000 }) }), { worker: 'off' });
    const m = r.points[0].metrics;
    assert.ok(Number.isFinite(m.ttft_ms.p.p99));
    assert.equal(m.slo_met, true);
    assert.equal(m.good_requests, 3);
  });
});

const cfg = (url: string, o: Partial<ClientConfig> = {}): ClientConfig => ({
  baseUrl: url,
  api: 'completions',
  model: 'm',
  idleTimeoutMs: 1000,
  requestTimeoutMs: 2500,
  doneGraceMs: 100,
  topP: 0.95,
  topK: 50,
  temperature: 1,
  ...o,
});

test('hangs end: an endless stream at the request timeout, endless pings at the stream-idle timeout (comments do not count)', async () => {
  const agent = createAgent(2);
  try {
    await withServer({ fault: () => ({ kind: 'endless' }) }, async (url) => {
      const r = await sendRequest(agent, cfg(url), { prompt: [1, 2], outputTokens: 4 });
      assert.equal(r.errorKind, 'timeout');
      assert.match(r.errorMessage!, /request timeout/);
      assert.ok(r.chunkAt.length > 10);
    });
    await withServer({ fault: () => ({ kind: 'pings', afterChunks: 2, everyMs: 20 }) }, async (url) => {
      const r = await sendRequest(agent, cfg(url, { requestTimeoutMs: 0 }), { prompt: [1, 2], outputTokens: 8 });
      assert.equal(r.errorKind, 'timeout');
      assert.match(r.errorMessage!, /stream idle timeout; comments and pings do not count/);
    });
  } finally {
    await agent.close();
  }
  // Both limits are stated in the run facts, with their defaults.
  await withServer({}, async (url) => {
    const r = await runSweep(opts(url, { idleTimeoutMs: undefined }), { worker: 'off' });
    assert.deepEqual(r.timeouts, { request_ms: 600_000, stream_idle_ms: 60_000 });
    assert.match(plain(runFacts(r, spec())), /timeouts\s+request 600 s; stream idle 60 s/);
  });
});

test('reasoning deltas before the answer: time to first token of any kind and time to first content token, both named', async () => {
  for (const field of ['reasoning_content', 'reasoning'] as const)
    await withServer({ reasoningChunks: 5, reasoningField: field, itlMs: 5 }, async (url) => {
      const r = await runSweep(opts(url, { api: 'chat', output: 10 }), { worker: 'off' });
      const m = r.points[0].metrics;
      const recs = fromColumnar(r.points[0].records!);
      for (const x of recs) {
        assert.equal(x.chunkMs.length, 10);
        assert.equal(x.firstContentMs, x.chunkMs[5]);
      }
      assert.ok(m.ttft_content_ms!.median >= m.ttft_ms.median, field);
      const v = benchValues(r, spec()) as { points: { ttft_content_ms?: unknown }[] };
      assert.ok(v.points[0].ttft_content_ms);
      assert.match(plain(runFacts(r, spec())), /TTFT content = first chunk carrying answer text/);
    });
});

test('wire oddities: CR-only line endings, a gzip-encoded error body, a 302', async () => {
  const agent = createAgent(2);
  try {
    await withServer({ fault: () => ({ kind: 'cr-only' }) }, async (url) => {
      const r = await sendRequest(agent, cfg(url), { prompt: [1], outputTokens: 6 });
      assert.equal(r.errorKind, undefined, r.errorMessage);
      assert.equal(r.chunkAt.length, 6);
      assert.equal(r.outputTokens, 6);
    });
    await withServer(
      { fault: () => ({ kind: 'gzip-status', status: 500, body: '{"error":{"message":"CUDA out of memory"}}' }) },
      async (url) => {
        const r = await sendRequest(agent, cfg(url), { prompt: [1], outputTokens: 6 });
        assert.equal(r.errorKind, 'server-error');
        assert.match(r.errorMessage!, /CUDA out of memory/);
        assert.doesNotMatch(r.errorMessage!, /[\u0000-\u0008\u000e-\u001f\ufffd]/);
      },
    );
    await withServer(
      { fault: () => ({ kind: 'redirect', status: 302, location: 'https://login.example/sso' }) },
      async (url) => {
        const r = await sendRequest(agent, cfg(url), { prompt: [1], outputTokens: 6 });
        assert.equal(r.errorKind, 'redirect');
        assert.match(r.errorMessage!, /HTTP 302: a redirect to https:\/\/login\.example\/sso, not followed/);
      },
    );
  } finally {
    await agent.close();
  }
});

test('raw data out: vLLM --save-result per-request arrays; a GET body past its cap is cut off and named', async () => {
  await withServer({ metrics: 'current' }, async (url) => {
    const r = await runSweep(opts(url), { worker: 'off' });
    const a = saveResultArrays(r.points[0])!;
    assert.deepEqual(a.input_lens, [32, 32, 32]);
    assert.deepEqual(a.output_lens, [8, 8, 8]);
    assert.equal((a.itls[0] as number[]).length, 7);
    assert.ok((a.ttfts as number[]).every((x) => x > 0 && x < 1));
    assert.deepEqual(a.errors, ['', '', '']);
    const agent = createAgent(1);
    try {
      await assert.rejects(
        getText(agent, url, '/metrics', undefined, 5000, 100),
        /passed .* \(the cap for \/metrics\)/,
      );
    } finally {
      await agent.close();
    }
  });
});
