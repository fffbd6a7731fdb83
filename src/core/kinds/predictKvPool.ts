/**
 * `predict: kv-pool` — vLLM V1 KV-cache sizing: what is left of gpu_memory_utilization × memory
 * after weights, the activation peak and non-torch memory, in whole 16-token blocks.
 */
import { z } from 'zod';
import { factsOutput } from '../engine/outputs';
import { quantity } from '../engine/schema';
import type { AnalyzeContext, KindModule, Setup } from '../engine/types';
import type { Fact } from '../facts';
import { fin } from '../facts/make';
import { finding, type Finding } from '../findings';
import {
  BLOCK_SIZE,
  DEFAULT_ACTIVATION_PEAK_BYTES,
  DEFAULT_NON_TORCH_BYTES,
  kvPool,
  type KvPool,
  type KvPoolOptions,
} from '../physics/kvPool';
import { parallelOf, parallelWords, weightsBytes } from '../physics';
import { plotOutput } from '../plots/render';
import { decimalCardSize, fmtBytes, fmtIn, fmtNum, GiB } from '../units';
import { fraction, serverNumber, setupLabel } from './predictShared';

const schema = z
  .object({
    predict: z.literal('kv-pool'),
    gpu_memory_utilization: fraction.optional(),
    /** Peak activation memory of vLLM's profiling pass. */
    activation_peak: quantity('bytes', { min: 0 }).optional(),
    /** CUDA context, NCCL buffers, other memory outside torch's allocator. */
    non_torch_memory: quantity('bytes', { min: 0 }).optional(),
    /** "Available KV cache memory: 56.34 GiB" from a vLLM log: size the pool from it. */
    available_kv: quantity('bytes', { positive: true }).optional(),
    max_model_len: quantity('tokens', { bare: 'tokens', positive: true }).optional(),
  })
  .strict();

type Cell = z.output<typeof schema>;

/** Card sizes sold as "N GB" that hold N GiB. */

function options(cell: Cell, setup: Setup): KvPoolOptions {
  return {
    gpuMemoryUtilization: cell.gpu_memory_utilization ?? serverNumber(setup, 'gpu_memory_utilization'),
    activationPeakBytes: cell.activation_peak?.value,
    nonTorchBytes: cell.non_torch_memory?.value,
    availableKvBytes: cell.available_kv?.value,
    maxModelLen: cell.max_model_len?.value ?? serverNumber(setup, 'max_model_len'),
  };
}

function gbSlip(cell: Cell, ctx: AnalyzeContext): Finding[] {
  const s = ctx.setup;
  if (!s || cell.available_kv) return [];
  const n = decimalCardSize(s.gpu.memory);
  if (n === undefined) return [];
  const opts = options(cell, s);
  const asWritten = kvPool(s, opts);
  const asCard = kvPool({ ...s, gpu: { ...s.gpu, memory: n * GiB } }, opts);
  const cut = 1 - asWritten.pool_tokens / Math.max(1, asCard.pool_tokens);
  const inline = s.cellIndex === undefined;
  let actNote = '';
  if (cell.activation_peak && cell.activation_peak.value > 4 * DEFAULT_ACTIVATION_PEAK_BYTES) {
    const both = kvPool(
      { ...s, gpu: { ...s.gpu, memory: n * GiB } },
      { ...opts, activationPeakBytes: undefined, nonTorchBytes: opts.nonTorchBytes },
    );
    const total = 1 - asWritten.pool_tokens / Math.max(1, both.pool_tokens);
    actNote = ` The activation_peak of ${fmtBytes(cell.activation_peak.value)} is also far above the ≈${fmtIn(DEFAULT_ACTIVATION_PEAK_BYTES + DEFAULT_NON_TORCH_BYTES, 'GiB', 2)} that activations and non-torch memory took together in a real Qwen3-8B run; with ${n} GiB and the default it is ${fmtNum(both.pool_tokens, 0)} tokens, so the two slips together cost ${fmtNum(total * 100, 1)}%.`;
  }
  return [
    finding(
      'warning',
      'kv-pool-gb-card-memory',
      `The card memory is ${n} GB = ${fmtIn(n * 1e9, 'GiB')}, but an "${n}GB" card holds ${n} GiB = ${fmtIn(n * GiB, 'GB')}: the pool comes out at ${fmtNum(asWritten.pool_tokens, 0)} tokens instead of ${fmtNum(asCard.pool_tokens, 0)} (${fmtNum(cut * 100, 1)}% under), because gpu_memory_utilization × ${fmtIn(n * GiB - n * 1e9, 'GiB')} goes missing and all of it comes out of the KV cache.${actNote}`,
      inline ? ['gpu', 'memory'] : ['predict'],
      {
        cause:
          'GB is 10^9 bytes and GiB is 2^30; vendors print GB where the card holds GiB. This slip cost a real KV-pool prediction 10.5%.',
        fix: `write "memory: ${n} GiB" (or use the catalog id)`,
        ...(inline
          ? { quickFix: { title: `Use ${n} GiB`, edit: { path: ['gpu', 'memory'], value: `${n} GiB` } } }
          : {}),
        ...(!inline
          ? {
              related: [
                { message: `card memory set in setup "${s.name}"`, cellIndex: s.cellIndex, path: ['gpu', 'memory'] },
              ],
            }
          : {}),
      },
    ),
  ];
}

