// Three bundles (plus the bench worker): the extension host (CommonJS, vscode external), the
// notebook renderer (ESM for the browser) and the CLI (Node). `--watch` rebuilds on change.
import * as esbuild from 'esbuild';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
const watch = process.argv.includes('--watch');
const dev = process.argv.includes('--dev');

// vega-canvas's Node build loads the optional `canvas` package with top-level await, which a
// CommonJS bundle cannot hold; SVG rendering needs no canvas, so it is replaced by a shim.
const vegaCanvasShim = {
  name: 'vega-canvas-shim',
  setup(b) {
    b.onResolve({ filter: /^vega-canvas$/ }, () => ({ path: path.join(root, 'scripts/shims/vega-canvas.js') }));
  },
};

const node = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  sourcemap: dev ? 'inline' : false,
  minify: !dev,
  legalComments: 'none',
  logLevel: 'warning',
  plugins: [vegaCanvasShim],
  // import.meta.url has no meaning in a CommonJS bundle; map it to the file's own URL.
  define: { 'import.meta.url': 'importMetaUrl' },
  banner: { js: 'const importMetaUrl = require("url").pathToFileURL(__filename).href;' },
};

const builds = [
  { ...node, entryPoints: { extension: 'src/vscode/extension.ts' }, external: ['vscode'] },
  { ...node, entryPoints: { cli: 'src/cli/main.ts' }, banner: { js: '#!/usr/bin/env node\n' + node.banner.js } },
  { ...node, entryPoints: { 'bench-worker': 'src/core/bench/worker.ts' } },
  {
    entryPoints: { renderer: 'src/renderer/index.ts' },
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    minify: !dev,
    sourcemap: dev ? 'inline' : false,
    legalComments: 'none',
    logLevel: 'warning',
  },
].filter((b) => Object.values(b.entryPoints).every((e) => fs.existsSync(path.join(root, e))));

fs.mkdirSync(dist, { recursive: true });
// The package is "type": "module"; the Node bundles are CommonJS, so dist says so.
fs.writeFileSync(path.join(dist, 'package.json'), JSON.stringify({ type: 'commonjs' }) + '\n');

const t0 = performance.now();
if (watch) {
  for (const b of builds) await (await esbuild.context({ ...b, absWorkingDir: root, outdir: dist })).watch();
  console.log('watching…');
} else {
  await Promise.all(builds.map((b) => esbuild.build({ ...b, absWorkingDir: root, outdir: dist })));
  fs.chmodSync(path.join(dist, 'cli.js'), 0o755);
  const sizes = fs.readdirSync(dist).filter((f) => f.endsWith('.js')).map((f) => `${f} ${(fs.statSync(path.join(dist, f)).size / 1024).toFixed(0)} KiB`);
  console.log(`built in ${Math.round(performance.now() - t0)} ms: ${sizes.join(', ')}`);
}
