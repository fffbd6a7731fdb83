/**
 * Rules on how a number was measured, from the real lab's lessons (PHYSICS.md): Little's law as a
 * check on the load generator, the fixed-seed prefix-cache trap, closed-loop p99 TTFT read as
 * capacity, a log heartbeat taken for a measurement, and a fused sampler that the requests never use.
 */
import { finding, type Finding, type RelatedInfo } from '../findings';
import { pct, sameCell, short, time } from './common';
import { isObj, measurementsOf, pathOf, samplerOf, type Measurement } from './measurements';
import type { CheckInput, CheckRule } from './types';

const isBench = (kind: string) => kind === 'bench' || kind.startsWith('bench:');

/** Little's law must close within this (the real sweep closed within 1% at every point). */
export const LITTLE_TOLERANCE = 0.05;

export const littlesLaw: CheckRule = {
  id: 'littles-law-closure',
  summary: "Little's law L = λ·W off by more than 5%: the load generator did not hold the load it claims",
  reads: [
    'record: concurrency (L), request_throughput or throughput in req/s (λ; else output_throughput / output), e2e mean (W)',
    'bench points: little_law | littles_law | little {lambda_w | predicted_in_flight, observed_in_flight, error | ratio}',
  ],
  codes: { 'littles-law-closure': 'load generator?' },
  check(input) {
    const out: Finding[] = [];
    for (const m of measurementsOf(input)) {
      let ratio: number | undefined;
      let detail = '';
      let related: RelatedInfo[] = [];
      if (m.origin === 'record') {
        const L = m.v.concurrency;
        const W = m.v.e2e;
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
          sameCell(input, `W = mean E2E ${time(W)}`, pathOf(m, 'e2e')),
        ];
      } else if (m.origin === 'bench') {
        const obs = m.v.little_observed;
        const pred = m.v.little_predicted;
        ratio = m.v.little_ratio ?? (obs && pred !== undefined ? pred / obs : undefined);
        if (ratio === undefined) continue;
        detail =
          pred !== undefined && obs !== undefined
            ? `λ·W = ${short(pred)} requests in flight, but the client observed ${short(obs)} on average`
            : `λ·W is ${short(ratio)}× the observed in-flight count`;
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

/** The numeric seed a bench cell fixes for every point, if it does. */
function fixedSeed(cell: Record<string, unknown>): number | undefined {
  const s = cell.seed;
  if (typeof s === 'number') return s;
  if (typeof s === 'string' && /^\d+$/.test(s.trim())) return Number(s);
  if (isObj(s) && s.mode === 'fixed' && typeof s.value === 'number') return s.value;
  if (isObj(s) && typeof s.fixed === 'number') return s.fixed;
  return undefined;
}

function listLen(v: unknown): number {
  return Array.isArray(v) ? v.length : v === undefined || v === null ? 0 : 1;
}

export const fixedSeedPrefixCache: CheckRule = {
  id: 'fixed-seed-prefix-cache',
  summary: 'One prompt seed for every sweep point against a prefix-cached server: later points hit the cache',
  reads: [
    'bench cell: seed (a number), concurrency | rate | request_rate lists, prefix_caching',
    'setup.server.prefix_caching (vLLM V1: on unless set false)',
  ],
  codes: { 'fixed-seed-prefix-cache': 'prefix-cache hit?' },
  check(input) {
    if (!isBench(input.kind) || !isObj(input.cell)) return [];
    const cell = input.cell;
    const seed = fixedSeed(cell);
    if (seed === undefined) return [];
    const points = listLen(cell.concurrency) + listLen(cell.rate) + listLen(cell.request_rate);
    if (points < 2) return [];
    const caching = cell.prefix_caching ?? input.setup?.server?.prefix_caching;
    if (caching === false) return [];
    const s = input.setup;
    return [
      finding(
        'warning',
        'fixed-seed-prefix-cache',
        `seed: ${seed} generates the same prompts at all ${points} sweep points, and the server caches prefixes${caching === true ? '' : ' (vLLM V1 does unless started with --no-enable-prefix-caching)'}: every point after the first is served from the prefix cache, and its TTFT and throughput measure cache hits, not prefill.`,
        ['seed'],
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
          quickFix: {
            title: 'Use a seed per sweep point (seed: per-point)',
            edit: { path: ['seed'], value: 'per-point' },
          },
        },
      ),
    ];
  },
};

/** p99 TTFT at or above this multiple of the median, under a closed loop, is the wave signature. */
export const WAVE_RATIO = 3;

export const closedLoopP99Capacity: CheckRule = {
  id: 'closed-loop-p99-capacity',
  summary: 'p99 TTFT from a closed loop read as capacity: with fixed lengths requests move in synchronized waves',
  reads: [
    'record: capacity, ttft_p99, concurrency | load: closed',
    'bench points: mode | concurrency, ttft p99 and median (ms)',
  ],
  codes: { 'closed-loop-p99-capacity': 'synchronized waves' },
  check(input) {
    const out: Finding[] = [];
    for (const m of measurementsOf(input)) {
      if (m.load !== 'closed') continue;
      const p99 = m.v.ttft_p99;
      if (p99 === undefined) continue;
      if (m.origin === 'record' && m.v.capacity !== undefined) {
        out.push(
          finding(
            'warning',
            'closed-loop-p99-capacity',
            `capacity ${short(m.v.capacity)} req/s is read from a closed loop${m.v.concurrency !== undefined ? ` (concurrency ${short(m.v.concurrency)})` : ''} and its p99 TTFT ${time(p99)}: a closed loop fixes the number in flight, not the arrival rate, and with fixed lengths its requests arrive in synchronized waves, so p99 TTFT measures the collisions of a wave, not what the server sustains.`,
            pathOf(m, 'capacity'),
            {
              cause:
                'Closed and open loop are different queueing systems: --max-concurrency fixes L; --request-rate fixes λ.',
              fix: 'Find capacity with an open-loop run (a bench cell with rate: [...], Poisson arrivals): the highest rate at which p99 TTFT meets the SLO. Say which loop ran next to every percentile.',
              related: [sameCell(input, `ttft_p99: ${time(p99)}`, pathOf(m, 'ttft_p99'))],
            },
          ),
        );
      } else if (m.origin === 'bench') {
        const p50 = m.v.ttft_p50;
        if (!p50 || (m.v.concurrency ?? 2) < 2 || p99 < WAVE_RATIO * p50) continue;
        out.push(
          finding(
            'info',
            'closed-loop-p99-capacity',
            `p99 TTFT ${time(p99)}${m.label} is ${short(p99 / p50)}× the median ${time(p50)} under a closed loop: requests of fixed length start and finish together, in synchronized waves, and the p99 measures the collisions of a wave, not capacity.`,
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

/** The latest earlier cell whose values name a sampler (an audit of the server log, a record). */
function samplerInNotebook(input: CheckInput): { sampler: string; cellIndex: number } | undefined {
  let best: { sampler: string; cellIndex: number } | undefined;
  for (const [i, r] of input.notebook.results) {
    if (i >= input.cellIndex) continue;
    const s = samplerOf(r.values);
    if (s && (!best || i > best.cellIndex)) best = { sampler: s, cellIndex: i };
  }
  return best;
}

export const fusedSamplerNotExercised: CheckRule = {
  id: 'fused-sampler-not-exercised',
  summary:
    'FlashInfer top-p/top-k sampler selected, but the benchmark requests set no top_p/top_k (or a request seed): they take the native path',
  reads: [
    'record: sampler, top_p, top_k, request_seed',
    'bench cell: top_p, top_k, request_seed (absent = the client sets them); bench values: request_params | sampling_params {top_p, top_k, seed}',
    'earlier results: sampler | sampler_backend (an audit of the server log)',
  ],
  codes: { 'fused-sampler-not-exercised': 'native sampler path' },
  check(input) {
    const out: Finding[] = [];
    const nbSampler = samplerInNotebook(input);
    const check = (
      m: Pick<Measurement, 'sampler' | 'sampling'>,
      fromCell: { top_p?: unknown; top_k?: unknown; seed?: unknown; absentMeansSet: boolean } | undefined,
      path: (string | number)[],
    ) => {
      const own = isFused(m.sampler);
      const selected = own
        ? { sampler: m.sampler!, cellIndex: input.cellIndex }
        : nbSampler && isFused(nbSampler.sampler)
          ? nbSampler
          : undefined;
      if (!selected || !fromCell) return;
      const pOff = fromCell.absentMeansSet && fromCell.top_p === undefined ? false : topPOff(fromCell.top_p);
      const kOff = fromCell.absentMeansSet && fromCell.top_k === undefined ? false : topKOff(fromCell.top_k);
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
    for (const m of measurementsOf(input)) {
      if (m.origin === 'record') {
        // A record says nothing about sampling unless it names the sampler or the request knobs.
        const speaks =
          !!m.sampler || !!m.sampling?.present || (m.sampling?.seed !== undefined && m.sampling?.seed !== false);
        if (!speaks || !m.sampling) continue;
        check(
          m,
          { top_p: m.sampling.top_p, top_k: m.sampling.top_k, seed: m.sampling.seed, absentMeansSet: false },
          m.sampler
            ? ['sampler']
            : m.sampling.present
              ? ['top_p' in (input.cell as object) ? 'top_p' : 'top_k']
              : ['request_seed'],
        );
      }
    }
    if (isBench(input.kind) && isObj(input.cell)) {
      const c = input.cell;
      const key = 'top_p' in c ? 'top_p' : 'top_k' in c ? 'top_k' : 'request_seed' in c ? 'request_seed' : undefined;
      const req = [input.values?.request_params, input.values?.sampling_params].find(isObj);
      // What the cell asks for (absent keys: the client sets top_p/top_k), else what the run sent.
      if (key) check({}, { top_p: c.top_p, top_k: c.top_k, seed: c.request_seed, absentMeansSet: true }, [key]);
      else if (req) check({}, { top_p: req.top_p, top_k: req.top_k, seed: req.seed, absentMeansSet: false }, []);
    }
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
