/**
 * Speculative decoding (issue 16 item 5): `predict: speculative` and the decode-floor checks on a
 * speculative server. Qwen3-8B bf16 on an A100 SXM4 80GB (decode floor 8.03 ms), Qwen3-0.6B as
 * the draft.
 */
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { describe, test } from 'node:test';
import { findGpu, findModel } from '../../src/core/catalog';
import { analyzeCells, createNotebookContext, runCell } from '../../src/core/engine/engine';
import type { Setup } from '../../src/core/engine/types';
import type { Finding } from '../../src/core/findings';
import { acceptanceProblem, draftPassSeconds, expectedTokensPerStep } from '../../src/core/physics/speculative';
import { evidence, snapshotOf } from '../../src/core/bench/prometheus';
import { SimEngine } from '../../src/core/sim/engine';
import { runLoad } from '../../src/core/sim/load';
import { startSimServer } from '../../src/core/sim/server';

describe('expected tokens per target step', () => {
  test('one rate α: (1 − α^(k+1)) / (1 − α), the same as its per-position rates α, α², …', () => {
    const a = 0.7;
    assert.equal(expectedTokensPerStep(4, a).toFixed(6), ((1 - a ** 5) / (1 - a)).toFixed(6));
    assert.equal(
      expectedTokensPerStep(4, [a, a ** 2, a ** 3, a ** 4]).toFixed(9),
      expectedTokensPerStep(4, a).toFixed(9),
    );
    // Every draft accepted: k + 1 tokens; none: the bonus token alone.
    assert.equal(expectedTokensPerStep(4, 1), 5);
    assert.equal(expectedTokensPerStep(4, 0), 1);
    // Measured per-position rates (vLLM's "Per-position acceptance rate"): 1 + their sum.
    assert.equal(expectedTokensPerStep(3, [0.8, 0.5, 0.3]).toFixed(9), (2.6).toFixed(9));
  });

  test('per-position rates that rise, or one too few, are refused with what to write', () => {
    assert.match(acceptanceProblem(3, [0.5, 0.6, 0.2])!, /cannot rise/);
    assert.match(acceptanceProblem(3, [0.5, 0.4])!, /one per draft position/);
    assert.match(acceptanceProblem(3, 1.2)!, /\[0, 1\]/);
    assert.equal(acceptanceProblem(3, [0.8, 0.5, 0.3]), undefined);
  });
});

async function predict(body: string) {
  const ctx = createNotebookContext(process.cwd(), {});
  assert.ok((await runCell('setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n', 0, ctx)).ok);
  return runCell(`predict: speculative\n${body}`, 1, ctx);
}

interface Row {
  batch: number;
  plain_step_ms: number;
  speedup: number;
  verify_bound: string;
}

