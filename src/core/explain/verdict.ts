/**
 * Measured beside predicted, with no compare cell written: a bench's points against the serving
 * prediction in force (the latest `predict: serving` above of the same shape and setup, or one the
 * bench ran itself in virtual time), per point: predicted, measured, ratio, a verdict within the
 * tolerance, and the causes the run's evidence names for a gap (causes.ts). Reads facts only.
 */
import { dollarsPerMtok, fmtDollarsPerMtok, fmtUsd } from '../cost';
import { tableOutput } from '../engine/outputs';
import type { CellOutput, CellResult } from '../engine/types';
import { factsOf, type Fact, type Loop } from '../facts';
import type { InkStatus } from '../notebook/ink';
import { fmtNum } from '../units';
import { CAUSE_MEANING, causesFor, type Cause, type QuantityId } from './causes';
import { curveAt, latencyMs, parametersOf, pointLabel, pointsOf, shapeOf, throughput, type PointView } from './points';

export const VERDICT_TOLERANCE = 0.1;

const QUANTITIES: { id: QuantityId; label: string; unit: string }[] = [
  { id: 'output_throughput', label: 'output tok/s', unit: 'tok/s' },
  { id: 'ttft.p50', label: 'TTFT median', unit: 'ms' },
  { id: 'tpot.p50', label: 'TPOT median', unit: 'ms' },
  { id: 'itl.p99', label: 'ITL p99', unit: 'ms' },
];

/** The prediction a bench is judged against. */
export interface Prediction {
  facts: Fact[];
  /** Words for the table's title: 'predict: serving "ink" (cell 3)', 'a serving simulation run here'. */
  label: string;
  /** Where it came from: a cell above, or the bench's own run in virtual time. */
  origin: 'above' | 'own';
  cellIndex?: number;
  cellName?: string;
  /** A prediction above: whether it was in ink before the bench's first point began (notebook/ink.ts). */
  ink?: InkStatus;
}

export interface VerdictRow {
  point: string;
  x: number;
  loop: Loop;
  quantity: string;
  unit: string;
  predicted?: number;
  /** The predicted throughput was read off the curve between two of its points. */
  interpolated?: boolean;
  measured?: number;
  ratio?: number;
  ok?: boolean;
  causes: Cause[];
}

/** A setup fact as the words that must agree for a prediction to be "of this setup". */
const setupKey = (facts: readonly Fact[]) => {
  const s = factsOf(facts, 'setup')[0];
  return s ? [s.gpu, s.model, s.weights, s.kv_cache].join('/') : undefined;
};

/**
 * The latest `predict: serving` above `beforeIndex` whose requests have this shape (prompt and
 * output tokens), loop and setup: a prediction of something else does not judge this run.
 */
export function predictionInForce(
  results: ReadonlyMap<number, CellResult>,
  beforeIndex: number,
  shape: { input: number; output: number; loop: Loop; setup?: string },
): Prediction | undefined {
  let best: Prediction | undefined;
  for (const [i, r] of results) {
    if (i >= beforeIndex || !r.ok || (best && best.cellIndex! > i)) continue;
    const curve = factsOf(r.facts, 'curve').find(
      (f) => f.source === 'predict: serving' && f.y === 'output_throughput' && f.points.length > 0,
    );
    if (!curve || (curve.x === 'rate') !== (shape.loop === 'open')) continue;
    const s = shapeOf(r.facts.filter((f) => !f.point));
    if (s.input !== shape.input || s.output !== shape.output) continue;
    const k = setupKey(r.facts);
    if (shape.setup && k && k !== shape.setup) continue;
    best = {
      facts: r.facts,
      label: `${r.kind}${r.name ? ` "${r.name}"` : ''} (cell ${i + 1})`,
      origin: 'above',
      cellIndex: i,
      cellName: r.name,
    };
  }
  return best;
}

/** The setup key a bench's own setup gives (to match predictions against). */
export function setupKeyOf(s: { gpu: { id: string }; model: { id: string }; weights: string; kvCache: string }) {
  return [s.gpu.id, s.model.id, s.weights, s.kvCache].join('/');
}

