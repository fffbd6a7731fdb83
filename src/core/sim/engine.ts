/**
 * A discrete-event model of a vLLM V1 engine: continuous batching under max_num_seqs and a per-step
 * token budget (max_num_batched_tokens, chunked prefill), block-level KV accounting (16-token
 * blocks) with preemption by recompute, a prefix cache on full blocks with LRU eviction, and a step
 * time from physics:
 *
 *   memory  = (W + kv_bytes_per_token · Σ context of every scheduled request) / bandwidth
 *   compute = (2 · active_params · Σ scheduled tokens + attention FLOPs) / (peak · prefill_mfu)
 *   step    = max(memory, compute) + communication + step_overhead
 *
 * On tp × pp GPUs, W, kv and the FLOPs are one GPU's share and communication is every layer's two
 * all-reduces and the stage sends for the step's tokens (physics/parallel); on one GPU it is 0.
 *
 * attention FLOPs for a chunk of n tokens starting at position s = 4 · layers · heads · head_dim ·
 * Σ_{i<n} (s + i + 1) (QKᵀ and AV, causal). A batch-1 decode step is therefore the decode floor
 * W / BW (plus one request's KV) plus the overhead: 8.03 + 3.27 = 11.3 ms for Qwen3-8B on an A100.
 *
 * The engine has no clock of its own: `now` is virtual seconds, advanced by each step. The
 * prediction drives it as fast as it can (virtual time); the HTTP server drives it against the
 * wall clock (tokens leave at the simulated step end, divided by a speed factor).
 */
import type { Setup } from '../engine/types';
import { parallelOf, stepShape, type StepShape } from '../physics';
import { BLOCK_SIZE, kvPool, type KvPool } from '../physics/kvPool';
import { draftPassSeconds, perPosition, type Acceptance, type Draft } from '../physics/speculative';
import { findModel } from '../catalog';
import { Mulberry32 } from './rng';
import { numberOf } from '../values';

/** The block size as a module constant (read in the hot loops). */
const BS: number = BLOCK_SIZE;
const NO_SPLIT: readonly number[] = Object.freeze([]);
const byRunSeq = (a: SimRequest, b: SimRequest) => a.runSeq - b.runSeq;

/**
 * The scheduler limits `vllm serve` starts with when none is given: they depend on the card. On a
 * GPU with at least 70 GiB that is not an A100 (H100, H200, MI300X) 8,192 batched tokens and 1,024
 * sequences a step; on every other card, A100s included, 2,048 tokens and 256 sequences. Read from
 * vLLM's EngineArgs batch defaults for UsageContext.OPENAI_API_SERVER (engine/arg_utils.py, pinned
 * by tests/engine/test_arg_utils.py test_defaults_with_usage_context; vLLM main, 2025–2026).
 *
 * The token budget shapes the latency tail: with 2,048 tokens an A100 packs at most two 1,000-token
 * prompts into a step, so refills enter one or two at a time and every prefill stalls the running
 * streams for one ~180 ms step (p99 ITL many times the median), where 8,192 tokens would pack eight
 * prompts into one ~700 ms step and keep a closed loop of fixed lengths in synchronized waves.
 */
export function vllmServerDefaults(gpu: { id: string; memory: number; name?: string }): {
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
} {
  const big = gpu.memory >= 70 * 2 ** 30 && !/a100/i.test(`${gpu.id} ${gpu.name ?? ''}`);
  return big ? { maxNumSeqs: 1024, maxNumBatchedTokens: 8192 } : { maxNumSeqs: 256, maxNumBatchedTokens: 2048 };
}

/** Defaults, stated in every output that uses them (max_num_seqs and max_num_batched_tokens: vllmServerDefaults). */
export const ENGINE_DEFAULTS = {
  prefixCaching: true,
  /** Fraction of the dense peak the prefill matmuls reach. */
  prefillMfu: 0.6,
  /** Per-step scheduler, sampler and launch overhead: the real lab's 11.3 ms batch-1 step − 8.03 ms floor. */
  stepOverheadS: 0.00327,
  gpuMemoryUtilization: 0.9,
  /** Mean of the sampled output length (geometric) when a request does not set ignore_eos. */
  eosMeanTokens: 256,
  seed: 0,
} as const;

/** Acceptance per draft token when a speculative setup does not state one (an assumption, stated with it). */
export const SPECULATIVE_DEFAULT_ACCEPTANCE = 0.7;

export interface EngineOptions {
  setup: Setup;
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  /** Default: setup.server.max_model_len, else the model's max_position_embeddings. */
  maxModelLen?: number;
  prefixCaching?: boolean;
  prefillMfu?: number;
  stepOverheadS?: number;
  gpuMemoryUtilization?: number;
  /** Override the pool size in 16-token blocks (default: the kv-pool prediction). */
  numGpuBlocks?: number;
  eosMeanTokens?: number;
  seed?: number;
  /** Speculative decoding (default: the setup's `speculative:` key, else none). */
  speculative?: SpeculativeConfig;
}

/**
 * Speculative decoding in the engine: each decoding request schedules 1 + k tokens (its last token
 * and k drafts), the step verifies them all, and a prefix of the drafts is accepted with vLLM's
 * per-position rates (p_i = P(position i accepted)), plus the bonus token. The k draft passes add
 * their time to the step (physics/speculative.ts, draftPassSeconds).
 */
export interface SpeculativeConfig {
  k: number;
  /** p_1 ≥ … ≥ p_k */
  perPosition: number[];
  draft: Draft;
  /** Per draft pass, s (default 0). */
  draftOverheadS?: number;
}

/** The step's cost terms (weights, KV, FLOPs, communication per GPU) are the setup's StepShape. */
export interface EngineConfig extends StepShape {
  setup: Setup;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  maxModelLen: number;
  prefixCaching: boolean;
  prefillMfu: number;
  stepOverheadS: number;
  gpuMemoryUtilization: number;
  numGpuBlocks: number;
  eosMeanTokens: number;
  seed: number;
  blockSize: number;
  pool: KvPool;
  tensorParallel: number;
  pipelineParallel: number;
  vocab: number;
  speculative?: SpeculativeConfig;
}

/** The setup's `speculative: {k, acceptance, draft}` as the engine runs it (no acceptance: every draft rejected is not assumed; 0.7). */
function speculativeOfSetup(setup: Setup): SpeculativeConfig | undefined {
  const v = setup.server?.speculative as { k?: unknown; acceptance?: unknown; draft?: unknown } | undefined;
  if (!v || typeof v.k !== 'number' || !(v.k >= 1)) return undefined;
  const a = v.acceptance;
  const acc: Acceptance =
    typeof a === 'number' || Array.isArray(a) ? (a as Acceptance) : (numberOf(a) ?? SPECULATIVE_DEFAULT_ACCEPTANCE);
  const model = typeof v.draft === 'string' ? findModel(v.draft) : undefined;
  const params = numberOf((v.draft as { params?: unknown } | undefined)?.params);
  return {
    k: Math.floor(v.k),
    perPosition: perPosition(Math.floor(v.k), acc),
    draft: model ? { model } : { params: params ?? 0 },
  };
}

/** Fill every option from the setup (its server knobs) and the defaults. */
function resolveEngineConfig(opts: EngineOptions): EngineConfig {
  const { setup } = opts;
  const srv = setup.server ?? {};
  const util =
    opts.gpuMemoryUtilization ?? numberOf(srv.gpu_memory_utilization) ?? ENGINE_DEFAULTS.gpuMemoryUtilization;
  const maxModelLen = Math.floor(opts.maxModelLen ?? numberOf(srv.max_model_len) ?? setup.model.maxPosition);
  const pool = kvPool(setup, { gpuMemoryUtilization: util, maxModelLen });
  const m = setup.model;
  // Several GPUs: one GPU's share of the reads and FLOPs (stepShape); the pipeline's stages run
  // one after another for a batch (the sim keeps one batch in flight: the whole bubble, where vLLM
  // may overlap up to pp batches), and the all-reduces and stage sends add to every step.
  const par = parallelOf(setup);
  const tp = par.tp;
  const served = vllmServerDefaults(setup.gpu);
  const cfg: EngineConfig = {
    setup,
    maxNumSeqs: Math.floor(opts.maxNumSeqs ?? numberOf(srv.max_num_seqs) ?? served.maxNumSeqs),
    maxNumBatchedTokens: Math.floor(
      opts.maxNumBatchedTokens ?? numberOf(srv.max_num_batched_tokens) ?? served.maxNumBatchedTokens,
    ),
    maxModelLen,
    prefixCaching:
      opts.prefixCaching ??
      (typeof srv.prefix_caching === 'boolean' ? srv.prefix_caching : ENGINE_DEFAULTS.prefixCaching),
    prefillMfu: opts.prefillMfu ?? ENGINE_DEFAULTS.prefillMfu,
    stepOverheadS: opts.stepOverheadS ?? ENGINE_DEFAULTS.stepOverheadS,
    gpuMemoryUtilization: util,
    numGpuBlocks: Math.floor(opts.numGpuBlocks ?? pool.blocks),
    eosMeanTokens: opts.eosMeanTokens ?? ENGINE_DEFAULTS.eosMeanTokens,
    seed: opts.seed ?? ENGINE_DEFAULTS.seed,
    blockSize: BS,
    pool,
    ...stepShape(setup),
    tensorParallel: tp,
    pipelineParallel: par.pp,
    vocab: m.vocab,
    speculative: opts.speculative ?? speculativeOfSetup(setup),
  };
  if (!Number.isFinite(cfg.commFixedS + cfg.commPerTokenS))
    throw new RangeError(
      `${setup.gpu.id} has no interconnect in the catalog for tensor_parallel ${tp} × pipeline_parallel ${par.pp}: give link_bandwidth and link_latency in the gpu`,
    );
  if (!(cfg.prefillMfu > 0 && cfg.prefillMfu <= 1))
    throw new RangeError(`prefill_mfu must be in (0, 1], got ${cfg.prefillMfu}: write e.g. prefill_mfu: 0.6`);
  if (!(cfg.stepOverheadS >= 0)) throw new RangeError(`step_overhead must be ≥ 0, got ${cfg.stepOverheadS}`);
  if (!(cfg.maxNumSeqs >= 1)) throw new RangeError(`max_num_seqs must be ≥ 1, got ${cfg.maxNumSeqs}`);
  if (!(cfg.maxNumBatchedTokens >= 1))
    throw new RangeError(`max_num_batched_tokens must be ≥ 1, got ${cfg.maxNumBatchedTokens}`);
  if (!(cfg.numGpuBlocks >= 1))
    throw new RangeError(
      `the KV pool holds no block (${cfg.numGpuBlocks}): the weights do not leave room on ${setup.gpu.id}`,
    );
  return cfg;
}

