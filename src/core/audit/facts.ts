/**
 * What an audit states (facts/schema.ts), for the check rules (checks/audit.ts) and the cells after
 * it: the KV pool, weights and sampler the startup lines printed (with their lines), the log as
 * read, its stats windows and segments, the lines it counted rather than read, its crashes, and a
 * /metrics snapshot. The audit only reads and states; every finding is made by a rule.
 */
import * as path from 'node:path';
import { MAX_LOG_CRASHES, MAX_LOG_LINE_SAMPLES, type Fact, type FactOf, type LOG_LINE_KINDS } from '../facts/schema';
import { GiB } from '../units';
import type { MetricsFacts } from './metrics';
import type { AuditFacts } from './parse';
import { MAX_LINE_BYTES } from './parse';
import type { Timeline } from './timeline';

const SOURCE = 'log';

/** The float32 columns back to the ≤ 2 decimals the log prints; null where the line printed none. */
const r2 = (x: number) => (Number.isNaN(x) ? null : Math.round(x * 100) / 100);

/**
 * The facts of a log audit. `files` names the files as the notebook may keep them (relative to it;
 * each file's basename when not given).
 */
export function logFacts(f: AuditFacts, tl: Timeline, files = f.files.map((x) => path.basename(x.path))): Fact[] {
  const out: Fact[] = [];
  const pool = f.pool_tokens;
  const avail = f.available_kv_gib;
  if (pool || avail)
    out.push({
      kind: 'kv-pool',
      ...(pool ? { tokens: pool.value } : {}),
      ...(avail ? { available_bytes: avail.value * GiB } : {}),
      ...(pool && pool.values.length > 1
        ? { workers: pool.values.map((tokens, i) => ({ tokens, line: pool.lines[i] })) }
        : {}),
      ...(pool?.derived ? { derived: pool.derived } : {}),
      source: SOURCE,
      log_lines: { ...(pool ? { tokens: pool.line } : {}), ...(avail ? { available_bytes: avail.line } : {}) },
    });
  if (f.weights_gib)
    out.push({
      kind: 'weights',
      bytes: f.weights_gib.value * GiB,
      source: SOURCE,
      log_lines: { bytes: f.weights_gib.line },
    });
  if (f.sampler)
    out.push({
      kind: 'sampling',
      sampler: f.sampler.value,
      text: f.sampler.text,
      backends: f.sampler_lines.slice(0, 8).map((x) => ({ sampler: x.backend, line: x.line })),
      source: SOURCE,
      log_lines: { sampler: f.sampler.line },
    });
  out.push({
    kind: 'log',
    ...(f.dialect ? { server: f.dialect } : {}),
    ...(f.format ? { format: f.format } : {}),
    files: f.files.map((x, i) => ({
      path: files[i] ?? path.basename(x.path),
      first_line: x.firstLine,
      lines: x.lines,
    })),
    lines: f.lines,
    windows: f.windows.length,
    crashes: f.crash_count,
  });
  const w = f.windows;
  const col = (a: ArrayLike<number>) => Array.from({ length: w.length }, (_, i) => r2(a[i]));
  const windows: FactOf<'log-windows'> = {
    kind: 'log-windows',
    units: { t: 's', interval: 's', prompt: 'tok/s', generation: 'tok/s', kv_usage: '%', prefix_hit: '%' },
    interval: tl.interval_s,
    line: Array.from(w.line.subarray(0, w.length)),
    t: Array.from(w.t.subarray(0, w.length)),
    prompt: col(w.prompt),
    generation: col(w.gen),
    running: col(w.running),
    waiting: col(w.waiting),
    preemptions: col(w.preempt),
    kv_usage: col(w.kv),
    prefix_hit: col(w.hit),
  };
  if (w.length) out.push(windows);
  for (const s of tl.segments)
    out.push({
      kind: 'log-segment',
      index: s.index,
      first: s.first,
      last: s.last,
      windows: s.windows,
      starts_after: s.starts_after,
      start_stamp: s.start_stamp,
      end_stamp: s.end_stamp,
      load: s.load,
      preemptions: s.preemptions,
      generation: s.mean_gen_tok_s,
      ...(s.hit_max_pct !== null ? { prefix_hit_max: s.hit_max_pct } : {}),
      units: { generation: 'tok/s', prefix_hit_max: '%' },
      log_lines: { first: s.first_line, last: s.last_line },
    });
  const lines = (
    what: (typeof LOG_LINE_KINDS)[number],
    count: number,
    samples: FactOf<'log-lines'>['samples'],
    more: Partial<FactOf<'log-lines'>> = {},
  ) => {
    if (count > 0)
      out.push({ kind: 'log-lines', what, count, samples: samples.slice(0, MAX_LOG_LINE_SAMPLES), ...more });
  };
  const sample = (s: { line: number; text?: string }) => ({
    line: s.line,
    ...(s.text !== undefined ? { text: s.text } : {}),
  });
  lines('unknown', f.unknown_lines, f.unknown_samples.map(sample));
  lines('informative', f.informative_unknown.count, f.informative_unknown.samples.map(sample));
  lines(
    'too-long',
    f.long_lines.count,
    f.long_lines.lines.map((line) => ({ line })),
    { max_bytes: f.long_lines.max_bytes, limit_bytes: MAX_LINE_BYTES },
  );
  lines(
    'cannot-be-right',
    f.parse_warnings.length,
    f.parse_warnings.map((x) => ({ line: x.line, what: x.what })),
  );
  const pw = f.preemption_warnings;
  const warning = (p: (typeof pw)[number]) => ({
    line: p.line,
    ...(p.cumulative !== undefined ? { cumulative: p.cumulative } : {}),
  });
  lines('preemption-warning', pw.length ? f.preemption_warning_count : 0, pw.map(warning), {
    ...(pw.length ? { last: warning(pw[pw.length - 1]) } : {}),
  });
  for (const c of f.crashes.slice(0, MAX_LOG_CRASHES))
    out.push({
      kind: 'log-crash',
      crash: c.kind,
      line: c.line,
      phase: c.phase,
      ...(c.after !== undefined ? { after: c.after } : {}),
      ...(c.text !== undefined ? { text: c.text } : {}),
    });
  return out;
}

