/**
 * Rules on latencies and rates that physics bounds: a TTFT below the prefill compute floor, a
 * TPOT or step below the decode step floor, a per-user rate above the bandwidth ceiling, an
 * aggregate above the compute roof, and a network RTT that is a large share of TTFT.
 */
import { finding, type CellPath, type Finding } from '../findings';
import { bounds, pct, sameCell, setupRelated, setupWords, short, time, type Bounds } from './common';
import { statQuantile, statWords } from '../facts';
import { central, latencies, measurementsOf, pathOf, type Latency, type MKey } from './measurements';
import type { CheckInput, CheckRule } from './types';

/** Stats at or below the median: where a time below a floor is impossible, not a tail. */
const atOrBelowMedian = (l: Latency) => l.stat === 'mean' || l.stat === 'min' || (statQuantile(l.stat) ?? 100) <= 50;

export const ttftBelowPrefillFloor: CheckRule = {
  id: 'ttft-below-prefill-floor',
  summary: 'TTFT below the prefill compute floor 2·params·prompt/peak: the prefix cache served it',
  reads: [
    'latency facts: ttft, any stat (a record: every stat it states; a point: its median, else its mean)',
    'tokens facts: prompt; prefix-hits facts',
  ],
  codes: { 'ttft-below-prefill-floor': 'prefix-cache hit?' },
  check(input) {
    const setup = input.setup;
    if (!setup) return [];
    const b = bounds(setup);
    const out: Finding[] = [];
    for (const m of measurementsOf(input)) {
      const prompt = m.v.prompt;
      if (!prompt || prompt <= 0) continue;
      const floor = b.prefillFloor(prompt);
      // For a measured or simulated point one finding is enough: its median (else mean) TTFT below the floor.
      const below = (l: Latency) => l.s < floor;
      const list =
        m.origin === 'record'
          ? latencies(m, 'ttft').filter(below)
          : [central(m, 'ttft')].filter((l): l is Latency => !!l && below(l));
      for (const l of list) {
        const t = l.s;
        const stat = statWords('ttft', l.stat);
        const hit = m.v.prefix_cache_hit_rate;
        out.push(
          finding(
            'warning',
            'ttft-below-prefill-floor',
            `${stat} ${time(t)}${m.label} is below the ${time(floor)} compute floor (2·params·tokens/peak) for a ${short(prompt)}-token prompt on ${setupWords(setup)}: no prefill of that prompt ran.`,
            l.path ?? m.at,
            {
              cause: `Prefix-cache hits: the prompt was already in the server's prefix cache (a fixed seed regenerates the same prompts at every sweep point)${hit !== undefined ? `; the recorded prefix-cache hit rate is ${pct(hit)}` : ''}.`,
              fix: 'Use per-point seeds (seed: per-point) or run the server with prefix caching off (--no-enable-prefix-caching), and check Δvllm:prefix_cache_hits / Δvllm:prefix_cache_queries for the point.',
              related: [
                ...setupRelated(
                  input,
                  `Floor ${time(floor)} = 2 × ${short(setup.model.params.total / 1e9)} B params × ${short(prompt)} tokens / ${short(b.peak / 1e12)} TFLOP/s`,
                ),
                ...(m.paths.prompt ? [sameCell(input, `prompt: ${short(prompt)} tokens`, m.paths.prompt)] : []),
              ],
            },
          ),
        );
      }
    }
    return out;
  },
};

