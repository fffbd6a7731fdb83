/**
 * `what_if:` on a predict cell — the same prediction for other setups, priced: fp8 weights, more
 * tensor parallelism, another GPU of the catalog at its own rental price. Each alternative is a
 * mapping of setup keys applied over the cell's setup (as inline setup keys are), and the answer is
 * what it saves per million output tokens against the setup as it is.
 *
 *   what_if:
 *     - weights: fp8
 *     - tensor_parallel: 2
 *     - {gpu: h100-sxm, price: 2.50 $/h}
 *
 * The catalog carries no rental prices (they move every month and differ by provider), so an
 * alternative that changes the GPU gives its price.
 */
import { z } from 'zod';
import { tableOutput } from '../engine/outputs';
import type { CellOutput, NotebookContext, Setup } from '../engine/types';
import { finding, type Finding } from '../findings';
import { fitFindings } from '../checks/fit';
import { applySetupOverrides } from '../kinds/setup';
import { parallelWords } from '../physics';
import { fmtNum } from '../units';
import { COST_FORMULA, dollarsPerMtok, fmtDollarsPerMtok, priceWords, savingWords, setupPricePerHour } from './index';

/** The setup keys an alternative may change (the model and the endpoint are what is being priced, not alternatives). */
export const WHAT_IF_KEYS = [
  'gpu',
  'weights',
  'kv_cache',
  'tensor_parallel',
  'pipeline_parallel',
  'data_parallel',
  'unquantized',
  'price',
] as const;

const alternative = z.record(z.string(), z.unknown()).superRefine((o, ctx) => {
  const keys = Object.keys(o).filter((k) => k !== 'name');
  if (!keys.length)
    ctx.addIssue({
      code: 'custom',
      message: `an alternative changes at least one setup key: ${WHAT_IF_KEYS.join(', ')} (e.g. {weights: fp8})`,
    });
  for (const k of keys)
    if (!(WHAT_IF_KEYS as readonly string[]).includes(k))
      ctx.addIssue({
        code: 'custom',
        message: `"${k}" is not a setup key an alternative may change: use ${WHAT_IF_KEYS.join(', ')} (and "name:" to label it)`,
        path: [k],
      });
  if (o.name !== undefined && typeof o.name !== 'string')
    ctx.addIssue({ code: 'custom', message: 'name labels the alternative: write text', path: ['name'] });
});

/** One alternative or a list of them. */
export const whatIfSchema = z
  .union([z.array(alternative).min(1), alternative])
  .transform((v) => (Array.isArray(v) ? v : [v]))
  .describe(
    'Alternatives to price against this setup, each a mapping of setup keys: [{weights: fp8}, {tensor_parallel: 2}, {gpu: h100-sxm, price: 2.50 $/h}]. Each says what it saves per million output tokens.',
  );

export type WhatIf = z.output<typeof whatIfSchema>;

/** An alternative resolved: its label, its setup (when its keys are valid), and what is wrong with it. */
export interface Alternative {
  label: string;
  setup?: Setup;
  findings: Finding[];
  /** Why it is not priced (bad keys, weights that do not fit). */
  skipped?: string;
}

/** "weights: fp8, tensor_parallel: 2" */
function changesWords(o: Record<string, unknown>): string {
  return Object.entries(o)
    .filter(([k]) => k !== 'name')
    .map(([k, v]) => `${k}: ${typeof v === 'object' && v !== null ? JSON.stringify(v).replace(/"/g, '') : String(v)}`)
    .join(', ');
}

/**
 * Each alternative as a setup over `base`, with the findings on its lines (what_if.N.KEY): bad
 * setup keys, a GPU changed without a price, a setup without a price to compare against.
 */
export function resolveWhatIf(base: Setup, alts: WhatIf, nb: Pick<NotebookContext, 'dir' | 'files'>): Alternative[] {
  const basePrice = setupPricePerHour(base);
  return alts.map((o, i) => {
    const at = ['what_if', i];
    const label = typeof o.name === 'string' ? o.name : changesWords(o);
    const keys = Object.fromEntries(Object.entries(o).filter(([k]) => k !== 'name'));
    const r = applySetupOverrides(base, keys, nb.dir, base.name, false, nb.files);
    const findings = r.findings.map((f) => ({ ...f, path: [...at, ...f.path] }));
    if (keys.gpu !== undefined && keys.price === undefined && r.setup && r.setup.gpu.id !== base.gpu.id)
      findings.push(
        finding(
          'error',
          'what-if-price',
          `what_if ${i + 1} changes the GPU to ${r.setup.gpu.id}: give its rental price too (the catalog carries none; the setup's ${base.price ? base.price.written : 'price'} is for ${base.gpu.id})`,
          [...at, 'gpu'],
          { fix: `{gpu: ${r.setup.gpu.id}, price: 2.50 $/h}` },
        ),
      );
    if (basePrice === undefined && keys.price === undefined && i === 0)
      findings.push(
        finding(
          'error',
          'what-if-price',
          'what_if says what each alternative saves per million tokens: the setup has no price to compare against',
          ['what_if'],
          { fix: 'price: 1.20 $/h (in the setup cell, or in this cell)' },
        ),
      );
    const errors = findings.filter((f) => f.severity === 'error');
    if (errors.length || !r.setup) return { label, findings, skipped: errors[0]?.message ?? 'not a complete setup' };
    const unfit = fitFindings(r.setup, at, -1).filter((f) => f.severity === 'error');
    if (unfit.length) return { label, setup: r.setup, findings, skipped: `does not fit: ${unfit[0].message}` };
    return { label, setup: r.setup, findings };
  });
}

