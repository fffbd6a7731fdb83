/**
 * Cross-checks a point's numbers get before anyone reads them: the server's usage against what the
 * bench asked for and against the chunks that came (usage drift), the client's token totals against
 * the server's own counters, the load the point really had (peak in flight against the concurrency
 * it is labelled with), and whether the RTT probe can be quoted beside the TTFT. Pure functions.
 */
import type { WarmupTotals } from './loadgen';
import type { RequestRecord } from './metrics';
import type { ServerEvidence } from './prometheus';
import type { TelemetryDialect } from './telemetry';

/** A relative difference past this is a finding (usage against the request, client against server). */
export const DRIFT_TOLERANCE = 0.01;

export interface UsageCheck {
  /** Completed requests, and those of them whose usage the server sent. */
  requests: number;
  with_usage: number;
  requested_input: number;
  /** Mean usage.prompt_tokens, and its relative difference from the requested input. */
  prompt_tokens_mean?: number;
  prompt_drift?: number;
  requested_output: number;
  completion_tokens_mean?: number;
  /** Requests whose usage.completion_tokens differs from the requested output (min_tokens = max_tokens). */
  completion_mismatch: number;
  /** Requests whose usage claims fewer tokens than the chunks of text that came (each carries at least one). */
  fewer_tokens_than_chunks: number;
  /** Σ completion_tokens / Σ text chunks over requests with usage (1 when each chunk is one token). */
  tokens_per_chunk?: number;
  /** Requests whose usage was not a count (negative, fractional): their output was counted from chunks. */
  bad_usage: number;
}

/** Mean usage.prompt_tokens against the prompt sent, relative (−0.5: half the tokens arrived). */
export function promptDrift(mean: number | undefined, requested: number): number | undefined {
  return mean === undefined || requested <= 0 ? undefined : mean / requested - 1;
}

export function usageCheck(records: RequestRecord[], input: number, output: number): UsageCheck {
  const ok = records.filter((r) => r.ok);
  const withUsage = ok.filter((r) => r.errorKind !== 'missing-usage' && r.errorKind !== 'bad-usage');
  const prompts = withUsage.filter((r) => r.promptTokens !== undefined).map((r) => r.promptTokens!);
  const outs = withUsage.filter((r) => r.outputTokens !== undefined);
  const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : undefined);
  const pm = mean(prompts);
  // A workload plan's per-request lengths, where it set them; else the point's.
  const wantIn = mean(withUsage.filter((r) => r.promptTokens !== undefined).map((r) => r.requestedInput ?? input));
  const wantOut = (r: RequestRecord) => r.requestedOutput ?? output;
  let tok = 0;
  let chunks = 0;
  for (const r of outs) {
    tok += r.outputTokens!;
    chunks += r.chunkMs.length;
  }
  return {
    requests: ok.length,
    with_usage: withUsage.length,
    requested_input: wantIn ?? input,
    prompt_tokens_mean: pm,
    prompt_drift: promptDrift(pm, wantIn ?? input),
    requested_output: mean(outs.map(wantOut)) ?? output,
    completion_tokens_mean: mean(outs.map((r) => r.outputTokens!)),
    completion_mismatch: outs.filter((r) => r.outputTokens !== wantOut(r)).length,
    fewer_tokens_than_chunks: outs.filter((r) => r.outputTokens! < r.chunkMs.length).length,
    tokens_per_chunk: chunks ? tok / chunks : undefined,
    bad_usage: ok.filter((r) => r.errorKind === 'bad-usage').length,
  };
}

export interface CounterComparison {
  client: number;
  server: number;
  /** server − client */
  diff: number;
  /** |diff| / client (0 when both are 0) */
  rel: number;
}

export interface ServerCounterCheck {
  server: string;
  dialect: TelemetryDialect['id'];
  /** What the server's prompt counter counts ('processed': a prefix served from its cache is not). */
  prompt_counter: TelemetryDialect['promptCounter'];
  prompt?: CounterComparison;
  generation?: CounterComparison;
  /** Requests (warm-up included) that reached the server without reporting usage: their tokens are unknown to the client. */
  unknown_requests: number;
  /** Every compared counter within DRIFT_TOLERANCE (a 'processed' prompt counter may be lower, never higher). */
  agree: boolean;
}

