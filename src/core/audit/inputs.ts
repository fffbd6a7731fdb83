/**
 * What an audit cell's value names: a log path relative to the notebook, a glob of logs (read in
 * modification-time order as one timeline — rotated logs come out oldest first), or a `/metrics`
 * URL. The glob matcher is small and has no dependency: `*`, `?`, `[abc]`, `{a,b}` within a path
 * segment, and `**` for any depth.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

export type AuditInput = { kind: 'files'; pattern: string; paths: string[] } | { kind: 'url'; url: string };

export function isGlob(s: string): boolean {
  return /[*?[{]/.test(s);
}

/** A glob segment as a regular expression. */
export function segmentRegex(seg: string): RegExp {
  let re = '';
  for (let i = 0; i < seg.length; i++) {
    const c = seg[i];
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const j = seg.indexOf(']', i + 1);
      if (j < 0) re += '\\[';
      else {
        let body = seg.slice(i + 1, j);
        if (body.startsWith('!')) body = '^' + body.slice(1);
        re += `[${body.replace(/\\/g, '\\\\')}]`;
        i = j;
      }
    } else if (c === '{') {
      const j = seg.indexOf('}', i + 1);
      if (j < 0) re += '\\{';
      else {
        re += `(?:${seg
          .slice(i + 1, j)
          .split(',')
          .map((x) =>
            x
              .replace(/[.+^${}()|\\]/g, '\\$&')
              .replace(/\*/g, '[^/]*')
              .replace(/\?/g, '[^/]'),
          )
          .join('|')})`;
        i = j;
      }
    } else re += c.replace(/[.+^${}()|\\\]]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/** Files matching a glob (absolute or relative to `dir`), bounded to `limit` results. */
export function globFiles(pattern: string, dir: string, limit = 10_000): string[] {
  const abs = path.resolve(dir, pattern);
  const parts = abs.split(path.sep);
  // The fixed prefix before the first segment with a wildcard.
  let k = 0;
  while (k < parts.length && !isGlob(parts[k])) k++;
  const root = parts.slice(0, k).join(path.sep) || path.sep;
  const rest = parts.slice(k);
  const out: string[] = [];
  const walk = (base: string, segs: string[], depth: number): void => {
    if (out.length >= limit || depth > 64) return;
    if (!segs.length) {
      try {
        if (fs.statSync(base).isFile()) out.push(base);
      } catch {
        /* vanished */
      }
      return;
    }
    const [seg, ...more] = segs;
    if (seg === '**') {
      walk(base, more, depth + 1);
      for (const e of readDir(base))
        if (e.isDirectory() && !e.name.startsWith('.')) walk(path.join(base, e.name), segs, depth + 1);
      return;
    }
    if (!isGlob(seg)) return walk(path.join(base, seg), more, depth + 1);
    const re = segmentRegex(seg);
    for (const e of readDir(base))
      if (re.test(e.name) && (more.length ? e.isDirectory() : true)) walk(path.join(base, e.name), more, depth + 1);
  };
  walk(root, rest, 0);
  return [...new Set(out)];
}

function readDir(d: string): fs.Dirent[] {
  try {
    return fs.readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name));
  } catch {
    return [];
  }
}

/** Sort log files oldest first (rotated logs: day4.log.2, day4.log.1, day4.log), name as tiebreak. */
function sortByMtime(paths: string[]): string[] {
  const m = new Map(paths.map((p) => [p, safeMtime(p)]));
  return [...paths].sort((a, b) => m.get(a)! - m.get(b)! || a.localeCompare(b));
}

function safeMtime(p: string): number {
  try {
    return fs.statSync(p).mtimeMs;
  } catch {
    return 0;
  }
}

export interface ResolveResult {
  input?: AuditInput;
  /** What went wrong, phrased as what to write instead. */
  error?: string;
}

export function resolveAuditInput(value: string, dir: string): ResolveResult {
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
  if (isGlob(v)) {
    const paths = sortByMtime(globFiles(v, dir));
    if (!paths.length)
      return {
        error: `No file matches "${v}" (relative to ${dir}): write the path of a vLLM log, e.g. "audit: logs/day4-vllm.log", or a glob like "logs/*.log"`,
      };
    return { input: { kind: 'files', pattern: v, paths } };
  }
  const p = path.resolve(dir, v);
  let st: fs.Stats;
  try {
    st = fs.statSync(p);
  } catch {
    return {
      error: `Cannot find "${v}" (resolved to ${p}): write the path of a vLLM server log relative to the notebook, a glob like "logs/*.log", or a /metrics URL`,
    };
  }
  if (st.isDirectory()) {
    const paths = sortByMtime(globFiles('*.log', p));
    if (!paths.length)
      return { error: `"${v}" is a folder with no *.log files: name the log file, e.g. "${path.join(v, 'vllm.log')}"` };
    return { input: { kind: 'files', pattern: path.join(v, '*.log'), paths } };
  }
  return { input: { kind: 'files', pattern: v, paths: [p] } };
}
