/**
 * Every physics rule: one input that fires it and one that stays quiet. Record cells go through the
 * engine's static analysis (what the editor runs as the user types); bench and audit results are
 * given to runChecks as the facts those kinds state for the values they produce. Reference numbers from docs/physics.md
 * (Qwen3-8B bf16 on an A100 SXM4 80GB).
 */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { describe, test } from 'node:test';
import { causeTag, ruleList, RULES, runChecks, type CheckInput } from '../../src/core/checks';
import { gbGibSlip } from '../../src/core/checks/memory';
import { analyzeCells, createNotebookContext } from '../../src/core/engine/engine';
import type { Finding } from '../../src/core/findings';
import { kindId, type CellResult, type Setup } from '../../src/core/engine/types';
import type { Fact } from '../../src/core/facts';
import { KINDS } from '../../src/core/kinds';
import { applySetupOverrides } from '../../src/core/kinds/setup';
import { parseCell, setValueInSource } from '../../src/core/notebook/cellSource';

const SETUP_SRC = 'setup: day4\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n';

/** Findings of the last cell, after a setup cell, as the editor computes them while typing. */
function analyzeRecord(body: string, setupSrc = SETUP_SRC): Finding[] {
  const all = analyzeCells([setupSrc, body], os.tmpdir());
  return all[1];
}

const codes = (fs: Finding[]) => fs.map((f) => f.code);
const byCode = (fs: Finding[], code: string) => fs.filter((f) => f.code === code);

function setup(server?: Record<string, unknown>): Setup {
  const r = applySetupOverrides(undefined, { gpu: 'a100-sxm4-80gb', model: 'qwen3-8b' }, os.tmpdir(), 'day4', true);
  assert.ok(r.setup, JSON.stringify(r.findings));
  return { ...r.setup, cellIndex: 0, server };
}

/** The facts a kind states for this cell and these values, by the kind's own function (as a reopened notebook reads them). */
function factsFor(kind: string, cell: unknown, values?: Record<string, unknown>): Fact[] {
  const k = KINDS.find((m) => kindId(m) === kind || m.key === kind)!;
  return values ? (k.migrate?.(values, cell) ?? []) : (k.statedFacts?.(cell) ?? []);
}

function input(
  kind: string,
  cell: unknown,
  values?: Record<string, unknown>,
  over: Partial<CheckInput> = {},
): CheckInput {
  return {
    kind,
    cell,
    values,
    facts: factsFor(kind, cell, values),
    setup: setup(),
    notebook: createNotebookContext(os.tmpdir()),
    cellIndex: 3,
    ...over,
  };
}

function result(kind: string, values: Record<string, unknown>): CellResult {
  return { kind, values, facts: factsFor(kind, undefined, values), findings: [], outputs: [], ok: true };
}

describe('registry', () => {
  test('every rule has a unique id, documents what it reads, and names a cause tag per code', () => {
    const ids = ruleList().map((r) => r.id);
    assert.equal(new Set(ids).size, ids.length);
    assert.ok(ids.length >= 12, ids.join(', '));
    for (const r of ruleList()) {
      assert.ok(r.reads.length > 0, r.id);
      assert.ok(Object.keys(r.codes).length > 0, r.id);
    }
    assert.equal(causeTag('ttft-below-prefill-floor'), 'prefix-cache hit?');
    assert.equal(causeTag('no-such-code'), undefined);
  });

  test('a rule that throws becomes one info finding; the other rules still run', () => {
    RULES.push(() => {
      throw new Error('boom');
    });
    try {
      const fs = runChecks({
        ...input('record', { record: 'x', prompt: qt(1000, 'tokens'), ttft: qt(0.023, 'time') }),
      });
      assert.ok(codes(fs).includes('ttft-below-prefill-floor'));
      const failed = byCode(fs, 'check-failed');
      assert.equal(failed.length, 1);
      assert.equal(failed[0].severity, 'info');
      assert.match(failed[0].message, /boom/);
    } finally {
      RULES.pop();
    }
  });
});

