/**
 * Rules on KV-cache memory: a pool larger than the card, a pool far from the physics pool
 * (docs/physics.md, vLLM V1), and the GB/GiB slip — a number read in one unit and written in the other,
 * off by exactly 1e9/2^30 = 0.931 (or its inverse).
 */
import { finding, type Finding } from '../findings';
import { GB_IN_GIB, GiB, inUnit, type Quantity } from '../units';
import { bounds, gib, sameCell, setupRelated, setupWords, short } from './common';
import { measurementsOf, pathOf, type Measurement } from './measurements';
import type { CheckInput, CheckRule } from './types';

/** How close a ratio must be to 0.931 (or 1.074) to be named a GB/GiB slip. */
export const SLIP_BAND = 0.015;
/** A measured pool further than this from the physics pool is flagged. */
export const KV_POOL_TOLERANCE = 0.1;

/** 'GB→GiB' when `ratio` ≈ 0.931 (a GiB figure written in GB), 'GiB→GB' when ≈ 1.074, else undefined. */
export function gbGibSlip(ratio: number): 'written-in-GB' | 'written-in-GiB' | undefined {
  if (!(ratio > 0)) return undefined;
  if (Math.abs(ratio / GB_IN_GIB - 1) <= SLIP_BAND) return 'written-in-GB';
  if (Math.abs(ratio * GB_IN_GIB - 1) <= SLIP_BAND) return 'written-in-GiB';
  return undefined;
}

export const kvPoolLargerThanCard: CheckRule = {
  id: 'kv-pool-larger-than-card',
  summary: "A KV pool (tokens × KV bytes per token, or available KV bytes) larger than the card's memory",
  reads: [
    'record: kv_pool (tokens), available_kv (bytes)',
    'audit: pool_tokens | kv_pool_tokens, available_kv_gib | available_kv_bytes',
  ],
  codes: { 'kv-pool-larger-than-card': 'other card or KV dtype?' },
  check(input) {
    const setup = input.setup;
    if (!setup) return [];
    const b = bounds(setup);
    const mem = setup.gpu.memory;
    const out: Finding[] = [];
    for (const m of measurementsOf(input)) {
      const pool = m.v.kv_pool;
      if (pool !== undefined && pool * b.kvBytesPerToken > mem) {
        out.push(
          finding(
            'warning',
            'kv-pool-larger-than-card',
            `KV pool ${short(pool)} tokens${m.label} × ${short(b.kvBytesPerToken)} B per token (${setup.kvCache} KV) = ${gib(pool * b.kvBytesPerToken)}, more than the card's ${gib(mem)} on ${setup.gpu.id}.`,
            pathOf(m, 'kv_pool'),
            {
              cause:
                'A pool from another setup: several GPUs (tensor parallel) summed, an fp8 KV cache (half the bytes per token), a different model, or a typo.',
              fix: 'Check kv_cache and the GPU in the setup against the server; with tensor parallelism, compare per GPU.',
              related: setupRelated(input, `KV bytes per token ${short(b.kvBytesPerToken)} B and memory ${gib(mem)}`),
            },
          ),
        );
      }
      const avail = m.v.available_kv;
      if (avail !== undefined && avail > mem) {
        out.push(
          finding(
            'warning',
            'kv-pool-larger-than-card',
            `Available KV memory ${gib(avail)}${m.label} is more than the card's ${gib(mem)} on ${setup.gpu.id}.`,
            pathOf(m, 'available_kv'),
            {
              cause: 'A figure from another card, several GPUs summed, or a unit slip (TB for GB, MB for GiB).',
              fix: 'Copy "Available KV cache memory: … GiB" from the server log with its unit.',
              related: setupRelated(input, `Card memory ${gib(mem)}`),
            },
          ),
        );
      }
    }
    return out;
  },
};

/** The same number in the other unit, for the quick fix: 56.34 GB → "56.34 GiB". */
function swappedUnit(q: Quantity | undefined): string | undefined {
  if (!q) return undefined;
  const pairs: Record<string, [string, number]> = {
    GB: ['GiB', 1e9],
    GiB: ['GB', GiB],
    TB: ['TiB', 1e12],
    TiB: ['TB', 2 ** 40],
    MB: ['MiB', 1e6],
    MiB: ['MB', 2 ** 20],
  };
  const p = pairs[q.unit];
  if (!p) return undefined;
  return `${+(q.value / p[1]).toPrecision(10)} ${p[0]}`;
}

function slipFinding(
  input: CheckInput,
  m: Measurement,
  key: 'available_kv' | 'kv_pool',
  ratio: number,
  against: string,
  kind: 'written-in-GB' | 'written-in-GiB',
): Finding {
  const q = m.written[key];
  const other = swappedUnit(q);
  const intended = kind === 'written-in-GB' ? 'GiB' : 'GB';
  const used = kind === 'written-in-GB' ? 'GB' : 'GiB';
  const what =
    key === 'available_kv'
      ? `available_kv ${q && q.unit !== 'B' ? `${short(inUnit(q, q.unit))} ${q.unit}` : gib(m.v.available_kv!)}`
      : `KV pool ${short(m.v.kv_pool!)} tokens`;
  return finding(
    'warning',
    'gb-gib-slip',
    `${what}${m.label} is ${short(ratio)}× ${against}: exactly the ratio of ${kind === 'written-in-GB' ? 'GB to GiB (1e9 / 2^30 = 0.931)' : 'GiB to GB (2^30 / 1e9 = 1.074)'} — a number in ${intended} was taken as ${used}.`,
    pathOf(m, key),
    {
      cause: `GB (10^9 bytes) and GiB (2^30 bytes) mixed: vLLM logs GiB, data sheets say GB; the slip cost a real KV-pool prediction 10.5%.`,
      fix: other ? `write "${other}"` : `express the figure in ${intended}, as the source printed it`,
      related: setupRelated(input, `The physics pool`),
      ...(other ? { quickFix: { title: `Use ${other}`, edit: { path: pathOf(m, key), value: other } } } : {}),
    },
  );
}

