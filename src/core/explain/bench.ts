/**
 * A bench run's verdict against the serving prediction in force: the one named by `predicted:`,
 * else the latest `predict: serving` above of the same shape and setup, else one the bench runs
 * itself in virtual time (the same engine `predict: serving` uses, with its stated defaults).
 */
import { setupPricePerHour } from '../cost';
import type { PredictedCurve } from '../bench/report';
import type { CellOutput, RunContext } from '../engine/types';
import { CellError } from '../findings';
import type { Fact, Loop } from '../facts';
import { inkStatus, measuredAtOf } from '../notebook/ink';
import type { CellWorkload } from '../workload/cell';
import {
  predictionInForce,
  setupKeyOf,
  verdictOutput,
  verdictRows,
  verdictValues,
  VERDICT_TOLERANCE,
  type Prediction,
} from './verdict';

export interface BenchShape {
  input: number;
  output: number;
  loop: Loop;
  /** Concurrencies (closed loop) or rates (open loop), one per point. */
  points: number[];
  /** Requests per point, for a prediction the bench runs itself. */
  requests: number;
  /** The cell's workload (lengths, prefixes, sessions, a trace): the bench's own prediction runs the same requests. */
  workload?: CellWorkload;
  /** 'auto' (default), 'none', or the name of a `predict: serving` cell. */
  predicted?: string;
  tolerance?: number;
}

/** Find (or make) the prediction and judge the run's facts against it; nothing when `predicted: none`. */
export async function benchVerdict(
  shape: BenchShape,
  measured: readonly Fact[],
  ctx: RunContext,
): Promise<{ output: CellOutput; values: ReturnType<typeof verdictValues>; prediction: Prediction } | undefined> {
  const choice = shape.predicted ?? 'auto';
  if (choice === 'none' || !ctx.setup) return undefined;
  const tolerance = shape.tolerance ?? VERDICT_TOLERANCE;
  let prediction: Prediction | undefined;
  if (choice !== 'auto') {
    const r = ctx.notebook.named.get(choice);
    const i = r ? [...ctx.notebook.results].find(([, x]) => x === r)?.[0] : undefined;
    if (!r || i === undefined || i >= ctx.cellIndex || r.kind !== 'predict: serving')
      throw new CellError(
        `predicted: "${choice}" is not a predict: serving cell above this one: name one (its "name:"), or write "predicted: auto"`,
        ['predicted'],
        'bench-predicted',
      );
    prediction = {
      facts: r.facts,
      label: `${r.kind} "${choice}" (cell ${i + 1})`,
      origin: 'above',
      cellIndex: i,
      cellName: choice,
    };
  } else {
    prediction =
      predictionInForce(ctx.notebook.results, ctx.cellIndex, {
        input: shape.input,
        output: shape.output,
        loop: shape.loop,
        setup: setupKeyOf(ctx.setup),
      }) ?? (await ownPrediction(shape, ctx));
  }
  if (!prediction) return undefined;
  // A prediction above says whether it was in ink before this run's first point began.
  if (prediction.origin === 'above' && prediction.cellIndex !== undefined)
    prediction = {
      ...prediction,
      ink: inkStatus(ctx.notebook.ink.get(prediction.cellIndex), measuredAtOf(measured)),
    };
  const rows = verdictRows(measured, prediction, tolerance);
  if (!rows.length) return undefined;
  return {
    output: verdictOutput(rows, prediction, tolerance, setupPricePerHour(ctx.setup!)),
    values: verdictValues(rows, prediction, tolerance),
    prediction,
  };
}

/** The bench's own serving prediction in virtual time: per-point seeds (a clean run), the setup's knobs. */
async function ownPrediction(shape: BenchShape, ctx: RunContext): Promise<Prediction | undefined> {
  const [{ simulateServing, servingFacts, parameterValues, setupValues, workLimitMessage }, { plannerFor }] =
    await Promise.all([import('../kinds/predictServing'), import('../workload/cell')]);
  if (workLimitMessage(shape.requests, shape.points.length, shape.input, shape.output)) return undefined;
  const setup = ctx.setup!;
  ctx.progress({ message: 'predicting the same points in virtual time' });
  const sim = await simulateServing(
    setup,
    {},
    {
      input: shape.input,
      output: shape.output,
      ...(shape.loop === 'open' ? { rate: shape.points } : { concurrency: shape.points }),
      requests: shape.requests,
      seed: 'per-point',
      planner: shape.workload
        ? (seed, vocab, i) => plannerFor(shape.workload!, seed, vocab, i * shape.requests)
        : undefined,
    },
    { signal: ctx.signal },
  );
  const facts = servingFacts({
    loop: shape.loop,
    input: shape.input,
    output: shape.output,
    points: sim.points,
    parameters: parameterValues(sim.cfg, {}),
    setup: setupValues(setup),
  });
  return {
    facts,
    label: `a serving simulation of the same points run here in virtual time (${sim.points.length} points, ${shape.requests} requests each, per-point seeds)`,
    origin: 'own',
  };
}

/** The prediction's throughput curve, as a bench plot draws it beside the measured one. */
export function predictedCurve(p: Prediction): PredictedCurve | undefined {
  const c = p.facts.find((f) => f.kind === 'curve' && f.y === 'output_throughput');
  if (!c || c.kind !== 'curve' || !c.points.length) return undefined;
  return {
    label: p.origin === 'own' ? 'predicted serving (virtual time, this cell)' : `predicted serving — ${p.label}`,
    source: 'serving',
    cellIndex: p.cellIndex,
    points: c.points.map((q) => ({ x: q.x, tok_s: q.y })),
  };
}
