/**
 * Rules on how a bench run went, over the facts its run states (kinds/benchFacts.ts): requests
 * that failed or came back odd, a client that lagged or read chunks together, usage that drifts
 * from the request, server counters that disagree with the client, a point that never had its
 * load, prefix-cache contamination, the RTT probe, notes on the endpoint and a stop. Each finding
 * is made here, once; the bench only measures and states.
 */
import { compareCounts, countersAgree, DRIFT_TOLERANCE, loadCheck, promptDrift } from '../bench/crosscheck';
import { counterWords, MAX_TOKENS_PER_CHUNK } from '../bench/quality';
import { factsOf, lastFact, type Fact, type FactKind, type FactOf, type Point } from '../facts';
import { finding, type CellPath, type Finding } from '../findings';
import { fmtNum } from '../units';
import type { CheckInput, CheckRule } from './types';

/** "c=16" or "4 req/s": how the bench's table names a point. */
export function benchPointLabel(p: Point | undefined): string {
  return p?.loop === 'open' ? `${p.req_s} req/s` : `c=${p?.concurrency}`;
}

const signedPct = (x: number) => `${x > 0 ? '+' : ''}${fmtNum(x * 100, 1)}%`;

/** The facts of one kind a bench cell's run states, each with its point's label and path. */
function eachPoint<K extends FactKind>(
  input: CheckInput,
  kind: K,
  fn: (f: FactOf<K>, name: string, at: CellPath) => Finding | Finding[] | undefined,
): Finding[] {
  if (!input.kind.startsWith('bench')) return [];
  return factsOf(input.facts, kind).flatMap((f) => {
    const out = fn(f, benchPointLabel(f.point), f.at ?? []);
    return out === undefined ? [] : Array.isArray(out) ? out : [out];
  });
}

/** Error kinds a request that succeeded may carry: stream quirks, not failures. */
const QUIRKS = new Set(['missing-usage', 'no-done', 'bad-usage']);

export const benchNotes: CheckRule = {
  id: 'bench-note',
  summary: 'What a run noticed about its endpoint that is no number (GET /v1/models answered HTTP 404)',
  reads: ['note facts of a bench run'],
  codes: { 'bench-note': 'endpoint note' },
  check: (input) =>
    input.kind.startsWith('bench')
      ? factsOf(input.facts, 'note').map((f) => finding('info', 'bench-note', f.text, f.at ?? []))
      : [],
};

export const prefixCacheContaminated: CheckRule = {
  id: 'prefix-cache-contaminated',
  summary: "A point the server's prefix cache served: its TTFT measures cache hits, not prefill",
  reads: [
    'contamination facts of a bench point (Δ prefix-cache hit rate or cached-token share over the threshold)',
    'the seed fact',
  ],
  codes: { 'prefix-cache-contaminated': 'prefix-cache hit?' },
  check(input) {
    const seed = lastFact(input.facts, 'seed');
    const fixed = seed?.mode === 'fixed';
    const seedPath = seed?.at ?? ['seed'];
    return eachPoint(input, 'contamination', (f, name, at) =>
      finding(
        'warning',
        'prefix-cache-contaminated',
        `${name}: ${f.reason}. TTFT here measures cache hits, not prefill.`,
        at,
        {
          cause: fixed
            ? 'a fixed seed regenerates the same prompts at every point, so the server serves them from its prefix cache'
            : 'the server had already seen these prompts (another client, or a rerun with the same seeds)',
          fix: fixed
            ? 'write "seed: per-point", or start the server with prefix caching off (--no-enable-prefix-caching)'
            : 'rerun with a fresh base seed, or restart the server / turn prefix caching off',
          quickFix: fixed ? { title: 'Use per-point seeds', edit: { path: seedPath, value: 'per-point' } } : undefined,
        },
      ),
    );
  },
};

export const benchFailures: CheckRule = {
  id: 'bench-failures',
  summary: 'Requests of a point that failed, by error kind, with the first message',
  reads: ['requests facts of a bench point: sent, failed, errors by kind, first_error'],
  codes: { 'bench-failures': 'failed requests' },
  check: (input) =>
    eachPoint(input, 'requests', (f, name, at) => {
      if (f.failed <= 0) return undefined;
      const kinds = Object.entries(f.errors)
        .filter(([k]) => !QUIRKS.has(k))
        .map(([k, n]) => `${k} ×${n}`)
        .join(', ');
      const rate = f.sent ? f.failed / f.sent : 0;
      return finding(
        f.failed === f.sent ? 'error' : 'warning',
        'bench-failures',
        `${name}: ${f.failed} of ${f.sent} requests failed (${fmtNum(rate * 100, 1)}%): ${kinds}${f.first_error ? `. First: ${f.first_error}` : ''}`,
        at,
        {
          fix: f.errors.connect
            ? 'check that the server is running and the endpoint URL is right'
            : f.errors.timeout
              ? 'raise "timeout:" (no bytes for that long ends a request) or lower the load'
              : f.errors['rate-limited']
                ? 'lower the concurrency or rate; the server is shedding load (HTTP 429)'
                : undefined,
        },
      );
    }),
};

