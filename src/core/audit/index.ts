/**
 * Audit a vLLM server log (or a /metrics snapshot): facts, timeline, segments, findings, plot.
 * Used by the `audit:` cell kind and by `inflab audit`.
 */
import * as path from 'node:path';
import { factsOutput, tableOutput } from '../engine/outputs';
import type { CellOutput, Setup } from '../engine/types';
import { runChecks } from '../checks';
import { createNotebookContext } from '../engine/engine';
import { checkFacts, factsOf, lastFact, type Fact } from '../facts';
import type { Finding } from '../findings';
import { plotOutput } from '../plots/render';
import { fmtNum } from '../units';
import { heartbeatMeans, windowsOf } from './evidence';
import { logFacts, metricsSnapshotFacts } from './facts';
import { resolveAuditInput, type AuditFileLister, type AuditInput } from './inputs';
import { fetchMetrics, metricsFactsFromText, type MetricsFacts } from './metrics';
import type { AuditFacts } from './parse';
import { auditFiles, type AuditFileOptions, type AuditTimings } from './read';
import { timelineSpec } from './plot';
import { buildTimeline, type Segment, type Timeline } from './timeline';
import { dialectById } from './dialect';

export { classifyLine, LogAuditor, LogClock, WindowSeries, MAX_LINE_BYTES } from './parse';
export type { AuditFacts, Classified, LineKind, StatsFields, StatsWindow } from './parse';
export { peelLine, LineReader } from './lineReader';
export { DIALECTS, VLLM, SGLANG, dialectById } from './dialect';
export type { LogDialect, DialectId } from './dialect';
export { classifySglang } from './sglang/classify';
export { redactSecrets, quoteLine } from './quote';
export { auditChunks, auditFile, auditFiles, auditText, feedFile } from './read';
export type { AuditTimings } from './read';
export { buildTimeline, isIdle } from './timeline';
export type { Segment, Timeline } from './timeline';
export { interferenceWindows, heartbeatMeans, cite, windowsOf } from './evidence';
export { logFacts, metricsSnapshotFacts } from './facts';
export { resolveAuditInput } from './inputs';
export { metricsFactsFromText, fetchMetrics } from './metrics';
export { timelineSpec } from './plot';
export { generateLog, generateLogFile } from './generate';

export interface AuditOptions extends AuditFileOptions {
  /** For the findings: the setup the KV pool is predicted from, and the cell's thresholds. */
  setup?: Setup;
  hitThresholdPct?: number;
  kvFullPct?: number;
  /** Skip the SVG rendering of the plot (the CLI's --json, perf runs). */
  plot?: boolean;
  /** How the logs a path or glob names are found: the host's file service. Default: every path. */
  files?: AuditFileLister;
  /** What the value names, when the caller has resolved it already (through the same file service). */
  input?: AuditInput;
  /**
   * Leave the findings to the caller (the audit cell: the engine runs the check rules over the
   * facts it states). Default: the check rules run here, over the same facts.
   */
  findings?: false;
  /** The log files as the facts name them (relative to the notebook); default each file's basename. */
  fileNames?: string[];
}

export interface AuditResult {
  input: AuditInput;
  facts?: AuditFacts;
  metrics?: MetricsFacts;
  /** What the audit states (facts/schema.ts): what the check rules and later cells read. */
  stated: Fact[];
  timeline?: Timeline;
  timings?: AuditTimings;
  findings: Finding[];
  values: Record<string, unknown>;
  outputs: CellOutput[];
}

/**
 * The findings of an audit that ran outside a notebook (the tests, a script): the check rules over
 * the facts it states, validated as the engine validates a run's, as an `audit:` cell would get them.
 */
export function auditCheckFindings(
  stated: Fact[],
  opts: AuditOptions = {},
  values?: Record<string, unknown>,
): Finding[] {
  const { facts, findings } = checkFacts(stated);
  return [
    ...findings,
    ...runChecks({
      kind: 'audit',
      cell: { audit: '', hit_threshold: opts.hitThresholdPct, kv_full: opts.kvFullPct },
      values,
      facts,
      setup: opts.setup,
      notebook: createNotebookContext('.'),
      cellIndex: 0,
    }),
  ];
}

