/** `predict: decode-roofline` — step time, per-user and aggregate tok/s over a batch list. */
import { z } from 'zod';
import { factsOutput, tableOutput } from '../engine/outputs';
import { oneOrMany, positiveInt, quantity } from '../engine/schema';
import type { KindModule } from '../engine/types';
import type { Fact } from '../facts';
import { fin } from '../facts/make';
import { finding } from '../findings';
import { decodeRoofline, MOE_WEIGHTS, parallelWords, type DecodeRow, type MoeWeights } from '../physics';
import { COST_FORMULA, costFacts, dollarsPerMtok, fmtDollarsPerMtok, priceWords, setupPricePerHour } from '../cost';
import { resolveWhatIf, whatIfFindings, whatIfOutput, whatIfSchema } from '../cost/whatIf';
import { plotOutput } from '../plots/render';
import { fmtBytes, fmtNum } from '../units';
import { peakWords, setupLabel } from './predictShared';

const schema = z
  .object({
    predict: z.literal('decode-roofline'),
    context: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    /** Live-context variant: context grows from input to input+output while decoding; use the mean. */
    input: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    output: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    batch: oneOrMany(positiveInt).default([1, 2, 4, 8, 16, 32, 64, 128]),
    /** MoE only: which expert weights one step reads (see physics.paramsReadPerStep). */
    moe_weights: z.enum(MOE_WEIGHTS as [MoeWeights, ...MoeWeights[]]).optional(),
    /** Other setups to price against this one (cost/whatIf.ts). */
    what_if: whatIfSchema.optional(),
  })
  .strict()
  .refine((c) => c.context || (c.input && c.output), {
    message: 'Give "context: 1k tokens", or "input: 1k tokens" and "output: 1k tokens" for the live-context variant',
    path: ['context'],
  })
  .refine((c) => !(c.context && (c.input || c.output)), {
    message: 'Give either "context:" (fixed) or "input:" and "output:" (live context averaged over decoding), not both',
    path: ['context'],
  });

type Cell = z.output<typeof schema>;

const MOE_WORDS: Record<MoeWeights, string> = {
  active: 'active experts only (k per token; right at batch 1, optimistic at large batch)',
  total: 'every expert each step (right at large batch, pessimistic at small batch)',
  expected: 'expected distinct experts at each batch, E·(1 − (1 − k/E)^B) per layer, uniform routing',
};

/** What a decode roofline states: its curves (tok/s against batch), ceilings, the step floor, the weights. */
function rooflineFacts(v: Record<string, unknown>): Fact[] {
  const source = 'predict: decode-roofline';
  const rows = (Array.isArray(v.rows) ? v.rows : []) as Record<string, unknown>[];
  const curve = (y: 'output_throughput' | 'per_user_throughput', key: string, label: string): Fact[] => {
    const points = rows
      .map((r) => ({ x: fin(r.batch), y: fin(r[key]) }))
      .filter((p): p is { x: number; y: number } => p.x !== undefined && p.y !== undefined);
    return points.length ? [{ kind: 'curve', x: 'batch', y, unit: 'tok/s', points, label, source }] : [];
  };
  const out: Fact[] = [
    ...curve('output_throughput', 'aggregate_tok_s', 'decode roofline (aggregate)'),
    ...curve('per_user_throughput', 'per_user_tok_s', 'decode roofline (per user)'),
  ];
  const ceiling = (metric: 'per-user' | 'compute-roof' | 'bandwidth-asymptote', x: unknown, formula: string) => {
    const tok_s = fin(x);
    if (tok_s !== undefined) out.push({ kind: 'ceiling', metric, tok_s, formula, source });
  };
  ceiling('per-user', v.ceiling_tok_s, 'BW / W');
  ceiling('compute-roof', v.compute_roof_tok_s, 'peak / (2·params)');
  ceiling('bandwidth-asymptote', v.asymptote_tok_s, 'BW / kv(c)');
  const floor = fin(v.decode_step_floor_ms);
  if (floor !== undefined) out.push({ kind: 'floor', metric: 'decode-step', ms: floor, formula: 'W / BW', source });
  const w = fin(v.weights_bytes);
  if (w !== undefined) out.push({ kind: 'weights', bytes: w, source });
  for (const [i, c] of (Array.isArray(v.cost) ? (v.cost as Record<string, unknown>[]) : []).entries()) {
    const batch = fin(c?.batch);
    out.push(...costFacts(c, { ...(batch !== undefined ? { point: { batch } } : {}), at: ['batch', i], source }));
  }
  return out;
}

