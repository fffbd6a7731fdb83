/**
 * `setup: NAME` — the GPU, model, dtypes and endpoint for the cells after it. The same keys stand
 * inline in any cell to override the setup for that cell alone (applySetupOverrides).
 */
import * as path from 'node:path';
import { z } from 'zod';
import { speculativeSetupSchema } from './speculativeKeys';
import { COST_FORMULA, priceSchema, priceWords, setupPricePerHour } from '../cost';
import {
  DTYPES,
  findGpu,
  findModel,
  GPUS,
  MODELS,
  WIDE_PARTS,
  type Dtype,
  type Gpu,
  type ModelSpec,
  type WidePart,
} from '../catalog';
import { hfConfigSchema, modelFromHfConfig } from '../catalog/hfConfig';
import { lookupFile, type FileCache, type FileNeed } from '../engine/files';
import { factsOutput } from '../engine/outputs';
import { setupFact } from '../facts/make';
import { gpuCounts, parallelOf, parallelWords, setupWeightsResident, weightsBytes } from '../physics';
import { quantity, suggestions, zodFindings } from '../engine/schema';
import type { KindModule, Setup } from '../engine/types';
import { finding, type Finding } from '../findings';
import { decimalCardSize, fmtBytes, fmtIn, fmtNum, GB, GiB } from '../units';
import { credentialRefusal, redactUrlsIn } from '../urls';

/** Where an endpoint's key goes instead of its URL, on either host. */
export const KEY_HINT =
  'set its key with "InfLab: Set API Key" in the editor, or INFLAB_API_KEYS="http://host:8000=KEY" for the CLI';

export const SETUP_KEYS = [
  'gpu',
  'model',
  'weights',
  'kv_cache',
  'endpoint',
  'tensor_parallel',
  'pipeline_parallel',
  'data_parallel',
  'unquantized',
  'price',
] as const;

/** What a quantized checkpoint keeps at 16 bits unless the setup says otherwise (as releases ship). */
export const DEFAULT_UNQUANTIZED: WidePart[] = [...WIDE_PARTS];

const parallelDegree = z
  .number({ error: 'write a whole number of GPUs, e.g. 4' })
  .int('write a whole number of GPUs, e.g. 4')
  .min(1, 'at least 1')
  .max(1024, 'at most 1,024');

const unquantizedSchema = z.union([
  z.literal('none').transform((): WidePart[] => []),
  z.enum(WIDE_PARTS as [WidePart, ...WidePart[]]).transform((p) => [p]),
  z.array(z.enum(WIDE_PARTS as [WidePart, ...WidePart[]])),
]);

const gpuObject = z
  .object({
    base: z.string().optional(),
    name: z.string().optional(),
    bandwidth: quantity('bandwidth', { positive: true }).optional(),
    memory: quantity('bytes', { positive: true }).optional(),
    bf16: quantity('compute', { positive: true }).optional(),
    fp16: quantity('compute', { positive: true }).optional(),
    fp8: quantity('compute', { positive: true }).optional(),
    int8: quantity('compute', { positive: true }).optional(),
    int4: quantity('compute', { positive: true }).optional(),
    /** GPU-to-GPU link: bandwidth one direction, and the fixed time of one small all-reduce. */
    link_bandwidth: quantity('bandwidth', { positive: true }).optional(),
    link_latency: quantity('time', { min: 0 }).optional(),
  })
  .strict();

const modelObject = z.object({ config: z.string().min(1), name: z.string().optional() }).strict();
const dtype = z.enum(DTYPES as [Dtype, ...Dtype[]]);
const endpointSchema = z.union([z.literal('sim'), z.url({ protocol: /^https?$/ })]);