export type FinishReason = 'length' | 'stop' | 'abort';

export interface AddRequest {
  /** Default: "req-N". */
  id?: string;
  prompt: ArrayLike<number>;
  maxTokens: number;
  minTokens?: number;
  ignoreEos?: boolean;
  /** Virtual arrival time, s (default: the engine's now). */
  arrival?: number;
  /**
   * The prefix-cache hashes of the prompt's full blocks, when the caller names them itself
   * (generatedPromptHashes): the prompt's ids are then never read, so `prompt` may be just its
   * length. Only on an engine without token ids.
   */
  blockHashes?: readonly number[];
}

export class SimRequest {
  readonly prompt: ArrayLike<number>;
  readonly numPrompt: number;
  /** The output token ids (empty when the engine keeps none: SimEngine.setTokenIds). */
  readonly output: number[] = [];
  /** Output tokens sampled so far. */
  numOutput = 0;
  /** Output length at which EOS is sampled (Infinity with ignore_eos). */
  readonly eosAt: number;
  status: 'waiting' | 'running' | 'finished' = 'waiting';
  numComputed = 0;
  blocks: number[] = [];
  /** Hashes of the full blocks known so far (prefix caching on). */
  blockHashes: number[] = [];
  /** Number of this request's full blocks already offered to the cache. */
  numCachedBlocks = 0;
  /** Prompt tokens served from the prefix cache at the first scheduling. */
  cachedTokens = 0;
  firstScheduled = NaN;
  firstTokenTime = NaN;
  /** Time the previous token left (for inter-token latencies). */
  prevTokenTime = NaN;
  lastTokenTime = NaN;
  finishTime = NaN;
  finishReason?: FinishReason;
  numPreemptions = 0;
  promptCounted = false;
  /** Free for the caller (the load generator keeps its record here, the server its stream). */
  tag: unknown = undefined;
  // Lazy decoding (SimEngine.setTokenIds(false)): see the engine's lz* fields.
  /** In the engine's set of steady decoders: numComputed, numOutput and the token times are those at the start of step lzStep. */
  lz = false;
  lzStep = 0;
  /** The step of the first token this request got in bulk since its last event (TokenEvent.lazyFrom). */
  lzSince = 0;
  /** Tokens got in bulk and not yet reported in an event (TokenEvent.lazy). */
  lzPending = 0;
  /** The step of its latest token (the exact step's mark, read when it rebuilds the steady decoders). */
  lzEmit = -1;
  /** The step of its last token (steady decoders only), and its slot in its allocation bucket. */
  lzFinish = 0;
  lzBucket = 0;
  lzBucketPos = 0;
  /** Order in the running list (increasing with each admission; the running list is in this order). */
  runSeq = 0;
  /** Unique in its engine: names its output blocks in the prefix cache when the engine keeps no token ids. */
  uid = 0;
  constructor(
    readonly id: string,
    prompt: ArrayLike<number>,
    readonly maxTokens: number,
    readonly minTokens: number,
    readonly ignoreEos: boolean,
    readonly arrival: number,
    eosAt: number,
  ) {
    this.prompt = prompt;
    this.numPrompt = prompt.length;
    this.eosAt = eosAt;
  }
  get numTokens(): number {
    return this.numPrompt + this.numOutput;
  }
  tokenAt(p: number): number {
    return p < this.numPrompt ? this.prompt[p] : this.output[p - this.numPrompt];
  }
}

export interface TokenEvent {
  req: SimRequest;
  token: number;
  /** True when this token ends the request (req.finishReason says why). */
  finished: boolean;
  /**
   * Lazy decoding: tokens the request got in bulk (StepResult.bulk) since its previous event, one at
   * the end of each of this engine's steps lazyFrom, lazyFrom + 1, …; the last of them at
   * req.prevTokenTime. 0 otherwise.
   */
  lazy: number;
  lazyFrom: number;
}

export interface StepResult {
  start: number;
  duration: number;
  end: number;
  numSeqs: number;
  prefillTokens: number;
  decodeTokens: number;
  /** Time the step would take reading only the weights and the decoding requests' KV, s. */
  decodeMemS: number;
  /** max(memory, compute) − decodeMemS: what the prefills in this step cost, s. */
  prefillExtraS: number;
  overheadS: number;
  /** Tokens that left this step, in schedule order, at time `end`. */
  tokens: TokenEvent[];
  preempted: number;
  /** Requests in the engine (running + waiting) while the step ran. */
  inSystem: number;
  /** Requests dropped because they cannot fit even in an empty pool (finishReason 'abort'). */
  dropped: SimRequest[];
  /**
   * Lazy decoding (setTokenIds(false)): steady decoders that got one token at `end` with no event,
   * each of whose previous token left at `start`; they sit among the first `bulkAt` events in
   * schedule order (those events' tokens have that gap too, or are first tokens). 0 otherwise.
   */
  bulk: number;
  bulkAt: number;
  /**
   * When one of those events has a gap of its own (a recompute after a preemption): the bulk tokens
   * right before each of the first bulkAt events, then those after them (bulkAt + 1 numbers, summing
   * to bulk). Empty otherwise.
   */
  bulkBefore: readonly number[];
  /** The replica that ran the step (0 on one engine) and the step's index in it. */
  replica: number;
  index: number;
}

/**
 * A run of consecutive pure-decode steps (SimEngine.decodeRun): the same batch, one token per
 * request per step, nothing admitted, preempted or finished before the last step. Equivalent, step
 * for step, to calling step() `steps` times. Its arrays are scratch, valid until the next call.
 */
export interface DecodeRun {
  steps: number;
  /** The batch in schedule order; each request got one token at every step end. */
  reqs: SimRequest[];
  numSeqs: number;
  /** Requests in the engine (running + waiting) during every step of the run. */
  inSystem: number;
  overheadS: number;
  /** Per step k < steps: end time, duration, decode memory time, prefill extra (as in StepResult). */
  ends: Float64Array;
  durations: Float64Array;
  decodeMemS: Float64Array;
  prefillExtraS: Float64Array;
  /** Requests that finished at the last step, in schedule order. */
  finished: SimRequest[];
}

/** Speculative decoding, as vLLM counts it (SpecDecodingStats): drafts, drafted and accepted tokens, accepted per position. */
export interface SpecCounters {
  drafts: number;
  draftTokens: number;
  acceptedTokens: number;
  acceptedPerPos: number[];
}

export interface EngineCounters {
  prefixQueries: number;
  prefixHits: number;
  preemptions: number;
  promptTokens: number;
  generationTokens: number;
  finished: number;
  steps: number;
  busyS: number;
}

const zeroCounters = (): EngineCounters => ({
  prefixQueries: 0,
  prefixHits: 0,
  preemptions: 0,
  promptTokens: 0,
  generationTokens: 0,
  finished: 0,
  steps: 0,
  busyS: 0,
});

/** A FIFO with cheap push, shift and unshift. */
class Deque<T> {
  private buf: (T | undefined)[] = new Array(16);
  private head = 0;
  length = 0;
  push(v: T) {
    if (this.length === this.buf.length) this.grow();
    this.buf[(this.head + this.length) % this.buf.length] = v;
    this.length++;
  }
  unshift(v: T) {
    if (this.length === this.buf.length) this.grow();
    this.head = (this.head - 1 + this.buf.length) % this.buf.length;
    this.buf[this.head] = v;
    this.length++;
  }
  peek(): T | undefined {
    return this.length ? this.buf[this.head] : undefined;
  }
  shift(): T | undefined {
    if (!this.length) return undefined;
    const v = this.buf[this.head];
    this.buf[this.head] = undefined;
    this.head = (this.head + 1) % this.buf.length;
    this.length--;
    return v;
  }
  remove(v: T): boolean {
    const items = this.toArray();
    const i = items.indexOf(v);
    if (i < 0) return false;
    items.splice(i, 1);
    this.buf = new Array(Math.max(16, this.buf.length));
    this.head = 0;
    this.length = 0;
    for (const x of items) this.push(x);
    return true;
  }
  toArray(): T[] {
    const out: T[] = [];
    for (let i = 0; i < this.length; i++) out.push(this.buf[(this.head + i) % this.buf.length] as T);
    return out;
  }
  private grow() {
    const items = this.toArray();
    this.buf = new Array(this.buf.length * 2);
    this.head = 0;
    for (let i = 0; i < items.length; i++) this.buf[i] = items[i];
  }
}

/**
 * Block hash → block id, the prefix cache's index: open addressing on one typed array (linear
 * probing). A block that loses its hash (taken from the free list) leaves its entry behind: an entry
 * counts only while its block still holds that hash (holder[block] === hash, the engine's
 * hashOfBlock), so eviction costs no probe; when live and stale entries fill half the table it is
 * rebuilt from the holders. Same answers as a Map<number, number> kept exact.
 */