/** Analyze facts already parsed: timeline, the facts it states, values, findings (no I/O). */
export function analyzeFacts(
  facts: AuditFacts,
  opts: AuditOptions = {},
): { timeline: Timeline; stated: Fact[]; findings: Finding[]; values: Record<string, unknown> } {
  const timeline = buildTimeline(facts.windows);
  const stated = logFacts(facts, timeline, opts.fileNames);
  const values = factValues(facts, timeline, stated);
  const findings = opts.findings === false ? [] : auditCheckFindings(stated, opts, values);
  return { timeline, stated, findings, values };
}

/** The log's own mean rate against its busy windows' (the heartbeat rule's evidence), from the facts. */
function heartbeatOf(stated: Fact[]) {
  const w = lastFact(stated, 'log-windows');
  return w ? heartbeatMeans(windowsOf(w), factsOf(stated, 'log-segment')) : undefined;
}

/** The cell's values: what later cells and checks can use. */
function factValues(f: AuditFacts, tl: Timeline, stated: Fact[]): Record<string, unknown> {
  const v = <T>(x: { value: T } | undefined) => (x ? x.value : null);
  return {
    files: f.files.map((x) => x.path),
    lines: f.lines,
    unknown_lines: f.unknown_lines,
    other_lines: f.other_lines,
    engine: f.format ?? null,
    version: v(f.version),
    model: v(f.model),
    weights_gib: v(f.weights_gib),
    model_load_s: v(f.model_load_s),
    available_kv_gib: v(f.available_kv_gib),
    pool_tokens: v(f.pool_tokens),
    pool_tokens_workers: f.pool_tokens?.workers ?? null,
    max_concurrency: v(f.max_concurrency),
    max_concurrency_tokens_per_request: f.max_concurrency?.tokens_per_request ?? null,
    cuda_graph_gib: v(f.cuda_graph_gib),
    engine_init_s: v(f.engine_init_s),
    sampler: v(f.sampler),
    windows: f.windows.length,
    interval_s: tl.interval_s,
    idle_windows: tl.idle_windows,
    missing_windows: tl.missing_windows,
    segments: tl.segments.map(({ first: _f, last: _l, ...s }) => s),
    preemptions: tl.segments.reduce((a, s) => a + s.preemptions, 0),
    preemption_warnings: f.preemption_warning_count,
    requests: f.access.requests,
    status_codes: f.access.by_status,
    routes: f.access.by_route,
    heartbeat: heartbeatOf(stated) ?? null,
    server: f.dialect ?? null,
    weights_unit_note: f.weights_gib?.note ?? null,
    pool_tokens_total: f.pool_tokens?.total ?? null,
    engines: f.engines.map((e) => ({ ...e })),
    parallel: { ...f.parallel },
    spec_decode: f.spec_decode ?? null,
    kv_transfer: f.kv_transfer ?? null,
    stats_extras: f.stats_extras,
    crashes: f.crashes.map((c) => ({ ...c })),
    parse_warnings: f.parse_warnings.length,
    long_lines: f.long_lines.count,
    informative_unknown_lines: f.informative_unknown.count,
    wrappers: f.wrappers,
    rejoined_lines: f.rejoined_lines,
    split_lines: f.split_lines,
    first_stamp: f.first_stamp ?? null,
    last_stamp: f.last_stamp ?? null,
  };
}

