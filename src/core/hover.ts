/**
 * Hovers: a quantity under the cursor, shown in its other units (GB and GiB side by side) and with
 * what it implies for the setup in force (a bandwidth: the ms one pass over the weights takes; a
 * size: how many KV tokens fit; a token count: its KV bytes and prefill floor; …). Markdown text;
 * the editor adapter only wraps it.
 */
import { createNotebookContext, prepareCell, restoreResult } from './engine/engine';
import type { FileCache } from './engine/files';
import type { Setup } from './engine/types';
import { parseMetricKey } from './facts/stat';
import { applySetupOverrides, SETUP_KEYS } from './kinds/setup';
import { parseCell, pathAt } from './notebook/cellSource';
import {
  computePeak,
  decodeRoofline,
  kvBytesPerToken,
  prefillFloorSimple,
  prefillFloorStrict,
  weightsBytes,
  weightsReadPerStep,
} from './physics';
import { BLOCK_SIZE, kvPool } from './physics/kvPool';
import {
  decimalCardSize,
  DIMS,
  fmtBytes,
  fmtIn,
  fmtNum,
  fmtTime,
  GiB,
  otherUnits,
  parseQuantity,
  type DimName,
  type Quantity,
} from './units';
import { numberOf } from './values';

/** Keys whose bare numbers carry a unit by convention. */
const BARE_TOKENS = new Set([
  'context',
  'input',
  'output',
  'prompt',
  'max_model_len',
  'max_num_batched_tokens',
  'tokens',
]);
const BATCH_KEYS = new Set(['batch', 'concurrency', 'max_num_seqs']);
const FRACTION_KEYS = new Set(['gpu_memory_utilization']);
const ALL_DIMS = (Object.keys(DIMS) as DimName[]).filter((d) => d !== 'ratio');

/**
 * The setup in force for cell `index` of a notebook: setup cells above it carry forward, `setup:
 * NAME` picks one, and the cell's own gpu/model/… keys override it. For hosts that call hoverAt.
 */
export function setupAt(
  sources: string[],
  index: number,
  dir: string,
  /** Files the cells name, read beforehand (readAnalysisFiles). */
  files: FileCache = new Map(),
): Setup | undefined {
  const nb = { ...createNotebookContext(dir), files };
  // Restoring a setup cell registers its setup, as running it would.
  for (let i = 0; i < index && i < sources.length; i++) restoreResult(sources[i], i, [], nb);
  if (index >= sources.length) return nb.defaultSetup;
  return prepareCell(sources[index], index, nb).setup ?? nb.defaultSetup;
}

export function hoverAt(source: string, line: number, character: number, setup?: Setup): string | undefined {
  const parsed = parseCell(source);
  if (parsed.errors.length) return undefined;
  const at = pathAt(parsed, { line, character });
  if (!at) return undefined;
  const value = at.value;
  if (typeof value !== 'string' && typeof value !== 'number') return undefined;
  const key = [...at.path].reverse().find((p): p is string => typeof p === 'string') ?? '';
  const data = (parsed.data ?? {}) as Record<string, unknown>;
  const s = effectiveSetup(data, setup);

  if (typeof value === 'number' && BATCH_KEYS.has(key) && Number.isInteger(value) && value > 0)
    return batchHover(at.path, value, data, s);

  let qq: Quantity | undefined;
  let dim: DimName | undefined;
  if (typeof value === 'number' && FRACTION_KEYS.has(key)) {
    qq = { value, dims: {}, unit: '%' };
    dim = 'ratio';
  } else {
    const bare = typeof value === 'number' && BARE_TOKENS.has(key) ? 'tokens' : undefined;
    for (const d of [...ALL_DIMS, 'ratio' as DimName]) {
      const r = parseQuantity(value, { dims: [d], bare: d === 'tokens' ? bare : undefined });
      if (r.ok) {
        qq = r.quantity;
        dim = r.dim;
        break;
      }
    }
  }
  if (!qq || !dim) return undefined;
  const head = `**${at.path.join('.')}**: \`${value}\``;
  const others = otherUnits(qq).filter((o, i, a) => a.indexOf(o) === i);
  const lines = others.length > 1 || dim === 'bytes' || others[0] !== String(value) ? others.map((o) => `= ${o}`) : [];
  const implied = s ? implications(dim, qq.value, key, at.path, data, s) : [];
  const parts = [head];
  if (lines.length) parts.push(lines.join('  \n'));
  if (dim === 'bytes' && key === 'memory') parts.push(...cardMemoryNote(qq));
  if (implied.length)
    parts.push(`For ${s!.model.name} ${s!.weights} on ${s!.gpu.id}:\n\n${implied.map((x) => `- ${x}`).join('\n')}`);
  return parts.join('\n\n');
}