class HashIndex {
  /** Slot i: its key at 2i (NaN: empty), its value at 2i + 1 (one cache line for both). */
  private slots: Float64Array;
  private readonly mask: number;
  private readonly shift: number;
  private size = 0;
  private readonly limit: number;
  constructor(
    maxEntries: number,
    private readonly holder: Float64Array,
  ) {
    let bits = 4;
    while (1 << bits < 4 * maxEntries && bits < 30) bits++;
    this.slots = new Float64Array(2 << bits).fill(NaN);
    this.mask = (1 << bits) - 1;
    this.shift = 32 - bits;
    this.limit = (1 << bits) >>> 1;
  }
  private home(h: number): number {
    return Math.imul((h >>> 0) ^ Math.floor(h / 4294967296), 0x9e3779b1) >>> this.shift;
  }
  /** The block holding hash h, or -1. */
  get(h: number): number {
    const slots = this.slots;
    for (let i = this.home(h); ; i = (i + 1) & this.mask) {
      const k = slots[2 * i];
      if (k === h) {
        const b = slots[2 * i + 1];
        return this.holder[b] === h ? b : -1;
      }
      if (k !== k) return -1;
    }
  }
  /** Block v takes hash h (holder[v] = h) unless a block holds it already; true when it did. */
  claim(h: number, v: number): boolean {
    const slots = this.slots;
    for (let i = this.home(h); ; i = (i + 1) & this.mask) {
      const k = slots[2 * i];
      if (k === h) {
        if (this.holder[slots[2 * i + 1]] === h) return false;
        slots[2 * i + 1] = v;
        this.holder[v] = h;
        return true;
      }
      if (k !== k) {
        slots[2 * i] = h;
        slots[2 * i + 1] = v;
        this.holder[v] = h;
        if (++this.size > this.limit) this.rebuild();
        return true;
      }
    }
  }
  /** Keep only the entries whose block still holds their hash. */
  private rebuild() {
    const slots = this.slots;
    slots.fill(NaN);
    this.size = 0;
    const holder = this.holder;
    for (let b = 0; b < holder.length; b++) {
      const h = holder[b];
      if (h !== h) continue;
      for (let i = this.home(h); ; i = (i + 1) & this.mask) {
        if (slots[2 * i] !== slots[2 * i]) {
          slots[2 * i] = h;
          slots[2 * i + 1] = b;
          break;
        }
      }
      this.size++;
    }
  }
}

/** Hash of a full block: (parent hash, 16 token ids) → a 53-bit integer (two 32-bit FNV-style lanes). */
function blockHash(parent: number, req: SimRequest, start: number, size: number): number {
  if (size === BS && start + size <= req.numPrompt) return promptBlockHash(parent, req.prompt, start);
  let h1 = (2166136261 ^ (parent >>> 0)) >>> 0;
  let h2 = (0x9e3779b9 ^ Math.floor(parent / 4294967296)) >>> 0;
  for (let i = 0; i < size; i++) {
    const t = req.tokenAt(start + i) | 0;
    h1 = Math.imul(h1 ^ t, 16777619);
    h2 = Math.imul(h2 ^ t, 0x85ebca6b) ^ (h2 >>> 13);
  }
  h2 = Math.imul(h2 ^ (h2 >>> 16), 0xc2b2ae35);
  return (h1 >>> 0) * 2097152 + ((h2 >>> 0) >>> 11);
}

/** blockHash of a full block inside the prompt, read straight from the prompt's array. */
function promptBlockHash(parent: number, prompt: ArrayLike<number>, start: number): number {
  let h1 = (2166136261 ^ (parent >>> 0)) >>> 0;
  let h2 = (0x9e3779b9 ^ Math.floor(parent / 4294967296)) >>> 0;
  for (let i = start; i < start + BS; i++) {
    const t = prompt[i] | 0;
    h1 = Math.imul(h1 ^ t, 16777619);
    h2 = Math.imul(h2 ^ t, 0x85ebca6b) ^ (h2 >>> 13);
  }
  h2 = Math.imul(h2 ^ (h2 >>> 16), 0xc2b2ae35);
  return (h1 >>> 0) * 2097152 + ((h2 >>> 0) >>> 11);
}

/**
 * The prefix-cache hashes of a prompt of `len` random ids that a generator (promptGenerator's, by
 * seed and vocabulary) drew from position `offset` of its stream, named by (seed, vocab, offset,
 * block) instead of hashed from the ids. Equal where the ids' hashes are equal: two such prompts
 * share block k exactly when they start at the same place of the same stream (the prefix-cache trap
 * of a seed reused across points); different places, streams or generators share no 16 ids in a
 * row (2⁻²⁷⁰ a block), and the generator's ids never equal a plan's (which draws from another range).
 */
export function generatedPromptHashes(seed: number, vocab: number, offset: number, len: number): number[] {
  const out: number[] = [];
  let parent = 0;
  for (let k = 0; k < Math.floor(len / BS); k++) {
    let h1 = (0x811c9dc5 ^ 0x67656e ^ (parent >>> 0)) >>> 0;
    let h2 = (0x9e3779b9 ^ Math.floor(parent / 4294967296)) >>> 0;
    const words = k ? [k] : [seed >>> 0, vocab | 0, offset >>> 0, Math.floor(offset / 4294967296)];
    for (const t of words) {
      h1 = Math.imul(h1 ^ t, 16777619);
      h2 = Math.imul(h2 ^ t, 0x85ebca6b) ^ (h2 >>> 13);
    }
    h2 = Math.imul(h2 ^ (h2 >>> 16), 0xc2b2ae35);
    parent = (h1 >>> 0) * 2097152 + ((h2 >>> 0) >>> 11);
    out.push(parent);
  }
  return out;
}

/**
 * The prefix-cache name of a full block that holds output tokens, when the engine keeps no token
 * ids: (parent hash, the request's uid, the block's index) → 53 bits. Only the request that wrote
 * such a block can meet it again (its recompute after a preemption, through its own block hashes),
 * as with the ids: no prompt repeats sampled text, so which name a block has never changes a hit.
 */
function outputBlockHash(parent: number, uid: number, k: number): number {
  let h1 = (0x811c9dc5 ^ 0x6f757470 ^ (parent >>> 0)) >>> 0;
  let h2 = (0x9e3779b9 ^ Math.floor(parent / 4294967296)) >>> 0;
  h1 = Math.imul(h1 ^ (uid | 0), 16777619);
  h2 = Math.imul(h2 ^ (uid | 0), 0x85ebca6b) ^ (h2 >>> 13);
  h1 = Math.imul(h1 ^ Math.floor(uid / 4294967296), 16777619);
  h2 = Math.imul(h2 ^ Math.floor(uid / 4294967296), 0x85ebca6b) ^ (h2 >>> 13);
  h1 = Math.imul(h1 ^ k, 16777619);
  h2 = Math.imul(h2 ^ k, 0x85ebca6b) ^ (h2 >>> 13);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 0xc2b2ae35);
  return (h1 >>> 0) * 2097152 + ((h2 >>> 0) >>> 11);
}

/**
 * The engine. `add` queues a request, `step` runs one scheduler iteration and advances `now` by the
 * step's duration; `advanceTo` moves an idle engine's clock forward (to the next arrival).
 */
export class SimEngine {
  readonly cfg: EngineConfig;
  now = 0;
  readonly running: SimRequest[] = [];
  private readonly waitingQ = new Deque<SimRequest>();
  private readonly byId = new Map<string, SimRequest>();
  private nextId = 0;
  private readonly rng: Mulberry32;
  /** Draws the accepted drafts (its own stream, so a plain engine's sampling is unchanged). */
  private readonly specRng: Mulberry32;
  /** Speculative decoding's counters (all zero without it). */
  readonly spec: SpecCounters;
  /** Drafts scheduled this step, per scheduled slot (0 for a prefill or a plain decode). */
  private sDraft: number[] = [];

  // Block pool: refcounts, cached hashes (NaN = none), and a doubly linked free list in LRU order.
  private readonly refcnt: Int32Array;
  private readonly hashOfBlock: Float64Array;
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private freeHead = -1;
  private freeTail = -1;
  private freeCount = 0;
  private readonly cache: HashIndex;

  readonly counters: EngineCounters = zeroCounters();
  /** (queried, hit) tokens of the last 1,000 scheduled requests, for the rolling hit rate vLLM logs. */
  private readonly recentQ = new Float64Array(1000);
  private readonly recentH = new Float64Array(1000);
  private recentN = 0;
  private recentSumQ = 0;
  private recentSumH = 0;

  /** Which replica of a data-parallel endpoint this engine is (StepResult.replica). */
  replicaIndex = 0;
  /** Steps this engine has run: the index of the next one (StepResult.index). */
  private stepNo = 0;
  private nextRunSeq = 0;
  private nextUid = 0;

  // Lazy decoding (setTokenIds(false)). The steady decoders (running, decoding, a token at the
  // step before) each get one token every step, so they advance in bulk: a step visits only the
  // other running requests, the steady decoders that need a block (one in 16 each step: a bucket
  // per step modulo the block size) and those whose last token it is (a list per step).
  private ids = true;
  /**
   * Steps run without token ids: in bulk (of which some preempted, some had a recompute with earlier
   * output end in them), and those that visited every running request.
   */
  readonly lazySteps = { bulk: 0, preempting: 0, irregular: 0, full: 0 };
  /** Start of the step before the current one (a steady decoder's token before last). */
  private lastStepStart = NaN;
  private lzCount = 0;
  /** Σ over the steady decoders of their context at the current step (computed + 1). */
  private lzCtx = 0;
  private readonly lzBuckets: SimRequest[][] = Array.from({ length: BS }, () => []);
  private readonly lzEnds = new Map<number, SimRequest[]>();
  /** The running requests that are not steady decoders, in schedule order. */
  private lzOthers: SimRequest[] = [];
  private readonly lzFin: SimRequest[] = [];
  private readonly lzJoin: SimRequest[] = [];
  private readonly lzResult: StepResult = {
    start: 0,
    duration: 0,
    end: 0,
    numSeqs: 0,
    prefillTokens: 0,
    decodeTokens: 0,
    decodeMemS: 0,
    prefillExtraS: 0,
    overheadS: 0,
    tokens: [],
    preempted: 0,
    inSystem: 0,
    dropped: [],
    bulk: 0,
    bulkAt: 0,
    bulkBefore: [],
    replica: 0,
    index: 0,
  };
  private readonly lzWalk: SimRequest[] = [];
  /** admitWaiting's prefix hits, block by block. */
  private hitIds = new Int32Array(256);
  private readonly lzSplit: number[] = [];