/** A Quantity as the record schema produces it. */
function qt(value: number, dim: 'tokens' | 'time' | 'token_rate' | 'request_rate' | 'bytes', unit?: string) {
  const dims = {
    tokens: { token: 1 },
    time: { s: 1 },
    token_rate: { token: 1, s: -1 },
    request_rate: { request: 1, s: -1 },
    bytes: { byte: 1 },
  }[dim];
  return {
    value,
    dims,
    unit: unit ?? { tokens: 'tokens', time: 's', token_rate: 'tok/s', request_rate: 'req/s', bytes: 'B' }[dim],
  };
}

describe('ttft-below-prefill-floor', () => {
  test('fires on the ttft line of a record: 23 ms for 1,000 tokens, under the 52.5 ms floor, pointing at the setup', () => {
    const fs = byCode(analyzeRecord('record: day4\nprompt: 1000 tokens\nttft: 23 ms\n'), 'ttft-below-prefill-floor');
    assert.equal(fs.length, 1);
    const f = fs[0];
    assert.equal(f.severity, 'warning');
    assert.deepEqual(f.path, ['ttft']);
    assert.match(f.message, /below the 52\.5 ms compute floor \(2·params·tokens\/peak\)/);
    assert.match(f.cause!, /prefix.cache/i);
    assert.match(f.fix!, /per-point/);
    assert.match(f.fix!, /prefix caching off/);
    assert.equal(f.related?.[0].cellIndex, 0, 'related information points at the setup cell');
  });

  test('quiet for 60 ms (above the floor) and when the prompt length is not given', () => {
    assert.deepEqual(
      byCode(analyzeRecord('record: day4\nprompt: 1000 tokens\nttft: 60 ms\n'), 'ttft-below-prefill-floor'),
      [],
    );
    assert.deepEqual(byCode(analyzeRecord('record: day4\nttft: 23 ms\n'), 'ttft-below-prefill-floor'), []);
  });

  test('on bench results: the point whose median TTFT is under the floor, on its concurrency element', () => {
    const cell = { bench: 'sweep', input: qt(1000, 'tokens'), output: qt(1000, 'tokens'), concurrency: [1, 8, 64] };
    const values = {
      points: [
        { concurrency: 1, ttft_ms: { mean: 70, median: 68, p99: 90 } },
        { concurrency: 8, ttft_ms: { mean: 25, median: 23, p99: 40 }, server: { prefix_hit_rate: 0.97 } },
        { concurrency: 64, ttft_ms: { mean: 400, median: 380, p99: 900 } },
      ],
    };
    const fs = byCode(runChecks(input('bench: sweep', cell, values)), 'ttft-below-prefill-floor');
    assert.equal(fs.length, 1);
    assert.deepEqual(fs[0].path, ['concurrency', 1]);
    assert.match(fs[0].message, /at concurrency 8/);
    assert.match(fs[0].cause!, /97%/);
  });
});

describe('below-decode-floor', () => {
  test('TPOT 5 ms and a 6 ms step are below the 8.03 ms floor', () => {
    const fs = analyzeRecord('record: r\ntpot: 5 ms\nstep: 6 ms\n');
    const t = byCode(fs, 'tpot-below-decode-floor');
    assert.deepEqual(
      t.map((f) => f.path),
      [['tpot']],
    );
    assert.match(t[0].message, /8\.03 ms decode step floor/);
    assert.deepEqual(
      byCode(fs, 'step-below-decode-floor').map((f) => f.path),
      [['step']],
    );
  });

  test("quiet for the real lab's 11.3 ms step", () => {
    const fs = analyzeRecord('record: r\ntpot: 11.3 ms\nstep: 11.3 ms\n');
    assert.deepEqual(
      fs.filter((f) => /decode-floor/.test(f.code)),
      [],
    );
  });
});