describe('predict: speculative', () => {
  test('k = 4 at α = 0.7 with Qwen3-0.6B: 2.77 tokens a step, a speedup under that bound that falls with batch and ends', async () => {
    const r = await predict('k: 4\nacceptance: 70%\ndraft: qwen3-0.6b\ncontext: 1k tokens\n');
    assert.ok(r.ok, JSON.stringify(r.error ?? r.findings));
    const v = r.values as {
      tokens_per_step: number;
      speedup_bound: number;
      spec_tpot_floor_ms: number;
      decode_floor_ms: number;
      compute_bound_batch?: number;
      break_even_batch?: number;
      rows: Row[];
    };
    assert.equal(v.tokens_per_step.toFixed(4), '2.7731');
    assert.equal(v.speedup_bound, v.tokens_per_step);
    // The TPOT floor with speculation is the decode floor over E.
    assert.equal(v.spec_tpot_floor_ms.toFixed(6), (v.decode_floor_ms / v.tokens_per_step).toFixed(6));
    const [b1] = v.rows;
    assert.equal(b1.batch, 1);
    assert.ok(b1.speedup > 1 && b1.speedup < v.speedup_bound, `batch-1 speedup ${b1.speedup}`);
    // The plain step is the simulator's own batch-1 decode step.
    const setup: Setup = {
      name: 's',
      gpu: findGpu('a100-sxm4-80gb')!,
      model: findModel('qwen3-8b')!,
      weights: 'bf16',
      kvCache: 'bf16',
    };
    assert.equal(b1.plain_step_ms.toFixed(6), (new SimEngine({ setup }).decodeStepTime(1000, 1) * 1e3).toFixed(6));
    for (let i = 1; i < v.rows.length; i++) assert.ok(v.rows[i].speedup < v.rows[i - 1].speedup);
    // Where it stops paying: after the verify step has turned compute-bound.
    assert.ok(v.compute_bound_batch !== undefined && v.break_even_batch !== undefined);
    assert.ok(v.compute_bound_batch < v.break_even_batch);
    const last = v.rows[v.rows.length - 1];
    assert.equal(last.verify_bound, 'compute');
    assert.ok(last.speedup < 1);
    // The facts: a per-user curve each way and the speculative TPOT floor.
    assert.ok(r.facts.some((f) => f.kind === 'floor' && f.metric === 'tpot-speculative'));
    assert.equal(r.facts.filter((f) => f.kind === 'curve').length, 2);
  });

  test("tensor_parallel 4 (Llama-3.1-70B on H100s, Llama-3.1-8B draft): the simulator's own TP step, the draft on the same TP group with its all-reduces, the term named", async () => {
    const ctx = createNotebookContext(process.cwd(), {});
    const setupCell = 'setup: tp4\ngpu: h100-sxm\nmodel: llama-3.1-70b\ntensor_parallel: 4\n';
    assert.ok((await runCell(setupCell, 0, ctx)).ok);
    const r = await runCell(
      'predict: speculative\nk: 4\nacceptance: 0.7\ndraft: llama-3.1-8b\ncontext: 1k tokens\n',
      1,
      ctx,
    );
    assert.ok(r.ok, JSON.stringify(r.error ?? r.findings));
    assert.deepEqual(
      r.findings.filter((f) => f.severity !== 'info'),
      [],
    );
    const rows = (r.values as { rows: (Row & { draft_ms: number })[] }).rows;
    const setup: Setup = {
      name: 'tp4',
      gpu: findGpu('h100-sxm')!,
      model: findModel('llama-3.1-70b')!,
      weights: 'bf16',
      kvCache: 'bf16',
      parallel: { tp: 4, pp: 1, dp: 1 },
    };
    // The plain step is the simulator's batch-1 decode step on the same four GPUs (W / 4, all-reduces).
    assert.equal(rows[0].plain_step_ms.toFixed(6), (new SimEngine({ setup }).decodeStepTime(1000, 1) * 1e3).toFixed(6));
    // Each of the k draft passes carries the draft's own 2 × 32 all-reduces: at least their latency.
    const link = setup.gpu.interconnect!;
    assert.ok(rows[0].draft_ms > 4 * 2 * 32 * link.latency * 1e3, `draft ${rows[0].draft_ms} ms`);
    // On one GPU the draft would read four times the bytes per GPU: the TP draft pass is cheaper than that.
    const one = draftPassSeconds(
      { ...setup, parallel: { tp: 1, pp: 1, dp: 1 } },
      { model: findModel('llama-3.1-8b')! },
      1000,
      1,
      0.6,
    );
    const four = draftPassSeconds(setup, { model: findModel('llama-3.1-8b')! }, 1000, 1, 0.6);
    assert.ok(four < one / 2, `TP draft ${four} s vs one GPU ${one} s`);
    const summary = JSON.stringify(r.outputs);
    assert.match(summary, /all-reduces of a verify step at batch 1/);
    assert.match(summary, /TP 4 × PP 1 × DP 1 = 4 GPUs/);
  });

  test('a better draft (higher acceptance) pays up to a larger batch', async () => {
    const at = async (a: number) =>
      (
        (await predict(`k: 4\nacceptance: ${a}\ndraft: qwen3-0.6b\ncontext: 1k tokens\n`)).values as {
          break_even_batch: number;
        }
      ).break_even_batch;
    assert.ok((await at(0.9)) > (await at(0.5)));
  });

  test('an unknown draft and rising per-position rates are errors at their keys', async () => {
    const a = await predict('k: 2\nacceptance: 0.6\ndraft: qwen3-tiny\ncontext: 1k tokens\n');
    assert.equal(a.ok, false);
    assert.ok(a.findings.some((f) => f.path[0] === 'draft' && /not a model of the catalog/.test(f.message)));
    const b = await predict('k: 2\nacceptance: [0.5, 0.7]\ndraft: {params: 500000000}\ncontext: 1k tokens\n');
    assert.equal(b.ok, false);
    assert.ok(b.findings.some((f) => f.path[0] === 'acceptance' && /cannot rise/.test(f.message)));
  });
});

