/**
 * What a log says, as findings that cite their lines: the KV pool against the setup's prediction,
 * prefix-cache contamination per segment, prefill/decode interference, heartbeat averages offered
 * as rates, sampler fallback, preemptions, and a KV cache pinned full with requests waiting.
 */
import * as path from 'node:path';
import type { Setup } from '../engine/types';
import { finding, type CellPath, type Finding, type RelatedInfo } from '../findings';
import { kvPool, BLOCK_SIZE } from '../physics/kvPool';
import { DTYPE_BYTES } from '../catalog/types';
import { fmtNum, GiB, GIB_IN_GB } from '../units';
import type { AuditFacts, WindowSeries } from './parse';
import type { Segment, Timeline } from './timeline';
import { dialectById } from './dialect';
import { logFindings } from './logFindings';

export interface AuditFindingOptions {
  setup?: Setup;
  /** Prefix-cache hit rate (%) above which a segment counts as served from the cache. Default 10. */
  hitThresholdPct?: number;
  /** KV usage (%) that counts as full. Default 95. */
  kvFullPct?: number;
  /** Where findings point in the cell. Default ["audit"]. */
  path?: CellPath;
  /** A kv-pool prediction already made in the notebook (a `predict: kv-pool` cell), used instead of recomputing. */
  predicted?: { pool_tokens: number; available_kv_gib?: number; label: string; cellIndex?: number };
}

/** "line 12" — or "day4.log:12" when several files were read as one timeline. */
export function cite(facts: AuditFacts, line: number): string {
  if (facts.files.length <= 1) return `line ${line}`;
  let f = facts.files[0];
  for (const x of facts.files) if (x.firstLine <= line) f = x;
  return `${path.basename(f.path)}:${line - f.firstLine + 1}`;
}

function citeList(facts: AuditFacts, lines: number[], max = 4): string {
  const uniq = [...new Set(lines)];
  const more = uniq.length > max ? ` and ${uniq.length - max} more` : '';
  if (facts.files.length <= 1) return `${uniq.length > 1 ? 'lines' : 'line'} ${uniq.slice(0, max).join(', ')}${more}`;
  return (
    uniq
      .slice(0, max)
      .map((l) => cite(facts, l))
      .join(', ') + more
  );
}

function related(facts: AuditFacts, items: [number, string][]): RelatedInfo[] {
  return items.slice(0, 8).map(([line, what]) => ({ message: `${cite(facts, line)}: ${what}` }));
}

const segName = (s: Segment) =>
  `segment ${s.index + 1} (${s.start_stamp}–${s.end_stamp.slice(6)}, load ≈${fmtNum(s.load, 0)})`;

export function auditFindings(facts: AuditFacts, tl: Timeline, opts: AuditFindingOptions = {}): Finding[] {
  const at = opts.path ?? ['audit'];
  const out: Finding[] = [];
  const w = facts.windows;
  out.push(...kvPoolFindings(facts, opts.setup, at, opts.predicted));
  const thr = opts.hitThresholdPct ?? 10;
  for (const [k, s] of tl.segments.entries()) {
    // When the next point follows with no idle gap, the last window straddles both: its
    // completions may be the next point's, so it does not count for this one.
    const straddles = tl.segments[k + 1]?.starts_after === 'load-change';
    const c = contamination(facts, s, thr, at, straddles ? s.last - 1 : s.last);
    if (c) out.push(c);
  }
  for (const s of tl.segments) {
    const i = interference(facts, w, s, at);
    if (i) out.push(i);
  }
  const hb = heartbeat(facts, tl, at);
  if (hb) out.push(hb);
  out.push(...samplerFindings(facts, at));
  out.push(...preemptionFindings(facts, tl, at));
  out.push(...kvFullFindings(facts, w, tl, opts.kvFullPct ?? 95, at));
  out.push(...logFindings(facts, at, cite));
  return out;
}

// ------------------------------------------------------------------------------------------------

