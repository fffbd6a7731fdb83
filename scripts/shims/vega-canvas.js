// Stand-in for vega-canvas: no canvas in Node; vega falls back to estimated text metrics.
export function canvas() {
  return null;
}
export function image() {
  return null;
}
