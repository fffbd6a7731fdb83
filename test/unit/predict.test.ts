/** The predict kinds run through the engine, as a notebook or `inflab eval` runs them. */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { analyzeCells, createNotebookContext, runCell } from '../../src/core/engine/engine';
import { MIME } from '../../src/core/engine/outputs';
import type { CellResult } from '../../src/core/engine/types';
import { runInflabSync } from '../support/cli';

const SETUP = 'setup: day4\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nweights: bf16\nkv_cache: bf16\n';

async function run(...cells: string[]): Promise<CellResult[]> {
  const nb = createNotebookContext(os.tmpdir());
  const out: CellResult[] = [];
  for (let i = 0; i < cells.length; i++) out.push(await runCell(cells[i], i, nb));
  return out;
}

function plain(r: CellResult): string {
  return r.outputs.flatMap((o) => o.items.filter((i) => i.mime === MIME.plain).map((i) => String(i.data))).join('\n');
}

function vega(r: CellResult, n = 0): any {
  return r.outputs.flatMap((o) => o.items.filter((i) => i.mime === MIME.vegaLite6).map((i) => i.data))[n];
}

const round = (x: unknown, d: number) => Number((x as number).toFixed(d));

test('decode-roofline: the named values and rows, with a log-x plot and the roofs as rules', async () => {
  const [, r] = await run(SETUP, 'predict: decode-roofline\nname: roof\ncontext: 1k tokens\nbatch: [1, 16, 64, 128]\n');
  assert.equal(r.ok, true, JSON.stringify(r.error));
  const v = r.values;
  assert.equal(v.kv_bytes_per_token, 147_456);
  assert.equal(v.weights_bytes, 16_381_470_720);
  assert.equal(round(v.decode_step_floor_ms, 2), 8.03);
  assert.equal(round(v.ceiling_tok_s, 1), 124.5);
  assert.equal(Math.round(v.half_saturation_batch as number), 111);
  assert.equal(Math.round(v.asymptote_tok_s as number), 13_828);
  assert.equal(Math.round((v.compute_roof_tok_s as number) / 1000), 19);
  assert.equal(v.context_mode, 'fixed');
  const rows = v.rows as {
    batch: number;
    step_ms: number;
    per_user_tok_s: number;
    aggregate_tok_s: number;
    bound: string;
  }[];
  assert.deepEqual(Object.keys(rows[0]).sort(), [
    'aggregate_tok_s',
    'batch',
    'bound',
    'bubble',
    'comm_ms',
    'per_user_tok_s',
    'step_ms',
  ]);
  assert.deepEqual(
    rows.map((x) => Math.round(x.aggregate_tok_s)),
    [123, 1741, 5054, 7403],
  );
  const spec = vega(r);
  assert.equal(spec.layer[0].encoding.x.scale.type, 'log');
  assert.equal(spec.layer[1].mark.type, 'rule');
  assert.equal(spec.layer[1].data.values.length, 3);
  assert.match(plain(r), /decode step floor \(batch 1\) = W \/ BW\s+8\.03 ms/);
  assert.match(plain(r), /none: the bandwidth asymptote is below the compute roof/);
});

test('decode-roofline live-context variant averages input..input+output', async () => {
  const [, r] = await run(SETUP, 'predict: decode-roofline\ninput: 1k tokens\noutput: 1k tokens\nbatch: [1, 64]\n');
  assert.equal(r.ok, true, JSON.stringify(r.error));
  assert.equal(r.values.context, 1500);
  assert.equal(r.values.context_mode, 'live');
  assert.match(plain(r), /live context: mean of 1,000\.\.2,000 = 1,500 tokens/);
  const both = (
    await run(SETUP, 'predict: decode-roofline\ncontext: 1k tokens\ninput: 1k tokens\noutput: 1k tokens\n')
  )[1];
  assert.equal(both.ok, false);
  assert.match(both.error!.message, /either "context:"/);
});