describe('per-user-above-bandwidth-ceiling', () => {
  test('per_user 150 tok/s, or a batch-1 throughput of 150 tok/s, is above the 124.5 tok/s ceiling', () => {
    const a = byCode(analyzeRecord('record: r\nper_user: 150 tok/s\n'), 'per-user-above-bandwidth-ceiling');
    assert.deepEqual(
      a.map((f) => f.path),
      [['per_user']],
    );
    assert.match(a[0].message, /124\.5 tok\/s ceiling/);
    const b = byCode(analyzeRecord('record: r\nbatch: 1\nthroughput: 150 tok/s\n'), 'per-user-above-bandwidth-ceiling');
    assert.deepEqual(
      b.map((f) => f.path),
      [['throughput']],
    );
  });

  test("quiet for the real lab's 88.4 tok/s, and for 150 tok/s aggregate at batch 8", () => {
    assert.deepEqual(
      byCode(analyzeRecord('record: r\nper_user: 88.4 tok/s\n'), 'per-user-above-bandwidth-ceiling'),
      [],
    );
    assert.deepEqual(
      byCode(analyzeRecord('record: r\nbatch: 8\nthroughput: 150 tok/s\n'), 'per-user-above-bandwidth-ceiling'),
      [],
    );
  });
});

describe('aggregate-above-compute-roof', () => {
  test('25,000 tok/s is above the 19,046 tok/s compute roof; so is a bench point at 30,000', () => {
    const a = byCode(analyzeRecord('record: r\nthroughput: 25000 tok/s\n'), 'aggregate-above-compute-roof');
    assert.deepEqual(
      a.map((f) => f.path),
      [['throughput']],
    );
    assert.match(a[0].message, /19,046 tok\/s compute roof/);
    const b = byCode(
      runChecks(
        input('bench: sweep', { concurrency: [128] }, { points: [{ concurrency: 128, output_throughput: 30000 }] }),
      ),
      'aggregate-above-compute-roof',
    );
    assert.deepEqual(
      b.map((f) => f.path),
      [['concurrency', 0]],
    );
  });

  test('quiet at 5,000 tok/s', () => {
    assert.deepEqual(byCode(analyzeRecord('record: r\nthroughput: 5000 tok/s\n'), 'aggregate-above-compute-roof'), []);
  });
});

describe('rtt-share-of-ttft', () => {
  test('a 40 ms RTT under a 100 ms TTFT fires on the rtt line; a bench run with a far endpoint too', () => {
    const a = byCode(analyzeRecord('record: r\nrtt: 40 ms\nttft: 100 ms\n'), 'rtt-share-of-ttft');
    assert.deepEqual(
      a.map((f) => f.path),
      [['rtt']],
    );
    assert.match(a[0].message, /40% of the 100 ms TTFT/);
    const b = byCode(
      runChecks(
        input(
          'bench: sweep',
          { concurrency: [1] },
          { rtt_ms: { median: 80, min: 75 }, points: [{ concurrency: 1, ttft_ms: { mean: 150, median: 140 } }] },
        ),
      ),
      'rtt-share-of-ttft',
    );
    assert.equal(b.length, 1);
  });

  test('quiet for a 1 ms RTT', () => {
    assert.deepEqual(byCode(analyzeRecord('record: r\nrtt: 1 ms\nttft: 100 ms\n'), 'rtt-share-of-ttft'), []);
  });
});

describe('kv-pool-larger-than-card', () => {
  test('900,000 tokens × 147,456 B is more than 80 GiB; so is 90 GiB available, and an audit pool of 900,000', () => {
    const fs = analyzeRecord('record: r\nkv_pool: 900000 tokens\navailable_kv: 90 GiB\n');
    assert.deepEqual(
      byCode(fs, 'kv-pool-larger-than-card').map((f) => f.path),
      [['kv_pool'], ['available_kv']],
    );
    const audit = byCode(
      runChecks(input('audit', 'logs/x.log', { pool_tokens: 900000, available_kv_gib: 56.34 })),
      'kv-pool-larger-than-card',
    );
    assert.equal(audit.length, 1);
  });

  test('quiet for the real 410,240 tokens and 56.34 GiB', () => {
    const fs = analyzeRecord('record: r\nkv_pool: 410240 tokens\navailable_kv: 56.34 GiB\n');
    assert.deepEqual(fs, []);
    assert.deepEqual(runChecks(input('audit', 'logs/x.log', { pool_tokens: 410240, available_kv_gib: 56.34 })), []);
  });
});

