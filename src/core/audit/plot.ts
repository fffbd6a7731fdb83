/** The audit timeline as a Vega-Lite spec: three panels on one time axis, segments shaded. */
import type { VlSpec } from '../plots/render';
import type { WindowSeries } from './parse';
import type { Timeline } from './timeline';

/** At most this many points per series reach the plot (bucket means; peaks kept for counts). */
export const MAX_PLOT_POINTS = 1500;

export function timelineSpec(w: WindowSeries, tl: Timeline, title: string): VlSpec {
  const n = w.length;
  const step = Math.max(1, Math.ceil(n / MAX_PLOT_POINTS));
  const thr: object[] = [];
  const load: object[] = [];
  const pct: object[] = [];
  for (let b = 0; b < n; b += step) {
    const e = Math.min(n, b + step);
    let p = 0;
    let g = 0;
    let run = 0;
    let wait = 0;
    let kv = 0;
    let hit = NaN;
    for (let i = b; i < e; i++) {
      p += w.prompt[i];
      g += w.gen[i];
      run = Math.max(run, w.running[i]);
      wait = Math.max(wait, w.waiting[i]);
      kv = Math.max(kv, w.kv[i]);
      if (!Number.isNaN(w.hit[i])) hit = Number.isNaN(hit) ? w.hit[i] : Math.max(hit, w.hit[i]);
    }
    const k = e - b;
    const min = +(w.t[b] / 60).toFixed(3);
    const line = w.line[b];
    thr.push(
      { min, line, series: 'prompt tok/s', v: +(p / k).toFixed(1) },
      { min, line, series: 'generation tok/s', v: +(g / k).toFixed(1) },
    );
    load.push({ min, line, series: 'running', v: run }, { min, line, series: 'waiting', v: wait });
    pct.push({ min, line, series: 'GPU KV cache usage %', v: +kv.toFixed(1) });
    if (!Number.isNaN(hit)) pct.push({ min, line, series: 'prefix cache hit %', v: +hit.toFixed(1) });
  }
  const segs = tl.segments.map((s) => ({
    seg: `segment ${s.index + 1}`,
    start: +(s.start_s / 60).toFixed(3),
    end: +((s.end_s + Math.min(tl.interval_s, 0.5 * tl.interval_s + 1)) / 60).toFixed(3),
    lines: `${s.first_line}–${s.last_line}`,
    load: s.load,
  }));
  const shade = {
    data: { values: segs },
    mark: { type: 'rect', opacity: 0.12, color: '#888' },
    encoding: {
      x: { field: 'start', type: 'quantitative' },
      x2: { field: 'end' },
      tooltip: [
        { field: 'seg' },
        { field: 'lines', title: 'log lines' },
        { field: 'load', title: 'running + waiting' },
      ],
    },
  };
  const x = { field: 'min', type: 'quantitative', title: 'minutes since the first log line' };
  const panel = (values: object[], yTitle: string, extra: object = {}) => ({
    width: 560,
    height: 120,
    layer: [
      shade,
      {
        data: { values },
        mark: { type: 'line', interpolate: 'step-after', strokeWidth: 1.2 },
        encoding: {
          x,
          y: { field: 'v', type: 'quantitative', title: yTitle, ...extra },
          color: { field: 'series', type: 'nominal', title: null },
          tooltip: [{ field: 'series' }, { field: 'v', format: ',.1f' }, { field: 'line', title: 'log line' }],
        },
      },
    ],
    resolve: { scale: { color: 'independent' } },
  });
  const labels = {
    data: { values: segs },
    mark: { type: 'text', dy: -4, baseline: 'bottom', fontSize: 9, align: 'left' },
    encoding: { x: { field: 'start', type: 'quantitative' }, y: { value: 0 }, text: { field: 'seg' } },
  };
  const top = panel(thr, 'tokens/s');
  (top.layer as object[]).push(labels);
  return {
    title,
    vconcat: [top, panel(load, 'requests'), panel(pct, '%', { scale: { domain: [0, 100] } })],
    resolve: { scale: { color: 'independent' } },
  };
}
