/**
 * What `bench: capacity` shows: the answer with its bracket and whether it held under a repeat,
 * every probe with its SLO result, Little's-law closure and prefix-cache proof (the point's /metrics
 * delta), a plot of the probes (each SLO'd p99 over its limit, against the load), and the findings
 * a search deserves (no answer, no upper bound, not converged, unstable).
 */
import { factsOutput, tableOutput } from '../engine/outputs';
import type { CellOutput } from '../engine/types';
import { finding, type Finding } from '../findings';
import { plotOutput } from '../plots/render';
import { fmtNum } from '../units';
import { statOf, statWords, type SloLimit } from '../facts/stat';
import { doneLabel } from './quality';
import type { ReportSpec } from './report';
import type { CapacityOutcome, CapacityPlan } from './sequence';
import type { PointResult, SweepResult } from './sweep';

const loadText = (key: CapacityPlan['key'], x: number | undefined) =>
  x === undefined ? '—' : key === 'rate' ? `${fmtNum(x, x >= 10 ? 1 : 3)} req/s` : `concurrency ${x}`;
const xOf = (p: PointResult) => (p.loop === 'open' ? p.rate! : p.concurrency!);
const ms = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? '—' : fmtNum(v, v >= 100 ? 0 : 1));

/** The SLOs in words: "TTFT p99 ≤ 500 ms, TPOT p99 ≤ 50 ms; at most 1% of requests failed". */
function sloText(spec: ReportSpec, plan: CapacityPlan): string {
  const parts = (spec.slo ?? []).map((l) => `${statWords(l.metric, l.stat)} ≤ ${ms(l.ms)} ms`);
  return `${parts.join(', ')}; at most ${fmtNum(plan.maxFailureRate * 100, 1)}% of requests failed`;
}

/** The value an SLO limit reads at a point, ms. */
const sloValue = (p: PointResult, l: SloLimit) => statOf(p.metrics[`${l.metric}_ms`], l.stat);

/** Little's law at the point: λ·W against the in-flight count the client observed, and the gap. */
function littleText(p: PointResult): string {
  const l = p.metrics.little;
  if (!Number.isFinite(l.predicted_in_flight)) return '—';
  if (l.observed_in_flight === undefined) return fmtNum(l.predicted_in_flight, 2);
  const err =
    l.error !== undefined && Number.isFinite(l.error)
      ? ` (${l.error >= 0 ? '+' : ''}${fmtNum(l.error * 100, 0)}%)`
      : '';
  return `${fmtNum(l.predicted_in_flight, 2)} vs ${fmtNum(l.observed_in_flight, 2)}${err}`;
}

/** The prefix-cache proof of a point: the server's Δhits / Δqueries over it, else the usage share. */
function hitText(p: PointResult): string {
  const e = p.evidence;
  if (e?.prefix_hit_rate !== undefined)
    return `${fmtNum(e.prefix_hit_rate * 100, 1)}% (${fmtNum(e.prefix_hits_delta ?? 0, 0)} / ${fmtNum(e.prefix_queries_delta ?? 0, 0)})${p.contaminated ? ' ⚠' : ''}`;
  if (p.cached_share !== undefined) return `${fmtNum(p.cached_share * 100, 1)}% (usage)${p.contaminated ? ' ⚠' : ''}`;
  return '—';
}

/** Every probe (each repeat a row): phase, load, SLO result and why, the latencies the SLOs read, Little, prefix hits. */
export function probesTable(
  r: Pick<SweepResult, 'points'>,
  spec: ReportSpec,
  plan: CapacityPlan,
  title: string,
): CellOutput {
  const limits = spec.slo ?? [];
  const rows = r.points.map((p) => {
    const m = p.metrics;
    const v = p.probe;
    return {
      ...Object.fromEntries(limits.map((l, i) => [`slo${i}`, ms(sloValue(p, l))])),
      probe: v ? `${v.probe}${(spec.repeats ?? 1) > 1 ? `.${(p.repeat ?? 0) + 1}` : ''}` : String(p.index + 1),
      phase: v?.phase ?? '—',
      load: loadText(plan.key, xOf(p)),
      slo: v ? (v.pass ? '✅ met' : `❌ missed: ${v.why.join('; ')}`) : '—',
      done: doneLabel(p),
      req_s: fmtNum(m.request_throughput, 2),
      little: littleText(p),
      hit: hitText(p),
    };
  });
  return tableOutput<Record<string, string>>(
    title,
    [
      { key: 'probe', label: 'probe', align: 'right' },
      { key: 'phase', label: 'phase' },
      { key: 'load', label: plan.key === 'rate' ? 'offered rate' : 'concurrency', align: 'right' },
      { key: 'slo', label: 'SLO result' },
      { key: 'done', label: 'ok/sent', align: 'right' },
      { key: 'req_s', label: 'req/s', align: 'right' },
      ...limits.map((l, i) => ({ key: `slo${i}`, label: statWords(l.metric, l.stat), align: 'right' as const })),
      { key: 'little', label: 'λ·W vs L', align: 'right' },
      { key: 'hit', label: 'prefix hit (Δhits / Δqueries)', align: 'right' },
    ],
    rows,
    `SLOs: ${sloText(spec, plan)}. Phases: bracket (double or halve from the start until the result flips), bisect (the geometric mean of the last pass and the first fail${plan.key === 'concurrency' ? ', by halves for a concurrency' : ''}), confirm (the answer and the failing load above it again, with fresh prompts). Latencies in ms${spec.loop === 'open' ? ' from the scheduled send time' : ''}. λ·W vs L: Little's law, the completion rate times the mean time in system against the requests in flight the client observed. Prefix hit: Δ of the server's prefix-cache counters over the probe (hits / queries, tokens); near 0% proves each probe measured fresh prompts.`,
  );
}