  // step(true)'s token list and events, reused from step to step.
  private readonly scratchTokens: TokenEvent[] = [];
  private readonly eventPool: TokenEvent[] = [];
  // Scratch arrays for one step.
  private sReq: SimRequest[] = [];
  private sNew: number[] = [];
  private sStart: number[] = [];
  // Scratch for decodeRun.
  private readonly run: DecodeRun = {
    steps: 0,
    reqs: [],
    numSeqs: 0,
    inSystem: 0,
    overheadS: 0,
    ends: new Float64Array(0),
    durations: new Float64Array(0),
    decodeMemS: new Float64Array(0),
    prefillExtraS: new Float64Array(0),
    finished: [],
  };

  constructor(opts: EngineOptions | EngineConfig) {
    this.cfg =
      'pool' in opts && 'bandwidth' in opts ? (opts as EngineConfig) : resolveEngineConfig(opts as EngineOptions);
    const n = this.cfg.numGpuBlocks;
    this.refcnt = new Int32Array(n);
    this.hashOfBlock = new Float64Array(n).fill(NaN);
    this.prev = new Int32Array(n);
    this.next = new Int32Array(n);
    this.cache = new HashIndex(n, this.hashOfBlock);
    for (let b = 0; b < n; b++) this.freeAppend(b);
    this.rng = new Mulberry32(this.cfg.seed ^ 0x5eed);
    this.specRng = new Mulberry32((this.cfg.seed ^ 0x5bec) >>> 0);
    this.spec = {
      drafts: 0,
      draftTokens: 0,
      acceptedTokens: 0,
      acceptedPerPos: new Array(this.cfg.speculative?.k ?? 0).fill(0),
    };
  }

  /** Replicas behind this engine (one; see DpEngine). */
  get replicaCount(): number {
    return 1;
  }
  get waiting(): number {
    return this.waitingQ.length;
  }
  get numRunning(): number {
    return this.running.length;
  }
  hasWork(): boolean {
    return this.running.length > 0 || this.waitingQ.length > 0;
  }
  /** Fraction of the pool's blocks in use (cached free blocks count as free, as in vLLM). */
  get kvUsage(): number {
    return 1 - this.freeCount / this.cfg.numGpuBlocks;
  }
  get freeBlocks(): number {
    return this.freeCount;
  }
  /** Prefix hit rate over the last 1,000 scheduled requests (what vLLM's stats line shows). */
  get rollingHitRate(): number {
    return this.recentSumQ > 0 ? this.recentSumH / this.recentSumQ : 0;
  }
  get(id: string): SimRequest | undefined {
    return this.byId.get(id);
  }

  /** Move an idle engine's clock forward (never back). */
  advanceTo(t: number) {
    if (t > this.now) this.now = t;
  }

  /** Sampled output length at which EOS appears: geometric with the configured mean, at least 1. */
  private sampleEos(): number {
    const p = 1 / Math.max(1, this.cfg.eosMeanTokens);
    return 1 + Math.floor(Math.log(1 - this.rng.next()) / Math.log(1 - p + 1e-12));
  }

  add(r: AddRequest): SimRequest {
    const id = r.id ?? `req-${this.nextId++}`;
    if (this.byId.has(id)) throw new Error(`request id ${id} is already in the engine`);
    if (r.prompt.length < 1) throw new RangeError('a request needs at least one prompt token');
    const maxTokens = Math.max(1, Math.floor(r.maxTokens));
    const minTokens = Math.max(0, Math.floor(r.minTokens ?? 0));
    const eos = r.ignoreEos ? Infinity : Math.max(minTokens, this.sampleEos());
    const req = new SimRequest(id, r.prompt, maxTokens, minTokens, !!r.ignoreEos, r.arrival ?? this.now, eos);
    req.uid = this.nextUid++;
    if (r.blockHashes) {
      if (this.ids) throw new Error('block hashes without the prompt need an engine without token ids');
      if (this.cfg.prefixCaching) {
        if (r.blockHashes.length !== Math.floor(req.numPrompt / BS))
          throw new RangeError(`${r.blockHashes.length} block hashes for a prompt of ${req.numPrompt} tokens`);
        for (const h of r.blockHashes) req.blockHashes.push(h);
      }
    } else if (this.cfg.prefixCaching) {
      const full = Math.floor(req.numPrompt / BS);
      let parent = 0;
      for (let b = 0; b < full; b++) {
        parent = promptBlockHash(parent, req.prompt, b * BS);
        req.blockHashes.push(parent);
      }
    }
    this.byId.set(id, req);
    this.waitingQ.push(req);
    return req;
  }

  /** Remove a request (client went away). Its blocks return to the pool. */
  abort(id: string): boolean {
    const req = this.byId.get(id);
    if (!req || req.status === 'finished') return false;
    if (!this.ids) this.lzFlush();
    if (req.status === 'running') {
      const i = this.running.indexOf(req);
      if (i >= 0) this.running.splice(i, 1);
    } else this.waitingQ.remove(req);
    this.freeRequestBlocks(req);
    req.status = 'finished';
    req.finishReason = 'abort';
    req.finishTime = this.now;
    this.byId.delete(id);
    if (!this.ids) this.lzOthers = this.running.slice();
    return true;
  }

  // ---- block pool ----
  private freeAppend(b: number) {
    this.prev[b] = this.freeTail;
    this.next[b] = -1;
    if (this.freeTail >= 0) this.next[this.freeTail] = b;
    else this.freeHead = b;
    this.freeTail = b;
    this.freeCount++;
  }
  private freeRemove(b: number) {
    const p = this.prev[b];
    const n = this.next[b];
    if (p >= 0) this.next[p] = n;
    else this.freeHead = n;
    if (n >= 0) this.prev[n] = p;
    else this.freeTail = p;
    this.freeCount--;
  }
  /** Take the least recently freed block, evicting its cached hash. */
  private takeFree(): number {
    const b = this.freeHead;
    this.freeRemove(b);
    const h = this.hashOfBlock[b];
    // Its hash leaves with it (the index's entry, now stale, no longer counts).
    if (h === h) this.hashOfBlock[b] = NaN;
    this.refcnt[b] = 1;
    return b;
  }
  private allocate(req: SimRequest, n: number): boolean {
    const need = Math.ceil((req.numComputed + n) / BS) - req.blocks.length;
    if (need <= 0) return true;
    if (need > this.freeCount) return false;
    for (let k = 0; k < need; k++) req.blocks.push(this.takeFree());
    return true;
  }
  private freeRequestBlocks(req: SimRequest) {
    // Tail blocks first into the free list, so they are evicted before the shared prefix.
    for (let i = req.blocks.length - 1; i >= 0; i--) {
      const b = req.blocks[i];
      if (--this.refcnt[b] === 0) {
        if (!this.cfg.prefixCaching) this.hashOfBlock[b] = NaN;
        this.freeAppend(b);
      }
    }
    req.blocks = [];
    req.numCachedBlocks = 0;
  }
  /** Offer a request's newly full blocks to the prefix cache. */
  private cacheFullBlocks(req: SimRequest) {
    const full = Math.min(Math.floor(req.numComputed / BS), req.blocks.length);
    for (let b = req.numCachedBlocks; b < full; b++) {
      while (req.blockHashes.length <= b) req.blockHashes.push(this.hashAt(req, req.blockHashes.length));
      const h = req.blockHashes[b];
      const blk = req.blocks[b];
      if (this.hashOfBlock[blk] !== this.hashOfBlock[blk]) this.cache.claim(h, blk);
    }
    if (full > req.numCachedBlocks) req.numCachedBlocks = full;
  }

  private preempt(req: SimRequest) {
    this.freeRequestBlocks(req);
    req.numComputed = 0;
    req.status = 'waiting';
    req.numPreemptions++;
    this.counters.preemptions++;
    this.waitingQ.unshift(req);
  }

  /**
   * Phase 1 for one running request: blocks for its next n tokens, preempting from the end of the
   * running list until they fit (recompute preemption, as vLLM's scheduler does). Returns how many
   * it preempted; when r itself was among them it is waiting again and phase 1 stops there.
   * `lazy`: the victims leave lazy decoding's sets too (lzPreempt).
   */
  private allocateOrPreempt(r: SimRequest, n: number, lazy: boolean): number {
    let preempted = 0;
    while (!this.allocate(r, n)) {
      const victim = this.running.pop()!;
      if (lazy) this.lzPreempt(victim);
      else this.preempt(victim);
      preempted++;
      if (victim === r) break;
    }
    return preempted;
  }

  /** Slot k of this step: request r computes its next n tokens (drafts of them speculative). */
  private setSlot(k: number, r: SimRequest, n: number, drafts: number) {
    this.sReq[k] = r;
    this.sNew[k] = n;
    this.sStart[k] = r.numComputed;
    this.sDraft[k] = drafts;
  }

  private recordQuery(q: number, h: number) {
    const i = this.recentN % 1000;
    if (this.recentN >= 1000) {
      this.recentSumQ -= this.recentQ[i];
      this.recentSumH -= this.recentH[i];
    }
    this.recentQ[i] = q;
    this.recentH[i] = h;
    this.recentSumQ += q;
    this.recentSumH += h;
    this.recentN++;
    this.counters.prefixQueries += q;
    this.counters.prefixHits += h;
  }

