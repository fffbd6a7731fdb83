/**
 * `import: results/c16.json` — a result file of another load generator (vLLM `bench serve
 * --save-result`, GuideLLM, AIPerf, genai-bench), translated into vLLM's metric definitions and
 * said so, so a run made with any tool gets InfLab's tables, checks and comparisons.
 *
 *   import: results/guidellm-benchmarks.json
 *   tool: guidellm          # optional: sniffed from the file's keys
 */
import { COST_FORMULA, costFacts, fmtDollarsPerMtok, priceWords, setupPricePerHour, tokenCosts } from '../cost';
import { z } from 'zod';
import { tableOutput } from '../engine/outputs';
import type { KindModule, NotebookContext } from '../engine/types';
import { canonicalStat, type Fact, type Point } from '../facts';
import { CellError, finding, type CellPath, type Finding } from '../findings';
import { parseResult } from '../imports/parsers';
import { readRunFile } from '../workload/files';
import {
  IMPORT_TOOLS,
  percentileStat,
  type ImportedPoint,
  type ImportedRun,
  type LatencyMetric,
} from '../imports/types';

const schema = z
  .object({
    import: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)], {
      error: 'import: give the path of a result file relative to the notebook (results/c16.json), or a list of them',
    }),
    tool: z.enum(IMPORT_TOOLS).optional(),
    /** genai-bench writes seconds unless it was run with metrics_time_unit=ms. */
    time_unit: z.enum(['s', 'ms']).optional(),
    /** Percentiles computed from per-request arrays where the file has them (vLLM's). */
    percentiles: z.array(z.number().gt(0).lt(100)).min(1).default([90, 99]),
  })
  .strict();

type Cell = z.output<typeof schema>;

/** A result file is small; anything larger is not one (and is not read into memory). */
const MAX_RESULT_BYTES = 256 * 1024 * 1024;

async function readResult(nb: NotebookContext, rel: string): Promise<unknown> {
  let text: string;
  try {
    text = await readRunFile(nb, rel, MAX_RESULT_BYTES);
  } catch (e) {
    throw new CellError(`Cannot read "${rel}": ${(e as Error).message}`, ['import'], 'import-read-failed');
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new CellError(`"${rel}" is not JSON: ${(e as Error).message}`, ['import'], 'import-not-json');
  }
}

const METRICS: LatencyMetric[] = ['ttft', 'tpot', 'itl', 'e2e'];
const METRIC_LABEL: Record<LatencyMetric, string> = { ttft: 'TTFT', tpot: 'TPOT', itl: 'ITL', e2e: 'E2E' };

/** The values a later cell reads: per point, each metric's statistics in ms (`ttft_ms.p99`). */
function pointValues(p: ImportedPoint): Record<string, unknown> {
  const v: Record<string, unknown> = { label: p.label };
  if (p.concurrency !== undefined) v.concurrency = p.concurrency;
  if (p.rate !== undefined) v.rate_req_s = p.rate;
  for (const m of METRICS) if (p.latency[m]) v[`${m}_ms`] = { ...p.latency[m] };
  if (p.outputTokS !== undefined) v.output_throughput_tok_s = p.outputTokS;
  if (p.totalTokS !== undefined) v.total_throughput_tok_s = p.totalTokS;
  if (p.requestS !== undefined) v.request_throughput_req_s = p.requestS;
  if (p.meanInputTokens !== undefined) v.mean_input_tokens = p.meanInputTokens;
  if (p.meanOutputTokens !== undefined) v.mean_output_tokens = p.meanOutputTokens;
  if (p.completed !== undefined) v.completed = p.completed;
  if (p.failed !== undefined) v.failed = p.failed;
  if (p.durationS !== undefined) v.duration_s = p.durationS;
  return v;
}

/** The facts a point states: each latency statistic (vLLM definitions), throughputs, lengths. */
function pointFacts(p: ImportedPoint, source: string, at: CellPath, perHour?: number): Fact[] {
  const point: Point = {};
  if (p.concurrency !== undefined) point.concurrency = p.concurrency;
  if (p.rate !== undefined) point.req_s = p.rate;
  point.loop = p.rate !== undefined ? 'open' : 'closed';
  // The file's line: the measurement rules (checks/) put their findings there.
  const common = { point, source, at };
  const out: Fact[] = [];
  for (const m of METRICS)
    for (const [k, v] of Object.entries(p.latency[m] ?? {})) {
      const stat = canonicalStat(k);
      if (stat && Number.isFinite(v) && v >= 0) out.push({ kind: 'latency', metric: m, stat, ms: v, ...common });
    }
  const nonNeg = (x: number | undefined): x is number => x !== undefined && Number.isFinite(x) && x >= 0;
  if (nonNeg(p.outputTokS)) out.push({ kind: 'throughput', metric: 'output', tok_s: p.outputTokS, ...common });
  if (nonNeg(p.totalTokS)) out.push({ kind: 'throughput', metric: 'total', tok_s: p.totalTokS, ...common });
  if (nonNeg(p.requestS)) out.push({ kind: 'request-rate', metric: 'completed', req_s: p.requestS, ...common });
  if (nonNeg(p.meanInputTokens)) out.push({ kind: 'tokens', metric: 'prompt', tokens: p.meanInputTokens, ...common });
  if (nonNeg(p.meanOutputTokens)) out.push({ kind: 'tokens', metric: 'output', tokens: p.meanOutputTokens, ...common });
  if (perHour !== undefined) out.push(...costFacts(importCosts(p, perHour), common));
  return out;
}