export const decodeRooflineKind: KindModule<Cell> = {
  key: 'predict',
  variant: 'decode-roofline',
  summary: 'predict: decode-roofline — aggregate and per-user tok/s against batch size',
  schema,
  needsSetup: true,
  migrate: rooflineFacts,
  analyze(cell, ctx) {
    const whatIf = whatIfFindings(ctx.setup, cell.what_if, ctx.notebook);
    if (cell.moe_weights && ctx.setup && !ctx.setup.model.moe) {
      return [
        ...whatIf,
        finding(
          'info',
          'moe-weights-dense',
          `${ctx.setup.model.name} is dense: moe_weights has no effect (every step reads all the weights)`,
          ['moe_weights'],
          { fix: 'remove "moe_weights"' },
        ),
      ];
    }
    return whatIf;
  },
  async run(cell, ctx) {
    const setup = ctx.setup!;
    const live = !cell.context;
    const context = cell.context ? cell.context.value : cell.input!.value + cell.output!.value / 2;
    const r = decodeRoofline(setup, context, cell.batch, { moeWeights: cell.moe_weights });
    const contextNote = live
      ? `live context: mean of ${fmtNum(cell.input!.value, 0)}..${fmtNum(cell.input!.value + cell.output!.value, 0)} = ${fmtNum(context, 0)} tokens`
      : `context ${fmtNum(context, 0)} tokens`;
    const moe = setup.model.moe;
    const tp = r.tensor_parallel;
    const pp = r.pipeline_parallel;
    const multi = tp * pp > 1;
    const link = setup.gpu.interconnect;
    const perHour = setupPricePerHour(setup);
    const table = tableOutput<DecodeRow>(
      `Decode roofline — ${setupLabel(setup)}, ${contextNote}${multi ? `, ${parallelWords(setup)}` : ''}`,
      [
        { key: 'batch', label: r.data_parallel > 1 ? 'batch (per replica)' : 'batch' },
        { key: 'step_ms', label: 'step (ms)', fmt: (v) => fmtNum(v, 2) },
        ...(multi
          ? [
              {
                key: 'comm_ms' as const,
                label: tp > 1 ? 'of which all-reduce (ms)' : 'of which stage sends (ms)',
                fmt: (v: number) => fmtNum(v, 2),
              },
            ]
          : []),
        ...(pp > 1
          ? [{ key: 'bubble' as const, label: 'pipeline bubble', fmt: (v: number) => `${fmtNum(100 * v, 0)}%` }]
          : []),
        { key: 'per_user_tok_s', label: 'per-user tok/s', fmt: (v) => fmtNum(v, 1) },
        {
          key: 'aggregate_tok_s',
          label: r.data_parallel > 1 ? 'aggregate tok/s (per replica)' : 'aggregate tok/s',
          fmt: (v) => fmtNum(v, 0),
        },
        ...(perHour !== undefined
          ? [
              {
                key: 'aggregate_tok_s' as const,
                label: '$ per M output tok',
                fmt: (v: number) => fmtDollarsPerMtok(dollarsPerMtok(perHour, v * r.data_parallel)),
              },
            ]
          : []),
        { key: 'bound', label: 'bound by' },
      ],
      r.rows,
      (multi
        ? `stage = max((W/(tp·pp) + b·kv_gpu(c)) / BW, 2·params·b / (tp·pp·peak)); step = pp · stage + all-reduce + stage sends, with m = min(pp, B) microbatches of b = B/m; all-reduce = 2 · layers · (α + 2(tp−1)/tp · b·hidden·2 B / β) over ${link?.name ?? 'the link'}; aggregate = B / step; per-user = 1 / step`
        : 'step = max((W + B·kv(c)) / BW, 2·params·B / peak); aggregate = B / step; per-user = 1 / step') +
        (perHour !== undefined
          ? `; cost at ${priceWords(setup)}: ${COST_FORMULA}, over the aggregate of every replica`
          : ''),
    );
    const facts: [string, string][] = [
      ['weights in memory', fmtBytes(r.weights_bytes)],
      ...(multi
        ? ([
            ['GPUs', parallelWords(setup)],
            ['weights per GPU (fullest)', fmtBytes(r.weights_per_gpu_bytes)],
            ['KV bytes per token per GPU', `${fmtNum(r.kv_bytes_per_token_per_gpu, 0)} B`],
            [
              'interconnect (β one way, α per all-reduce)',
              link
                ? `${link.name}: ${fmtNum(link.bandwidth / 1e9, 0)} GB/s, α = ${fmtNum(link.latency * 1e6, 1)} µs (assumption); ${link.source}`
                : 'none in the catalog',
            ],
            [
              tp > 1 ? `all-reduce at batch 1 (2 × ${setup.model.layers} layers)` : 'stage sends at batch 1',
              `${fmtNum(r.comm_floor_ms, 2)} ms per step`,
            ],
          ] as [string, string][])
        : []),
      ...(moe
        ? ([
            ['MoE weights read per step', `${r.moe_weights}: ${MOE_WORDS[r.moe_weights!]}`],
            ['weights read at batch 1 (W)', fmtBytes(r.weights_read_bytes)],
          ] as [string, string][])
        : []),
      ['KV bytes per token', `${fmtNum(r.kv_bytes_per_token, 0)} B (${setup.kvCache})`],
      ['KV per request kv(c)', fmtBytes(r.kv_bytes_per_request)],
      [
        multi ? 'decode step floor (batch 1) = W / (tp·BW) + all-reduce' : 'decode step floor (batch 1) = W / BW',
        `${fmtNum(r.decode_step_floor_ms, 2)} ms`,
      ],
      [multi ? 'per-user ceiling = 1 / floor' : 'per-user ceiling = BW / W', `${fmtNum(r.ceiling_tok_s, 1)} tok/s`],
      ['half-saturation batch = W / kv(c)', fmtNum(r.half_saturation_batch, 0)],
      [
        multi ? 'bandwidth asymptote = tp·pp·BW / kv(c)' : 'bandwidth asymptote = BW / kv(c)',
        `${fmtNum(r.asymptote_tok_s, 0)} tok/s`,
      ],
      [
        multi ? 'compute roof = tp·pp·peak / (2·params)' : 'compute roof = peak / (2·params)',
        `${fmtNum(r.compute_roof_tok_s, 0)} tok/s`,
      ],
      ['peak used', peakWords(setup)],
      [
        'knee',
        r.knee_batch === null
          ? 'none: the bandwidth asymptote is below the compute roof, so decode never turns compute-bound at this context'
          : `compute binds from batch ≈ ${fmtNum(r.knee_batch, 0)}`,
      ],
    ];
    const data = r.rows.flatMap((row) => [
      { batch: row.batch, series: 'aggregate tok/s', tok_s: row.aggregate_tok_s },
      { batch: row.batch, series: 'per-user tok/s', tok_s: row.per_user_tok_s },
    ]);
    const roofs = [
      { roof: `bandwidth asymptote BW/kv(c) = ${fmtNum(r.asymptote_tok_s, 0)} tok/s`, y: r.asymptote_tok_s },
      { roof: `compute roof peak/(2·params) = ${fmtNum(r.compute_roof_tok_s, 0)} tok/s`, y: r.compute_roof_tok_s },
      { roof: `per-user ceiling BW/W = ${fmtNum(r.ceiling_tok_s, 1)} tok/s`, y: r.ceiling_tok_s },
    ];
    const plot = await plotOutput({
      title: `Decode roofline: ${setupLabel(setup)}, ${contextNote}`,
      width: 460,
      height: 280,
      layer: [
        {
          data: { values: data },
          mark: { type: 'line', point: true },
          encoding: {
            x: {
              field: 'batch',
              type: 'quantitative',
              scale: { type: 'log', base: 2 },
              title: 'batch (concurrent sequences)',
            },
            y: { field: 'tok_s', type: 'quantitative', scale: { type: 'log' }, title: 'tokens/s' },
            color: { field: 'series', type: 'nominal', title: null },
            tooltip: [{ field: 'batch' }, { field: 'series' }, { field: 'tok_s', format: ',.1f' }],
          },
        },
        {
          data: { values: roofs },
          mark: { type: 'rule', strokeDash: [4, 4] },
          encoding: {
            y: { field: 'y', type: 'quantitative' },
            strokeDash: {
              field: 'roof',
              type: 'nominal',
              title: 'roofs',
              legend: { orient: 'bottom', direction: 'vertical', labelLimit: 420 },
            },
            tooltip: [{ field: 'roof' }],
          },
        },
      ],
    });
    const { rows, ...scalars } = r;
    // A priced setup: each batch's aggregate (every replica) as $ per million output tokens.
    const cost =
      perHour !== undefined
        ? rows.map((row) => ({
            batch: row.batch,
            usd_per_hour: perHour,
            usd_per_mtok_output: dollarsPerMtok(perHour, row.aggregate_tok_s * r.data_parallel),
          }))
        : undefined;
    // What if: the same roofline for other setups, priced against this one.
    const curveOf = (x: typeof r) => ({
      points: x.rows.map((row) => ({ x: row.batch, tok_s: row.aggregate_tok_s * x.data_parallel })),
    });
    const whatIf = cell.what_if
      ? await whatIfOutput(
          setup,
          curveOf(r),
          resolveWhatIf(setup, cell.what_if, ctx.notebook),
          async (s) => curveOf(decodeRoofline(s, context, cell.batch, { moeWeights: cell.moe_weights })),
          (x) => `batch ${x}`,
        )
      : undefined;
    const values = {
      ...scalars,
      context_mode: live ? 'live' : 'fixed',
      rows,
      ...(cost ? { cost } : {}),
      ...(whatIf ? { what_if: whatIf.values } : {}),
    };
    return {
      values,
      facts: rooflineFacts(values),
      outputs: [
        table,
        factsOutput(
          'Roofs',
          facts,
          moe ? `MoE assumption: ${r.moe_weights} (set "moe_weights: active | total | expected")` : undefined,
        ),
        plot,
        ...(whatIf ? [whatIf.output] : []),
      ],
    };
  },
};
