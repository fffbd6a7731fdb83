/**
 * The logs people have, not the logs the docs show: each failure class of the audit on real logs,
 * built from lines written here in each shape (values made up). Every test fails on the parser
 * before the line reader, the multi-fact startup rules, the parallelism facts, the crash findings,
 * the informative lines, the tempered findings and the SGLang dialect.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { analyzeFacts, auditChunks, auditText, classifyLine, generateLog, peelLine } from '../../src/core/audit';
import type { AuditFacts } from '../../src/core/audit';
import { nodeFiles } from '../../src/core/host/files';

/** The facts that say what the server did (not how the file was wrapped), as plain data. */
function what(f: AuditFacts) {
  const { windows, files: _f, bytes: _b, wrappers: _w, rejoined_lines: _r, split_lines: _s, ...rest } = f;
  return { ...rest, origin: windows.origin, windows: windows.toArray() };
}
/** Everything, for the byte path against the text path. */
function plain(f: AuditFacts) {
  const { windows, files, ...rest } = f;
  return { ...rest, files: files.map(({ path: _p, ...x }) => x), origin: windows.origin, windows: windows.toArray() };
}
const bothPaths = (text: string) => {
  const t = auditText(text);
  assert.deepEqual(plain(auditChunks([Buffer.from(text)])), plain(t), 'the byte path reads what the text path reads');
  const buf = Buffer.from(text);
  const mid = Math.floor(buf.length / 3);
  assert.deepEqual(plain(auditChunks([buf.subarray(0, mid), buf.subarray(mid)])), plain(t), 'split in two');
  return t;
};

const api = '(APIServer pid=11)';
const core = '(EngineCore_DP0 pid=12)';
const stats = (hh: string, gen: number, run: number, wait: number, kv: number, hit: number) =>
  `${api} INFO 05-12 ${hh} [loggers.py:271] Engine 000: Avg prompt throughput: ${(gen * 1.5).toFixed(1)} tokens/s, Avg generation throughput: ${gen.toFixed(1)} tokens/s, Running: ${run} reqs, Waiting: ${wait} reqs, GPU KV cache usage: ${kv.toFixed(1)}%, Prefix cache hit rate: ${hit.toFixed(1)}%`;
const acc = (port: number) => `${api} INFO:     127.0.0.1:${port} - "POST /v1/completions HTTP/1.1" 200 OK`;

/** A bare V1 log of my own: startup, two busy points with an idle gap, access lines. */
const BARE = [
  `${api} INFO 05-12 08:00:00 [api_server.py:1900] vLLM API server version 0.11.0`,
  `${core} INFO 05-12 08:00:05 [gpu_model_runner.py:2600] Model loading took 15.2683 GiB and 4.731526 seconds`,
  `${core} INFO 05-12 08:00:20 [gpu_worker.py:298] Available KV cache memory: 56.34 GiB`,
  `${core} INFO 05-12 08:00:20 [kv_cache_utils.py:1087] GPU KV cache size: 410,240 tokens`,
  `${core} INFO 05-12 08:00:20 [kv_cache_utils.py:1091] Maximum concurrency for 40,960 tokens per request: 10.02x`,
  `${core} INFO 05-12 08:00:30 [topk_topp_sampler.py:49] Using FlashInfer for top-p & top-k sampling.`,
  acc(40001),
  stats('08:01:00', 800, 8, 0, 12.5, 0),
  acc(40002),
  stats('08:01:10', 820, 8, 0, 13.5, 0.4),
  stats('08:01:20', 810, 8, 0, 13.9, 0.6),
  stats('08:02:30', 2400, 32, 4, 55.1, 1.2),
  acc(40003),
  stats('08:02:40', 2500, 32, 4, 58.3, 1.5),
  stats('08:02:50', 2450, 32, 2, 58.9, 1.6),
  'Traceback (most recent call last):',
];

// ------------------------------------------------------------------------------------------------
// 1. Something in front of vLLM's prefix.

const WRAPPERS: Record<string, (l: string, i: number) => string> = {
  'docker --timestamps': (l, i) => `2026-05-12T08:01:${String(i % 60).padStart(2, '0')}.331095044Z ${l}`,
  'docker compose': (l) => `vllm-1  | ${l}`,
  'compose + timestamps': (l, i) => `vllm-1  | 2026-05-12T08:01:${String(i % 60).padStart(2, '0')}Z ${l}`,
  'k9s box frame': (l) => `│ ${l.padEnd(420)} │`,
  'kubectl --prefix': (l) => `[pod/vllm-0/vllm] ${l}`,
  journald: (l) => `May 12 08:01:39 gpu-host vllm[1234]: ${l}`,
  'outer logger, bracketed stamp': (l) => `[2024-07-08 15:17:34] ${l}`,
  'outer logger, stamp and process': (l) => `2026-06-09 13:59:49.377 [Info] (Process) ${l}`,
  'outer logger, MODEL_LOG': (l) => `2026-06-09 13:59:49,377 [W-9000-model] MODEL_LOG - ${l}`,
  'stage tag': (l) => l.replace(/^(\([^)]*pid=\d+\)) /, '$1 [Stage-0] '),
  'lost-ESC ANSI': (l) => l.replace(/^(\([^)]*pid=\d+\))/, '[1;36m$1[0;0m'),
};