/** The facts of a /metrics snapshot: the pool its cache config gives, and the snapshot's counters. */
export function metricsSnapshotFacts(m: MetricsFacts): Fact[] {
  const out: Fact[] = [];
  if (m.pool_tokens !== undefined) out.push({ kind: 'kv-pool', tokens: m.pool_tokens, source: '/metrics' });
  const opt = <K extends string>(k: K, v: number | string | undefined) => (v === undefined ? {} : { [k]: v });
  out.push({
    kind: 'metrics-snapshot',
    samples: m.samples,
    bad_lines: m.bad_lines,
    ...opt('gpu_blocks', m.gpu_blocks),
    ...opt('block_size', m.block_size),
    ...opt('prefix_hits', m.prefix_hits),
    ...opt('prefix_queries', m.prefix_queries),
    // Only where a gauge gave the rate: hits and queries are kept as counted.
    ...opt(
      'prefix_hit_rate',
      m.prefix_hits === undefined && m.prefix_hit_pct !== undefined ? m.prefix_hit_pct / 100 : undefined,
    ),
    ...opt('prefix_metric', m.prefix_metric),
    ...opt('preemptions', m.preemptions),
    ...opt('running', m.running),
    ...opt('waiting', m.waiting),
    ...opt('kv_usage', m.kv_usage_pct !== undefined ? m.kv_usage_pct / 100 : undefined),
    ...opt('prompt_tokens', m.prompt_tokens),
    ...opt('generation_tokens', m.generation_tokens),
    ...opt('requests_success', m.requests_success),
    source: '/metrics',
  } as FactOf<'metrics-snapshot'>);
  return out;
}