describe('decode-floor checks on a speculative server', () => {
  const SPEC = 'setup: spec\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nspeculative: {k: 4, acceptance: 0.7}\n';
  const record = (tpot: string, setupSrc = SPEC): Finding[] =>
    analyzeCells([setupSrc, `record: r\ntpot: ${tpot}\n`], os.tmpdir())[1];
  const codes = (fs: Finding[]) => fs.map((f) => f.code).filter((c) => /floor|speculative/.test(c));

  test('a TPOT of 4 ms beats the 8.03 ms floor but not floor / E = 2.9 ms: no finding on a speculative server, a warning on a plain one', () => {
    assert.deepEqual(codes(record('4 ms')), []);
    assert.deepEqual(codes(record('4 ms', 'setup: plain\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n')), [
      'tpot-below-decode-floor',
    ]);
  });

  test('2 ms: under floor / E, so the drafts were accepted more often than the setup says (information)', () => {
    const fs = record('2 ms');
    assert.deepEqual(codes(fs), ['tpot-beats-speculative-acceptance']);
    assert.equal(fs.find((f) => f.code === 'tpot-beats-speculative-acceptance')!.severity, 'info');
    assert.match(fs[0].message, /2\.9 ms/);
  });

  test('1 ms: under floor / (k + 1) = 1.61 ms, which no acceptance explains (a warning)', () => {
    const fs = record('1 ms');
    assert.deepEqual(codes(fs), ['tpot-below-speculative-floor']);
    assert.match(fs.find((f) => f.code === 'tpot-below-speculative-floor')!.message, /1\.61 ms/);
  });
});

