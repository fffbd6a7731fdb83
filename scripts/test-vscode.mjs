// Runs the VS Code suite (test/vscode/suite) inside a real VS Code: code-server in Debian's
// Chromium, driven by playwright-core, with the mechanism of VS Code's own browser integration
// tests (extensionDevelopmentPath / extensionTestsPath passed in the workbench URL's payload, the
// exit code handed back through window.codeAutomationExit). Two passes: a trusted workspace, and
// Restricted Mode (no --disable-workspace-trust). Prints every test and a last line
// "N passed, N failed"; exits non-zero on any failure or timeout.
//   node scripts/test-vscode.mjs [--only trusted|restricted] [--screenshot] [--keep] [--vsix FILE]
//   node scripts/test-vscode.mjs --activation-only   no tests: only the activation figure of a
//                                             trusted pass (perf-results/activation.json)
//   node scripts/test-vscode.mjs --electron   same suite under @vscode/test-electron, with the desktop
//                                             VS Code named by VSCODE_EXECUTABLE (or downloaded)
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { chromium } from 'playwright-core';
import { CHROMIUM, entry, provision } from './provision-code-server.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const activationOnly = argv.includes('--activation-only');
const only = activationOnly ? 'trusted' : argv.includes('--only') ? argv[argv.indexOf('--only') + 1] : undefined;
const screenshot = argv.includes('--screenshot');
const keep = argv.includes('--keep');
// --vsix FILE: install the packaged extension into code-server and test the installed copy.
const vsix = argv.includes('--vsix') ? path.resolve(argv[argv.indexOf('--vsix') + 1]) : undefined;
const PASS_TIMEOUT_MS = Number(process.env.INFLAB_VSCODE_TIMEOUT_MS || 900_000);
const t0 = Date.now();

const cleanups = [];
async function cleanup() {
  while (cleanups.length) {
    try {
      await cleanups.pop()();
    } catch {
      /* best effort */
    }
  }
}
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => void cleanup().then(() => process.exit(130)));

function log(s) {
  console.log(`[test-vscode] ${s}`);
}

async function buildAll() {
  execFileSync(process.execPath, [path.join(root, 'scripts/build.mjs')], { cwd: root, stdio: 'inherit' });
  await esbuild.build({
    absWorkingDir: root,
    entryPoints: { index: 'test/vscode/suite/index.ts' },
    outdir: path.join(root, 'out/test/vscode/suite'),
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    external: ['vscode'],
    sourcemap: 'inline',
    logLevel: 'warning',
    plugins: [
      {
        name: 'vega-canvas-shim',
        setup(b) {
          b.onResolve({ filter: /^vega-canvas$/ }, () => ({ path: path.join(root, 'scripts/shims/vega-canvas.js') }));
        },
      },
    ],
    // As in scripts/build.mjs: import.meta as the bundle file's own URL and an ESM-style resolve().
    define: { 'import.meta': 'importMeta' },
    banner: {
      js: 'const importMeta = { url: require("url").pathToFileURL(__filename).href, resolve: (s) => require("url").pathToFileURL(require.resolve(s)).href };',
    },
  });
  fs.writeFileSync(path.join(root, 'out/test/vscode/suite/package.json'), JSON.stringify({ type: 'commonjs' }) + '\n');
}

