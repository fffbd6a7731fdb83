/**
 * Why a measured point misses its prediction, named from the evidence the run stated as facts. Each
 * cause is a rule: which quantity it moves and which way, and the evidence that must be there for
 * it to be named. A gap no rule explains is said to be unexplained, never guessed.
 *
 *   prefix-cache hits    server /metrics (Δhits/Δqueries): prefills skipped → TTFT below, tok/s above
 *   queueing             the client's dispatch lag (open loop), the server's waiting requests → TTFT above
 *   preemptions          vllm:num_preemptions Δ above the prediction's → TPOT, ITL tail above, tok/s below
 *   client-bound         the load thread's event-loop lag → every latency above, tok/s below
 *   simulator late       InfLab's simulator's own lateness counters → latencies above, tok/s below
 *   token drift          usage.prompt_tokens against the prompt sent → TTFT and tok/s move with it
 *   output shortfall     usage.completion_tokens below max_tokens (EOS) → tok/s below
 *   step overhead        a TPOT gap of about the same ms at every point → TPOT, ITL median, tok/s
 *   prefill speed        a TTFT gap with no cache or queue to explain it → prefill MFU
 *   prefill interference ITL p99 / median far past the prediction's → prefills stalling decode steps
 */
import type { FactOf } from '../facts';
import { fmtNum } from '../units';
import { clientLagMs, engineValue, latencyMs, prefixHits, usageOf, type PointView } from './points';

export type QuantityId = 'output_throughput' | 'ttft.p50' | 'tpot.p50' | 'itl.p99';

export interface CauseContext {
  q: QuantityId;
  /** Measured against predicted. */
  dir: 'above' | 'below';
  m: PointView;
  p?: PointView;
  /** Every measured point with its prediction, for causes that read the shape of the gap. */
  pairs: { m: PointView; p?: PointView }[];
  params: Map<string, FactOf<'parameter'>>;
  tolerance: number;
}

export interface Cause {
  code: string;
  words: string;
}

interface Rule {
  code: string;
  explain(c: CauseContext): string | undefined;
}

const pct = (x: number) => `${fmtNum(100 * x, x < 0.1 ? 1 : 0)}%`;
const ms = (x: number) => `${fmtNum(x, Math.abs(x) < 10 ? 2 : 1)} ms`;
const signed = (x: number) => `${x >= 0 ? '+' : '−'}${ms(Math.abs(x))}`;

/** A share of prompt tokens served from the cache above this, beyond the prediction's, is a cause. */
export const HIT_MARGIN = 0.05;
/** Client event-loop lag p99 past this (ms) bounds the latencies' accuracy (the bench's own warning). */
export const CLIENT_LAG_MS = 20;
/** Dispatch lag p99 past this (ms) is queueing in the client (the bench's own note). */
export const DISPATCH_LAG_MS = 10;
/** Token drift past this (relative) is a cause. */
export const DRIFT = 0.01;
/** A share of the simulator's steps more than 10 ms late past this is a cause. */
export const SIM_LATE_SHARE = 0.05;