/** Whether the answer held under a repeat, in words. */
function stabilityText(c: CapacityOutcome): string {
  if (!c.confirm) return 'not re-probed (confirm: false, or no load met the SLOs)';
  const best = loadText(c.key, c.best);
  const fail = loadText(c.key, c.failAt);
  const again = `${best} ${c.confirm.best ? 'met the SLOs again' : 'missed the SLOs this time'}`;
  const above =
    c.failAt === undefined
      ? ''
      : c.confirm.failAt === undefined
        ? `; ${fail} was not re-probed`
        : `, ${fail} ${c.confirm.failAt ? 'met them this time' : 'missed them again'}`;
  const refuted = c.confirm.refuted.length
    ? ` (first ${c.confirm.refuted.map((x) => loadText(c.key, x)).join(', then ')} passed, then missed on its repeat, and the search went on below)`
    : '';
  return `re-probed with fresh prompts: ${again}${above}: ${c.confirm.stable ? 'the answer is stable under a repeat' : c.confirm.best ? 'the answer held, but the load above met the SLOs on its repeat (the boundary between them is within the run-to-run noise)' : 'the answer is NOT stable under a repeat (the SLO sits inside the run-to-run noise there)'}${refuted}`;
}

/** The answer: the highest load that met every SLO, its bracket and precision, and its stability. */
export function answerOutput(r: Pick<SweepResult, 'capacity' | 'points' | 'stopped'>, plan: CapacityPlan): CellOutput {
  const c = r.capacity;
  const facts: [string, string][] = [];
  if (!c) {
    facts.push(['answer', r.stopped ? `none: ${r.stopped.message}` : 'none: no probe finished']);
    return factsOutput('Capacity', facts);
  }
  const what = plan.key === 'rate' ? 'rate' : 'concurrency';
  facts.push([
    'answer',
    c.best === undefined
      ? `none: not even ${loadText(c.key, plan.min)} met the SLOs`
      : c.failAt === undefined
        ? `at least ${loadText(c.key, c.best)}: the highest ${what} probed (max) still met the SLOs`
        : `${loadText(c.key, c.best)}: the highest ${what} that met every SLO`,
  ]);
  facts.push([
    'bracket',
    c.best !== undefined && c.failAt !== undefined
      ? `met at ${loadText(c.key, c.best)}, missed at ${loadText(c.key, c.failAt)}: ${
          c.key === 'concurrency' && c.failAt - c.best <= 1
            ? 'adjacent concurrencies'
            : `precision ${fmtNum((c.precision ?? NaN) * 100, 1)}% (asked ≤ ${fmtNum(c.target * 100, 1)}%)`
        }${c.converged ? '' : ', not converged'}`
      : `${c.best === undefined ? 'no pass' : 'no fail'} found between ${loadText(c.key, plan.min)} and ${loadText(c.key, plan.max)}`,
  ]);
  facts.push(['stability', stabilityText(c)]);
  const phases = new Map<string, number>();
  for (const p of r.points)
    if (p.probe && p.repeat === 0) phases.set(p.probe.phase, (phases.get(p.probe.phase) ?? 0) + 1);
  facts.push([
    'probes',
    `${c.probes} (${[...phases].map(([k, n]) => `${n} ${k}`).join(', ')}), each a fresh seed; a probe passes when every SLO holds`,
  ]);
  return factsOutput('Capacity', facts);
}