/** The bridge: the suite inside the extension host asks the harness to look at the page. */
function startBridge(getPage) {
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, 'http://x');
    let body = { ok: false, detail: `unknown request ${url.pathname}` };
    try {
      const page = getPage();
      if (url.pathname === '/webview-svg') body = await findRenderedSvg(page);
      else if (url.pathname === '/screenshot') {
        const file = path.join(root, 'media', 'screenshot.png');
        const size = page.viewportSize();
        await page.setViewportSize({ width: 1280, height: 1950 });
        await new Promise((r) => setTimeout(r, 2500));
        await findRenderedSvg(page);
        await page.screenshot({ path: file });
        await page.setViewportSize(size);
        body = { ok: true, detail: path.relative(root, file) };
      } else if (url.pathname === '/dismiss-dialog') body = await dismissDialog(page);
      else if (url.pathname === '/plot-boxes') body = await plotBoxes(page);
      else if (url.pathname === '/open-html') body = await openHtml(page, url.searchParams.get('file') ?? '');
      else if (url.pathname === '/shot') {
        // A look at the window as it is (INFLAB_TEST_SHOTS names the folder; nothing otherwise).
        const dir = process.env.INFLAB_TEST_SHOTS;
        if (dir) {
          fs.mkdirSync(dir, { recursive: true });
          await page.screenshot({ path: path.join(dir, `${url.searchParams.get('name') ?? 'shot'}.png`) });
        }
        body = { ok: true, detail: dir ? 'saved' : 'INFLAB_TEST_SHOTS not set' };
      } else if (url.pathname === '/type-quick-input') {
        // Types into VS Code's quick input (an input box a command opened) as a person would.
        const input = page.locator('.quick-input-widget input.input');
        // With a title, wait for that step of a multi-step command (a pick, then a box) to be showing.
        const title = url.searchParams.get('title');
        if (title)
          await page
            .locator('.quick-input-widget .quick-input-title', { hasText: title })
            .first()
            .waitFor({ state: 'visible', timeout: 15_000 });
        await input.first().waitFor({ state: 'visible', timeout: 15_000 });
        await input.first().fill(url.searchParams.get('text') ?? '');
        await page.keyboard.press('Enter');
        body = { ok: true, detail: 'typed' };
      }
    } catch (e) {
      body = { ok: false, detail: String(e?.message ?? e) };
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** Look through every frame (output webviews are nested iframes) for an SVG drawn by our renderer. */
async function findRenderedSvg(page) {
  const deadline = Date.now() + 30_000;
  let seen = '';
  while (Date.now() < deadline) {
    for (const f of page.frames()) {
      try {
        const r = await f.evaluate(() => {
          const svgs = [...document.querySelectorAll('.inflab-vega svg')];
          if (!svgs.length) return null;
          return svgs.map((s) => ({
            marks: s.querySelectorAll('path').length,
            texts: s.querySelectorAll('text').length,
            w: s.getBoundingClientRect().width,
          }));
        });
        if (r && r.some((s) => s.marks > 0 && s.w > 0))
          return { ok: true, detail: `${r.length} SVG plot(s) drawn by the renderer: ${JSON.stringify(r)}` };
        if (r) seen = JSON.stringify(r);
      } catch {
        /* frame navigating or gone */
      }
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { ok: false, detail: `no .inflab-vega svg with marks in ${page.frames().length} frames ${seen}` };
}

/**
 * The boxes of the plots the renderer drew, in the output webview's own coordinates: outputs are
 * absolutely placed there, so two plots drawn on top of each other have overlapping boxes.
 */
async function plotBoxes(page) {
  const deadline = Date.now() + 30_000;
  let last = [];
  while (Date.now() < deadline) {
    for (const f of page.frames()) {
      try {
        const r = await f.evaluate(() =>
          [...document.querySelectorAll('.inflab-vega')]
            .filter((e) => e.querySelector('svg path'))
            .map((e) => {
              const b = e.getBoundingClientRect();
              return { top: b.top + window.scrollY, bottom: b.bottom + window.scrollY, left: b.left, right: b.right };
            }),
        );
        if (r.length > last.length) last = r;
      } catch {
        /* frame navigating or gone */
      }
    }
    if (last.length >= 2) return { ok: true, detail: JSON.stringify(last) };
    await new Promise((r) => setTimeout(r, 250));
  }
  return { ok: false, detail: `fewer than two drawn plots: ${JSON.stringify(last)}` };
}

/** Open an exported HTML file in a new tab of the same Chromium and report what it shows. */
async function openHtml(page, file) {
  const tab = await page.context().newPage();
  const fetched = [];
  tab.on('request', (r) => {
    if (!r.url().startsWith('file:')) fetched.push(r.url());
  });
  try {
    await tab.goto(`file://${file}`);
    const info = await tab.evaluate(() => {
      const svgs = [...document.querySelectorAll('.plot svg')].filter((s) => s.getBoundingClientRect().width > 0);
      const verdict = [...document.querySelectorAll('table')].find((t) =>
        [...t.querySelectorAll('th')].some((th) => th.textContent === 'verdict'),
      );
      return {
        plots: svgs.length,
        plotMarks: svgs.reduce((n, s) => n + s.querySelectorAll('path').length, 0),
        verdictRows: verdict ? verdict.querySelectorAll('tbody tr').length : 0,
        verdictText: verdict ? verdict.innerText.slice(0, 400) : '',
      };
    });
    if (process.env.INFLAB_TEST_SHOTS) {
      fs.mkdirSync(process.env.INFLAB_TEST_SHOTS, { recursive: true });
      await tab.evaluate(() => {
        const t = [...document.querySelectorAll('table')].find((x) => x.innerText.includes('verdict'));
        t?.scrollIntoView();
      });
      await tab.screenshot({ path: path.join(process.env.INFLAB_TEST_SHOTS, 'export.png') });
    }
    return { ok: true, detail: JSON.stringify({ ...info, fetched }) };
  } finally {
    await tab.close();
  }
}

async function dismissDialog(page) {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const dialog = page.locator('.monaco-dialog-box');
    if (await dialog.count()) {
      const text = (await dialog.first().innerText()).replace(/\s+/g, ' ').slice(0, 300);
      const cancel = dialog
        .first()
        .locator('a.monaco-button, button')
        .filter({ hasText: /cancel|don't trust|no/i });
      if (await cancel.count()) await cancel.first().click();
      else await page.keyboard.press('Escape');
      return { ok: true, detail: text };
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { ok: false, detail: 'no dialog appeared' };
}

function mkdtemp(prefix) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  if (!keep) cleanups.push(async () => fs.rmSync(d, { recursive: true, force: true }));
  return d;
}

async function startCodeServer({ trusted, workspace, env }) {
  const userData = mkdtemp('inflab-vscode-user-');
  const extensions = mkdtemp('inflab-vscode-ext-');
  fs.mkdirSync(path.join(userData, 'User'), { recursive: true });
  fs.writeFileSync(
    path.join(userData, 'User', 'settings.json'),
    JSON.stringify(
      {
        'workbench.startupEditor': 'none',
        'workbench.tips.enabled': false,
        'telemetry.telemetryLevel': 'off',
        'extensions.autoCheckUpdates': false,
        'extensions.autoUpdate': false,
        'update.mode': 'none',
        'security.workspace.trust.enabled': true,
        'security.workspace.trust.startupPrompt': 'never',
        'security.workspace.trust.banner': 'never',
        'window.dialogStyle': 'custom',
      },
      null,
      2,
    ),
  );
  let extensionPath = root;
  if (vsix) {
    // Installed the way a user installs it; the suite then runs against the installed files.
    execFileSync(
      process.execPath,
      [entry, '--extensions-dir', extensions, '--user-data-dir', userData, '--install-extension', vsix],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const dir = fs.readdirSync(extensions).find((d) => d.startsWith('inflab.inflab-'));
    if (!dir) throw new Error(`installing ${vsix} left no inflab.inflab-* folder in ${extensions}`);
    extensionPath = path.join(extensions, dir);
    log(`installed ${path.basename(vsix)} as ${dir}`);
  }
  const args = [entry, '--auth', 'none', '--bind-addr', '127.0.0.1:0', '--disable-telemetry', '--disable-update-check'];
  if (trusted) args.push('--disable-workspace-trust');
  args.push('--user-data-dir', userData, '--extensions-dir', extensions, workspace);
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const out = [];
  cleanups.push(async () => {
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      /* gone */
    }
    await new Promise((r) => setTimeout(r, 300));
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  });
  const address = await new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`code-server printed no address in 60 s:\n${out.join('')}`)),
      60_000,
    );
    const onData = (d) => {
      out.push(d.toString());
      const m = /HTTP server listening on (http:\/\/[^\s]+)/.exec(out.join(''));
      if (m) {
        clearTimeout(timer);
        resolve(m[1].replace(/\/$/, ''));
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (d) => out.push(d.toString()));
    child.on('exit', (code) => reject(new Error(`code-server exited with ${code}:\n${out.join('')}`)));
  });
  child.stdout.on('data', (d) => out.push(d.toString()));
  return { child, address, output: out, extensionPath };
}

async function runPass(mode) {
  const trusted = mode === 'trusted';
  const workspace = mkdtemp(`inflab-ws-${mode}-`);
  const logFile = path.join(mkdtemp('inflab-log-'), 'suite.log');
  fs.writeFileSync(logFile, '');
  if (!trusted) {
    // The executed example (as the CLI writes it) is what Restricted Mode opens and renders.
    execFileSync(
      process.execPath,
      [
        path.join(root, 'dist/cli.js'),
        'run',
        path.join(root, 'examples/day4.inflab'),
        '--out',
        path.join(workspace, 'day4.executed.inflab'),
      ],
      {
        stdio: 'ignore',
      },
    );
  }
  let page;
  const bridge = await startBridge(() => page);
  cleanups.push(async () => bridge.close());
  const bridgeUrl = `http://127.0.0.1:${bridge.address().port}`;
  const server = await startCodeServer({
    trusted,
    workspace,
    env: {
      INFLAB_EXAMPLES: path.join(root, 'examples'),
      INFLAB_TEST_LOG: logFile,
      INFLAB_TEST_MODE: mode,
      INFLAB_TEST_BRIDGE: bridgeUrl,
      INFLAB_TEST_SCREENSHOT: screenshot && trusted ? '1' : '',
      INFLAB_TEST_ACTIVATION_ONLY: activationOnly ? '1' : '',
    },
  });
  log(`${mode}: code-server at ${server.address}`);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-dev-shm-usage',
      '--disable-extensions',
      '--no-first-run',
      '--mute-audio',
    ],
  });
  cleanups.push(async () => browser.close());
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  const pageLog = [];
  page.on('console', (m) => pageLog.push(`[console.${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => pageLog.push(`[pageerror] ${e.message}`));
  page.on('crash', () => pageLog.push('[crash] the page crashed'));
  let resolveExit;
  const exited = new Promise((r) => (resolveExit = r));
  await page.exposeFunction('codeAutomationLog', (type, args) => pageLog.push(`[ext ${type}] ${args?.join?.(' ')}`));
  await page.exposeFunction('codeAutomationExit', (code) => resolveExit(code));

  const host = new URL(server.address).host;
  const remote = (p) => `vscode-remote://${host}${p}`;
  const payload = JSON.stringify([
    ['extensionDevelopmentPath', remote(server.extensionPath)],
    ['extensionTestsPath', remote(path.join(root, 'out/test/vscode/suite/index.js'))],
    ['skipWelcome', 'true'],
  ]);
  await page.goto(`${server.address}/?folder=${encodeURIComponent(workspace)}&payload=${encodeURIComponent(payload)}`);

  // Print the suite's lines as they come.
  let printed = 0;
  const pump = () => {
    const text = fs.readFileSync(logFile, 'utf8');
    if (text.length > printed) {
      process.stdout.write(text.slice(printed));
      printed = text.length;
    }
    return text;
  };
  const poll = setInterval(pump, 250);
  let timer;
  const code = await Promise.race([
    exited,
    new Promise((r) => (timer = setTimeout(() => r('timeout'), PASS_TIMEOUT_MS))),
  ]);
  clearTimeout(timer);
  clearInterval(poll);
  const text = pump();
  const m = /^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$/m.exec(text);
  const result = {
    mode,
    code,
    passed: m ? Number(m[1]) : 0,
    failed: m ? Number(m[2]) : 1,
    skipped: m ? Number(m[3] ?? 0) : 0,
    activation: activationOf(text),
  };
  if (code !== 0 || !m) {
    if (code === 'timeout') log(`${mode}: timed out after ${PASS_TIMEOUT_MS / 1000} s`);
    else log(`${mode}: the extension host exited with ${code}`);
    log('--- code-server output (last 60 lines) ---');
    console.log(server.output.join('').split('\n').slice(-60).join('\n'));
    log('--- page log (last 80 lines) ---');
    console.log(pageLog.slice(-80).join('\n'));
    if (!m) result.failed = Math.max(1, result.failed);
  }
  await cleanup();
  return result;
}

/** The suite's `activation: {json}` line (test/vscode/suite/activation.ts), if it printed one. */
function activationOf(text) {
  const m = /^activation: (\{.*\})$/m.exec(text);
  try {
    return m ? JSON.parse(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Activation figures from the passes, for scripts/perf.ts: perf-results/activation.json. */
function writeActivation(results, host) {
  const passes = results.filter((r) => r.activation).map((r) => r.activation);
  if (!passes.length) return;
  const dir = path.join(root, 'perf-results');
  fs.mkdirSync(dir, { recursive: true });
  const out = {
    label: `VS Code ${passes[0].vscode} (${host}) extension host, measured by the VS Code suite before any notebook opened, once the extensions that activate at start-up were active and the extension host idle (settled): activate_call_ms = getExtension().activate() to its resolution (activate_cpu_ms: the extension host's CPU time over it); require_ms = between the extension host's own marks around require(dist/extension.js); spans_ms = activate_call_ms split at the extension host's marks (before: up to willLoadExtensionCode; require; context: waiting for the ExtensionContext's storage; activate: our activate() and its promise; after: to the suite's await); host_loaded_at_resolve = dist/extension-host.js already required when activate() resolved; until_host_ms = activate() asked → extension-host.js loaded (diagnostics, hovers, completions registered); vscode_record = VS Code's Startup Performance figures (its load-code time also counts loading localized messages)`,
    when: new Date().toISOString(),
    machine: {
      cores: os.cpus().length,
      cpu: os.cpus()[0]?.model ?? 'unknown',
      loadavg: os.loadavg().map((x) => Math.round(x * 100) / 100),
      node: process.version,
    },
    bundle_kib: Object.fromEntries(
      ['extension.js', 'extension-host.js', 'undici.js', 'vega.js', 'libs.js']
        .filter((f) => fs.existsSync(path.join(root, 'dist', f)))
        .map((f) => [f, Math.round(fs.statSync(path.join(root, 'dist', f)).size / 1024)]),
    ),
    passes,
  };
  fs.writeFileSync(path.join(dir, 'activation.json'), JSON.stringify(out, null, 2) + '\n');
  log(
    `activation (load average ${out.machine.loadavg.join(' ')}): ${passes
      .map(
        (p) =>
          `${p.mode} ${p.activate_call_ms ?? '?'} ms (CPU ${p.activate_cpu_ms ?? '?'} ms), require ${p.require_ms ?? '?'} ms` +
          (p.spans_ms
            ? ` [${Object.entries(p.spans_ms)
                .map(([k, v]) => `${k} ${v}`)
                .join(', ')}]`
            : '') +
          (p.host_loaded_at_resolve ? ', extension-host.js loaded before it resolved' : '') +
          (p.until_host_ms !== undefined ? `, the rest (extension-host.js) loaded at ${p.until_host_ms} ms` : '') +
          (p.settled
            ? `, asked ${p.settled.waited_ms} ms after the suite began (start-up extensions: ${p.settled.waited_for.join(', ') || 'all active'}${p.settled.still_inactive.length ? `; still inactive: ${p.settled.still_inactive.join(', ')}` : ''})`
            : '') +
          (p.vscode_record
            ? ` (VS Code: load code ${p.vscode_record.load_code_ms} ms, call activate ${p.vscode_record.call_activate_ms} ms, finish ${p.vscode_record.finish_activate_ms} ms)`
            : ''),
      )
      .join('; ')} → perf-results/activation.json`,
  );
}

/** The same suite in desktop VS Code through @vscode/test-electron (where one exists). */
async function runElectron() {
  const { runTests } = await import('@vscode/test-electron');
  const workspace = mkdtemp('inflab-ws-electron-');
  const logFile = path.join(mkdtemp('inflab-log-'), 'suite.log');
  fs.writeFileSync(logFile, '');
  let code = 0;
  try {
    await runTests({
      vscodeExecutablePath: process.env.VSCODE_EXECUTABLE || undefined,
      extensionDevelopmentPath: root,
      extensionTestsPath: path.join(root, 'out/test/vscode/suite/index.js'),
      launchArgs: [
        workspace,
        '--disable-extensions',
        '--disable-workspace-trust',
        '--user-data-dir',
        mkdtemp('inflab-vscode-user-'),
      ],
      extensionTestsEnv: {
        INFLAB_EXAMPLES: path.join(root, 'examples'),
        INFLAB_TEST_LOG: logFile,
        INFLAB_TEST_MODE: 'trusted',
      },
    });
  } catch (e) {
    code = 1;
    console.error(`[test-vscode] ${e?.message ?? e}`);
  }
  const text = fs.readFileSync(logFile, 'utf8');
  const m = /^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$/m.exec(text);
  return {
    mode: 'electron',
    code,
    passed: m ? Number(m[1]) : 0,
    failed: m ? Number(m[2]) : 1,
    skipped: m ? Number(m[3] ?? 0) : 0,
    activation: activationOf(text),
  };
}

let exitCode = 0;
if (argv.includes('--electron')) {
  try {
    await buildAll();
    const r = await runElectron();
    writeActivation([r], 'desktop, @vscode/test-electron');
    console.log(
      `${r.passed} passed, ${Math.max(r.failed, r.code ? 1 : 0)} failed${r.skipped ? `, ${r.skipped} skipped` : ''}`,
    );
    exitCode = r.failed || r.code ? 1 : 0;
  } finally {
    await cleanup();
  }
  process.exit(exitCode);
}
try {
  provision();
  await buildAll();
  const results = [];
  for (const mode of ['trusted', 'restricted']) {
    if (only && only !== mode) continue;
    results.push(await runPass(mode));
  }
  writeActivation(results, vsix ? 'code-server, installed .vsix' : 'code-server');
  const passed = results.reduce((a, r) => a + r.passed, 0);
  const failed = results.reduce((a, r) => a + r.failed, 0);
  const skipped = results.reduce((a, r) => a + r.skipped, 0);
  if (failed || results.some((r) => r.code !== 0)) exitCode = 1;
  log(
    `${results.map((r) => `${r.mode}: ${r.passed} passed, ${r.failed} failed (exit ${r.code})`).join('; ')} in ${Math.round((Date.now() - t0) / 1000)} s`,
  );
  console.log(
    `${passed} passed, ${Math.max(failed, exitCode && !failed ? 1 : 0)} failed${skipped ? `, ${skipped} skipped` : ''}`,
  );
} catch (e) {
  console.error(`[test-vscode] ${e?.stack ?? e}`);
  exitCode = 1;
} finally {
  await cleanup();
}
process.exit(exitCode);