  /**
   * Phase 2 of a step: admit waiting requests into slots ns, ns + 1, … while the budget, the pool
   * and max_num_seqs allow, with a prefix-cache lookup on full blocks. Returns the new slot count.
   */
  private admitWaiting(ns: number, budget: number): number {
    const cfg = this.cfg;
    while (this.waitingQ.length && budget > 0 && this.running.length < cfg.maxNumSeqs) {
      const r = this.waitingQ.peek()!;
      // Prefix-cache lookup on full blocks; at least the last token is always computed.
      let hitBlocks = 0;
      let touchFree = 0;
      if (cfg.prefixCaching) {
        const maxHit = Math.floor((r.numTokens - 1) / BS);
        while (r.blockHashes.length < maxHit) r.blockHashes.push(this.hashAt(r, r.blockHashes.length));
        let hits = this.hitIds;
        if (hits.length < maxHit) hits = this.hitIds = new Int32Array(Math.max(maxHit, 2 * hits.length));
        for (; hitBlocks < maxHit; hitBlocks++) {
          const b = this.cache.get(r.blockHashes[hitBlocks]);
          if (b < 0) break;
          hits[hitBlocks] = b;
          if (this.refcnt[b] === 0) touchFree++;
        }
      }
      const computed = hitBlocks * BS;
      let n = r.numTokens - computed;
      if (n > budget) n = budget;
      const need = Math.ceil((computed + n) / BS) - hitBlocks;
      if (need > this.freeCount - touchFree) break;
      for (let k = 0; k < hitBlocks; k++) {
        const b = this.hitIds[k];
        if (this.refcnt[b] === 0) this.freeRemove(b);
        this.refcnt[b]++;
        r.blocks.push(b);
      }
      r.numComputed = computed;
      r.numCachedBlocks = hitBlocks;
      for (let k = 0; k < need; k++) r.blocks.push(this.takeFree());
      if (cfg.prefixCaching) this.recordQuery(r.numTokens, computed);
      if (r.firstScheduled !== r.firstScheduled) {
        r.firstScheduled = this.now;
        r.cachedTokens = computed;
      }
      this.waitingQ.shift();
      r.status = 'running';
      r.runSeq = this.nextRunSeq++;
      this.running.push(r);
      this.setSlot(ns, r, n, 0);
      ns++;
      budget -= n;
    }
    return ns;
  }

  /** What stepCost computed for the current step (overwritten by the next). */
  private readonly cost = { prefillTokens: 0, decodeTokens: 0, decodeMemS: 0, extraS: 0, duration: 0 };

  /**
   * Step time from physics for the slots 0 … ns − 1 of this step and, in lazy decoding, `steady`
   * steady decoders over `steadyCtx` tokens of context (each one token at s: s + 1 attention pairs).
   * The k draft passes over the decoding requests (speculative decoding) come before the verify step.
   */
  private stepCost(ns: number, steady: number, steadyCtx: number) {
    const cfg = this.cfg;
    const sReq = this.sReq;
    const sNew = this.sNew;
    const sStart = this.sStart;
    const sDraft = this.sDraft;
    let ctxAll = steadyCtx;
    let ctxDecode = steadyCtx;
    let tokens = steady;
    let attnPairs = steadyCtx;
    let prefillTokens = 0;
    let decodeTokens = steady;
    for (let k = 0; k < ns; k++) {
      const n = sNew[k];
      const s = sStart[k];
      ctxAll += s + n;
      tokens += n;
      attnPairs += n * s + (n * (n + 1)) / 2;
      if (n === 1 + sDraft[k] && s >= sReq[k].numPrompt) {
        decodeTokens++;
        ctxDecode += s + 1;
      } else prefillTokens += n;
    }
    const spec = cfg.speculative;
    const draftS =
      spec && decodeTokens
        ? spec.k *
          (draftPassSeconds(cfg.setup, spec.draft, ctxDecode, decodeTokens, cfg.prefillMfu) +
            (spec.draftOverheadS ?? 0))
        : 0;
    const memS = (cfg.weightsBytes + cfg.kvBytesPerToken * ctxAll) / cfg.bandwidth;
    const compS = (cfg.flopsPerToken * tokens + cfg.attnFlopsPerPair * attnPairs) / (cfg.peak * cfg.prefillMfu);
    const core = memS > compS ? memS : compS;
    const decodeMemS = decodeTokens ? (cfg.weightsBytes + cfg.kvBytesPerToken * ctxDecode) / cfg.bandwidth : 0;
    const busy = ns + steady > 0;
    const comm = busy ? cfg.commFixedS + cfg.commPerTokenS * tokens : 0;
    const c = this.cost;
    c.prefillTokens = prefillTokens;
    c.decodeTokens = decodeTokens;
    c.decodeMemS = decodeMemS;
    c.extraS = busy ? core + comm + draftS - decodeMemS : 0;
    c.duration = busy ? core + comm + draftS + cfg.stepOverheadS : 0;
    return c;
  }

  /**
   * One scheduler iteration. `reuse`: the result's `tokens` array and its events are scratch,
   * overwritten by the next step(true) (what a caller that reads them at once, such as the load
   * generator, saves: an object per token); the figures are the same either way.
   */
  step(reuse = false): StepResult | undefined {
    if (!this.hasWork()) return undefined;
    if (!this.ids) return this.stepLazy(reuse);
    const res = this.stepExact(reuse);
    this.stepNo++;
    return res;
  }

  private stepExact(reuse: boolean): StepResult {
    const cfg = this.cfg;
    const ids = this.ids;
    const stepNo = this.stepNo;
    const inSystem = this.running.length + this.waitingQ.length;
    let budget = cfg.maxNumBatchedTokens;
    const sReq = this.sReq;
    const sNew = this.sNew;
    let ns = 0;
    let preempted = 0;

    const spec = cfg.speculative;
    const sDraft = this.sDraft;
    // 1. Running requests, in order: decodes and unfinished chunked prefills.
    for (let i = 0; i < this.running.length && budget > 0;) {
      const r = this.running[i];
      let n = r.numTokens - r.numComputed;
      // Speculative: a decode also verifies k drafts (fewer near max_tokens, max_model_len or the budget).
      let drafts = 0;
      if (spec && n === 1 && r.numComputed >= r.numPrompt) {
        drafts = Math.min(
          spec.k,
          r.maxTokens - r.numOutput - 1,
          cfg.maxModelLen - r.numTokens - 1,
          r.eosAt - r.numOutput - 1,
          budget - 1,
        );
        if (drafts < 0) drafts = 0;
        n += drafts;
      }
      if (n > budget) n = budget;
      preempted += this.allocateOrPreempt(r, n, false);
      if (r.status !== 'running') break;
      this.setSlot(ns, r, n, drafts);
      ns++;
      budget -= n;
      i++;
    }

    // 2. Waiting requests (none when this step preempted), while the budget, the pool and max_num_seqs allow.
    if (!preempted) ns = this.admitWaiting(ns, budget);

    // A request that cannot fit even in an empty pool would wait forever: drop it.
    const dropped: SimRequest[] = [];
    if (ns === 0 && this.running.length === 0 && this.waitingQ.length) {
      const r = this.waitingQ.peek()!;
      this.abort(r.id);
      dropped.push(r);
    }

    // 3. Step time from physics.
    const cost = this.stepCost(ns, 0, 0);
    const duration = cost.duration;
    const start = this.now;
    const end = start + duration;
    this.now = end;
    this.counters.steps++;
    this.counters.busyS += duration;

    // 4. Commit: advance computed tokens, sample where a request has computed all its tokens.
    const out: TokenEvent[] = reuse ? this.scratchTokens : [];
    if (reuse) out.length = 0;
    const pool = this.eventPool;
    let anyFinished = false;
    for (let k = 0; k < ns; k++) {
      const r = sReq[k];
      const drafts = sDraft[k];
      if (drafts > 0) {
        this.commitSpeculative(r, drafts, end, out);
        if (r.status === 'finished') anyFinished = true;
        continue;
      }
      r.numComputed += sNew[k];
      if (cfg.prefixCaching && r.numComputed >= (r.numCachedBlocks + 1) * BS) this.cacheFullBlocks(r);
      if (r.numComputed < r.numTokens) continue;
      const tok = this.sampleToken();
      if (r.numOutput === 0) {
        r.firstTokenTime = end;
      }
      if (!r.promptCounted) {
        r.promptCounted = true;
        this.counters.promptTokens += r.numPrompt;
      }
      if (ids) r.output.push(tok);
      const len = ++r.numOutput;
      r.prevTokenTime = r.lastTokenTime;
      r.lastTokenTime = end;
      this.counters.generationTokens++;
      const finished = len >= r.maxTokens || r.numTokens >= cfg.maxModelLen || len >= r.eosAt;
      if (finished) {
        this.finish(r, end);
        anyFinished = true;
      }
      const lazy = r.lzPending;
      r.lzPending = 0;
      r.lzEmit = stepNo;
      if (reuse) {
        const j = out.length;
        let ev = pool[j];
        if (ev === undefined) pool[j] = ev = { req: r, token: tok, finished, lazy, lazyFrom: r.lzSince };
        else {
          ev.req = r;
          ev.token = tok;
          ev.finished = finished;
          ev.lazy = lazy;
          ev.lazyFrom = r.lzSince;
        }
        out.push(ev);
      } else out.push({ req: r, token: tok, finished, lazy, lazyFrom: r.lzSince });
    }
    if (anyFinished) this.dropFinished();
    for (let k = 0; k < ns; k++) sReq[k] = undefined as unknown as SimRequest;

    return {
      start,
      duration,
      end,
      numSeqs: ns,
      prefillTokens: cost.prefillTokens,
      decodeTokens: cost.decodeTokens,
      decodeMemS: cost.decodeMemS,
      prefillExtraS: cost.extraS,
      overheadS: ns ? cfg.stepOverheadS : 0,
      tokens: out,
      preempted,
      inSystem,
      dropped,
      bulk: 0,
      bulkAt: 0,
      bulkBefore: NO_SPLIT,
      replica: this.replicaIndex,
      index: stepNo,
    };
  }

