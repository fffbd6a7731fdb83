/**
 * `predict: serving` at the scale of a real trace, in a process of its own (so its peak memory is
 * its own): one cell of REQUESTS requests of 2k/1k at concurrency 256, run as a notebook runs it
 * (runCell: slices, progress, yields), with wall and CPU time and the process's peak RSS; then a
 * calibration-style loop: a 4-point sweep (concurrency 1, 8, 32, 128 × 200 requests of 1k/1k)
 * run RUNS times, as a fit over a knob would run it; and lazy decoding against the step-by-step
 * reference on the same point shape (REF_REQUESTS requests, one after the other in this process):
 * the CPU ratio, and whether every figure came out identical. Prints one JSON line.
 *
 * Environment: PERF_SERVING_REQUESTS (default 100000), PERF_CALIBRATION_RUNS (default 6),
 * PERF_SERVING_REF_REQUESTS (default 5000).
 */
import { isDeepStrictEqual } from 'node:util';
import * as os from 'node:os';
import { findGpu, findModel } from '../../src/core/catalog';
import { createNotebookContext, runCell } from '../../src/core/engine/engine';
import type { Setup } from '../../src/core/engine/types';
import { SimEngine } from '../../src/core/sim/engine';
import { LoadRun } from '../../src/core/sim/load';

const REQUESTS = Number(process.env.PERF_SERVING_REQUESTS ?? 100_000);
const RUNS = Number(process.env.PERF_CALIBRATION_RUNS ?? 6);
const REF_REQUESTS = Number(process.env.PERF_SERVING_REF_REQUESTS ?? 5000);
const load = () => os.loadavg().map((x) => Math.round(x * 100) / 100);

const ctx = createNotebookContext(process.cwd(), {});
const setup = await runCell('setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\n', 0, ctx);
if (!setup.ok) throw new Error('setup cell failed');

const timed = async (src: string, index: number) => {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  let updates = 0;
  const r = await runCell(src, index, ctx, { onProgress: () => void updates++ });
  const cpu = process.cpuUsage(c0);
  if (!r.ok) throw new Error(`cell failed: ${JSON.stringify(r.error ?? r.findings).slice(0, 300)}`);
  return { r, wallS: (performance.now() - t0) / 1000, cpuS: (cpu.user + cpu.system) / 1e6, updates };
};

const before = load();
const big = await timed(`predict: serving\ninput: 2048\noutput: 1024\nconcurrency: [256]\nrequests: ${REQUESTS}\n`, 1);
const p = (big.r.values as { points: { metrics: import('../../src/core/bench/metrics').PointMetrics }[] }).points[0]
  .metrics;
const bigOut = {
  case: `${REQUESTS.toLocaleString('en-US')} requests of 2048/1024 tokens at concurrency 256, Qwen3-8B on A100 SXM4 80GB`,
  tokens: REQUESTS * 3072,
  wall_s: Math.round(big.wallS * 10) / 10,
  cpu_s: Math.round(big.cpuS * 10) / 10,
  tokens_per_cpu_s: Math.round((REQUESTS * 3072) / big.cpuS),
  peak_rss_mb: Math.round(process.resourceUsage().maxRSS / 1024),
  itl_sketched: !!p.itl_ms.approx,
  itl_n: p.itl_ms.n,
  itl_p99_ms: p.itl_ms.p.p99,
  ttft_p99_ms: p.ttft_ms.p.p99,
  loadavg_before: before,
  loadavg_after: load(),
};

const runs: { wall_s: number; cpu_s: number }[] = [];
for (let k = 0; k < RUNS; k++) {
  const t = await timed(
    `predict: serving\ninput: 1000\noutput: 1000\nconcurrency: [1, 8, 32, 128]\nrequests: 200\nprefill_mfu: ${(0.3 + 0.05 * k).toFixed(2)}\n`,
    2 + k,
  );
  runs.push({ wall_s: Math.round(t.wallS * 1000) / 1000, cpu_s: Math.round(t.cpuS * 1000) / 1000 });
}
const calibration = {
  case: `${RUNS} runs of a 4-point sweep (concurrency 1, 8, 32, 128 × 200 requests of 1000/1000 tokens), prefill_mfu varied per run`,
  total_wall_s: Math.round(runs.reduce((a, r) => a + r.wall_s, 0) * 100) / 100,
  total_cpu_s: Math.round(runs.reduce((a, r) => a + r.cpu_s, 0) * 100) / 100,
  runs,
  loadavg_after: load(),
};
// Lazy decoding (what the cell ran) against the step-by-step reference, same point, same process.
const labSetup: Setup = {
  name: 'lab',
  gpu: findGpu('a100-sxm4-80gb')!,
  model: findModel('qwen3-8b')!,
  weights: 'bf16',
  kvCache: 'bf16',
  endpoint: 'sim',
};
const point = (stepByStep: boolean) => {
  const engine = new SimEngine({ setup: labSetup });
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const load = new LoadRun(engine, {
    input: 2048,
    output: 1024,
    requests: REF_REQUESTS,
    concurrency: 256,
    seed: 1,
    metricsOnly: true,
    stepByStep,
  });
  while (!load.advance(256));
  const r = load.result();
  const cpu = process.cpuUsage(c0);
  return {
    cpuS: (cpu.user + cpu.system) / 1e6,
    wallS: (performance.now() - t0) / 1000,
    figures: {
      ...r,
      metrics: load.metrics!.result({ observedInFlight: r.observedInFlight, durationMs: r.durationS * 1000 }),
    },
    lazySteps: { ...engine.lazySteps },
  };
};
const before2 = load();
const ref = point(true);
const lazy = point(false);
const lazyDecoding = {
  case: `${REF_REQUESTS.toLocaleString('en-US')} requests of 2048/1024 tokens at concurrency 256 (A100 defaults), step by step then lazily, one after the other`,
  step_by_step_cpu_s: Math.round(ref.cpuS * 100) / 100,
  lazy_cpu_s: Math.round(lazy.cpuS * 100) / 100,
  step_by_step_wall_s: Math.round(ref.wallS * 100) / 100,
  lazy_wall_s: Math.round(lazy.wallS * 100) / 100,
  cpu_ratio: Math.round((ref.cpuS / lazy.cpuS) * 10) / 10,
  identical: isDeepStrictEqual(ref.figures, lazy.figures),
  steps: lazy.figures.steps,
  preemptions: lazy.figures.preemptions,
  lazy_steps: lazy.lazySteps,
  loadavg_before: before2,
  loadavg_after: load(),
};
process.stdout.write(JSON.stringify({ serving: bigOut, calibration, lazy_decoding: lazyDecoding }) + '\n');