export const belowDecodeFloor: CheckRule = {
  id: 'below-decode-floor',
  summary: 'TPOT or a decode step faster than reading the weights once: weight bytes / bandwidth',
  reads: ['latency facts: tpot and step, mean or a stat at or below the median (a point: the first below)'],
  codes: {
    'tpot-below-decode-floor': 'spec decode or wrong dtype?',
    'step-below-decode-floor': 'spec decode or wrong dtype?',
    'tpot-below-speculative-floor': 'faster than k + 1 tokens a step',
    'tpot-beats-speculative-acceptance': 'acceptance above the setup’s',
  },
  check(input) {
    const setup = input.setup;
    if (!setup) return [];
    const b = bounds(setup);
    const out: Finding[] = [];
    const spec = b.speculative;
    for (const m of measurementsOf(input)) {
      for (const metric of ['tpot', 'step'] as const) {
        const below = latencies(m, metric).filter((l) => atOrBelowMedian(l) && l.s < b.decodeFloor);
        for (const l of m.origin === 'record' ? below : below.slice(0, 1)) {
          const t = l.s;
          const label =
            metric === 'step' ? (l.stat === 'mean' ? 'Step time' : `Step time ${l.stat}`) : statWords('tpot', l.stat);
          // A speculative server's TPOT may beat the floor: by E on average, k + 1 at most (a step time may not).
          if (spec && metric === 'tpot') {
            const f = speculativeFinding(
              input,
              spec,
              b.decodeFloor,
              t,
              `${label} ${time(t)}${m.label}`,
              l.path ?? m.at,
            );
            if (f) out.push(f);
            continue;
          }
          const code = `${metric}-below-decode-floor`;
          out.push(
            finding(
              'warning',
              code,
              `${label} ${time(t)}${m.label} is below the ${time(b.decodeFloor)} decode step floor (weight bytes / bandwidth = ${short(b.weightBytes / 1e9)} GB / ${short(setup.gpu.bandwidth / 1e9)} GB/s): every decode step reads all the weights once.`,
              l.path ?? m.at,
              {
                cause: `Speculative decoding (a target step that accepts k draft tokens emits up to k + 1, so TPOT may fall to about floor / (k + 1): ${time(b.decodeFloor / 2)} at k = 1, ${time(b.decodeFloor / 5)} at k = 4), a wrong model (a smaller one served than the setup names), output tokens counted per chunk instead of from usage, or weights of another dtype (fp8 or int4 read fewer bytes).`,
                fix: `Check the served model and dtype against the setup (weights: ${setup.weights}); take output tokens from usage.completion_tokens; TPOT = (E2E − TTFT) / (output − 1).`,
                related: setupRelated(
                  input,
                  `Floor ${time(b.decodeFloor)} = ${short(b.weightBytes / 1e9)} GB of ${setup.weights} weights / ${short(setup.gpu.bandwidth / 1e9)} GB/s`,
                ),
              },
            ),
          );
        }
      }
    }
    return out;
  },
};

/**
 * A TPOT under the decode floor on a speculative server (setup `speculative: {k, acceptance}`):
 * below floor / (k + 1) no acceptance explains it (a warning); between that and floor / E the
 * server accepted more than the setup says (information); above floor / E it is what speculation
 * buys (no finding).
 */
function speculativeFinding(
  input: CheckInput,
  spec: NonNullable<Bounds['speculative']>,
  floor: number,
  t: number,
  what: string,
  path: CellPath,
): Finding | undefined {
  const related = setupRelated(input, `speculative: k = ${spec.k}`, ['speculative']);
  if (t < spec.hardFloor)
    return finding(
      'warning',
      'tpot-below-speculative-floor',
      `${what} is below ${time(spec.hardFloor)}, the decode floor ${time(floor)} / (k + 1 = ${spec.k + 1}): even a step that accepted every one of its ${spec.k} draft tokens emits only ${spec.k + 1}.`,
      path,
      {
        cause:
          'A wrong model (a smaller one served than the setup names), output tokens counted per chunk instead of from usage, weights of another dtype, or more draft tokens than the setup says.',
        fix: `Check the served model, dtype and num_speculative_tokens against the setup (speculative: {k: ${spec.k}}); take output tokens from usage.completion_tokens.`,
        related,
      },
    );
  if (spec.expectedFloor !== undefined && t < spec.expectedFloor)
    return finding(
      'info',
      'tpot-beats-speculative-acceptance',
      `${what} is below ${time(spec.expectedFloor)}, the decode floor ${time(floor)} / ${short(spec.tokensPerStep!)} expected tokens per step: the drafts were accepted more often than the setup's acceptance says.`,
      path,
      {
        cause:
          "The workload's acceptance is higher than the setup states (repetitive or easy text, a draft closer to the target).",
        fix: 'Measure it: Δvllm:spec_decode_num_accepted_tokens_total / Δvllm:spec_decode_num_draft_tokens_total over the point (the bench shows it), and write that acceptance in the setup.',
        related,
      },
    );
  return undefined;
}