export const compareCounts = (client: number, server: number): CounterComparison => ({
  client,
  server,
  diff: server - client,
  rel: client ? Math.abs(server - client) / client : server ? Infinity : 0,
});

/**
 * The client's token totals over everything it sent during the point (warm-up included: the
 * server counts it too) against the server's counters' Δ over the same span.
 */
export function serverCounterCheck(
  records: RequestRecord[],
  warmup: WarmupTotals,
  ev: ServerEvidence | undefined,
  dialect: TelemetryDialect | undefined,
): ServerCounterCheck | undefined {
  if (!ev || !dialect || (ev.prompt_tokens_delta === undefined && ev.generation_tokens_delta === undefined))
    return undefined;
  let prompt = warmup.promptTokens;
  let gen = warmup.outputTokens;
  let unknown = warmup.unknown;
  for (const r of records) {
    const usage = r.ok && r.errorKind !== 'missing-usage' && r.errorKind !== 'bad-usage';
    if (usage && r.promptTokens !== undefined && r.outputTokens !== undefined) {
      prompt += r.promptTokens;
      gen += r.outputTokens;
    } else if (r.httpStatus === undefined || r.httpStatus === 200) {
      // A stream that started (or a request that failed after its connection was up) without usage.
      if (r.chunkMs.length || r.errorKind !== 'connect') unknown++;
    }
  }
  const c: ServerCounterCheck = {
    server: dialect.server,
    dialect: dialect.id,
    prompt_counter: dialect.promptCounter,
    unknown_requests: unknown,
    agree: true,
  };
  if (ev.prompt_tokens_delta !== undefined) c.prompt = compareCounts(prompt, ev.prompt_tokens_delta);
  if (ev.generation_tokens_delta !== undefined) c.generation = compareCounts(gen, ev.generation_tokens_delta);
  c.agree = countersAgree(c.generation, c.prompt, dialect.promptCounter);
  return c;
}

/**
 * Every compared counter within DRIFT_TOLERANCE (and more than 2 tokens apart to count); a prompt
 * counter that counts only processed tokens may be lower than the client's total, never higher.
 */
export function countersAgree(
  generation: CounterComparison | undefined,
  prompt: CounterComparison | undefined,
  promptCounter: TelemetryDialect['promptCounter'],
): boolean {
  const off = (x: CounterComparison | undefined, lowerOk: boolean) =>
    !!x && x.rel > DRIFT_TOLERANCE && Math.abs(x.diff) > 2 && !(lowerOk && x.diff < 0);
  return !off(generation, false) && !off(prompt, promptCounter === 'processed');
}

export interface LoadCheck {
  /** The concurrency the point is labelled with (closed loop) or its cap (open loop). */
  concurrency?: number;
  requests: number;
  /** Most requests the client had in flight at once (split across load threads: the sum of their peaks). */
  peak_in_flight: number;
  /** The point never reached its concurrency. */
  short: boolean;
  /** Fewer requests than the concurrency: the label cannot be met at all. */
  fewer_requests_than_concurrency: boolean;
}

export function loadCheck(concurrency: number | undefined, requests: number, peak: number): LoadCheck {
  return {
    concurrency,
    requests,
    peak_in_flight: peak,
    short: concurrency !== undefined && peak < concurrency,
    fewer_requests_than_concurrency: concurrency !== undefined && requests < concurrency,
  };
}

export interface RttVerdict {
  reliable: boolean;
  /** Why not: the probe exceeds the smallest median TTFT it would be inside. */
  reason?: string;
}

/** An RTT probe above a point's median TTFT cannot be inside that TTFT: it measured something else. */
export function rttVerdict(rttMedianMs: number, ttftMedians: number[]): RttVerdict {
  const finite = ttftMedians.filter((x) => Number.isFinite(x));
  if (!finite.length) return { reliable: true };
  const lo = Math.min(...finite);
  if (rttMedianMs > lo)
    return {
      reliable: false,
      reason: `the probe (${rttMedianMs.toFixed(2)} ms) is above the lowest median TTFT (${lo.toFixed(2)} ms) it should be inside`,
    };
  return { reliable: true };
}
