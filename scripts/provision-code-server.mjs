// Installs code-server (which bundles VS Code) into .vscode-test/code-server so the VS Code suite
// runs inside a real VS Code without downloading VS Code itself. Idempotent: a marker file records
// a finished install of the pinned version, and a second run returns at once.
//   node scripts/provision-code-server.mjs [--force]
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const CODE_SERVER_VERSION = '4.100.3';
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const installDir = path.join(root, '.vscode-test', 'code-server');
export const codeServerDir = path.join(installDir, 'node_modules', 'code-server');
export const entry = path.join(codeServerDir, 'out', 'node', 'entry.js');
const marker = path.join(installDir, `.provisioned-${CODE_SERVER_VERSION}`);
export const CHROMIUM = process.env.INFLAB_CHROMIUM || '/usr/bin/chromium';

function log(msg) {
  console.log(`[provision] ${msg}`);
}

function run(cmd, args, cwd, extraEnv = {}) {
  log(`${path.relative(root, cwd) || '.'}$ ${cmd} ${args.join(' ')}`);
  execFileSync(cmd, args, {
    cwd,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, npm_config_fund: 'false', npm_config_audit: 'false', ...extraEnv },
  });
}

function which(bin) {
  try {
    return execFileSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** chromium and ripgrep come from the system; install them with apt-get when we may. */
function ensureSystemPackages() {
  const missing = [];
  if (!fs.existsSync(CHROMIUM)) missing.push('chromium');
  if (!fs.existsSync('/usr/bin/rg')) missing.push('ripgrep');
  // VS Code's server carries the kerberos module (proxy authentication), which `npm rebuild`
  // compiles against the GSSAPI headers.
  if (!fs.existsSync('/usr/include/gssapi/gssapi.h')) missing.push('libkrb5-dev');
  if (!missing.length) return;
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (!isRoot || !which('apt-get')) {
    throw new Error(
      `Missing ${missing.join(' and ')}: install them (Debian: sudo apt-get install -y ${missing.join(' ')}) and run this again.`,
    );
  }
  run('apt-get', ['update'], root);
  run('apt-get', ['install', '-y', '--no-install-recommends', ...missing], root, { DEBIAN_FRONTEND: 'noninteractive' });
}

export function provision({ force = false } = {}) {
  ensureSystemPackages();
  if (!force && fs.existsSync(marker) && fs.existsSync(entry)) {
    log(`code-server ${CODE_SERVER_VERSION} already provisioned in ${path.relative(root, installDir)}`);
    return;
  }
  const t0 = Date.now();
  fs.mkdirSync(installDir, { recursive: true });
  // A private package.json keeps this install away from the project's own dependencies.
  fs.writeFileSync(
    path.join(installDir, 'package.json'),
    JSON.stringify({ name: 'inflab-code-server', private: true }, null, 2) + '\n',
  );
  run('npm', ['install', `code-server@${CODE_SERVER_VERSION}`, '--ignore-scripts', '--no-save'], installDir);
  run('npm', ['rebuild', 'argon2'], installDir);
  const vscodeDir = path.join(codeServerDir, 'lib', 'vscode');
  run('npm', ['install', '--omit=dev', '--ignore-scripts'], vscodeDir);
  const rgDir = path.join(vscodeDir, 'node_modules', '@vscode', 'ripgrep', 'bin');
  fs.mkdirSync(rgDir, { recursive: true });
  fs.rmSync(path.join(rgDir, 'rg'), { force: true });
  fs.symlinkSync('/usr/bin/rg', path.join(rgDir, 'rg'));
  run('npm', ['rebuild'], vscodeDir, { npm_config_yes: 'true' });
  run('npm', ['install', '--omit=dev', '--ignore-scripts'], path.join(vscodeDir, 'extensions'));
  fs.writeFileSync(marker, new Date().toISOString() + '\n');
  log(`code-server ${CODE_SERVER_VERSION} provisioned in ${Math.round((Date.now() - t0) / 1000)} s`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    provision({ force: process.argv.includes('--force') });
  } catch (e) {
    console.error(`[provision] failed: ${e.message}`);
    process.exit(1);
  }
}
