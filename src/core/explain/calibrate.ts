/**
 * Calibration: fit the serving model's free parameters (step overhead, prefill MFU) to a bench
 * cell's measured points, read from its facts.
 *
 * Each measured point gives three observations: output throughput, TTFT median and TPOT median. The
 * model is the simulated engine in virtual time at the same points, lengths and request count; the
 * residuals are log(measured / predicted), so every observation weighs as a relative error. The
 * Levenberg-Marquardt step, its bounds and its finite-difference Jacobian are ml-levenberg-marquardt's
 * (mljs); the engine runs asynchronously (it yields to the event loop), so each step is asked of the
 * optimizer once the evaluations it needs are in hand: one iteration at a time, with the damping
 * carried between them by the library's own rule (÷9 on an improvement, ×11 otherwise).
 *
 * Uncertainty: at the optimum, J (central differences) and s² = RSS / (m − n) give the covariance
 * s²·(JᵀJ)⁻¹ (ml-matrix's inverse); σ is its diagonal's root, and the interval stated is ±t·σ with
 * Student's t at 95% for m − n degrees of freedom. With no degree of freedom left (one point: three
 * observations, or every parameter fitted from as many observations) no uncertainty is claimed.
 */
import type { RunContext, Setup } from '../engine/types';
import type { Fact } from '../facts';
import type { ServingParams, ServingPoint } from '../kinds/predictServing';
import { completedOf, latencyMs, pointLabel, pointsOf, shapeOf, throughput, type PointView } from './points';
import { tQuantile } from '../stats/ci';

/** What a calibration fits: name, unit, bounds and the finite-difference step, in the optimizer's units. */
export const FREE_PARAMETERS = [
  {
    name: 'step_overhead',
    /** Optimizer units: ms (the model takes seconds). */
    scale: 1e-3,
    unit: 's' as const,
    min: 0,
    max: 100,
    delta: 0.02,
    words: 'per-step scheduler, sampler and launch time added to every engine step',
  },
  {
    name: 'prefill_mfu',
    scale: 1,
    unit: undefined,
    min: 0.02,
    max: 1,
    delta: 0.002,
    words: 'fraction of the dense peak the prefill matmuls reach',
  },
] as const;
export type FreeParameter = (typeof FREE_PARAMETERS)[number]['name'];

const OBSERVED = ['output_throughput', 'ttft.p50', 'tpot.p50'] as const;
type Observed = (typeof OBSERVED)[number];
const OBS_LABEL: Record<Observed, string> = {
  output_throughput: 'output tok/s',
  'ttft.p50': 'TTFT median',
  'tpot.p50': 'TPOT median',
};

export interface Observation {
  point: string;
  x: number;
  quantity: string;
  q: Observed;
  measured: number;
}

export interface FittedParameter {
  name: FreeParameter;
  /** Base units (seconds; a fraction). */
  value: number;
  initial: number;
  sigma?: number;
  /** Half-width of the 95% interval (t · σ). */
  ci95?: number;
  unit?: 's';
  words: string;
}

export interface CalibrationResult {
  fitted: FittedParameter[];
  /** Held fixed (given in the cell): not fitted. */
  fixed: { name: FreeParameter; value: number; unit?: 's' }[];
  residuals: (Observation & { fitted: number; residual: number })[];
  rss: number;
  dof: number;
  /** Correlation of the two fitted parameters, when both were. */
  correlation?: number;
  iterations: number;
  evaluations: number;
  ms: number;
  loop: 'closed' | 'open';
  input: number;
  output: number;
  requests: number;
}

/** The observations a bench's facts offer: per point, throughput and the TTFT/TPOT medians. */
export function observationsOf(facts: readonly Fact[]): { obs: Observation[]; points: PointView[] } {
  const points = pointsOf(facts);
  const obs: Observation[] = [];
  for (const v of points)
    for (const q of OBSERVED) {
      const m =
        q === 'output_throughput' ? throughput(v, 'output') : latencyMs(v, ...(q.split('.') as [string, string]));
      if (m !== undefined && m > 0) obs.push({ point: pointLabel(v), x: v.x, quantity: OBS_LABEL[q], q, measured: m });
    }
  return { obs, points };
}