test('decode-roofline on a MoE says which experts it assumed read per step', async () => {
  const moe = 'setup: moe\ngpu: h100-sxm\nmodel: qwen3-30b-a3b\n';
  const [, a, t, e] = await run(
    moe,
    'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 64]\nmoe_weights: active\n',
    'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 64]\nmoe_weights: total\n',
    'predict: decode-roofline\ncontext: 1k tokens\nbatch: [1, 64]\n',
  );
  assert.equal(a.values.moe_weights, 'active');
  assert.equal(t.values.moe_weights, 'total');
  assert.equal(e.values.moe_weights, 'expected');
  assert.match(plain(a), /MoE weights read per step\s+active: active experts only/);
  assert.match(plain(t), /total: every expert each step/);
  assert.match(plain(e), /MoE assumption: expected/);
  assert.ok((a.values.ceiling_tok_s as number) > (t.values.ceiling_tok_s as number));
  // On a dense model the key does nothing, and an info finding says so.
  const [, d] = await run(SETUP, 'predict: decode-roofline\ncontext: 1k tokens\nmoe_weights: total\n');
  assert.ok(d.findings.some((f) => f.code === 'moe-weights-dense' && f.path[0] === 'moe_weights'));
  const bad = (await run(SETUP, 'predict: decode-roofline\ncontext: 1k tokens\nmoe_weights: some\n'))[1];
  assert.equal(bad.ok, false);
  assert.deepEqual(bad.error!.path, ['moe_weights']);
});

test('floors: both prefill formulas, each named; decode step floor; ridge point', async () => {
  const [, r] = await run(SETUP, 'predict: floors\nprompt: 1,000 tokens\n');
  assert.equal(r.ok, true, JSON.stringify(r.error));
  assert.equal(round(r.values.prefill_floor_ms, 1), 52.5);
  assert.equal(r.values.prefill_floor_formula, '2 · params · N / peak');
  assert.equal(round(r.values.prefill_floor_strict_ms, 1), 45.5);
  assert.match(String(r.values.prefill_floor_strict_formula), /N\(N\+1\)\/2/);
  assert.equal(round(r.values.decode_step_floor_ms, 2), 8.03);
  assert.equal(Math.round(r.values.ridge_flop_per_byte as number), 153);
  const text = plain(r);
  assert.match(text, /prefill floor, simple: 2 · params · N \/ peak\s+52\.5 ms/);
  assert.match(
    text,
    /prefill floor, stricter count: no embedding gather, lm_head on the last token, \+ causal attention\s+45\.5 ms/,
  );
  assert.match(text, /ridge point = peak \/ BW\s+153 FLOP\/byte/);
  // `input:` is the same key; a prompt without a unit is tokens.
  const [, i] = await run(SETUP, 'predict: floors\ninput: 2000\n');
  assert.equal(round(i.values.prefill_floor_ms, 1), 105.0);
});

test('floors pick the peak of the weights dtype, and say when the card lacks it', async () => {
  const [, h] = await run(
    'setup: h\ngpu: h100-sxm\nmodel: qwen3-8b\nweights: fp8\nkv_cache: fp8\n',
    'predict: floors\nprompt: 1k tokens\n',
  );
  assert.equal(h.values.peak_flops, 1979e12);
  assert.equal(h.values.kv_bytes_per_token, 73_728);
  const [, a] = await run(
    'setup: a\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nweights: fp8\n',
    'predict: floors\nprompt: 1k tokens\n',
  );
  assert.equal(a.values.peak_flops, 312e12);
  assert.match(plain(a), /no native fp8 peak/);
});

test('kv-pool: 410,240 tokens from 56.34 GiB, with a memory breakdown plot', async () => {
  const [, r] = await run(SETUP, 'predict: kv-pool\nname: pool\n');
  assert.equal(r.ok, true, JSON.stringify(r.error));
  assert.equal(r.values.pool_tokens, 410_240);
  assert.equal(round(r.values.available_kv_gib, 2), 56.34);
  assert.equal(r.values.kv_bytes_per_token, 147_456);
  assert.equal(r.values.max_model_len, 40_960);
  assert.equal(round(r.values.max_concurrency, 2), 10.02);
  assert.match(plain(r), /GPU KV cache size\s+410,240 tokens/);
  assert.match(plain(r), /= available KV cache memory\s+56\.34 GiB/);
  const spec = vega(r);
  assert.equal(spec.mark.type, 'bar');
  const parts = spec.data.values.map((x: { part: string }) => x.part);
  assert.deepEqual(parts.slice(0, 4), ['weights', 'activation peak', 'non-torch', 'KV cache pool']);
  assert.equal(r.findings.length, 0);
  // From the log's number.
  const [, g] = await run(SETUP, 'predict: kv-pool\navailable_kv: 56.34 GiB\n');
  assert.equal(g.values.pool_tokens, 410_240);
  assert.equal(g.values.available_from, 'given');
  assert.match(plain(g), /implied activation peak \+ non-torch/);
});