function kvPoolFindings(
  facts: AuditFacts,
  setup: Setup | undefined,
  at: CellPath,
  predicted?: AuditFindingOptions['predicted'],
): Finding[] {
  const pool = facts.pool_tokens;
  const out: Finding[] = [];
  if (!pool) return out;
  if (pool.values.some((v) => v !== pool.values[0])) {
    out.push(
      finding(
        'info',
        'audit-kv-pool-workers-differ',
        `The ${pool.workers} workers report different KV pools (${pool.values.map((v) => fmtNum(v, 0)).join(', ')} tokens, ${citeList(facts, pool.lines)}); the smallest, ${fmtNum(pool.value, 0)}, bounds the engine.`,
        at,
      ),
    );
  }
  if (!setup) return out;
  const m = setup.model;
  const srv = setup.server ?? {};
  const util = typeof srv.gpu_memory_utilization === 'number' ? srv.gpu_memory_utilization : undefined;
  const maxLen =
    srv.max_model_len && typeof (srv.max_model_len as any).value === 'number'
      ? (srv.max_model_len as any).value
      : undefined;
  const computed = kvPool(setup, { gpuMemoryUtilization: util, maxModelLen: maxLen });
  const pred = predicted
    ? {
        ...computed,
        pool_tokens: predicted.pool_tokens,
        available_kv_gib: predicted.available_kv_gib ?? computed.available_kv_gib,
      }
    : computed;
  const ratio = pool.value / pred.pool_tokens;
  const cites: [number, string][] = [[pool.line, `GPU KV cache size: ${fmtNum(pool.value, 0)} tokens`]];
  if (facts.available_kv_gib)
    cites.push([facts.available_kv_gib.line, `Available KV cache memory: ${facts.available_kv_gib.value} GiB`]);
  const predCell = predicted ? predicted.cellIndex : setup.cellIndex;
  const rel = [
    ...related(facts, cites),
    ...(predCell !== undefined
      ? [{ message: predicted ? predicted.label : `setup ${setup.name}: the kv-pool prediction`, cellIndex: predCell }]
      : []),
  ];
  const logSide = `the log's ${fmtNum(pool.value, 0)} tokens (${cite(facts, pool.line)})`;
  const predSide = predicted
    ? `${predicted.label}'s ${fmtNum(pred.pool_tokens, 0)} tokens`
    : `the prediction's ${fmtNum(pred.pool_tokens, 0)} tokens (${fmtNum(pred.available_kv_gib, 2)} GiB available, ${setup.model.name} ${setup.kvCache} KV on ${setup.gpu.id} at gpu_memory_utilization ${pred.gpu_memory_utilization})`;
  // Does the log agree with itself? tokens = floor(available / (page × layers)) × 16.
  let selfNote = '';
  if (facts.available_kv_gib && !pool.derived) {
    const page = 2 * BLOCK_SIZE * m.kvHeads * m.headDim * DTYPE_BYTES[setup.kvCache];
    const fromAvail = Math.floor((facts.available_kv_gib.value * GiB) / (page * m.layers)) * BLOCK_SIZE;
    const r = pool.value / fromAvail;
    if (Math.abs(r - 1) > 0.01)
      selfNote = ` The log's own ${facts.available_kv_gib.value} GiB gives ${fmtNum(fromAvail, 0)} tokens at ${fmtNum(pred.kv_bytes_per_token, 0)} B/token, ${fmtNum(r, 2)}× off: the KV dtype or the model in the setup is not what the server ran (kv_cache: ${setup.kvCache}).`;
  }
  if (Math.abs(ratio - 1) <= 0.02) {
    out.push(
      finding(
        'info',
        'audit-kv-pool-matches',
        `KV pool: ${logSide} matches ${predSide}: ratio ${fmtNum(ratio, 4)}.${selfNote}`,
        at,
        { related: rel },
      ),
    );
    return out;
  }
  // Name the GB/GiB slip when it fits.
  let slip = '';
  const alt = (mem: number) =>
    kvPool({ ...setup, gpu: { ...setup.gpu, memory: mem } }, { gpuMemoryUtilization: util, maxModelLen: maxLen })
      .pool_tokens;
  const asGiB = alt(setup.gpu.memory * GIB_IN_GB);
  const asGB = alt(setup.gpu.memory / GIB_IN_GB);
  if (Math.abs(pool.value / asGiB - 1) <= 0.03)
    slip = ` That is the GB/GiB slip: the setup's GPU memory (${fmtNum(setup.gpu.memory / 1e9, 1)} GB) read as GiB gives ${fmtNum(asGiB, 0)} tokens, within ${fmtNum(Math.abs(pool.value / asGiB - 1) * 100, 1)}% of the log. An "80GB" card holds 80 GiB.`;
  else if (Math.abs(pool.value / asGB - 1) <= 0.03)
    slip = ` That is the GB/GiB slip the other way: the setup's memory taken as GB gives ${fmtNum(asGB, 0)} tokens, within ${fmtNum(Math.abs(pool.value / asGB - 1) * 100, 1)}% of the log.`;
  else if (Math.abs(ratio - GIB_IN_GB) <= 0.015 || Math.abs(ratio - 1 / GIB_IN_GB) <= 0.015)
    slip = ` The ratio is 2^30/10^9 = 1.074 (or its inverse): a GB/GiB slip somewhere in the prediction (GB is 10^9 bytes, GiB 2^30).`;
  out.push(
    finding(
      'warning',
      'audit-kv-pool-mismatch',
      `KV pool: ${logSide} against ${predSide}: ratio ${fmtNum(ratio, 3)} (${ratio > 1 ? '+' : ''}${fmtNum((ratio - 1) * 100, 1)}%).${slip}${selfNote}`,
      at,
      {
        cause: slip
          ? 'Mixing GB (10^9) and GiB (2^30) moves a KV-pool prediction by about 7–10%.'
          : 'The prediction assumed a different gpu_memory_utilization, activation peak, weight size or KV dtype than the server measured.',
        fix: slip
          ? 'write the card memory as "80 GiB" (or use the catalog id), and rerun the prediction'
          : `set gpu_memory_utilization and kv_cache in the setup to what the server ran; the log says weights took ${facts.weights_gib ? `${facts.weights_gib.value} GiB` : '(not printed)'}${facts.available_kv_gib ? ` and ${facts.available_kv_gib.value} GiB were left for KV` : ''}`,
        related: rel,
      },
    ),
  );
  return out;
}

