/**
 * Rules on what a server log (or a /metrics snapshot) says, over the facts an audit states
 * (audit/facts.ts): the KV pool against the setup's prediction, prefix-cache contamination per
 * segment, prefill/decode interference, heartbeat averages offered as rates, sampler fallback,
 * preemptions, a KV cache pinned full with requests waiting, the server failing, and the log
 * itself (values that cannot be right, lines too long or not read, no stats). Each finding is made
 * here, once, and cites the log line that holds its number; the audit only reads and states.
 */
import { dialectWords } from '../audit/dialectWords';
import {
  cite,
  citeList,
  heartbeatMeans,
  idleEdges,
  interferenceWindows,
  windowsOf,
  type Windows,
} from '../audit/evidence';
import { DTYPE_BYTES } from '../catalog/types';
import type { Setup } from '../engine/types';
import { serverNumber } from '../kinds/predictShared';
import { factAbove, factsOf, lastFact, type FactOf } from '../facts';
import { finding, type CellPath, type Finding, type RelatedInfo } from '../findings';
import { BLOCK_SIZE, kvPool } from '../physics/kvPool';
import { fmtNum, GiB, GIB_IN_GB } from '../units';
import type { CheckInput, CheckRule } from './types';

/** Every audit finding stands on the cell's `audit:` key; the message and related lines cite the log. */
const AT: CellPath = ['audit'];

type Files = FactOf<'log'>['files'];
type Segment = FactOf<'log-segment'>;

/** The audit cell's own settings (thresholds), as its schema parsed them. */
interface AuditCell {
  hit_threshold?: number;
  kv_full?: number;
}
const cellOf = (input: CheckInput): AuditCell =>
  typeof input.cell === 'object' && input.cell !== null ? (input.cell as AuditCell) : {};
/** Prefix-cache hit rate (%) above which a segment counts as served from the cache. */
const hitThreshold = (input: CheckInput) => cellOf(input).hit_threshold ?? 10;

/** What a log audit stated, or undefined for any other cell (and for an audit that read no log). */
interface LogEvidence {
  log: FactOf<'log'>;
  files: Files;
  w?: Windows;
  segments: Segment[];
}
function logEvidence(input: CheckInput): LogEvidence | undefined {
  if (input.kind !== 'audit') return undefined;
  const log = lastFact(input.facts, 'log');
  if (!log) return undefined;
  const wf = lastFact(input.facts, 'log-windows');
  return {
    log,
    files: log.files,
    w: wf ? windowsOf(wf) : undefined,
    segments: factsOf(input.facts, 'log-segment'),
  };
}
const snapshotOf = (input: CheckInput) =>
  input.kind === 'audit' ? lastFact(input.facts, 'metrics-snapshot') : undefined;

function related(files: Files, items: [number, string][]): RelatedInfo[] {
  return items.slice(0, 8).map(([line, what]) => ({ message: `${cite(files, line)}: ${what}` }));
}

const segName = (s: Segment) =>
  `segment ${s.index + 1} (${s.start_stamp}–${s.end_stamp.slice(6)}, load ≈${fmtNum(s.load, 0)})`;

const lineOf = (f: { log_lines?: Record<string, number> }, field: string) => f.log_lines?.[field];

// ------------------------------------------------------------------------------------------------

const gibOf = (bytes: number) => bytes / GiB;

/** The setup's knobs the pool prediction takes. */
function poolKnobs(setup: Setup): { util?: number; maxLen?: number } {
  return { util: serverNumber(setup, 'gpu_memory_utilization'), maxLen: serverNumber(setup, 'max_model_len') };
}

/** The latest `predict: kv-pool` cell above, whose pool the log is weighed against instead of recomputing it. */
function predictedPool(input: CheckInput) {
  const above = factAbove(
    input.notebook.results,
    input.cellIndex,
    'kv-pool',
    (f) => f.source === 'predict: kv-pool' && f.tokens !== undefined,
  );
  if (!above) return undefined;
  return {
    pool_tokens: above.fact.tokens!,
    available_kv_gib: above.fact.available_bytes !== undefined ? gibOf(above.fact.available_bytes) : undefined,
    label: `the predict: kv-pool cell${above.cell.name ? ` "${above.cell.name}"` : ''}`,
    cellIndex: above.cellIndex,
  };
}

/** Within 2% of the prediction a pool matches it. */
const poolMatches = (ratio: number) => Math.abs(ratio - 1) <= 0.02;
const SET_WHAT_SERVER_RAN = 'set gpu_memory_utilization and kv_cache in the setup to what the server ran';

/**
 * The pool's finding, from the log or a /metrics snapshot: it matches the prediction (with the
 * lines it cites), or it does not, with what to change (by default the setup's knobs).
 */