  /**
   * A decode that verified `drafts` draft tokens: accept a prefix of them (position i given i − 1
   * with probability p_i / p_(i−1)), emit the accepted ones and the bonus token, and count as vLLM
   * does (a draft, its tokens, the accepted ones, per position).
   */
  private commitSpeculative(r: SimRequest, drafts: number, end: number, out: TokenEvent[]) {
    const p = this.cfg.speculative!.perPosition;
    let a = 0;
    while (a < drafts) {
      const cond = a === 0 ? p[0] : p[a - 1] > 0 ? p[a] / p[a - 1] : 0;
      if (!(this.specRng.next() < cond)) break;
      a++;
    }
    const c = this.counters;
    const sc = this.spec;
    sc.drafts++;
    sc.draftTokens += drafts;
    sc.acceptedTokens += a;
    for (let i = 0; i < a; i++) sc.acceptedPerPos[i]++;
    // The last real token and the accepted drafts are now computed; the bonus token is not yet.
    r.numComputed += 1 + a;
    for (let j = 0; j <= a; j++) {
      const tok = this.sampleToken();
      r.output.push(tok);
      const len = ++r.numOutput;
      // One step, one output for the request (vLLM's EngineCoreOutput): its gap is step to step.
      if (j === 0) r.prevTokenTime = r.lastTokenTime;
      r.lastTokenTime = end;
      c.generationTokens++;
      const finished = len >= r.maxTokens || r.numTokens >= this.cfg.maxModelLen || len >= r.eosAt;
      if (finished) this.finish(r, end);
      out.push({ req: r, token: tok, finished, lazy: 0, lazyFrom: 0 });
      if (finished) break;
    }
    if (r.status !== 'finished' && this.cfg.prefixCaching && r.numComputed >= (r.numCachedBlocks + 1) * BS)
      this.cacheFullBlocks(r);
  }

  /** A request has sampled its last token (length or EOS): record why, free its blocks. */
  private finish(r: SimRequest, end: number) {
    const len = r.numOutput;
    r.finishReason = len >= r.maxTokens || r.numTokens >= this.cfg.maxModelLen ? 'length' : 'stop';
    r.finishTime = end;
    r.status = 'finished';
    this.counters.finished++;
    this.freeRequestBlocks(r);
    this.byId.delete(r.id);
  }
  /** Remove finished requests from the running list, keeping the order of the rest. */
  private dropFinished() {
    const running = this.running;
    let w = 0;
    for (let i = 0; i < running.length; i++) {
      const r = running[i];
      if (r.status !== 'finished') running[w++] = r;
    }
    running.length = w;
  }

  /** Blocks the running requests need in total to run `k` more decode steps. */
  private blocksForDecode(k: number): number {
    let need = 0;
    for (let i = 0; i < this.running.length; i++) {
      const r = this.running[i];
      const n = Math.ceil((r.numComputed + k) / BS) - r.blocks.length;
      if (n > 0) need += n;
    }
    return need;
  }