// ------------------------------------------------------------------------------------------------

/**
 * V1's hit rate is rolling over the last 1,000 requests, so a segment's own requests show as a
 * rise: a window above the threshold and above the window before it means this point's requests
 * hit the cache more than the ones before. A rate that only decays is carry-over from earlier. One
 * window is no evidence (one repeated request moves it), and a window with none before it has
 * nothing to rise from: it takes a rise from a window before and a rate above the threshold in at
 * least two of the point's windows. The log shows that requests hit, not why: the causes are
 * offered as possibilities.
 */
function contamination(
  facts: AuditFacts,
  s: Segment,
  thr: number,
  at: CellPath,
  lastOwn = s.last,
): Finding | undefined {
  if (s.hit_max_pct === null || s.hit_max_pct <= thr) return undefined;
  const w = facts.windows;
  const prevHit = (i: number): number | undefined => {
    for (let j = i - 1; j >= 0; j--) if (!Number.isNaN(w.hit[j])) return w.hit[j];
    return undefined;
  };
  const rising: number[] = [];
  for (let i = s.first; i <= lastOwn; i++) {
    const p = prevHit(i);
    if (p !== undefined && w.hit[i] > thr && w.hit[i] - p >= 0.5) rising.push(i);
  }
  let above = 0;
  for (let i = s.first; i <= lastOwn; i++) if (w.hit[i] > thr) above++;
  if (!rising.length || above < 2) return undefined;
  const d = dialectById(facts.dialect);
  const before = prevHit(s.first);
  const lines: [number, string][] = rising
    .slice(0, 6)
    .map((i) => [w.line[i], `prefix cache hit rate ${fmtNum(w.hit[i], 1)}% (was ${fmtNum(prevHit(i)!, 1)}%)`]);
  const from = before === undefined ? 'from its first window' : `from ${fmtNum(before, 1)}% before it`;
  return finding(
    'warning',
    'audit-prefix-cache-contamination',
    `Prefix-cache hit rate rose in ${segName(s)} (${from} to a peak of ${fmtNum(s.hit_max_pct, 1)}%; rising in ${rising.length} of ${s.windows} windows, ${citeList(
      facts,
      rising.map((i) => w.line[i]),
    )}): this point's requests were partly served from the cache, so its TTFT and prompt throughput partly measure cache hits, not prefill.`,
    at,
    {
      cause: `The log shows that requests hit the cache, not why. Possibly: prompts repeated across points (one fixed seed for every point), requests sharing a long common prefix (a system prompt, a chat history), or a client retrying requests.${
        d.id === 'vllm'
          ? " vLLM's rate is rolling over the last 1,000 requests: a rise means this point's requests hit."
          : ''
      }`,
      fix: d.remedies.prefixCache,
      related: related(facts, lines),
    },
  );
}