/** A host:port without a scheme gets the URL to write instead. */
function endpointMessage(v: unknown): string {
  const s = typeof v === 'string' ? v.trim() : '';
  if (s && !/^[a-z][a-z0-9+.-]*:\/\//i.test(s) && /^[\w.[\]:-]+(\/.*)?$/.test(s))
    return `endpoint "${s}" has no scheme: write "http://${s}" (or "sim")`;
  return 'endpoint must be "sim" or an http(s) URL such as http://localhost:8000';
}

export function applySetupOverrides(
  base: Setup | undefined,
  keys: Record<string, unknown>,
  dir: string,
  name: string,
  /** A setup cell must end complete; an inline override without a setup above simply yields none. */
  requireComplete = false,
  /** Files read beforehand through the host (setupNeeds says which); none: a config is not read. */
  files: FileCache = new Map(),
): { setup?: Setup; findings: Finding[] } {
  const findings: Finding[] = [];
  let gpu: Gpu | undefined = base?.gpu;
  let model: ModelSpec | undefined = base?.model;
  let weights: Dtype = base?.weights ?? 'bf16';
  let kvCache: Dtype = base?.kvCache ?? 'bf16';
  let endpoint = base?.endpoint;
  let unquantized: WidePart[] = base?.unquantized ?? DEFAULT_UNQUANTIZED;
  const parallel = { ...(base?.parallel ?? { tp: 1, pp: 1, dp: 1 }) };
  let price = base?.price;

  if (keys.gpu !== undefined) {
    const g = keys.gpu;
    if (typeof g === 'string') {
      gpu = findGpu(g);
      if (!gpu) {
        const s = suggestions(
          g,
          GPUS.map((x) => x.id),
          2,
        );
        findings.push(
          finding(
            'error',
            'unknown-gpu',
            `Unknown GPU "${g}"${s.length ? `: did you mean ${s.map((x) => `"${x}"`).join(' or ')}?` : ''}`,
            ['gpu'],
            {
              fix: `use a catalog id (${GPUS.map((x) => x.id).join(', ')}) or define one: {bandwidth: 2039 GB/s, bf16: 312 TFLOPS, memory: 80 GiB}`,
              ...(s.length ? { quickFix: { title: `Use ${s[0]}`, edit: { path: ['gpu'], value: s[0] } } } : {}),
            },
          ),
        );
      }
    } else {
      const r = gpuObject.safeParse(g);
      if (!r.success) findings.push(...zodFindings(r.error, gpuObject, ['gpu']));
      else {
        const o = r.data;
        const from = o.base ? findGpu(o.base) : undefined;
        if (o.base && !from)
          findings.push(finding('error', 'unknown-gpu', `Unknown base GPU "${o.base}"`, ['gpu', 'base']));
        const peak: Gpu['peak'] = { ...(from?.peak ?? {}) };
        for (const d of DTYPES) if (o[d]) peak[d] = o[d]!.value;
        if (o.bf16 && !o.fp16) peak.fp16 = o.bf16.value;
        if (o.fp16 && !o.bf16) peak.bf16 = o.fp16.value;
        const link =
          o.link_bandwidth || o.link_latency
            ? {
                name: from?.interconnect ? `${from.interconnect.name} (overridden)` : 'custom link',
                bandwidth: o.link_bandwidth?.value ?? from?.interconnect?.bandwidth ?? NaN,
                latency: o.link_latency?.value ?? from?.interconnect?.latency ?? NaN,
                source: 'defined in the notebook',
              }
            : from?.interconnect;
        if (link && !(link.bandwidth > 0 && link.latency >= 0))
          findings.push(
            finding(
              'error',
              'schema',
              'A custom link needs both link_bandwidth (one direction, e.g. 450 GB/s) and link_latency (e.g. 5 µs)',
              ['gpu'],
            ),
          );
        const bandwidth = o.bandwidth?.value ?? from?.bandwidth;
        const memory = o.memory?.value ?? from?.memory;
        if (!bandwidth)
          findings.push(
            finding('error', 'schema', 'A custom GPU needs "bandwidth", e.g. 2039 GB/s (or "base: a100-sxm4-80gb")', [
              'gpu',
            ]),
          );
        if (!memory)
          findings.push(
            finding('error', 'schema', 'A custom GPU needs "memory", e.g. 80 GiB (or "base: a100-sxm4-80gb")', ['gpu']),
          );
        if (!Object.keys(peak).length)
          findings.push(finding('error', 'schema', 'A custom GPU needs a peak, e.g. "bf16: 312 TFLOPS"', ['gpu']));
        if (
          o.memory &&
          /^(GB|TB)$/.test(o.memory.unit) &&
          decimalCardSize(Math.round(o.memory.value / GB) * GB) !== undefined
        ) {
          const n = Math.round(o.memory.value / 1e9);
          findings.push(
            finding(
              'warning',
              'gb-gib-card-memory',
              `memory: ${n} GB is ${fmtIn(o.memory.value, 'GiB')}, but an "${n}GB" card holds ${n} GiB (${fmtIn(n * GiB, 'GB')}).`,
              ['gpu', 'memory'],
              {
                cause:
                  'Vendors write GB where the card holds binary gigabytes; mixing GB and GiB cost a real KV-pool prediction 10.5%.',
                fix: `write "memory: ${n} GiB"`,
                quickFix: { title: `Use ${n} GiB`, edit: { path: ['gpu', 'memory'], value: `${n} GiB` } },
              },
            ),
          );
        }
        if (bandwidth && memory && Object.keys(peak).length) {
          gpu = {
            id: o.name ?? (from ? `${from.id} (custom)` : 'custom'),
            name: o.name ?? from?.name ?? 'custom GPU',
            bandwidth,
            memory,
            peak,
            source: from ? `${from.source}, with fields overridden in the notebook` : 'defined in the notebook',
            ...(link ? { interconnect: link } : {}),
          };
        }
      }
    }
  }

  if (keys.model !== undefined) {
    const m = keys.model;
    if (typeof m === 'string') {
      model = findModel(m);
      if (!model) {
        const s = suggestions(
          m,
          MODELS.map((x) => x.id),
          2,
        );
        findings.push(
          finding(
            'error',
            'unknown-model',
            `Unknown model "${m}"${s.length ? `: did you mean ${s.map((x) => `"${x}"`).join(' or ')}?` : ''}`,
            ['model'],
            {
              fix: `use a catalog id (${MODELS.map((x) => x.id).join(', ')}) or import a config: {config: ./path/config.json}`,
              ...(s.length ? { quickFix: { title: `Use ${s[0]}`, edit: { path: ['model'], value: s[0] } } } : {}),
            },
          ),
        );
      }
    } else {
      const r = modelObject.safeParse(m);
      if (!r.success) findings.push(...zodFindings(r.error, modelObject, ['model']));
      else {
        const loaded = loadModelConfig(r.data.config, dir, files, r.data.name);
        if ('error' in loaded) findings.push(loaded.error);
        else model = loaded.model;
      }
    }
  }

  for (const [key, set] of [
    ['weights', (d: Dtype) => (weights = d)],
    ['kv_cache', (d: Dtype) => (kvCache = d)],
  ] as const) {
    if (keys[key] !== undefined) {
      const r = dtype.safeParse(keys[key]);
      if (r.success) set(r.data);
      else findings.push(finding('error', 'schema', `${key} must be one of: ${DTYPES.join(', ')}`, [key]));
    }
  }
  for (const [key, field] of [
    ['tensor_parallel', 'tp'],
    ['pipeline_parallel', 'pp'],
    ['data_parallel', 'dp'],
  ] as const) {
    if (keys[key] === undefined) continue;
    const r = parallelDegree.safeParse(keys[key]);
    if (r.success) parallel[field] = r.data;
    else
      findings.push(
        finding('error', 'schema', `${key}: ${r.error.issues[0]?.message ?? 'write a whole number of GPUs'}`, [key], {
          fix: `${key}: 4`,
        }),
      );
  }
  if (keys.unquantized !== undefined) {
    const r = unquantizedSchema.safeParse(keys.unquantized);
    if (r.success) unquantized = r.data;
    else
      findings.push(
        finding(
          'error',
          'schema',
          `unquantized lists the parts a quantized checkpoint keeps at 16 bits: any of ${WIDE_PARTS.join(', ')}, or none`,
          ['unquantized'],
          { fix: 'unquantized: [embeddings, lm_head, norms]' },
        ),
      );
  }
  if (keys.price !== undefined) {
    const r = priceSchema.safeParse(keys.price);
    if (r.success) price = r.data;
    else
      findings.push(
        finding('error', 'schema', r.error.issues[0]?.message ?? 'price: write "1.20 $/h"', ['price'], {
          fix: 'price: 1.20 $/h',
        }),
      );
  }
  if (keys.endpoint !== undefined) {
    const r = endpointSchema.safeParse(keys.endpoint);
    const refused = r.success ? credentialRefusal(r.data, 'endpoint', KEY_HINT) : undefined;
    if (refused) findings.push(finding('error', 'endpoint-credentials', refused, ['endpoint']));
    else if (r.success) endpoint = r.data;
    else findings.push(finding('error', 'schema', redactUrlsIn(endpointMessage(keys.endpoint)), ['endpoint']));
  }

  if (!gpu || !model) {
    if (requireComplete && !findings.length) {
      const missing = [!gpu && 'gpu', !model && 'model'].filter(Boolean).join(' and ');
      findings.push(
        finding(
          'error',
          'needs-setup',
          `A setup needs ${missing}, e.g. "gpu: a100-sxm4-80gb" and "model: qwen3-8b"`,
          [],
        ),
      );
    }
    return { findings };
  }
  return {
    setup: {
      name,
      gpu,
      model,
      weights,
      kvCache,
      unquantized,
      parallel,
      ...(price ? { price } : {}),
      endpoint: endpoint ?? 'sim',
      server: base?.server,
    },
    findings,
  };
}

/** The files the setup keys among `data` name: a model's config.json. */
export function setupNeeds(data: Record<string, unknown>, dir: string): FileNeed[] {
  const m = data.model;
  if (m && typeof m === 'object' && typeof (m as { config?: unknown }).config === 'string')
    return [{ path: path.resolve(dir, (m as { config: string }).config), want: 'text' }];
  return [];
}

function loadModelConfig(
  rel: string,
  dir: string,
  files: FileCache,
  name?: string,
): { model: ModelSpec } | { error: Finding } {
  const abs = path.resolve(dir, rel);
  const at = ['model', 'config'];
  const read = lookupFile(files, { path: abs, want: 'text' });
  if (!read || !('text' in read)) {
    const why = !read ? 'it was not read' : 'error' in read ? read.error.message : 'it was not read';
    const code = read && 'error' in read ? read.error.code : undefined;
    return {
      error: finding('error', 'config-not-found', `Cannot read ${rel} (resolved to ${abs}): ${why}`, at, {
        fix:
          code === 'outside-workspace'
            ? "run the cell to confirm reading it, or copy the config.json into the notebook's folder"
            : code === 'restricted'
              ? 'trust the workspace to read it'
              : 'give the path of a Hugging Face config.json relative to the notebook',
      }),
    };
  }
  const text = read.text;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return { error: finding('error', 'config-invalid', `${rel} is not valid JSON: ${(e as Error).message}`, at) };
  }
  const r = hfConfigSchema.safeParse(json);
  if (!r.success) {
    const issues = r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    return { error: finding('error', 'config-invalid', `${rel} is not a usable transformer config: ${issues}`, at) };
  }
  const id = name ?? path.basename(path.dirname(abs)) ?? 'imported';
  return { model: modelFromHfConfig(r.data, id, `config.json at ${rel}`) };
}