/** The setup in force plus this cell's own setup keys (a setup cell, or inline overrides). */
function effectiveSetup(data: Record<string, unknown>, setup: Setup | undefined): Setup | undefined {
  const keys: Record<string, unknown> = {};
  for (const k of SETUP_KEYS) if (k in data) keys[k] = data[k];
  if (!Object.keys(keys).length) return setup;
  try {
    return applySetupOverrides(setup, keys, process.cwd(), setup?.name ?? 'hover').setup ?? setup;
  } catch {
    return setup;
  }
}

function cardMemoryNote(qq: Quantity): string[] {
  const n = decimalCardSize(qq.value);
  if (/^(GB|TB)$/.test(qq.unit) && n !== undefined) {
    return [
      `⚠️ an "${n}GB" card holds ${n} GiB = ${fmtIn(n * GiB, 'GB')}; ${n} GB is ${fmtNum(((n * GiB - n * 1e9) / (n * GiB)) * 100, 1)}% less. Write \`${n} GiB\`.`,
    ];
  }
  return [];
}

function implications(
  dim: DimName,
  v: number,
  key: string,
  path: (string | number)[],
  data: Record<string, unknown>,
  s: Setup,
): string[] {
  const kv = kvBytesPerToken(s.model, s.kvCache);
  const W = weightsReadPerStep(s.model, s.weights);
  const peak = computePeak(s.gpu, s.weights);
  const bw = s.gpu.bandwidth;
  const out: string[] = [];
  switch (dim) {
    case 'bandwidth': {
      const t = W / v;
      out.push(
        `one pass over the weights (${fmtBytes(W)}) takes **${fmtNum(t * 1e3, 2)} ms**: the decode step floor, a per-user ceiling of ${fmtNum(1 / t, 1)} tok/s`,
      );
      out.push(`ridge point at ${fmtIn(peak, 'TFLOP/s', 0)}: ${fmtNum(peak / v, 0)} FLOP/byte`);
      out.push(`1k tokens of KV (${fmtBytes(kv * 1000)}) read in ${fmtTime((kv * 1000) / v)}`);
      break;
    }
    case 'bytes': {
      const tokens = v / kv;
      out.push(
        `holds **${fmtNum(Math.floor(tokens), 0)} tokens** of KV cache at ${fmtNum(kv, 0)} B/token (${s.kvCache}), ${fmtNum(Math.floor(tokens / BLOCK_SIZE), 0)} blocks of ${BLOCK_SIZE}`,
      );
      out.push(
        `= ${fmtNum(v / weightsBytes(s.model, s.weights, s.unquantized), 2)}× the weights (${fmtBytes(weightsBytes(s.model, s.weights, s.unquantized))})`,
      );
      out.push(`read once at ${fmtIn(bw, 'GB/s', 0)} in ${fmtTime(v / bw)}`);
      if (key === 'memory' && path[0] === 'gpu') {
        const p = kvPool({ ...s, gpu: { ...s.gpu, memory: v } });
        out.push(
          `as card memory: a vLLM KV pool of ${fmtNum(p.pool_tokens, 0)} tokens at gpu_memory_utilization ${p.gpu_memory_utilization}`,
        );
      }
      break;
    }
    case 'tokens': {
      out.push(`KV cache: ${fmtBytes(v * kv)} (${fmtNum(kv, 0)} B/token, ${s.kvCache})`);
      out.push(
        `prefill floor: **${fmtNum(prefillFloorSimple(s, v) * 1e3, 1)} ms** (2·params·N/peak); stricter count ${fmtNum(prefillFloorStrict(s, v).seconds * 1e3, 1)} ms`,
      );
      const pool = kvPool(s, { gpuMemoryUtilization: numberOf(s.server?.gpu_memory_utilization) });
      out.push(
        `the predicted KV pool (${fmtNum(pool.pool_tokens, 0)} tokens) holds ${fmtNum(Math.floor(pool.pool_tokens / v), 0)} sequences of this length`,
      );
      if (v > s.model.maxPosition)
        out.push(`⚠️ longer than the model's max_position_embeddings (${fmtNum(s.model.maxPosition, 0)})`);
      break;
    }
    case 'compute': {
      out.push(
        `prefill of 1,000 tokens: ${fmtNum(((2 * s.model.params.active * 1000) / v) * 1e3, 1)} ms at this peak (2·params·N/peak)`,
      );
      out.push(`ridge point at ${fmtIn(bw, 'GB/s', 0)}: ${fmtNum(v / bw, 0)} FLOP/byte`);
      out.push(`compute roof for decode: ${fmtNum(v / (2 * s.model.params.active), 0)} tok/s (peak / 2·params)`);
      break;
    }
    case 'time': {
      const floor = W / bw;
      out.push(`${fmtNum(v / floor, 2)}× the decode step floor (${fmtNum(floor * 1e3, 2)} ms)`);
      out.push(
        `at ${fmtIn(peak, 'TFLOP/s', 0)} a prefill could process at most **${fmtNum((v * peak) / (2 * s.model.params.active), 0)} tokens** in this time`,
      );
      // A prefill floor bounds what includes a prefill (TTFT, E2E), never a decode step or TPOT.
      const metric = parseMetricKey(key)?.metric;
      const prompt = metric === 'ttft' || metric === 'e2e' ? tokensOf(data.prompt ?? data.input) : undefined;
      if (prompt !== undefined) {
        const f = prefillFloorSimple(s, prompt);
        out.push(
          v < f
            ? `⚠️ below the ${fmtNum(f * 1e3, 1)} ms prefill floor of a ${fmtNum(prompt, 0)}-token prompt: not a full prefill (prefix-cache hit?)`
            : `${fmtNum(v / f, 2)}× the ${fmtNum(f * 1e3, 1)} ms prefill floor of a ${fmtNum(prompt, 0)}-token prompt`,
        );
      }
      break;
    }
    case 'token_rate': {
      const ceiling = bw / W;
      out.push(`${fmtNum(1e3 / v, 2)} ms per token`);
      out.push(
        `as a per-user rate: ${fmtNum((v / ceiling) * 100, 1)}% of the ${fmtNum(ceiling, 1)} tok/s ceiling${v > ceiling ? ' — ⚠️ above it: not one stream, or not reading the weights' : ''}`,
      );
      out.push(
        `as an aggregate rate: ${fmtNum((v / (peak / (2 * s.model.params.active))) * 100, 1)}% of the ${fmtNum(peak / (2 * s.model.params.active), 0)} tok/s compute roof`,
      );
      break;
    }
    case 'flops':
      out.push(`${fmtTime(v / peak)} at ${fmtIn(peak, 'TFLOP/s', 0)}`);
      break;
    case 'intensity': {
      const ridge = peak / bw;
      out.push(
        `${v < ridge ? 'bandwidth' : 'compute'}-bound on ${s.gpu.id} (ridge ${fmtNum(ridge, 0)} FLOP/byte); attainable ${fmtIn(Math.min(peak, bw * v), 'TFLOP/s', 1)}`,
      );
      break;
    }
    case 'request_rate':
      out.push(`one request every ${fmtTime(1 / v)}`);
      break;
    case 'ratio':
      if (key === 'gpu_memory_utilization') {
        out.push(`budget ${fmtBytes(s.gpu.memory * v)} of ${fmtBytes(s.gpu.memory)}`);
        const p = kvPool(s, { gpuMemoryUtilization: v });
        out.push(`KV pool ${fmtNum(p.pool_tokens, 0)} tokens (${fmtIn(p.available_kv_bytes, 'GiB')} available)`);
      }
      break;
    default:
      break;
  }
  return out;
}