  /**
   * Run up to `maxSteps` consecutive pure-decode steps at once, when the schedule cannot change
   * between them: every running request is decoding, nothing waiting can be admitted, and the
   * pool has the blocks for every step (no preemption). Stops before a step that would start at or
   * after `until` (the next arrival), and after the step where any request finishes. The results
   * are exactly those of calling step() as many times (same arithmetic, same sampling order); the
   * saving is the scheduling and the per-step objects. Returns undefined when the next step is not
   * such a step (call step()).
   */
  decodeRun(maxSteps: number, until = Infinity): DecodeRun | undefined {
    const running = this.running;
    const ns = running.length;
    const cfg = this.cfg;
    if (ns === 0 || ns > cfg.maxNumBatchedTokens || !(this.now < until) || cfg.speculative || !this.ids)
      return undefined;
    // Something waiting would be considered for admission unless max_num_seqs or the budget is full.
    if (this.waitingQ.length && ns < cfg.maxNumSeqs && ns < cfg.maxNumBatchedTokens) return undefined;
    let K = Math.floor(maxSteps);
    let ctx = 0;
    for (let i = 0; i < ns; i++) {
      const r = running[i];
      const c = r.numComputed;
      const len = r.numOutput;
      if (c !== r.numPrompt + len - 1 || c < r.numPrompt) return undefined;
      // Steps until this request samples its last token.
      K = Math.min(K, r.maxTokens - len, cfg.maxModelLen - (c + 1), r.eosAt - len);
      ctx += c + 1;
    }
    if (!(K >= 1)) return undefined;
    if (this.blocksForDecode(K) > this.freeCount) {
      let lo = 0;
      let hi = K;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (this.blocksForDecode(mid) <= this.freeCount) lo = mid;
        else hi = mid - 1;
      }
      K = lo;
      if (K < 1) return undefined;
    }
    const run = this.run;
    if (run.ends.length < K) {
      const cap = Math.max(K, 2 * run.ends.length, 64);
      run.ends = new Float64Array(cap);
      run.durations = new Float64Array(cap);
      run.decodeMemS = new Float64Array(cap);
      run.prefillExtraS = new Float64Array(cap);
    }
    const reqs = run.reqs;
    reqs.length = ns;
    for (let i = 0; i < ns; i++) reqs[i] = running[i];
    run.finished.length = 0;
    run.numSeqs = ns;
    run.inSystem = ns + this.waitingQ.length;
    run.overheadS = cfg.stepOverheadS;
    const k = this.decodeSteps(run, K, until, ctx);
    run.steps = k;
    if (run.finished.length) this.dropFinished();
    return run;
  }

  /** The loop of decodeRun: up to K steps of the batch run.reqs, total context ctx at the first. */
  private decodeSteps(run: DecodeRun, K: number, until: number, ctx: number): number {
    const cfg = this.cfg;
    const reqs = run.reqs;
    const ns = reqs.length;
    const W = cfg.weightsBytes;
    const kv = cfg.kvBytesPerToken;
    const bw = cfg.bandwidth;
    const fpt = cfg.flopsPerToken;
    const apair = cfg.attnFlopsPerPair;
    const denom = cfg.peak * cfg.prefillMfu;
    const ovh = cfg.stepOverheadS;
    const comm = cfg.commFixedS + cfg.commPerTokenS * ns;
    const caching = cfg.prefixCaching;
    const maxLen = cfg.maxModelLen;
    const counters = this.counters;
    const { ends, durations, decodeMemS, prefillExtraS } = run;
    let now = this.now;
    let k = 0;
    let anyFinished = false;
    while (k < K && now < until) {
      // Allocation phase, in schedule order (decodeRun counted the blocks).
      for (let i = 0; i < ns; i++) {
        const r = reqs[i];
        while (r.blocks.length * BS <= r.numComputed) r.blocks.push(this.takeFree());
      }
      // The step time as step() computes it with one token per request: Σ(s + n) = Σ attention pairs = ctx.
      const memS = (W + kv * ctx) / bw;
      const compS = (fpt * ns + apair * ctx) / denom;
      const core = (memS > compS ? memS : compS) + comm;
      const duration = core + ovh;
      const end = now + duration;
      now = end;
      counters.busyS += duration;
      ends[k] = end;
      durations[k] = duration;
      decodeMemS[k] = memS;
      prefillExtraS[k] = core - memS;
      // Commit: one token per request.
      for (let i = 0; i < ns; i++) {
        const r = reqs[i];
        const c = ++r.numComputed;
        if (caching && c >= (r.numCachedBlocks + 1) * BS) this.cacheFullBlocks(r);
        r.output.push(this.sampleToken());
        const len = ++r.numOutput;
        r.prevTokenTime = r.lastTokenTime;
        r.lastTokenTime = end;
        if (len >= r.maxTokens || c + 1 >= maxLen || len >= r.eosAt) {
          this.finish(r, end);
          run.finished.push(r);
          anyFinished = true;
        }
      }
      ctx += ns;
      k++;
      if (anyFinished) break;
    }
    this.now = now;
    this.stepNo += k;
    counters.steps += k;
    counters.generationTokens += k * ns;
    return k;
  }

  /** The prefix-cache hash of a request's block k (its parent's hash is known). */
  private hashAt(req: SimRequest, k: number): number {
    const parent = k ? req.blockHashes[k - 1] : 0;
    if (this.ids || (k + 1) * BS <= req.numPrompt) return blockHash(parent, req, k * BS, BS);
    return outputBlockHash(parent, req.uid, k);
  }

  /**
   * Keep the output token ids (true, the default: the HTTP server sends them) or only count them
   * (false: the virtual-time load, which reads none). Without them the generator still advances once
   * per token (sampled EOS lengths stay where they were), a block holding output tokens gets a name
   * of its own in the prefix cache (outputBlockHash), and steady decoders advance in bulk
   * (StepResult.bulk): the same schedule, step times and counters, at a cost per step of the
   * requests that change. Not with speculative decoding.
   */
  setTokenIds(keep: boolean) {
    if (keep === this.ids) return;
    if (!keep && this.cfg.speculative) throw new Error('lazy decoding does not model speculative decoding');
    if (keep) this.lzFlush();
    else this.lzOthers = this.running.slice();
    this.ids = keep;
  }
  get tokenIds(): boolean {
    return this.ids;
  }

  /** A steady decoder's figures at the start of the current step. */
  private lzSync(r: SimRequest) {
    const k = this.stepNo - r.lzStep;
    if (k > 0) {
      r.numComputed += k;
      r.numOutput += k;
      r.prevTokenTime = this.lastStepStart;
      r.lastTokenTime = this.now;
      r.lzStep = this.stepNo;
    }
    if (this.cfg.prefixCaching && r.numComputed >= (r.numCachedBlocks + 1) * BS) this.cacheFullBlocks(r);
  }

  /** Every steady decoder back to a plain running request (its bulk tokens pending for its next event). */
  private lzFlush() {
    if (this.lzCount) {
      for (const r of this.running) {
        if (!r.lz) continue;
        this.lzSync(r);
        r.lzPending = this.stepNo - r.lzSince;
        r.lz = false;
      }
      for (const b of this.lzBuckets) b.length = 0;
      this.lzEnds.clear();
      this.lzCount = 0;
      this.lzCtx = 0;
    }
    this.lzOthers = this.running.slice();
  }

  /** A running request that just got a token and decodes on: a steady decoder from step `from`. */
  private lzAdd(r: SimRequest, from: number) {
    const cfg = this.cfg;
    r.lz = true;
    r.lzStep = from;
    r.lzSince = from;
    const out = r.numOutput;
    // Steps until its last token (as in decodeRun); its next block when its computed tokens fill its blocks.
    const left = Math.min(r.maxTokens - out, cfg.maxModelLen - r.numPrompt - out, r.eosAt - out);
    const f = from + left - 1;
    r.lzFinish = f;
    const ends = this.lzEnds.get(f);
    if (ends) ends.push(r);
    else this.lzEnds.set(f, [r]);
    const key = (from + r.blocks.length * BS - r.numComputed) % BS;
    const bucket = this.lzBuckets[key];
    r.lzBucket = key;
    r.lzBucketPos = bucket.length;
    bucket.push(r);
    this.lzCount++;
    this.lzCtx += r.numComputed + 1;
  }

  /** Preempt a running request in lazy decoding (a steady decoder leaves the steady set first). */
  private lzPreempt(victim: SimRequest) {
    if (victim.lz) {
      this.lzSync(victim);
      victim.lzPending = this.stepNo - victim.lzSince;
      this.lzRemoveFromBucket(victim);
      const ends = this.lzEnds.get(victim.lzFinish)!;
      ends.splice(ends.indexOf(victim), 1);
      if (!ends.length) this.lzEnds.delete(victim.lzFinish);
      this.lzCount--;
      this.lzCtx -= victim.numComputed + 1;
    } else {
      const others = this.lzOthers;
      const i = others.lastIndexOf(victim);
      if (i >= 0) others.splice(i, 1);
    }
    this.preempt(victim);
  }

  private lzRemoveFromBucket(r: SimRequest) {
    const bucket = this.lzBuckets[r.lzBucket];
    const last = bucket.pop()!;
    if (last !== r) {
      bucket[r.lzBucketPos] = last;
      last.lzBucketPos = r.lzBucketPos;
    }
    r.lz = false;
  }

  /**
   * step() without token ids. When the steady decoders all get their token this step without a
   * preemption (the budget reaches past them, the pool has their blocks), only the other running
   * requests, the steady decoders due a block and those whose last token it is are visited; else
   * every steady decoder is brought up to date and the step runs as stepExact.
   */
  private stepLazy(reuse: boolean): StepResult {
    const cfg = this.cfg;
    const others = this.lzOthers;
    const running = this.running;
    const S = this.stepNo;
    const D = this.lzCount;
    const B = cfg.maxNumBatchedTokens;
    const sReq = this.sReq;
    const sNew = this.sNew;
    const bucket = this.lzBuckets[S % BS];
    // Can the steady decoders advance in bulk? The others' demand in schedule order: only the last
    // running request may be cut short by the budget, and none with earlier output may finish its
    // recompute in phase 1 (its gap is not the step's).
    let bulkOk = D > 0;
    let demand = D;
    let lastN = -1;
    if (bulkOk) {
      for (let i = 0; i < others.length; i++) demand += others[i].numTokens - others[i].numComputed;
      if (demand > B) {
        const last = others[others.length - 1];
        if (!last || last !== running[running.length - 1]) bulkOk = false;
        else {
          const before = demand - (last.numTokens - last.numComputed);
          if (before > B) bulkOk = false;
          else lastN = B - before;
        }
      }
    }
    if (!bulkOk) return this.stepFallback(reuse);
    this.lazySteps.bulk++;

    const inSystem = running.length + this.waitingQ.length;
    const lastOther = lastN >= 0 ? others[others.length - 1] : undefined;
    // Blocks phase 1 needs: one for each steady decoder due one, and the others' chunks.
    let need = bucket.length;
    for (let i = 0; i < others.length; i++) {
      const r = others[i];
      const n = r === lastOther ? lastN : r.numTokens - r.numComputed;
      const m = Math.ceil((r.numComputed + n) / BS) - r.blocks.length;
      if (m > 0) need += m;
    }
    // 1. Running requests. A recompute after a preemption that ends here is irregular: its token's
    // gap is not the step's, so the events say where the bulk tokens fall around it.
    let ns = 0;
    let budget = B - D;
    let preempted = 0;
    let irregular = false;
    if (need <= this.freeCount) {
      // The others in schedule order, then the steady decoders due a block (the order in which one
      // step takes blocks changes only their labels: no decision reads a block's number).
      for (let i = 0; i < others.length; i++) {
        const r = others[i];
        const full = r.numTokens - r.numComputed;
        const n = r === lastOther ? lastN : full;
        if (n <= 0) break;
        this.allocate(r, n);
        if (n === full && r.numOutput > 0) irregular = true;
        this.setSlot(ns, r, n, 0);
        ns++;
        budget -= n;
      }
      for (let i = 0; i < bucket.length; i++) {
        const r = bucket[i];
        this.lzSync(r);
        r.blocks.push(this.takeFree());
      }
    } else {
      // The pool runs short: those that need blocks in schedule order, preempting from the end of
      // the running list as stepExact does.
      const walk = this.lzWalk;
      walk.length = 0;
      for (let i = 0; i < bucket.length; i++) walk.push(bucket[i]);
      for (let i = 0; i < others.length; i++) walk.push(others[i]);
      walk.sort(byRunSeq);
      for (let i = 0; i < walk.length; i++) {
        const r = walk[i];
        if (r.status !== 'running') continue;
        let n = 1;
        let full = 1;
        if (r.lz) this.lzSync(r);
        else {
          full = r.numTokens - r.numComputed;
          n = r === lastOther ? lastN : full;
          if (n <= 0) break;
        }
        preempted += this.allocateOrPreempt(r, n, true);
        if (r.status !== 'running') break;
        if (r.lz) continue;
        if (n === full && r.numOutput > 0) irregular = true;
        this.setSlot(ns, r, n, 0);
        ns++;
        budget -= n;
      }
      walk.length = 0;
    }
    const ns1 = ns;
    if (preempted) this.lazySteps.preempting++;
    if (irregular) this.lazySteps.irregular++;
    // 2. Admissions (none when this step preempted).
    if (!preempted) ns = this.admitWaiting(ns, budget);
    const Dn = this.lzCount;
    // Where the bulk tokens fall among phase 1's events, when one of them has a gap of its own.
    const split = this.lzSplit;
    split.length = 0;
    if (irregular) {
      for (let k = 0; k < ns1; k++) if (sReq[k].numComputed + sNew[k] >= sReq[k].numTokens) sReq[k].lzEmit = S;
      let c = 0;
      for (let i = 0; i < running.length; i++) {
        const r = running[i];
        if (r.lz) {
          if (r.lzFinish !== S) c++;
          else {
            split.push(c);
            c = 0;
          }
        } else if (r.lzEmit === S && r.runSeq <= (ns1 ? sReq[ns1 - 1].runSeq : -1)) {
          split.push(c);
          c = 0;
        }
      }
      split.push(c);
    }

    // 3. Step time, the steady decoders with the scheduled slots.
    const cost = this.stepCost(ns, Dn, this.lzCtx);
    const duration = cost.duration;
    const start = this.now;
    const end = start + duration;
    this.now = end;
    this.counters.steps++;
    this.counters.busyS += duration;

    // 4. Commit, in schedule order: the others of phase 1 and the steady decoders whose last token
    // this is, then the admitted.
    const fin = this.lzFin;
    fin.length = 0;
    const ending = this.lzEnds.get(S);
    if (ending) {
      this.lzEnds.delete(S);
      for (const r of ending) fin.push(r);
      if (fin.length > 1) fin.sort(byRunSeq);
    }
    const out: TokenEvent[] = reuse ? this.scratchTokens : [];
    out.length = 0;
    const join = this.lzJoin;
    join.length = 0;
    let emitted = Dn;
    let anyFinished = false;
    let finCtx = 0;
    let bulkAt = 0;
    let f = 0;
    for (let k = 0; k <= ns; k++) {
      // Steady decoders that end here, before the k-th scheduled request (all of them before the admitted).
      const limit = k < ns1 ? sReq[k].runSeq : Infinity;
      while (f < fin.length && fin[f].runSeq < limit) {
        const r = fin[f++];
        const lazy = S - r.lzSince;
        finCtx += r.numComputed + (S - r.lzStep) + 1;
        const steps = S + 1 - r.lzStep;
        r.numComputed += steps;
        r.numOutput += steps;
        r.prevTokenTime = start;
        r.lastTokenTime = end;
        r.lzStep = S + 1;
        if (cfg.prefixCaching && r.numComputed >= (r.numCachedBlocks + 1) * BS) this.cacheFullBlocks(r);
        this.lzRemoveFromBucket(r);
        this.finish(r, end);
        anyFinished = true;
        this.lzEvent(out, reuse, r, true, lazy, r.lzSince);
      }
      if (k === ns1) bulkAt = out.length;
      if (k === ns) break;
      const r = sReq[k];
      r.numComputed += sNew[k];
      if (cfg.prefixCaching && r.numComputed >= (r.numCachedBlocks + 1) * BS) this.cacheFullBlocks(r);
      if (r.numComputed < r.numTokens) continue;
      emitted++;
      if (r.numOutput === 0) r.firstTokenTime = end;
      if (!r.promptCounted) {
        r.promptCounted = true;
        this.counters.promptTokens += r.numPrompt;
      }
      const len = ++r.numOutput;
      r.prevTokenTime = r.lastTokenTime;
      r.lastTokenTime = end;
      const finished = len >= r.maxTokens || r.numTokens >= cfg.maxModelLen || len >= r.eosAt;
      if (finished) {
        this.finish(r, end);
        anyFinished = true;
      } else join.push(r);
      const lazy = r.lzPending;
      r.lzPending = 0;
      this.lzEvent(out, reuse, r, finished, lazy, r.lzSince);
    }
    // One draw per token, as sampling them would take.
    this.rng.skip(emitted);
    this.counters.generationTokens += emitted;
    if (anyFinished) this.dropFinished();

    // The steady decoders move one token on; those that got their token here join them.
    this.lzCount -= fin.length;
    this.lzCtx += this.lzCount - finCtx;
    if (anyFinished || join.length || ns > ns1) {
      let w = 0;
      for (let i = 0; i < others.length; i++) {
        const r = others[i];
        if (r.status === 'running' && join.indexOf(r) < 0) others[w++] = r;
      }
      others.length = w;
      for (let k = ns1; k < ns; k++) {
        const r = sReq[k];
        if (r.status === 'running' && join.indexOf(r) < 0) others.push(r);
      }
    }
    for (const r of join) this.lzAdd(r, S + 1);
    for (let k = 0; k < ns; k++) sReq[k] = undefined as unknown as SimRequest;
    this.lastStepStart = start;
    this.stepNo++;

    const res = reuse ? this.lzResult : ({} as StepResult);
    res.start = start;
    res.duration = duration;
    res.end = end;
    res.numSeqs = Dn + ns;
    res.prefillTokens = cost.prefillTokens;
    res.decodeTokens = cost.decodeTokens;
    res.decodeMemS = cost.decodeMemS;
    res.prefillExtraS = cost.extraS;
    res.overheadS = cfg.stepOverheadS;
    res.tokens = out;
    res.preempted = preempted;
    res.inSystem = inSystem;
    res.dropped = reuse ? this.lzResult.dropped : [];
    res.bulk = Dn - fin.length;
    res.bulkAt = bulkAt;
    res.bulkBefore = split;
    res.replica = this.replicaIndex;
    res.index = S;
    return res;
  }

  private lzEvent(out: TokenEvent[], reuse: boolean, r: SimRequest, finished: boolean, lazy: number, lazyFrom: number) {
    if (!reuse) {
      out.push({ req: r, token: 0, finished, lazy, lazyFrom });
      return;
    }
    const j = out.length;
    let ev = this.eventPool[j];
    if (ev === undefined) this.eventPool[j] = ev = { req: r, token: 0, finished, lazy, lazyFrom };
    else {
      ev.req = r;
      ev.token = 0;
      ev.finished = finished;
      ev.lazy = lazy;
      ev.lazyFrom = lazyFrom;
    }
    out.push(ev);
  }

  /** A step the steady decoders cannot take in bulk: all brought up to date, stepExact, then the new steady set. */
  private stepFallback(reuse: boolean): StepResult {
    this.lzFlush();
    this.lazySteps.full++;
    const S = this.stepNo;
    const res = this.stepExact(reuse);
    this.lastStepStart = res.start;
    this.stepNo++;
    const others = this.lzOthers;
    others.length = 0;
    for (const r of this.running) {
      if (r.lzEmit === S && r.numComputed === r.numTokens - 1) this.lzAdd(r, S + 1);
      else others.push(r);
    }
    return res;
  }

  /** Output token ids: lower-case letters and spaces, so the trivial tokenizer gives readable text. */
  private sampleToken(): number {
    const x = this.rng.next();
    return x < 0.17 ? 32 : 97 + Math.floor(((x - 0.17) / 0.83) * 26);
  }

  /** Time of a batch-1 decode step at the given context (s): what the step formula gives. */
  decodeStepTime(context: number, batch = 1): number {
    const c = this.cfg;
    const mem = (c.weightsBytes + c.kvBytesPerToken * context * batch) / c.bandwidth;
    const comp = (c.flopsPerToken * batch + c.attnFlopsPerPair * context * batch) / (c.peak * c.prefillMfu);
    return Math.max(mem, comp) + c.commFixedS + c.commPerTokenS * batch + c.stepOverheadS;
  }
}

