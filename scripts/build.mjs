// Three bundles (plus the bench worker and the simulator's clock thread): the extension host (CommonJS, vscode external: a small
// activation shim, extension.js, and the rest beside it, extension-host.js, loaded after
// activation), the notebook renderer (ESM for the browser) and the CLI (Node). `--watch` rebuilds on change.
//
// The heavy libraries of the Node bundles live in files of their own beside them, loaded only when
// first used: dist/undici.js (the bench client, the audit's /metrics fetch), dist/vega.js (vega
// and vega-lite, for plots' SVG) and dist/libs.js (markdown-it for an export, ml-matrix and
// ml-levenberg-marquardt for a calibration, tinyglobby for an audit's log glob). The extension host
// compiles every byte of extension-host.js when it loads (what diagnostics as you type wait for), so
// what no diagnostic needs stays out of it.
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

// zod's `z` namespace carries every locale's error messages (some 60 languages); the cells' messages
// are InfLab's own (English), so the bundles keep only zod's English one.
const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(b) {
    b.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, () => ({
      contents: 'export { default as en } from "./en.js";',
      loader: 'js',
    }));
  },
};

/** Library → the file it is bundled into (beside the bundles) and the export that is the library. */
const VENDOR = {
  undici: { file: './undici.js', get: '' },
  vega: { file: './vega.js', get: '.vega' },
  'vega-lite': { file: './vega.js', get: '.vegaLite' },
  'markdown-it': { file: './libs.js', get: '.markdownIt' },
  'ml-matrix': { file: './libs.js', get: '.mlMatrix' },
  'ml-levenberg-marquardt': { file: './libs.js', get: '.levenbergMarquardt' },
  tinyglobby: { file: './libs.js', get: '.tinyglobby' },
};
const vendorEntries = {
  undici: 'module.exports = require("undici");',
  vega: 'exports.vega = require("vega"); exports.vegaLite = require("vega-lite");',
  libs: [
    'exports.markdownIt = require("markdown-it");',
    'exports.mlMatrix = require("ml-matrix");',
    'exports.levenbergMarquardt = require("ml-levenberg-marquardt");',
    'exports.tinyglobby = require("tinyglobby");',
  ].join(' '),
};

// Every `import … from 'undici'` (or any other name in VENDOR) in a Node bundle becomes a require of the
// file beside it. A module that imports it lazily (`await import(…)`, or a module reached only that
// way) requires the file only when it first runs.
const lazyVendor = {
  name: 'lazy-vendor',
  setup(b) {
    const names = new RegExp(`^(${Object.keys(VENDOR).join('|')})$`);
    b.onResolve({ filter: names }, (a) => ({ path: a.path, namespace: 'vendor' }));
    b.onResolve({ filter: /^\.\/.*\.js$/, namespace: 'vendor' }, (a) => ({ path: a.path, external: true }));
    b.onLoad({ filter: /.*/, namespace: 'vendor' }, (a) => ({
      contents: `module.exports = require(${JSON.stringify(VENDOR[a.path].file)})${VENDOR[a.path].get};`,
      loader: 'js',
    }));
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
  plugins: [vegaCanvasShim, zodEnglishOnly],
  // import.meta has no meaning in a CommonJS bundle (esbuild would leave it empty): map it to an
  // object with the bundle file's own URL and a resolve() that answers as ESM's does (a file URL).
  define: { 'import.meta': 'importMeta' },
  banner: {
    js: 'const importMeta = { url: require("url").pathToFileURL(__filename).href, resolve: (s) => require("url").pathToFileURL(require.resolve(s)).href };',
  },
};

const lazy = { ...node, plugins: [...node.plugins, lazyVendor] };

// The extension's entry (src/vscode/activate.ts → extension.js) is a shim that requires the rest of
// the extension (src/vscode/extension.ts → extension-host.js) after activation: that require stays.
const hostBeside = {
  name: 'extension-host-beside',
  setup(b) {
    b.onResolve({ filter: /^\.\/extension-host\.js$/ }, (a) => ({ path: a.path, external: true }));
  },
};
// The vendor files themselves, from a one-line entry each (stdin).
const vendor = (name) => ({
  ...node,
  entryPoints: undefined,
  stdin: { contents: vendorEntries[name], resolveDir: root, sourcefile: `${name}-entry.js`, loader: 'js' },
  outfile: path.join(dist, `${name}.js`),
});

const builds = [
  { ...node, entryPoints: { extension: 'src/vscode/activate.ts' }, external: ['vscode'], plugins: [hostBeside] },
  { ...lazy, entryPoints: { 'extension-host': 'src/vscode/extension.ts' }, external: ['vscode'] },
  { ...lazy, entryPoints: { cli: 'src/cli/main.ts' }, banner: { js: '#!/usr/bin/env node\n' + node.banner.js } },
  { ...lazy, entryPoints: { 'bench-worker': 'src/core/bench/worker.ts' } },
  // The simulator's clock thread (src/core/sim/clock.ts), beside the bundles that start the sim.
  { ...node, entryPoints: { 'sim-worker': 'src/core/sim/clockWorker.ts' } },
  vendor('undici'),
  vendor('vega'),
  vendor('libs'),
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
].filter((b) => !b.entryPoints || Object.values(b.entryPoints).every((e) => fs.existsSync(path.join(root, e))));

fs.mkdirSync(dist, { recursive: true });
// The package is "type": "module"; the Node bundles are CommonJS, so dist says so.
fs.writeFileSync(path.join(dist, 'package.json'), JSON.stringify({ type: 'commonjs' }) + '\n');

const t0 = performance.now();
if (watch) {
  for (const b of builds)
    await (await esbuild.context({ ...b, absWorkingDir: root, ...(b.outfile ? {} : { outdir: dist }) })).watch();
  console.log('watching…');
} else {
  await Promise.all(
    builds.map((b) => esbuild.build({ ...b, absWorkingDir: root, ...(b.outfile ? {} : { outdir: dist }) })),
  );
  fs.chmodSync(path.join(dist, 'cli.js'), 0o755);
  const sizes = fs
    .readdirSync(dist)
    .filter((f) => f.endsWith('.js'))
    .map((f) => `${f} ${(fs.statSync(path.join(dist, f)).size / 1024).toFixed(0)} KiB`);
  console.log(`built in ${Math.round(performance.now() - t0)} ms: ${sizes.join(', ')}`);
}