export const perUserAboveCeiling: CheckRule = {
  id: 'per-user-above-bandwidth-ceiling',
  summary: 'One stream decoding faster than bandwidth / weight bytes (batch-1 decode above the ceiling)',
  reads: ['record: per_user; throughput (tok/s) or output_throughput when batch: 1 or concurrency: 1'],
  codes: { 'per-user-above-bandwidth-ceiling': 'not one stream?' },
  check(input) {
    const setup = input.setup;
    if (!setup) return [];
    const b = bounds(setup);
    const out: Finding[] = [];
    for (const m of measurementsOf(input)) {
      const single = m.v.batch === 1 || m.v.concurrency === 1;
      const keys: MKey[] = [
        'per_user',
        ...(single && m.origin === 'record' ? (['throughput', 'output_throughput'] as MKey[]) : []),
      ];
      for (const k of keys) {
        const r = m.v[k];
        if (r === undefined || !(r > b.ceiling)) continue;
        out.push(
          finding(
            'warning',
            'per-user-above-bandwidth-ceiling',
            `${k === 'per_user' ? 'Per-user decode' : 'Batch-1 decode'} ${short(r)} tok/s${m.label} is above the ${short(b.ceiling)} tok/s ceiling (bandwidth / weight bytes = ${short(setup.gpu.bandwidth / 1e9)} GB/s / ${short(b.weightBytes / 1e9)} GB) for ${setupWords(setup)}.`,
            pathOf(m, k),
            {
              cause:
                'The rate is not one stream decoding: several streams summed, prompt tokens counted, speculative decoding, or a smaller or quantized model than the setup names.',
              fix: 'Per-user tok/s = 1 / TPOT of one stream; check that the served model and dtype match the setup.',
              related: setupRelated(
                input,
                `Ceiling ${short(b.ceiling)} tok/s = 1 / ${time(b.decodeFloor)} decode step floor`,
              ),
            },
          ),
        );
      }
    }
    return out;
  },
};

export const aboveComputeRoof: CheckRule = {
  id: 'aggregate-above-compute-roof',
  summary: 'Tokens per second above peak / (2·params): more tokens than the GPU can compute',
  reads: [
    'record: throughput (tok/s), output_throughput, total_throughput',
    'bench points: output_throughput, total_token_throughput',
  ],
  codes: { 'aggregate-above-compute-roof': 'cached or summed tokens?' },
  check(input) {
    const setup = input.setup;
    if (!setup) return [];
    const b = bounds(setup);
    const out: Finding[] = [];
    for (const m of measurementsOf(input)) {
      for (const k of ['throughput', 'output_throughput', 'total_throughput'] as MKey[]) {
        const r = m.v[k];
        if (r === undefined || !(r > b.computeRoof)) continue;
        out.push(
          finding(
            'warning',
            'aggregate-above-compute-roof',
            `${k === 'total_throughput' ? 'Total-token throughput' : k === 'output_throughput' ? 'Output throughput' : 'Throughput'} ${short(r)} tok/s${m.label} is above the ${short(b.computeRoof)} tok/s compute roof (peak / (2·params) = ${short(b.peak / 1e12)} TFLOP/s / (2 × ${short(setup.model.params.active / 1e9)} B)) for ${setupWords(setup)}.`,
            pathOf(m, k),
            {
              cause:
                'Tokens this GPU did not compute: prompt tokens served from the prefix cache counted as processed, several GPUs or replicas summed, or a setup that does not match the server.',
              fix: 'Count only output tokens (or subtract cached prompt tokens), per GPU; check the setup against the server.',
              related: setupRelated(input, `Roof ${short(b.computeRoof)} tok/s = peak / (2·params)`),
            },
          ),
        );
      }
    }
    return out;
  },
};

/** RTT at or above this share of TTFT is flagged. */
export const RTT_SHARE = 0.2;

export const rttShareOfTtft: CheckRule = {
  id: 'rtt-share-of-ttft',
  summary: 'Network round trip a large share of TTFT: the benchmark measures the network',
  reads: ['latency facts: rtt (any stat), ttft mean, else median'],
  codes: { 'rtt-share-of-ttft': 'network RTT' },
  check(input) {
    const out: Finding[] = [];
    for (const m of measurementsOf(input)) {
      const r = latencies(m, 'rtt')[0];
      const tl = latencies(m, 'ttft').find((l) => l.stat === 'mean') ?? central(m, 'ttft');
      if (!r || !tl) continue;
      const rtt = r.s;
      const ttft = tl.s;
      if (!(ttft > 0) || rtt / ttft < RTT_SHARE) continue;
      out.push(
        finding(
          'warning',
          'rtt-share-of-ttft',
          `Network RTT ${time(rtt)} is ${pct(rtt / ttft)} of the ${time(ttft)} TTFT${m.label}: this TTFT measures the network as much as the server (more than ${pct(RTT_SHARE)}).`,
          r.path ?? m.at,
          {
            cause:
              'The client benchmarks from far away: every request pays at least one round trip before its first token.',
            fix: 'Run the client next to the server (same machine or region), or report TTFT with the RTT beside it and compare server-side TTFT (vllm:time_to_first_token_seconds).',
            related: tl.path ? [sameCell(input, `ttft: ${time(ttft)}`, tl.path)] : [],
          },
        ),
      );
    }
    return out;
  },
};

export const LATENCY_RULES: CheckRule[] = [
  ttftBelowPrefillFloor,
  belowDecodeFloor,
  perUserAboveCeiling,
  aboveComputeRoof,
  rttShareOfTtft,
];