function poolFinding(
  ratio: number,
  message: string,
  more: { cause?: string; fix?: string; related?: RelatedInfo[] } = {},
): Finding {
  if (poolMatches(ratio))
    return finding('info', 'audit-kv-pool-matches', message, AT, more.related ? { related: more.related } : {});
  return finding('warning', 'audit-kv-pool-mismatch', message, AT, { ...more, fix: more.fix ?? SET_WHAT_SERVER_RAN });
}

function logKvPool(input: CheckInput, ev: LogEvidence): Finding[] {
  const pool = factsOf(input.facts, 'kv-pool').find((f) => f.source === 'log');
  const files = ev.files;
  const out: Finding[] = [];
  const poolLine = pool && lineOf(pool, 'tokens');
  if (!pool || pool.tokens === undefined || poolLine === undefined) return out;
  const tokens = pool.tokens;
  const workers = pool.workers ?? [];
  if (workers.some((x) => x.tokens !== workers[0].tokens)) {
    out.push(
      finding(
        'info',
        'audit-kv-pool-workers-differ',
        `The ${workers.length} workers report different KV pools (${workers.map((x) => fmtNum(x.tokens, 0)).join(', ')} tokens, ${citeList(
          files,
          workers.map((x) => x.line),
        )}); the smallest, ${fmtNum(tokens, 0)}, bounds the engine.`,
        AT,
      ),
    );
  }
  const setup = input.setup;
  if (!setup) return out;
  const m = setup.model;
  const { util, maxLen } = poolKnobs(setup);
  const predicted = predictedPool(input);
  const computed = kvPool(setup, { gpuMemoryUtilization: util, maxModelLen: maxLen });
  const pred = predicted
    ? {
        ...computed,
        pool_tokens: predicted.pool_tokens,
        available_kv_gib: predicted.available_kv_gib ?? computed.available_kv_gib,
      }
    : computed;
  const ratio = tokens / pred.pool_tokens;
  const availLine = lineOf(pool, 'available_bytes');
  const avail =
    pool.available_bytes !== undefined && availLine !== undefined
      ? { value: gibOf(pool.available_bytes), line: availLine }
      : undefined;
  const weights = factsOf(input.facts, 'weights').find((f) => f.source === 'log');
  const cites: [number, string][] = [[poolLine, `GPU KV cache size: ${fmtNum(tokens, 0)} tokens`]];
  if (avail) cites.push([avail.line, `Available KV cache memory: ${avail.value} GiB`]);
  const predCell = predicted ? predicted.cellIndex : setup.cellIndex;
  const rel = [
    ...related(files, cites),
    ...(predCell !== undefined
      ? [{ message: predicted ? predicted.label : `setup ${setup.name}: the kv-pool prediction`, cellIndex: predCell }]
      : []),
  ];
  const logSide = `the log's ${fmtNum(tokens, 0)} tokens (${cite(files, poolLine)})`;
  const predSide = predicted
    ? `${predicted.label}'s ${fmtNum(pred.pool_tokens, 0)} tokens`
    : `the prediction's ${fmtNum(pred.pool_tokens, 0)} tokens (${fmtNum(pred.available_kv_gib, 2)} GiB available, ${setup.model.name} ${setup.kvCache} KV on ${setup.gpu.id} at gpu_memory_utilization ${pred.gpu_memory_utilization})`;
  // Does the log agree with itself? tokens = floor(available / (page × layers)) × 16.
  let selfNote = '';
  if (avail && !pool.derived) {
    const page = 2 * BLOCK_SIZE * m.kvHeads * m.headDim * DTYPE_BYTES[setup.kvCache];
    const fromAvail = Math.floor((avail.value * GiB) / (page * m.layers)) * BLOCK_SIZE;
    const r = tokens / fromAvail;
    if (Math.abs(r - 1) > 0.01)
      selfNote = ` The log's own ${avail.value} GiB gives ${fmtNum(fromAvail, 0)} tokens at ${fmtNum(pred.kv_bytes_per_token, 0)} B/token, ${fmtNum(r, 2)}× off: the KV dtype or the model in the setup is not what the server ran (kv_cache: ${setup.kvCache}).`;
  }
  if (poolMatches(ratio)) {
    out.push(
      poolFinding(ratio, `KV pool: ${logSide} matches ${predSide}: ratio ${fmtNum(ratio, 4)}.${selfNote}`, {
        related: rel,
      }),
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
  if (Math.abs(tokens / asGiB - 1) <= 0.03)
    slip = ` That is the GB/GiB slip: the setup's GPU memory (${fmtNum(setup.gpu.memory / 1e9, 1)} GB) read as GiB gives ${fmtNum(asGiB, 0)} tokens, within ${fmtNum(Math.abs(tokens / asGiB - 1) * 100, 1)}% of the log. An "80GB" card holds 80 GiB.`;
  else if (Math.abs(tokens / asGB - 1) <= 0.03)
    slip = ` That is the GB/GiB slip the other way: the setup's memory taken as GB gives ${fmtNum(asGB, 0)} tokens, within ${fmtNum(Math.abs(tokens / asGB - 1) * 100, 1)}% of the log.`;
  else if (Math.abs(ratio - GIB_IN_GB) <= 0.015 || Math.abs(ratio - 1 / GIB_IN_GB) <= 0.015)
    slip = ` The ratio is 2^30/10^9 = 1.074 (or its inverse): a GB/GiB slip somewhere in the prediction (GB is 10^9 bytes, GiB 2^30).`;
  out.push(
    poolFinding(
      ratio,
      `KV pool: ${logSide} against ${predSide}: ratio ${fmtNum(ratio, 3)} (${ratio > 1 ? '+' : ''}${fmtNum((ratio - 1) * 100, 1)}%).${slip}${selfNote}`,
      {
        cause: slip
          ? 'Mixing GB (10^9) and GiB (2^30) moves a KV-pool prediction by about 7–10%.'
          : 'The prediction assumed a different gpu_memory_utilization, activation peak, weight size or KV dtype than the server measured.',
        fix: slip
          ? 'write the card memory as "80 GiB" (or use the catalog id), and rerun the prediction'
          : `${SET_WHAT_SERVER_RAN}; the log says weights took ${weights ? `${gibOf(weights.bytes)} GiB` : '(not printed)'}${avail ? ` and ${avail.value} GiB were left for KV` : ''}`,
        related: rel,
      },
    ),
  );
  return out;
}

/** A /metrics snapshot's pool (vllm:cache_config_info) against the setup's prediction. */
function snapshotKvPool(input: CheckInput, s: FactOf<'metrics-snapshot'>): Finding[] {
  const setup = input.setup;
  if (s.gpu_blocks === undefined || s.block_size === undefined || !setup) return [];
  const tokens = s.gpu_blocks * s.block_size;
  const pred = kvPool(setup, { gpuMemoryUtilization: poolKnobs(setup).util });
  const r = tokens / pred.pool_tokens;
  const msg = `KV pool from vllm:cache_config_info (${fmtNum(s.gpu_blocks, 0)} blocks × ${s.block_size} = ${fmtNum(tokens, 0)} tokens) against the prediction's ${fmtNum(pred.pool_tokens, 0)} tokens: ratio ${fmtNum(r, 4)}.`;
  return [poolFinding(r, msg)];
}

export const auditKvPool: CheckRule = {
  id: 'audit-kv-pool',
  summary:
    "The KV pool the server printed (or its /metrics cache config) against the setup's prediction, the GB/GiB slip named; workers that disagree",
  reads: [
    'audit: kv-pool fact (source log: tokens, available_bytes, workers, their log lines), weights fact, log fact',
    'metrics-snapshot fact: gpu_blocks, block_size',
    'the setup; a predict: kv-pool cell above (its kv-pool fact)',
  ],
  codes: {
    'audit-kv-pool-workers-differ': 'workers differ',
    'audit-kv-pool-matches': 'pool matches',
    'audit-kv-pool-mismatch': 'util or dtype differs?',
  },
  check(input) {
    const ev = logEvidence(input);
    if (ev) return logKvPool(input, ev);
    const s = snapshotOf(input);
    return s ? snapshotKvPool(input, s) : [];
  },
};

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
function contamination(ev: LogEvidence, w: Windows, s: Segment, thr: number, lastOwn: number): Finding | undefined {
  if (s.prefix_hit_max === undefined || s.prefix_hit_max <= thr) return undefined;
  const prevHit = (i: number): number | undefined => {
    for (let j = i - 1; j >= 0; j--) if (!Number.isNaN(w.hit[j])) return w.hit[j];
    return undefined;
  };
  const rising: number[] = [];
  for (let i = s.first; i <= lastOwn; i++) {
    const p = prevHit(i);
    // The log prints rates to a decimal or two: a printed rise of 0.5 points is one (4.1 − 3.6 in
    // binary floating point is a hair under 0.5).
    if (p !== undefined && w.hit[i] > thr && w.hit[i] - p >= 0.5 - 1e-9) rising.push(i);
  }
  let above = 0;
  for (let i = s.first; i <= lastOwn; i++) if (w.hit[i] > thr) above++;
  if (!rising.length || above < 2) return undefined;
  const d = dialectWords(ev.log.server);
  const before = prevHit(s.first);
  const lines: [number, string][] = rising
    .slice(0, 6)
    .map((i) => [w.line[i], `prefix cache hit rate ${fmtNum(w.hit[i], 1)}% (was ${fmtNum(prevHit(i)!, 1)}%)`]);
  const from = before === undefined ? 'from its first window' : `from ${fmtNum(before, 1)}% before it`;
  return finding(
    'warning',
    'audit-prefix-cache-contamination',
    `Prefix-cache hit rate rose in ${segName(s)} (${from} to a peak of ${fmtNum(s.prefix_hit_max, 1)}%; rising in ${rising.length} of ${s.windows} windows, ${citeList(
      ev.files,
      rising.map((i) => w.line[i]),
    )}): this point's requests were partly served from the cache, so its TTFT and prompt throughput partly measure cache hits, not prefill.`,
    AT,
    {
      cause: `The log shows that requests hit the cache, not why. Possibly: prompts repeated across points (one fixed seed for every point), requests sharing a long common prefix (a system prompt, a chat history), or a client retrying requests.${
        d.id === 'vllm'
          ? " vLLM's rate is rolling over the last 1,000 requests: a rise means this point's requests hit."
          : ''
      }`,
      fix: d.remedies.prefixCache,
      related: related(ev.files, lines),
    },
  );
}

export const auditPrefixCache: CheckRule = {
  id: 'audit-prefix-cache',
  summary:
    "A segment of the log whose prefix-cache hit rate rose past the threshold: the point's requests hit the cache",
  reads: [
    'audit: log-windows (prefix_hit, line), log-segment (first, last, prefix_hit_max), log (server)',
    'metrics-snapshot: prefix_hits / prefix_queries or prefix_hit_rate',
    'the cell: hit_threshold',
  ],
  codes: { 'audit-prefix-cache-contamination': 'prefix-cache hit?' },
  check(input) {
    const thr = hitThreshold(input);
    const ev = logEvidence(input);
    if (ev) {
      const w = ev.w;
      if (!w) return [];
      const out: Finding[] = [];
      for (const [k, s] of ev.segments.entries()) {
        // When the next point follows with no idle gap, the last window straddles both: its
        // completions may be the next point's, so it does not count for this one.
        const straddles = ev.segments[k + 1]?.starts_after === 'load-change';
        const c = contamination(ev, w, s, thr, straddles ? s.last - 1 : s.last);
        if (c) out.push(c);
      }
      return out;
    }
    const s = snapshotOf(input);
    if (!s) return [];
    const pct =
      s.prefix_hits !== undefined && s.prefix_queries !== undefined
        ? s.prefix_queries > 0
          ? (100 * s.prefix_hits) / s.prefix_queries
          : undefined
        : s.prefix_hit_rate !== undefined
          ? s.prefix_hit_rate * 100
          : undefined;
    if (pct === undefined || pct <= thr) return [];
    return [
      finding(
        'warning',
        'audit-prefix-cache-contamination',
        `Prefix-cache hit rate since the server started: ${fmtNum(pct, 1)}% (${s.prefix_metric}). Measurements on this server were partly served from the cache.`,
        AT,
        {
          fix: 'take a snapshot before and after each point and use Δhits/Δqueries per point (the bench cell does); use a fresh seed per point',
        },
      ),
    ];
  },
};

// ------------------------------------------------------------------------------------------------

function interference(ev: LogEvidence, w: Windows, s: Segment): Finding | undefined {
  if (s.windows < 4) return undefined;
  const { flood, decode, alternations } = interferenceWindows(w, s);
  // One flood at a point's start is its ramp; interference is floods that keep coming back.
  if (flood.length < 2 || alternations < 3) return undefined;
  const range = (idx: number[], a: number[]) => {
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
      ev.files,
      flood.map((i) => w.line[i]),
    )}.`,
    AT,
    {
      cause:
        "Requests arrive in synchronized waves (closed loop, fixed lengths, ignore_eos): each wave's prefills are packed into the decode steps and stall every running stream, so p99 ITL is many times the median. The decode roofline never bills this prefill.",
      fix: 'predict with the serving model (prefill interference included) rather than the decode roofline; to measure decode alone, stagger arrivals (an open-loop request rate) or lower max_num_batched_tokens (smaller prefill chunks)',
      related: related(ev.files, rel),
    },
  );
}

export const auditInterference: CheckRule = {
  id: 'audit-interference',
  summary: 'A segment whose windows alternate between prefill floods and decode: prefill stalls every running stream',
  reads: ['audit: log-windows (prompt, generation, line), log-segment (first, last, windows)'],
  codes: { 'audit-prefill-decode-interference': 'prefill interference' },
  check(input) {
    const ev = logEvidence(input);
    const w = ev?.w;
    if (!ev || !w) return [];
    return ev.segments.flatMap((s) => interference(ev, w, s) ?? []);
  },
};

// ------------------------------------------------------------------------------------------------

export const auditHeartbeat: CheckRule = {
  id: 'audit-heartbeat',
  summary: "The log's periodic throughput averaged over its span, idle time included, read as a rate",
  reads: [
    'audit: log-windows (t, generation, waiting, line, interval), log-segment (first, last, starts_after, generation)',
  ],
  codes: { 'audit-heartbeat-not-instrument': 'heartbeat, not instrument' },
  check(input) {
    const ev = logEvidence(input);
    const w = ev?.w;
    if (!ev || !w) return [];
    const segs = ev.segments;
    const hm = heartbeatMeans(w, segs);
    if (!hm) return [];
    const first = segs[0].first;
    const last = segs[segs.length - 1].last;
    const { log_mean_gen_tok_s: logMean, busy_mean_gen_tok_s: busyMean, slots } = hm;
    // Short segments whose windows the log shows bordering idle time: their rate is a lower bound.
    const short = segs.filter((s, k) => {
      if (s.windows >= 3) return false;
      const e = idleEdges(w, segs, k);
      return e.first || e.last;
    });
    if (!(busyMean > 0) || (logMean / busyMean > 0.9 && !short.length)) return [];
    const shortNote = short.length
      ? ` ${short.length} segment${short.length > 1 ? 's span' : ' spans'} fewer than 3 windows next to idle time the log shows (${short.map((s) => segName(s)).join('; ')}): a window there includes idle time, so the log rate (${short.map((s) => `${fmtNum(s.generation, 1)} tok/s`).join(', ')}) is a lower bound, not the run's rate.`
      : '';
    return [
      finding(
        'info',
        'audit-heartbeat-not-instrument',
        `Heartbeat, not instrument: averaged over the log's ${fmtNum(slots, 0)} windows from ${cite(ev.files, w.line[first])} to ${cite(ev.files, w.line[last])}, "Avg generation throughput" gives ${fmtNum(logMean, 1)} tok/s; the busy windows alone give ${fmtNum(busyMean, 1)} tok/s (${fmtNum((logMean / busyMean) * 100, 0)}%).${shortNote}`,
        AT,
        {
          cause:
            "vLLM's periodic line divides the tokens of a wall-clock window (10 s in V1) by the window, idle time included, and is not printed at all while idle. A run that straddles windows reads low: a real batch-1 run at 88.4 tok/s showed 58.8.",
          fix: "quote rates from the benchmark (output tokens / the run's own wall time, or vllm:generation_tokens_total deltas over the run), and use the log only to see when and what happened",
        },
      ),
    ];
  },
};

