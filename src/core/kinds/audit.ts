/**
 * `audit: logs/day4-vllm.log` — read a vLLM server log (a path relative to the notebook, a glob,
 * or a /metrics URL): startup facts, the stats windows as a timeline split into segments, and
 * findings citing their log lines. The setup, when there is one, supplies the KV-pool prediction.
 */
import * as path from 'node:path';
import { z } from 'zod';
import { isGlob, resolveAuditInput } from '../audit/inputs';
import { FileReadError, lookupFile } from '../engine/files';
import type { AnalyzeContext, KindModule } from '../engine/types';
import type { Fact } from '../facts';
import { fin } from '../facts/make';
import { CellError, finding, type Finding } from '../findings';
import { GiB } from '../units';
import { credentialRefusal, redactUrl, redactUrlsIn } from '../urls';

const schema = z
  .object({
    audit: z
      .string({
        error:
          'audit: give a log path relative to the notebook (logs/day4-vllm.log), a glob (logs/*.log) or a /metrics URL',
      })
      .min(1),
    /** Prefix-cache hit rate (%) above which a segment counts as served from the cache. */
    hit_threshold: z.number().min(0).max(100).optional(),
    /** KV usage (%) that counts as full. */
    kv_full: z.number().min(0).max(100).optional(),
    /** Leave out the timeline plot. */
    plot: z.boolean().optional(),
  })
  .strict();

type Cell = z.output<typeof schema>;

/**
 * What an audit saved before facts (its values) states: the KV pool, the weights and the sampler
 * the server's startup lines printed. A run states these with their log lines, and the log, its
 * windows, segments and crashes besides (audit/facts.ts).
 */
export function auditFacts(values: Record<string, unknown>): Fact[] {
  const source = 'log';
  const out: Fact[] = [];
  const tokens = fin(values.pool_tokens);
  const avail = fin(values.available_kv_gib);
  if (tokens !== undefined || avail !== undefined)
    out.push({
      kind: 'kv-pool',
      ...(tokens !== undefined ? { tokens } : {}),
      ...(avail !== undefined ? { available_bytes: avail * GiB } : {}),
      source,
    });
  const w = fin(values.weights_gib);
  if (w !== undefined) out.push({ kind: 'weights', bytes: w * GiB, source });
  if (typeof values.sampler === 'string') out.push({ kind: 'sampling', sampler: values.sampler, source });
  return out;
}

/** A read the host refused (outside the workspace and not confirmed, or Restricted Mode), not one that failed. */
const refusal = (e: FileReadError) => e.code === 'outside-workspace' || e.code === 'restricted';
const refused = (msg: string) =>
  new CellError(
    `Not reading the log: ${msg} (or copy the log next to the notebook, e.g. logs/vllm.log)`,
    ['audit'],
    'audit-read-refused',
  );

