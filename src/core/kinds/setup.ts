/**
 * `setup: NAME` — the GPU, model, dtypes and endpoint for the cells after it. The same keys stand
 * inline in any cell to override the setup for that cell alone (applySetupOverrides).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { DTYPES, findGpu, findModel, GPUS, MODELS, type Dtype, type Gpu, type ModelSpec } from '../catalog';
import { hfConfigSchema, modelFromHfConfig } from '../catalog/hfConfig';
import { factsOutput } from '../engine/outputs';
import { quantity, suggestions, zodFindings } from '../engine/schema';
import type { KindModule, Setup } from '../engine/types';
import { finding, type Finding } from '../findings';
import { weightsBytes } from '../physics';
import { decimalCardSize, fmtBytes, fmtIn, fmtNum, GB, GiB } from '../units';

export const SETUP_KEYS = ['gpu', 'model', 'weights', 'kv_cache', 'endpoint'] as const;

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
  })
  .strict();

const modelObject = z.object({ config: z.string().min(1), name: z.string().optional() }).strict();
const dtype = z.enum(DTYPES as [Dtype, ...Dtype[]]);
const endpointSchema = z.union([
  z.literal('sim'),
  z.url({ protocol: /^https?$/, error: 'endpoint must be "sim" or an http(s) URL such as http://localhost:8000' }),
]);

export function applySetupOverrides(
  base: Setup | undefined,
  keys: Record<string, unknown>,
  dir: string,
  name: string,
  /** A setup cell must end complete; an inline override without a setup above simply yields none. */
  requireComplete = false,
): { setup?: Setup; findings: Finding[] } {
  const findings: Finding[] = [];
  let gpu: Gpu | undefined = base?.gpu;
  let model: ModelSpec | undefined = base?.model;
  let weights: Dtype = base?.weights ?? 'bf16';
  let kvCache: Dtype = base?.kvCache ?? 'bf16';
  let endpoint = base?.endpoint;

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
        const loaded = loadModelConfig(r.data.config, dir, r.data.name);
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
  if (keys.endpoint !== undefined) {
    const r = endpointSchema.safeParse(keys.endpoint);
    if (r.success) endpoint = r.data;
    else
      findings.push(
        finding('error', 'schema', 'endpoint must be "sim" or an http(s) URL such as http://localhost:8000', [
          'endpoint',
        ]),
      );
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
  return { setup: { name, gpu, model, weights, kvCache, endpoint: endpoint ?? 'sim', server: base?.server }, findings };
}

function loadModelConfig(rel: string, dir: string, name?: string): { model: ModelSpec } | { error: Finding } {
  const abs = path.resolve(dir, rel);
  const at = ['model', 'config'];
  let text: string;
  try {
    text = fs.readFileSync(abs, 'utf8');
  } catch (e) {
    return {
      error: finding(
        'error',
        'config-not-found',
        `Cannot read ${rel} (resolved to ${abs}): ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
        at,
        { fix: 'give the path of a Hugging Face config.json relative to the notebook' },
      ),
    };
  }
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
    const facts: [string, string][] = [
      ['GPU', `${s.gpu.name} (${s.gpu.id})`],
      ['bandwidth', fmtIn(s.gpu.bandwidth, 'GB/s', 0)],
      ['peak (bf16, dense)', s.gpu.peak.bf16 ? fmtIn(s.gpu.peak.bf16, 'TFLOP/s', 0) : '—'],
      ['memory', fmtBytes(s.gpu.memory)],
      ['model', `${m.name}: ${m.layers} layers, ${m.heads} heads / ${m.kvHeads} KV heads × ${m.headDim}`],
      ['parameters', `${fmtNum(m.params.total, 0)}${m.moe ? ` (active ${fmtNum(m.params.active, 0)})` : ''}`],
      ['weights / KV cache', `${s.weights} / ${s.kvCache}`],
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
      },
      facts: [
        {
          kind: 'setup',
          name: s.name,
          gpu: s.gpu.id,
          model: m.id,
          weights: s.weights,
          kv_cache: s.kvCache,
          ...(s.endpoint ? { endpoint: s.endpoint } : {}),
          params_total: m.params.total,
          params_active: m.params.active,
        },
        { kind: 'weights', bytes: weightsBytes(m, s.weights), source: `setup ${s.name}` },
      ],
      outputs: [factsOutput(`setup ${s.name}`, facts, `GPU source: ${s.gpu.source}. Model source: ${m.source}.`)],
    };
  },
};