/** Audit what a cell names (path, glob, or /metrics URL), relative to `dir`. */
export async function runAudit(value: string, dir: string, opts: AuditOptions = {}): Promise<AuditResult> {
  const r = opts.input ? { input: opts.input } : await resolveAuditInput(value, dir, opts.files, opts.signal);
  if (!r.input) throw new Error(r.error);
  const input = r.input;
  if (input.kind === 'url') {
    const text = await fetchMetrics(input.url, opts.signal);
    const m = metricsFactsFromText(text, input.url);
    const stated = metricsSnapshotFacts(m);
    const values = { ...m };
    const findings = opts.findings === false ? [] : auditCheckFindings(stated, opts, values);
    const rows: [string, string][] = [];
    const add = (k: string, x: number | undefined, d = 0, unit = '') =>
      x !== undefined && rows.push([k, `${fmtNum(x, d)}${unit}`]);
    add('KV pool (cache_config_info)', m.pool_tokens, 0, ' tokens');
    add('prefix cache hit rate (lifetime)', m.prefix_hit_pct, 1, '%');
    add('preemptions', m.preemptions);
    add('running', m.running);
    add('waiting', m.waiting);
    add('GPU KV cache usage', m.kv_usage_pct, 1, '%');
    add('prompt tokens', m.prompt_tokens);
    add('generation tokens', m.generation_tokens);
    add('requests (success)', m.requests_success);
    return {
      input,
      metrics: m,
      stated,
      findings,
      values,
      outputs: [
        factsOutput(
          `/metrics snapshot — ${input.url}`,
          rows,
          `${m.samples} samples; a single snapshot holds lifetime totals`,
        ),
      ],
    };
  }
  const { facts, timings } = await auditFiles(input.paths, opts);
  // Paths relative to the notebook: values and facts are saved in it and must not carry this machine's layout.
  const files = input.paths.map((p) => path.relative(dir, p) || path.basename(p));
  const { timeline, stated, findings, values } = analyzeFacts(facts, { ...opts, fileNames: files });
  const outputs = [factsTable(facts, timings, input), segmentsTable(timeline)];
  if (opts.plot !== false && facts.windows.length) {
    const name = input.paths.length === 1 ? path.basename(input.paths[0]) : input.pattern;
    outputs.push(await plotOutput(timelineSpec(facts.windows, timeline, `vLLM log timeline — ${name}`)));
  }
  return {
    input,
    facts,
    stated,
    timeline,
    timings,
    findings,
    values: { ...values, files, parse_ms: Math.round(timings.total_ms) },
    outputs,
  };
}