// ------------------------------------------------------------------------------------------------

export const auditSampler: CheckRule = {
  id: 'audit-sampler',
  summary: 'The sampler the server chose at startup: a fallback to the PyTorch-native path, or FlashInfer selected',
  reads: ['audit: sampling fact (source log: sampler, text, backends, its log line), log fact'],
  codes: { 'audit-sampler-fallback': 'sampler fallback', 'audit-sampler-selected': 'sampler selected' },
  check(input) {
    const ev = logEvidence(input);
    if (!ev) return [];
    const s = factsOf(input.facts, 'sampling').find((f) => f.source === 'log' && f.sampler);
    const line = s && lineOf(s, 'sampler');
    if (!s || line === undefined) return [];
    if (s.sampler === 'fallback')
      return [
        finding(
          'warning',
          'audit-sampler-fallback',
          `Sampler fallback at ${cite(ev.files, line)}: "${(s.text ?? '').slice(0, 140)}". Top-p/top-k ran on the PyTorch-native path, slower per step than FlashInfer's fused sampler.`,
          AT,
          {
            cause: 'FlashInfer is not installed (or not supported on this GPU/dtype), so vLLM fell back at startup.',
            fix: 'install the FlashInfer wheel matching the vLLM and torch versions (or set VLLM_USE_FLASHINFER_SAMPLER=1 where it is installed), then restart the server; note the fallback next to every decode number from this run',
            related: related(
              ev.files,
              (s.backends ?? []).map((x) => [x.line, x.sampler] as [number, string]),
            ),
          },
        ),
      ];
    return [
      finding(
        'info',
        'audit-sampler-selected',
        `FlashInfer sampler selected at ${cite(ev.files, line)}. Selected is not executed: a request with no top_p/top_k, or with a per-request seed, silently takes the native path.`,
        AT,
        { fix: 'benchmark requests should set top_p/top_k and no request-level seed' },
      ),
    ];
  },
};