test('class 1: every wrapper in front of the prefix audits to the facts of the bare log, on both paths', () => {
  const bare = auditText(BARE.join('\n'));
  assert.equal(bare.windows.length, 6);
  for (const [name, wrap] of Object.entries(WRAPPERS)) {
    const text = BARE.map((l, i) => wrap(l, i)).join('\n');
    const f = bothPaths(text);
    assert.deepEqual(what(f), what(bare), name);
    assert.ok(Object.keys(f.wrappers).length > 0, `${name}: the wrapper is reported`);
  }
});

test('class 1: peelLine takes off exactly the wrapper', () => {
  const l = `${core} WARNING 05-12 08:01:39 [core.py:1] x`;
  assert.equal(peelLine(`2026-05-12T08:01:39.331095044Z ${l}`), l);
  assert.equal(peelLine(`vllm-1  | ${l}`), l);
  assert.equal(peelLine(`│ ${l}        │`), l);
  assert.equal(
    peelLine(`[1;36m(EngineCore_DP0 pid=87)[0;0m WARNING 05-12 08:01:39 [core.py:1] x`),
    `(EngineCore_DP0 pid=87) WARNING 05-12 08:01:39 [core.py:1] x`,
  );
  assert.equal(
    peelLine(`(EngineCore_DP0 pid=1) [Stage-0] INFO 05-12 08:01:39 [core.py:1] x`),
    `(EngineCore_DP0 pid=1) INFO 05-12 08:01:39 [core.py:1] x`,
  );
  // Not a wrapper: a bare vLLM line, and an unknown line, are left as they are.
  assert.equal(peelLine(l), l);
  assert.equal(peelLine('Traceback (most recent call last):'), 'Traceback (most recent call last):');
});

/** The property the issue asks for, over the day-4 example (the simulator's log) and a generated log. */
test('class 1 (property): a log through random wrappers, line by line, audits to the bare facts', () => {
  const day4 = fs
    .readFileSync(path.join(import.meta.dirname, '../../examples/logs/day4-vllm.log'), 'utf8')
    .trimEnd()
    .split('\n');
  const gen = generateLog(60, { accessPerWindow: 3, pointWindows: 15, ansi: false }).trimEnd().split('\n');
  const names = Object.keys(WRAPPERS).filter((n) => n !== 'k9s box frame'); // a frame pads to one width per log
  for (const lines of [day4, gen]) {
    const want = what(auditText(lines.join('\n')));
    fc.assert(
      fc.property(fc.constantFrom(...names), fc.constantFrom('\n', '\r\n'), fc.nat(), (name, eol, cut) => {
        const text = lines.map((l, i) => WRAPPERS[name](l, i)).join(eol);
        const t = auditText(text);
        assert.deepEqual(what(t), want, name);
        const buf = Buffer.from(text);
        const c = cut % buf.length;
        assert.deepEqual(plain(auditChunks([buf.subarray(0, c), buf.subarray(c)])), plain(t), `${name}, cut at ${c}`);
      }),
      { numRuns: 24, seed: 14 },
    );
  }
});

// ------------------------------------------------------------------------------------------------
// 2. Lines broken or joined by the terminal.

const V0 = [
  'INFO 04-29 10:00:05 [metrics.py:486] Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 412.3 tokens/s, Running: 32 reqs, Swapped: 0 reqs, Pending: 5 reqs, GPU KV cache usage: 97.9%, CPU KV cache usage: 0.0%.',
  'INFO 04-29 10:00:10 [metrics.py:486] Avg prompt throughput: 11.0 tokens/s, Avg generation throughput: 415.0 tokens/s, Running: 32 reqs, Swapped: 0 reqs, Pending: 4 reqs, GPU KV cache usage: 98.1%, CPU KV cache usage: 0.0%.',
  'INFO 04-29 10:00:15 [metrics.py:486] Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 420.5 tokens/s, Running: 31 reqs, Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 98.4%, CPU KV cache usage: 0.0%.',
];

const hardWrap = (l: string, w: number, dropSpace: boolean) => {
  const out: string[] = [];
  for (let i = 0; i < l.length; i += w) out.push(l.slice(i, i + w));
  return dropSpace ? out.map((x) => x.replace(/ +$/, '').replace(/^ +/, '')) : out;
};