function factsTable(f: AuditFacts, t: AuditTimings, input: Extract<AuditInput, { kind: 'files' }>): CellOutput {
  const rows: [string, string][] = [];
  const L = (line: number) => ` (line ${line})`;
  const d = dialectById(f.dialect);
  if (f.version) rows.push([`${d.name} version`, f.version.value + L(f.version.line)]);
  if (f.model) rows.push(['model', f.model.value + L(f.model.line)]);
  if (f.weights_gib)
    rows.push([
      'weights',
      `${f.weights_gib.value} GiB${f.weights_gib.note ? ` (${f.weights_gib.note})` : ''}${f.model_load_s ? `, loaded in ${fmtNum(f.model_load_s.value, 1)} s` : ''}${L(f.weights_gib.line)}`,
    ]);
  if (f.device_memory_gib)
    rows.push([
      'device memory at startup',
      `${f.device_memory_gib.free_gib} of ${f.device_memory_gib.value} GiB free${L(f.device_memory_gib.line)}`,
    ]);
  if (f.available_kv_gib)
    rows.push([
      'available KV cache memory',
      `${f.available_kv_gib.value} GiB${f.available_kv_gib.total !== undefined ? ` per engine, ${f.available_kv_gib.total} GiB in all` : f.available_kv_gib.workers > 1 ? ` × ${f.available_kv_gib.workers} workers` : ''}${L(f.available_kv_gib.line)}`,
    ]);
  const pool = f.pool_tokens;
  if (pool) {
    if (pool.engines)
      rows.push([
        'KV pool',
        `${pool.engines.map((e) => `engine ${e.engine}: ${fmtNum(e.tokens, 0)}`).join(', ')} tokens; ${fmtNum(pool.total!, 0)} in all (${pool.engines.length} data-parallel engines${pool.workers > 1 ? `, each printed by ${pool.workers} workers` : ''})${L(pool.line)}`,
      ]);
    else
      rows.push([
        'KV pool',
        `${fmtNum(pool.value, 0)} tokens${pool.workers > 1 ? ` (printed by ${pool.workers} workers)` : ''}${pool.derived ? ` (${pool.derived})` : ''}${L(pool.line)}`,
      ]);
  }
  if (f.max_concurrency)
    rows.push([
      `max concurrency at ${fmtNum(f.max_concurrency.tokens_per_request, 0)} tokens/request`,
      `${f.max_concurrency.value}×${L(f.max_concurrency.line)}`,
    ]);
  if (f.cuda_graph_gib)
    rows.push([
      'CUDA graphs',
      `${f.cuda_graph_gib.value} GiB in ${f.cuda_graph_gib.seconds} s${L(f.cuda_graph_gib.line)}`,
    ]);
  if (f.engine_init_s)
    rows.push([
      'engine init (profile, KV cache, warmup)',
      `${f.engine_init_s.value} s${f.engine_init_s.compilation_s !== undefined ? ` (compilation ${f.engine_init_s.compilation_s} s)` : ''}${L(f.engine_init_s.line)}`,
    ]);
  if (f.sampler)
    rows.push([
      'sampler',
      `${f.sampler.value === 'flashinfer' ? 'FlashInfer' : 'PyTorch-native fallback'}${L(f.sampler.line)}`,
    ]);
  const par = f.parallel;
  const sizes = (['tp', 'pp', 'dp', 'ep'] as const)
    .filter((k) => par[k] !== undefined)
    .map((k) => `${k.toUpperCase()} ${par[k]}`);
  if (sizes.length || par.nodes)
    rows.push([
      'parallelism',
      `${sizes.join(', ')}${par.workers ? `${sizes.length ? '; ' : ''}${par.workers} worker processes` : ''}${par.nodes ? ` on ${par.nodes} node${par.nodes > 1 ? 's' : ''}` : ''}`,
    ]);
  rows.push([
    'stats windows',
    `${fmtNum(f.windows.length, 0)}${f.format ? ` (${f.format === 'sglang' ? 'SGLang' : f.format.toUpperCase() + ' engine'})` : ''}${
      f.engines.length > 1
        ? `; per engine: ${f.engines.map((e) => `${e.engine}: ${fmtNum(e.windows, 0)} (lines ${e.first_line}–${e.last_line})`).join(', ')}`
        : ''
    }`,
  ]);
  const sd = f.spec_decode;
  if (sd)
    rows.push([
      'speculative decoding',
      `${fmtNum(sd.lines, 0)} lines (${sd.generation} wording)${sd.mean.acceptance_pct !== undefined ? `, mean acceptance ${fmtNum(sd.mean.acceptance_pct, 1)}%` : ''}${sd.mean.mean_acceptance_length !== undefined ? `, mean acceptance length ${fmtNum(sd.mean.mean_acceptance_length, 2)}` : ''}${sd.sum.accepted_tokens !== undefined && sd.sum.drafted_tokens !== undefined ? `, ${fmtNum(sd.sum.accepted_tokens, 0)} of ${fmtNum(sd.sum.drafted_tokens, 0)} drafted tokens accepted` : ''}${L(sd.first_line)}`,
    ]);
  if (f.kv_transfer)
    rows.push([
      'KV transfer (connector)',
      `${fmtNum(f.kv_transfer.lines, 0)} lines: ${Object.entries(f.kv_transfer.mean)
        .slice(0, 4)
        .map(([k, v]) => `${k} ${fmtNum(v, 2)} (mean)`)
        .join(', ')}${L(f.kv_transfer.first_line)}`,
    ]);
  const ex = f.stats_extras;
  const exRows: [keyof typeof ex, string][] = [
    ['external_prefix_hit_pct', 'external prefix cache hit rate'],
    ['mm_hit_pct', 'MM cache hit rate'],
    ['cpu_prefix_hit_pct', 'CPU prefix cache hit rate (V0)'],
    ['deferred', 'deferred requests'],
    ['corrupted', 'corrupted requests'],
  ];
  for (const [k, label] of exRows) {
    const e = ex[k];
    if (e)
      rows.push([
        label,
        `in ${fmtNum(e.windows, 0)} windows, peak ${fmtNum(e.max, 1)}${k.endsWith('pct') ? '%' : ''}${L(e.first_line)}`,
      ]);
  }
  rows.push([
    'requests in the access log',
    `${fmtNum(f.access.requests, 0)}${
      Object.keys(f.access.by_status).length
        ? ` (${Object.entries(f.access.by_status)
            .map(([k, n]) => `${k}: ${fmtNum(n, 0)}`)
            .join(', ')})`
        : ''
    }`,
  ]);
  if (f.crash_count)
    rows.push(['errors and crashes', `${fmtNum(f.crash_count, 0)} (first${L(f.crashes[0].line).slice(0, -1)})`]);
  const wr = Object.entries(f.wrappers);
  if (wr.length || f.rejoined_lines || f.split_lines)
    rows.push([
      'read through',
      [
        ...wr.map(([k, n]) => `${k} ×${fmtNum(n, 0)}`),
        ...(f.rejoined_lines ? [`${fmtNum(f.rejoined_lines, 0)} wrapped lines rejoined`] : []),
        ...(f.split_lines ? [`${fmtNum(f.split_lines, 0)} glued lines split`] : []),
      ].join(', '),
    ]);
  rows.push([
    'lines',
    `${fmtNum(f.lines, 0)} (${fmtNum(f.unknown_lines, 0)} not in ${d.name}'s format${f.informative_unknown.count ? `, ${fmtNum(f.informative_unknown.count, 0)} of them informative` : ''}${f.long_lines.count ? `; ${fmtNum(f.long_lines.count, 0)} too long, skipped` : ''})`,
  ]);
  const files =
    input.paths.length === 1 ? path.basename(input.paths[0]) : `${input.paths.length} files matching ${input.pattern}`;
  return factsOutput(
    `${f.dialect ? d.name : 'Server'} log — ${files}`,
    rows,
    `read ${fmtNum(t.bytes / 1e6, 1)} MB in ${fmtNum(t.total_ms, 0)} ms${f.first_stamp ? `; ${f.first_stamp} → ${f.last_stamp}` : ''}`,
  );
}