// ------------------------------------------------------------------------------------------------

/** Windows where prompt throughput floods and generation collapses, alternating with decode windows. */
export function interferenceWindows(
  w: WindowSeries,
  s: Segment,
): { flood: number[]; decode: number[]; alternations: number } {
  const gens: number[] = [];
  for (let i = s.first; i <= s.last; i++) gens.push(w.gen[i]);
  gens.sort((a, b) => a - b);
  const genHigh = gens[Math.min(gens.length - 1, Math.floor(gens.length * 0.8))];
  const flood: number[] = [];
  const decode: number[] = [];
  let lastKind: 'f' | 'd' | undefined;
  let alternations = 0;
  for (let i = s.first; i <= s.last; i++) {
    const isFlood = w.gen[i] < 0.5 * genHigh && w.prompt[i] > w.gen[i] && w.prompt[i] > 0;
    const isDecode = w.gen[i] >= 0.7 * genHigh;
    const k = isFlood ? 'f' : isDecode ? 'd' : undefined;
    if (!k) continue;
    (k === 'f' ? flood : decode).push(i);
    if (lastKind && k !== lastKind) alternations++;
    lastKind = k;
  }
  return { flood, decode, alternations };
}

function interference(facts: AuditFacts, w: WindowSeries, s: Segment, at: CellPath): Finding | undefined {
  if (s.windows < 4) return undefined;
  const { flood, decode, alternations } = interferenceWindows(w, s);
  // One flood at a point's start is its ramp; interference is floods that keep coming back.
  if (flood.length < 2 || alternations < 3) return undefined;
  const range = (idx: number[], a: Float32Array) => {
    let lo = Infinity;
    let hi = -Infinity;
    for (const i of idx) {
      lo = Math.min(lo, a[i]);
      hi = Math.max(hi, a[i]);
    }
    return `${fmtNum(lo, 0)}–${fmtNum(hi, 0)}`;
  };
  const rel: [number, string][] = [];
  for (let k = s.first; k <= s.last && rel.length < 8; k++) {
    if (flood.includes(k))
      rel.push([
        w.line[k],
        `prefill flood: prompt ${fmtNum(w.prompt[k], 0)} tok/s, generation ${fmtNum(w.gen[k], 0)} tok/s`,
      ]);
    else if (decode.includes(k)) rel.push([w.line[k], `decode: generation ${fmtNum(w.gen[k], 0)} tok/s`]);
  }
  return finding(
    'warning',
    'audit-prefill-decode-interference',
    `Prefill/decode interference in ${segName(s)}: ${flood.length} of ${s.windows} windows are prefill floods (prompt ${range(flood, w.prompt)} tok/s, generation crashed to ${range(flood, w.gen)}) alternating with decode windows (generation ${range(decode, w.gen)} tok/s), ${citeList(
      facts,
      flood.map((i) => w.line[i]),
    )}.`,
    at,
    {
      cause:
        "Requests arrive in synchronized waves (closed loop, fixed lengths, ignore_eos): each wave's prefills are packed into the decode steps and stall every running stream, so p99 ITL is many times the median. The decode roofline never bills this prefill.",
      fix: 'predict with the serving model (prefill interference included) rather than the decode roofline; to measure decode alone, stagger arrivals (an open-loop request rate) or lower max_num_batched_tokens (smaller prefill chunks)',
      related: related(facts, rel),
    },
  );
}

// ------------------------------------------------------------------------------------------------

/**
 * Which edge windows of a segment straddle idle time the log shows: idle windows or a gap (V1 stops
 * printing while idle) next to them, and no request waiting at the window's tick (a queue means
 * the engine had work all through). A segment that starts the log has no idle shown before it.
 */
function idleEdges(w: WindowSeries, tl: Timeline, k: number): { first: boolean; last: boolean } {
  const s = tl.segments[k];
  const next = tl.segments[k + 1];
  const saturated = (i: number) => w.waiting[i] > 0;
  const before = s.starts_after === 'idle' || (s.starts_after === 'start' && s.first > 0);
  const after = next ? next.starts_after === 'idle' : s.last < w.length - 1;
  return { first: before && !saturated(s.first), last: after && !saturated(s.last) };
}