const schema = z
  .object({
    setup: z.union([z.string(), z.number()]).transform(String),
    /** vLLM knobs the kv-pool prediction and the simulated endpoint use. */
    gpu_memory_utilization: z.number().gt(0).max(1).optional(),
    max_model_len: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    max_num_seqs: z.number().int().positive().optional(),
    max_num_batched_tokens: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
    prefix_caching: z.boolean().optional(),
    /**
     * The server decodes speculatively: k draft tokens a step (vLLM's num_speculative_tokens) and,
     * if known, their acceptance (one rate, or per-position rates). The decode-floor checks then
     * allow a TPOT down to the floor / expected tokens per step (physics/speculative.ts).
     */
    speculative: speculativeSetupSchema.optional(),
  })
  .strict();

type SetupCell = z.output<typeof schema>;

export const setupKind: KindModule<SetupCell> = {
  key: 'setup',
  summary: 'setup: NAME — gpu, model, weights, kv_cache, endpoint for the cells below',
  schema,
  async run(_cell, ctx) {
    // ctx.setup is this cell's own resolved setup; the notebook's map still holds any earlier
    // setup of the same name until this run registers the new one.
    const s = ctx.setup;
    if (!s) return {};
    const m = s.model;
    const gpus = gpuCounts(s);
    const perHour = setupPricePerHour(s);
    const facts: [string, string][] = [
      ['GPU', `${s.gpu.name} (${s.gpu.id})`],
      ['bandwidth', fmtIn(s.gpu.bandwidth, 'GB/s', 0)],
      ['peak (bf16, dense)', s.gpu.peak.bf16 ? fmtIn(s.gpu.peak.bf16, 'TFLOP/s', 0) : '—'],
      ['memory', fmtBytes(s.gpu.memory)],
      ['model', `${m.name}: ${m.layers} layers, ${m.heads} heads / ${m.kvHeads} KV heads × ${m.headDim}`],
      ['parameters', `${fmtNum(m.params.total, 0)}${m.moe ? ` (active ${fmtNum(m.params.active, 0)})` : ''}`],
      ['weights / KV cache', `${s.weights} / ${s.kvCache}`],
      ...(s.weights !== 'bf16' && s.weights !== 'fp16'
        ? ([
            [
              'kept at 16 bits',
              s.unquantized?.length
                ? `${s.unquantized.join(', ')} (as quantized checkpoints ship; "unquantized: none" to quantize them too)`
                : 'nothing (unquantized: none)',
            ],
          ] as [string, string][])
        : []),
      ['weights bytes', fmtBytes(weightsBytes(m, s.weights, s.unquantized))],
      ...(gpus.total > 1
        ? ([
            ['GPUs', parallelWords(s)],
            ['weights per GPU (fullest)', fmtBytes(setupWeightsResident(s).bytes)],
            [
              'interconnect',
              s.gpu.interconnect
                ? `${s.gpu.interconnect.name}: ${fmtIn(s.gpu.interconnect.bandwidth, 'GB/s', 0)} each way, α ${fmtNum(s.gpu.interconnect.latency * 1e6, 1)} µs per all-reduce (assumption)`
                : 'none in the catalog',
            ],
          ] as [string, string][])
        : []),
      ...(perHour !== undefined
        ? ([['price', `${s.price!.written}: ${priceWords(s)}; ${COST_FORMULA}`]] as [string, string][])
        : []),
      ['endpoint', s.endpoint ?? 'sim'],
    ];
    return {
      values: {
        gpu: s.gpu.id,
        model: m.id,
        weights: s.weights,
        kv_cache: s.kvCache,
        endpoint: s.endpoint,
        params_total: m.params.total,
        params_active: m.params.active,
        weights_bytes: weightsBytes(m, s.weights, s.unquantized),
        weights_per_gpu_bytes: setupWeightsResident(s).bytes,
        unquantized: s.unquantized ?? [],
        tensor_parallel: parallelOf(s).tp,
        pipeline_parallel: parallelOf(s).pp,
        data_parallel: parallelOf(s).dp,
        gpus: gpus.total,
        ...(perHour !== undefined
          ? { price_per_gpu_hour: perHour / gpus.total, price_per_hour: perHour, price_per: s.price!.per }
          : {}),
      },
      facts: [
        setupFact(s, { endpoint: true }),
        { kind: 'weights', bytes: weightsBytes(m, s.weights, s.unquantized), source: `setup ${s.name}` },
      ],
      outputs: [factsOutput(`setup ${s.name}`, facts, `GPU source: ${s.gpu.source}. Model source: ${m.source}.`)],
    };
  },
};