/** Predicted and measured per point and quantity, with the causes of each gap. */
export function verdictRows(
  measured: readonly Fact[],
  prediction: Prediction,
  tolerance = VERDICT_TOLERANCE,
): VerdictRow[] {
  const ms = pointsOf(measured);
  const ps = new Map(pointsOf(prediction.facts).map((v) => [v.key, v]));
  const curve = factsOf(prediction.facts, 'curve').find((f) => f.y === 'output_throughput');
  const params = parametersOf(prediction.facts);
  const pairs = ms.map((m) => ({ m, p: ps.get(m.key) }));
  const rows: VerdictRow[] = [];
  for (const { m, p } of pairs) {
    for (const q of QUANTITIES) {
      const mv = valueOf(m, q.id);
      let pv = p ? valueOf(p, q.id) : undefined;
      let interpolated = false;
      if (pv === undefined && q.id === 'output_throughput' && curve) {
        const at = curveAt(curve.points, m.x);
        if (at) {
          pv = at.y;
          interpolated = !at.exact;
        }
      }
      if (mv === undefined && pv === undefined) continue;
      const ratio = mv !== undefined && pv !== undefined && pv > 0 ? mv / pv : undefined;
      const ok = ratio === undefined ? undefined : Math.abs(ratio - 1) <= tolerance + 1e-12;
      const causes =
        ratio !== undefined && !ok
          ? causesFor({ q: q.id, dir: ratio > 1 ? 'above' : 'below', m, p, pairs, params, tolerance })
          : [];
      rows.push({
        point: pointLabel(m),
        x: m.x,
        loop: m.loop,
        quantity: q.label,
        unit: q.unit,
        predicted: pv,
        ...(interpolated ? { interpolated } : {}),
        measured: mv,
        ratio,
        ok,
        causes,
      });
    }
  }
  return rows;
}

function valueOf(v: PointView, q: QuantityId): number | undefined {
  if (q === 'output_throughput') return throughput(v, 'output');
  const [metric, stat] = q.split('.');
  return latencyMs(v, metric, stat);
}

const num = (v: number | undefined, unit: string) =>
  v === undefined ? '—' : unit === 'tok/s' ? fmtNum(v, v >= 100 ? 0 : 1) : fmtNum(v, v >= 100 ? 0 : v >= 10 ? 1 : 2);

