/**
 * What an audit cell's value names: a log path relative to the notebook, a glob of logs (read in
 * modification-time order as one timeline — rotated logs come out oldest first), or a `/metrics`
 * URL. Paths are looked at through the host's file service (Services.statFile and listFiles), so
 * Restricted Mode and the workspace rule hold for a glob as for a single file.
 */
import * as path from 'node:path';
import type { Services } from '../engine/types';
import { isGlob, nodeFiles } from '../host/files';

export { isGlob };

export type AuditInput = { kind: 'files'; pattern: string; paths: string[] } | { kind: 'url'; url: string };

/** The file hooks an audit needs to find its logs; called as a library with no host: every path. */
export type AuditFileLister = Required<Pick<Services, 'statFile' | 'listFiles'>>;

export interface ResolveResult {
  input?: AuditInput;
  /** What went wrong, phrased as what to write instead. */
  error?: string;
}

export async function resolveAuditInput(
  value: string,
  dir: string,
  files: AuditFileLister = nodeFiles(),
  signal?: AbortSignal,
): Promise<ResolveResult> {
  const v = value.trim();
  if (/^https?:\/\//i.test(v)) {
    let u: URL;
    try {
      u = new URL(v);
    } catch {
      return {
        error: `"${v}" is not a URL: write a /metrics URL such as http://127.0.0.1:8000/metrics, or a log path`,
      };
    }
    if (u.pathname === '/' || u.pathname === '') u.pathname = '/metrics';
    return { input: { kind: 'url', url: u.toString() } };
  }
  const opts = { purpose: 'run' as const, notebookDir: dir, signal };
  if (isGlob(v)) {
    const paths = await files.listFiles(v, opts);
    if (!paths.length)
      return {
        error: `No file matches "${v}" (relative to ${dir}): write the path of a vLLM log, e.g. "audit: logs/day4-vllm.log", or a glob like "logs/*.log"`,
      };
    return { input: { kind: 'files', pattern: v, paths } };
  }
  const p = path.resolve(dir, v);
  const info = await files.statFile(p, opts);
  if (!info)
    return {
      error: `Cannot find "${v}" (resolved to ${p}): write the path of a vLLM server log relative to the notebook, a glob like "logs/*.log", or a /metrics URL`,
    };
  if (info.type === 'directory') {
    const paths = await files.listFiles(path.join(p, '*.log'), opts);
    if (!paths.length)
      return { error: `"${v}" is a folder with no *.log files: name the log file, e.g. "${path.join(v, 'vllm.log')}"` };
    return { input: { kind: 'files', pattern: path.join(v, '*.log'), paths } };
  }
  return { input: { kind: 'files', pattern: v, paths: [p] } };
}
