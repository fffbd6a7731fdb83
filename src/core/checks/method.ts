/**
 * Rules on how a number was measured, from the real lab's lessons (docs/physics.md): Little's law as a
 * check on the load generator, the fixed-seed prefix-cache trap, closed-loop p99 TTFT read as
 * capacity, a log heartbeat taken for a measurement, and a fused sampler that the requests never use.
 */
import { finding, type Finding, type RelatedInfo } from '../findings';
import { pct, sameCell, short, time } from './common';
import { factsOf } from '../facts';
import { central, latency, measurementsOf, pathOf, tail, type Measurement } from './measurements';
import type { CheckInput, CheckRule } from './types';

/** Little's law must close within this (the real sweep closed within 1% at every point). */
export const LITTLE_TOLERANCE = 0.05;
/** Fewer completed requests than this at a point cannot test the closure. */
export const LITTLE_MIN_REQUESTS = 20;

export const littlesLaw: CheckRule = {
  id: 'littles-law-closure',
  summary: "Little's law L = λ·W off by more than 5%: the load generator did not hold the load it claims",
  reads: [
    'record: concurrency (L), request_throughput or throughput in req/s (λ; else output_throughput / output), e2e mean (W)',
    'little facts {predicted = λ·W, observed in flight, requests} of a measured or simulated point (20 requests or more)',
  ],
  codes: { 'littles-law-closure': 'load generator?' },
  check(input) {
    const out: Finding[] = [];
    for (const m of measurementsOf(input)) {
      let ratio: number | undefined;
      let detail: string;
      let related: RelatedInfo[] = [];
      if (m.origin === 'record') {
        const L = m.v.concurrency;
        const W = latency(m, 'e2e', 'mean')?.s;
        const lambda =
          m.v.request_throughput ??
          (m.v.output_throughput && m.v.output ? m.v.output_throughput / m.v.output : undefined);
        if (!L || !W || !lambda) continue;
        ratio = (lambda * W) / L;
        detail = `λ·W = ${short(lambda)} req/s × ${time(W)} = ${short(lambda * W)} requests in flight, but concurrency is ${short(L)}`;
        related = [
          sameCell(
            input,
            `λ = ${short(lambda)} req/s`,
            m.paths.request_throughput ?? m.paths.output_throughput ?? m.at,
          ),
          sameCell(input, `W = mean E2E ${time(W)}`, latency(m, 'e2e', 'mean')?.path ?? m.at),
        ];
      } else {
        const obs = m.v.little_observed;
        const pred = m.v.little_predicted;
        // A handful of requests cannot test the closure: ramp-up and drain dominate.
        if (!obs || pred === undefined || (m.v.little_requests ?? Infinity) < LITTLE_MIN_REQUESTS) continue;
        ratio = pred / obs;
        detail = `λ·W = ${short(pred)} requests in flight, but ${m.origin === 'predict' ? 'the simulated engine held' : 'the client observed'} ${short(obs)} on average`;
      }
      if (ratio === undefined || !Number.isFinite(ratio) || Math.abs(ratio - 1) <= LITTLE_TOLERANCE) continue;
      out.push(
        finding(
          'warning',
          'littles-law-closure',
          `Little's law does not close${m.label}: ${detail} (ratio ${short(ratio)}, more than ${pct(LITTLE_TOLERANCE)} off).`,
          m.origin === 'record' ? pathOf(m, 'concurrency') : m.at,
          {
            cause:
              'The load generator, not the server: a client that could not keep the requests in flight (event-loop lag, a connection-pool limit, dispatch lag), or λ and W taken over different windows or requests (warm-up in one, a long drain in the other).',
            fix: "Check the client's dispatch lag and connection limit; compute λ (completed / duration) and W (mean E2E) over the same requests; run enough requests per point that ramp-up and drain are small.",
            related,
          },
        ),
      );
    }
    return out;
  },
};