/** What a pool prediction states: the pool (tokens, bytes, available memory) and the weights. */
function kvPoolFacts(v: Record<string, unknown>): Fact[] {
  const source = 'predict: kv-pool';
  const out: Fact[] = [];
  const tokens = fin(v.pool_tokens);
  if (tokens !== undefined)
    out.push({
      kind: 'kv-pool',
      tokens,
      ...(fin(v.pool_bytes) !== undefined ? { bytes: fin(v.pool_bytes) } : {}),
      ...(fin(v.available_kv_bytes) !== undefined ? { available_bytes: fin(v.available_kv_bytes) } : {}),
      source,
    });
  const w = fin(v.weights_bytes);
  if (w !== undefined) out.push({ kind: 'weights', bytes: w, source });
  return out;
}

export const kvPoolKind: KindModule<Cell> = {
  key: 'predict',
  variant: 'kv-pool',
  summary: 'predict: kv-pool — vLLM V1 KV-cache pool: tokens, blocks, max concurrency, memory breakdown',
  schema,
  needsSetup: true,
  migrate: kvPoolFacts,
  analyze(cell, ctx) {
    const out = gbSlip(cell, ctx);
    const s = ctx.setup;
    if (
      !out.length &&
      cell.activation_peak &&
      cell.activation_peak.value > 4 * (DEFAULT_ACTIVATION_PEAK_BYTES + DEFAULT_NON_TORCH_BYTES)
    ) {
      out.push(
        finding(
          'info',
          'kv-pool-activation-guess',
          `activation_peak ${fmtBytes(cell.activation_peak.value)} is ${fmtNum(cell.activation_peak.value / (DEFAULT_ACTIVATION_PEAK_BYTES + DEFAULT_NON_TORCH_BYTES), 1)}× the ≈${fmtIn(DEFAULT_ACTIVATION_PEAK_BYTES + DEFAULT_NON_TORCH_BYTES, 'GiB', 2)} that activations and non-torch memory took together in a real Qwen3-8B run on an A100`,
          ['activation_peak'],
          {
            fix: 'use the value vLLM measured (budget − weights − "Available KV cache memory"), or give available_kv from the log',
          },
        ),
      );
    }
    if (s && cell.available_kv) {
      const p = kvPool(s, options(cell, s));
      const implied = p.budget_bytes - p.weights_bytes - p.available_kv_bytes;
      if (implied < 0)
        out.push(
          finding(
            'error',
            'kv-pool-available-impossible',
            `available_kv ${fmtBytes(p.available_kv_bytes)} implies activations + non-torch memory of ${fmtBytes(implied)}: more KV memory than gpu_memory_utilization ${fmtNum(p.gpu_memory_utilization, 2)} × ${fmtBytes(p.total_memory_bytes)} − ${fmtBytes(p.weights_bytes)} of weights can leave (${fmtBytes(p.budget_bytes - p.weights_bytes)}).`,
            ['available_kv'],
            {
              cause:
                'The figure comes from another setup (a larger card, a smaller or more quantized model, another gpu_memory_utilization), from several GPUs summed, or has the wrong unit.',
              fix: "copy \"Available KV cache memory: … GiB\" from this server's log, and set the setup's gpu, model, weights and gpu_memory_utilization to the server's",
            },
          ),
        );
    }
    if (s) {
      const p = kvPool(s, options(cell, s));
      // The weights-fit check says it when the setup's own pool is empty; this cell's knobs may empty it too.
      const setupPoolEmpty = kvPool(s, { gpuMemoryUtilization: serverNumber(s, 'gpu_memory_utilization') }).blocks <= 0;
      if (p.pool_tokens <= 0 && !setupPoolEmpty) {
        out.push(
          finding(
            'error',
            'kv-pool-empty',
            `Nothing is left for the KV cache: ${fmtBytes(p.budget_bytes)} budget − ${fmtBytes(p.weights_bytes)} weights − ${fmtBytes(p.activation_peak_bytes + p.non_torch_bytes)} overhead = ${fmtBytes(p.available_kv_bytes)}`,
            ['predict'],
            {
              fix: 'raise gpu_memory_utilization, quantize the weights (weights: fp8), or use a card with more memory',
            },
          ),
        );
      } else if (p.max_concurrency < 1 && !setupPoolEmpty) {
        out.push(
          finding(
            'warning',
            'kv-pool-below-max-model-len',
            `The pool holds ${fmtNum(p.pool_tokens, 0)} tokens, less than one request of max_model_len ${fmtNum(p.max_model_len, 0)}: vLLM refuses to start`,
            cell.max_model_len ? ['max_model_len'] : ['predict'],
            {
              fix: `set max_model_len to at most ${fmtNum(p.pool_tokens, 0)}`,
            },
          ),
        );
      }
    }
    return out;
  },
  async run(cell, ctx) {
    const s = ctx.setup!;
    const p = kvPool(s, options(cell, s));
    const par = parallelOf(s);
    const multi = par.tp * par.pp > 1;
    const facts: [string, string][] = [
      ...(multi || par.dp > 1
        ? ([['GPUs', `${parallelWords(s)}; each worker sizes its own pool, the replica uses the smallest`]] as [
            string,
            string,
          ][])
        : []),
      [multi ? 'card memory (per GPU)' : 'card memory', fmtBytes(p.total_memory_bytes)],
      [`× gpu_memory_utilization ${fmtNum(p.gpu_memory_utilization, 2)}`, fmtBytes(p.budget_bytes)],
      [
        multi
          ? `− weights on the fullest GPU (${fmtBytes(weightsBytes(s.model, s.weights, s.unquantized))} in all)`
          : '− weights',
        fmtBytes(p.weights_bytes),
      ],
      ...((p.available_from === 'given'
        ? [
            [
              'available KV cache memory (given)',
              `${fmtIn(p.available_kv_bytes, 'GiB')} (${fmtIn(p.available_kv_bytes, 'GB')})`,
            ],
            [
              'implied activation peak + non-torch = budget − weights − available',
              fmtBytes(p.budget_bytes - p.weights_bytes - p.available_kv_bytes),
            ],
          ]
        : [
            [`− activation peak${cell.activation_peak ? '' : ' (default)'}`, fmtBytes(p.activation_peak_bytes)],
            [`− non-torch memory${cell.non_torch_memory ? '' : ' (default)'}`, fmtBytes(p.non_torch_bytes)],
            [
              '= available KV cache memory',
              `${fmtIn(p.available_kv_bytes, 'GiB')} (${fmtIn(p.available_kv_bytes, 'GB')})`,
            ],
          ]) as [string, string][]),
      ['KV bytes per token', `${fmtNum(p.kv_bytes_per_token, 0)} B (${s.kvCache})`],
      ...(multi
        ? ([
            [
              `KV bytes per token per GPU (${p.kv_heads_per_gpu} KV heads × ${p.layers_per_gpu} layers)`,
              `${fmtNum(p.kv_bytes_per_token_per_gpu, 0)} B`,
            ],
          ] as [string, string][])
        : []),
      [
        multi
          ? `block = ${BLOCK_SIZE} tokens × the GPU's ${p.layers_per_gpu} layers`
          : `block = ${BLOCK_SIZE} tokens × all layers`,
        fmtBytes(p.page_size_bytes * p.layers_per_gpu),
      ],
      ['blocks', fmtNum(p.blocks, 0)],
      ['GPU KV cache size', `${fmtNum(p.pool_tokens, 0)} tokens${par.dp > 1 ? ' per replica' : ''}`],
      ...(par.dp > 1
        ? ([[`all ${par.dp} replicas`, `${fmtNum(p.pool_tokens_all_replicas, 0)} tokens`]] as [string, string][])
        : []),
      [`max concurrency at ${fmtNum(p.max_model_len, 0)} tokens per request`, `${fmtNum(p.max_concurrency, 2)}x`],
    ];
    const plot = await breakdownPlot(p, s);
    return {
      values: { ...p },
      facts: kvPoolFacts({ ...p }),
      outputs: [
        factsOutput(
          `KV-cache pool (vLLM V1) — ${setupLabel(s)}`,
          facts,
          'available = memory × gpu_memory_utilization − weights − activation peak − non-torch; blocks = floor(available / (2 × 16 × kv_heads × head_dim × bytes × layers)); tokens = blocks × 16. vLLM logs "Available KV cache memory" and "GPU KV cache size" with these meanings.',
        ),
        plot,
      ],
    };
  },
};