test('kv-pool keys override the defaults, and setup.server knobs are read', async () => {
  const [, pct, act, len] = await run(
    SETUP,
    'predict: kv-pool\ngpu_memory_utilization: 80%\n',
    'predict: kv-pool\nactivation_peak: 1 GiB\nnon_torch_memory: 0 GiB\n',
    'predict: kv-pool\nmax_model_len: 8k tokens\n',
  );
  assert.equal(pct.values.gpu_memory_utilization, 0.8);
  assert.ok((pct.values.pool_tokens as number) < 410_240);
  assert.equal(act.values.activation_peak_bytes, 2 ** 30);
  assert.equal(act.values.non_torch_bytes, 0);
  assert.equal(len.values.max_model_len, 8000);
  const [, fromSetup] = await run(SETUP + 'gpu_memory_utilization: 0.8\nmax_model_len: 8192\n', 'predict: kv-pool\n');
  assert.equal(fromSetup.values.gpu_memory_utilization, 0.8);
  assert.equal(fromSetup.values.max_model_len, 8192);
  assert.equal(fromSetup.values.pool_tokens, pct.values.pool_tokens);
  // A bare size is an error on its own line that says what to write.
  const [, bare] = await run(SETUP, 'predict: kv-pool\nactivation_peak: 3\n');
  assert.equal(bare.ok, false);
  assert.deepEqual(bare.error!.path, ['activation_peak']);
  assert.match(bare.error!.message, /needs a unit.*80 GiB/);
  const [, frac] = await run(SETUP, 'predict: kv-pool\ngpu_memory_utilization: 1.5\n');
  assert.equal(frac.ok, false);
  assert.match(frac.error!.message, /0\.9, or a percentage such as 90%/);
});

test('the GB/GiB slip: an 80 GB card and a 3 GB activation guess; the warning says why', async () => {
  const cell = 'predict: kv-pool\ngpu: {base: a100-sxm4-80gb, memory: 80 GB}\nactivation_peak: 3 GB\n';
  const [, r] = await run(SETUP, cell);
  assert.equal(r.ok, true, JSON.stringify(r.error));
  // 0.9 × 80e9 − 16.38e9 − 3e9 − 0.154 GiB, in whole blocks (docs/physics.md's 367,346 came from the
  // real prediction's own arithmetic; the V1 formula on these inputs gives 355,712, 13.3% under).
  assert.equal(r.values.pool_tokens, 355_712);
  assert.ok((r.values.pool_tokens as number) < 0.895 * 410_240);
  const w = r.findings.find((f) => f.code === 'kv-pool-gb-card-memory');
  assert.ok(w, JSON.stringify(r.findings));
  assert.equal(w.severity, 'warning');
  assert.deepEqual(w.path, ['gpu', 'memory']);
  assert.match(w.message, /80 GB = 74\.51 GiB/);
  assert.match(w.message, /"80GB" card holds 80 GiB/);
  assert.match(w.message, /355,712 tokens instead of 391,712 \(9\.2% under\)/);
  assert.match(
    w.message,
    /activation_peak of 3\.00 GB .* far above .* 410,240 tokens, so the two slips together cost 13\.3%/,
  );
  assert.match(w.cause!, /10\.5%/);
  assert.equal(w.quickFix?.edit.value, '80 GiB');
  // The setup's own warning on the same line stays too.
  assert.ok(r.findings.some((f) => f.code === 'gb-gib-card-memory'));
  // The editor sees the same warning before anything runs.
  const analyzed = analyzeCells([SETUP, cell], os.tmpdir());
  assert.ok(analyzed[1].some((f) => f.code === 'kv-pool-gb-card-memory'));
  // Set in the setup cell instead: the warning points at the kv-pool cell and relates to the setup.
  const [, , s] = await run(
    SETUP,
    'setup: slip\ngpu: {base: a100-sxm4-80gb, memory: 80 GB}\nmodel: qwen3-8b\n',
    'predict: kv-pool\n',
  );
  const ws = s.findings.find((f) => f.code === 'kv-pool-gb-card-memory')!;
  assert.deepEqual(ws.path, ['predict']);
  assert.equal(ws.related?.[0].cellIndex, 1);
});