export const benchStreamQuirks: CheckRule = {
  id: 'bench-stream-quirks',
  summary: 'Streams that succeeded without a usage chunk or without [DONE]',
  reads: ["requests facts of a bench point: errors['missing-usage'], errors['no-done']"],
  codes: { 'bench-stream-quirks': 'stream quirk' },
  check: (input) =>
    eachPoint(input, 'requests', (f, name, at) => {
      const mu = f.errors['missing-usage'] ?? 0;
      const nd = f.errors['no-done'] ?? 0;
      if (!(mu + nd)) return undefined;
      return finding(
        'info',
        'bench-stream-quirks',
        `${name}: ${mu ? `${mu} stream(s) without a usage chunk (output tokens counted from chunks)` : ''}${mu && nd ? '; ' : ''}${nd ? `${nd} stream(s) without [DONE]` : ''}`,
        at,
      );
    }),
};

/** The client's event loop lagging more than this at p99 puts that much error in its latencies. */
export const LOOP_LAG_P99_MS = 20;

export const clientLoopLag: CheckRule = {
  id: 'client-loop-lag',
  summary: "The client's event loop lagged more than 20 ms at p99 during a point",
  reads: ['client-lag facts {metric: event-loop, stat: p99}'],
  codes: { 'client-loop-lag': 'client lag' },
  check: (input) =>
    eachPoint(input, 'client-lag', (f, name, at) =>
      f.metric === 'event-loop' && f.stat === 'p99' && f.ms > LOOP_LAG_P99_MS
        ? finding(
            'warning',
            'client-loop-lag',
            `${name}: the client's event loop lagged ${fmtNum(f.ms, 1)} ms at p99 during the point; latencies carry up to that much client error`,
            at,
            { fix: 'lower the concurrency, or run the bench from the CLI on a quieter machine' },
          )
        : undefined,
    ),
};

/** A share of gaps read together above this, over at least READ_BURST_MIN_GAPS gaps, is a finding. */
export const READ_BURST_SHARE = 0.05;
export const READ_BURST_MIN_GAPS = 50;

export const clientReadBursts: CheckRule = {
  id: 'client-read-bursts',
  summary: 'More than 5% of the gaps between chunks under 0.1 ms: the client read those chunks together',
  reads: ['read-bursts facts {share, gaps, under_ms} of a bench point'],
  codes: { 'client-read-bursts': 'client read bursts' },
  check: (input) =>
    eachPoint(input, 'read-bursts', (f, name, at) =>
      f.gaps >= READ_BURST_MIN_GAPS && f.share > READ_BURST_SHARE
        ? finding(
            'warning',
            'client-read-bursts',
            `${name}: ${fmtNum(f.share * 100, 1)}% of the gaps between chunks are under ${f.under_ms} ms: the client read those chunks together, in one socket read, so their ITL is the client's, not the server's (the low ITL quantiles and the median move with it)`,
            at,
            {
              cause:
                "the load thread fell behind its sockets (too many streams for the machine's cores, or other processes taking the CPU), or the server wrote several chunks at once",
              fix: 'run fewer streams per point, on a quieter machine, or from the CLI; INFLAB_BENCH_THREADS sets the number of load threads',
            },
          )
        : undefined,
    ),
};

/** Requests leaving later than this after their schedule (p99) are worth saying. */
export const DISPATCH_LAG_P99_MS = 10;

export const dispatchLag: CheckRule = {
  id: 'dispatch-lag',
  summary: 'Open-loop requests left more than 10 ms (p99) after their scheduled time',
  reads: ['client-lag facts {metric: dispatch, stat: p99}'],
  codes: { 'dispatch-lag': 'dispatch lag' },
  check: (input) =>
    eachPoint(input, 'client-lag', (f, name, at) =>
      f.metric === 'dispatch' && f.stat === 'p99' && f.ms > DISPATCH_LAG_P99_MS
        ? finding(
            'info',
            'dispatch-lag',
            `${name}: requests left up to ${fmtNum(f.ms, 1)} ms (p99) after their scheduled time; latencies count from the schedule, so this lag is in them`,
            at,
          )
        : undefined,
    ),
};

