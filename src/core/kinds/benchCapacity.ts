/**
 * `bench: capacity` — the highest request rate (or concurrency) at which the setup's endpoint meets
 * the cell's SLOs, found by measuring: bracket by doubling from `start`, bisect between the last
 * pass and the first fail to the stated `precision` (workload/schedule.ts's search, driven one
 * measured point at a time by bench/sequence.ts), then re-probe the answer and the failing load
 * above it with fresh prompts to show the answer holds under a repeat.
 *
 *   bench: capacity
 *   input: 512
 *   output: 64
 *   rate: {start: 2 req/s, max: 64 req/s}      # or: concurrency: {start: 4, max: 256}
 *   precision: 10%
 *   requests: 200
 *   slo: {ttft_p99: 500 ms, tpot_p99: 50 ms}
 */
import { z } from 'zod';
import type { PointResult, SweepOptions } from '../bench';
import type { CapacityPlan } from '../bench/sequence';
import { positiveInt, quantity } from '../engine/schema';
import type { CellOutput, KindModule, RunContext } from '../engine/types';
import type { Fact } from '../facts';
import { finding, type Finding } from '../findings';
import { benchBase, benchEndpoint, benchSeed, benchSweepOptions, reportSpec } from './bench';
import { benchCellFacts, benchFacts } from './benchFacts';

const MAX_CONCURRENCY = 10_000;
const rateValue = quantity('request_rate', { bare: 'req/s', positive: true }).refine(
  (q) => q.value >= 0.001 && q.value <= 100_000,
  { message: 'must be between 0.001 req/s and 100,000 req/s' },
);
const concurrencyValue = positiveInt.max(MAX_CONCURRENCY);

const rateRange = z
  .object({
    start: rateValue.optional().describe('First rate probed (default 1 req/s).'),
    min: rateValue.optional().describe('Lowest rate the search goes down to (default start / 64).'),
    max: rateValue.optional().describe('Highest rate the search goes up to (default start × 1,024).'),
  })
  .strict();
const concurrencyRange = z
  .object({
    start: concurrencyValue.optional().describe('First concurrency probed (default 1).'),
    min: concurrencyValue.optional().describe('Lowest concurrency (default 1).'),
    max: concurrencyValue.optional().describe('Highest concurrency (default 1,024).'),
  })
  .strict();

// A trace or a rate schedule sets its own arrivals: nothing for a search to move. The probes are
// judged by the SLOs, not against a serving prediction.
const {
  rate: _rate,
  concurrency: _concurrency,
  trace: _trace,
  rate_schedule: _schedule,
  predicted: _predicted,
  tolerance: _tolerance,
  ...keys
} = benchBase;

const schema = z
  .object({
    bench: z.literal('capacity'),
    ...keys,
    rate: rateRange
      .optional()
      .describe('Search the open-loop arrival rate: {start: 1 req/s, min: …, max: …} (Poisson arrivals).'),
    concurrency: z
      .union([concurrencyValue, concurrencyRange])
      .optional()
      .describe(
        'Search the closed-loop concurrency: {start: 1, max: 1024}. With `rate:`, one number caps requests in flight.',
      ),
    precision: quantity('ratio', { positive: true })
      .refine((q) => q.value <= 1, { message: 'must be at most 100% (the bracket’s width over its low end)' })
      .optional()
      .describe(
        'Stop bisecting when (fail − pass) / pass is at most this (default 10%); a concurrency stops at a gap of 1.',
      ),
    max_probes: z.number().int().min(2).max(64).default(12).describe('Most probes the search measures.'),
    confirm: z
      .boolean()
      .default(true)
      .describe('Re-probe the answer and the failing load above it with fresh prompts: is the answer stable?'),
    max_failure_rate: quantity('ratio', { min: 0 })
      .refine((q) => q.value <= 1, { message: 'must be at most 100%' })
      .optional()
      .describe('A probe passes only with at most this share of requests failed (default 1%).'),
  })
  .strict()
  .refine((c) => !!c.rate !== (typeof c.concurrency === 'object'), {
    message:
      'Say what to search: "rate: {start: 1 req/s, max: 64 req/s}" (open loop) or "concurrency: {start: 1, max: 256}" (closed loop), not both',
    path: ['rate'],
  })
  .refine((c) => !!c.slo && Object.values(c.slo).some(Boolean), {
    message: 'A capacity search needs an SLO to meet: "slo: {ttft_p99: 500 ms, tpot_p99: 50 ms}"',
    path: ['slo'],
  })
  .refine((c) => !(c.requests && c.duration), {
    message: 'Give "requests:" or "duration:" per probe, not both',
    path: ['duration'],
  });

type Cell = z.output<typeof schema>;

