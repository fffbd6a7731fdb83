/**
 * Prometheus text exposition format (version 0.0.4), parsed by hand, and the server evidence a
 * bench point takes from a server's `/metrics`: Δ prefix-cache hit rate (Δhits/Δqueries, token
 * counters), Δ preemptions, Δ prompt and generation tokens, and peaks of KV usage and
 * running/waiting requests. Which names a server uses is its telemetry dialect (telemetry.ts).
 */
import { pick, VLLM, type ServerMetric, type Snapshot, type TelemetryDialect } from './telemetry';

export { pick, type ServerMetric, type Snapshot } from './telemetry';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
  timestampMs?: number;
}

export interface Family {
  name: string;
  type?: string;
  help?: string;
  samples: Sample[];
}

function parseValue(s: string): number {
  if (s === '+Inf' || s === 'Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  if (s === 'NaN') return NaN;
  const v = Number(s);
  return v;
}

function unescapeLabel(s: string): string {
  return s.replace(/\\(n|\\|")/g, (_m, c) => (c === 'n' ? '\n' : c));
}

function unescapeHelp(s: string): string {
  return s.replace(/\\(n|\\)/g, (_m, c) => (c === 'n' ? '\n' : '\\'));
}

/** The family a sample belongs to: histogram/summary suffixes fold into their family. */
function familyOf(name: string, types: Map<string, string>): string {
  if (types.has(name)) return name;
  for (const suf of ['_bucket', '_sum', '_count', '_total', '_created', '_gsum', '_gcount']) {
    if (name.endsWith(suf)) {
      const base = name.slice(0, -suf.length);
      if (types.has(base)) return base;
    }
  }
  return name;
}

/**
 * Parse the text format into families (in order of first appearance). Lines that do not parse are
 * skipped and counted in `bad`; a server's odd line must not cost the whole scrape.
 */
export function parsePrometheusText(text: string): { families: Family[]; bad: number } {
  const types = new Map<string, string>();
  const helps = new Map<string, string>();
  const fams = new Map<string, Family>();
  let bad = 0;
  const get = (name: string): Family => {
    let f = fams.get(name);
    if (!f) {
      f = { name, samples: [] };
      fams.set(name, f);
    }
    return f;
  };
  for (const raw of text.split('\n')) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (!line.trim()) continue;
    if (line.startsWith('#')) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(line);
      if (m) {
        if (m[1] === 'TYPE') {
          types.set(m[2], (m[3] ?? 'untyped').trim());
          get(m[2]).type = (m[3] ?? 'untyped').trim();
        } else {
          helps.set(m[2], unescapeHelp(m[3] ?? ''));
          get(m[2]).help = unescapeHelp(m[3] ?? '');
        }
      }
      continue;
    }
    const s = parseSampleLine(line);
    if (!s) {
      bad++;
      continue;
    }
    get(familyOf(s.name, types)).samples.push(s);
  }
  for (const [n, f] of fams) if (!f.samples.length && !types.has(n) && !helps.has(n)) fams.delete(n);
  return { families: [...fams.values()], bad };
}

function parseSampleLine(line: string): Sample | undefined {
  let i = 0;
  const n = line.length;
  while (i < n && line[i] === ' ') i++;
  const nameStart = i;
  while (i < n && /[A-Za-z0-9_:]/.test(line[i])) i++;
  const name = line.slice(nameStart, i);
  if (!name || /^[0-9]/.test(name)) return undefined;
  const labels: Record<string, string> = {};
  if (line[i] === '{') {
    i++;
    for (;;) {
      while (i < n && (line[i] === ' ' || line[i] === ',')) i++;
      if (line[i] === '}') {
        i++;
        break;
      }
      const ks = i;
      while (i < n && /[A-Za-z0-9_]/.test(line[i])) i++;
      const key = line.slice(ks, i);
      while (i < n && line[i] === ' ') i++;
      if (!key || line[i] !== '=') return undefined;
      i++;
      while (i < n && line[i] === ' ') i++;
      if (line[i] !== '"') return undefined;
      i++;
      let v = '';
      while (i < n && line[i] !== '"') {
        if (line[i] === '\\' && i + 1 < n) {
          v += line[i] + line[i + 1];
          i += 2;
        } else v += line[i++];
      }
      if (line[i] !== '"') return undefined;
      i++;
      labels[key] = unescapeLabel(v);
    }
  }
  const rest = line.slice(i).trim().split(/\s+/);
  if (!rest[0]) return undefined;
  const value = parseValue(rest[0]);
  if (Number.isNaN(value) && rest[0] !== 'NaN') return undefined;
  const s: Sample = { name, labels, value };
  if (rest[1] !== undefined) {
    const ts = Number(rest[1]);
    if (!Number.isFinite(ts)) return undefined;
    s.timestampMs = ts;
  }
  return s;
}

export function snapshotOf(text: string): Snapshot {
  const m: Snapshot = new Map();
  for (const f of parsePrometheusText(text).families)
    for (const s of f.samples) {
      if (s.name.endsWith('_bucket') || s.name.endsWith('_created')) continue;
      m.set(s.name, (m.get(s.name) ?? 0) + s.value);
      // A per-position series (vLLM's spec_decode_num_accepted_tokens_per_pos) keeps its position too.
      if (s.labels.position !== undefined) {
        const k = `${s.name}{position="${s.labels.position}"}`;
        m.set(k, (m.get(k) ?? 0) + s.value);
      }
    }
  return m;
}

/** vLLM's names of each quantity, newest first (telemetry.ts has every server's). */
export const METRIC_NAMES = VLLM.names;

export interface ServerEvidence {
  /** Δhits / Δqueries over the point (token counters); undefined when the server has no counters. */
  prefix_hit_rate?: number;
  prefix_hits_delta?: number;
  prefix_queries_delta?: number;
  /** The metric names the numbers came from. */
  prefix_metric?: string;
  /** V0's gauge (a lifetime figure, not per point) when that is all the server has. */
  prefix_hit_rate_gauge?: number;
  preemptions_delta?: number;
  /** Peak KV-cache usage seen (0..1) across the scrapes of the point. */
  kv_usage_peak?: number;
  running_peak?: number;
  waiting_peak?: number;
  prompt_tokens_delta?: number;
  generation_tokens_delta?: number;
  /** InfLab's simulator only: how late it handed its steps' tokens to the sockets during the point (its own jitter, wall ms). */
  sim_lateness?: SimLateness;
  /** Δ of the server's cached-prompt-token counter (SGLang), when it has one. */
  cached_tokens_delta?: number;
  /**
   * Speculative decoding over the point, from the server's counters (vLLM's spec_decode_*): drafts,
   * drafted and accepted tokens, the draft acceptance rate accepted / drafted, and the mean
   * acceptance length 1 + accepted / drafts (tokens per target step), as vLLM's own log computes them.
   */
  spec_decode?: {
    drafts: number;
    draft_tokens: number;
    accepted_tokens: number;
    acceptance_rate?: number;
    mean_acceptance_length?: number;
    /**
     * Per draft position i (0-based): Δaccepted at i / Δdrafts, the share of steps whose i-th draft
     * token was accepted (vLLM's log prints the same "Per-position acceptance rate"); a setup's
     * `speculative: {acceptance: [...]}` takes this list as it is.
     */
    per_position?: number[];
  };
  /** The server the names belong to (its telemetry dialect). */
  dialect?: TelemetryDialect['id'];
  scrapes: number;
}

/** From the simulator's inflab:sim_* counters (sim/prom.ts), over one point. */
export interface SimLateness {
  steps: number;
  mean_ms: number;
  /** Steps later than each threshold (ms), as a share of the point's steps. */
  over_share: Record<string, number>;
  /** The largest lateness seen by the scrapes during and after the point (the gauge resets at each scrape). */
  max_ms?: number;
}

/** The simulator's step-lateness evidence over a point, when the server is InfLab's simulator. */
function simLateness(before: Snapshot, after: Snapshot, during: Snapshot[]): SimLateness | undefined {
  const a = after.get('inflab:sim_steps_total');
  if (a === undefined) return undefined;
  const d = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
  const steps = a - (before.get('inflab:sim_steps_total') ?? 0);
  const over_share: Record<string, number> = {};
  for (const name of after.keys()) {
    const m = /^inflab:sim_steps_late_over_(\d+)ms_total$/.exec(name);
    if (m) over_share[m[1]] = steps > 0 ? d(name) / steps : 0;
  }
  let max: number | undefined;
  for (const s of [...during, after]) {
    const v = s.get('inflab:sim_step_lateness_max_seconds');
    if (v !== undefined && (max === undefined || v > max)) max = v;
  }
  return {
    steps,
    mean_ms: steps > 0 ? (1000 * d('inflab:sim_step_lateness_seconds_total')) / steps : 0,
    over_share,
    ...(max !== undefined ? { max_ms: max * 1000 } : {}),
  };
}

/** Per-position acceptance over a point from vLLM's spec_decode_num_accepted_tokens_per_pos{position}. */
function perPosition(before: Snapshot, after: Snapshot, drafts: number): { per_position?: number[] } {
  const rates: number[] = [];
  for (const [name, v] of after) {
    const m = /^vllm:spec_decode_num_accepted_tokens_per_pos(?:_total)?\{position="(\d+)"\}$/.exec(name);
    if (m) rates[Number(m[1])] = (v - (before.get(name) ?? 0)) / drafts;
  }
  return rates.length && rates.every((r) => Number.isFinite(r)) ? { per_position: rates } : {};
}

/** Evidence from the snapshot before the point, the one after, and any taken during it. */
export function evidence(
  before: Snapshot,
  after: Snapshot,
  during: Snapshot[] = [],
  dialect: TelemetryDialect = VLLM,
): ServerEvidence {
  const ev: ServerEvidence = { scrapes: 2 + during.length, dialect: dialect.id };
  const delta = (q: ServerMetric) => {
    const a = pick(after, q, dialect);
    if (!a) return undefined;
    const b = before.get(a.name) ?? 0;
    return { name: a.name, d: a.value - b };
  };
  const h = delta('prefixHits');
  const qd = delta('prefixQueries');
  if (h && qd) {
    ev.prefix_hits_delta = h.d;
    ev.prefix_queries_delta = qd.d;
    ev.prefix_metric = `${h.name} / ${qd.name}`;
    ev.prefix_hit_rate = qd.d > 0 ? h.d / qd.d : undefined;
  } else {
    const g = pick(after, 'prefixHitRateGauge', dialect);
    if (g) ev.prefix_hit_rate_gauge = g.value;
  }
  const p = delta('preemptions');
  if (p) ev.preemptions_delta = p.d;
  const pt = delta('promptTokens');
  if (pt) ev.prompt_tokens_delta = pt.d;
  const gt = delta('generationTokens');
  if (gt) ev.generation_tokens_delta = gt.d;
  const ct = delta('cachedTokens');
  if (ct) ev.cached_tokens_delta = ct.d;
  const sd = delta('specDrafts');
  const st = delta('specDraftTokens');
  const sa = delta('specAcceptedTokens');
  if (sd && st && sa)
    ev.spec_decode = {
      drafts: sd.d,
      draft_tokens: st.d,
      accepted_tokens: sa.d,
      ...(st.d > 0 ? { acceptance_rate: sa.d / st.d } : {}),
      ...(sd.d > 0 ? { mean_acceptance_length: 1 + sa.d / sd.d } : {}),
      ...(sd.d > 0 ? perPosition(before, after, sd.d) : {}),
    };
  const all = [before, ...during, after];
  const peak = (q: ServerMetric) => {
    let m: number | undefined;
    for (const s of all) {
      const v = pick(s, q, dialect)?.value;
      if (v !== undefined && (m === undefined || v > m)) m = v;
    }
    return m;
  };
  const kv = peak('kvUsage');
  if (kv !== undefined) ev.kv_usage_peak = kv > 1.0001 ? kv / 100 : kv;
  const r = peak('running');
  if (r !== undefined) ev.running_peak = r;
  const w = peak('waiting');
  if (w !== undefined) ev.waiting_peak = w;
  const late = simLateness(before, after, during);
  if (late) ev.sim_lateness = late;
  return ev;
}