/** The log's own mean over its span (idle and missing windows count) against the busy windows' mean. */
export function heartbeatMeans(
  w: WindowSeries,
  tl: Timeline,
): { log_mean_gen_tok_s: number; busy_mean_gen_tok_s: number; slots: number } | undefined {
  if (!tl.segments.length) return undefined;
  // Idle windows count, and missing windows (V1 stops printing while idle) are idle time too.
  const first = tl.segments[0].first;
  const last = tl.segments[tl.segments.length - 1].last;
  let sum = 0;
  for (let i = first; i <= last; i++) sum += w.gen[i];
  const slots = last - first + 1 + countMissing(w, first, last, tl.interval_s);
  // Busy-only: each segment without the edge windows that straddle idle time.
  let bs = 0;
  let bn = 0;
  for (const [k, s] of tl.segments.entries()) {
    const e = idleEdges(w, tl, k);
    let lo = e.first ? s.first + 1 : s.first;
    let hi = e.last ? s.last - 1 : s.last;
    if (lo > hi) {
      lo = s.first;
      hi = s.last;
    }
    for (let i = lo; i <= hi; i++) {
      bs += w.gen[i];
      bn++;
    }
  }
  const r1 = (x: number) => Math.round(x * 10) / 10;
  return { log_mean_gen_tok_s: r1(sum / slots), busy_mean_gen_tok_s: r1(bs / bn), slots };
}

function heartbeat(facts: AuditFacts, tl: Timeline, at: CellPath): Finding | undefined {
  const w = facts.windows;
  const hm = heartbeatMeans(w, tl);
  if (!hm) return undefined;
  const first = tl.segments[0].first;
  const last = tl.segments[tl.segments.length - 1].last;
  const { log_mean_gen_tok_s: logMean, busy_mean_gen_tok_s: busyMean, slots } = hm;
  // Short segments whose windows the log shows bordering idle time: their rate is a lower bound.
  const short = tl.segments.filter((s, k) => {
    if (s.windows >= 3) return false;
    const e = idleEdges(w, tl, k);
    return e.first || e.last;
  });
  if (!(busyMean > 0) || (logMean / busyMean > 0.9 && !short.length)) return undefined;
  const shortNote = short.length
    ? ` ${short.length} segment${short.length > 1 ? 's span' : ' spans'} fewer than 3 windows next to idle time the log shows (${short.map((s) => segName(s)).join('; ')}): a window there includes idle time, so the log rate (${short.map((s) => `${fmtNum(s.mean_gen_tok_s, 1)} tok/s`).join(', ')}) is a lower bound, not the run's rate.`
    : '';
  return finding(
    'info',
    'audit-heartbeat-not-instrument',
    `Heartbeat, not instrument: averaged over the log's ${fmtNum(slots, 0)} windows from ${cite(facts, w.line[first])} to ${cite(facts, w.line[last])}, "Avg generation throughput" gives ${fmtNum(logMean, 1)} tok/s; the busy windows alone give ${fmtNum(busyMean, 1)} tok/s (${fmtNum((logMean / busyMean) * 100, 0)}%).${shortNote}`,
    at,
    {
      cause:
        "vLLM's periodic line divides the tokens of a wall-clock window (10 s in V1) by the window, idle time included, and is not printed at all while idle. A run that straddles windows reads low: a real batch-1 run at 88.4 tok/s showed 58.8.",
      fix: "quote rates from the benchmark (output tokens / the run's own wall time, or vllm:generation_tokens_total deltas over the run), and use the log only to see when and what happened",
    },
  );
}

function countMissing(w: WindowSeries, first: number, last: number, interval: number): number {
  let n = 0;
  for (let i = first + 1; i <= last; i++) {
    const dt = w.t[i] - w.t[i - 1];
    if (dt > Math.max(1.5 * interval, interval + 1.5)) n += Math.round(dt / interval) - 1;
  }
  return n;
}

// ------------------------------------------------------------------------------------------------