// ------------------------------------------------------------------------------------------------

const logLinesOf = (input: CheckInput, what: FactOf<'log-lines'>['what']) =>
  factsOf(input.facts, 'log-lines').find((f) => f.what === what);

export const auditPreemptions: CheckRule = {
  id: 'audit-preemptions',
  summary: 'Preemptions in the log (per segment, or V0 warnings) or in a /metrics snapshot: requests recomputed',
  reads: [
    'audit: log-windows (preemptions, line), log-segment (preemptions), log-lines {what: preemption-warning}',
    'metrics-snapshot: preemptions',
  ],
  codes: { 'audit-preemptions': 'preemptions' },
  check(input) {
    const ev = logEvidence(input);
    if (!ev) {
      const s = snapshotOf(input);
      return s?.preemptions
        ? [
            finding(
              'warning',
              'audit-preemptions',
              `${fmtNum(s.preemptions, 0)} preemptions since the server started (vllm:num_preemptions_total).`,
              AT,
            ),
          ]
        : [];
    }
    const w = ev.w;
    const hit = w ? ev.segments.filter((s) => s.preemptions > 0) : [];
    const total = hit.reduce((a, s) => a + s.preemptions, 0);
    const v0 = logLinesOf(input, 'preemption-warning');
    if (!hit.length && !v0) return [];
    const lines: [number, string][] = [];
    if (w)
      for (const s of hit)
        for (let i = s.first; i <= s.last && lines.length < 8; i++)
          if (w.preempt[i] > 0) lines.push([w.line[i], `${w.preempt[i]} preemption(s)`]);
    for (const p of (v0?.samples ?? []).slice(0, 4))
      lines.push([p.line, `preemption warning${p.cumulative !== undefined ? `, cumulative ${p.cumulative}` : ''}`]);
    const cum = v0 ? (v0.last ?? v0.samples[v0.samples.length - 1])?.cumulative : undefined;
    const where = hit.length ? ` in ${hit.map((s) => `${segName(s)}: ${s.preemptions}`).join('; ')}` : '';
    const v0Note = v0
      ? ` The V0 engine warned ${v0.count} time(s) (it prints every 50th)${cum !== undefined ? `, cumulative ${fmtNum(cum, 0)}` : ''}.`
      : '';
    return [
      finding(
        'warning',
        'audit-preemptions',
        `Preemptions${hit.length ? `: ${fmtNum(total, 0)}` : ''}${where}.${v0Note} A preempted request loses its KV cache and recomputes its prefill: latency and throughput at these points include that rework.`,
        AT,
        {
          cause:
            'More concurrent tokens than the KV pool holds: the scheduler evicts running requests to admit others.',
          fix: 'lower max_num_seqs (or the benchmark concurrency) to what the pool holds — pool tokens / (input + output) — or raise gpu_memory_utilization',
          related: related(ev.files, lines),
        },
      ),
    ];
  },
};

