/**
 * `import:` reads other load generators' result files (written here in each tool's documented
 * shape) and translates their metric definitions into vLLM's, saying which.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';
import { nodeFiles } from '../../src/core/host/files';
import type { CellResult } from '../../src/core/engine/types';
import { parseResult, sniffTool } from '../../src/core/imports/parsers';

const dir = path.join(import.meta.dirname, '../fixtures/imports');
const load = (f: string) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
const plain = (r: CellResult) =>
  r.outputs.map((o) => String(o.items.find((i) => i.mime === MIME.plain)?.data ?? '')).join('\n');

test('each tool is recognised from the keys only it writes', () => {
  assert.equal(sniffTool(load('vllm-save-result.json')), 'vllm');
  assert.equal(sniffTool(load('vllm-summary-only.json')), 'vllm');
  assert.equal(sniffTool(load('guidellm-benchmarks.json')), 'guidellm');
  assert.equal(sniffTool(load('aiperf-profile_export_aiperf.json')), 'aiperf');
  assert.equal(sniffTool(load('genai-bench-D1000-1000-c4.json')), 'genai-bench');
  assert.equal(sniffTool({ foo: 1 }), undefined);
});

test('vLLM: statistics recomputed from the per-request arrays, failed requests left out, TPOT as vLLM defines it', () => {
  const run = parseResult(load('vllm-save-result.json'), { percentiles: [99] });
  const p = run.points[0];
  assert.equal(p.completed, 3);
  assert.equal(p.failed, 1);
  assert.equal(p.concurrency, 2);
  assert.equal(p.label, 'concurrency 2');
  // TTFTs of the three successful requests: 60, 80, 100 ms (the failed one's 0 is not a TTFT).
  assert.ok(Math.abs(p.latency.ttft!.p50 - 80) < 1e-9);
  assert.ok(Math.abs(p.latency.ttft!.min - 60) < 1e-9);
  // TPOT per request = (latency − ttft) / (out − 1): (90−60)/3 = 10, (140−80)/3 = 20, (142−100)/3 = 14.
  assert.ok(Math.abs(p.latency.tpot!.mean - 44 / 3) < 1e-9);
  assert.ok(Math.abs(p.latency.tpot!.p50 - 14) < 1e-9);
  // ITL pools every chunk gap of the successful requests: nine gaps.
  assert.ok(Math.abs(p.latency.itl!.max - 20) < 1e-9);
  assert.ok(Math.abs(p.latency.e2e!.p50 - 140) < 1e-9);
  assert.equal(p.outputTokS, 6);
});

test('vLLM: a file without per-request arrays falls back to its summary keys, median read as p50', () => {
  const run = parseResult(load('vllm-summary-only.json'));
  const p = run.points[0];
  assert.equal(p.latency.ttft!.p50, 80);
  assert.equal(p.latency.ttft!.p99, 99.6);
  assert.equal(p.latency.e2e!.p99, 141.96);
  assert.match(run.warnings.join(' '), /no per-request arrays/);
});

test('GuideLLM: inter_token_latency becomes TPOT; its first-token-inclusive TPOT is not used; seconds become ms', () => {
  const run = parseResult(load('guidellm-benchmarks.json'));
  assert.equal(run.points.length, 2);
  const [a, b] = run.points;
  assert.equal(a.concurrency, 1);
  assert.equal(b.concurrency, 16);
  assert.equal(a.latency.tpot!.mean, 8.5); // inter_token_latency_ms, not time_per_output_token_ms (8.56)
  assert.equal(a.latency.e2e!.mean, 8550); // request_latency 8.55 s
  assert.equal(a.latency.ttft!.p99, 120);
  assert.equal(a.latency.ttft!['p99.9'], 150); // GuideLLM's p999
  assert.equal(a.latency.itl, undefined, 'GuideLLM keeps no per-chunk gaps');
  assert.equal(b.outputTokS, 1440);
  assert.equal(a.completed, 100);
  assert.equal(a.failed, 2);
  assert.match(run.translations.join(' '), /time_per_output_token_ms is not used/);
});

test('AIPerf: inter_token_latency is TPOT, inter_chunk_latency is ITL, units read from each metric', () => {
  const raw = load('aiperf-profile_export_aiperf.json');
  const p = parseResult(raw).points[0];
  assert.equal(p.latency.tpot!.mean, 8.64);
  assert.equal(p.latency.itl!.p99, 14);
  assert.equal(p.latency.ttft!.p50, 70);
  assert.equal(p.concurrency, 8);
  assert.equal(p.outputTokS, 920);
  // The same metric written in seconds comes out in ms.
  raw.time_to_first_token = { ...raw.time_to_first_token, unit: 's', p50: 0.07 };
  assert.equal(parseResult(raw).points[0].latency.ttft!.p50, 70);
  // AIPerf 0.1 nested its metrics under "records".
  const nested = { records: load('aiperf-profile_export_aiperf.json') };
  assert.equal(parseResult(nested, { tool: 'aiperf' }).points[0].latency.ttft!.p50, 70);
});

test('genai-bench: seconds by default, ms when the run said so; tpot is vLLM’s TPOT', () => {
  const raw = load('genai-bench-D1000-1000-c4.json');
  const p = parseResult(raw).points[0];
  assert.equal(p.concurrency, 4);
  assert.ok(Math.abs(p.latency.ttft!.p50 - 63) < 1e-9);
  assert.ok(Math.abs(p.latency.tpot!.mean - 8.8) < 1e-9);
  assert.equal(p.outputTokS, 455);
  const asMs = parseResult(raw, { timeUnit: 'ms' }).points[0];
  assert.equal(asMs.latency.ttft!.p50, 0.063);
});

test('an import cell reads a file beside the notebook, shows the translation and exposes per-point values', async () => {
  const nb = createNotebookContext(dir, { ...nodeFiles() });
  const r = await runCell('import: guidellm-benchmarks.json', 0, nb);
  assert.ok(r.ok, r.error?.message);
  const text = plain(r);
  assert.match(text, /imported from GuideLLM/);
  assert.match(text, /inter_token_latency_ms → TPOT/);
  assert.match(text, /concurrency 16/);
  const v = r.values as any;
  assert.equal(v.tool, 'guidellm');
  assert.equal(v.points[1].tpot_ms.mean, 11);
  assert.equal(v.points[0].concurrency, 1);
  // Facts in vLLM's definitions, at their points, for checks and compare.
  const tpot16 = r.facts.find(
    (f) => f.kind === 'latency' && f.metric === 'tpot' && f.stat === 'mean' && f.point?.concurrency === 16,
  );
  assert.ok(tpot16 && tpot16.kind === 'latency' && tpot16.ms === 11 && tpot16.source === 'import: guidellm');
  assert.ok(r.facts.some((f) => f.kind === 'latency' && f.stat === 'p99.9'));
  assert.ok(r.facts.some((f) => f.kind === 'throughput' && f.metric === 'output' && f.tok_s === 1440));
});

test('several files make one run; a file of no known tool is refused with what was expected', async () => {
  const nb = createNotebookContext(dir, { ...nodeFiles() });
  const r = await runCell('import: [vllm-save-result.json, genai-bench-D1000-1000-c4.json]', 0, nb);
  assert.ok(r.ok, r.error?.message);
  assert.equal((r.values as any).points.length, 2);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-import-'));
  try {
    fs.writeFileSync(path.join(tmp, 'x.json'), '{"hello": 1}');
    fs.writeFileSync(path.join(tmp, 'bad.json'), '{"ttfts": [');
    const nb2 = createNotebookContext(tmp, { ...nodeFiles() });
    const bad = await runCell('import: x.json', 0, nb2);
    assert.equal(bad.ok, false);
    assert.match(bad.error!.message, /expected vllm bench serve --save-result JSON/);
    const notJson = await runCell('import: bad.json', 0, nb2);
    assert.match(notJson.error!.message, /is not JSON/);
    const missing = await runCell('import: nope.json', 0, nb2);
    assert.match(missing.error!.message, /Cannot read "nope.json"/);
    const wrongTool = await runCell('import: x.json\ntool: guidellm', 0, nb2);
    assert.match(wrongTool.error!.message, /as guidellm/);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('imported points get the physics checks a bench gets, with the setup in force: an impossible TTFT and TPOT are flagged', async () => {
  // vLLM bench serve --save-result (summary keys only): 1,000-token prompts at max_concurrency 2,
  // with a TTFT no A100 can prefill (the floor is 2·8.2 B·1000 / 312 TFLOP/s ≈ 52 ms) and a TPOT
  // faster than reading Qwen3-8B's bf16 weights once (≈ 16 GB / 2,039 GB/s ≈ 8 ms).
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-import-'));
  const result = load('vllm-summary-only.json');
  Object.assign(result, { mean_ttft_ms: 3, median_ttft_ms: 3, std_ttft_ms: 0.5, p99_ttft_ms: 4 });
  Object.assign(result, { mean_tpot_ms: 2, median_tpot_ms: 2, std_tpot_ms: 0.1, p99_tpot_ms: 2.5 });
  fs.writeFileSync(path.join(tmp, 'impossible.json'), JSON.stringify(result));
  fs.copyFileSync(path.join(dir, 'vllm-summary-only.json'), path.join(tmp, 'plausible.json'));
  const setup = 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b';
  const nb = createNotebookContext(tmp, { ...nodeFiles() });
  assert.ok((await runCell(setup, 0, nb)).ok);
  const bad = await runCell('import: impossible.json', 1, nb);
  assert.ok(bad.ok, bad.error?.message);
  const ttft = bad.findings.find((f) => f.code === 'ttft-below-prefill-floor');
  assert.ok(ttft, JSON.stringify(bad.findings.map((f) => f.code)));
  assert.match(
    ttft.message,
    /TTFT p50 3 ms at concurrency 2 is below the [\d.]+ ms compute floor .*1,000-token prompt on .*a100-sxm4-80gb/,
  );
  assert.deepEqual(ttft.path, ['import'], 'on the import line');
  assert.ok(
    bad.findings.some((f) => f.code === 'tpot-below-decode-floor'),
    JSON.stringify(bad.findings.map((f) => f.code)),
  );
  // The same tool's file with possible numbers, and the impossible one with no setup to judge it by: no such finding.
  const ok = await runCell('import: plausible.json', 2, nb);
  assert.ok(ok.ok && !ok.findings.some((f) => /floor/.test(f.code)), JSON.stringify(ok.findings.map((f) => f.code)));
  const alone = await runCell('import: impossible.json', 0, createNotebookContext(tmp, { ...nodeFiles() }));
  assert.ok(alone.ok && !alone.findings.some((f) => /floor/.test(f.code)));
  // Several files: each file's findings stand on its own line of the list.
  const two = await runCell('import: [plausible.json, impossible.json]', 3, nb);
  assert.deepEqual(
    two.findings.filter((f) => f.code === 'ttft-below-prefill-floor').map((f) => f.path),
    [['import', 1]],
  );
});
