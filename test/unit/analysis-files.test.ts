/**
 * What the analysis as you type reads (readAnalysisFiles, then analyzeCells: the editor's
 * diagnostics and hovers): a `model: {config: PATH}` naming a FIFO with no writer, /dev/zero,
 * /dev/urandom or a link to one, and an `audit:` of a FIFO or a glob over the whole disk, each
 * return at once with a message saying why the file was not read; nothing at all is read in
 * Restricted Mode. The policies
 * are the hosts' own (nodeFiles: the editor's with its workspace folder and trust, the CLI's with
 * every path). A hang fails the test through its timeout, not a timing assertion.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, test } from 'node:test';
import { analyzeCells, readAnalysisFiles } from '../../src/core/engine/engine';
import type { Services } from '../../src/core/engine/types';
import { nodeFiles, type FilePolicy } from '../../src/core/host/files';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-analysis-'));
after(() => fs.rmSync(DIR, { recursive: true, force: true }));

let FIFO: string | undefined = path.join(DIR, 'config.json');
try {
  execFileSync('mkfifo', [FIFO]);
} catch {
  FIFO = undefined; // no mkfifo here
}
const hasDevZero = fs.existsSync('/dev/zero');

/** A hang fails here (well past the 1 s analysis bound the host sets), not in a timing assertion. */
const HANG = { timeout: 10_000 };

/** The services of a host with this policy, counting what reaches its file hooks. */
function host(policy: FilePolicy): { services: Services; calls: string[] } {
  const files = nodeFiles(policy);
  const calls: string[] = [];
  return {
    calls,
    services: {
      readFile: (abs, o) => (calls.push(`read ${abs}`), files.readFile(abs, o)),
      statFile: (abs, o) => (calls.push(`stat ${abs}`), files.statFile(abs, o)),
      openFile: (abs, o) => (calls.push(`open ${abs}`), files.openFile(abs, o)),
      listFiles: (p, o) => (calls.push(`list ${p}`), files.listFiles(p, o)),
    },
  };
}
const editor = (trusted = true) => host({ roots: () => [DIR], trusted: () => trusted });
const cli = () => host({});

const setupNaming = (config: string) => `setup: lab\ngpu: a100-sxm4-80gb\nmodel: {config: ${config}}`;

/** The analysis of these cells, as the editor runs it on every edit. */
async function analyze(sources: string[], services: Services) {
  const files = await readAnalysisFiles(sources, DIR, services);
  return analyzeCells(sources, DIR, services, files);
}

function configFinding(findings: { code: string; message: string }[][]): string {
  const f = findings[0].find((x) => x.code === 'config-not-found');
  assert.ok(f, `a config-not-found finding: ${JSON.stringify(findings)}`);
  return f.message;
}

test(
  'model: {config: FIFO} is refused from its stat, in both hosts, with a message',
  { ...HANG, skip: !FIFO },
  async () => {
    for (const h of [editor(), cli()]) {
      const msg = configFinding(await analyze([setupNaming(FIFO!)], h.services));
      assert.match(msg, /is a FIFO \(named pipe\), not a regular file: InfLab reads only regular files/);
      // Also written relative to the notebook, as a user would.
      assert.match(configFinding(await analyze([setupNaming('config.json')], h.services)), /FIFO/);
    }
  },
);

test(
  'model: {config: /dev/zero} and /dev/urandom: the CLI says a device; the editor does not read outside the workspace while typing',
  { ...HANG, skip: !hasDevZero },
  async () => {
    for (const dev of ['/dev/zero', '/dev/urandom']) {
      if (!fs.existsSync(dev)) continue;
      const viaCli = configFinding(await analyze([setupNaming(dev)], cli().services));
      assert.match(viaCli, /not a regular file/, dev);
      const viaEditor = configFinding(await analyze([setupNaming(dev)], editor().services));
      assert.match(
        viaEditor,
        /outside the notebook's folder and the workspace: it is read only when the cell runs/,
        dev,
      );
    }
    // A link inside the workspace to /dev/zero is judged by where it leads.
    const link = path.join(DIR, 'zero.json');
    fs.symlinkSync('/dev/zero', link);
    assert.match(configFinding(await analyze([setupNaming(link)], cli().services)), /a device, not a regular file/);
    assert.match(configFinding(await analyze([setupNaming(link)], editor().services)), /outside the notebook's folder/);
  },
);

test(
  'audit: of a FIFO returns at once (it is looked at, never opened); a glob over the whole disk is not walked',
  { ...HANG, skip: !FIFO },
  async () => {
    for (const h of [editor(), cli()]) {
      const [findings] = await analyze([`audit: ${FIFO}`], h.services);
      assert.deepStrictEqual(
        findings.filter((f) => f.severity === 'error'),
        [],
        'a FIFO exists: analysis has nothing to say (the run refuses it)',
      );
      assert.deepStrictEqual(h.calls, [`stat ${FIFO}`], 'only a stat, no open or read');
      h.calls.length = 0;
      await analyze(['audit: /**/x.log'], h.services);
      assert.deepStrictEqual(h.calls, [], 'nothing looked at for a glob');
    }
  },
);

test('Restricted Mode: analysis reads nothing, and says why', HANG, async () => {
  const h = editor(false);
  const config = path.join(DIR, 'real-config.json');
  fs.writeFileSync(config, '{"hidden_size": 4096}');
  const msg = configFinding(await analyze([setupNaming(config)], h.services));
  assert.match(msg, /InfLab reads no files in Restricted Mode: trust the workspace first/);
});