const RULES: Rule[] = [
  {
    code: 'prefix-cache-hits',
    explain(c) {
      const m = prefixHits(c.m);
      if (!m) return undefined;
      const p = prefixHits(c.p)?.rate ?? 0;
      if (m.rate - p <= HIT_MARGIN) return undefined;
      const moves = (c.q === 'ttft.p50' && c.dir === 'below') || (c.q === 'output_throughput' && c.dir === 'above');
      if (!moves) return undefined;
      return `prefix-cache hits: ${pct(m.rate)} of prompt tokens cached (${m.source ?? 'server'}), ${pct(p)} predicted`;
    },
  },
  {
    code: 'queueing',
    explain(c) {
      if (c.q !== 'ttft.p50' || c.dir !== 'above') return undefined;
      const parts: string[] = [];
      const lag = clientLagMs(c.m, 'dispatch', 'p99');
      if (lag !== undefined && lag > DISPATCH_LAG_MS) parts.push(`requests left ${ms(lag)} late (dispatch lag p99)`);
      const waiting = engineValue(c.m, 'waiting_peak');
      if (waiting !== undefined && waiting >= 1) parts.push(`${fmtNum(waiting, 0)} waiting in the server at peak`);
      return parts.length ? `queueing: ${parts.join('; ')}` : undefined;
    },
  },
  {
    code: 'preemptions',
    explain(c) {
      const n = engineValue(c.m, 'preemptions');
      const p = engineValue(c.p, 'preemptions') ?? 0;
      if (n === undefined || n <= p) return undefined;
      const moves = c.q === 'output_throughput' ? c.dir === 'below' : c.dir === 'above';
      if (!moves) return undefined;
      return `preemptions: ${fmtNum(n, 0)} (${fmtNum(p, 0)} predicted)`;
    },
  },
  {
    code: 'client-bound',
    explain(c) {
      const lag = clientLagMs(c.m, 'event-loop', 'p99');
      if (lag === undefined || lag <= CLIENT_LAG_MS) return undefined;
      const moves = c.q === 'output_throughput' ? c.dir === 'below' : c.dir === 'above';
      if (!moves) return undefined;
      return `client-bound: event-loop lag p99 ${ms(lag)}`;
    },
  },
  {
    code: 'simulator-late',
    explain(c) {
      const late = engineValue(c.m, 'sim_late_share');
      if (late === undefined || late <= SIM_LATE_SHARE) return undefined;
      const moves = c.q === 'output_throughput' ? c.dir === 'below' : c.dir === 'above';
      if (!moves) return undefined;
      return `simulator late: ${pct(late)} of its steps > 10 ms late`;
    },
  },
  {
    code: 'token-drift',
    explain(c) {
      const u = usageOf(c.m);
      if (!u || u.prompt_tokens_mean === undefined || !(u.prompt_tokens_requested > 0)) return undefined;
      const d = u.prompt_tokens_mean / u.prompt_tokens_requested - 1;
      if (Math.abs(d) <= DRIFT) return undefined;
      const moves =
        (c.q === 'ttft.p50' && d > 0 === (c.dir === 'above')) ||
        (c.q === 'output_throughput' && d > 0 === (c.dir === 'below'));
      if (!moves) return undefined;
      return `token drift: ${fmtNum(u.prompt_tokens_mean, 1)} prompt tokens counted per request, ${fmtNum(u.prompt_tokens_requested, 0)} sent (${d > 0 ? '+' : ''}${pct(d)})`;
    },
  },
  {
    code: 'output-shortfall',
    explain(c) {
      const u = usageOf(c.m);
      if (!u || u.output_tokens_mean === undefined || !(u.output_tokens_requested > 0)) return undefined;
      const d = u.output_tokens_mean / u.output_tokens_requested - 1;
      if (d >= -DRIFT) return undefined;
      if (!(c.q === 'output_throughput' && c.dir === 'below')) return undefined;
      return `output shortfall: ${fmtNum(u.output_tokens_mean, 1)} of ${fmtNum(u.output_tokens_requested, 0)} tokens on average${u.output_mismatched ? ` (${fmtNum(u.output_mismatched, 0)} of ${fmtNum(u.with_usage, 0)} requests short)` : ''}`;
    },
  },
  {
    code: 'step-overhead',
    explain(c) {
      if (c.q === 'ttft.p50' || c.q === 'itl.p99') return undefined;
      const gaps = c.pairs
        .map(({ m, p }) => {
          const a = latencyMs(m, 'tpot', 'p50');
          const b = latencyMs(p, 'tpot', 'p50');
          return a !== undefined && b !== undefined && b > 0 ? { d: a - b, r: a / b } : undefined;
        })
        .filter((x): x is { d: number; r: number } => !!x);
      const a = latencyMs(c.m, 'tpot', 'p50');
      const b = latencyMs(c.p, 'tpot', 'p50');
      if (a === undefined || b === undefined || !(b > 0)) return undefined;
      const here = a - b;
      // The TPOT gap must itself be real, and on the side that moves this quantity.
      if (Math.abs(a / b - 1) <= c.tolerance / 2) return undefined;
      const slower = here > 0;
      const moves = c.q === 'output_throughput' ? slower === (c.dir === 'below') : slower === (c.dir === 'above');
      if (!moves) return undefined;
      const assumed = c.params.get('step_overhead');
      const same =
        gaps.length >= 2 &&
        gaps.every((g) => Math.sign(g.d) === Math.sign(here)) &&
        Math.max(...gaps.map((g) => Math.abs(g.d))) <= 1.5 * Math.min(...gaps.map((g) => Math.abs(g.d)));
      return `step overhead: TPOT ${signed(here)} per token${assumed ? ` (model: ${ms(assumed.value * 1e3)} per step)` : ''}${same ? `, the same at every point (${gaps.map((g) => signed(g.d)).join(', ')}) → calibrate:` : ''}`;
    },
  },
  {
    code: 'prefill-speed',
    explain(c) {
      if (c.q !== 'ttft.p50') return undefined;
      // Named only when neither the cache nor a queue is there to explain a TTFT gap.
      const hits = (prefixHits(c.m)?.rate ?? 0) - (prefixHits(c.p)?.rate ?? 0);
      if (hits > HIT_MARGIN) return undefined;
      if (c.dir === 'above' && (engineValue(c.m, 'waiting_peak') ?? 0) >= 1 && c.m.x > 1) return undefined;
      const a = latencyMs(c.m, 'ttft', 'p50');
      const b = latencyMs(c.p, 'ttft', 'p50');
      if (a === undefined || b === undefined) return undefined;
      const mfu = c.params.get('prefill_mfu');
      return `prefill speed: TTFT ${signed(a - b)} with no cache hit or queue${mfu ? ` (model: prefill_mfu ${fmtNum(mfu.value, 2)})` : ''} → calibrate:`;
    },
  },
  {
    code: 'prefill-interference',
    explain(c) {
      if (c.q !== 'itl.p99' && c.q !== 'tpot.p50') return undefined;
      const tail = (v: PointView | undefined) => {
        const p99 = latencyMs(v, 'itl', 'p99');
        const p50 = latencyMs(v, 'itl', 'p50');
        return p99 !== undefined && p50 !== undefined && p50 > 0 ? p99 / p50 : undefined;
      };
      const tm = tail(c.m);
      const tp = tail(c.p);
      if (tm === undefined || tp === undefined) return undefined;
      if (c.dir === 'above' ? tm <= 1.5 * tp : tm >= tp / 1.5) return undefined;
      return `prefill interference: ITL p99 ${fmtNum(tm, 1)}× its median (${fmtNum(tp, 1)}× predicted)`;
    },
  },
];