export const rttUnreliable: CheckRule = {
  id: 'rtt-unreliable',
  summary: 'The RTT probe exceeds a TTFT it should be inside, so it is not quoted',
  reads: ['rtt-probe facts {reliable: false, reason}'],
  codes: { 'rtt-unreliable': 'RTT probe' },
  check: (input) =>
    input.kind.startsWith('bench')
      ? factsOf(input.facts, 'rtt-probe')
          .filter((f) => !f.reliable)
          .map((f) =>
            finding('info', 'rtt-unreliable', `The network RTT probe is not quoted: ${f.reason}.`, f.at ?? [], {
              cause:
                'a TCP connect slower than a whole request means the probe met something the requests did not (a proxy, a busy accept queue)',
            }),
          )
      : [],
};

export const loadBelowConcurrency: CheckRule = {
  id: 'load-below-concurrency',
  summary:
    'A point that never had the load it is labelled with: fewer requests than its concurrency, or a peak in flight below it',
  reads: ['in-flight facts {peak, requests, concurrency} of a bench point (a request is in flight from its write)'],
  codes: {
    'load-below-concurrency': 'fewer requests than concurrency',
    'load-peak-short': 'client held less load',
  },
  check: (input) =>
    eachPoint(input, 'in-flight', (f, name, at) => {
      const l = loadCheck(f.concurrency, f.requests, f.peak);
      if (l.fewer_requests_than_concurrency)
        return finding(
          'warning',
          'load-below-concurrency',
          `${name}: only ${f.requests} requests, so at most ${f.requests} were ever in flight (peak observed ${f.peak}): this point measures concurrency ${f.peak}, not ${f.concurrency}`,
          at,
          { fix: `give at least ${f.concurrency} requests per point (4× the concurrency is the default)` },
        );
      // Closed loop only: an open loop's concurrency is a cap, not a load it promises.
      if (l.short && f.point?.loop === 'closed')
        return finding(
          'warning',
          'load-peak-short',
          `${name}: at most ${f.peak} requests were ever written to the server at once, not ${f.concurrency}: this point measures concurrency ${f.peak}`,
          at,
          {
            cause:
              'the client could not keep its requests in flight: fewer connections than the concurrency (the others waited for one), or a load thread that fell behind',
            fix: 'give the client a connection per request in flight, or run fewer streams per load thread',
          },
        );
      return undefined;
    }),
};

export const benchRetries: CheckRule = {
  id: 'bench-retries',
  summary: 'Requests sent a second time on a fresh connection (their first closed before any response byte)',
  reads: ['requests facts of a bench point: retried, sent, first_retry_error'],
  codes: { 'bench-retries': 'retried requests' },
  check: (input) =>
    eachPoint(input, 'requests', (f, name, at) =>
      f.retried
        ? finding(
            'info',
            'bench-retries',
            `${name}: ${f.retried} of ${f.sent} requests were sent a second time, on a fresh connection, after their first connection closed before any byte of a response${f.first_retry_error ? ` (first: ${f.first_retry_error})` : ''}; each counts from its first send, so its TCP connect is inside its TTFT`,
            at,
            {
              cause:
                "the server closes keep-alive connections (llama.cpp's server does after every streamed response, while advertising Keep-Alive), and a request was written on one as it closed",
            },
          )
        : undefined,
    ),
};

export const usageDrift: CheckRule = {
  id: 'usage-drift',
  summary:
    "The server's usage against the request and the chunks: prompt or output drift past 1%, implausible token counts, usage that is no count",
  reads: ['usage facts of a bench point'],
  codes: {
    'usage-prompt-drift': 'prompt length drift',
    'usage-output-drift': 'output length drift',
    'usage-implausible': 'usage implausible',
    'usage-not-a-count': 'usage not a count',
  },
  check: (input) =>
    eachPoint(input, 'usage', (u, name, at) => {
      const fs: Finding[] = [];
      if (u.with_usage > 0) {
        const drift = promptDrift(u.prompt_tokens_mean, u.prompt_tokens_requested);
        if (drift !== undefined && Math.abs(drift) > DRIFT_TOLERANCE)
          fs.push(
            finding(
              'warning',
              'usage-prompt-drift',
              `${name}: the server counted ${fmtNum(u.prompt_tokens_mean!, 1)} prompt tokens per request (usage.prompt_tokens, mean) against ${u.prompt_tokens_requested} sent (${signedPct(drift)}): the latencies are for prompts of that length`,
              at,
              {
                cause:
                  drift < 0
                    ? 'the server truncated the prompts (its context or slot is shorter than the prompt), or the ids were not one token each'
                    : 'a chat template (or BOS tokens) wraps every prompt, or text prompts tokenize to more tokens than words',
                fix:
                  drift < 0
                    ? "shorten input to fit the server's context, or raise the server's context size"
                    : 'use "api: completions" for exact prompt lengths, or set input to account for the template',
              },
            ),
          );
        if (u.output_mismatched > 0)
          fs.push(
            finding(
              'warning',
              'usage-output-drift',
              `${name}: ${u.output_mismatched} of ${u.with_usage} requests report usage.completion_tokens other than the ${u.output_tokens_requested} asked for (mean ${fmtNum(u.output_tokens_mean!, 1)}): TPOT and output throughput use the server's count`,
              at,
              { cause: 'the server ignores ignore_eos / min_tokens (the output stopped early), or it miscounts' },
            ),
          );
        if (u.fewer_tokens_than_chunks > 0 || (u.tokens_per_chunk ?? 0) > MAX_TOKENS_PER_CHUNK)
          fs.push(
            finding(
              'warning',
              'usage-implausible',
              `${name}: usage says ${fmtNum(u.tokens_per_chunk ?? 0, 2)} tokens per chunk of text${u.fewer_tokens_than_chunks ? ` (${u.fewer_tokens_than_chunks} requests claim fewer tokens than the chunks that came)` : ''}: each streamed chunk carries at least one token and rarely more than a few, so TPOT and output throughput, which use usage, are not to be trusted here`,
              at,
            ),
          );
      }
      if (u.bad_usage)
        fs.push(
          finding(
            'warning',
            'usage-not-a-count',
            `${name}: ${u.bad_usage} requests sent usage that is not a count (negative or fractional); their output tokens were counted from chunks`,
            at,
          ),
        );
      return fs;
    }),
};

