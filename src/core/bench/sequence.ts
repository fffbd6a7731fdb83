/**
 * What a sweep measures next: its list of loads, each run `repeats` times with fresh prompts, or a
 * capacity search that picks each load from the SLO results before it (workload/schedule.ts's
 * CapacitySearch), then re-probes the answer and the failing load above it to show that the
 * answer holds under a repeat. Runs where the sweep runs (in the bench worker): plain data in,
 * plain data out.
 */
import { CapacitySearch, type CapacityProbe } from '../workload/schedule';
import type { PointMetrics, SloSpec } from './metrics';
import { sloMisses, statWords } from '../facts/stat';
import { pointSeed } from './prompts';

export interface Load {
  rate?: number;
  concurrency?: number;
}

export interface CapacityPlan {
  /** Which load the search moves: the open-loop rate (req/s) or the closed-loop concurrency. */
  key: 'rate' | 'concurrency';
  start: number;
  min: number;
  max: number;
  /** Stop bisecting when (fail − pass) / pass is at most this; a concurrency stops at a gap of 1. */
  precision: number;
  maxProbes: number;
  /** Re-probe the answer and the failing load above it, with fresh prompts. */
  confirm: boolean;
  /** A probe passes only with at most this share of requests failed (0..1). */
  maxFailureRate: number;
}

export type ProbePhase = CapacityProbe['phase'] | 'confirm';

/** A capacity probe's result: whether it met every SLO, and why not. */
export interface ProbeVerdict {
  /** The probe's number (1-based): its repeats share it. */
  probe: number;
  phase: ProbePhase;
  pass: boolean;
  /** What failed: "TTFT p99 812 ms > 500 ms", "3% of requests failed > 1%". */
  why: string[];
}

export interface CapacityOutcome {
  key: 'rate' | 'concurrency';
  best?: number;
  failAt?: number;
  /** (failAt − best) / best. */
  precision?: number;
  target: number;
  converged: boolean;
  probes: number;
  /**
   * The re-probes with fresh prompts (undefined when confirm was off or nothing passed): did the
   * answer meet the SLOs again, did the load above miss them again, and the answers refuted on the
   * way (each sent the search below it).
   */
  confirm?: { best: boolean; failAt?: boolean; stable: boolean; refuted: number[] };
}

export interface Step {
  load: Load;
  /** The point's place in the plan (its load's index; a probe's number − 1): it picks the prompt seed. */
  slot: number;
  repeat: number;
  phase?: ProbePhase;
}

/** A point of `slot`, repeat `repeat`: the slot's seed for the first repeat, then one derived per repeat. */
export function stepSeed(
  seed: { mode: 'per-point'; base: number } | { mode: 'fixed'; value: number },
  s: Step,
): number {
  const first = seed.mode === 'fixed' ? pointSeed(seed.value, s.slot, true) : pointSeed(seed.base, s.slot, false);
  return s.repeat === 0 ? first : pointSeed(first, s.repeat, false);
}

/** Whether a point's metrics meet every SLO (each limit on its stat) with few enough failures, and why not. */
export function probeVerdict(
  m: PointMetrics,
  slo: SloSpec | undefined,
  maxFailureRate: number,
): Omit<ProbeVerdict, 'probe' | 'phase'> {
  const why: string[] = [];
  // The SLO as slo_met reads it (facts/stat.ts), with each miss in words.
  if (m.completed === 0) why.push('no request completed');
  else
    for (const { limit: l, value: v } of sloMisses(m, slo ?? []))
      why.push(
        v === undefined
          ? `${statWords(l.metric, l.stat)} not measured`
          : `${statWords(l.metric, l.stat)} ${fmt(v)} ms > ${fmt(l.ms)} ms`,
      );
  if (m.failure_rate > maxFailureRate)
    why.push(`${fmt(m.failure_rate * 100)}% of requests failed > ${fmt(maxFailureRate * 100)}%`);
  return { pass: why.length === 0, why };
}

const fmt = (x: number) => (Math.abs(x) >= 100 ? x.toFixed(0) : Number(x.toPrecision(3)).toString());

export interface PointSequence {
  /** How many points the plan runs, when known in advance. */
  total?: number;
  /** The most points it can run. */
  limit: number;
  /** The most requests in flight any point asks for (closed loop), for the connection pool. */
  maxConcurrency: number;
  next(): Step | undefined;
  /** The verdict of a capacity probe's repeat (undefined for a list); call once per finished point. */
  finished(s: Step, m: PointMetrics): ProbeVerdict | undefined;
  /** The capacity search's answer (undefined for a list). */
  outcome(): CapacityOutcome | undefined;
}