export const fixedSeedPrefixCache: CheckRule = {
  id: 'fixed-seed-prefix-cache',
  summary: 'One prompt seed for every sweep point against a prefix-cached server: later points hit the cache',
  reads: [
    'seed facts {mode: fixed, value, points, prefix_caching} (a bench or serving cell states one)',
    'setup.server.prefix_caching (vLLM V1: on unless set false)',
  ],
  codes: { 'fixed-seed-prefix-cache': 'prefix-cache hit?' },
  check(input) {
    return factsOf(input.facts, 'seed').flatMap((f) => {
      if (f.mode !== 'fixed' || f.value === undefined) return [];
      const seed = f.value;
      const points = f.points ?? 0;
      if (points < 2) return [];
      const caching = f.prefix_caching ?? input.setup?.server?.prefix_caching;
      if (caching === false) return [];
      const s = input.setup;
      const path = f.at ?? [];
      return [
        finding(
          'warning',
          'fixed-seed-prefix-cache',
          `seed: ${seed} generates the same prompts at all ${points} sweep points, and the server caches prefixes${caching === true ? '' : ' (vLLM V1 does unless started with --no-enable-prefix-caching)'}: every point after the first is served from the prefix cache, and its TTFT and throughput measure cache hits, not prefill.`,
          path,
          {
            cause:
              'The prefix-cache trap: in the real lab a 1,000-token prompt showed a 23 ms TTFT, below the 52.5 ms prefill floor, because a fixed seed regenerated the prompts of earlier points.',
            fix: 'seed: per-point (each point its own prompts), or set prefix_caching: false in the setup and start the server with --no-enable-prefix-caching.',
            related: s
              ? [
                  {
                    message: `Setup "${s.name}": prefix_caching ${caching === true ? 'true' : 'not set (on by default in vLLM V1)'}`,
                    cellIndex: s.cellIndex ?? input.cellIndex,
                    path: caching === true ? ['prefix_caching'] : ['setup'],
                  },
                ]
              : [],
            quickFix: path.length
              ? { title: 'Use a seed per sweep point (seed: per-point)', edit: { path, value: 'per-point' } }
              : undefined,
          },
        ),
      ];
    });
  },
};

/** p99 TTFT at or above this multiple of the median, under a closed loop, is the wave signature. */
export const WAVE_RATIO = 3;

export const closedLoopP99Capacity: CheckRule = {
  id: 'closed-loop-p99-capacity',
  summary: 'p99 TTFT from a closed loop read as capacity: with fixed lengths requests move in synchronized waves',
  reads: [
    'record: capacity, a ttft tail stat (p90 or above), concurrency | load: closed',
    'points of a closed loop: ttft tail (its highest stat at or above p90) and median',
  ],
  codes: { 'closed-loop-p99-capacity': 'synchronized waves' },
  check(input) {
    const out: Finding[] = [];
    for (const m of measurementsOf(input)) {
      if (m.loop !== 'closed') continue;
      const t = tail(m, 'ttft');
      if (!t) continue;
      const p99 = t.s;
      const tailWords = `${t.stat} TTFT`;
      if (m.origin === 'record' && m.v.capacity !== undefined) {
        out.push(
          finding(
            'warning',
            'closed-loop-p99-capacity',
            `capacity ${short(m.v.capacity)} req/s is read from a closed loop${m.v.concurrency !== undefined ? ` (concurrency ${short(m.v.concurrency)})` : ''} and its ${tailWords} ${time(p99)}: a closed loop fixes the number in flight, not the arrival rate, and with fixed lengths its requests arrive in synchronized waves, so ${tailWords} measures the collisions of a wave, not what the server sustains.`,
            pathOf(m, 'capacity'),
            {
              cause:
                'Closed and open loop are different queueing systems: --max-concurrency fixes L; --request-rate fixes λ.',
              fix: 'Find capacity with an open-loop run (a bench cell with rate: [...], Poisson arrivals): the highest rate at which p99 TTFT meets the SLO. Say which loop ran next to every percentile.',
              related: [sameCell(input, `ttft_${t.stat}: ${time(p99)}`, t.path ?? m.at)],
            },
          ),
        );
      } else if (m.origin === 'bench') {
        const p50 = central(m, 'ttft')?.s;
        if (!p50 || (m.v.concurrency ?? 2) < 2 || p99 < WAVE_RATIO * p50) continue;
        out.push(
          finding(
            'info',
            'closed-loop-p99-capacity',
            `${tailWords} ${time(p99)}${m.label} is ${short(p99 / p50)}× the median ${time(p50)} under a closed loop: requests of fixed length start and finish together, in synchronized waves, and the ${t.stat} measures the collisions of a wave, not capacity.`,
            m.at,
            {
              cause:
                'A closed loop (fixed concurrency) with fixed input and output lengths refills its slots in bursts.',
              fix: 'Read capacity from an open-loop run (rate: [...]), and label this percentile "closed loop, concurrency N".',
            },
          ),
        );
      }
    }
    return out;
  },
};

export const HEARTBEAT_SOURCE =
  /\blogs?\b|heartbeat|avg (generation|prompt) throughput|stats? line|loggers\.py|metrics\.py/i;

export const heartbeatThroughput: CheckRule = {
  id: 'heartbeat-throughput',
  summary: "A throughput taken from the vLLM log's periodic 'Avg generation throughput' line",
  reads: [
    'record: source (text: "log", "heartbeat", "Avg generation throughput" …), throughput, output_throughput, total_throughput, per_user',
  ],
  codes: { 'heartbeat-throughput': 'heartbeat average?' },
  check(input) {
    const out: Finding[] = [];
    for (const m of measurementsOf(input)) {
      if (m.origin !== 'record' || !m.source || !HEARTBEAT_SOURCE.test(m.source)) continue;
      for (const k of ['throughput', 'output_throughput', 'total_throughput', 'per_user'] as const) {
        const r = m.v[k];
        if (r === undefined) continue;
        out.push(
          finding(
            'warning',
            'heartbeat-throughput',
            `${k} ${short(r)} tok/s comes from the server log (source: ${m.source}): vLLM's "Avg generation throughput" is a heartbeat averaged over 10-second wall-clock windows that include idle time, not a measurement of the run (it showed 58.8 tok/s for a run that really did 88.4).`,
            pathOf(m, k),
            {
              cause:
                'Heartbeat is not instrument: the log window does not line up with the run and counts idle seconds.',
              fix: 'Measure on the client: output tokens / run wall time (a bench cell), or from the per-request records; if the log is all there is, average only windows that lie wholly inside the run.',
              related: [sameCell(input, `source: ${m.source}`, ['source'])],
            },
          ),
        );
      }
    }
    return out;
  },
};