export const kvPoolVsPhysics: CheckRule = {
  id: 'kv-pool-vs-physics',
  summary: 'KV pool or available KV memory far from the physics pool, or off by the GB/GiB ratio (the slip named)',
  reads: [
    'record: kv_pool (tokens), available_kv (bytes, as written)',
    'setup.server: gpu_memory_utilization, max_model_len',
  ],
  codes: {
    'kv-pool-far-from-physics': 'util or activations differ?',
    'gb-gib-slip': 'GB/GiB slip',
    'available-kv-impossible': 'impossible: another setup?',
  },
  check(input) {
    const setup = input.setup;
    if (!setup) return [];
    const b = bounds(setup);
    const p = b.pool;
    const out: Finding[] = [];
    const formula = `${short(p.gpu_memory_utilization)} × ${short(p.total_memory_bytes / GiB)} GiB − ${short(p.weights_bytes / GiB)} GiB weights − ${short((p.activation_peak_bytes + p.non_torch_bytes) / GiB)} GiB activations and non-torch = ${short(p.available_kv_gib)} GiB`;
    // The audit kind compares the log's pool itself; here only what a person typed.
    // The most any server could leave for KV: the whole card, minus the weights, nothing else.
    const physicalMax = setup.gpu.memory - p.weights_bytes;
    for (const m of measurementsOf(input).filter((x) => x.origin === 'record')) {
      const avail = m.v.available_kv;
      const pool = m.v.kv_pool;
      if (avail !== undefined && avail > physicalMax) {
        out.push(
          finding(
            'error',
            'available-kv-impossible',
            `available_kv ${gib(avail)}${m.label} is more than the card could ever leave for the KV cache: ${gib(setup.gpu.memory)} of memory − ${gib(p.weights_bytes)} of weights = ${gib(physicalMax)} at gpu_memory_utilization 1 with no activations. The number is impossible for ${setupWords(setup)}, not a unit slip.`,
            pathOf(m, 'available_kv'),
            {
              cause:
                'A figure from another setup: a larger card, several GPUs summed (vLLM prints it per worker), a smaller or more quantized model, or a typo.',
              fix: 'Copy "Available KV cache memory: … GiB" from this server\'s log, and check the gpu, model and weights in the setup.',
              related: setupRelated(input, `Card memory ${gib(setup.gpu.memory)}, weights ${gib(p.weights_bytes)}`),
            },
          ),
        );
        continue;
      }
      // The two typed numbers against each other: pool ≈ available / KV bytes per token.
      if (avail !== undefined && pool) {
        const r = avail / b.kvBytesPerToken / pool;
        const slip = gbGibSlip(r);
        if (slip) {
          const f = slipFinding(
            input,
            m,
            'available_kv',
            r,
            `what kv_pool ${short(pool)} tokens × ${short(b.kvBytesPerToken)} B per token needs (${gib(pool * b.kvBytesPerToken)})`,
            slip,
          );
          f.related = [sameCell(input, `kv_pool: ${short(pool)} tokens`, pathOf(m, 'kv_pool'))];
          out.push(f);
          continue;
        }
      }
      if (avail !== undefined && p.available_kv_bytes > 0) {
        const r = avail / p.available_kv_bytes;
        const slip = gbGibSlip(r);
        if (slip)
          out.push(slipFinding(input, m, 'available_kv', r, `the physics figure ${gib(p.available_kv_bytes)}`, slip));
        else if (Math.abs(r - 1) > KV_POOL_TOLERANCE)
          out.push(
            far(
              input,
              m,
              'available_kv',
              r,
              `available KV memory ${gib(avail)}`,
              `${gib(p.available_kv_bytes)} (${formula})`,
            ),
          );
      }
      if (pool !== undefined && p.pool_tokens > 0) {
        const r = pool / p.pool_tokens;
        const slip = gbGibSlip(r);
        if (slip)
          out.push(slipFinding(input, m, 'kv_pool', r, `the physics pool ${short(p.pool_tokens)} tokens`, slip));
        else if (Math.abs(r - 1) > KV_POOL_TOLERANCE)
          out.push(
            far(
              input,
              m,
              'kv_pool',
              r,
              `KV pool ${short(pool)} tokens`,
              `${short(p.pool_tokens)} tokens (${formula}, / ${short(b.kvBytesPerToken)} B per token)`,
            ),
          );
      }
    }
    return out;

    function far(
      input: CheckInput,
      m: Measurement,
      key: 'kv_pool' | 'available_kv',
      r: number,
      what: string,
      physics: string,
    ): Finding {
      return finding(
        'warning',
        'kv-pool-far-from-physics',
        `${what} is ${short(r)}× the physics pool for ${setupWords(setup!)}: ${physics}; more than ${short(KV_POOL_TOLERANCE * 100)}% apart.`,
        pathOf(m, key),
        {
          cause:
            'The server ran with other knobs than the setup says (gpu_memory_utilization, max_num_batched_tokens → activation peak, kv_cache dtype), another model or card, or the number was computed rather than read from the log.',
          fix: 'Put the server\'s gpu_memory_utilization and kv_cache in the setup, and copy "GPU KV cache size: … tokens" from the log.',
          related: setupRelated(input, 'The physics pool'),
        },
      );
    }
  },
};

export const MEMORY_RULES: CheckRule[] = [kvPoolLargerThanCard, kvPoolVsPhysics];