const valueOf = (p: ServingPoint, q: Observed) =>
  q === 'output_throughput'
    ? p.metrics.output_throughput
    : q === 'ttft.p50'
      ? p.metrics.ttft_ms.median
      : p.metrics.tpot_ms.median;

/** Raised inside the optimizer's synchronous call when it asks for a model value not yet computed. */
class NeedEval extends Error {
  constructor(readonly theta: number[]) {
    super('evaluation needed');
  }
}

/**
 * Fit the free parameters not given in `base` to the bench's measured points. `benchFacts` are the
 * bench cell's facts; the shape (lengths, loop, points, requests) comes from them.
 */
export async function calibrate(
  setup: Setup,
  benchFacts: readonly Fact[],
  base: ServingParams,
  hooks: Pick<RunContext, 'signal'> & { progress?: RunContext['progress'] } = { signal: new AbortController().signal },
): Promise<CalibrationResult> {
  const [{ simulateServing }, { levenbergMarquardt }, { Matrix, inverse }, { ENGINE_DEFAULTS }] = await Promise.all([
    import('../kinds/predictServing'),
    import('ml-levenberg-marquardt'),
    import('ml-matrix'),
    import('../sim/engine'),
  ]);
  const t0 = performance.now();
  const { obs, points } = observationsOf(benchFacts);
  const shape = shapeOf(benchFacts.filter((f) => f.kind === 'tokens'));
  if (shape.input === undefined || shape.output === undefined)
    throw new Error('the bench states no prompt and output lengths (its tokens facts): run it again');
  if (points.length < 2)
    throw new Error(
      `a calibration needs two or more measured points; the bench has ${points.length}: add points to its concurrency (or rate) list`,
    );
  const loop = points[0].loop;
  if (points.some((p) => p.loop !== loop))
    throw new Error('the bench mixes closed- and open-loop points: calibrate on one loop');
  const requests = Math.max(1, ...points.map((p) => completedOf(p) ?? 0));
  const free = FREE_PARAMETERS.filter((p) =>
    p.name === 'step_overhead' ? base.stepOverheadS === undefined : base.prefillMfu === undefined,
  );
  const fixed = FREE_PARAMETERS.filter((p) => !free.includes(p)).map((p) => ({
    name: p.name,
    value: p.name === 'step_overhead' ? base.stepOverheadS! : base.prefillMfu!,
    unit: p.unit,
  }));
  if (!free.length)
    throw new Error('step_overhead and prefill_mfu are both given: leave one out for calibrate: to fit it');
  const initial = free.map((p) =>
    p.name === 'step_overhead' ? ENGINE_DEFAULTS.stepOverheadS / p.scale : ENGINE_DEFAULTS.prefillMfu / p.scale,
  );

  // The model at θ (optimizer units): every observation's prediction, log. Cached by θ.
  const cache = new Map<string, number[]>();
  const key = (theta: number[]) => theta.map((t) => t.toPrecision(12)).join(',');
  let evaluations = 0;
  const evaluate = async (theta: number[]): Promise<number[]> => {
    const k = key(theta);
    const hit = cache.get(k);
    if (hit) return hit;
    if (hooks.signal?.aborted) throw new Error('cancelled');
    const params: ServingParams = { ...base };
    free.forEach((p, i) => {
      if (p.name === 'step_overhead') params.stepOverheadS = theta[i] * p.scale;
      else params.prefillMfu = theta[i] * p.scale;
    });
    const sim = await simulateServing(
      setup,
      params,
      {
        input: shape.input!,
        output: shape.output!,
        ...(loop === 'open' ? { rate: points.map((p) => p.x) } : { concurrency: points.map((p) => p.x) }),
        requests,
        seed: 'per-point',
      },
      { signal: hooks.signal },
    );
    evaluations++;
    const byX = new Map(sim.points.map((p) => [loop === 'open' ? p.rate! : p.concurrency!, p]));
    const out = obs.map((o) => Math.log(Math.max(1e-12, valueOf(byX.get(o.x)!, o.q))));
    cache.set(k, out);
    return out;
  };
  const model = (theta: number[]) => {
    const v = cache.get(key(theta));
    if (!v) throw new NeedEval(theta);
    return (i: number) => v[i];
  };
  const data = { x: obs.map((_, i) => i), y: obs.map((o) => Math.log(o.measured)) };
  const sse = (theta: number[]) => cache.get(key(theta))!.reduce((s, v, i) => s + (data.y[i] - v) ** 2, 0);

  let theta = initial.slice();
  let damping = 1e-2;
  let iterations = 0;
  await evaluate(theta);
  for (; iterations < 20; iterations++) {
    // The step at θ needs f(θ) and f(θ + δ·e_k); then the optimizer asks for f at its new θ.
    await Promise.all(
      free.map((p, k) => {
        const t = theta.slice();
        t[k] += p.delta;
        return evaluate(t);
      }),
    );
    let r: { parameterValues: number[] } | undefined;
    for (let tries = 0; tries < 4 && !r; tries++) {
      try {
        r = levenbergMarquardt(data, model, {
          initialValues: theta,
          damping,
          gradientDifference: free.map((p) => p.delta),
          minValues: free.map((p) => p.min),
          maxValues: free.map((p) => p.max),
          maxIterations: 1,
          errorTolerance: 0,
        });
      } catch (e) {
        if (!(e instanceof NeedEval)) throw e;
        await evaluate(e.theta);
      }
    }
    if (!r) break;
    const next = r.parameterValues;
    const before = sse(theta);
    const after = cache.has(key(next)) ? sse(next) : before;
    hooks.progress?.({
      message: `calibrating: step ${iterations + 1}, residual ${Math.sqrt(after / obs.length).toFixed(4)}`,
    });
    if (after < before) {
      const moved = Math.max(...next.map((t, i) => Math.abs(t - theta[i]) / Math.max(1e-9, Math.abs(theta[i]))));
      theta = next;
      damping = Math.max(damping / 9, 1e-7);
      if (moved < 1e-5 || before - after < 1e-12) break;
    } else {
      damping = Math.min(damping * 11, 1e7);
      if (damping >= 1e6) break;
    }
  }

  // Uncertainty at the optimum: J by central differences, s² = RSS / (m − n), cov = s²(JᵀJ)⁻¹.
  const f0 = await evaluate(theta);
  const m = obs.length;
  const n = free.length;
  const J = new Matrix(m, n);
  for (let k = 0; k < n; k++) {
    const h = free[k].delta;
    const up = theta.slice();
    const dn = theta.slice();
    up[k] += h;
    dn[k] = Math.max(free[k].min, dn[k] - h);
    const [a, b] = await Promise.all([evaluate(up), evaluate(dn)]);
    for (let i = 0; i < m; i++) J.set(i, k, (a[i] - b[i]) / (up[k] - dn[k]));
  }
  const rss = f0.reduce((s, v, i) => s + (data.y[i] - v) ** 2, 0);
  const dof = m - n;
  let cov: InstanceType<typeof Matrix> | undefined;
  if (dof > 0) {
    try {
      cov = inverse(J.transpose().mmul(J)).mul(rss / dof);
    } catch {
      cov = undefined;
    }
  }
  // Two-sided 95%: Student's t at 97.5% with the fit's degrees of freedom.
  const t = dof >= 1 ? tQuantile(0.975, dof) : NaN;
  const fitted: FittedParameter[] = free.map((p, k) => {
    const v = cov?.get(k, k);
    const sigma = v !== undefined && v >= 0 && Number.isFinite(v) ? Math.sqrt(v) * p.scale : undefined;
    return {
      name: p.name,
      value: theta[k] * p.scale,
      initial: initial[k] * p.scale,
      ...(sigma !== undefined ? { sigma, ci95: t * sigma } : {}),
      ...(p.unit ? { unit: p.unit } : {}),
      words: p.words,
    };
  });
  const correlation =
    cov && n === 2 ? cov.get(0, 1) / Math.sqrt(Math.max(1e-300, cov.get(0, 0) * cov.get(1, 1))) : undefined;
  return {
    fitted,
    fixed,
    residuals: obs.map((o, i) => ({ ...o, fitted: Math.exp(f0[i]), residual: o.measured / Math.exp(f0[i]) - 1 })),
    rss,
    dof,
    ...(correlation !== undefined && Number.isFinite(correlation) ? { correlation } : {}),
    iterations,
    evaluations,
    ms: performance.now() - t0,
    loop,
    input: shape.input,
    output: shape.output,
    requests,
  };
}