/** Does this top_p / top_k leave the fused top-p/top-k sampler unused? */
function topPOff(v: unknown): boolean {
  return (
    v === undefined ||
    v === null ||
    v === false ||
    (typeof v === 'string' && /^(none|null|off|no)$/i.test(v)) ||
    (typeof v === 'number' && v >= 1)
  );
}
function topKOff(v: unknown): boolean {
  return (
    v === undefined ||
    v === null ||
    v === false ||
    (typeof v === 'string' && /^(none|null|off|no)$/i.test(v)) ||
    (typeof v === 'number' && v <= 0)
  );
}
const isFused = (s: string | undefined) => !!s && /flashinfer/i.test(s) && !/fall.?back|native|not available/i.test(s);

/** The latest earlier cell whose facts name a sampler (an audit of the server log, a record). */
function samplerInNotebook(input: CheckInput): { sampler: string; cellIndex: number } | undefined {
  let best: { sampler: string; cellIndex: number } | undefined;
  for (const [i, r] of input.notebook.results) {
    if (i >= input.cellIndex) continue;
    const s = factsOf(r.facts, 'sampling').find((f) => f.sampler)?.sampler;
    if (s && (!best || i > best.cellIndex)) best = { sampler: s, cellIndex: i };
  }
  return best;
}

export const fusedSamplerNotExercised: CheckRule = {
  id: 'fused-sampler-not-exercised',
  summary:
    'FlashInfer top-p/top-k sampler selected, but the benchmark requests set no top_p/top_k (or a request seed): they take the native path',
  reads: [
    'sampling facts: sampler, top_p, top_k, request_seed (a record, or the requests a bench cell sends)',
    'earlier results: a sampling fact naming the sampler (an audit of the server log)',
  ],
  codes: { 'fused-sampler-not-exercised': 'native sampler path' },
  check(input) {
    const out: Finding[] = [];
    const nbSampler = samplerInNotebook(input);
    const check = (
      m: Pick<Measurement, 'sampler' | 'sampling'>,
      fromCell: { top_p?: unknown; top_k?: unknown; seed?: unknown } | undefined,
      path: (string | number)[],
    ) => {
      const own = isFused(m.sampler);
      const selected = own
        ? { sampler: m.sampler!, cellIndex: input.cellIndex }
        : nbSampler && isFused(nbSampler.sampler)
          ? nbSampler
          : undefined;
      if (!selected || !fromCell) return;
      const pOff = topPOff(fromCell.top_p);
      const kOff = topKOff(fromCell.top_k);
      const seeded = fromCell.seed !== undefined && fromCell.seed !== null && fromCell.seed !== false;
      if (!(pOff && kOff) && !seeded) return;
      const why = seeded ? 'the requests carry a per-request seed' : 'the requests set no top_p/top_k filtering';
      out.push(
        finding(
          'warning',
          'fused-sampler-not-exercised',
          `The server selected the fused FlashInfer top-p/top-k sampler ("${selected.sampler}"), but ${why}: vLLM then silently takes the native sampling path, and this benchmark does not measure the sampler the server advertises.`,
          path,
          {
            cause:
              'Selected is not executed: the FlashInfer sampler runs only for requests with top_p/top_k set and no request-level seed.',
            fix: "Set top_p and top_k in the benchmark requests (e.g. top_p: 0.95, top_k: 50) and send no request-level seed (the prompt generator's seed stays on the client).",
            related: [
              {
                message: `sampler: ${selected.sampler}`,
                cellIndex: selected.cellIndex,
                path: selected.cellIndex === input.cellIndex ? ['sampler'] : [],
              },
            ],
          },
        ),
      );
    };
    // A record says nothing about sampling unless it names the sampler or the request knobs; a bench
    // cell's requests always carry its top_p/top_k (the client's defaults when the cell leaves them out).
    const m = measurementsOf(input).find((x) => (x.origin === 'record' || x.origin === 'bench') && x.sampling);
    if (m?.sampling) check(m, m.sampling, m.sampling.path ?? []);
    return out;
  },
};

export const METHOD_RULES: CheckRule[] = [
  littlesLaw,
  fixedSeedPrefixCache,
  closedLoopP99Capacity,
  heartbeatThroughput,
  fusedSamplerNotExercised,
];