/** The loads of a list, each `repeats` times in a row. */
export function listSequence(loads: Load[], repeats = 1): PointSequence {
  let k = 0;
  const n = Math.max(1, repeats);
  return {
    total: loads.length * n,
    limit: loads.length * n,
    maxConcurrency: Math.max(1, ...loads.map((l) => l.concurrency ?? 1)),
    next() {
      if (k >= loads.length * n) return undefined;
      const slot = Math.floor(k / n);
      const s = { load: loads[slot], slot, repeat: k % n };
      k++;
      return s;
    },
    finished: () => undefined,
    outcome: () => undefined,
  };
}

/** Most times the answer is re-probed (each refuted answer sends the search below it). */
export const MAX_CONFIRM_ROUNDS = 3;

/**
 * A capacity search, each probe run `repeats` times (it passes when every repeat does), then (with
 * confirm) the answer once more with fresh prompts: a miss refutes it and the search goes on below
 * it, so the answer is a load that met the SLOs every time it was measured; then the failing load
 * above it once more.
 */
export function capacitySequence(plan: CapacityPlan, slo: SloSpec | undefined, repeats = 1): PointSequence {
  const integer = plan.key === 'concurrency';
  const search = new CapacitySearch({
    start: plan.start,
    min: plan.min,
    max: plan.max,
    precision: plan.precision,
    integer,
    maxProbes: plan.maxProbes,
  });
  const n = Math.max(1, repeats);
  let probe = 0;
  let rounds = 0;
  let current: { x: number; phase: ProbePhase; repeat: number; pass: boolean; which?: 'best' | 'failAt' } | undefined;
  let confirmed: { best?: boolean; failAt?: boolean; refuted: number[] } = { refuted: [] };
  let done = false;
  const load = (x: number): Load => (plan.key === 'rate' ? { rate: x } : { concurrency: x });
  const start = (x: number, phase: ProbePhase, which?: 'best' | 'failAt'): Step => {
    probe++;
    current = { x, phase, repeat: 0, pass: true, which };
    return { load: load(x), slot: probe - 1, repeat: 0, phase };
  };
  return {
    total: undefined,
    limit: (plan.maxProbes + MAX_CONFIRM_ROUNDS + 1) * n,
    maxConcurrency: integer ? plan.max : 1,
    next() {
      if (current && current.repeat < n - 1) {
        current.repeat++;
        return { load: load(current.x), slot: probe - 1, repeat: current.repeat, phase: current.phase };
      }
      if (current) {
        // Every repeat of the probe has been judged: hand the verdict to the search or the confirmation.
        const c = current;
        current = undefined;
        if (c.which === 'best') {
          confirmed.best = c.pass;
          if (!c.pass) {
            confirmed.refuted.push(c.x);
            search.refute(c.x);
          }
        } else if (c.which === 'failAt') confirmed.failAt = c.pass;
        else search.report(c.pass);
        if (c.which === 'failAt') done = true;
      }
      if (done) return undefined;
      const s = search.next();
      if (s) return start(s.x, s.phase);
      const r = search.result();
      if (!plan.confirm || r.best === undefined) return undefined;
      if (confirmed.best === undefined || (confirmed.best === false && rounds < MAX_CONFIRM_ROUNDS)) {
        if (confirmed.best === false) confirmed = { refuted: confirmed.refuted };
        rounds++;
        return start(r.best, 'confirm', 'best');
      }
      if (confirmed.best && r.failAt !== undefined && confirmed.failAt === undefined)
        return start(r.failAt, 'confirm', 'failAt');
      return undefined;
    },
    finished(s, m) {
      const v = probeVerdict(m, slo, plan.maxFailureRate);
      if (current && !v.pass) current.pass = false;
      return { probe: s.slot + 1, phase: s.phase ?? 'bracket', ...v };
    },
    outcome() {
      const r = search.result();
      const confirm =
        plan.confirm && r.best !== undefined && confirmed.best !== undefined
          ? {
              best: confirmed.best,
              failAt: confirmed.failAt,
              stable: confirmed.best && (r.failAt === undefined || confirmed.failAt === false),
              refuted: confirmed.refuted,
            }
          : undefined;
      return {
        key: plan.key,
        best: r.best,
        failAt: r.failAt,
        precision: Number.isFinite(r.precision) ? r.precision : undefined,
        target: plan.precision,
        converged: r.converged,
        probes: probe,
        confirm,
      };
    },
  };
}
