// Builds the .vsix with @vscode/vsce and checks what went in: the bundles, grammar, media and
// manifest, and no sources, tests, source maps or node_modules.
//   node scripts/package.mjs [--out FILE]
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const argv = process.argv.slice(2);
const out = path.resolve(
  root,
  argv.includes('--out') ? argv[argv.indexOf('--out') + 1] : `${pkg.name}-${pkg.version}.vsix`,
);

/** Entry names of a zip file, read from its central directory. */
export function zipEntries(file) {
  const buf = fs.readFileSync(file);
  let eocd = -1;
  for (let i = buf.length - 22; i >= Math.max(0, buf.length - 22 - 0xffff); i--) {
    if (buf.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error(`${file} is not a zip file (no end of central directory)`);
  const count = buf.readUInt16LE(eocd + 10);
  let p = buf.readUInt32LE(eocd + 16);
  const entries = [];
  for (let n = 0; n < count; n++) {
    if (buf.readUInt32LE(p) !== 0x02014b50) throw new Error(`${file}: bad central directory entry ${n}`);
    const size = buf.readUInt32LE(p + 24);
    const nameLen = buf.readUInt16LE(p + 28);
    const extraLen = buf.readUInt16LE(p + 30);
    const commentLen = buf.readUInt16LE(p + 32);
    entries.push({ name: buf.toString('utf8', p + 46, p + 46 + nameLen), size });
    p += 46 + nameLen + extraLen + commentLen;
  }
  return entries;
}

const FORBIDDEN = [
  [/^extension\/src\//, 'sources'],
  [/^extension\/test\//, 'tests'],
  [/^extension\/scripts\//, 'build scripts'],
  [/(^|\/)node_modules\//, 'node_modules'],
  [/\.map$/, 'source maps'],
  [/\.tsx?$/, 'TypeScript sources'],
  [/^extension\/\.vscode-test\//, 'the test VS Code'],
  [/^extension\/examples\/out\//, 'example outputs'],
];
const REQUIRED = [
  'extension/package.json',
  'extension/dist/package.json',
  'extension/dist/extension.js',
  'extension/dist/extension-host.js',
  'extension/dist/renderer.js',
  'extension/dist/bench-worker.js',
  'extension/dist/sim-worker.js',
  // loaded on first use by the bundles above (scripts/build.mjs)
  'extension/dist/undici.js',
  'extension/dist/vega.js',
  'extension/dist/libs.js',
  'extension/syntaxes/inflab.tmLanguage.json',
  'extension/language-configuration.json',
  'extension/README.md',
];

execFileSync(process.execPath, [path.join(root, 'scripts/build.mjs')], { cwd: root, stdio: 'inherit' });
const vsceArgs = [
  'vsce',
  'package',
  '--no-dependencies',
  '--no-rewrite-relative-links',
  '--allow-missing-repository',
  '--out',
  out,
];
if (!fs.existsSync(path.join(root, 'LICENSE')) && !fs.existsSync(path.join(root, 'LICENSE.md')))
  vsceArgs.push('--skip-license');
execFileSync('npx', ['--no-install', ...vsceArgs], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });

const entries = zipEntries(out);
const problems = [];
for (const e of entries) for (const [re, what] of FORBIDDEN) if (re.test(e.name)) problems.push(`${e.name} (${what})`);
for (const r of REQUIRED)
  if (!entries.some((e) => e.name.toLowerCase() === r.toLowerCase())) problems.push(`${r} is missing`);
for (const e of entries.filter((x) => x.name.endsWith('.js'))) {
  const js = fs.readFileSync(path.join(root, e.name.replace(/^extension\//, '')), 'utf8');
  if (/sourceMappingURL=/.test(js.slice(-2000))) problems.push(`${e.name} carries a source map (build without --dev)`);
}
const total = entries.reduce((a, e) => a + e.size, 0);
console.log(
  `${path.relative(root, out)}: ${entries.length} files, ${(total / 1024).toFixed(0)} KiB uncompressed, ${(fs.statSync(out).size / 1024).toFixed(0)} KiB packed`,
);
for (const e of entries) console.log(`  ${e.name}  ${(e.size / 1024).toFixed(1)} KiB`);
if (problems.length) {
  console.error(`The package holds what it must not, or lacks what it needs:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log('package contents ok: no sources, tests, source maps or node_modules');
