/**
 * The notebook renderer for Vega-Lite outputs (v5 and v6 mimes): vega-embed draws the spec as SVG,
 * themed to match the editor (light, dark, high contrast), and each view is finalized when VS Code
 * disposes its output. Every plot output also carries image/svg+xml, so a plot shows even where
 * this renderer is absent.
 */
import embed, { type Result } from 'vega-embed';

interface OutputItem {
  readonly id: string;
  readonly mime: string;
  json(): any;
  text(): string;
}
interface RendererContext {
  readonly onDidChangeSettings?: unknown;
}
interface ActivationFunction {
  (ctx: RendererContext): {
    renderOutputItem(item: OutputItem, element: HTMLElement, signal?: AbortSignal): void | Promise<void>;
    disposeOutputItem?(id?: string): void;
  };
}

const views = new Map<string, Result>();

function themeOf(): 'dark' | undefined {
  const c = document.body.classList;
  return c.contains('vscode-dark') || c.contains('vscode-high-contrast') ? 'dark' : undefined;
}

function dispose(id: string): void {
  const v = views.get(id);
  if (v) {
    views.delete(id);
    v.finalize();
  }
}

export const activate: ActivationFunction = () => ({
  async renderOutputItem(item, element, signal) {
    dispose(item.id);
    element.innerHTML = '';
    const host = document.createElement('div');
    host.className = 'inflab-vega';
    host.style.maxWidth = '100%';
    element.appendChild(host);
    let spec: any;
    try {
      spec = item.json();
    } catch (e) {
      element.textContent = `InfLab: the plot spec is not valid JSON (${(e as Error).message})`;
      return;
    }
    // The drawing is asynchronous: hold the plot's height from the start, so that the output is
    // measured at its size and the next output is placed below it, not on top of it (a re-run
    // replaces outputs while the earlier ones are still being drawn).
    const h = typeof spec?.height === 'number' ? spec.height : 300;
    host.style.minHeight = `${h + 80}px`;
    try {
      const theme = themeOf();
      const result = await embed(host, spec, {
        renderer: 'svg',
        actions: { export: true, source: false, compiled: false, editor: false },
        theme,
        config: { background: 'transparent' },
      });
      if (signal?.aborted) {
        result.finalize();
        return;
      }
      views.set(item.id, result);
      host.style.minHeight = '';
    } catch (e) {
      element.textContent = `InfLab: the plot could not be drawn: ${(e as Error).message}`;
    }
  },
  disposeOutputItem(id) {
    if (id === undefined) for (const k of [...views.keys()]) dispose(k);
    else dispose(id);
  },
});