describe('kv-pool-vs-physics', () => {
  test('a 300,000-token pool is far from the physics pool (410,240)', () => {
    const fs = byCode(analyzeRecord('record: r\nkv_pool: 300000 tokens\n'), 'kv-pool-far-from-physics');
    assert.deepEqual(
      fs.map((f) => f.path),
      [['kv_pool']],
    );
    assert.match(fs[0].message, /410,240 tokens/);
  });

  test('the GB/GiB slip is named, with a quick fix that swaps the unit; the fixed cell is quiet', () => {
    const src = 'record: r\navailable_kv: 56.34 GB   # copied from the log\n';
    const fs = analyzeRecord(src);
    const slip = byCode(fs, 'gb-gib-slip');
    assert.equal(slip.length, 1);
    assert.deepEqual(slip[0].path, ['available_kv']);
    assert.match(slip[0].message, /0\.931/);
    assert.match(slip[0].message, /GB to GiB/);
    assert.deepEqual(byCode(fs, 'kv-pool-far-from-physics'), [], 'the slip is named instead of "far"');
    assert.deepEqual(slip[0].quickFix, {
      title: 'Use 56.34 GiB',
      edit: { path: ['available_kv'], value: '56.34 GiB' },
    });
    const fixed = setValueInSource(src, slip[0].quickFix!.edit.path, slip[0].quickFix!.edit.value);
    assert.match(fixed, /available_kv: 56\.34 GiB/);
    assert.deepEqual(analyzeRecord(fixed), []);
  });

  test('two typed numbers that disagree by the GB/GiB ratio: pool 410,240 tokens against 56.34 GB', () => {
    const fs = byCode(analyzeRecord('record: r\nkv_pool: 410240 tokens\navailable_kv: 56.34 GB\n'), 'gb-gib-slip');
    assert.equal(fs.length, 1);
    assert.deepEqual(fs[0].path, ['available_kv']);
  });

  test('gbGibSlip: 0.931 and 1.074 are slips, 0.9 and 1 are not', () => {
    assert.equal(gbGibSlip(1e9 / 2 ** 30), 'written-in-GB');
    assert.equal(gbGibSlip(2 ** 30 / 1e9), 'written-in-GiB');
    assert.equal(gbGibSlip(0.895), undefined);
    assert.equal(gbGibSlip(1), undefined);
  });
});

describe('littles-law-closure', () => {
  test('record: λ·W = 3 req/s × 2 s = 6 against concurrency 16 fires on the concurrency line', () => {
    const fs = byCode(
      analyzeRecord('record: r\nconcurrency: 16\nrequest_throughput: 3 req/s\ne2e: 2 s\n'),
      'littles-law-closure',
    );
    assert.deepEqual(
      fs.map((f) => f.path),
      [['concurrency']],
    );
    assert.match(fs[0].message, /6 requests in flight, but concurrency is 16/);
    assert.match(fs[0].cause!, /load generator/);
    // λ from output throughput / output tokens and `throughput:` in req/s are read too
    assert.equal(
      byCode(analyzeRecord('record: r\nconcurrency: 16\nthroughput: 3 req/s\ne2e: 2 s\n'), 'littles-law-closure')
        .length,
      1,
    );
    assert.equal(
      byCode(
        analyzeRecord('record: r\nconcurrency: 16\noutput_throughput: 3000 tok/s\noutput: 1000 tokens\ne2e: 2 s\n'),
        'littles-law-closure',
      ).length,
      1,
    );
  });

  test('record: quiet when it closes (3 req/s × 2 s = 6 in flight at concurrency 6)', () => {
    assert.deepEqual(
      byCode(
        analyzeRecord('record: r\nconcurrency: 6\nrequest_throughput: 3 req/s\ne2e: 2 s\n'),
        'littles-law-closure',
      ),
      [],
    );
  });

  test("bench: the engine's little {lambda_w, observed_in_flight, error} fires at 10% and is quiet at 0.5%", () => {
    const cell = { concurrency: [8, 16] };
    const off = runChecks(
      input('bench: sweep', cell, {
        points: [
          { concurrency: 8, little: { lambda_w: 7.2, observed_in_flight: 8, error: -0.1 } },
          { concurrency: 16, little: { lambda_w: 15.92, observed_in_flight: 16, error: -0.005 } },
        ],
      }),
    );
    assert.deepEqual(
      byCode(off, 'littles-law-closure').map((f) => f.path),
      [['concurrency', 0]],
    );
  });
});

