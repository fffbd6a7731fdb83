/**
 * The vLLM log parser against every example line of the formats reference, plus the variants it
 * names: process prefixes, ANSI colour, the old bracket-less prefix, V0 and V1 stats, preemption
 * warnings, tensor-parallel duplicates, data-parallel engines, and timestamps with no year.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { auditFile, auditText, classifyLine, LogClock } from '../../src/core/audit';

// The example lines of the formats reference, verbatim (also in test/fixtures/logs/vllm-logs-examples.log).
const EX = {
  loadingWeights: 'INFO 07-25 10:01:07 [default_loader.py:262] Loading weights took 3.91 seconds',
  modelLoading: 'INFO 07-25 10:01:08 [gpu_model_runner.py:1846] Model loading took 15.2683 GiB and 4.731526 seconds',
  availableKv: 'INFO 07-25 10:01:30 [gpu_worker.py:255] Available KV cache memory: 56.34 GiB',
  kvSize: 'INFO 07-25 10:01:30 [kv_cache_utils.py:833] GPU KV cache size: 410,240 tokens',
  maxConc: 'INFO 07-25 10:01:30 [kv_cache_utils.py:837] Maximum concurrency for 40,960 tokens per request: 10.02x',
  graphs: 'INFO 07-25 10:01:52 [gpu_model_runner.py:2439] Graph capturing finished in 22 secs, took 0.56 GiB',
  flashinfer: 'INFO 07-25 10:02:10 [topk_topp_sampler.py:49] Using FlashInfer for top-p & top-k sampling.',
  statsEngine:
    'INFO 07-25 10:02:20 [loggers.py:122] Engine 000: Avg prompt throughput: 1523.4 tokens/s, Avg generation throughput: 812.7 tokens/s, Running: 24 reqs, Waiting: 0 reqs, GPU KV cache usage: 18.3%, Prefix cache hit rate: 42.1%',
  statsA:
    'INFO 03-20 09:00:10 [loggers.py:80] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 95.2 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.3%, Prefix cache hit rate: 0.0%',
  engineCoreKv:
    '(EngineCore_DP0 pid=4711) INFO 10-03 12:00:00 [gpu_worker.py:298] Available KV cache memory: 55.13 GiB',
  statsPreempt:
    '(APIServer pid=4650) INFO 12-04 12:00:10 [loggers.py:248] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 1788.6 tokens/s, Running: 96 reqs, Waiting: 12 reqs, Preemptions: 3, GPU KV cache usage: 99.6%, Prefix cache hit rate: 0.0%',
  statsV0:
    'INFO 04-29 10:00:05 [metrics.py:486] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 412.3 tokens/s, Running: 32 reqs, Swapped: 0 reqs, Pending: 5 reqs, GPU KV cache usage: 97.9%, CPU KV cache usage: 0.0%.',
  prefixV0: 'INFO 04-29 10:00:05 [metrics.py:502] Prefix cache hit rate: GPU: 37.50%, CPU: 0.00%',
  statsV0Old:
    'INFO 09-01 10:00:05 metrics.py:351] Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 30.1 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%.',
  fallback:
    'WARNING 04-29 10:02:00 [topk_topp_sampler.py:69] FlashInfer is not available. Falling back to the PyTorch-native implementation of top-p & top-k sampling. For the best performance, please install FlashInfer.',
  access: '(APIServer pid=4650) INFO:     127.0.0.1:53014 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
};

test('every example line of the formats reference is classified with its fields', () => {
  let c = classifyLine(EX.loadingWeights);
  assert.equal(c.kind, 'startup');
  assert.deepEqual(c.startup, { key: 'weights_load_s', value: 3.91 });
  assert.equal(c.stamp, '07-25 10:01:07');
  assert.equal(c.level, 'INFO');

  c = classifyLine(EX.modelLoading);
  assert.equal(c.startup?.key, 'weights_gib');
  assert.equal(c.startup?.value, 15.2683);
  assert.equal(c.startup?.extra?.seconds, 4.731526);

  c = classifyLine(EX.availableKv);
  assert.deepEqual(c.startup, { key: 'available_kv_gib', value: 56.34 });

  c = classifyLine(EX.kvSize);
  assert.deepEqual(c.startup, { key: 'pool_tokens', value: 410240 });

  c = classifyLine(EX.maxConc);
  assert.equal(c.startup?.key, 'max_concurrency');
  assert.equal(c.startup?.value, 10.02);
  assert.equal(c.startup?.extra?.tokens_per_request, 40960);

  c = classifyLine(EX.graphs);
  assert.equal(c.startup?.key, 'cuda_graph');
  assert.equal(c.startup?.value, 0.56);
  assert.equal(c.startup?.extra?.seconds, 22);

  c = classifyLine(EX.flashinfer);
  assert.equal(c.kind, 'sampler');
  assert.equal(c.sampler?.backend, 'flashinfer');

  c = classifyLine(EX.statsEngine);
  assert.equal(c.kind, 'stats');
  assert.deepEqual(c.stats, {
    format: 'v1',
    engine: 0,
    prompt_tok_s: 1523.4,
    gen_tok_s: 812.7,
    running: 24,
    waiting: 0,
    kv_usage_pct: 18.3,
    prefix_hit_pct: 42.1,
  });

  c = classifyLine(EX.statsA);
  assert.deepEqual(c.stats, {
    format: 'v1',
    prompt_tok_s: 0,
    gen_tok_s: 95.2,
    running: 1,
    waiting: 0,
    kv_usage_pct: 0.3,
    prefix_hit_pct: 0,
  });
  assert.equal(c.stamp, '03-20 09:00:10');

  c = classifyLine(EX.engineCoreKv);
  assert.equal(c.process, 'EngineCore_DP0');
  assert.deepEqual(c.startup, { key: 'available_kv_gib', value: 55.13 });

  c = classifyLine(EX.statsPreempt);
  assert.equal(c.process, 'APIServer');
  assert.deepEqual(c.stats, {
    format: 'v1',
    engine: 0,
    prompt_tok_s: 0,
    gen_tok_s: 1788.6,
    running: 96,
    waiting: 12,
    preemptions: 3,
    kv_usage_pct: 99.6,
    prefix_hit_pct: 0,
  });

  c = classifyLine(EX.statsV0);
  assert.deepEqual(c.stats, {
    format: 'v0',
    prompt_tok_s: 0,
    gen_tok_s: 412.3,
    running: 32,
    swapped: 0,
    waiting: 5,
    kv_usage_pct: 97.9,
    cpu_kv_usage_pct: 0,
  });

  c = classifyLine(EX.prefixV0);
  assert.equal(c.kind, 'prefix-v0');
  assert.deepEqual(c.prefixV0, { gpu_pct: 37.5, cpu_pct: 0 });

  c = classifyLine(EX.statsV0Old);
  assert.equal(c.kind, 'stats', 'the bracket-less prefix of logs before 2025-02');
  assert.equal(c.stamp, '09-01 10:00:05');
  assert.deepEqual(c.stats, {
    format: 'v0',
    prompt_tok_s: 12,
    gen_tok_s: 30.1,
    running: 1,
    swapped: 0,
    waiting: 0,
    kv_usage_pct: 0.1,
    cpu_kv_usage_pct: 0,
  });

  c = classifyLine(EX.fallback);
  assert.equal(c.kind, 'sampler');
  assert.equal(c.level, 'WARNING');
  assert.equal(c.sampler?.backend, 'fallback');

  c = classifyLine(EX.access);
  assert.equal(c.kind, 'access');
  assert.equal(c.process, 'APIServer');
  assert.deepEqual(c.access, { client: '127.0.0.1:53014', method: 'POST', path: '/v1/chat/completions', status: 200 });
});

test('the fixture of example lines matches the reference lines exactly', () => {
  const text = fs.readFileSync(path.join(import.meta.dirname, '../fixtures/logs/vllm-logs-examples.log'), 'utf8');
  assert.deepEqual(text.trimEnd().split('\n'), Object.values(EX));
  const f = auditText(text);
  assert.equal(f.unknown_lines, 0);
  assert.equal(f.other_lines, 0);
  assert.equal(f.lines, 16);
});

test('the other message variants: fallback texts, E+ fields, aggregated engines, uvicorn without a prefix, V0 blocks', () => {
  for (const t of [
    'Falling back to default sampling implementation.',
    'Currently, FlashInfer top-p & top-k sampling sampler is disabled, using PyTorch-native sampler.',
  ])
    assert.equal(classifyLine(`WARNING 01-02 03:04:05 [topk_topp_sampler.py:80] ${t}`).sampler?.backend, 'fallback', t);
  const e = classifyLine(
    'INFO 01-02 03:04:05 [loggers.py:200] Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 20.0 tokens/s, Running: 3 reqs, Waiting: 1 reqs, Deferred: 2 reqs, Preemptions: 0, GPU KV cache usage: 5.0%, Prefix cache hit rate: 12.5%, External prefix cache hit rate: 1.0%, MM cache hit rate: 2.0%',
  );
  assert.equal(e.stats?.deferred, 2);
  assert.equal(e.stats?.prefix_hit_pct, 12.5);
  assert.equal(e.stats?.external_prefix_hit_pct, 1);
  assert.equal(e.stats?.mm_hit_pct, 2);
  const agg = classifyLine(
    'INFO 01-02 03:04:05 [loggers.py:200] 2 Engines Aggregated: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%, Prefix cache hit rate: 0.0%',
  );
  assert.equal(agg.stats?.aggregatedEngines, 2);
  const acc = classifyLine('INFO:     10.0.0.7:5000 - "GET /metrics HTTP/1.1" 404 Not Found');
  assert.deepEqual(acc.access, { client: '10.0.0.7:5000', method: 'GET', path: '/metrics', status: 404 });
  const blocks = classifyLine('INFO 01-02 03:04:05 [executor_base.py:112] # GPU blocks: 25640, # CPU blocks: 2048');
  assert.deepEqual(blocks.startup, { key: 'gpu_blocks', value: 25640, extra: { cpu_blocks: 2048 } });
  const prof = classifyLine(
    'INFO 01-02 03:04:05 [worker.py:267] Memory profiling takes 4.1 seconds; the current vLLM instance can use total_gpu_memory (79.15GiB) x gpu_memory_utilization (0.90) = 71.24GiB; model weights take 15.27GiB; non_torch_memory takes 0.21GiB; PyTorch activation peak memory takes 1.45GiB; the rest of the memory reserved for KV Cache is 54.31GiB.',
  );
  assert.deepEqual(prof.startup, { key: 'available_kv_gib', value: 54.31 });
  const init = classifyLine(
    'INFO 01-02 03:04:05 [core.py:193] init engine (profile, create kv cache, warmup model) took 48.12 seconds',
  );
  assert.deepEqual(init.startup, { key: 'engine_init_s', value: 48.12 });
  const ver = classifyLine(
    '(APIServer pid=1) INFO 01-02 03:04:05 [api_server.py:1805] vLLM API server version 0.10.1.1',
  );
  assert.deepEqual(ver.startup, { key: 'version', value: '0.10.1.1' });
  const cfg = classifyLine(
    "(EngineCore_0 pid=2) INFO 01-02 03:04:05 [core.py:71] Initializing a V1 LLM engine (v0.10.0) with config: model='Qwen/Qwen3-8B', speculative_config=None, tokenizer='Qwen/Qwen3-8B'",
  );
  assert.equal(cfg.startup?.value, '0.10.0');
  assert.equal(cfg.configModel, 'Qwen/Qwen3-8B');
  const nd = classifyLine(
    "(APIServer pid=1) INFO 01-02 03:04:05 [utils.py:326] non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'max_model_len': 4096}",
  );
  assert.deepEqual(nd.startup, { key: 'model', value: 'Qwen/Qwen3-8B' });
  const pre = classifyLine(
    'WARNING 04-29 10:03:00 [scheduler.py:1754] Sequence group cmpl-abc-0 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=51',
  );
  assert.equal(pre.kind, 'preemption');
  assert.deepEqual(pre.preemption, { mode: 'RECOMPUTE', cumulative: 51 });
});

test('ANSI-coloured process prefixes, CRLF endings, older worker prefixes and fractional seconds', () => {
  const c = classifyLine(
    '\x1b[1;36m(EngineCore_DP0 pid=4711)\x1b[0;0m INFO 10-03 12:00:00 [gpu_worker.py:298] Available KV cache memory: 55.13 GiB\r',
  );
  assert.equal(c.process, 'EngineCore_DP0');
  assert.equal(c.startup?.value, 55.13);
  const w = classifyLine(
    '\x1b[1;36m(VllmWorker rank=1 pid=99)\x1b[0;0m INFO 10-03 12:00:00 [kv_cache_utils.py:833] GPU KV cache size: 410,240 tokens',
  );
  assert.equal(w.process, 'VllmWorker rank=1');
  assert.equal(w.startup?.value, 410240);
  const a = classifyLine(
    '\x1b[1;36m(APIServer pid=4650)\x1b[0;0m INFO:     127.0.0.1:1 - "POST /v1/completions HTTP/1.1" 200 OK',
  );
  assert.equal(a.access?.path, '/v1/completions');
  const frac = classifyLine('INFO 10-03 12:00:00.123 [x.py:1] Available KV cache memory: 1.00 GiB');
  assert.equal(frac.startup?.value, 1);
});

test('unknown lines are counted, with samples and line numbers, never fatal', () => {
  const f = auditText(
    [
      'Traceback (most recent call last):',
      EX.availableKv,
      'Loading safetensors checkpoint shards:  40% Completed | 2/5',
      '',
      'INFO 07-25 10:01:31 [x.py:1] Something we do not use',
    ].join('\n'),
  );
  assert.equal(f.lines, 5);
  assert.equal(f.unknown_lines, 2);
  assert.equal(f.blank_lines, 1);
  assert.equal(f.other_lines, 1);
  assert.deepEqual(
    f.unknown_samples.map((s) => s.line),
    [1, 3],
  );
  assert.equal(f.available_kv_gib?.line, 2);
});

test('facts keep their line numbers; tensor-parallel duplicates of the pool are deduplicated', () => {
  const f = auditText(
    [
      EX.loadingWeights,
      EX.modelLoading,
      '(VllmWorker rank=0 pid=10) INFO 07-25 10:01:30 [gpu_worker.py:255] Available KV cache memory: 56.34 GiB',
      '(VllmWorker rank=1 pid=11) INFO 07-25 10:01:30 [gpu_worker.py:255] Available KV cache memory: 56.34 GiB',
      '(VllmWorker rank=0 pid=10) INFO 07-25 10:01:30 [kv_cache_utils.py:833] GPU KV cache size: 410,240 tokens',
      '(VllmWorker rank=1 pid=11) INFO 07-25 10:01:30 [kv_cache_utils.py:833] GPU KV cache size: 410,240 tokens',
      EX.maxConc,
      EX.graphs,
      EX.flashinfer,
      EX.statsEngine,
      EX.access,
    ].join('\n'),
  );
  assert.deepEqual({ value: f.weights_gib?.value, line: f.weights_gib?.line }, { value: 15.2683, line: 2 });
  assert.equal(f.pool_tokens?.value, 410240);
  assert.equal(f.pool_tokens?.workers, 2);
  assert.deepEqual(f.pool_tokens?.lines, [5, 6]);
  assert.equal(f.pool_tokens?.line, 5);
  assert.equal(f.available_kv_gib?.workers, 2);
  assert.equal(f.max_concurrency?.line, 7);
  assert.equal(f.cuda_graph_gib?.value, 0.56);
  assert.equal(f.sampler?.value, 'flashinfer');
  assert.equal(f.sampler?.line, 9);
  assert.equal(f.windows.length, 1);
  assert.equal(f.windows.get(0).line, 10);
  assert.equal(f.windows.get(0).prefix_hit_pct, 42.1);
  assert.equal(f.access.requests, 1);
  assert.equal(f.access.after_last_window, 1);
  assert.deepEqual(f.access.by_status, { 200: 1 });
});

test('a fallback after a selection wins: it is what ran', () => {
  const f = auditText([EX.flashinfer, EX.fallback].join('\n'));
  assert.equal(f.sampler?.value, 'fallback');
  assert.equal(f.sampler?.line, 2);
});

test('V0: the separate prefix-cache line joins its window; preemption warnings count into the next window', () => {
  const pre =
    'WARNING 04-29 10:00:07 [scheduler.py:1754] Sequence group 7 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. total_num_cumulative_preemption=1';
  const next = EX.statsV0.replace('10:00:05', '10:00:10');
  const f = auditText([EX.statsV0, EX.prefixV0, pre, next].join('\n'));
  assert.equal(f.format, 'v0');
  assert.equal(f.windows.length, 2);
  assert.equal(f.windows.get(0).prefix_hit_pct, 37.5);
  assert.equal(f.windows.get(0).waiting, 5, 'V0 "Pending" is the waiting queue');
  assert.ok(Number.isNaN(f.windows.get(1).prefix_hit_pct));
  assert.equal(f.windows.get(1).preemptions, 1);
  assert.equal(f.preemption_warning_count, 1);
  assert.equal(f.preemption_warnings[0].cumulative, 1);
  assert.equal(f.preemption_warnings[0].line, 3);
});

test('data-parallel engines printing at the same tick merge into one window', () => {
  const l = (e: string, g: number, stamp = '10:00:10') =>
    `(APIServer pid=1) INFO 01-02 ${stamp} [loggers.py:200] Engine ${e}: Avg prompt throughput: 100.0 tokens/s, Avg generation throughput: ${g}.0 tokens/s, Running: 8 reqs, Waiting: 1 reqs, GPU KV cache usage: 10.0%, Prefix cache hit rate: 0.0%`;
  const f = auditText([l('000', 500), l('001', 700), l('000', 400, '10:00:20'), l('001', 600, '10:00:20')].join('\n'));
  assert.equal(f.windows.length, 2);
  const w = f.windows.get(0);
  assert.equal(w.gen_tok_s, 1200);
  assert.equal(w.running, 16);
  assert.equal(w.waiting, 2);
  assert.equal(w.engines, 2);
  assert.equal(f.windows.get(1).gen_tok_s, 1000);
});

test('timestamps have no year: midnight and new year roll forward monotonically', () => {
  const c = new LogClock();
  assert.equal(c.seconds(12, 31, 23 * 3600 + 59 * 60 + 50, '12-31 23:59:50'), 0);
  assert.equal(c.seconds(1, 1, 0, '01-01 00:00:00'), 10);
  assert.equal(c.seconds(1, 1, 10, '01-01 00:00:10'), 20);
  assert.equal(c.rollovers, 1);
  // Lines of two processes interleaving a second out of order never step back.
  assert.equal(c.seconds(1, 1, 9, '01-01 00:00:09'), 20);
  assert.equal(c.seconds(1, 2, 10, '01-02 00:00:10'), 20 + 86400);
  const stats = (stamp: string) =>
    `INFO ${stamp} [loggers.py:1] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 5.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%`;
  const f = auditText([stats('12-31 23:59:55'), stats('01-01 00:00:05')].join('\n'));
  assert.deepEqual([f.windows.get(0).t, f.windows.get(1).t], [0, 10]);
  assert.equal(f.windows.get(1).stamp, '01-01 00:00:05');
  assert.equal(f.year_rollovers, 1);
  // 02-29 parses (the clock's notional year is a leap year).
  const leap = auditText([stats('02-28 23:59:55'), stats('02-29 00:00:05')].join('\n'));
  assert.equal(leap.windows.get(1).t, 10);
});

test('streaming a file: small reads split lines anywhere (UTF-8 included) and give the same facts', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-audit-'));
  try {
    const lines = [
      ...Object.values(EX),
      'INFO 07-25 10:03:00 [x.py:1] naïve ünïcode line ✓',
      EX.statsEngine.replace('10:02:20', '10:02:30'),
    ];
    const p = path.join(dir, 'v.log');
    fs.writeFileSync(p, lines.join('\r\n')); // CRLF and no final newline
    const small = await auditFile(p, { chunkBytes: 7 });
    const big = await auditFile(p);
    const whole = auditText(lines.join('\n'));
    for (const r of [small.facts, big.facts]) {
      assert.equal(r.lines, lines.length);
      assert.equal(r.unknown_lines, 0);
      assert.equal(r.other_lines, 1);
      assert.equal(r.windows.length, whole.windows.length);
      assert.equal(r.pool_tokens?.value, 410240);
      assert.equal(r.access.requests, 1);
    }
    assert.equal(small.timings.bytes, fs.statSync(p).size);
    assert.ok(small.timings.lines_per_s > 0);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