/** What a load generator or the HTTP server needs of an engine: one replica, or several behind one endpoint. */
export type Engine = SimEngine | DpEngine;

/**
 * Data parallelism: `dp` independent engines (each its own GPUs, KV pool and step clock) behind
 * one endpoint. A new request goes to the replica with the lowest waiting × 4 + running, as vLLM's
 * DP load balancer scores its engines (vLLM v1 DPLBAsyncMPClient in engine/core_client.py). Each
 * replica keeps its own clock; `step` runs the replica whose next step starts first, so a request
 * that arrives while a replica is mid-step waits for that step to end, as on a real server.
 */
export class DpEngine {
  readonly replicas: SimEngine[];
  readonly cfg: EngineConfig;
  readonly running: SimRequest[] = [];
  constructor(opts: EngineOptions, dp: number) {
    const first = new SimEngine(opts);
    this.replicas = [first];
    for (let i = 1; i < dp; i++) {
      const e = new SimEngine({ ...first.cfg, seed: first.cfg.seed + i } as EngineConfig);
      e.replicaIndex = i;
      this.replicas.push(e);
    }
    this.cfg = first.cfg;
  }
  /** SimEngine.setTokenIds on every replica. */
  setTokenIds(keep: boolean) {
    for (const e of this.replicas) e.setTokenIds(keep);
  }
  get tokenIds(): boolean {
    return this.replicas[0].tokenIds;
  }
  get replicaCount(): number {
    return this.replicas.length;
  }
  /** The start of the next step: the earliest clock among replicas with work (all idle: the latest clock). */
  get now(): number {
    let busy = Infinity;
    let idle = -Infinity;
    for (const e of this.replicas) {
      if (e.hasWork()) busy = Math.min(busy, e.now);
      else idle = Math.max(idle, e.now);
    }
    return busy < Infinity ? busy : idle;
  }
  private earliest(): { e?: SimEngine; next: number } {
    let e: SimEngine | undefined;
    let next = Infinity;
    for (const r of this.replicas) {
      if (!r.hasWork()) continue;
      if (!e || r.now < e.now) {
        if (e) next = Math.min(next, e.now);
        e = r;
      } else next = Math.min(next, r.now);
    }
    return { e, next };
  }
  hasWork(): boolean {
    return this.replicas.some((e) => e.hasWork());
  }
  advanceTo(t: number) {
    for (const e of this.replicas) if (!e.hasWork()) e.advanceTo(t);
  }
  step(reuse = false): StepResult | undefined {
    return this.earliest().e?.step(reuse);
  }
  decodeRun(maxSteps: number, until = Infinity): DecodeRun | undefined {
    const { e, next } = this.earliest();
    return e?.decodeRun(maxSteps, Math.min(until, next));
  }
  add(r: AddRequest): SimRequest {
    let best = this.replicas[0];
    let score = Infinity;
    for (const e of this.replicas) {
      const s = e.waiting * 4 + e.numRunning;
      if (s < score) {
        score = s;
        best = e;
      }
    }
    const at = r.arrival ?? this.now;
    if (!best.hasWork()) best.advanceTo(at);
    return best.add({ ...r, arrival: at });
  }
  abort(id: string): boolean {
    return this.replicas.some((e) => e.abort(id));
  }
  get(id: string): SimRequest | undefined {
    for (const e of this.replicas) {
      const r = e.get(id);
      if (r) return r;
    }
    return undefined;
  }
  get counters(): EngineCounters {
    const c = zeroCounters();
    for (const e of this.replicas) for (const k of Object.keys(c) as (keyof EngineCounters)[]) c[k] += e.counters[k];
    return c;
  }
  get spec(): SpecCounters {
    const k = this.cfg.speculative?.k ?? 0;
    const c: SpecCounters = { drafts: 0, draftTokens: 0, acceptedTokens: 0, acceptedPerPos: new Array(k).fill(0) };
    for (const e of this.replicas) {
      c.drafts += e.spec.drafts;
      c.draftTokens += e.spec.draftTokens;
      c.acceptedTokens += e.spec.acceptedTokens;
      e.spec.acceptedPerPos.forEach((v, i) => (c.acceptedPerPos[i] += v));
    }
    return c;
  }
  get waiting(): number {
    return this.replicas.reduce((n, e) => n + e.waiting, 0);
  }
  get numRunning(): number {
    return this.replicas.reduce((n, e) => n + e.numRunning, 0);
  }
  get freeBlocks(): number {
    return this.replicas.reduce((n, e) => n + e.freeBlocks, 0);
  }
  /** Mean over the replicas (each reports its own pool's usage). */
  get kvUsage(): number {
    return this.replicas.reduce((n, e) => n + e.kvUsage, 0) / this.replicas.length;
  }
  get rollingHitRate(): number {
    return this.replicas.reduce((n, e) => n + e.rollingHitRate, 0) / this.replicas.length;
  }
  decodeStepTime(context: number, batch = 1): number {
    return this.replicas[0].decodeStepTime(context, batch);
  }
}

/** One engine per setup: several replicas behind one endpoint when the setup says data_parallel > 1. */
export function createEngine(opts: EngineOptions): Engine {
  const dp = parallelOf(opts.setup).dp;
  return dp > 1 ? new DpEngine(opts, dp) : new SimEngine(opts);
}