test('class 2: stats lines hard-wrapped at 80–120 columns are rejoined; V0 stays V0, no NaN KV', () => {
  const want = what(auditText(V0.join('\n')));
  for (const w of [80, 97, 100, 120])
    for (const drop of [false, true]) {
      const text = V0.flatMap((l) => hardWrap(l, w, drop)).join('\n');
      const f = bothPaths(text);
      assert.equal(f.windows.length, 3, `width ${w}${drop ? ', spaces dropped' : ''}`);
      assert.equal(f.format, 'v0');
      const noLine = (ws: { line: number }[]) => ws.map(({ line: _l, ...x }) => x);
      assert.deepEqual(noLine(what(f).windows), noLine(want.windows), `width ${w}${drop ? ', spaces dropped' : ''}`);
      const tl = analyzeFacts(f).timeline;
      assert.ok(tl.segments.every((s) => Number.isFinite(s.peak_kv_usage_pct)));
    }
  // A wrapped V1 stats line inside a compose wrapper: the continuation carries the wrapper too.
  const l = stats('08:01:00', 800, 8, 0, 12.5, 3);
  const f = bothPaths(
    hardWrap(l, 100, false)
      .map((x) => `vllm-1  | ${x}`)
      .join('\n'),
  );
  assert.equal(f.windows.length, 1);
  assert.equal(f.windows.get(0).prefix_hit_pct, 3);
  assert.equal(f.rejoined_lines, Math.ceil(l.length / 100) - 1);
});

test('class 2: glued lines are split: nine stats lines on eight physical lines are nine windows', () => {
  const lines = Array.from({ length: 9 }, (_, i) =>
    stats(`08:01:${String(10 * i).padStart(2, '0')}`.slice(0, 8), 100 + i, 2, 0, 5, 0),
  );
  const glued = [...lines.slice(0, 3), lines[3] + lines[4], ...lines.slice(5)];
  const f = bothPaths(glued.join('\n'));
  assert.equal(f.windows.length, 9);
  assert.equal(f.split_lines, 1);
  assert.deepEqual(
    f.windows.toArray().map((w) => w.gen_tok_s),
    lines.map((_, i) => 100 + i),
  );
  // An access line glued to a stats line, and a startup line to an access line.
  const g2 = bothPaths(
    [
      acc(1) + lines[0],
      acc(2) + `${core} INFO 05-12 08:00:20 [kv_cache_utils.py:1087] GPU KV cache size: 1,024 tokens`,
    ].join('\n'),
  );
  assert.equal(g2.windows.length, 1);
  assert.equal(g2.access.requests, 2);
  assert.equal(g2.pool_tokens?.value, 1024);
});

// ------------------------------------------------------------------------------------------------
// 3. Startup facts in other words.

const at = (msg: string, proc = core) => `${proc} INFO 05-12 08:00:00 [x.py:1] ${msg}`;

test('class 3: startup facts in the other wordings, several on one line, "GB" read as GiB and said', () => {
  const f = bothPaths(
    [
      at('Loading model weights took 14.9888 GB'),
      at('GPU KV cache size: 29,056 tokens, Maximum concurrency for 2,048 tokens per request: 14.19x'),
      at('init engine (profile, create kv cache, warmup model) took 62.71 s (compilation: 8.08 s)'),
    ].join('\n'),
  );
  assert.equal(f.weights_gib?.value, 14.9888);
  assert.match(f.weights_gib?.note ?? '', /GB.*GiB.*2\^30/);
  assert.equal(f.pool_tokens?.value, 29056);
  assert.equal(f.max_concurrency?.value, 14.19);
  assert.equal(f.max_concurrency?.tokens_per_request, 2048);
  assert.equal(f.engine_init_s?.value, 62.71);
  assert.equal(f.engine_init_s?.compilation_s, 8.08);

  const one = (msg: string) => classifyLine(at(msg)).startups ?? [];
  assert.deepEqual(one('Model loading took 9.0970 GB and 3.2 seconds')[0], {
    key: 'weights_gib',
    value: 9.097,
    extra: { seconds: 3.2 },
    note: one('Model loading took 9.0970 GB and 3.2 seconds')[0].note,
  });
  assert.ok(one('Model loading took 9.0970 GB and 3.2 seconds')[0].note);
  assert.equal(one('Model loading took 9.0970 GiB and 3.2 seconds')[0].note, undefined);
  assert.deepEqual(one('# cuda blocks: 5148, # CPU blocks: 9362')[0], {
    key: 'gpu_blocks',
    value: 5148,
    extra: { cpu_blocks: 9362 },
  });
  assert.deepEqual(one('# GPU blocks: 1381')[0], { key: 'gpu_blocks', value: 1381 });
  assert.deepEqual(one('# cpu blocks: 1170')[0], { key: 'cpu_blocks', value: 1170 });
  assert.deepEqual(one('vllm cache_config_info with initialization after num_gpu_blocks is: 302267')[0], {
    key: 'blocks_total',
    value: 302267,
  });
  assert.equal(
    one('Auto set (166.94/343.76) GiB for KV cache on node 0, with 200 GiB requested memory')[0].value,
    166.94,
  );
  assert.equal(one('Explicitly set (1.0/15.51) GiB for KV cache on node 0.')[0].value, 1);
  const free = one(
    'Free memory on device (22.45/23.99 GiB) on startup. Desired GPU memory utilization is (0.9, 21.59 GiB). Current kv cache memory in use is 20.52 GiB.',
  );
  assert.deepEqual(
    free.map((x) => [x.key, x.value]),
    [
      ['device_memory', 23.99],
      ['available_kv_gib', 20.52],
    ],
  );
  assert.equal(
    one(
      'Memory profiling results: duration=2.1 seconds, total_gpu_memory=23.64GiB, model_weights=4.5GiB, kv_cache_size=3.81GiB',
    )[0].value,
    3.81,
  );
  assert.equal(one('available_kv_cache_memory                 53.29GiB')[0].value, 53.29);
  assert.deepEqual(one('   █▄█▀ █     █     █     █  version 0.28.1.dev42+gabc')[0], {
    key: 'version',
    value: '0.28.1.dev42+gabc',
  });
  const xpu = classifyLine(
    at('The XPU platform does not support per-request generators. Falling back to PyTorch-native implementation.'),
  );
  assert.equal(xpu.sampler?.backend, 'fallback');
  // Derived pool from the summed block count, saying the block size was assumed.
  const g = auditText(at('vllm cache_config_info with initialization after num_gpu_blocks is: 1000'));
  assert.equal(g.pool_tokens?.value, 16000);
  assert.match(g.pool_tokens?.derived ?? '', /block size/);
});

