/**
 * What a sweep's cross-checks (crosscheck.ts) say as lines of the run facts and table labels:
 * usage drift, retries, the server-counter cross-check, the load a point really had, the RTT
 * probe's reliability, and which time to first token is which. report.ts shows them; the findings
 * they deserve are check rules over the run's facts (checks/bench.ts).
 */
import { fmtNum } from '../units';
import type { CounterComparison } from './crosscheck';
import { FORMULAS } from './metrics';
import type { PointResult, SweepResult } from './sweep';

/** Usage that claims more tokens per text chunk than this is not believed silently. */
export const MAX_TOKENS_PER_CHUNK = 8;

const pct = (x: number) => `${x > 0 ? '+' : ''}${fmtNum(x * 100, 1)}%`;
const label = (p: Pick<PointResult, 'loop' | 'concurrency' | 'rate'>) =>
  p.loop === 'open' ? `${p.rate} req/s` : `c=${p.concurrency}`;

/** The load column: the concurrency, and the observed peak in flight when it fell short. */
export function loadLabel(p: PointResult): string {
  const base = label(p);
  const l = p.load;
  return l && p.loop === 'closed' && l.short ? `${base} (peak ${l.peak_in_flight})` : base;
}

/** The ok/sent column, with retries when there were any. */
export function doneLabel(p: PointResult): string {
  const m = p.metrics;
  const base = `${m.completed}/${m.completed + m.failed}`;
  return m.retried ? `${base} (${m.retried} retried)` : base;
}

/** The RTT sentence of the table note: quoted only when it can be inside the TTFTs below it. */
export function rttNote(r: Pick<SweepResult, 'rtt'>): string {
  const t = r.rtt;
  if (!t) return '';
  if (t.reliable === false) return `Network RTT not quoted: ${t.unreliable_reason ?? 'the probe is unreliable'}. `;
  return `network RTT ${fmtNum(t.median_ms, t.median_ms < 1 ? 3 : 1)} ms (median of ${t.n} TCP connects to ${t.path}); every TTFT below contains at least one. `;
}

/** The RTT line of the run facts. */
export function rttFact(r: Pick<SweepResult, 'rtt'>): string {
  const t = r.rtt;
  if (!t) return 'not measured';
  if (t.reliable === false) return `unreliable, not quoted: ${t.unreliable_reason}`;
  const d = (x: number) => fmtNum(x, x < 1 ? 3 : 1);
  return `${d(t.median_ms)} ms median, ${d(t.min_ms)} ms min (${t.n} TCP connects to ${t.path}, Nagle off)`;
}

/** "generation tokens 640 (server) vs 640 (client), equal" */
export const counterWords = (name: string, c: CounterComparison | undefined) =>
  c
    ? `${name} ${fmtNum(c.server, 0)} (server) vs ${fmtNum(c.client, 0)} (client)${c.diff === 0 ? ', equal' : `, ${c.diff > 0 ? '+' : ''}${fmtNum(c.diff, 0)} (${pct(c.client ? c.diff / c.client : 1)})`}`
    : undefined;

/** One line per point: the client's token totals against the server's counters. */
export function serverCounterFact(r: Pick<SweepResult, 'points' | 'telemetry'>): string {
  if (!r.telemetry) return 'no server token counters (/metrics of a known server not available)';
  const parts = r.points.map((p) => {
    const c = p.serverCounters;
    if (!c) return `${label(p)}: no counters`;
    const xs = [counterWords('generation tokens', c.generation), counterWords('prompt tokens', c.prompt)].filter(
      Boolean,
    );
    return `${label(p)}: ${xs.join('; ')}${c.agree ? ' ✓' : ' ✗'}`;
  });
  return `${r.telemetry.server} counters (Δ over each point, warm-up included) against the client's usage totals: ${parts.join(' · ')}`;
}

/** Extra lines for the run facts (report.ts runFacts). */
export function qualityFacts(r: SweepResult, input: number): [string, string][] {
  const out: [string, string][] = [];
  if (r.timeouts)
    out.push([
      'timeouts',
      `request ${fmtNum(r.timeouts.request_ms / 1000, 0)} s${r.timeouts.request_ms ? '' : ' (none)'}; stream idle ${fmtNum(r.timeouts.stream_idle_ms / 1000, 0)} s (no SSE event; comments and pings do not count) — "request_timeout:" and "timeout:" set them`,
    ]);
  if (r.vocab)
    out.push([
      'prompt token ids',
      r.vocab.source === 'server'
        ? `drawn from the server's vocabulary, ${r.vocab.size} (/v1/models meta.n_vocab)${r.vocab.server !== r.vocab.setup ? `; the setup's model has ${r.vocab.setup}` : ''}`
        : `drawn from the setup's model vocabulary, ${r.vocab.size}`,
    ]);
  const prompts = r.points.map((p) => p.usage?.prompt_tokens_mean).filter((x): x is number => x !== undefined);
  if (prompts.length)
    out.push([
      'prompt tokens (server usage)',
      `${fmtNum(prompts.reduce((a, b) => a + b, 0) / prompts.length, 1)} per request by usage.prompt_tokens, against ${input} sent`,
    ]);
  out.push(['server counter cross-check', serverCounterFact(r)]);
  if (r.points.some((p) => p.metrics.ttft_content_ms))
    out.push(['time to first token', `${FORMULAS.ttft}; ${FORMULAS.ttft_content}`]);
  return out;
}