function samplerFindings(facts: AuditFacts, at: CellPath): Finding[] {
  const s = facts.sampler;
  if (!s) return [];
  if (s.value === 'fallback')
    return [
      finding(
        'warning',
        'audit-sampler-fallback',
        `Sampler fallback at ${cite(facts, s.line)}: "${s.text.slice(0, 140)}". Top-p/top-k ran on the PyTorch-native path, slower per step than FlashInfer's fused sampler.`,
        at,
        {
          cause: 'FlashInfer is not installed (or not supported on this GPU/dtype), so vLLM fell back at startup.',
          fix: 'install the FlashInfer wheel matching the vLLM and torch versions (or set VLLM_USE_FLASHINFER_SAMPLER=1 where it is installed), then restart the server; note the fallback next to every decode number from this run',
          related: related(
            facts,
            facts.sampler_lines.map((x) => [x.line, x.backend] as [number, string]),
          ),
        },
      ),
    ];
  return [
    finding(
      'info',
      'audit-sampler-selected',
      `FlashInfer sampler selected at ${cite(facts, s.line)}. Selected is not executed: a request with no top_p/top_k, or with a per-request seed, silently takes the native path.`,
      at,
      {
        fix: 'benchmark requests should set top_p/top_k and no request-level seed',
      },
    ),
  ];
}

function preemptionFindings(facts: AuditFacts, tl: Timeline, at: CellPath): Finding[] {
  const out: Finding[] = [];
  const w = facts.windows;
  const hit = tl.segments.filter((s) => s.preemptions > 0);
  const total = hit.reduce((a, s) => a + s.preemptions, 0);
  const v0 = facts.preemption_warnings;
  if (!hit.length && !v0.length) return out;
  const lines: [number, string][] = [];
  for (const s of hit)
    for (let i = s.first; i <= s.last && lines.length < 8; i++)
      if (w.preempt[i] > 0) lines.push([w.line[i], `${w.preempt[i]} preemption(s)`]);
  for (const p of v0.slice(0, 4))
    lines.push([p.line, `preemption warning${p.cumulative !== undefined ? `, cumulative ${p.cumulative}` : ''}`]);
  const cum = v0.length ? v0[v0.length - 1].cumulative : undefined;
  const where = hit.length ? ` in ${hit.map((s) => `${segName(s)}: ${s.preemptions}`).join('; ')}` : '';
  const v0Note = v0.length
    ? ` The V0 engine warned ${facts.preemption_warning_count} time(s) (it prints every 50th)${cum !== undefined ? `, cumulative ${fmtNum(cum, 0)}` : ''}.`
    : '';
  out.push(
    finding(
      'warning',
      'audit-preemptions',
      `Preemptions${hit.length ? `: ${fmtNum(total, 0)}` : ''}${where}.${v0Note} A preempted request loses its KV cache and recomputes its prefill: latency and throughput at these points include that rework.`,
      at,
      {
        cause: 'More concurrent tokens than the KV pool holds: the scheduler evicts running requests to admit others.',
        fix: 'lower max_num_seqs (or the benchmark concurrency) to what the pool holds — pool tokens / (input + output) — or raise gpu_memory_utilization',
        related: related(facts, lines),
      },
    ),
  );
  return out;
}

function kvFullFindings(facts: AuditFacts, w: WindowSeries, tl: Timeline, fullPct: number, at: CellPath): Finding[] {
  const out: Finding[] = [];
  for (const s of tl.segments) {
    const idx: number[] = [];
    for (let i = s.first; i <= s.last; i++) if (w.kv[i] >= fullPct && w.waiting[i] > 0) idx.push(i);
    if (idx.length < 2 && !(idx.length === 1 && s.windows === 1)) continue;
    let maxWait = 0;
    for (const i of idx) maxWait = Math.max(maxWait, w.waiting[i]);
    const pool = facts.pool_tokens;
    out.push(
      finding(
        'warning',
        'audit-kv-cache-full',
        `KV cache pinned at ≥${fullPct}% with requests waiting in ${idx.length} of ${s.windows} windows of ${segName(s)} (up to ${fmtNum(maxWait, 0)} waiting, ${citeList(
          facts,
          idx.map((i) => w.line[i]),
        )}): the pool, not compute, limits this point.`,
        at,
        {
          cause: `The requests in flight need more KV than the pool${pool ? ` (${fmtNum(pool.value, 0)} tokens)` : ''} holds, so new ones queue and TTFT includes queueing.`,
          fix: 'read this point as capacity-bound; keep concurrency × (input + output) under the pool tokens, or free memory for KV (higher gpu_memory_utilization, fp8 KV cache)',
          related: related(
            facts,
            idx.map(
              (i) =>
                [w.line[i], `GPU KV cache usage ${fmtNum(w.kv[i], 1)}%, waiting ${w.waiting[i]}`] as [number, string],
            ),
          ),
        },
      ),
    );
  }
  return out;
}