async function breakdownPlot(p: KvPool, s: Setup) {
  const pool = Math.max(0, p.pool_bytes);
  const slack = Math.max(0, p.available_kv_bytes - pool);
  const parts = [
    { part: parallelOf(s).tp * parallelOf(s).pp > 1 ? 'weights (this GPU)' : 'weights', bytes: p.weights_bytes },
    ...(p.available_from === 'given'
      ? [
          {
            part: 'activation peak + non-torch (implied)',
            bytes: Math.max(0, p.budget_bytes - p.weights_bytes - p.available_kv_bytes),
          },
        ]
      : [
          { part: 'activation peak', bytes: p.activation_peak_bytes },
          { part: 'non-torch', bytes: p.non_torch_bytes },
        ]),
    { part: 'KV cache pool', bytes: pool },
    { part: 'less than one block', bytes: slack },
    { part: 'outside gpu_memory_utilization', bytes: Math.max(0, p.total_memory_bytes - p.budget_bytes) },
  ].map((x, order) => ({ ...x, order, gib: x.bytes / GiB, label: fmtBytes(x.bytes) }));
  return plotOutput({
    title: `Memory of ${s.gpu.id}: ${fmtNum(p.pool_tokens, 0)} KV tokens`,
    width: 460,
    height: 70,
    data: { values: parts },
    mark: { type: 'bar' },
    encoding: {
      x: { field: 'gib', type: 'quantitative', stack: 'zero', title: 'GiB (2^30 bytes)' },
      color: {
        field: 'part',
        type: 'nominal',
        sort: parts.map((x) => x.part),
        title: null,
        legend: { labelLimit: 320 },
      },
      order: { field: 'order', type: 'quantitative' },
      tooltip: [{ field: 'part' }, { field: 'label', title: 'size' }],
    },
  });
}