/** An 8-token prompt asking for exactly 300 tokens (ignore_eos), with any extra request fields. */
function complete300(sim: { url: string; model: string }, extra: Record<string, unknown> = {}) {
  return fetch(`${sim.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: sim.model,
      prompt: [1, 2, 3, 4, 5, 6, 7, 8],
      max_tokens: 300,
      ignore_eos: true,
      ...extra,
    }),
  });
}

describe('the simulator decodes speculatively and reports acceptance as vLLM does', () => {
  const specSetup = (): Setup => ({
    name: 'spec',
    gpu: findGpu('a100-sxm4-80gb')!,
    model: findModel('qwen3-8b')!,
    weights: 'bf16',
    kvCache: 'bf16',
    server: { speculative: { k: 4, acceptance: 0.7, draft: 'qwen3-0.6b' } },
  });

  test('batch 1: the accepted drafts follow α^i, TPOT beats the plain floor by about E, as predict: speculative says', async () => {
    const e = new SimEngine({ setup: specSetup() });
    const r = runLoad(e, { input: 1000, output: 2000, requests: 2, concurrency: 1, seed: 3 });
    const s = e.spec;
    assert.ok(s.drafts > 500, `${s.drafts} drafts`);
    const perPos = s.acceptedPerPos.map((n) => n / s.drafts);
    perPos.forEach((p, i) => assert.ok(Math.abs(p - 0.7 ** (i + 1)) < 0.05, `position ${i}: ${p}`));
    const meanLen = 1 + s.acceptedTokens / s.drafts;
    assert.ok(Math.abs(meanLen - expectedTokensPerStep(4, 0.7)) < 0.15, `mean acceptance length ${meanLen}`);
    // Every request still gets exactly its output tokens.
    assert.deepEqual(
      r.records.map((x) => x.outputTokens),
      [2000, 2000],
    );
    const tpot = r.records.map((x) => (x.endMs - x.chunkMs[0]) / (x.outputTokens! - 1));
    const plan = (await predict('k: 4\nacceptance: 0.7\ndraft: qwen3-0.6b\ncontext: 2k tokens\nbatch: 1\n')).values as {
      decode_floor_ms: number;
      rows: { per_user_spec_tok_s: number }[];
    };
    for (const t of tpot) {
      assert.ok(t < plan.decode_floor_ms && t > plan.decode_floor_ms / 5, `TPOT ${t} ms`);
      // The simulated rate is the predicted one within 10% (the context grows from 1k to 3k here).
      assert.ok(Math.abs(1000 / t / plan.rows[0].per_user_spec_tok_s - 1) < 0.1, `TPOT ${t} ms`);
    }
  });

  for (const clock of ['here', 'worker'] as const)
    test(`/metrics carries vLLM's spec_decode counters, and the bench's per-point evidence reads acceptance from their deltas (clock ${clock})`, async () => {
      const sim = await startSimServer({
        port: 0,
        speed: 50,
        clock,
        setup: specSetup(),
        engine: { maxModelLen: 4096 },
      });
      try {
        const before = snapshotOf(await (await fetch(`${sim.url}/metrics`)).text());
        const res = await complete300(sim);
        const body = (await res.json()) as { usage: { completion_tokens: number } };
        assert.equal(body.usage.completion_tokens, 300);
        const text = await (await fetch(`${sim.url}/metrics`)).text();
        assert.match(text, /^vllm:spec_decode_num_accepted_tokens_per_pos_total\{.*position="3"\} /m);
        const ev = evidence(before, snapshotOf(text));
        const sd = ev.spec_decode!;
        assert.ok(sd.drafts > 0 && sd.draft_tokens > 0);
        assert.equal(sd.acceptance_rate, sd.accepted_tokens / sd.draft_tokens);
        assert.equal(sd.mean_acceptance_length, 1 + sd.accepted_tokens / sd.drafts);
        // Per position, from the labelled counter: k = 4 rates, falling, summing to accepted / drafts.
        const pos = sd.per_position!;
        assert.equal(pos.length, 4);
        pos.slice(1).forEach((r, i) => assert.ok(r <= pos[i], `position ${i + 1}: ${r} > ${pos[i]}`));
        assert.ok(Math.abs(pos.reduce((a, b) => a + b, 0) - sd.accepted_tokens / sd.drafts) < 1e-9);
        // 300 tokens: one from the prefill, the rest from drafts' accepted tokens and bonus tokens.
        assert.equal(sd.drafts + sd.accepted_tokens, 299);
      } finally {
        await sim.close();
      }
    });

  test("a step's accepted tokens stream as one chunk, and the inter-token histogram counts steps, as vLLM's output processor and IterationStats do", async () => {
    const sim = await startSimServer({ port: 0, speed: 50, setup: specSetup(), engine: { maxModelLen: 4096 } });
    try {
      const count = (text: string, name: string) =>
        Number(new RegExp(`^${name}_count(?:\\{[^}]*\\})? (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
      const before = await (await fetch(`${sim.url}/metrics`)).text();
      const res = await complete300(sim, { stream: true, stream_options: { include_usage: true } });
      const events = (await res.text())
        .split('\n\n')
        .filter((e) => e.startsWith('data: {'))
        .map(
          (e) => JSON.parse(e.slice(6)) as { choices: { text: string }[]; usage: { completion_tokens: number } | null },
        );
      const texts = events.filter((e) => e.choices.length).map((e) => e.choices[0].text);
      assert.equal(events.at(-1)!.usage!.completion_tokens, 300);
      // Every token is one character of text here: the chunks carry all 300, several to a chunk.
      assert.equal(texts.join('').length, 300);
      assert.ok(texts.length < 300 / 2, `${texts.length} chunks for 300 tokens`);
      assert.ok(Math.max(...texts.map((t) => t.length)) <= 5, 'at most k + 1 = 5 tokens a step');
      const after = await (await fetch(`${sim.url}/metrics`)).text();
      const sd = evidence(snapshotOf(before), snapshotOf(after)).spec_decode!;
      // One chunk for the prefill's token, then one per verify step (a draft); as many ITL observations as gaps.
      assert.equal(texts.length, 1 + sd.drafts);
      const itl = count(after, 'vllm:inter_token_latency_seconds') - count(before, 'vllm:inter_token_latency_seconds');
      assert.equal(itl, sd.drafts);
    } finally {
      await sim.close();
    }
  });

  test('a plain server exposes no spec_decode counters', async () => {
    const sim = await startSimServer({ port: 0, speed: 50 });
    try {
      assert.doesNotMatch(await (await fetch(`${sim.url}/metrics`)).text(), /spec_decode/);
    } finally {
      await sim.close();
    }
  });
});