// ------------------------------------------------------------------------------------------------
// 4. Parallelism: DP engines vs TP workers.

test('class 4: two data-parallel engines: each engine its windows and pool, and the total', () => {
  const e = (dp: number, msg: string) => `(EngineCore_DP${dp} pid=${20 + dp}) INFO 05-12 08:00:20 [x.py:1] ${msg}`;
  const st = (eng: number, hh: string, gen: number) =>
    `${api} INFO 05-12 ${hh} [loggers.py:271] Engine 00${eng}: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: ${gen}.0 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 9.0%, Prefix cache hit rate: 0.0%`;
  const f = bothPaths(
    [
      e(0, 'GPU KV cache size: 100,000 tokens'),
      e(1, 'GPU KV cache size: 100,000 tokens'),
      st(0, '08:01:00', 100),
      st(1, '08:01:00', 200),
      st(0, '08:01:10', 110),
      st(1, '08:01:10', 210),
      st(0, '08:01:20', 120),
      st(1, '08:01:21', 220),
    ].join('\n'),
  );
  assert.equal(f.parallel.dp, 2);
  assert.deepEqual(
    f.pool_tokens?.engines?.map((x) => x.tokens),
    [100000, 100000],
  );
  assert.equal(f.pool_tokens?.total, 200000);
  assert.equal(f.pool_tokens?.workers, 1, 'two engines, not one pool printed by two workers');
  assert.deepEqual(
    f.engines.map((x) => [x.engine, x.windows]),
    [
      [0, 3],
      [1, 3],
    ],
  );
  assert.equal(f.windows.length, 3, 'the total series: one window per tick');
  assert.deepEqual(
    f.windows.toArray().map((w) => w.gen_tok_s),
    [300, 320, 340],
  );
  const r = analyzeFacts(f);
  assert.ok(!r.findings.some((x) => x.code === 'audit-kv-pool-workers-differ'));
});

test('class 4: TP/PP/DP/EP sizes from the worker prefixes, Ray workers and their hosts', () => {
  const w = (p: string, msg = 'GPU KV cache size: 50,000 tokens') => `(${p}) INFO 05-12 08:00:20 [x.py:1] ${msg}`;
  const tp = bothPaths([0, 1, 2, 3].map((r) => w(`Worker_TP${r} pid=${30 + r}`)).join('\n'));
  assert.equal(tp.parallel.tp, 4);
  assert.equal(tp.pool_tokens?.workers, 4, 'four TP workers print one pool');
  assert.equal(tp.pool_tokens?.total, undefined);
  const pp = bothPaths(
    [0, 1]
      .flatMap((p) =>
        [0, 1, 2, 3].map((t) => w(`Worker_PP${p}_TP${t} pid=${40 + 4 * p + t}`, 'Loading weights took 1.00 seconds')),
      )
      .join('\n'),
  );
  assert.deepEqual([pp.parallel.pp, pp.parallel.tp, pp.parallel.workers], [2, 4, 8]);
  const ep = bothPaths(
    [0, 1].map((d) => w(`Worker_DP${d}_EP${d} pid=${50 + d}`, 'Loading weights took 1.00 seconds')).join('\n'),
  );
  assert.deepEqual([ep.parallel.dp, ep.parallel.ep], [2, 2]);
  const ray = bothPaths(
    ['10.0.0.2', '10.0.0.2', '10.0.0.3']
      .map((ip, i) => w(`RayWorkerWrapper pid=${60 + i}, ip=${ip}`, 'Loading weights took 1.00 seconds'))
      .join('\n'),
  );
  assert.deepEqual([ray.parallel.workers, ray.parallel.nodes], [3, 2]);
  // Plain lines before a prefixed one: the byte path reads the prefix from its template too.
  const mixed = bothPaths(
    [
      w('Worker_TP0 pid=1', 'Added request a.'),
      w('Worker_TP1 pid=2', 'Added request b.'),
      w('Worker_TP1 pid=2', 'Added request c.'),
    ].join('\n'),
  );
  assert.equal(mixed.parallel.tp, 2);
});

// ------------------------------------------------------------------------------------------------
// 5. Crashes.