test('roofline: roofs, ridge, and decode and prefill operating points', async () => {
  const [, r] = await run(SETUP, 'predict: roofline\ncontext: 1k tokens\nbatch: [1, 64]\nprompt: 1k tokens\n');
  assert.equal(r.ok, true, JSON.stringify(r.error));
  assert.equal(Math.round(r.values.ridge_flop_per_byte as number), 153);
  const pts = r.values.points as { label: string; kind: string; intensity: number; bound: string }[];
  assert.deepEqual(
    pts.map((p) => [p.kind, p.bound]),
    [
      ['decode', 'bandwidth'],
      ['decode', 'bandwidth'],
      ['prefill', 'compute'],
    ],
  );
  assert.ok(Math.abs(pts[0].intensity - 1) < 0.02); // batch-1 decode: ≈1 FLOP per byte
  const spec = vega(r);
  assert.equal(spec.layer[0].encoding.x.scale.type, 'log');
  assert.equal(spec.layer[0].encoding.y.scale.type, 'log');
  assert.ok(spec.layer.some((l: any) => l.mark.type === 'point'));
  const roofs = new Set(spec.layer[0].data.values.map((x: { roof: string }) => x.roof));
  assert.ok([...roofs].some((x) => /bf16\/fp16 peak 312 TFLOP\/s \(used\)/.test(String(x))));
});

test('`inflab eval examples/predict.yaml --json` prints the check values', () => {
  const r = runInflabSync(['eval', 'examples/predict.yaml', '--json'], { source: true });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { kind: string; name: string | null; values: Record<string, any> }[];
  const by = (n: string) => out.find((c) => c.name === n)!.values;
  assert.deepEqual(
    out.map((c) => c.kind),
    [
      'setup',
      'predict: decode-roofline',
      'predict: decode-roofline',
      'predict: floors',
      'predict: kv-pool',
      'predict: kv-pool',
      'predict: roofline',
    ],
  );
  const d = by('decode');
  assert.equal(d.kv_bytes_per_token, 147_456);
  assert.equal((d.weights_bytes / 1e9).toFixed(2), '16.38');
  assert.equal(d.decode_step_floor_ms.toFixed(2), '8.03');
  assert.equal(d.ceiling_tok_s.toFixed(1), '124.5');
  assert.equal(Math.round(d.half_saturation_batch), 111);
  assert.ok(Math.abs(d.asymptote_tok_s / 13_870 - 1) < 0.005);
  assert.equal(Math.round(d.compute_roof_tok_s / 1000), 19);
  assert.equal(d.rows.length, 8);
  assert.equal(by('decode-live').context, 1500);
  assert.equal(by('floors').prefill_floor_ms.toFixed(1), '52.5');
  assert.equal(by('floors').prefill_floor_strict_ms.toFixed(1), '45.5');
  assert.equal(Math.round(by('floors').ridge_flop_per_byte), 153);
  assert.equal(by('pool').pool_tokens, 410_240);
  assert.equal(by('pool').available_kv_gib.toFixed(2), '56.34');
  assert.equal(by('pool-from-log').pool_tokens, 410_240);
  assert.equal(Math.round(by('roofline').ridge_flop_per_byte), 153);
});

test('predict cells without a setup say how to add one', async () => {
  const nb = createNotebookContext(fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-p-')));
  for (const kind of ['floors', 'kv-pool', 'roofline']) {
    const r = await runCell(`predict: ${kind}\n`, 0, nb);
    assert.equal(r.ok, false);
    assert.equal(r.error!.code, 'needs-setup');
  }
  // Inline setup keys are enough.
  const r = await runCell('predict: floors\ngpu: l40s\nmodel: llama-3.1-8b\nprompt: 1k tokens\n', 0, nb);
  assert.equal(r.ok, true, JSON.stringify(r.error));
  assert.equal(Math.round(r.values.peak_flops as number), 362e12);
});

test('an activation guess far above what a real run measured is an info finding on its line', async () => {
  const [, r] = await run(SETUP, 'predict: kv-pool\nactivation_peak: 3 GB\n');
  const f = r.findings.find((x) => x.code === 'kv-pool-activation-guess');
  assert.ok(f, JSON.stringify(r.findings));
  assert.equal(f.severity, 'info');
  assert.deepEqual(f.path, ['activation_peak']);
  assert.match(f.fix!, /available_kv/);
  assert.equal(r.values.pool_tokens, 391_712);
});