function batchHover(
  path: (string | number)[],
  B: number,
  data: Record<string, unknown>,
  s: Setup | undefined,
): string | undefined {
  const head = `**${path.join('.')}**: ${B} concurrent sequences`;
  if (!s) return head;
  const context = tokensOf(data.context) ?? (tokensOf(data.input) ?? 1000) + (tokensOf(data.output) ?? 0) / 2;
  const r = decodeRoofline(s, context, [B]);
  const row = r.rows[0];
  const kvB = kvBytesPerToken(s.model, s.kvCache) * context * B;
  return [
    head,
    `For ${s.model.name} ${s.weights} on ${s.gpu.id} at context ${fmtNum(context, 0)} tokens (decode roofline):`,
    [
      `step ${fmtNum(row.step_ms, 2)} ms, ${fmtNum(row.per_user_tok_s, 1)} tok/s per user, **${fmtNum(row.aggregate_tok_s, 0)} tok/s** aggregate (${row.bound}-bound)`,
      `KV held: ${fmtBytes(kvB)}; half-saturation batch ${fmtNum(r.half_saturation_batch, 0)}`,
    ]
      .map((x) => `- ${x}`)
      .join('\n'),
  ].join('\n\n');
}

function tokensOf(v: unknown): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' && typeof v !== 'number') return undefined;
  const r = parseQuantity(v, { dims: ['tokens'], bare: 'tokens' });
  return r.ok ? r.quantity.value : undefined;
}
