/**
 * `predict: roofline` — the classic plot: attainable FLOP/s against arithmetic intensity, with the
 * card's bandwidth roof and compute roofs, and where decode steps and a prefill sit on it.
 */
import { z } from 'zod';
import type { Dtype } from '../catalog/types';
import { tableOutput } from '../engine/outputs';
import { oneOrMany, positiveInt, quantity } from '../engine/schema';
import type { KindModule } from '../engine/types';
import type { Fact } from '../facts';
import { fin } from '../facts/make';
import {
  computePeakInfo,
  decodePoint,
  MOE_WEIGHTS,
  prefillPoint,
  type MoeWeights,
  type OperatingPoint,
} from '../physics';
import { plotOutput } from '../plots/render';
import { fmtIn, fmtNum } from '../units';
import { setupLabel } from './predictShared';

const schema = z
  .object({
    predict: z.literal('roofline'),
    context: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    batch: oneOrMany(positiveInt).default([1, 8, 64, 256]),
    prompt: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    moe_weights: z.enum(MOE_WEIGHTS as [MoeWeights, ...MoeWeights[]]).optional(),
  })
  .strict();

type Cell = z.output<typeof schema>;

export const rooflineKind: KindModule<Cell> = {
  key: 'predict',
  variant: 'roofline',
  summary: 'predict: roofline — attainable FLOP/s against arithmetic intensity, with decode and prefill points',
  schema,
  needsSetup: true,
  migrate: ridgeFacts,
  async run(cell, ctx) {
    const s = ctx.setup!;
    const context = cell.context?.value ?? 1000;
    const prompt = cell.prompt?.value ?? 1000;
    const used = computePeakInfo(s.gpu, s.weights);
    const ridge = used.peak / s.gpu.bandwidth;
    const points: (OperatingPoint & { kind: string })[] = [
      ...cell.batch.map((B) => ({
        ...decodePoint(s, context, B, s.model.moe ? (cell.moe_weights ?? 'expected') : undefined),
        kind: 'decode',
      })),
      { ...prefillPoint(s, prompt), kind: 'prefill' },
    ];
    // Roofs: the bandwidth slope, and a flat roof per distinct compute peak the card has.
    const peaks = new Map<number, Dtype[]>();
    for (const [d, v] of Object.entries(s.gpu.peak) as [Dtype, number][])
      if (v) peaks.set(v, [...(peaks.get(v) ?? []), d]);
    const xs = logspace(
      Math.min(0.5, ...points.map((p) => p.intensity / 2)),
      Math.max(1e4, ...points.map((p) => p.intensity * 4)),
      60,
    );
    const roofLines = [...peaks.entries()].flatMap(([peak, ds]) =>
      xs.map((x) => ({
        roof: `${ds.join('/')} peak ${fmtIn(peak, 'TFLOP/s', 0)}${peak === used.peak ? ' (used)' : ''}`,
        intensity: x,
        tflops: Math.min(peak, s.gpu.bandwidth * x) / 1e12,
      })),
    );
    const pts = points.map((p) => ({
      label: p.label,
      kind: p.kind,
      intensity: p.intensity,
      tflops: p.attainable_flops / 1e12,
      bound: p.bound,
    }));
    const plot = await plotOutput({
      title: `Roofline: ${setupLabel(s)} (${fmtNum(s.gpu.bandwidth / 1e9, 0)} GB/s; ridge ${fmtNum(ridge, 0)} FLOP/byte)`,
      width: 460,
      height: 300,
      layer: [
        {
          data: { values: roofLines },
          mark: { type: 'line', clip: true },
          encoding: {
            x: {
              field: 'intensity',
              type: 'quantitative',
              scale: { type: 'log' },
              title: 'arithmetic intensity (FLOP/byte)',
            },
            y: { field: 'tflops', type: 'quantitative', scale: { type: 'log' }, title: 'attainable TFLOP/s' },
            strokeDash: {
              field: 'roof',
              type: 'nominal',
              title: 'roofs',
              legend: { orient: 'bottom', direction: 'vertical', labelLimit: 420 },
            },
          },
        },
        {
          data: { values: [{ ridge, label: `ridge ${fmtNum(ridge, 0)} FLOP/byte` }] },
          mark: { type: 'rule', color: 'gray', strokeDash: [2, 2] },
          encoding: { x: { field: 'ridge', type: 'quantitative' }, tooltip: [{ field: 'label' }] },
        },
        {
          data: { values: pts },
          mark: { type: 'point', filled: true, size: 70 },
          encoding: {
            x: { field: 'intensity', type: 'quantitative' },
            y: { field: 'tflops', type: 'quantitative' },
            color: { field: 'kind', type: 'nominal', title: 'operating point' },
            tooltip: [
              { field: 'label' },
              { field: 'intensity', format: ',.1f' },
              { field: 'tflops', format: ',.1f', title: 'TFLOP/s' },
              { field: 'bound' },
            ],
          },
        },
        {
          data: { values: pts },
          mark: { type: 'text', dx: 6, dy: -8, align: 'left', fontSize: 10 },
          encoding: {
            x: { field: 'intensity', type: 'quantitative' },
            y: { field: 'tflops', type: 'quantitative' },
            text: { field: 'label' },
          },
        },
      ],
    });
    const table = tableOutput(
      `Operating points — context ${fmtNum(context, 0)} tokens, prompt ${fmtNum(prompt, 0)} tokens`,
      [
        { key: 'label', label: 'point' },
        { key: 'intensity', label: 'FLOP/byte', fmt: (v: number) => fmtNum(v, 1) },
        { key: 'tflops', label: 'attainable TFLOP/s', fmt: (v: number) => fmtNum(v, 1) },
        { key: 'bound', label: 'bound by' },
      ],
      pts,
      `decode: 2·params·B FLOP over W + kv(c)·B bytes; prefill: 2·params·N FLOP over W + kv·N bytes; ridge = peak / BW = ${fmtNum(ridge, 0)} FLOP/byte`,
    );
    const values = {
      ridge_flop_per_byte: ridge,
      peak_flops: used.peak,
      peak_dtype: used.dtype,
      bandwidth: s.gpu.bandwidth,
      context,
      prompt_tokens: prompt,
      points: points.map(({ label, kind, intensity, attainable_flops, bound }) => ({
        label,
        kind,
        intensity,
        attainable_flops,
        bound,
      })),
    };
    return { values, facts: ridgeFacts(values), outputs: [table, plot] };
  },
};

/** What a roofline states: the ridge point, the peak and the bandwidth it was drawn with. */
function ridgeFacts(v: Record<string, unknown>): Fact[] {
  const ridge = fin(v.ridge_flop_per_byte);
  const peak = fin(v.peak_flops);
  const bw = fin(v.bandwidth);
  if (ridge === undefined || peak === undefined || bw === undefined) return [];
  return [
    {
      kind: 'roofline',
      ridge_flop_per_byte: ridge,
      peak_flop_s: peak,
      bandwidth_bytes_s: bw,
      dtype: String(v.peak_dtype),
      source: 'predict: roofline',
    },
  ];
}

function logspace(lo: number, hi: number, n: number): number[] {
  const a = Math.log10(lo);
  const b = Math.log10(hi);
  return Array.from({ length: n }, (_, i) => 10 ** (a + ((b - a) * i) / (n - 1)));
}