export const auditKvCacheFull: CheckRule = {
  id: 'audit-kv-cache-full',
  summary: 'A KV cache pinned full with requests waiting: the pool, not compute, limits the point',
  reads: [
    'audit: log-windows (kv_usage, waiting, line), log-segment, kv-pool (source log)',
    'metrics-snapshot: kv_usage, waiting',
    'the cell: kv_full',
  ],
  codes: { 'audit-kv-cache-full': 'KV cache full' },
  check(input) {
    const fullPct = cellOf(input).kv_full ?? 95;
    const ev = logEvidence(input);
    if (!ev) {
      const s = snapshotOf(input);
      if (!s || s.kv_usage === undefined) return [];
      const pct = s.kv_usage * 100;
      // A snapshot is weighed against the default (95%): kv_full names the log's windows.
      return pct >= 95 && (s.waiting ?? 0) > 0
        ? [
            finding(
              'warning',
              'audit-kv-cache-full',
              `KV cache at ${fmtNum(pct, 1)}% with ${s.waiting} requests waiting at the snapshot.`,
              AT,
            ),
          ]
        : [];
    }
    const w = ev.w;
    if (!w) return [];
    const pool = factsOf(input.facts, 'kv-pool').find((f) => f.source === 'log');
    const out: Finding[] = [];
    for (const s of ev.segments) {
      const idx: number[] = [];
      for (let i = s.first; i <= s.last; i++) if (w.kv[i] >= fullPct && w.waiting[i] > 0) idx.push(i);
      if (idx.length < 2 && !(idx.length === 1 && s.windows === 1)) continue;
      let maxWait = 0;
      for (const i of idx) maxWait = Math.max(maxWait, w.waiting[i]);
      out.push(
        finding(
          'warning',
          'audit-kv-cache-full',
          `KV cache pinned at ≥${fullPct}% with requests waiting in ${idx.length} of ${s.windows} windows of ${segName(s)} (up to ${fmtNum(maxWait, 0)} waiting, ${citeList(
            ev.files,
            idx.map((i) => w.line[i]),
          )}): the pool, not compute, limits this point.`,
          AT,
          {
            cause: `The requests in flight need more KV than the pool${pool?.tokens !== undefined ? ` (${fmtNum(pool.tokens, 0)} tokens)` : ''} holds, so new ones queue and TTFT includes queueing.`,
            fix: 'read this point as capacity-bound; keep concurrency × (input + output) under the pool tokens, or free memory for KV (higher gpu_memory_utilization, fp8 KV cache)',
            related: related(
              ev.files,
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
  },
};

// ------------------------------------------------------------------------------------------------

const quoted = (c: { text?: string }) => (c.text ? `: "${c.text}"` : '');
const phaseNote = (c: FactOf<'log-crash'>) => (c.phase === 'startup' ? ' (at startup: the server never served)' : '');

export const auditCrashes: CheckRule = {
  id: 'audit-crashes',
  summary:
    'The server failing in its log: out of memory (what to change), a KV cache too small to start, the engine dead, tracebacks, error lines',
  reads: ['audit: log-crash facts (crash, line, phase, after, text), log (server, crashes)'],
  codes: {
    'audit-out-of-memory': 'out of memory',
    'audit-kv-cache-too-small': 'KV cache too small',
    'audit-engine-died': 'engine died',
    'audit-traceback': 'traceback',
    'audit-error-lines': 'error lines',
  },
  check(input) {
    const ev = logEvidence(input);
    if (!ev) return [];
    const out: Finding[] = [];
    const d = dialectWords(ev.log.server);
    const cs = factsOf(input.facts, 'log-crash');
    if (!cs.length) return out;
    const files = ev.files;
    for (const c of cs.filter((x) => x.crash === 'oom').slice(0, 3)) {
      const fix =
        c.phase === 'serving'
          ? d.remedies.oomServing
          : c.after === 'nothing'
            ? d.remedies.oomWeights
            : d.remedies.oomStartup;
      const when =
        c.phase === 'serving'
          ? 'while serving'
          : c.after === 'nothing'
            ? 'at startup, before the weights finished loading'
            : c.after === 'weights'
              ? 'at startup, after the weights loaded (profiling or KV cache allocation)'
              : 'at startup, after the KV cache was allocated (CUDA graph capture or warmup)';
      out.push(
        finding(
          'error',
          'audit-out-of-memory',
          `Out of GPU memory ${when} at ${cite(files, c.line)}${quoted(c)}.`,
          AT,
          {
            cause:
              c.after === 'nothing'
                ? 'The weights (per GPU) are larger than the free GPU memory, or another process holds memory on the GPU.'
                : 'The memory vLLM reserves (gpu_memory_utilization × the card) plus what it needs to profile or capture graphs exceeds what is free.',
            fix,
          },
        ),
      );
    }
    for (const c of cs.filter((x) => x.crash === 'kv-too-small').slice(0, 2))
      out.push(
        finding(
          'error',
          'audit-kv-cache-too-small',
          `The KV cache cannot hold one request of the maximum length at ${cite(files, c.line)}${quoted(c)}: the server refused to start.`,
          AT,
          { fix: d.remedies.kvTooSmall },
        ),
      );
    for (const c of cs.filter((x) => x.crash === 'engine-dead').slice(0, 2))
      out.push(
        finding(
          'error',
          'audit-engine-died',
          `The engine died at ${cite(files, c.line)}${quoted(c)}${phaseNote(c)}.`,
          AT,
          {
            cause:
              'An error in the engine process (see the traceback above this line in the log); the API server stops answering after it.',
            fix: 'read the first traceback before this line for the cause; measurements after it are not of a serving engine',
          },
        ),
      );
    const rest = cs.filter((x) => x.crash === 'traceback' || x.crash === 'exception');
    if (rest.length)
      out.push(
        finding(
          rest.some((c) => c.phase === 'startup') ? 'error' : 'warning',
          'audit-traceback',
          `${rest.length} traceback${rest.length > 1 ? 's' : ''} or exception${rest.length > 1 ? 's' : ''} in the log: ${rest
            .slice(0, 3)
            .map((c) => `${cite(files, c.line)}${quoted(c)}${phaseNote(c)}`)
            .join('; ')}${rest.length > 3 ? '; …' : ''}.`,
          AT,
          {
            fix: 'read the exception at the end of each traceback; a request that failed there is missing from the measurements',
          },
        ),
      );
    const errs = cs.filter((x) => x.crash === 'error');
    if (errs.length)
      out.push(
        finding(
          'warning',
          'audit-error-lines',
          `${errs.length}${ev.log.crashes > cs.length ? '+' : ''} error line${errs.length > 1 ? 's' : ''} in the log: ${errs
            .slice(0, 3)
            .map((c) => `${cite(files, c.line)}${quoted(c)}`)
            .join('; ')}${errs.length > 3 ? '; …' : ''}.`,
          AT,
        ),
      );
    return out;
  },
};

// ------------------------------------------------------------------------------------------------

export const auditLogReading: CheckRule = {
  id: 'audit-log-reading',
  summary:
    'The log itself: values that cannot be right, lines too long to read, a file that is no server log, no stats lines, lines not in the format, informative lines not read',
  reads: ['audit: log fact (server, lines, windows), log-lines facts (count, samples), log-crash (phase)'],
  codes: {
    'audit-parse-warning': 'corrupt log line',
    'audit-long-lines': 'lines skipped',
    'audit-not-a-server-log': 'not a server log',
    'audit-no-stats': 'no stats lines',
    'audit-unknown-lines': 'unknown lines',
    'audit-informative-unknown': 'lines not read',
  },
  check(input) {
    const ev = logEvidence(input);
    if (!ev) return [];
    const { log, files } = ev;
    const out: Finding[] = [];
    const d = dialectWords(log.server);
    const bad = logLinesOf(input, 'cannot-be-right');
    if (bad) {
      const n = bad.count;
      out.push(
        finding(
          'warning',
          'audit-parse-warning',
          `${n} value${n > 1 ? 's' : ''} in the log cannot be right and ${n > 1 ? 'were' : 'was'} left out of the timeline: ${bad.samples
            .slice(0, 4)
            .map((x) => `${x.what} (${cite(files, x.line)})`)
            .join('; ')}${n > 4 ? '; …' : ''}.`,
          AT,
          {
            cause:
              'The log is corrupt there (two lines written over each other, or a cut copy), or the server printed a bad value.',
            fix: 'audit the original log file rather than a copy; the findings leave these windows out',
          },
        ),
      );
    }
    const ll = logLinesOf(input, 'too-long');
    if (ll)
      out.push(
        finding(
          'info',
          'audit-long-lines',
          `${fmtNum(ll.count, 0)} line${ll.count > 1 ? 's' : ''} longer than ${fmtNum((ll.limit_bytes ?? 0) / 2 ** 20, 0)} MiB ${ll.count > 1 ? 'were' : 'was'} skipped unread (${ll.samples
            .slice(0, 5)
            .map((l) => cite(files, l.line))
            .join(', ')}${ll.count > 5 ? ', …' : ''}; the longest ${fmtNum((ll.max_bytes ?? 0) / 2 ** 20, 1)} MiB).`,
          AT,
          { cause: 'No server log line is that long: binary data, or a file that is not a log.' },
        ),
      );
    if (log.server === undefined && log.lines > 0) {
      out.push(
        finding(
          'warning',
          'audit-not-a-server-log',
          `No line of the ${fmtNum(log.lines, 0)} reads as a vLLM or SGLang server log line, so nothing is quoted from it.`,
          AT,
          {
            fix: "audit the server's own log (e.g. `vllm serve … 2>&1 | tee logs/vllm.log`, or `docker logs CONTAINER > vllm.log`), or a /metrics URL",
          },
        ),
      );
      return out;
    }
    if (!log.windows && log.lines > 0) {
      out.push(
        finding(
          'info',
          'audit-no-stats',
          `No ${d.statsLine} in ${fmtNum(log.lines, 0)} lines: no timeline, no segments.`,
          AT,
          {
            cause: factsOf(input.facts, 'log-crash').some((c) => c.phase === 'startup')
              ? 'The server failed before it served (see the error findings).'
              : 'The server ran without periodic stats (vLLM: --disable-log-stats), or the log holds only startup.',
            fix: d.remedies.noStats,
          },
        ),
      );
    }
    const unknown = logLinesOf(input, 'unknown');
    if (unknown && unknown.count > 0.2 * log.lines) {
      const s = unknown.samples[0];
      out.push(
        finding(
          'info',
          'audit-unknown-lines',
          `${fmtNum(unknown.count, 0)} of ${fmtNum(log.lines, 0)} lines are not in ${d.name}'s log format (first at ${cite(files, s.line)}${quoted(s)}).`,
          AT,
          { cause: 'Tracebacks, progress bars, or another program writing to the same file.' },
        ),
      );
    }
    const inf = logLinesOf(input, 'informative');
    if (inf)
      out.push(
        finding(
          'info',
          'audit-informative-unknown',
          `${fmtNum(inf.count, 0)} line${inf.count > 1 ? 's' : ''} the audit does not read look informative (a name and a number): ${inf.samples
            .slice(0, 3)
            .map((s) => `${cite(files, s.line)}${quoted(s)}`)
            .join('; ')}${inf.count > 3 ? '; …' : ''}.`,
          AT,
          {
            cause: 'A wording this audit does not know yet (another version, a plugin, an outer tool).',
            fix: 'check these lines by hand; the facts above do not include them',
          },
        ),
      );
    return out;
  },
};

/** The audit's rules, in the order its findings read: the pool, the segments, the server, the log. */
export const AUDIT_RULES: CheckRule[] = [
  auditKvPool,
  auditPrefixCache,
  auditInterference,
  auditHeartbeat,
  auditSampler,
  auditPreemptions,
  auditKvCacheFull,
  auditCrashes,
  auditLogReading,
];
