/** `predict: decode-roofline` — step time, per-user and aggregate tok/s over a batch list. */
import { z } from 'zod';
import { factsOutput, tableOutput } from '../engine/outputs';
import { oneOrMany, positiveInt, quantity } from '../engine/schema';
import type { KindModule } from '../engine/types';
import { decodeRoofline, type DecodeRow } from '../physics';
import { plotOutput } from '../plots/render';
import { fmtBytes, fmtNum } from '../units';

const schema = z
  .object({
    predict: z.literal('decode-roofline'),
    context: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    /** Live-context variant: context grows from input to input+output while decoding; use the mean. */
    input: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    output: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    batch: oneOrMany(positiveInt).default([1, 2, 4, 8, 16, 32, 64, 128]),
  })
  .strict()
  .refine((c) => c.context || (c.input && c.output), { message: 'Give "context: 1k tokens", or "input:" and "output:" for the live-context variant', path: ['context'] });

type Cell = z.output<typeof schema>;

export const decodeRooflineKind: KindModule<Cell> = {
  key: 'predict',
  variant: 'decode-roofline',
  summary: 'predict: decode-roofline — aggregate and per-user tok/s against batch size',
  schema,
  needsSetup: true,
  async run(cell, ctx) {
    const setup = ctx.setup!;
    const live = !cell.context && cell.input && cell.output;
    const context = cell.context ? cell.context.value : cell.input!.value + cell.output!.value / 2;
    const r = decodeRoofline(setup, context, cell.batch);
    const contextNote = live ? `live context: mean of ${fmtNum(cell.input!.value, 0)}..${fmtNum(cell.input!.value + cell.output!.value, 0)} = ${fmtNum(context, 0)} tokens` : `context ${fmtNum(context, 0)} tokens`;
    const table = tableOutput<DecodeRow>(
      `Decode roofline — ${setup.model.name} ${setup.weights} on ${setup.gpu.id}, ${contextNote}`,
      [
        { key: 'batch', label: 'batch' },
        { key: 'step_ms', label: 'step (ms)', fmt: (v) => fmtNum(v, 2) },
        { key: 'per_user_tok_s', label: 'per-user tok/s', fmt: (v) => fmtNum(v, 1) },
        { key: 'aggregate_tok_s', label: 'aggregate tok/s', fmt: (v) => fmtNum(v, 0) },
        { key: 'bound', label: 'bound by' },
      ],
      r.rows,
      'step = max((W + B·kv(c)) / BW, 2·params·B / peak); aggregate = B / step; per-user = 1 / step',
    );
    const facts = factsOutput('Roofs', [
      ['weights W', fmtBytes(r.weights_bytes)],
      ['KV bytes per token', `${fmtNum(r.kv_bytes_per_token, 0)} B`],
      ['decode step floor (batch 1) = W / BW', `${fmtNum(r.decode_step_floor_ms, 2)} ms`],
      ['per-user ceiling = BW / W', `${fmtNum(r.ceiling_tok_s, 1)} tok/s`],
      ['half-saturation batch = W / kv(c)', fmtNum(r.half_saturation_batch, 0)],
      ['bandwidth asymptote = BW / kv(c)', `${fmtNum(r.asymptote_tok_s, 0)} tok/s`],
      ['compute roof = peak / (2·params)', `${fmtNum(r.compute_roof_tok_s, 0)} tok/s`],
    ]);
    const data = r.rows.flatMap((row) => [
      { batch: row.batch, series: 'aggregate tok/s', tok_s: row.aggregate_tok_s },
      { batch: row.batch, series: 'per-user tok/s', tok_s: row.per_user_tok_s },
    ]);
    const plot = await plotOutput({
      title: `Decode roofline: ${setup.model.name} on ${setup.gpu.id}`,
      width: 420,
      height: 260,
      layer: [
        {
          data: { values: data },
          mark: { type: 'line', point: true },
          encoding: {
            x: { field: 'batch', type: 'quantitative', scale: { type: 'log', base: 2 }, title: 'batch (concurrent sequences)' },
            y: { field: 'tok_s', type: 'quantitative', scale: { type: 'log' }, title: 'tokens/s' },
            color: { field: 'series', type: 'nominal', title: null },
            tooltip: [{ field: 'batch' }, { field: 'series' }, { field: 'tok_s', format: ',.1f' }],
          },
        },
        {
          data: { values: [{ roof: 'bandwidth asymptote', y: r.asymptote_tok_s }, { roof: 'compute roof', y: r.compute_roof_tok_s }] },
          mark: { type: 'rule', strokeDash: [4, 4] },
          encoding: { y: { field: 'y', type: 'quantitative' }, color: { field: 'roof', type: 'nominal' } },
        },
      ],
    });
    const { rows, ...scalars } = r;
    return { values: { ...scalars, rows }, outputs: [table, facts, plot] };
  },
};