/** The findings of a cell's what_if keys (for analyze), or none without them. */
export function whatIfFindings(
  base: Setup | undefined,
  alts: WhatIf | undefined,
  nb: Pick<NotebookContext, 'dir' | 'files'>,
): Finding[] {
  if (!base || !alts) return [];
  return resolveWhatIf(base, alts, nb).flatMap((a) => a.findings);
}

/** What one setup predicts at each point of the cell: output tok/s (every replica). */
export interface PricedCurve {
  points: { x: number; tok_s: number }[];
}

/**
 * The what-if table and values: per alternative its GPUs and $/h, its $ per million output tokens
 * at each point against the setup as it is, and what it saves at its cheapest point against the
 * setup's cheapest.
 */
export async function whatIfOutput(
  base: Setup,
  baseCurve: PricedCurve,
  alts: Alternative[],
  predict: (s: Setup) => Promise<PricedCurve>,
  /** How a point is named in a column: "c=64", "batch 64", "4 req/s". */
  xName: (x: number) => string,
): Promise<{ output: CellOutput; values: Record<string, unknown>[] }> {
  const nowHour = setupPricePerHour(base);
  const cost = (perHour: number | undefined, tok: number) =>
    perHour === undefined ? NaN : dollarsPerMtok(perHour, tok);
  const cheapest = (xs: number[]) => Math.min(...xs.filter(Number.isFinite));
  const nowCosts = baseCurve.points.map((p) => cost(nowHour, p.tok_s));
  const nowBest = cheapest(nowCosts);
  const rows: Record<string, string>[] = [];
  const values: Record<string, unknown>[] = [];
  const xs = baseCurve.points.map((p) => p.x);
  const row = (label: string, s: Setup | undefined, costs: number[] | undefined, note?: string) => {
    const perHour = s ? setupPricePerHour(s) : undefined;
    const r: Record<string, string> = {
      alt: label,
      gpus: s ? `${parallelWords(s)}${perHour !== undefined ? `, ${priceWords(s)}` : ''}` : '—',
    };
    xs.forEach((_, i) => {
      const c = costs?.[i];
      r[`x${i}`] =
        c === undefined || !Number.isFinite(c)
          ? '—'
          : costs === nowCosts
            ? fmtDollarsPerMtok(c)
            : `${fmtDollarsPerMtok(c)} (${Number.isFinite(nowCosts[i]) ? fmtSigned((c - nowCosts[i]) / nowCosts[i]) : '—'})`;
    });
    r.saves = note ?? (costs && costs !== nowCosts ? savingWords(nowBest, cheapest(costs)) : '—');
    rows.push(r);
  };
  row(`now: ${base.weights} on ${base.gpu.id}`, base, nowCosts, 'the setup as it is');
  for (const a of alts) {
    if (a.skipped || !a.setup) {
      row(a.label, a.setup, undefined, a.skipped);
      values.push({ alternative: a.label, skipped: a.skipped });
      continue;
    }
    const curve = await predict(a.setup);
    const perHour = setupPricePerHour(a.setup);
    const costs = xs.map((x) => {
      const p = curve.points.find((q) => q.x === x);
      return p ? cost(perHour, p.tok_s) : NaN;
    });
    row(a.label, a.setup, costs);
    const best = cheapest(costs);
    values.push({
      alternative: a.label,
      gpu: a.setup.gpu.id,
      weights: a.setup.weights,
      gpus: parallelWords(a.setup),
      usd_per_hour: perHour,
      points: xs.map((x, i) => ({
        x,
        tok_s: curve.points.find((q) => q.x === x)?.tok_s,
        usd_per_mtok_output: costs[i],
        saves_usd_per_mtok: nowCosts[i] - costs[i],
      })),
      cheapest_usd_per_mtok: best,
      saves_usd_per_mtok: nowBest - best,
      saves_fraction: nowBest > 0 ? (nowBest - best) / nowBest : undefined,
    });
  }
  const output = tableOutput(
    `What if — $ per million output tokens against ${base.weights} on ${base.gpu.id}${nowHour !== undefined ? ` at ${priceWords(base)}` : ''}`,
    [
      { key: 'alt', label: 'alternative' },
      { key: 'gpus', label: 'GPUs, price' },
      ...xs.map((x, i) => ({ key: `x${i}`, label: xName(x), align: 'right' as const })),
      { key: 'saves', label: 'at its cheapest point vs now' },
    ],
    rows,
    `${COST_FORMULA}, at each alternative's own predicted tok/s and its own $/h (a per-GPU price × its GPUs; a per-node price as it is). (−x%) is cheaper per token than now. An alternative that changes the GPU gives its own price: the catalog carries none.`,
  );
  return { output, values };
}

const fmtSigned = (f: number) => `${f > 0 ? '+' : f < 0 ? '−' : '±'}${fmtNum(Math.abs(f) * 100, 0)}%`;
