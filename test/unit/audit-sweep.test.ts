/**
 * A realistic log of a four-point sweep, written here line by line in vLLM's V1 format: idle gaps
 * between the first points, one load change with no gap, a contaminated point whose prefix hit
 * rate climbs, and a point whose windows alternate between a prefill flood and decode. The audit
 * must find the points as segments and put each finding where it belongs and nowhere else.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { analyzeFacts, auditFile, auditText, runAudit } from '../../src/core/audit';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';
import { nodeFiles } from '../../src/core/host/files';

const pad = (n: number) => String(n).padStart(2, '0');

interface Win {
  prompt: number;
  gen: number;
  running: number;
  waiting?: number;
  kv: number;
  hit: number;
  requests?: number;
}

/** Writes a V1 log: startup block, then windows 10 s apart; `gap` seconds of silence where idle. */
class LogWriter {
  lines: string[] = [];
  private t = Date.UTC(2001, 6, 25, 10, 0, 0) / 1000;
  windowLines: number[] = [];
  private stamp() {
    const d = new Date(this.t * 1000);
    return `${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
  }
  raw(l: string) {
    this.lines.push(l);
  }
  info(file: string, msg: string, proc = '(EngineCore_DP0 pid=4711) ') {
    this.raw(`${proc}INFO ${this.stamp()} [${file}] ${msg}`);
  }
  startup() {
    this.raw(
      '\x1b[1;36m(APIServer pid=4650)\x1b[0;0m INFO 07-25 10:00:00 [api_server.py:1805] vLLM API server version 0.10.0',
    );
    this.info(
      'core.py:71',
      "Initializing a V1 LLM engine (v0.10.0) with config: model='Qwen/Qwen3-8B', speculative_config=None, tokenizer='Qwen/Qwen3-8B'",
    );
    this.raw('Loading safetensors checkpoint shards: 100% Completed | 5/5 [00:03<00:00,  1.28it/s]');
    this.t += 7;
    this.info('default_loader.py:262', 'Loading weights took 3.91 seconds');
    this.t += 1;
    this.info('gpu_model_runner.py:1846', 'Model loading took 15.2683 GiB and 4.731526 seconds');
    this.t += 22;
    this.info('gpu_worker.py:255', 'Available KV cache memory: 56.34 GiB');
    this.info('kv_cache_utils.py:833', 'GPU KV cache size: 410,240 tokens');
    this.info('kv_cache_utils.py:837', 'Maximum concurrency for 40,960 tokens per request: 10.02x');
    this.t += 22;
    this.info('gpu_model_runner.py:2439', 'Graph capturing finished in 22 secs, took 0.56 GiB');
    this.info('core.py:193', 'init engine (profile, create kv cache, warmup model) took 48.12 seconds');
    this.t += 18;
    this.info('topk_topp_sampler.py:49', 'Using FlashInfer for top-p & top-k sampling.');
  }
  idle(seconds: number) {
    this.t += seconds;
  }
  window(w: Win) {
    this.t += 10;
    for (let k = 0; k < (w.requests ?? 2); k++)
      this.raw(
        `\x1b[1;36m(APIServer pid=4650)\x1b[0;0m INFO:     127.0.0.1:${50000 + this.lines.length} - "POST /v1/completions HTTP/1.1" 200 OK`,
      );
    this.info(
      'loggers.py:122',
      `Engine 000: Avg prompt throughput: ${w.prompt.toFixed(1)} tokens/s, Avg generation throughput: ${w.gen.toFixed(1)} tokens/s, Running: ${w.running} reqs, Waiting: ${w.waiting ?? 0} reqs, GPU KV cache usage: ${w.kv.toFixed(1)}%, Prefix cache hit rate: ${w.hit.toFixed(1)}%`,
      '\x1b[1;36m(APIServer pid=4650)\x1b[0;0m ',
    );
    this.windowLines.push(this.lines.length);
  }
}

/** Point windows: a ramp window (prefill burst), steady windows, a draining tail. */
function steadyPoint(wr: LogWriter, c: number, gen: number, n: number, hit: (k: number) => number, kv: number) {
  wr.window({ prompt: gen * 3, gen: gen * 0.35, running: c, kv: kv * 0.5, hit: hit(0), requests: 0 });
  for (let k = 1; k < n - 1; k++)
    wr.window({
      prompt: gen * (0.95 + (0.1 * ((k * 7) % 3)) / 2),
      gen: gen * (0.97 + 0.03 * (k % 3)),
      running: c,
      kv,
      hit: hit(k),
      requests: c / 2,
    });
  wr.window({
    prompt: 0,
    gen: gen * 0.4,
    running: Math.max(1, Math.round(c / 4)),
    kv: kv * 0.3,
    hit: hit(n - 1),
    requests: c / 2,
  });
}

interface Sweep {
  text: string;
  /** 1-based line ranges of each point's windows. */
  points: { first: number; last: number }[];
  /** 1-based line of every stats window. */
  windowLines: number[];
}

function sweepLog(): Sweep {
  const wr = new LogWriter();
  wr.startup();
  const points: { first: number; last: number }[] = [];
  const mark = (fn: () => void) => {
    const before = wr.windowLines.length;
    fn();
    points.push({ first: wr.windowLines[before], last: wr.windowLines[wr.windowLines.length - 1] });
  };
  wr.idle(40);
  // Point 1: concurrency 1, clean.
  mark(() => steadyPoint(wr, 1, 88.4, 10, () => 0, 0.4));
  // vLLM prints one all-zero line as the engine goes idle, then nothing (DEBUG) while idle.
  wr.window({ prompt: 0, gen: 0, running: 0, kv: 0, hit: 0, requests: 0 });
  wr.raw('Traceback (most recent call last):');
  wr.idle(60);
  // Point 2: concurrency 16, clean (hit rate stays under 2%).
  mark(() => steadyPoint(wr, 16, 1400, 10, (k) => 0.1 * k, 6));
  wr.idle(45);
  // Point 3: concurrency 64 with the same seed as an earlier run: the hit rate climbs.
  mark(() => steadyPoint(wr, 64, 4100, 12, (k) => 4 + 5 * k, 25));
  // Point 4: concurrency 128 straight after, no idle gap: synchronized waves, prefill floods
  // alternating with decode. Fresh prompts: the rolling hit rate only decays.
  mark(() => {
    const hit = (k: number) => 59 - 3 * k;
    for (let k = 0; k < 12; k++) {
      if (k % 2 === 0)
        wr.window({ prompt: 10800 - 40 * k, gen: 700 + 60 * k, running: 128, kv: 45, hit: hit(k), requests: 20 });
      else wr.window({ prompt: 300 + 10 * k, gen: 4000 + 45 * k, running: 128, kv: 48, hit: hit(k), requests: 20 });
    }
  });
  return { text: wr.lines.join('\n') + '\n', points, windowLines: wr.windowLines };
}

const SWEEP = sweepLog();
let dir = '';
let logPath = '';

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-audit-sweep-'));
  fs.mkdirSync(path.join(dir, 'logs'));
  logPath = path.join(dir, 'logs', 'day4-vllm.log');
  fs.writeFileSync(logPath, SWEEP.text);
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

test('segments match the sweep points, split by idle gaps and by the load change', async () => {
  const { facts } = await auditFile(logPath);
  const { timeline } = analyzeFacts(facts);
  assert.equal(timeline.interval_s, 10);
  assert.equal(timeline.segments.length, 4);
  assert.deepEqual(
    timeline.segments.map((s) => [s.first_line, s.last_line]),
    SWEEP.points.map((p) => [p.first, p.last]),
  );
  assert.deepEqual(
    timeline.segments.map((s) => s.starts_after),
    ['start', 'idle', 'idle', 'load-change'],
  );
  assert.deepEqual(
    timeline.segments.map((s) => s.peak_running),
    [1, 16, 64, 128],
  );
  assert.equal(timeline.idle_windows, 1);
  assert.ok(timeline.missing_windows >= 9, `missing windows while idle: ${timeline.missing_windows}`);
  const s3 = timeline.segments[2];
  assert.equal(s3.hit_first_pct, 4);
  assert.equal(s3.hit_last_pct, 59);
  // Point 1 logged one access line in each window after its ramp: 8 steady + the tail.
  assert.equal(timeline.segments[0].requests, 9);
  assert.equal(
    facts.access.requests,
    facts.windows.toArray().reduce((a, w) => a + w.requests, 0),
  );
});

test('findings: KV pool matches the prediction; contamination only in point 3; interference only in point 4', async () => {
  const nb = createNotebookContext(dir, nodeFiles());
  const setup = await runCell(
    'setup: day4\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nweights: bf16\nkv_cache: bf16',
    0,
    nb,
  );
  assert.ok(setup.ok, JSON.stringify(setup.error));
  const r = await runCell('audit: logs/day4-vllm.log', 1, nb);
  assert.ok(r.ok, JSON.stringify(r.error));
  const by = (code: string) => r.findings.filter((f) => f.code === code);

  const kv = by('audit-kv-pool-matches');
  assert.equal(kv.length, 1, JSON.stringify(r.findings.map((f) => f.code)));
  assert.match(kv[0].message, /410,240 tokens/);
  assert.match(kv[0].message, /line 7\b/, 'cites the "GPU KV cache size" line');
  assert.deepEqual(kv[0].path, ['audit']);
  assert.equal(by('audit-kv-pool-mismatch').length, 0);

  const cont = by('audit-prefix-cache-contamination');
  assert.equal(cont.length, 1, cont.map((f) => f.message).join('\n'));
  assert.match(cont[0].message, /segment 3/);
  assert.match(cont[0].message, /from 0\.9% before it to a peak of 59\.0%/);
  assert.match(cont[0].message, /rising in 9 of 12 windows/);
  assert.match(
    cont[0].message,
    new RegExp(`lines ${SWEEP.windowLines[SWEEP.windowLines.indexOf(SWEEP.points[2].first) + 2]}, `),
    'cites the first window past the threshold',
  );
  assert.ok(
    cont[0].related &&
      cont[0].related.length > 0 &&
      /^line \d+: prefix cache hit rate/.test(cont[0].related[0].message),
  );

  const inter = by('audit-prefill-decode-interference');
  assert.equal(inter.length, 1, inter.map((f) => f.message).join('\n'));
  assert.match(inter[0].message, /segment 4/);
  assert.match(inter[0].message, /6 of 12 windows are prefill floods/);
  assert.match(inter[0].message, /generation crashed to 700–1,\d{3}/);
  assert.match(inter[0].message, /10,\d{3}–10,800 tok\/s/);
  assert.match(inter[0].message, new RegExp(`lines ${SWEEP.points[3].first}, `));

  const hb = by('audit-heartbeat-not-instrument');
  assert.equal(hb.length, 1);
  const v = r.values as any;
  assert.ok(v.heartbeat.log_mean_gen_tok_s < 0.9 * v.heartbeat.busy_mean_gen_tok_s, JSON.stringify(v.heartbeat));

  assert.equal(by('audit-sampler-selected').length, 1);
  for (const none of [
    'audit-sampler-fallback',
    'audit-preemptions',
    'audit-kv-cache-full',
    'audit-no-stats',
    'audit-unknown-lines',
  ])
    assert.equal(by(none).length, 0, none);

  // Values later cells can use.
  assert.equal(v.pool_tokens, 410240);
  assert.equal(v.available_kv_gib, 56.34);
  assert.equal(v.weights_gib, 15.2683);
  assert.equal(v.max_concurrency, 10.02);
  assert.equal(v.sampler, 'flashinfer');
  assert.equal(v.version, '0.10.0');
  assert.equal(v.model, 'Qwen/Qwen3-8B');
  assert.equal(v.segments.length, 4);
  assert.equal(v.unknown_lines, 2);
  assert.equal(v.lines, SWEEP.text.split('\n').length - 1);
  assert.equal(v.windows, 45);
  // The plot: a Vega-Lite spec with three panels and shaded segments, and its SVG.
  const plot = r.outputs.find((o) => o.items.some((i) => i.mime === MIME.vegaLite6));
  assert.ok(plot, 'a plot output');
  const spec = plot!.items.find((i) => i.mime === MIME.vegaLite6)!.data as any;
  assert.equal(spec.vconcat.length, 3);
  assert.equal(spec.vconcat[0].layer[0].data.values.length, 4, 'one shaded rect per segment');
  assert.match(String(plot!.items.find((i) => i.mime === MIME.svg)!.data), /^<svg/);
});

test('a KV pool prediction with the card memory in GB names the GB/GiB slip', async () => {
  const nb = createNotebookContext(dir, nodeFiles());
  await runCell('setup: gb\ngpu: {base: a100-sxm4-80gb, memory: 80 GB}\nmodel: qwen3-8b', 0, nb);
  const r = await runCell('audit: logs/day4-vllm.log\nplot: false', 1, nb);
  const mm = r.findings.filter((f) => f.code === 'audit-kv-pool-mismatch');
  assert.equal(mm.length, 1, JSON.stringify(r.findings.map((f) => f.code)));
  assert.match(mm[0].message, /GB\/GiB slip/);
  assert.match(mm[0].message, /ratio 1\.\d+/);
});

test('without a setup there is no KV-pool finding; a missing file is an error on the audit key', async () => {
  const nb = createNotebookContext(dir, nodeFiles());
  const r = await runCell('audit: logs/day4-vllm.log\nplot: false', 0, nb);
  assert.ok(r.ok);
  assert.equal(r.findings.filter((f) => f.code.startsWith('audit-kv-pool')).length, 0);
  const bad = await runCell('audit: logs/day5.log', 1, nb);
  assert.equal(bad.ok, false);
  assert.deepEqual(bad.error?.path, ['audit']);
  assert.match(bad.error!.message, /day5\.log/);
  assert.match(bad.error!.message, /relative to the notebook/);
});

test('a glob reads rotated logs oldest first as one timeline, citing file:line', async () => {
  const split = SWEEP.text.split('\n');
  const cut = SWEEP.points[2].first - 3; // in the idle gap before point 3
  const older = path.join(dir, 'logs', 'rot.log.1');
  const newer = path.join(dir, 'logs', 'rot.log');
  fs.writeFileSync(older, split.slice(0, cut).join('\n') + '\n');
  fs.writeFileSync(newer, split.slice(cut).join('\n'));
  const past = new Date(Date.now() - 3600_000);
  fs.utimesSync(older, past, past);
  const r = await runAudit('logs/rot.log*', dir, { plot: false });
  assert.equal(r.input.kind, 'files');
  assert.deepEqual(
    (r.input as any).paths.map((p: string) => path.basename(p)),
    ['rot.log.1', 'rot.log'],
  );
  assert.equal((r.values as any).segments.length, 4);
  const cont = r.findings.find((f) => f.code === 'audit-prefix-cache-contamination')!;
  assert.match(cont.message, /rot\.log:\d+/);
});

test('heartbeat: a batch-1 run that straddles two windows, idle on both sides, reads low in the log', () => {
  const l = (stamp: string, g: number, run: number) =>
    `INFO 07-25 ${stamp} [loggers.py:122] Engine 000: Avg prompt throughput: ${run ? 100 : 0}.0 tokens/s, Avg generation throughput: ${g} tokens/s, Running: ${run} reqs, Waiting: 0 reqs, GPU KV cache usage: 0.4%, Prefix cache hit rate: 0.0%`;
  // The idle windows on both sides are what shows that the run's windows include idle time.
  const facts = auditText(
    [l('11:00:00', 0, 0), l('11:00:10', 58.8, 1), l('11:00:20', 58.8, 1), l('11:00:30', 0, 0)].join('\n'),
  );
  const { findings } = analyzeFacts(facts);
  const hb = findings.find((f) => f.code === 'audit-heartbeat-not-instrument');
  assert.ok(hb);
  assert.match(hb!.message, /fewer than 3 windows/);
  assert.match(hb!.message, /58\.8 tok\/s\) is a lower bound/);
});

test('preemptions and a KV cache pinned full with requests waiting are found in their segment', () => {
  const l = (s: number, wait: number, pre: number, kv: number) =>
    `(APIServer pid=4650) INFO 12-04 12:00:${pad(s)} [loggers.py:248] Engine 000: Avg prompt throughput: 100.0 tokens/s, Avg generation throughput: 1788.6 tokens/s, Running: 96 reqs, Waiting: ${wait} reqs, Preemptions: ${pre}, GPU KV cache usage: ${kv}%, Prefix cache hit rate: 0.0%`;
  const facts = auditText([l(0, 0, 0, 80), l(10, 12, 3, 99.6), l(20, 10, 1, 99.1), l(30, 0, 0, 90)].join('\n'));
  const { findings, values } = analyzeFacts(facts);
  const pre = findings.find((f) => f.code === 'audit-preemptions')!;
  assert.match(pre.message, /Preemptions: 4 in segment 1/);
  const full = findings.find((f) => f.code === 'audit-kv-cache-full')!;
  assert.match(full.message, /2 of 4 windows/);
  assert.match(full.message, /lines 2, 3/);
  assert.equal(values.preemptions, 4);
});

test('a /metrics URL snapshot gives the same facts from counters', async () => {
  const body = [
    '# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig',
    '# TYPE vllm:cache_config_info gauge',
    'vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",gpu_memory_utilization="0.9",num_gpu_blocks="25640"} 1.0',
    '# TYPE vllm:prefix_cache_queries_total counter',
    'vllm:prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-8B"} 200000.0',
    '# TYPE vllm:prefix_cache_hits_total counter',
    'vllm:prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 90000.0',
    '# TYPE vllm:num_preemptions_total counter',
    'vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen3-8B"} 0.0',
    '# TYPE vllm:num_requests_running gauge',
    'vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 4.0',
    '# TYPE vllm:num_requests_waiting gauge',
    'vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 0.0',
    '# TYPE vllm:kv_cache_usage_perc gauge',
    'vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.12',
    '# TYPE vllm:generation_tokens_total counter',
    'vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 123456.0',
  ].join('\n');
  const server = http.createServer((req, res) => {
    if (req.url === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(body);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  try {
    const port = (server.address() as AddressInfo).port;
    const nb = createNotebookContext(dir);
    await runCell('setup: day4\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b', 0, nb);
    const r = await runCell(`audit: http://127.0.0.1:${port}/metrics`, 1, nb);
    assert.ok(r.ok, JSON.stringify(r.error));
    const v = r.values as any;
    assert.equal(v.pool_tokens, 410240);
    assert.equal(v.prefix_hit_pct, 45);
    assert.equal(v.running, 4);
    assert.equal(v.kv_usage_pct, 12);
    assert.equal(v.generation_tokens, 123456);
    assert.ok(r.findings.some((f) => f.code === 'audit-kv-pool-matches'));
    assert.ok(r.findings.some((f) => f.code === 'audit-prefix-cache-contamination'));
    const gone = await runCell(`audit: http://127.0.0.1:${port}/nothing`, 2, nb);
    assert.equal(gone.ok, false);
    assert.match(gone.error!.message, /404/);
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
  }
});
