/**
 * What a sweep's cross-checks (crosscheck.ts) say, as findings and as lines of the run facts:
 * usage drift, retries, the server-counter cross-check, the load a point really had, the RTT
 * probe's reliability, and which time to first token is which. report.ts shows them.
 */
import { finding, type CellPath, type Finding } from '../findings';
import { fmtNum } from '../units';
import { DRIFT_TOLERANCE, type CounterComparison } from './crosscheck';
import { FORMULAS } from './metrics';
import type { PointResult, SweepResult } from './sweep';

/** Usage that claims more tokens per text chunk than this is not believed silently. */
export const MAX_TOKENS_PER_CHUNK = 8;

const pct = (x: number) => `${x > 0 ? '+' : ''}${fmtNum(x * 100, 1)}%`;
const label = (p: Pick<PointResult, 'mode' | 'concurrency' | 'rate'>) =>
  p.mode === 'open' ? `${p.rate} req/s` : `c=${p.concurrency}`;

/** The load column: the concurrency, and the observed peak in flight when it fell short. */
export function loadLabel(p: PointResult): string {
  const base = label(p);
  const l = p.load;
  return l && p.mode === 'closed' && l.short ? `${base} (peak ${l.peak_in_flight})` : base;
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

const cmp = (name: string, c: CounterComparison | undefined) =>
  c
    ? `${name} ${fmtNum(c.server, 0)} (server) vs ${fmtNum(c.client, 0)} (client)${c.diff === 0 ? ', equal' : `, ${c.diff > 0 ? '+' : ''}${fmtNum(c.diff, 0)} (${pct(c.client ? c.diff / c.client : 1)})`}`
    : undefined;

/** One line per point: the client's token totals against the server's counters. */
export function serverCounterFact(r: Pick<SweepResult, 'points' | 'telemetry'>): string {
  if (!r.telemetry) return 'no server token counters (/metrics of a known server not available)';
  const parts = r.points.map((p) => {
    const c = p.serverCounters;
    if (!c) return `${label(p)}: no counters`;
    const xs = [cmp('generation tokens', c.generation), cmp('prompt tokens', c.prompt)].filter(Boolean);
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

/** Findings from the cross-checks. `at(i)` is the path of point i in the cell. */
export function qualityFindings(r: SweepResult, at: (i: number) => CellPath): Finding[] {
  const fs: Finding[] = [];
  if (r.rtt?.reliable === false)
    fs.push(
      finding('info', 'rtt-unreliable', `The network RTT probe is not quoted: ${r.rtt.unreliable_reason}.`, [], {
        cause:
          'a TCP connect slower than a whole request means the probe met something the requests did not (a proxy, a busy accept queue)',
      }),
    );
  for (const p of r.points) {
    const m = p.metrics;
    const name = label(p);
    const l = p.load;
    if (l?.fewer_requests_than_concurrency)
      fs.push(
        finding(
          'warning',
          'load-below-concurrency',
          `${name}: only ${l.requests} requests, so at most ${l.requests} were ever in flight (peak observed ${l.peak_in_flight}): this point measures concurrency ${l.peak_in_flight}, not ${l.concurrency}`,
          at(p.index),
          { fix: `give at least ${l.concurrency} requests per point (4× the concurrency is the default)` },
        ),
      );
    if (m.retried) {
      const first = p.records?.retry_error?.find((x) => x);
      fs.push(
        finding(
          'info',
          'bench-retries',
          `${name}: ${m.retried} of ${m.completed + m.failed} requests were sent a second time, on a fresh connection, after their first connection closed before any byte of a response${first ? ` (first: ${first})` : ''}; each counts from its first send, so its TCP connect is inside its TTFT`,
          at(p.index),
          {
            cause:
              "the server closes keep-alive connections (llama.cpp's server does after every streamed response, while advertising Keep-Alive), and a request was written on one as it closed",
          },
        ),
      );
    }
    const u = p.usage;
    if (u && u.with_usage > 0) {
      if (u.prompt_drift !== undefined && Math.abs(u.prompt_drift) > DRIFT_TOLERANCE)
        fs.push(
          finding(
            'warning',
            'usage-prompt-drift',
            `${name}: the server counted ${fmtNum(u.prompt_tokens_mean!, 1)} prompt tokens per request (usage.prompt_tokens, mean) against ${u.requested_input} sent (${pct(u.prompt_drift)}): the latencies are for prompts of that length`,
            at(p.index),
            {
              cause:
                u.prompt_drift < 0
                  ? 'the server truncated the prompts (its context or slot is shorter than the prompt), or the ids were not one token each'
                  : 'a chat template (or BOS tokens) wraps every prompt, or text prompts tokenize to more tokens than words',
              fix:
                u.prompt_drift < 0
                  ? "shorten input to fit the server's context, or raise the server's context size"
                  : 'use "api: completions" for exact prompt lengths, or set input to account for the template',
            },
          ),
        );
      if (u.completion_mismatch > 0)
        fs.push(
          finding(
            'warning',
            'usage-output-drift',
            `${name}: ${u.completion_mismatch} of ${u.with_usage} requests report usage.completion_tokens other than the ${u.requested_output} asked for (mean ${fmtNum(u.completion_tokens_mean!, 1)}): TPOT and output throughput use the server's count`,
            at(p.index),
            {
              cause: 'the server ignores ignore_eos / min_tokens (the output stopped early), or it miscounts',
            },
          ),
        );
      if (u.fewer_tokens_than_chunks > 0 || (u.tokens_per_chunk ?? 0) > MAX_TOKENS_PER_CHUNK)
        fs.push(
          finding(
            'warning',
            'usage-implausible',
            `${name}: usage says ${fmtNum(u.tokens_per_chunk ?? 0, 2)} tokens per chunk of text${u.fewer_tokens_than_chunks ? ` (${u.fewer_tokens_than_chunks} requests claim fewer tokens than the chunks that came)` : ''}: each streamed chunk carries at least one token and rarely more than a few, so TPOT and output throughput, which use usage, are not to be trusted here`,
            at(p.index),
          ),
        );
    }
    if (u?.bad_usage)
      fs.push(
        finding(
          'warning',
          'usage-not-a-count',
          `${name}: ${u.bad_usage} requests sent usage that is not a count (negative or fractional); their output tokens were counted from chunks`,
          at(p.index),
        ),
      );
    const c = p.serverCounters;
    if (c && !c.agree)
      fs.push(
        finding(
          'warning',
          'server-counters-disagree',
          `${name}: the server's token counters do not match what the client counted: ${[cmp('generation tokens', c.generation), cmp('prompt tokens', c.prompt)].filter(Boolean).join('; ')}${c.unknown_requests ? ` (${c.unknown_requests} requests reported no usage)` : ''}`,
          at(p.index),
          {
            cause:
              'another client used the server during the point, or the server counts differently (a cached prefix, retries it saw twice)',
          },
        ),
      );
    const vocabErr = p.records?.error_message.find((x) => x && /vocab/i.test(x));
    if (vocabErr)
      fs.push(
        finding(
          'warning',
          'bench-vocabulary',
          `${name}: requests failed on the prompt's token ids (${vocabErr}): the ids are drawn for the ${r.vocab?.source === 'server' ? "server's" : "setup's"} vocabulary (${r.vocab?.size ?? '?'})`,
          at(p.index),
          { fix: 'name the model the server runs in the setup (its vocabulary bounds the ids)' },
        ),
      );
  }
  return fs;
}
