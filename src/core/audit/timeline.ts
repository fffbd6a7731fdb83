/**
 * The stats windows as a timeline, split into segments (a sweep's points): idle windows and missing
 * windows (V1 drops the stats line to DEBUG while idle) break the timeline into busy runs; within a
 * run, a sustained change in load (running + waiting) starts a new segment.
 */
import { median } from '../bench/metrics';
import type { WindowSeries } from './windows';

export interface Segment {
  index: number;
  /** Window indices, inclusive. */
  first: number;
  last: number;
  windows: number;
  start_s: number;
  end_s: number;
  start_stamp: string;
  end_stamp: string;
  first_line: number;
  last_line: number;
  /** Means over the segment's windows (the log's own heartbeat figures). */
  mean_prompt_tok_s: number;
  mean_gen_tok_s: number;
  /** Means over interior windows (first and last dropped: they straddle the start and the end). */
  interior_gen_tok_s: number | null;
  peak_running: number;
  mean_running: number;
  peak_waiting: number;
  /** Median running + waiting (each window the larger of it and the one before): the level the segment was split on. */
  load: number;
  hit_first_pct: number | null;
  hit_last_pct: number | null;
  hit_min_pct: number | null;
  hit_max_pct: number | null;
  peak_kv_usage_pct: number;
  /** Mean draft acceptance rate (speculative decoding) over the windows that printed one, or null. */
  spec_accept_pct: number | null;
  preemptions: number;
  requests: number;
  /** Why this segment started: after idle / missing windows, or a change in load. */
  starts_after: 'start' | 'idle' | 'load-change';
}

export interface Timeline {
  /** Seconds between stats lines (median). */
  interval_s: number;
  busy_windows: number;
  idle_windows: number;
  /** Stats lines missing inside the span (V1 stops printing while idle). */
  missing_windows: number;
  segments: Segment[];
}

/** median() of f(i), f(i - 1) … for n = 1, 2 or 3 values, without an array (once per window). */
function medianOfLast(f: (i: number) => number, i: number, n: number): number {
  const a = f(i);
  if (n === 1) return a;
  const b = f(i - 1);
  if (n === 2) return (a + b) / 2;
  const c = f(i - 2);
  return Math.max(Math.min(a, b), Math.min(Math.max(a, b), c));
}

export function isIdle(w: WindowSeries, i: number): boolean {
  return w.running[i] === 0 && w.waiting[i] === 0 && w.prompt[i] < 0.05 && w.gen[i] < 0.05;
}

/** Nothing in flight at the tick, though tokens flowed in the window: a point drained before it. */
function isDrained(w: WindowSeries, i: number): boolean {
  return w.running[i] === 0 && w.waiting[i] === 0;
}

function detectInterval(w: WindowSeries): number {
  const d: number[] = [];
  for (let i = 1; i < w.length && d.length < 5000; i++) {
    const dt = w.t[i] - w.t[i - 1];
    if (dt > 0) d.push(dt);
  }
  const m = median(d);
  return Number.isFinite(m) && m > 0 ? m : 10;
}

function changed(a: number, b: number): boolean {
  return Math.abs(a - b) >= Math.max(2, 0.4 * Math.max(a, b));
}

