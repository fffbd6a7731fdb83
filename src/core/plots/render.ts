/**
 * Vega-Lite plots as notebook outputs: the spec for the inline renderer, plus an SVG rendered in
 * Node (vega's View.toSVG with renderer "none", no canvas) so plots show where no renderer runs:
 * in the CLI's output, in git diffs' previews, in other notebook viewers.
 */
import { MIME } from '../engine/outputs';
import type { CellOutput } from '../engine/types';

export type VlSpec = Record<string, unknown>;

export const VL_SCHEMA = 'https://vega.github.io/schema/vega-lite/v6.json';

async function renderSvg(spec: VlSpec): Promise<string> {
  const [vl, vega] = await Promise.all([import('vega-lite'), import('vega')]);
  const compiled = vl.compile(spec as any).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** A plot output: Vega-Lite spec first (the renderer's), SVG second (everyone else's). */
export async function plotOutput(spec: VlSpec): Promise<CellOutput> {
  const full = { $schema: VL_SCHEMA, ...spec };
  const svg = await renderSvg(full);
  return {
    items: [
      { mime: MIME.vegaLite6, data: full },
      { mime: MIME.svg, data: svg },
    ],
  };
}