/** The search the cell asks for, with its defaults filled in. */
export function capacityPlan(cell: Cell): CapacityPlan {
  const common = {
    precision: cell.precision?.value ?? 0.1,
    maxProbes: cell.max_probes,
    confirm: cell.confirm,
    maxFailureRate: cell.max_failure_rate?.value ?? 0.01,
  };
  if (cell.rate) {
    const start = cell.rate.start?.value ?? 1;
    const min = cell.rate.min?.value ?? Math.max(0.001, start / 64);
    const max = cell.rate.max?.value ?? Math.min(100_000, start * 1024);
    return { key: 'rate', start: Math.min(max, Math.max(min, start)), min, max, ...common };
  }
  const c = typeof cell.concurrency === 'object' ? cell.concurrency : {};
  const start = c.start ?? 1;
  const min = c.min ?? 1;
  const max = c.max ?? 1024;
  return { key: 'concurrency', start: Math.min(max, Math.max(min, start)), min, max, ...common };
}

function analyze(cell: Cell): Finding[] {
  const p = capacityPlan(cell);
  const fs: Finding[] = [];
  if (p.min > p.max)
    fs.push(
      finding('error', 'capacity-range', `min ${p.min} is above max ${p.max}: the search has nowhere to go`, [p.key], {
        fix: 'lower min or raise max',
      }),
    );
  return fs;
}

async function run(cell: Cell, ctx: RunContext) {
  const [{ runSweep }, report, capacity, { isPlainWorkload, loadCellWorkload, workloadMeans }] = await Promise.all([
    import('../bench'),
    import('../bench/report'),
    import('../bench/capacityReport'),
    import('../workload/cell'),
  ]);
  const services = ctx.notebook.services;
  // The workload's files are read here, through the host (the worker reads none).
  const workload = await loadCellWorkload(cell, ctx.notebook);
  const means = workloadMeans(workload, ctx.setup!.model.vocab);
  const at = await benchEndpoint(ctx);
  const plan = capacityPlan(cell);
  const open = plan.key === 'rate';
  const requests = cell.duration ? undefined : (cell.requests?.value ?? 100);
  const spec = reportSpec(cell, benchSeed(cell), requests, open, means);
  const opts: SweepOptions = {
    ...benchSweepOptions(cell, ctx, at, spec, workload, !isPlainWorkload(workload)),
    capacity: plan,
    maxConcurrency: open && typeof cell.concurrency === 'number' ? cell.concurrency : undefined,
    stopAbove: undefined,
  };
  const title = `Capacity search (${open ? 'request rate' : 'concurrency'}): ${Math.round(means.input)} in / ${Math.round(means.output)} out tokens`;
  const points: PointResult[] = [];
  let chain: Promise<void> = Promise.resolve();
  const result = await runSweep(opts, {
    worker: services.settings?.benchWorker,
    signal: ctx.signal,
    onProgress: (p) => ctx.progress({ message: p.message }),
    onPoint: (p) => {
      points.push(p);
      const snapshot = [...points];
      chain = chain.then(async () => {
        try {
          ctx.progress({
            outputs: [
              capacity.probesTable({ points: snapshot }, spec, plan, `${title} (${snapshot.length} probes so far)`),
            ],
            message: `probe ${p.probe?.probe ?? snapshot.length}: ${p.probe?.pass ? 'met' : 'missed'} the SLOs`,
          });
        } catch {
          // a progress rendering failure must not cost the measurement
        }
      });
    },
  });
  await chain;
  const outputs: CellOutput[] = [
    capacity.answerOutput(result, plan),
    capacity.probesTable(result, spec, plan, title),
    ...(await capacity.probesPlot(result, spec, plan)),
    report.runFacts(result, spec),
  ];
  const rec = report.recordsOutput(result);
  if (rec) outputs.push(rec);
  const values = report.benchValues(result, spec);
  const facts: Fact[] = benchFacts(values, cell);
  const best = result.capacity?.best;
  if (open && best !== undefined)
    facts.push({
      kind: 'request-rate',
      metric: 'capacity',
      req_s: best,
      at: ['rate'],
      source: 'client (capacity search)',
      point: { loop: 'open' },
    });
  return {
    values,
    facts,
    outputs,
    // The bench's own findings are check rules over these facts (made by the engine); these are the search's.
    findings: capacity.capacityFindings(result, plan),
  };
}

export const benchCapacityKind: KindModule<Cell> = {
  key: 'bench',
  variant: 'capacity',
  summary:
    'bench: capacity — the highest request rate (or concurrency) meeting the SLOs, found by bracketing and bisection to a stated precision, every probe shown',
  schema: schema as unknown as z.ZodType<Cell>,
  needsSetup: true,
  analyze,
  run,
  statedFacts: benchCellFacts,
  migrate: benchFacts,
};