/** The causes the evidence names for one quantity's gap at one point (none when the evidence is silent). */
export function causesFor(c: CauseContext): Cause[] {
  const out: Cause[] = [];
  for (const r of RULES) {
    const words = r.explain(c);
    if (words) out.push({ code: r.code, words });
  }
  return out;
}

/** Every cause code, for documentation and tests. */
export const CAUSE_CODES = RULES.map((r) => r.code);

/** What each cause means, for the note under a verdict table (only the causes it names). */
export const CAUSE_MEANING: Record<string, string> = {
  'prefix-cache-hits':
    'the server served prompt tokens from its prefix cache, so those prefills were skipped (a fixed seed, or prompts it had seen)',
  queueing: "requests waited before they ran: in the client (sent after their scheduled time) or in the server's queue",
  preemptions: 'the KV pool ran out and requests were preempted; each recomputes its prefill',
  'client-bound': "the load generator's own event loop ran late, so its timestamps and its next requests came late",
  'simulator-late':
    'the simulated server handed out its steps late on its own clock (a loaded machine), which stretches what the client measures',
  'token-drift': 'the server counted another prompt length than the bench sent (tokenization, a chat template)',
  'output-shortfall': 'requests stopped before max_tokens (EOS), so a larger share of the time went to prefills',
  'step-overhead':
    'a per-step cost (scheduler, sampler, launches) other than the model assumes; a TPOT gap of the same ms at every point is one',
  'prefill-speed': 'the prefill ran at another fraction of the peak than the model assumes (prefill_mfu)',
  'prefill-interference':
    'prefills packed into decode steps stall the running streams more (or less) than the model has',
};
