/**
 * Reading an audit's facts (facts/schema.ts: log, log-windows, log-segment) back as evidence: the
 * stats windows as numbers, the windows of a segment that flood with prefill, the log's own mean
 * rate against its busy windows', and how to cite a line ("line 12", or "day4.log:12" when several
 * files were read as one timeline). Used by the audit's check rules and by the audit's values; it
 * loads no parser.
 */
import * as path from 'node:path';
import type { FactOf } from '../facts/schema';

/** The stats windows of a log-windows fact as numbers, NaN where a window's line did not print one. */
export interface Windows {
  length: number;
  line: number[];
  t: number[];
  prompt: number[];
  gen: number[];
  running: number[];
  waiting: number[];
  preempt: number[];
  kv: number[];
  hit: number[];
  /** Seconds between stats lines (the median). */
  interval: number;
}

const nums = (c: (number | null)[]) => c.map((x) => (x === null ? NaN : x));

export function windowsOf(f: FactOf<'log-windows'>): Windows {
  return {
    length: f.line.length,
    line: f.line,
    t: f.t,
    prompt: nums(f.prompt),
    gen: nums(f.generation),
    running: nums(f.running),
    waiting: nums(f.waiting),
    preempt: nums(f.preemptions),
    kv: nums(f.kv_usage),
    hit: nums(f.prefix_hit),
    interval: f.interval,
  };
}

/** What the evidence needs of a segment: its windows and why it started. */
export type SegmentSpan = Pick<FactOf<'log-segment'>, 'first' | 'last' | 'windows' | 'starts_after'>;

/** Windows where prompt throughput floods and generation collapses, alternating with decode windows. */
export function interferenceWindows(
  w: Windows,
  s: SegmentSpan,
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

/**
 * Which edge windows of a segment straddle idle time the log shows: idle windows or a gap (V1 stops
 * printing while idle) next to them, and no request waiting at the window's tick (a queue means
 * the engine had work all through). A segment that starts the log has no idle shown before it.
 */
export function idleEdges(w: Windows, segments: SegmentSpan[], k: number): { first: boolean; last: boolean } {
  const s = segments[k];
  const next = segments[k + 1];
  const saturated = (i: number) => w.waiting[i] > 0;
  const before = s.starts_after === 'idle' || (s.starts_after === 'start' && s.first > 0);
  const after = next ? next.starts_after === 'idle' : s.last < w.length - 1;
  return { first: before && !saturated(s.first), last: after && !saturated(s.last) };
}

/** The log's own mean over its span (idle and missing windows count) against the busy windows' mean. */
export function heartbeatMeans(
  w: Windows,
  segments: SegmentSpan[],
): { log_mean_gen_tok_s: number; busy_mean_gen_tok_s: number; slots: number } | undefined {
  if (!segments.length) return undefined;
  // Idle windows count, and missing windows (V1 stops printing while idle) are idle time too.
  const first = segments[0].first;
  const last = segments[segments.length - 1].last;
  let sum = 0;
  for (let i = first; i <= last; i++) sum += w.gen[i];
  const slots = last - first + 1 + countMissing(w, first, last);
  // Busy-only: each segment without the edge windows that straddle idle time.
  let bs = 0;
  let bn = 0;
  for (const [k, s] of segments.entries()) {
    const e = idleEdges(w, segments, k);
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

function countMissing(w: Windows, first: number, last: number): number {
  const interval = w.interval;
  let n = 0;
  for (let i = first + 1; i <= last; i++) {
    const dt = w.t[i] - w.t[i - 1];
    if (dt > Math.max(1.5 * interval, interval + 1.5)) n += Math.round(dt / interval) - 1;
  }
  return n;
}

type Files = FactOf<'log'>['files'];

/** "line 12" — or "day4.log:12" when several files were read as one timeline. */
export function cite(files: Files, line: number): string {
  if (files.length <= 1) return `line ${line}`;
  let f = files[0];
  for (const x of files) if (x.first_line <= line) f = x;
  return `${path.basename(f.path)}:${line - f.first_line + 1}`;
}

/** "lines 3, 5, 9 and 2 more" (or file:line each). */
export function citeList(files: Files, lines: number[], max = 4): string {
  const uniq = [...new Set(lines)];
  const more = uniq.length > max ? ` and ${uniq.length - max} more` : '';
  if (files.length <= 1) return `${uniq.length > 1 ? 'lines' : 'line'} ${uniq.slice(0, max).join(', ')}${more}`;
  return (
    uniq
      .slice(0, max)
      .map((l) => cite(files, l))
      .join(', ') + more
  );
}