describe('fixed-seed-prefix-cache', () => {
  const src =
    'bench: sweep\ninput: 1000 tokens\noutput: 1000 tokens\nconcurrency: [1, 8, 64]\nseed: 42   # same prompts everywhere\n';
  const cell = { bench: 'sweep', seed: 42, concurrency: [1, 8, 64] };

  test('a numeric seed over three points against a prefix-cached server fires, with the per-point quick fix', () => {
    const fs = byCode(runChecks(input('bench: sweep', cell)), 'fixed-seed-prefix-cache');
    assert.equal(fs.length, 1);
    assert.deepEqual(fs[0].path, ['seed']);
    assert.deepEqual(fs[0].quickFix, {
      title: 'Use a seed per sweep point (seed: per-point)',
      edit: { path: ['seed'], value: 'per-point' },
    });
    const fixed = setValueInSource(src, fs[0].quickFix!.edit.path, fs[0].quickFix!.edit.value);
    assert.equal((parseCell(fixed).data as any).seed, 'per-point');
    assert.match(fixed, /^seed: per-point/m);
    assert.deepEqual((parseCell(fixed).data as any).concurrency, [1, 8, 64], 'the rest of the cell is kept');
    assert.deepEqual(runChecks(input('bench: sweep', { ...cell, seed: (parseCell(fixed).data as any).seed })), []);
  });

  test('quiet with seed: per-point, with one point, or with prefix caching off in the setup', () => {
    assert.deepEqual(
      runChecks(input('bench: sweep', { ...cell, seed: 'per-point' })).filter(
        (f) => f.code === 'fixed-seed-prefix-cache',
      ),
      [],
    );
    assert.deepEqual(
      runChecks(input('bench: sweep', { ...cell, concurrency: [8] })).filter(
        (f) => f.code === 'fixed-seed-prefix-cache',
      ),
      [],
    );
    assert.deepEqual(
      runChecks(input('bench: sweep', cell, undefined, { setup: setup({ prefix_caching: false }) })).filter(
        (f) => f.code === 'fixed-seed-prefix-cache',
      ),
      [],
    );
  });
});

describe('closed-loop-p99-capacity', () => {
  test('record: a capacity read off a closed loop p99 TTFT fires on the capacity line', () => {
    const fs = byCode(
      analyzeRecord('record: r\nconcurrency: 64\nttft_p99: 900 ms\ncapacity: 4 req/s\n'),
      'closed-loop-p99-capacity',
    );
    assert.deepEqual(
      fs.map((f) => f.path),
      [['capacity']],
    );
    assert.match(fs[0].message, /synchronized waves/);
  });

  test('record: quiet for an open-loop run (rate given)', () => {
    assert.deepEqual(
      byCode(
        analyzeRecord('record: r\nrate: 4 req/s\nttft_p99: 900 ms\ncapacity: 4 req/s\n'),
        'closed-loop-p99-capacity',
      ),
      [],
    );
  });

  test('bench: p99 TTFT 9× the median under a closed loop is the wave signature; 2× is not', () => {
    const cell = { concurrency: [64, 128] };
    const fs = runChecks(
      input('bench: sweep', cell, {
        mode: 'closed',
        points: [
          { concurrency: 64, ttft_ms: { median: 100, p99: 900 } },
          { concurrency: 128, ttft_ms: { median: 200, p99: 400 } },
        ],
      }),
    );
    const w = byCode(fs, 'closed-loop-p99-capacity');
    assert.deepEqual(
      w.map((f) => f.path),
      [['concurrency', 0]],
    );
    assert.equal(w[0].severity, 'info');
    const open = runChecks(
      input('bench: rate', { rate: [4] }, { mode: 'open', points: [{ rate: 4, ttft_ms: { median: 100, p99: 900 } }] }),
    );
    assert.deepEqual(byCode(open, 'closed-loop-p99-capacity'), []);
  });
});