test('class 5: a CUDA out-of-memory traceback at startup is an error finding with its line and what to change', () => {
  const text = [
    at('Loading weights took 20.10 seconds'),
    at('Model loading took 60.1000 GiB and 21.000000 seconds'),
    `${core} ERROR 05-12 08:00:40 [core.py:700] EngineCore failed to start.`,
    `${core} ERROR 05-12 08:00:40 [core.py:700] Traceback (most recent call last):`,
    `${core} ERROR 05-12 08:00:40 [core.py:700]   File "/x/core.py", line 12, in run`,
    `${core} ERROR 05-12 08:00:40 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.10 GiB is free.`,
    'RuntimeError: Engine core initialization failed. See root cause above.',
  ].join('\n');
  const f = bothPaths(text);
  const r = analyzeFacts(f);
  const oom = r.findings.find((x) => x.code === 'audit-out-of-memory');
  assert.ok(oom, JSON.stringify(r.findings.map((x) => x.code)));
  assert.equal(oom.severity, 'error');
  assert.match(oom.message, /at startup, after the weights loaded/);
  assert.match(oom.message, /line 4/);
  assert.match(oom.fix ?? '', /gpu-memory-utilization/);
  assert.ok(r.findings.some((x) => x.code === 'audit-engine-died' && /line 7/.test(x.message)));
  // Before the weights: the weights do not fit.
  const early = analyzeFacts(
    bothPaths(
      [
        'Traceback (most recent call last):',
        '  File "x.py", line 1',
        'torch.OutOfMemoryError: CUDA out of memory.',
      ].join('\n'),
    ),
  );
  // An unrecognised file: the finding stands, with no quote.
  const o2 = early.findings.find((x) => x.code === 'audit-out-of-memory');
  assert.ok(o2);
  assert.match(o2.fix ?? '', /tensor-parallel-size|quantized/);
  assert.doesNotMatch(o2.message, /"/);
  const small = analyzeFacts(
    bothPaths(
      `${core} ERROR 05-12 08:00:40 [core.py:700] ValueError: To serve at least one request with the models's max seq len (40960), (4.38 GiB KV cache is needed, which is larger than the available KV cache memory (1.0 GiB).`,
    ),
  );
  assert.ok(small.findings.some((x) => x.code === 'audit-kv-cache-too-small' && /max-model-len/.test(x.fix ?? '')));
});

// ------------------------------------------------------------------------------------------------
// 6. Informative lines that were ignored.

test('class 6: speculative decoding (three V1 wordings and V0), KV transfer, the optional stats fields', () => {
  const sd = (msg: string) => `${api} INFO 05-12 08:01:00 [metrics.py:120] ${msg}`;
  const gens = [
    [
      'SpecDecoding metrics: Draft acceptance rate: 40.0%, Accepted: 400 tokens, Drafted: 1000 tokens',
      'acceptance rate',
      40,
    ],
    [
      'SpecDecoding metrics: Mean acceptance length: 2.20, Accepted: 600 tokens, Drafted: 1000 tokens, Per-position acceptance rate: 0.800, 0.400',
      'acceptance length',
      60,
    ],
    [
      'SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 75.00 tokens/s, Drafted throughput: 150.00 tokens/s, Accepted: 750 tokens, Drafted: 1500 tokens, Per-position acceptance rate: 0.900, 0.600, 0.000, Avg Draft acceptance rate: 50.0%',
      'throughput',
      50,
    ],
  ] as const;
  for (const [msg, gen, pct] of gens) {
    const f = bothPaths([stats('08:01:00', 100, 2, 0, 5, 0), sd(msg)].join('\n'));
    assert.equal(f.spec_decode?.generation, gen);
    assert.equal(f.spec_decode?.mean.acceptance_pct, pct);
    assert.equal(f.windows.get(0).spec_accept_pct, pct, 'in the timeline');
    assert.equal(analyzeFacts(f).timeline.segments[0].spec_accept_pct, pct);
  }
  const third = bothPaths(sd(gens[2][0]));
  assert.deepEqual(third.spec_decode?.per_position, [0.9, 0.6, 0]);
  const v0 = bothPaths(
    `INFO 04-29 10:00:05 [metrics.py:400] Speculative metrics: Draft acceptance rate: 0.652, System efficiency: 0.489, Number of speculative tokens: 5, Number of accepted tokens: 652, Number of draft tokens: 1000, Number of emitted tokens: 800.`,
  );
  assert.equal(v0.spec_decode?.generation, 'v0');
  assert.equal(v0.spec_decode?.mean.acceptance_pct, 65.2);
  const kvt = bothPaths(
    sd('KV Transfer metrics: Num successful transfers=12, Avg xfer time (ms)=18.5, Throughput (MB/s)=94.1'),
  );
  assert.equal(kvt.kv_transfer?.sum['Num successful transfers'], 12);
  const e = bothPaths(
    `${api} INFO 05-12 08:01:00 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 1 reqs, Deferred: 2 reqs, GPU KV cache usage: 5.0%, Prefix cache hit rate: 12.5%, Corrupted: 1 reqs, External prefix cache hit rate: 30.0%, MM cache hit rate: 20.0%`,
  );
  assert.deepEqual(
    [
      e.stats_extras.deferred?.max,
      e.stats_extras.corrupted?.max,
      e.stats_extras.external_prefix_hit_pct?.max,
      e.stats_extras.mm_hit_pct?.max,
    ],
    [2, 1, 30, 20],
  );
  assert.deepEqual(
    [e.windows.get(0).external_prefix_hit_pct, e.windows.get(0).mm_hit_pct, e.windows.get(0).corrupted],
    [30, 20, 1],
  );
  const cpu = bothPaths(
    [V0[0], 'INFO 04-29 10:00:05 [metrics.py:502] Prefix cache hit rate: GPU: 0.00%, CPU: 90.00%'].join('\n'),
  );
  assert.equal(cpu.windows.get(0).cpu_prefix_hit_pct, 90);
  assert.equal(cpu.stats_extras.cpu_prefix_hit_pct?.max, 90);
  const pre = bothPaths(
    'WARNING 04-29 10:00:05 [scheduler.py:1] Sequence group 5 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. total_cumulative_preemption_cnt=50',
  );
  assert.equal(pre.preemption_warnings[0].cumulative, 50);
});

// ------------------------------------------------------------------------------------------------
// 7. Findings that claim too much.

test('class 7: no contamination from a single window or with no window before; a hit rate over 100% is a parse warning', () => {
  // One window with a hit rate: no evidence of contamination.
  const one = analyzeFacts(bothPaths([stats('08:01:00', 100, 2, 0, 5, 40)].join('\n')));
  assert.ok(!one.findings.some((x) => x.code === 'audit-prefix-cache-contamination'));
  // A rise in one window only (one repeated request), then back down.
  const single = analyzeFacts(
    bothPaths(
      [
        stats('08:01:00', 100, 2, 0, 5, 0),
        stats('08:01:10', 100, 2, 0, 5, 30),
        stats('08:01:20', 100, 2, 0, 5, 4),
      ].join('\n'),
    ),
  );
  assert.ok(!single.findings.some((x) => x.code === 'audit-prefix-cache-contamination'));
  // A sustained rise is reported, its causes offered as possibilities, never "from 0.0% before it" without a before.
  const rise = analyzeFacts(
    bothPaths(
      [
        stats('08:01:00', 100, 2, 0, 5, 20),
        stats('08:01:10', 100, 2, 0, 5, 30),
        stats('08:01:20', 100, 2, 0, 5, 40),
      ].join('\n'),
    ),
  );
  const c = rise.findings.find((x) => x.code === 'audit-prefix-cache-contamination');
  assert.ok(c);
  assert.doesNotMatch(c.message, /before it/);
  assert.match(c.cause ?? '', /Possibly/);
  // Corrupt: a hit rate of 340% — a parse warning, not contamination.
  const bad = analyzeFacts(
    bothPaths(
      [
        stats('08:01:00', 100, 2, 0, 5, 0),
        stats('08:01:10', 100, 2, 0, 5, 340),
        stats('08:01:20', 100, 2, 0, 5, 345),
      ].join('\n'),
    ),
  );
  assert.ok(bad.findings.some((x) => x.code === 'audit-parse-warning' && /340/.test(x.message)));
  assert.ok(!bad.findings.some((x) => x.code === 'audit-prefix-cache-contamination'));
});

test('class 7: the heartbeat note claims idle time only where the log shows it', () => {
  // Short segments saturated throughout (a queue at every tick): no "includes idle time".
  const sat = [
    stats('08:01:00', 900, 64, 20, 99, 0),
    stats('08:01:10', 950, 64, 18, 99, 0),
    stats('08:03:00', 300, 8, 5, 40, 0),
    stats('08:03:10', 310, 8, 6, 41, 0),
    stats('08:05:00', 1200, 96, 30, 99, 0),
  ];
  const r = analyzeFacts(bothPaths(sat.join('\n')));
  const hb = r.findings.find((x) => x.code === 'audit-heartbeat-not-instrument');
  assert.ok(!hb || !/idle time/.test(hb.message), hb?.message);
  // Busy edge windows (a queue at the tick) count as busy: the busy mean is every window's.
  const hm = r.values.heartbeat as { busy_mean_gen_tok_s: number };
  const mean = (900 + 950 + 300 + 310 + 1200) / 5;
  assert.equal(hm.busy_mean_gen_tok_s, Math.round(mean * 10) / 10);
});

// ------------------------------------------------------------------------------------------------
// The SGLang dialect.

test("SGLang's server log (v0.4 format) is read by its own dialect: windows, pool, weights", () => {
  const s = (t: string, msg: string, tag = ' TP0') => `[2025-03-01 10:${t}${tag}] ${msg}`;
  const text = [
    s('00:00', "server_args=ServerArgs(model_path='Qwen/Qwen2.5-7B-Instruct', tp_size=1, dp_size=1)", ''),
    s('00:05', 'Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=58.62 GB, mem usage=15.41 GB.'),
    s('00:06', 'KV Cache is allocated. #tokens: 566205, K size: 30.24 GB, V size: 30.24 GB'),
    s(
      '00:07',
      'max_total_num_tokens=566205, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=2048, context_len=32768',
    ),
    '[2025-03-01 10:00:08] INFO:     127.0.0.1:50000 - "POST /generate HTTP/1.1" 200 OK',
    s(
      '00:10',
      'Prefill batch. #new-seq: 4, #new-token: 4000, #cached-token: 1000, token usage: 0.01, #running-req: 0, #queue-req: 0, ',
    ),
    s(
      '00:12',
      'Decode batch. #running-req: 4, #token: 5000, token usage: 0.01, gen throughput (token/s): 180.50, #queue-req: 0, ',
    ),
    s(
      '00:14',
      'Prefill batch. #new-seq: 2, #new-token: 2000, #cached-token: 2000, token usage: 0.01, #running-req: 4, #queue-req: 1, ',
    ),
    s(
      '00:16',
      'Decode batch. #running-req: 6, #token: 9000, token usage: 0.02, gen throughput (token/s): 240.00, #queue-req: 1, ',
    ),
  ].join('\n');
  const f = bothPaths(text);
  assert.equal(f.dialect, 'sglang');
  assert.equal(f.format, 'sglang');
  assert.equal(f.model?.value, 'Qwen/Qwen2.5-7B-Instruct');
  assert.equal(f.pool_tokens?.value, 566205);
  assert.equal(f.weights_gib?.value, 15.41);
  assert.match(f.weights_gib?.note ?? '', /GiB/);
  assert.equal(f.windows.length, 2);
  const ws = f.windows.toArray();
  assert.deepEqual(
    ws.map((w) => [w.gen_tok_s, w.running, w.waiting, w.kv_usage_pct]),
    [
      [180.5, 4, 0, 1],
      [240, 6, 1, 2],
    ],
  );
  assert.deepEqual(
    ws.map((w) => w.prefix_hit_pct),
    [20, 50],
  );
  assert.equal(ws[1].prompt_tok_s, 500, '2000 new tokens over the 4 s since the last window');
  assert.equal(f.access.requests, 1);
  assert.equal(f.parallel.tp, 1);
  const r = analyzeFacts(f);
  assert.ok(!r.findings.some((x) => x.code === 'audit-not-a-server-log'));
});

// ------------------------------------------------------------------------------------------------
// Unknown lines, quotes and secrets.

test('unknown lines that look informative are counted and listed, cut; quoted only from a recognised log, keys redacted', () => {
  const key = 'sk-proj-' + 'Q7x9Lm2Vb8Np4Rt6Yw1Zc3Kd5Fg0Hj'.repeat(2);
  const text = [
    BARE[0],
    'Loading safetensors checkpoint shards: 50% Completed | 2/4',
    `custom_plugin: queue_depth: 17, api_key=${key}, token budget: 4096 ${'x'.repeat(300)}`,
    `Authorization: Bearer ${key}`,
  ].join('\n');
  const f = bothPaths(text);
  assert.equal(f.dialect, 'vllm');
  assert.ok(f.informative_unknown.count >= 2);
  const all = JSON.stringify(f);
  assert.ok(!all.includes(key.slice(8, 30)), 'no part of the key in the facts');
  assert.ok(f.informative_unknown.samples.every((s) => (s.text ?? '').length <= 121));
  const r = analyzeFacts(f);
  const inf = r.findings.find((x) => x.code === 'audit-informative-unknown');
  assert.ok(inf && /queue_depth/.test(inf.message));
  assert.ok(!JSON.stringify(r).includes(key.slice(8, 30)));
});

test('an environ-like file holding a key is not a server log: nothing of it is quoted anywhere', async () => {
  const { runAudit } = await import('../../src/core/audit');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-audit-environ-'));
  try {
    const key = 'abcd1234efgh5678ijkl9012mnop3456';
    const p = path.join(dir, 'environ');
    fs.writeFileSync(p, `PATH=/usr/bin\0HOME=/root\0INFLAB_API_KEY=${key}\0LANG=C\0`);
    const r = await runAudit('environ', dir, { plot: false });
    const out = JSON.stringify({ values: r.values, findings: r.findings, outputs: r.outputs, facts: r.facts });
    assert.ok(!out.includes(key), 'the key is in no output');
    assert.ok(!out.includes('INFLAB_API_KEY'), 'the file is not quoted at all');
    assert.ok(r.findings.some((x) => x.code === 'audit-not-a-server-log'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// ------------------------------------------------------------------------------------------------
// Files that are not logs: reading outside the notebook's folder, lines too long, devices.

test('a file outside the notebook folder is read only when the host confirms it', async () => {
  const { createNotebookContext, runCell } = await import('../../src/core/engine/engine');
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-audit-confirm-'));
  try {
    const nbDir = path.join(root, 'nb');
    fs.mkdirSync(path.join(nbDir, 'logs'), { recursive: true });
    fs.writeFileSync(path.join(nbDir, 'logs', 'v.log'), BARE.join('\n'));
    fs.writeFileSync(path.join(root, 'outside.log'), BARE.join('\n'));
    const asked: string[] = [];
    // The editor's policy: the notebook's folder is read freely, anything else only when confirmed.
    const nb = createNotebookContext(
      nbDir,
      nodeFiles({
        roots: () => [],
        confirm: async (p) => {
          asked.push(p);
          return false;
        },
      }),
    );
    const inside = await runCell('audit: logs/v.log\nplot: false', 0, nb);
    assert.ok(inside.ok, 'inside the folder: no question');
    assert.deepEqual(asked, []);
    for (const v of ['../outside.log', path.join(root, 'outside.log')]) {
      const r = await runCell(`audit: ${v}\nplot: false`, 1, nb);
      assert.equal(r.ok, false, v);
      assert.equal(r.error?.code, 'audit-read-refused', v);
      assert.match(r.error!.message, /outside the notebook's folder/);
    }
    // Asked once for the file in this run (the look at it for `reads`), not again at the open.
    const real = fs.realpathSync(path.join(root, 'outside.log'));
    assert.deepEqual(asked, [real]);
    // Confirmed: read, and asked once although the file is both looked at and opened.
    const yes: string[] = [];
    const allowing = createNotebookContext(nbDir, nodeFiles({ roots: () => [], confirm: async (p) => !!yes.push(p) }));
    const r = await runCell('audit: ../outside.log\nplot: false', 0, allowing);
    assert.ok(r.ok, r.error?.message);
    assert.deepEqual(yes, [real]);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test('a glob of logs is listed through the host: outside the folder it asks once for the folder, in Restricted Mode it lists nothing', async () => {
  const { createNotebookContext, runCell } = await import('../../src/core/engine/engine');
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-audit-glob-'));
  try {
    const nbDir = path.join(root, 'nb');
    fs.mkdirSync(path.join(nbDir, 'logs'), { recursive: true });
    fs.mkdirSync(path.join(root, 'elsewhere'));
    for (const n of ['a.log', 'b.log']) {
      fs.writeFileSync(path.join(nbDir, 'logs', n), BARE.join('\n'));
      fs.writeFileSync(path.join(root, 'elsewhere', n), BARE.join('\n'));
    }
    const asked: string[] = [];
    const policy = { roots: () => [], confirm: async (p: string) => !!asked.push(p) && false };
    const nb = createNotebookContext(nbDir, nodeFiles(policy));
    const inside = await runCell('audit: logs/*.log\nplot: false', 0, nb);
    assert.ok(inside.ok, inside.error?.message);
    assert.deepEqual(asked, [], 'inside the folder: no question');
    const outside = await runCell('audit: ../elsewhere/*.log\nplot: false', 1, nb);
    assert.equal(outside.ok, false);
    assert.equal(outside.error?.code, 'audit-read-refused');
    assert.deepEqual(asked, [fs.realpathSync(path.join(root, 'elsewhere'))], 'one question, for the folder');
    const restricted = createNotebookContext(nbDir, nodeFiles({ ...policy, trusted: () => false }));
    const r = await runCell('audit: logs/*.log\nplot: false', 0, restricted);
    assert.equal(r.ok, false);
    assert.equal(r.error?.code, 'audit-read-refused');
    assert.match(r.error!.message, /Restricted Mode/);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test('audit memory: a line over the limit is skipped and counted with its line number, on both paths', () => {
  const long = 'x'.repeat((1 << 20) + 10);
  const text = [BARE[0], long, ...BARE.slice(1)].join('\n');
  const f = bothPaths(text);
  assert.deepEqual([f.long_lines.count, f.long_lines.lines], [1, [2]]);
  assert.equal(f.windows.length, 6);
  const r = analyzeFacts(f);
  assert.ok(r.findings.some((x) => x.code === 'audit-long-lines' && /line 2/.test(x.message)));
});

test('audit memory: a 600 MB single-line file is read in bounded memory; /dev/zero and a FIFO end with a message', async () => {
  const { auditFile } = await import('../../src/core/audit');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-audit-huge-'));
  try {
    const p = path.join(dir, 'one-line.log');
    const fd = fs.openSync(p, 'w');
    fs.writeSync(fd, BARE.slice(0, 3).join('\n') + '\n');
    fs.ftruncateSync(fd, 600 * 2 ** 20); // a sparse run of NUL bytes: one 600 MB line
    fs.closeSync(fd);
    const before = process.memoryUsage().arrayBuffers;
    const r = await auditFile(p);
    assert.equal(r.facts.long_lines.count, 1);
    assert.deepEqual(r.facts.long_lines.lines, [4]);
    assert.equal(r.facts.weights_gib?.value, 15.2683);
    // Nothing of the line is held: the reader keeps its chunks and a bounded carry only.
    assert.ok(process.memoryUsage().arrayBuffers - before < 64 * 2 ** 20);
    if (fs.existsSync('/dev/zero')) await assert.rejects(auditFile('/dev/zero'), /not a regular file/);
    const fifo = path.join(dir, 'fifo');
    const { execFileSync } = await import('node:child_process');
    let made = false;
    try {
      execFileSync('mkfifo', [fifo]);
      made = true;
    } catch {
      /* no mkfifo here */
    }
    if (made) await assert.rejects(auditFile(fifo), /not a regular file/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