export function buildTimeline(w: WindowSeries): Timeline {
  const interval = detectInterval(w);
  // Stamps have 1-s resolution: a window may land a second late without being a gap.
  const gapLimit = Math.max(1.5 * interval, interval + 1.5);
  let busy = 0;
  let idle = 0;
  let missing = 0;
  // The load at a tick is noisy under synchronized waves (everyone finishes, the client re-sends):
  // a window's level is the larger of its own and the previous window's, within a run.
  const raw = (i: number) => w.running[i] + w.waiting[i];
  const level = (i: number) =>
    i > 0 && w.t[i] - w.t[i - 1] <= gapLimit && !isIdle(w, i - 1) ? Math.max(raw(i), raw(i - 1)) : raw(i);
  // 1. Busy runs.
  const runs: { first: number; last: number; after: 'start' | 'idle' }[] = [];
  let cur: { first: number; last: number; after: 'start' | 'idle' } | undefined;
  for (let i = 0; i < w.length; i++) {
    const dt = i ? w.t[i] - w.t[i - 1] : 0;
    if (dt > gapLimit) missing += Math.max(0, Math.round(dt / interval) - 1);
    if (isIdle(w, i)) {
      idle++;
      cur = undefined;
      continue;
    }
    if (isDrained(w, i)) {
      // Belongs to the run it drains; the next busy window starts a new run.
      busy++;
      if (cur && dt <= gapLimit) cur.last = i;
      cur = undefined;
      continue;
    }
    busy++;
    if (!cur || dt > gapLimit) {
      cur = { first: i, last: i, after: runs.length || i > 0 ? 'idle' : 'start' };
      runs.push(cur);
    } else cur.last = i;
  }
  // 2. Load changes within a run: split where the level changes and stays changed.
  const spans: { first: number; last: number; after: Segment['starts_after'] }[] = [];
  for (const r of runs) {
    let segStart = r.first;
    let after: Segment['starts_after'] = r.after;
    for (let i = r.first + 1; i <= r.last; i++) {
      const ref = medianOfLast(level, i - 1, Math.min(3, i - segStart));
      const here = level(i);
      // A new level must hold for two windows: a lone tail (requests draining) is no new point.
      if (i === r.last) break;
      const next = level(i + 1);
      // Both this window and the next moved away from the segment's level, the same way.
      if (
        i - segStart >= 1 &&
        changed(here, ref) &&
        changed(next, ref) &&
        Math.sign(here - ref) === Math.sign(next - ref)
      ) {
        spans.push({ first: segStart, last: i - 1, after });
        segStart = i;
        after = 'load-change';
      }
    }
    spans.push({ first: segStart, last: r.last, after });
    // A short drop at the very end of a run is the last point draining, not a point of its own.
    const k = spans.length - 1;
    if (k > 0 && spans[k].after === 'load-change' && spans[k].last - spans[k].first < 2) {
      const lv = (sp: { first: number; last: number }) =>
        median(Array.from({ length: sp.last - sp.first + 1 }, (_, j) => level(sp.first + j)));
      if (lv(spans[k]) < lv(spans[k - 1])) spans[k - 1].last = spans.pop()!.last;
    }
  }
  // A lone window between two levels is a ramp into the next point (or a tail of the last).
  for (let k = 0; k < spans.length; k++) {
    const sp = spans[k];
    if (sp.first !== sp.last) continue;
    const nx = spans[k + 1];
    if (nx && nx.after === 'load-change') {
      nx.first = sp.first;
      nx.after = sp.after;
      spans.splice(k--, 1);
    } else if (k > 0 && sp.after === 'load-change') {
      spans[k - 1].last = sp.last;
      spans.splice(k--, 1);
    }
  }
  // Neighbours with no time gap and the same load are one point that drained at a tick.
  const lvl = (sp: { first: number; last: number }) =>
    median(Array.from({ length: sp.last - sp.first + 1 }, (_, j) => level(sp.first + j)).filter((x) => x > 0));
  for (let k = spans.length - 1; k > 0; k--) {
    const a = spans[k - 1];
    const b = spans[k];
    if (w.t[b.first] - w.t[a.last] <= gapLimit && !changed(lvl(a), lvl(b))) {
      a.last = b.last;
      spans.splice(k, 1);
    }
  }
  const segments = spans.map((s, index) => summarize(w, s.first, s.last, index, s.after, level));
  return { interval_s: interval, busy_windows: busy, idle_windows: idle, missing_windows: missing, segments };
}

function summarize(
  w: WindowSeries,
  first: number,
  last: number,
  index: number,
  after: Segment['starts_after'],
  level: (i: number) => number,
): Segment {
  let sp = 0;
  let sg = 0;
  let peakRun = 0;
  let sumRun = 0;
  let peakWait = 0;
  let peakKv = 0;
  let specSum = 0;
  let specN = 0;
  let pre = 0;
  let reqs = 0;
  let hmin = Infinity;
  let hmax = -Infinity;
  let hfirst: number | null = null;
  let hlast: number | null = null;
  const levels: number[] = [];
  for (let i = first; i <= last; i++) {
    sp += w.prompt[i];
    sg += w.gen[i];
    peakRun = Math.max(peakRun, w.running[i]);
    sumRun += w.running[i];
    peakWait = Math.max(peakWait, w.waiting[i]);
    if (!Number.isNaN(w.kv[i])) peakKv = Math.max(peakKv, w.kv[i]); // a cut line has no KV usage
    if (!Number.isNaN(w.spec[i])) {
      specSum += w.spec[i];
      specN++;
    }
    pre += w.preempt[i];
    reqs += w.reqs[i];
    levels.push(i === first ? w.running[i] + w.waiting[i] : level(i));
    const h = w.hit[i];
    if (!Number.isNaN(h)) {
      hfirst ??= h;
      hlast = h;
      hmin = Math.min(hmin, h);
      hmax = Math.max(hmax, h);
    }
  }
  const n = last - first + 1;
  let interior: number | null = null;
  if (n >= 3) {
    let s = 0;
    for (let i = first + 1; i < last; i++) s += w.gen[i];
    interior = s / (n - 2);
  }
  const r2 = (x: number) => Math.round(x * 100) / 100;
  return {
    index,
    first,
    last,
    windows: n,
    start_s: w.t[first],
    end_s: w.t[last],
    start_stamp: w.stamp(first),
    end_stamp: w.stamp(last),
    first_line: w.line[first],
    last_line: w.line[last],
    mean_prompt_tok_s: r2(sp / n),
    mean_gen_tok_s: r2(sg / n),
    interior_gen_tok_s: interior === null ? null : r2(interior),
    peak_running: peakRun,
    mean_running: r2(sumRun / n),
    peak_waiting: peakWait,
    load: median(levels),
    hit_first_pct: hfirst === null ? null : r2(hfirst),
    hit_last_pct: hlast === null ? null : r2(hlast),
    hit_min_pct: hfirst === null ? null : r2(hmin),
    hit_max_pct: hfirst === null ? null : r2(hmax),
    peak_kv_usage_pct: r2(peakKv),
    spec_accept_pct: specN ? r2(specSum / specN) : null,
    preemptions: pre,
    requests: reqs,
    starts_after: after,
  };
}