describe('heartbeat-throughput', () => {
  test("a throughput whose source is the log's heartbeat fires on the throughput line", () => {
    const fs = byCode(
      analyzeRecord('record: r\nthroughput: 58.8 tok/s\nsource: vllm log (Avg generation throughput)\n'),
      'heartbeat-throughput',
    );
    assert.deepEqual(
      fs.map((f) => f.path),
      [['throughput']],
    );
    assert.match(fs[0].message, /heartbeat/);
    assert.deepEqual(fs[0].related?.[0].path, ['source']);
  });

  test('quiet when measured on the client', () => {
    assert.deepEqual(
      byCode(analyzeRecord('record: r\nthroughput: 88.4 tok/s\nsource: client\n'), 'heartbeat-throughput'),
      [],
    );
  });
});

describe('fused-sampler-not-exercised', () => {
  test('record: flashinfer selected and no top_p/top_k, or a request seed, fires', () => {
    assert.deepEqual(
      byCode(analyzeRecord('record: r\nsampler: flashinfer\n'), 'fused-sampler-not-exercised').map((f) => f.path),
      [['sampler']],
    );
    assert.equal(
      byCode(
        analyzeRecord('record: r\nsampler: flashinfer\ntop_p: 0.95\ntop_k: 50\nrequest_seed: true\n'),
        'fused-sampler-not-exercised',
      ).length,
      1,
    );
  });

  test('record: quiet with top_p/top_k set, and when the sampler fell back', () => {
    assert.deepEqual(
      byCode(analyzeRecord('record: r\nsampler: flashinfer\ntop_p: 0.95\ntop_k: 50\n'), 'fused-sampler-not-exercised'),
      [],
    );
    assert.deepEqual(byCode(analyzeRecord('record: r\nsampler: fallback\n'), 'fused-sampler-not-exercised'), []);
  });

  test('bench: an audit above that found FlashInfer, and requests with top_p 1 and top_k 0', () => {
    const nb = createNotebookContext(os.tmpdir());
    nb.results.set(1, result('audit', { sampler: 'flashinfer', pool_tokens: 410240 }));
    const off = runChecks(
      input('bench: sweep', { concurrency: [1, 2], top_p: 1, top_k: 0 }, undefined, { notebook: nb }),
    );
    const f = byCode(off, 'fused-sampler-not-exercised');
    assert.deepEqual(
      f.map((x) => x.path),
      [['top_p']],
    );
    assert.equal(f[0].related?.[0].cellIndex, 1, 'related information points at the audit');
  });

  test('bench: quiet with the default top_p/top_k, and quiet when the audit saw a fallback', () => {
    const nb = createNotebookContext(os.tmpdir());
    nb.results.set(1, result('audit', { sampler: 'flashinfer' }));
    assert.deepEqual(
      byCode(
        runChecks(input('bench: sweep', { concurrency: [1], top_p: 0.95, top_k: 50 }, undefined, { notebook: nb })),
        'fused-sampler-not-exercised',
      ),
      [],
    );
    nb.results.set(1, result('audit', { sampler: 'fallback' }));
    assert.deepEqual(
      byCode(
        runChecks(input('bench: sweep', { concurrency: [1], top_p: 1, top_k: 0 }, undefined, { notebook: nb })),
        'fused-sampler-not-exercised',
      ),
      [],
    );
  });
});

describe('no setup', () => {
  test('physics rules stay quiet without a setup; method rules still speak', () => {
    const fs = analyzeCells(
      ['record: r\nprompt: 1000 tokens\nttft: 23 ms\nthroughput: 58.8 tok/s\nsource: log\n'],
      os.tmpdir(),
    )[0];
    assert.deepEqual(codes(fs), ['heartbeat-throughput']);
  });
});