/** The verdict table: one row per point and quantity. */
export function verdictOutput(
  rows: VerdictRow[],
  prediction: Prediction,
  tolerance = VERDICT_TOLERANCE,
  /** The setup's rental price, $/h: a throughput also reads as $ per million output tokens. */
  perHour?: number,
): CellOutput {
  const priced = (v: number | undefined, r: VerdictRow) =>
    perHour !== undefined && r.unit === 'tok/s' && v !== undefined
      ? ` (${fmtDollarsPerMtok(dollarsPerMtok(perHour, v))})`
      : '';
  const params = parametersOf(prediction.facts);
  const p = (name: string, f: (v: number) => string) => {
    const x = params.get(name);
    return x
      ? `${name} ${f(x.value)}${x.origin === 'fitted' || x.origin === 'carried' ? ` (${x.origin}${x.from ? ` from ${x.from}` : ''})` : ''}`
      : undefined;
  };
  const assumed = [p('step_overhead', (v) => `${fmtNum(v * 1e3, 2)} ms`), p('prefill_mfu', (v) => fmtNum(v, 3))]
    .filter(Boolean)
    .join(', ');
  const gaps = rows.filter((r) => r.ok === false);
  const named = [...new Set(rows.flatMap((r) => r.causes.map((c) => c.code)))];
  const unexplained = gaps.filter((r) => !r.causes.length).length;
  const ink = prediction.ink;
  return tableOutput(
    `Measured against predicted — ${prediction.label}${ink ? `, ${ink.words}` : ''}`,
    [
      { key: 'point', label: 'point' },
      { key: 'quantity', label: 'quantity' },
      {
        key: 'predicted',
        label: 'predicted',
        align: 'right',
        fmt: (v, r: VerdictRow) => `${r.interpolated ? '~' : ''}${num(v, r.unit)}${priced(v, r)}`,
      },
      {
        key: 'measured',
        label: 'measured',
        align: 'right',
        fmt: (v, r: VerdictRow) => `${num(v, r.unit)}${priced(v, r)}`,
      },
      { key: 'ratio', label: 'ratio', align: 'right', fmt: (v) => (v === undefined ? '—' : `${fmtNum(v, 2)}×`) },
      {
        key: 'ok',
        label: 'verdict',
        fmt: (v) => (v === true ? '✅ within' : v === false ? '❌ outside' : '—'),
      },
      {
        key: 'causes',
        label: 'cause',
        fmt: (cs: Cause[], r: VerdictRow) =>
          cs.length
            ? cs.map((c) => c.words).join('; ')
            : r.ok === false
              ? 'unexplained: no evidence in this run names a cause'
              : '',
      },
    ],
    rows,
    `ratio = measured / predicted; ✅ within ±${fmtNum(tolerance * 100, 0)}%; tok/s, ms${perHour !== undefined ? `; a throughput's $ per million output tokens at ${fmtUsd(perHour)}/h` : ''}. ` +
      `${prediction.origin === 'own' ? 'No serving prediction of this shape above, so the bench ran one itself in virtual time. ' : ''}` +
      `${ink ? `${inkSentence(ink)} ` : ''}` +
      `${assumed ? `The prediction assumed ${assumed}. ` : ''}` +
      `${rows.some((r) => r.interpolated) ? '~ read off the predicted curve between its points. ' : ''}` +
      `Causes are named only from this run's evidence: server /metrics (prefix-cache hits, preemptions, waiting requests), the client's dispatch and event-loop lag, the server's usage (token drift, output shortfall) and the shape of the gap (step overhead, prefill speed, prefill interference).` +
      named.map((c) => ` ${c}: ${CAUSE_MEANING[c]}.`).join('') +
      (gaps.length
        ? ` ${gaps.length} of ${rows.length} outside${unexplained ? `, ${unexplained} unexplained` : ''}.`
        : ` Every quantity within the tolerance.`),
  );
}

/** The prediction's ink in a sentence, with the times it was judged by. */
function inkSentence(ink: InkStatus): string {
  const m = ink.measured_at ? ` this run's first point began ${ink.measured_at}` : '';
  switch (ink.state) {
    case 'not-inked':
      return 'The prediction is not in ink: nothing shows it was written down before this run (ink it to say so).';
    case 'before':
      return `The prediction was inked ${ink.inked_at}, before the measurement:${m}.`;
    case 'revised-after':
      return `The prediction was inked ${ink.inked_at}, before the measurement (${m.trim()}), but the numbers judged are a revision of ${ink.revised_at} with other inputs, made after it.`;
    case 'after':
      return `The prediction was inked ${ink.inked_at}, after the measurement began:${m}.`;
    case 'inked':
      return `The prediction was inked ${ink.inked_at}; when this run measured is not known.`;
  }
}

/** What the cell saves of its verdict (values.verdict). */
export function verdictValues(rows: VerdictRow[], prediction: Prediction, tolerance: number) {
  return {
    against: {
      origin: prediction.origin,
      label: prediction.label,
      ...(prediction.cellName ? { cell: prediction.cellName } : {}),
      ...(prediction.ink ? { ink: prediction.ink } : {}),
    },
    tolerance,
    rows: rows.map((r) => ({
      point: r.point,
      x: r.x,
      quantity: r.quantity,
      predicted: r.predicted ?? null,
      measured: r.measured ?? null,
      ratio: r.ratio ?? null,
      ok: r.ok ?? null,
      causes: r.causes.map((c) => c.code),
      cause_words: r.causes.map((c) => c.words),
    })),
  };
}