function segmentsTable(tl: Timeline): CellOutput {
  type Row = Segment & { span: string; hit: string; lines: string };
  const rows: Row[] = tl.segments.map((s) => ({
    ...s,
    span: `${s.start_stamp} → ${s.end_stamp.slice(6)}`,
    hit:
      s.hit_min_pct === null
        ? '—'
        : s.hit_min_pct === s.hit_max_pct
          ? `${s.hit_min_pct}%`
          : `${s.hit_first_pct}% → ${s.hit_last_pct}%`,
    lines: `${s.first_line}–${s.last_line}`,
  }));
  return tableOutput<Row>(
    `Segments (${tl.segments.length}) — split on idle gaps and load changes; stats every ${fmtNum(tl.interval_s, 0)} s`,
    [
      { key: 'index', label: '#', fmt: (v) => String(v + 1) },
      { key: 'span', label: 'time' },
      { key: 'windows', label: 'windows' },
      { key: 'load', label: 'running+waiting', fmt: (v) => fmtNum(v, 0) },
      { key: 'mean_prompt_tok_s', label: 'prompt tok/s', fmt: (v) => fmtNum(v, 0) },
      { key: 'mean_gen_tok_s', label: 'gen tok/s', fmt: (v) => fmtNum(v, 0) },
      { key: 'peak_running', label: 'peak running' },
      { key: 'hit', label: 'prefix hit' },
      { key: 'peak_kv_usage_pct', label: 'peak KV %', fmt: (v) => fmtNum(v, 1) },
      { key: 'preemptions', label: 'preempt.' },
      { key: 'lines', label: 'log lines' },
    ],
    rows,
    "Throughputs are the log's own window means (heartbeat figures): quote rates from the benchmark.",
  );
}

export type { Setup };