const comparison = (c: { client_tokens: number; server_tokens: number } | undefined) =>
  c ? compareCounts(c.client_tokens, c.server_tokens) : undefined;

export const serverCountersDisagree: CheckRule = {
  id: 'server-counters-disagree',
  summary: "The server's token counters (Δ over a point) against the client's usage totals, off by more than 1%",
  reads: ['server-counters facts of a bench point'],
  codes: { 'server-counters-disagree': 'server counters differ' },
  check: (input) =>
    eachPoint(input, 'server-counters', (f, name, at) => {
      const generation = comparison(f.generation);
      const prompt = comparison(f.prompt);
      if (countersAgree(generation, prompt, f.prompt_counter)) return undefined;
      return finding(
        'warning',
        'server-counters-disagree',
        `${name}: the server's token counters do not match what the client counted: ${[counterWords('generation tokens', generation), counterWords('prompt tokens', prompt)].filter(Boolean).join('; ')}${f.unknown_requests ? ` (${f.unknown_requests} requests reported no usage)` : ''}`,
        at,
        {
          cause:
            'another client used the server during the point, or the server counts differently (a cached prefix, retries it saw twice)',
        },
      );
    }),
};

export const benchVocabulary: CheckRule = {
  id: 'bench-vocabulary',
  summary: "Requests that failed on the prompt's token ids: the setup's model is not the one served",
  reads: ['requests facts of a bench point: messages (a "vocab" error)', 'the vocab fact of the run'],
  codes: { 'bench-vocabulary': 'vocabulary mismatch' },
  check(input) {
    const v = lastFact(input.facts, 'vocab');
    return eachPoint(input, 'requests', (f, name, at) => {
      const err = f.messages?.find((x) => /vocab/i.test(x));
      if (!err) return undefined;
      return finding(
        'warning',
        'bench-vocabulary',
        `${name}: requests failed on the prompt's token ids (${err}): the ids are drawn for the ${v?.from === 'server' ? "server's" : "setup's"} vocabulary (${v?.size ?? '?'})`,
        at,
        { fix: 'name the model the server runs in the setup (its vocabulary bounds the ids)' },
      );
    });
  },
};

export const benchStopped: CheckRule = {
  id: 'bench-stopped',
  summary:
    'A sweep that ended before its last point: cancelled, stopped by its failure policy, or its load thread crashed',
  reads: ['the stopped fact of a bench run'],
  codes: {
    'bench-cancelled': 'cancelled',
    'bench-failure-policy': 'failure policy',
    'bench-crash': 'load thread crashed',
  },
  check: (input) =>
    input.kind.startsWith('bench')
      ? factsOf(input.facts, 'stopped').map((f: Fact & { kind: 'stopped' }) =>
          finding(f.reason === 'cancelled' ? 'info' : 'warning', `bench-${f.reason}`, f.message, f.at ?? []),
        )
      : [],
};

/** In the order the bench has always listed them. */
export const BENCH_RULES: CheckRule[] = [
  benchNotes,
  prefixCacheContaminated,
  benchFailures,
  benchStreamQuirks,
  clientLoopLag,
  clientReadBursts,
  dispatchLag,
  rttUnreliable,
  loadBelowConcurrency,
  benchRetries,
  usageDrift,
  serverCountersDisagree,
  benchVocabulary,
  benchStopped,
];