/** The probes against the load: each SLO'd stat over its limit (1 = at the limit), pass or fail, the answer's bracket. */
export async function probesPlot(
  r: Pick<SweepResult, 'points' | 'capacity'>,
  spec: ReportSpec,
  plan: CapacityPlan,
): Promise<CellOutput[]> {
  if (!r.points.length) return [];
  const values = r.points.flatMap((p) =>
    (spec.slo ?? [])
      .map((l) => ({ l, v: sloValue(p, l) ?? NaN }))
      .map(({ l, v }) => ({
        x: xOf(p),
        metric: statWords(l.metric, l.stat),
        ratio: Math.round((v / l.ms) * 1000) / 1000,
        value_ms: Math.round(v * 10) / 10,
        limit_ms: l.ms,
        result: p.probe?.pass ? 'met' : 'missed',
        probe: p.probe?.probe ?? p.index + 1,
        phase: p.probe?.phase ?? '',
      }))
      .filter((d) => Number.isFinite(d.ratio)),
  );
  const c = r.capacity;
  const marks = [
    ...(c?.best !== undefined ? [{ x: c.best, label: `answer ${loadText(plan.key, c.best)}`, color: 'met' }] : []),
    ...(c?.failAt !== undefined
      ? [{ x: c.failAt, label: `first miss ${loadText(plan.key, c.failAt)}`, color: 'missed' }]
      : []),
  ];
  const xTitle = plan.key === 'rate' ? 'offered rate (req/s)' : 'concurrency (requests in flight)';
  return [
    await plotOutput({
      title: 'Capacity probes: each SLO’d latency over its limit (1 = at the limit) against the load',
      width: 440,
      height: 240,
      layer: [
        {
          data: { values: [{ one: 1 }] },
          mark: { type: 'rule', strokeDash: [4, 4], color: 'firebrick' },
          encoding: { y: { field: 'one', type: 'quantitative' } },
        },
        ...(marks.length
          ? [
              {
                data: { values: marks },
                mark: { type: 'rule', strokeWidth: 2, opacity: 0.6 },
                encoding: {
                  x: { field: 'x', type: 'quantitative' },
                  color: {
                    field: 'color',
                    type: 'nominal',
                    scale: { domain: ['met', 'missed'], range: ['#2a9d3f', '#d1372c'] },
                    legend: null,
                  },
                  tooltip: [{ field: 'label' }],
                },
              },
            ]
          : []),
        {
          data: { values },
          mark: { type: 'point', filled: true, size: 70 },
          encoding: {
            x: { field: 'x', type: 'quantitative', scale: { type: 'log' }, title: xTitle },
            y: { field: 'ratio', type: 'quantitative', scale: { type: 'log' }, title: 'measured / SLO limit' },
            color: {
              field: 'result',
              type: 'nominal',
              scale: { domain: ['met', 'missed'], range: ['#2a9d3f', '#d1372c'] },
              title: 'SLO result',
            },
            shape: { field: 'metric', type: 'nominal', title: 'metric' },
            tooltip: [
              { field: 'probe' },
              { field: 'phase' },
              { field: 'x', title: plan.key },
              { field: 'metric' },
              { field: 'value_ms', title: 'measured (ms)' },
              { field: 'limit_ms', title: 'limit (ms)' },
              { field: 'result' },
            ],
          },
        },
      ],
    }),
  ];
}

/** What a search's result deserves: no answer, no upper bound, not converged, not stable. */
export function capacityFindings(r: Pick<SweepResult, 'capacity'>, plan: CapacityPlan): Finding[] {
  const c = r.capacity;
  if (!c) return [];
  const at = [plan.key];
  const fs: Finding[] = [];
  if (c.best === undefined)
    fs.push(
      finding('warning', 'capacity-none', `No probe met the SLOs, down to ${loadText(plan.key, plan.min)}`, at, {
        fix: `lower ${plan.key}.min, relax the SLOs, or check the failures above`,
      }),
    );
  else if (c.failAt === undefined)
    fs.push(
      finding(
        'info',
        'capacity-unbounded',
        `Every probe met the SLOs up to ${loadText(plan.key, plan.max)}: the capacity is at least that`,
        at,
        { fix: `raise ${plan.key}.max` },
      ),
    );
  else if (!c.converged)
    fs.push(
      finding(
        'warning',
        'capacity-not-converged',
        `The search stopped after ${c.probes} probes with the bracket ${loadText(plan.key, c.best)} – ${loadText(plan.key, c.failAt)} wider than the precision asked (${fmtNum(c.target * 100, 1)}%)`,
        at,
        { fix: 'raise max_probes, or start nearer the answer' },
      ),
    );
  if (c.confirm && !c.confirm.stable)
    fs.push(
      finding('warning', 'capacity-unstable', `The answer did not hold under a repeat: ${stabilityText(c)}`, at, {
        fix: 'lengthen each probe (more requests or a longer duration) or add repeats, so one probe is less noisy',
      }),
    );
  return fs;
}