export const auditKind: KindModule<Cell> = {
  key: 'audit',
  summary:
    'audit: PATH — read a vLLM server log (or a /metrics URL): KV pool, sampler, timeline, segments, prefix-cache and interference findings',
  schema,
  migrate: auditFacts,
  reads(data, dir) {
    const v = typeof data.audit === 'string' ? data.audit.trim() : '';
    // A glob is not walked while the user types (`/**/x` would walk the whole disk): the run says
    // when it matches nothing.
    if (!v || /^https?:\/\//i.test(v) || isGlob(v)) return [];
    return [{ path: path.resolve(dir, v), want: 'stat' }];
  },
  analyze(cell, ctx: AnalyzeContext): Finding[] {
    const v = cell.audit.trim();
    if (/^https?:\/\//i.test(v) || isGlob(v)) return [];
    // Only what the host looked at beforehand (reads): does the file exist?
    const abs = path.resolve(ctx.notebook.dir, v);
    const seen = lookupFile(ctx.notebook.files, { path: abs, want: 'stat' });
    if (seen && 'info' in seen && seen.info === undefined)
      return [
        finding('error', 'audit-file-not-found', `Cannot find "${v}" (resolved to ${abs})`, ['audit'], {
          fix: 'write the path of a vLLM server log relative to the notebook (e.g. logs/day4-vllm.log; capture one with `vllm serve … 2>&1 | tee logs/day4-vllm.log`), a glob like logs/*.log, or a /metrics URL such as http://127.0.0.1:8000/metrics',
        }),
      ];
    return [];
  },
  async run(cell, ctx) {
    const v = cell.audit.trim();
    if (/^https?:\/\//i.test(v)) {
      // A user name, password or token in the URL is refused, not sent (nor shown: the URL is redacted).
      const withCredentials = credentialRefusal(
        v,
        'audit URL',
        'audit a saved log file where its /metrics needs a credential (the audit sends none)',
      );
      if (withCredentials) throw new CellError(withCredentials, ['audit'], 'audit-url-credentials');
      const host = new URL(v).hostname;
      const loopback = host === '127.0.0.1' || host === 'localhost' || host === '::1' || host === '[::1]';
      if (!loopback && ctx.notebook.services.confirmHost && !(await ctx.notebook.services.confirmHost(v)))
        throw new CellError(
          `Not fetching ${redactUrl(v)}: the host was not confirmed. Confirm it, or audit a saved log file instead`,
          ['audit'],
          'audit-host-refused',
        );
    }
    // Logs are found and opened through the host's file service: its workspace rule (a file outside
    // the notebook's folder and the workspace is read only when confirmed), Restricted Mode, regular files only.
    const { services, dir } = ctx.notebook;
    const isUrl = /^https?:\/\//i.test(v);
    if (!isUrl && !(services.openFile && services.statFile && services.listFiles))
      throw new CellError('Cannot read the log: this host reads no files', ['audit'], 'audit-read-failed');
    // Already refused when the host looked at it for this run (reads): not asked twice.
    const seen = lookupFile(ctx.notebook.files, { path: path.resolve(dir, v), want: 'stat' });
    if (seen && 'error' in seen && refusal(seen.error)) throw refused(seen.error.message);
    let r: Awaited<ReturnType<typeof resolveAuditInput>>;
    try {
      r = await resolveAuditInput(
        v,
        dir,
        isUrl ? undefined : { statFile: services.statFile!, listFiles: services.listFiles! },
        ctx.signal,
      );
    } catch (e) {
      if (e instanceof FileReadError && refusal(e)) throw refused(e.message);
      throw new CellError(`Cannot read the log: ${(e as Error).message}`, ['audit'], 'audit-read-failed');
    }
    if (r.error) throw new CellError(r.error, ['audit'], 'audit-file-not-found');
    const open = (abs: string) => services.openFile!(abs, { purpose: 'run', notebookDir: dir, signal: ctx.signal });
    // The parser and the /metrics fetch (undici) load only when an audit cell runs.
    const { runAudit } = await import('../audit');
    try {
      const res = await runAudit(v, ctx.notebook.dir, {
        input: r.input,
        setup: ctx.setup,
        hitThresholdPct: cell.hit_threshold,
        kvFullPct: cell.kv_full,
        plot: cell.plot,
        signal: ctx.signal,
        open,
        // The engine runs the check rules over the facts the audit states.
        findings: false,
        onProgress: (read, total) =>
          ctx.progress({
            message: `read ${Math.round(read / 1e6)} of ${Math.round(total / 1e6)} MB`,
            fraction: total ? read / total : undefined,
          }),
      });
      return { values: res.values, facts: res.stated, outputs: res.outputs };
    } catch (e) {
      if (e instanceof CellError) throw e;
      const msg = (e as Error).message;
      if (e instanceof FileReadError && refusal(e)) throw refused(msg);
      if (/^https?:/i.test(v))
        throw new CellError(
          `Cannot read ${redactUrl(v)}: ${redactUrlsIn(msg)}. Is the server running? Write the /metrics URL of a running vLLM server, or a saved log path`,
          ['audit'],
          'audit-fetch-failed',
        );
      throw new CellError(`Cannot read the log: ${msg}`, ['audit'], 'audit-read-failed');
    }
  },
};