/** A priced setup: the imported throughputs as $ per million output and total tokens. */
function importCosts(p: ImportedPoint, perHour: number) {
  return tokenCosts(perHour, { output_tok_s: p.outputTokS ?? NaN, total_tok_s: p.totalTokS ?? NaN });
}

const ms = (x: number | undefined) => (x === undefined ? '' : x >= 100 ? x.toFixed(0) : x.toPrecision(3));

export const importKind: KindModule<Cell> = {
  key: 'import',
  summary:
    'import: FILE — a result file of vllm bench serve, GuideLLM, AIPerf or genai-bench, translated into vLLM’s metric definitions',
  schema,
  async run(cell, ctx) {
    const files = Array.isArray(cell.import) ? cell.import : [cell.import];
    const runs: ImportedRun[] = [];
    for (const [i, f] of files.entries()) {
      const raw = await readResult(ctx.notebook, f);
      try {
        runs.push(parseResult(raw, { tool: cell.tool, percentiles: cell.percentiles, timeUnit: cell.time_unit }));
      } catch (e) {
        const msg = e instanceof z.ZodError ? z.prettifyError(e).replace(/\n/g, '; ') : (e as Error).message;
        throw new CellError(
          `"${f}"${cell.tool ? ` as ${cell.tool}` : ''}: ${msg}`,
          Array.isArray(cell.import) ? ['import', i] : ['import'],
          'import-unknown-format',
        );
      }
    }
    const points = runs.flatMap((r) => r.points);
    const stats = ['mean', 'p50', ...cell.percentiles.map(percentileStat)];
    const uniqStats = [...new Set(stats)];
    type Row = Record<string, string>;
    const rows: Row[] = [];
    for (const p of points)
      for (const m of METRICS) {
        const s = p.latency[m];
        if (!s) continue;
        const row: Row = { point: p.label, metric: `${METRIC_LABEL[m]} ms` };
        for (const st of uniqStats) row[st] = ms(s[st]);
        rows.push(row);
      }
    const tools = [...new Set(runs.map((r) => r.description))].join('; ');
    const latencyTable = tableOutput(
      `imported from ${tools}`,
      [
        { key: 'point', label: 'point', align: 'left' },
        { key: 'metric', label: 'metric', align: 'left' },
        ...uniqStats.map((s) => ({ key: s, label: s === 'p50' ? 'median' : s, align: 'right' as const })),
      ],
      rows,
      [...new Set(runs.flatMap((r) => r.translations))].join(' '),
    );
    const perHour = ctx.setup ? setupPricePerHour(ctx.setup) : undefined;
    const thrRows = points.map((p) => ({
      point: p.label,
      requests: p.completed === undefined ? '' : `${p.completed}${p.failed ? ` (+${p.failed} failed)` : ''}`,
      output: p.outputTokS === undefined ? '' : p.outputTokS.toFixed(1),
      total: p.totalTokS === undefined ? '' : p.totalTokS.toFixed(1),
      req: p.requestS === undefined ? '' : p.requestS.toFixed(3),
      ...(perHour !== undefined
        ? {
            usd_out: fmtDollarsPerMtok(importCosts(p, perHour).usd_per_mtok_output),
            usd_total: fmtDollarsPerMtok(importCosts(p, perHour).usd_per_mtok_total),
          }
        : {}),
    }));
    const thrTable = tableOutput(
      'throughput',
      [
        { key: 'point', label: 'point', align: 'left' },
        { key: 'requests', label: 'requests', align: 'right' },
        { key: 'output', label: 'output tok/s', align: 'right' },
        { key: 'total', label: 'total tok/s', align: 'right' },
        { key: 'req', label: 'req/s', align: 'right' },
        ...(perHour !== undefined
          ? [
              { key: 'usd_out' as const, label: '$/M out tok', align: 'right' as const },
              { key: 'usd_total' as const, label: '$/M tok (in+out)', align: 'right' as const },
            ]
          : []),
      ],
      thrRows,
      perHour !== undefined ? `Cost at ${priceWords(ctx.setup!)} (the setup above): ${COST_FORMULA}.` : undefined,
    );
    const findings: Finding[] = runs.flatMap((r) =>
      r.warnings.map((w) => finding('info', 'import-partial', w, ['import'])),
    );
    return {
      values: { tool: runs.map((r) => r.tool).join(', '), points: points.map(pointValues) },
      facts: runs.flatMap((r, i) =>
        r.points.flatMap((p) =>
          pointFacts(p, `import: ${r.tool}`, Array.isArray(cell.import) ? ['import', i] : ['import'], perHour),
        ),
      ),
      outputs: [latencyTable, thrTable],
      findings,
    };
  },
};
