/**
 * The VS Code suite. It runs inside a real extension host: under code-server in a browser
 * (scripts/test-vscode.mjs) or under @vscode/test-electron where desktop VS Code exists; both call
 * the exported run(). Checks that need to look inside the output webview ask the harness outside
 * the browser through INFLAB_TEST_BRIDGE (an HTTP server on 127.0.0.1); without it they are skipped.
 *
 * INFLAB_TEST_MODE=restricted runs the Restricted Mode pass (an untrusted workspace).
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { measureActivation } from './activation';
import { runTests, say, type TestCase } from './runner';

const EXT_ID = 'inflab.inflab';
const MIME = {
  vl5: 'application/vnd.vegalite.v5+json',
  vl6: 'application/vnd.vegalite.v6+json',
  svg: 'image/svg+xml',
  html: 'text/html',
  error: 'application/vnd.code.notebook.error',
  values: 'application/vnd.inflab.values+json',
};

const bridge = process.env.INFLAB_TEST_BRIDGE;

function assert(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new Error(msg);
}

async function waitFor<T>(
  what: string,
  fn: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function ask(pathAndQuery: string): Promise<{ ok: boolean; detail: string }> {
  const res = await fetch(`${bridge}${pathAndQuery}`, { method: 'POST' });
  return (await res.json()) as { ok: boolean; detail: string };
}

interface Api {
  controller: { restrictedRefusals: number; controller: vscode.NotebookController };
}

async function api(): Promise<Api> {
  const ext = vscode.extensions.getExtension<Api>(EXT_ID);
  assert(ext, `extension ${EXT_ID} is not installed in this VS Code`);
  return ext.isActive ? ext.exports : await ext.activate();
}

/** A fresh folder with copies of the example notebooks (the workspace when it is writable). */
function scratch(): string {
  const ws = vscode.workspace.workspaceFolders?.[0]?.uri;
  const base = ws?.scheme === 'file' ? ws.fsPath : os.tmpdir();
  const dir = fs.mkdtempSync(path.join(base, 'inflab-test-'));
  const ext = vscode.extensions.getExtension(EXT_ID)!;
  // A packaged extension carries no examples: the harness names the project's folder.
  const examples = process.env.INFLAB_EXAMPLES || path.join(ext.extensionPath, 'examples');
  fs.copyFileSync(path.join(examples, 'day4.inflab'), path.join(dir, 'day4.inflab'));
  // The log its audit cell reads.
  fs.mkdirSync(path.join(dir, 'logs'));
  fs.copyFileSync(path.join(examples, 'logs', 'day4-vllm.log'), path.join(dir, 'logs', 'day4-vllm.log'));
  return dir;
}

async function open(file: string): Promise<vscode.NotebookEditor> {
  const doc = await vscode.workspace.openNotebookDocument(vscode.Uri.file(file));
  const editor = await vscode.window.showNotebookDocument(doc);
  await vscode.commands
    .executeCommand('notebook.selectKernel', { notebookEditor: editor, id: 'inflab-controller', extension: EXT_ID })
    .then(undefined, () => undefined);
  return editor;
}

function codeCells(doc: vscode.NotebookDocument): vscode.NotebookCell[] {
  return doc.getCells().filter((c) => c.kind === vscode.NotebookCellKind.Code && c.document.languageId === 'inflab');
}

async function runAll(doc: vscode.NotebookDocument, timeoutMs = 120_000): Promise<void> {
  const before = new Map(codeCells(doc).map((c) => [c.index, c.executionSummary?.timing?.endTime]));
  await vscode.commands.executeCommand('notebook.execute', doc.uri);
  await waitFor(
    'every inflab cell to finish',
    () =>
      codeCells(doc).every(
        (c) =>
          c.executionSummary?.timing?.endTime !== undefined &&
          c.executionSummary.timing.endTime !== before.get(c.index),
      ),
    timeoutMs,
  );
}

function mimesOf(cell: vscode.NotebookCell): string[][] {
  return cell.outputs.map((o) => o.items.map((i) => i.mime));
}

/** Make the notebook dirty without changing its content, so that a save goes through the serializer. */
async function dirtyWithoutChange(doc: vscode.NotebookDocument): Promise<void> {
  const cell = codeCells(doc)[0];
  const text = cell.document.getText();
  const end = cell.document.positionAt(text.length);
  let e = new vscode.WorkspaceEdit();
  e.insert(cell.document.uri, end, ' ');
  assert(await vscode.workspace.applyEdit(e), 'edit applied');
  e = new vscode.WorkspaceEdit();
  e.delete(cell.document.uri, new vscode.Range(end, end.translate(0, 1)));
  assert(await vscode.workspace.applyEdit(e), 'edit reverted');
  assert(cell.document.getText() === text, 'cell text restored');
  await waitFor('the notebook to be dirty', () => doc.isDirty, 5_000);
}

/**
 * Save through VS Code. A save that lands while the window is still applying the last output
 * update can report false and leave the notebook dirty; it is tried again a few times.
 */
async function save(doc: vscode.NotebookDocument): Promise<boolean> {
  for (let i = 0; i < 10; i++) {
    if (await doc.save()) return true;
    if (!doc.isDirty) return true;
    await new Promise((r) => setTimeout(r, 300));
  }
  return !doc.isDirty;
}

async function appendCell(doc: vscode.NotebookDocument, source: string): Promise<vscode.NotebookCell> {
  const e = new vscode.WorkspaceEdit();
  e.set(doc.uri, [
    vscode.NotebookEdit.insertCells(doc.cellCount, [
      new vscode.NotebookCellData(vscode.NotebookCellKind.Code, source, 'inflab'),
    ]),
  ]);
  assert(await vscode.workspace.applyEdit(e), 'cell inserted');
  return doc.cellAt(doc.cellCount - 1);
}

async function diagnosticsOf(
  cell: vscode.NotebookCell,
  what: string,
  pred: (d: vscode.Diagnostic[]) => boolean,
): Promise<vscode.Diagnostic[]> {
  return waitFor(what, () => {
    const d = vscode.languages.getDiagnostics(cell.document.uri);
    return pred(d) ? d : undefined;
  });
}

function trustedTests(): TestCase[] {
  let dir = '';
  let editor: vscode.NotebookEditor;
  let doc: vscode.NotebookDocument;
  return [
    {
      name: 'opens examples/day4.inflab as an InfLab notebook',
      fn: async () => {
        dir = scratch();
        editor = await open(path.join(dir, 'day4.inflab'));
        doc = editor.notebook;
        assert(doc.notebookType === 'inflab', `notebook type ${doc.notebookType}`);
        assert(codeCells(doc).length >= 2, `expected inflab code cells, got ${codeCells(doc).length}`);
        assert(
          doc.getCells().some((c) => c.kind === vscode.NotebookCellKind.Markup),
          'a markdown cell',
        );
        await api();
        assert(vscode.extensions.getExtension(EXT_ID)!.isActive, 'the extension is active');
      },
    },
    {
      name: 'saving an unchanged notebook changes no byte',
      fn: async () => {
        const file = path.join(dir, 'day4.inflab');
        const before = fs.readFileSync(file);
        await dirtyWithoutChange(doc);
        assert(await save(doc), 'save succeeded');
        const after = fs.readFileSync(file);
        assert(before.equals(after), `bytes changed on save:\n${after.toString().slice(0, 400)}`);
      },
    },
    {
      name: 'runs every cell in order: setup facts, a roofline table and a plot (Vega-Lite + SVG)',
      timeoutMs: 180_000,
      fn: async () => {
        await runAll(doc);
        const cells = codeCells(doc);
        const orders = cells.map((c) => c.executionSummary?.executionOrder ?? -1);
        assert(
          orders.every((o, i) => o > 0 && (i === 0 || o > orders[i - 1])),
          `execution order ${orders}`,
        );
        for (const c of cells) {
          assert(
            c.executionSummary?.success === true,
            `cell ${c.index} failed: ${mimesOf(c)} ${c.outputs.map((o) => o.items.map((i) => new TextDecoder().decode(i.data).slice(0, 200)))}`,
          );
          const t = c.executionSummary?.timing;
          assert(t && t.endTime >= t.startTime, `cell ${c.index} has a duration`);
        }
        const setup = cells[0];
        assert(
          mimesOf(setup).some((m) => m.includes(MIME.html)),
          `setup outputs ${JSON.stringify(mimesOf(setup))}`,
        );
        const predict = cells.find((c) => c.document.getText().startsWith('predict: decode-roofline'))!;
        const m = mimesOf(predict);
        assert(
          m.some((o) => o.includes(MIME.html)),
          `a table (text/html) in ${JSON.stringify(m)}`,
        );
        const plot = predict.outputs.find((o) => o.items.some((i) => i.mime === MIME.vl5 || i.mime === MIME.vl6));
        assert(plot, `a Vega-Lite output in ${JSON.stringify(m)}`);
        const svg = plot.items.find((i) => i.mime === MIME.svg);
        assert(
          svg && new TextDecoder().decode(svg.data).includes('<svg'),
          'the plot output also carries image/svg+xml',
        );
        const spec = JSON.parse(
          new TextDecoder().decode(plot.items.find((i) => i.mime.startsWith('application/vnd.vegalite'))!.data),
        );
        assert(
          typeof spec.$schema === 'string' && spec.$schema.includes('vega-lite'),
          'the spec names its Vega-Lite schema',
        );
        const html = new TextDecoder().decode(
          predict.outputs.flatMap((o) => o.items).find((i) => i.mime === MIME.html)!.data,
        );
        assert(html.includes('<table'), 'the table is an HTML table');
      },
    },
    {
      name: 'the renderer draws the plot as SVG inside the output webview',
      skip: bridge ? false : 'needs the browser harness (INFLAB_TEST_BRIDGE)',
      timeoutMs: 60_000,
      fn: async () => {
        const predict = codeCells(doc).find((c) => c.document.getText().startsWith('predict: decode-roofline'))!;
        editor.revealRange(
          new vscode.NotebookRange(predict.index, predict.index + 1),
          vscode.NotebookEditorRevealType.AtTop,
        );
        const r = await ask('/webview-svg');
        assert(r.ok, `no SVG drawn by the renderer: ${r.detail}`);
        say(`    webview: ${r.detail}`);
        if (process.env.INFLAB_TEST_SCREENSHOT) {
          const top = doc.getCells().find((c) => c.kind === vscode.NotebookCellKind.Code)!;
          await vscode.commands.executeCommand('workbench.action.closeSidebar');
          editor.revealRange(new vscode.NotebookRange(top.index, top.index + 1), vscode.NotebookEditorRevealType.AtTop);
          await ask('/webview-svg');
          const s = await ask('/screenshot');
          say(`    screenshot: ${s.detail}`);
        }
      },
    },
    {
      name: 'an executed notebook saves outputs as JSON and saves again byte-identical',
      fn: async () => {
        const file = path.join(dir, 'day4.inflab');
        // Running marks the notebook dirty; should that already have been flushed, dirty it by hand.
        if (!doc.isDirty) await dirtyWithoutChange(doc);
        assert(await save(doc), `save succeeded (dirty now: ${doc.isDirty})`);
        const first = fs.readFileSync(file);
        const json = JSON.parse(first.toString());
        const items = json.cells.flatMap((c: any) => (c.outputs ?? []).flatMap((o: any) => o.items));
        const vl = items.find((i: any) => i.mime === MIME.vl5 || i.mime === MIME.vl6);
        assert(vl && typeof vl.data === 'object', 'the Vega-Lite spec is stored as JSON, not as a string');
        assert(
          json.cells.some((c: any) => c.lastRun?.executionOrder && c.lastRun.endTime >= c.lastRun.startTime),
          'lastRun saved',
        );
        await dirtyWithoutChange(doc);
        assert(await save(doc), 'second save succeeded');
        assert(first.equals(fs.readFileSync(file)), 'an executed notebook changed bytes on a second save');
      },
    },
    {
      name: 'a schema error is a diagnostic on the offending line, and an error output when run',
      fn: async () => {
        const cell = await appendCell(
          doc,
          'predict: decode-roofline\nname: broken\nbatch: [1, 2, 4]\ncontext: 1k bananas\n',
        );
        const diags = await diagnosticsOf(cell, 'a diagnostic on the broken cell', (d) =>
          d.some((x) => x.severity === vscode.DiagnosticSeverity.Error),
        );
        const err = diags.find((x) => x.severity === vscode.DiagnosticSeverity.Error)!;
        assert(err.range.start.line === 3, `diagnostic on line ${err.range.start.line} (want 3): ${err.message}`);
        assert(
          err.source === 'inflab' && /banana|unit/i.test(err.message),
          `message says what to write: ${err.message}`,
        );
        await vscode.commands.executeCommand('notebook.cell.execute', {
          ranges: [{ start: cell.index, end: cell.index + 1 }],
          document: doc.uri,
        });
        await waitFor('the broken cell to finish', () => cell.executionSummary?.success === false);
        const item = cell.outputs.flatMap((o) => o.items).find((i) => i.mime === MIME.error);
        assert(item, `an error output, got ${JSON.stringify(mimesOf(cell))}`);
        const e = JSON.parse(new TextDecoder().decode(item.data));
        assert(/context/.test(e.message), `the error names the key: ${e.message}`);
        const e2 = new vscode.WorkspaceEdit();
        e2.set(doc.uri, [vscode.NotebookEdit.deleteCells(new vscode.NotebookRange(cell.index, cell.index + 1))]);
        await vscode.workspace.applyEdit(e2);
      },
    },
    {
      name: 'a corrupt or newer-version file opens no editable notebook and keeps its bytes',
      fn: async () => {
        const cases: [string, string, RegExp][] = [
          [
            'truncated.inflab',
            '{\n  "inflab": 1,\n  "cells": [\n    {\n      "kind": "code",\n      "language": "inflab",\n      "source": ["setup: x"',
            /JSON/,
          ],
          [
            'invalid.inflab',
            '{\n  "inflab": 1,\n  "cells": [{"kind": "code", "source": ["setup: x"]}]\n}\n',
            /language/,
          ],
          ['newer.inflab', '{\n  "inflab": 99,\n  "cells": []\n}\n', /newer/],
        ];
        for (const [name, text, re] of cases) {
          const file = path.join(dir, name);
          fs.writeFileSync(file, text);
          let opened: vscode.NotebookDocument | undefined;
          let message = '';
          try {
            opened = await vscode.workspace.openNotebookDocument(vscode.Uri.file(file));
          } catch (e) {
            message = (e as Error).message;
          }
          assert(!opened, `${name} opened as a notebook with ${opened?.cellCount} cells`);
          assert(re.test(message), `${name}: the message says what is wrong: ${message}`);
          assert(fs.readFileSync(file, 'utf8') === text, `${name} was changed`);
        }
      },
    },
    {
      name: 'a record cell with an impossible TTFT gets a warning on the ttft line, before and after running',
      fn: async () => {
        const cell = await appendCell(
          doc,
          'record: day4 validation run\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b\nprompt: 1000 tokens\nttft: 23 ms\n',
        );
        const onTtft = (d: vscode.Diagnostic[]) =>
          d.some((x) => x.severity === vscode.DiagnosticSeverity.Warning && x.range.start.line === 4);
        await diagnosticsOf(cell, 'a warning on the ttft line before running', onTtft);
        await vscode.commands.executeCommand('notebook.cell.execute', {
          ranges: [{ start: cell.index, end: cell.index + 1 }],
          document: doc.uri,
        });
        await waitFor('the record cell to finish', () => cell.executionSummary?.success !== undefined);
        await diagnosticsOf(cell, 'a warning on the ttft line after running', onTtft);
      },
    },
    {
      name: 'hovering a quantity shows it in other units',
      fn: async () => {
        const predict = codeCells(doc).find((c) => c.document.getText().startsWith('predict: decode-roofline'))!;
        const line = predict.document
          .getText()
          .split('\n')
          .findIndex((l) => l.startsWith('context:'));
        const hovers = await vscode.commands.executeCommand<vscode.Hover[]>(
          'vscode.executeHoverProvider',
          predict.document.uri,
          new vscode.Position(line, 12),
        );
        const text = hovers
          .flatMap((h) => h.contents.map((c) => (typeof c === 'string' ? c : 'value' in c ? c.value : '')))
          .join('\n');
        assert(/token/i.test(text), `a hover on "context: 1k tokens": ${text.slice(0, 300)}`);
      },
    },
    {
      name: 'the quick fix for a fixed seed sets per-point seeds in the cell',
      fn: async () => {
        const cell = await appendCell(
          doc,
          'bench: sweep\ninput: 200 tokens\noutput: 16 tokens\nconcurrency: [1, 2]\nseed: 7\n',
        );
        const diags = await diagnosticsOf(cell, 'a warning on the seed line', (d) =>
          d.some((x) => x.range.start.line === 4 && x.severity === vscode.DiagnosticSeverity.Warning),
        );
        const d = diags.find((x) => x.range.start.line === 4)!;
        // The command needs the cell's text model in the window: show the cell first.
        editor.revealRange(
          new vscode.NotebookRange(cell.index, cell.index + 1),
          vscode.NotebookEditorRevealType.Default,
        );
        await vscode.window.showTextDocument(cell.document);
        const actions = await waitFor(
          'code actions for the seed warning',
          () =>
            Promise.resolve(
              vscode.commands.executeCommand<vscode.CodeAction[]>(
                'vscode.executeCodeActionProvider',
                cell.document.uri,
                new vscode.Range(d.range.start, d.range.end),
              ),
            ).then(
              (a) => a,
              () => undefined,
            ),
          10_000,
        );
        const fix = actions.find((a) => /per-point/i.test(a.title) && a.edit);
        assert(fix, `a quick fix among: ${actions.map((a) => a.title).join(', ')}`);
        assert(await vscode.workspace.applyEdit(fix.edit!), 'quick fix applied');
        assert(/^seed: per-point$/m.test(cell.document.getText()), `the cell now reads:\n${cell.document.getText()}`);
        await diagnosticsOf(cell, 'the seed warning to go away', (ds) => !ds.some((x) => x.code === d.code));
        const e = new vscode.WorkspaceEdit();
        e.set(doc.uri, [vscode.NotebookEdit.deleteCells(new vscode.NotebookRange(cell.index, cell.index + 1))]);
        await vscode.workspace.applyEdit(e);
      },
    },
    {
      name: 'a short bench sweep against the simulated endpoint grows its output point by point',
      timeoutMs: 120_000,
      fn: async () => {
        const cell = await appendCell(
          doc,
          'bench: sweep\ninput: 200 tokens\noutput: 16 tokens\nconcurrency: [1, 2, 4]\nrequests: 6\n',
        );
        const snapshots: string[] = [];
        const sub = vscode.workspace.onDidChangeNotebookDocument((ev) => {
          for (const ch of ev.cellChanges) {
            if (ch.cell !== cell || !ch.outputs || ch.cell.executionSummary?.timing?.endTime) continue;
            const text = ch.outputs
              .flatMap((o) =>
                o.items.filter((i) => i.mime === 'text/plain').map((i) => new TextDecoder().decode(i.data)),
              )
              .join('\n');
            if (text && snapshots[snapshots.length - 1] !== text) snapshots.push(text);
          }
        });
        try {
          await vscode.commands.executeCommand('notebook.cell.execute', {
            ranges: [{ start: cell.index, end: cell.index + 1 }],
            document: doc.uri,
          });
          await waitFor('the sweep to finish', () => cell.executionSummary?.timing?.endTime !== undefined, 110_000);
        } finally {
          sub.dispose();
        }
        const detail = cell.outputs
          .flatMap((o) => o.items.map((i) => `${i.mime}: ${new TextDecoder().decode(i.data).slice(0, 300)}`))
          .join('\n');
        assert(cell.executionSummary?.success === true, `the sweep failed:\n${detail}`);
        assert(
          snapshots.length >= 2,
          `outputs replaced while running ${snapshots.length} time(s); want at least 2 (one per finished point)`,
        );
        const m = mimesOf(cell).flat();
        assert(m.includes(MIME.html) && (m.includes(MIME.vl5) || m.includes(MIME.vl6)), `sweep outputs: ${m}`);
        say(`    the output grew ${snapshots.length} times while the sweep ran`);
      },
    },
    {
      name: 'an API key set through the command is sent as Authorization and written nowhere; a notebook-named host is not contacted unasked',
      skip: !bridge ? 'needs the browser harness (INFLAB_TEST_BRIDGE)' : false,
      timeoutMs: 90_000,
      fn: async () => {
        const KEY = `sk-inflab-planted-${Math.random().toString(36).slice(2)}`;
        const seen: { auth?: string; url?: string }[] = [];
        const unasked: string[] = [];
        const listen = (h: http.RequestListener) =>
          new Promise<http.Server>((r) => {
            const srv = http.createServer(h);
            srv.listen(0, '127.0.0.1', () => r(srv));
          });
        const allowed = await listen((req, res) => {
          seen.push({ auth: req.headers.authorization, url: req.url });
          req.resume();
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: 'scripted failure', type: 'server_error' } }));
        });
        const other = await listen((req, res) => {
          unasked.push(req.url ?? '');
          res.writeHead(500);
          res.end();
        });
        const urlOf = (s: http.Server) => `http://127.0.0.1:${(s.address() as { port: number }).port}`;
        const allowedUrl = urlOf(allowed);
        const cfg = vscode.workspace.getConfiguration('inflab');
        const cells: vscode.NotebookCell[] = [];
        try {
          // The user's own settings name the first host; the second comes only from the notebook.
          await cfg.update('trustedEndpoints', [urlOf(allowed)], vscode.ConfigurationTarget.Global);
          // Set API Key asks which endpoint (a pick of the known ones), then the key for it.
          const setKey = Promise.resolve(vscode.commands.executeCommand('inflab.setApiKey'));
          const picked = await ask(
            `/type-quick-input?title=${encodeURIComponent('which endpoint')}&text=${encodeURIComponent(urlOf(allowed))}`,
          );
          assert(picked.ok, `picking the endpoint: ${picked.detail}`);
          const typed = await ask(
            `/type-quick-input?title=${encodeURIComponent('API key for')}&text=${encodeURIComponent(KEY)}`,
          );
          assert(typed.ok, `typing the key: ${typed.detail}`);
          await setKey;
          for (const srv of [allowed, other]) {
            const cell = await appendCell(
              doc,
              `bench: sweep\nendpoint: ${urlOf(srv)}\ninput: 50 tokens\noutput: 4 tokens\nconcurrency: [1]\nrequests: 2\nscrape: false\n`,
            );
            cells.push(cell);
            const order = cell.executionSummary?.executionOrder;
            // A host named only by the notebook asks first; under test the dialog is refused.
            void Promise.resolve(
              vscode.commands.executeCommand('notebook.cell.execute', {
                ranges: [{ start: cell.index, end: cell.index + 1 }],
                document: doc.uri,
              }),
            ).then(undefined, () => undefined);
            await waitFor(
              'the bench cell to finish',
              () =>
                cell.executionSummary?.timing?.endTime !== undefined && cell.executionSummary.executionOrder !== order,
              60_000,
            );
          }
          assert(seen.length > 0, 'the allowed endpoint got no request');
          assert(
            seen.every((s) => s.auth === `Bearer ${KEY}`),
            `Authorization headers sent: ${seen.map((s) => (s.auth === `Bearer ${KEY}` ? 'the key' : String(s.auth)))}`,
          );
          assert(
            unasked.length === 0,
            `the notebook-named host got ${unasked.length} request(s) without being confirmed`,
          );
          const refusal = cells[1].outputs
            .flatMap((o) => o.items)
            .map((i) => new TextDecoder().decode(i.data))
            .join('\n');
          assert(/not allowed|confirm/i.test(refusal), `the refused cell says why: ${refusal.slice(0, 300)}`);
          await dirtyWithoutChange(doc).catch(() => undefined);
          assert(await save(doc), 'saved');
          const bytes = fs.readFileSync(path.join(dir, 'day4.inflab'), 'utf8');
          assert(!bytes.includes(KEY), 'the API key was written into the notebook');
          const shown = doc
            .getCells()
            .flatMap((c) => c.outputs.flatMap((o) => o.items.map((i) => new TextDecoder().decode(i.data))))
            .join('\n');
          assert(!shown.includes(KEY), 'the API key appears in an output');
        } finally {
          allowed.close();
          other.close();
          // Clear API Key asks which endpoint's key to remove.
          const clearing = Promise.resolve(vscode.commands.executeCommand('inflab.clearApiKey'));
          const cleared = await ask(
            `/type-quick-input?title=${encodeURIComponent('remove the API key')}&text=${encodeURIComponent(allowedUrl)}`,
          );
          if (cleared.ok) await clearing;
          await cfg.update('trustedEndpoints', undefined, vscode.ConfigurationTarget.Global);
          if (cells.length) {
            const e = new vscode.WorkspaceEdit();
            e.set(doc.uri, [
              vscode.NotebookEdit.deleteCells(
                new vscode.NotebookRange(cells[0].index, cells[cells.length - 1].index + 1),
              ),
            ]);
            await vscode.workspace.applyEdit(e);
          }
        }
      },
    },
    {
      name: "completions: kinds at a cell's first line, the keys of bench: sweep, catalog ids after gpu:",
      fn: async () => {
        const cell = await appendCell(doc, '\n');
        const at = async (text: string, line: number, ch: number) => {
          const e = new vscode.WorkspaceEdit();
          e.replace(cell.document.uri, new vscode.Range(0, 0, cell.document.lineCount, 0), text);
          assert(await vscode.workspace.applyEdit(e), 'cell text set');
          const list = await vscode.commands.executeCommand<vscode.CompletionList>(
            'vscode.executeCompletionItemProvider',
            cell.document.uri,
            new vscode.Position(line, ch),
          );
          return list.items
            .filter((i) => i.kind !== vscode.CompletionItemKind.Text)
            .map((i) => (typeof i.label === 'string' ? i.label : i.label.label));
        };
        try {
          const kinds = await at('', 0, 0);
          for (const k of ['setup', 'predict: decode-roofline', 'bench: sweep', 'audit: environment', 'compare'])
            assert(kinds.includes(k), `kind ${k} offered at the first line: ${kinds.join(', ')}`);
          const keys = await at('bench: sweep\n\n', 1, 0);
          for (const k of [
            'input',
            'output',
            'concurrency',
            'warmup',
            'api',
            'burstiness',
            'percentiles',
            'timeout',
            'base_seed',
            'temperature',
          ])
            assert(keys.includes(k), `bench: sweep key ${k} offered: ${keys.join(', ')}`);
          const gpus = await at('setup: lab\ngpu: \n', 1, 5);
          for (const g of ['a100-sxm4-80gb', 'h100-sxm', 'h100-pcie', 'h200'])
            assert(gpus.includes(g), `catalog id ${g} after gpu: ${gpus.join(', ')}`);
          say(`    ${kinds.length} kinds, ${keys.length} bench: sweep keys, ${gpus.length} GPU ids`);
        } finally {
          const e = new vscode.WorkspaceEdit();
          e.set(doc.uri, [vscode.NotebookEdit.deleteCells(new vscode.NotebookRange(cell.index, cell.index + 1))]);
          await vscode.workspace.applyEdit(e);
        }
      },
    },
    {
      name: 'the quick fix for an unknown key renames it to the key meant',
      fn: async () => {
        const cell = await appendCell(doc, 'predict: decode-roofline\ncontxt: 1k tokens   # typo\nbatch: [1, 8]\n');
        try {
          const diags = await diagnosticsOf(cell, 'an unknown-key error', (d) =>
            d.some((x) => x.code === 'unknown-key'),
          );
          const d = diags.find((x) => x.code === 'unknown-key')!;
          assert(d.range.start.line === 1, `on the contxt line, not ${d.range.start.line}`);
          editor.revealRange(
            new vscode.NotebookRange(cell.index, cell.index + 1),
            vscode.NotebookEditorRevealType.Default,
          );
          await vscode.window.showTextDocument(cell.document);
          const actions = await waitFor(
            'code actions for the unknown key',
            () =>
              Promise.resolve(
                vscode.commands.executeCommand<vscode.CodeAction[]>(
                  'vscode.executeCodeActionProvider',
                  cell.document.uri,
                  d.range,
                ),
              ).then(
                (a) => (a?.length ? a : undefined),
                () => undefined,
              ),
            10_000,
          );
          const fix = actions.find((a) => /Rename "contxt" to "context"/.test(a.title) && a.edit);
          assert(fix, `a rename among: ${actions.map((a) => a.title).join(', ')}`);
          assert(await vscode.workspace.applyEdit(fix.edit!), 'quick fix applied');
          assert(
            cell.document.getText() === 'predict: decode-roofline\ncontext: 1k tokens   # typo\nbatch: [1, 8]\n',
            `the cell now reads:\n${cell.document.getText()}`,
          );
          await diagnosticsOf(
            cell,
            'the unknown-key error to go away',
            (ds) => !ds.some((x) => x.code === 'unknown-key'),
          );
        } finally {
          const e = new vscode.WorkspaceEdit();
          e.set(doc.uri, [vscode.NotebookEdit.deleteCells(new vscode.NotebookRange(cell.index, cell.index + 1))]);
          await vscode.workspace.applyEdit(e);
        }
      },
    },
    {
      name: 're-running a bench cell: its plots and the others are drawn one below the other, never on top',
      skip: bridge ? false : 'needs the browser harness (INFLAB_TEST_BRIDGE)',
      timeoutMs: 150_000,
      fn: async () => {
        const sweep = codeCells(doc).find((c) => /^name: sweep$/m.test(c.document.getText()))!;
        assert(sweep, 'the example has a sweep cell');
        const before = sweep.executionSummary?.executionOrder;
        await vscode.commands.executeCommand('notebook.cell.execute', {
          ranges: [{ start: sweep.index, end: sweep.index + 1 }],
          document: doc.uri,
        });
        await waitFor(
          'the re-run to finish',
          () =>
            sweep.executionSummary?.executionOrder !== before && sweep.executionSummary?.timing?.endTime !== undefined,
          120_000,
        );
        assert(sweep.executionSummary?.success === true, 'the re-run succeeded');
        editor.revealRange(
          new vscode.NotebookRange(sweep.index, sweep.index + 1),
          vscode.NotebookEditorRevealType.AtTop,
        );
        await new Promise((r) => setTimeout(r, 3_000));
        const r = await ask('/plot-boxes');
        assert(r.ok, r.detail);
        const boxes = JSON.parse(r.detail) as { top: number; bottom: number; left: number; right: number }[];
        for (let i = 0; i < boxes.length; i++)
          for (let j = i + 1; j < boxes.length; j++) {
            const a = boxes[i];
            const b = boxes[j];
            const h = Math.min(a.right, b.right) - Math.max(a.left, b.left);
            const v = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
            assert(!(h > 1 && v > 1), `plots ${i} and ${j} overlap by ${Math.round(v)} px: ${JSON.stringify([a, b])}`);
          }
        say(`    ${boxes.length} plots drawn, none on top of another`);
        await ask('/shot?name=rerun');
      },
    },
    {
      name: 'a cell whose setup changed since it ran is marked stale until it runs again',
      fn: async () => {
        const a = (await api()) as unknown as { stale?: { isStale(c: vscode.NotebookCell): boolean } };
        const setup = codeCells(doc)[0];
        const predict = codeCells(doc).find((c) => c.document.getText().startsWith('predict: decode-roofline'))!;
        assert(a.stale && !a.stale.isStale(predict), 'fresh after Run All');
        const line = setup.document
          .getText()
          .split('\n')
          .findIndex((l) => l.startsWith('model:'));
        const e = new vscode.WorkspaceEdit();
        e.replace(
          setup.document.uri,
          new vscode.Range(line, 0, line, setup.document.lineAt(line).text.length),
          'model: llama-3.1-8b',
        );
        assert(await vscode.workspace.applyEdit(e), 'setup edited');
        assert(a.stale.isStale(predict), 'stale after the setup changed');
        const undo = new vscode.WorkspaceEdit();
        undo.replace(
          setup.document.uri,
          new vscode.Range(line, 0, line, setup.document.lineAt(line).text.length),
          'model: qwen3-8b',
        );
        assert(await vscode.workspace.applyEdit(undo), 'setup restored');
        assert(!a.stale.isStale(predict), 'fresh again once the setup is what it ran with');
      },
    },
    {
      name: 'the exported HTML opens in Chromium and shows the plots and the verdict table',
      skip: bridge ? false : 'needs the browser harness (INFLAB_TEST_BRIDGE)',
      fn: async () => {
        const out = path.join(dir, 'day4-export.html');
        const written = await vscode.commands.executeCommand<string>('inflab.exportHtml', doc.uri, out);
        assert(written === out && fs.existsSync(out), `exported to ${written}`);
        const r = await ask(`/open-html?file=${encodeURIComponent(out)}`);
        assert(r.ok, r.detail);
        const info = JSON.parse(r.detail) as {
          plots: number;
          plotMarks: number;
          verdictRows: number;
          verdictText: string;
          fetched: string[];
        };
        assert(info.plots >= 3 && info.plotMarks > 0, `plots drawn: ${r.detail}`);
        assert(info.verdictRows >= 3 && /within|outside/.test(info.verdictText), `the verdict table: ${r.detail}`);
        assert(info.fetched.length === 0, `the page fetched ${info.fetched.join(', ')}`);
        say(`    ${info.plots} plots, a verdict table of ${info.verdictRows} rows, nothing fetched`);
      },
    },
    {
      name: 'InfLab: New Lab Notebook writes each day template into the folder, and each runs clean',
      timeoutMs: 400_000,
      fn: async () => {
        const target = fs.mkdtempSync(path.join(dir, 'templates-'));
        for (const t of ['day2.inflab', 'day3.inflab', 'day4.inflab', 'day5.inflab']) {
          const uri = await vscode.commands.executeCommand<vscode.Uri>('inflab.newNotebook', t, target);
          assert(uri && fs.existsSync(uri.fsPath), `${t} written: ${uri?.fsPath}`);
          const nb = vscode.workspace.notebookDocuments.find((d) => d.uri.toString() === uri.toString())!;
          assert(nb, `${t} is open`);
          await vscode.commands
            .executeCommand('notebook.selectKernel', {
              notebookEditor: vscode.window.activeNotebookEditor,
              id: 'inflab-controller',
              extension: EXT_ID,
            })
            .then(undefined, () => undefined);
          await runAll(nb, 150_000);
          const cells = codeCells(nb);
          for (const c of cells)
            assert(
              c.executionSummary?.success === true,
              `${t}: cell "${c.document.getText().split('\n')[0]}" did not succeed: ${c.outputs.map((o) => o.items.map((i) => new TextDecoder().decode(i.data).slice(0, 200)))}`,
            );
          const orders = cells.map((c) => c.executionSummary?.executionOrder);
          assert(orders[0] === 1, `${t}: a fresh notebook counts from 1, not ${orders[0]}`);
          const errors = cells.flatMap((c) =>
            vscode.languages
              .getDiagnostics(c.document.uri)
              .filter((d) => d.severity === vscode.DiagnosticSeverity.Error),
          );
          assert(errors.length === 0, `${t}: error diagnostics: ${errors.map((d) => d.message).join('; ')}`);
          say(`    ${t}: ${cells.length} cells ran clean`);
          await vscode.commands.executeCommand('workbench.action.revertAndCloseActiveEditor');
        }
      },
    },
    ...editorSafetyTests(() => path.join(dir, 'day4.inflab')),
  ];
}

// ---------------------------------------------------------------- editor safety (issue 8, item 2)

/** Opens its own copy of the example (not the notebook the tests above share). */
async function openCopy(file: string): Promise<vscode.NotebookDocument> {
  const doc = await vscode.workspace.openNotebookDocument(vscode.Uri.file(file));
  await vscode.window.showNotebookDocument(doc);
  return doc;
}

/** Types a line at the top of the first code cell, as a person would, and waits for the notebook to be dirty. */
async function typeLine(doc: vscode.NotebookDocument, line: string): Promise<void> {
  const cell = codeCells(doc)[0];
  const e = new vscode.WorkspaceEdit();
  e.insert(cell.document.uri, new vscode.Position(0, 0), line + '\n');
  assert(await vscode.workspace.applyEdit(e), 'edit applied');
  await waitFor('the notebook to be dirty', () => doc.isDirty, 5_000);
}

const firstCodeText = (doc: vscode.NotebookDocument) => codeCells(doc)[0].document.getText();

/** Closes a notebook editor without saving, whatever state its file is in. */
async function revertAndClose(doc: vscode.NotebookDocument): Promise<void> {
  await vscode.window.showNotebookDocument(doc);
  await vscode.commands.executeCommand('workbench.action.revertAndCloseActiveEditor');
}

/** `executed`: a notebook with outputs, saved by the editor (the tests above leave one). */
function editorSafetyTests(executed: () => string): TestCase[] {
  return [
    {
      name: 'a file in the earlier layout (output data pretty-printed) opens with its outputs and saves in the current one',
      fn: async () => {
        const current = fs.readFileSync(executed(), 'utf8');
        const earlier = JSON.stringify(JSON.parse(current), null, 2) + '\n';
        assert(earlier.split('\n').length > 2 * current.split('\n').length, 'the earlier layout has a line per number');
        const file = path.join(scratch(), 'earlier.inflab');
        fs.writeFileSync(file, earlier);
        const doc = await openCopy(file);
        try {
          const want = JSON.parse(current).cells.map((c: any) =>
            (c.outputs ?? []).map((o: any) => o.items.map((i: any) => i.mime).join()).join('|'),
          );
          const got = doc.getCells().map((c) => c.outputs.map((o) => o.items.map((i) => i.mime).join()).join('|'));
          assert(JSON.stringify(got) === JSON.stringify(want), `outputs opened: ${JSON.stringify(got)}`);
          assert(fs.readFileSync(file, 'utf8') === earlier, 'opening changed the file');
          await dirtyWithoutChange(doc);
          assert(await save(doc), 'saved');
          assert(fs.readFileSync(file, 'utf8') === current, 'saved in the current layout, byte for byte');
        } finally {
          await revertAndClose(doc);
        }
      },
    },
    {
      name: 'a notebook changed on disk while it has unsaved edits: the save of the stale copy fails and both versions survive',
      timeoutMs: 60_000,
      fn: async () => {
        const file = path.join(scratch(), 'day4.inflab');
        const doc = await openCopy(file);
        try {
          // First a save with no conflict, so that a failure below is the conflict and nothing else.
          await typeLine(doc, '# saved from the editor');
          assert(await doc.save(), 'a save with no conflict succeeds');
          assert(fs.readFileSync(file, 'utf8').includes('# saved from the editor'), 'the first edit is on disk');
          // The user types on; meanwhile another program (a git checkout, `inflab run`, a second
          // window) writes the file.
          await typeLine(doc, '# typed while the file changed on disk');
          const theirsFile = JSON.parse(fs.readFileSync(file, 'utf8'));
          theirsFile.cells.push({ kind: 'markdown', language: 'markdown', source: ['written by another program'] });
          const theirs = JSON.stringify(theirsFile, null, 2) + '\n';
          fs.writeFileSync(file, theirs);
          const later = new Date(Date.now() + 5_000);
          fs.utimesSync(file, later, later);
          await new Promise((r) => setTimeout(r, 1_500)); // time for VS Code's file watcher to see it
          assert(
            doc.isDirty && firstCodeText(doc).startsWith('# typed while the file changed on disk'),
            'the editor was not reloaded over the unsaved edit',
          );
          const saved = await doc.save();
          assert(
            saved === false,
            'the save of the stale copy reports failure (VS Code: "the content of the file is newer")',
          );
          await new Promise((r) => setTimeout(r, 500));
          assert(fs.readFileSync(file, 'utf8') === theirs, "the other program's bytes are on disk, byte for byte");
          assert(
            doc.isDirty && firstCodeText(doc).startsWith('# typed while the file changed on disk'),
            'the unsaved edit is still in the editor',
          );
        } finally {
          await revertAndClose(doc);
        }
      },
    },
    {
      name: 'a save that fails (its folder was replaced by a file) leaves the original bytes intact and keeps the edit',
      timeoutMs: 60_000,
      fn: async () => {
        const base = scratch();
        const lab = path.join(base, 'lab');
        const moved = path.join(base, 'lab-moved');
        fs.mkdirSync(lab);
        fs.renameSync(path.join(base, 'day4.inflab'), path.join(lab, 'day4.inflab'));
        const original = fs.readFileSync(path.join(lab, 'day4.inflab'));
        const doc = await openCopy(path.join(lab, 'day4.inflab'));
        try {
          await typeLine(doc, '# typed before the save failed');
          // The folder is moved away and a file takes its name while the notebook is open.
          fs.renameSync(lab, moved);
          fs.writeFileSync(lab, 'a file, not a folder\n');
          const saved = await doc.save();
          assert(saved === false, 'the save reports failure');
          assert(fs.readFileSync(path.join(moved, 'day4.inflab')).equals(original), 'the original bytes are intact');
          assert(
            fs.readFileSync(lab, 'utf8') === 'a file, not a folder\n',
            "the file in the folder's place is untouched",
          );
          assert(
            fs.readdirSync(moved).join() === 'day4.inflab',
            `nothing else written beside the original: ${fs.readdirSync(moved)}`,
          );
          assert(
            doc.isDirty && firstCodeText(doc).startsWith('# typed before the save failed'),
            'the edit is still in the editor',
          );
        } finally {
          fs.rmSync(lab, { force: true });
          if (fs.existsSync(moved)) fs.renameSync(moved, lab);
          await revertAndClose(doc);
        }
      },
    },
  ];
}

function restrictedTests(): TestCase[] {
  let editor: vscode.NotebookEditor;
  let before = '';
  let file = '';
  return [
    {
      name: 'Restricted Mode: the workspace is not trusted',
      fn: () =>
        assert(vscode.workspace.isTrusted === false, 'the workspace is trusted; this pass needs Restricted Mode'),
    },
    {
      name: 'Restricted Mode: an executed notebook opens with its saved outputs',
      fn: async () => {
        const ws = vscode.workspace.workspaceFolders![0].uri.fsPath;
        file = path.join(ws, 'day4.executed.inflab');
        before = fs.readFileSync(file, 'utf8');
        editor = await open(file);
        const outs = codeCells(editor.notebook).flatMap((c) => c.outputs.flatMap((o) => o.items.map((i) => i.mime)));
        assert(
          outs.includes(MIME.html) && (outs.includes(MIME.vl6) || outs.includes(MIME.vl5)),
          `saved outputs: ${outs}`,
        );
      },
    },
    {
      name: 'Restricted Mode: the saved plot still renders as SVG',
      skip: bridge ? false : 'needs the browser harness (INFLAB_TEST_BRIDGE)',
      timeoutMs: 60_000,
      fn: async () => {
        const predict = codeCells(editor.notebook).find((c) =>
          c.document.getText().startsWith('predict: decode-roofline'),
        )!;
        editor.revealRange(
          new vscode.NotebookRange(predict.index, predict.index + 1),
          vscode.NotebookEditorRevealType.AtTop,
        );
        const r = await ask('/webview-svg');
        assert(r.ok, `no SVG drawn: ${r.detail}`);
      },
    },
    {
      name: 'Restricted Mode: running refuses, no cell runs and nothing changes',
      fn: async () => {
        const a = await api();
        const nb = editor.notebook;
        const orders = codeCells(nb).map((c) => c.executionSummary?.executionOrder);
        // VS Code asks for trust before any notebook execution (and refuses the dialog under test);
        // the command may never settle, so it is not awaited.
        void Promise.resolve(vscode.commands.executeCommand('notebook.execute', nb.uri)).then(
          undefined,
          () => undefined,
        );
        await new Promise((r) => setTimeout(r, 3_000));
        // The controller's own guard, for any path that reaches it without trust.
        const refusals = a.controller.restrictedRefusals;
        await a.controller.controller.executeHandler(codeCells(nb), nb, a.controller.controller);
        assert(a.controller.restrictedRefusals === refusals + 1, 'the controller refused to run');
        await new Promise((r) => setTimeout(r, 500));
        assert(
          codeCells(nb).every((c, i) => c.executionSummary?.executionOrder === orders[i]),
          'a cell ran in Restricted Mode',
        );
        assert(!nb.isDirty, 'the notebook changed');
        assert(fs.readFileSync(file, 'utf8') === before, 'the file changed');
      },
    },
  ];
}

export async function run(): Promise<void> {
  const mode = process.env.INFLAB_TEST_MODE === 'restricted' ? 'restricted' : 'trusted';
  say(`InfLab VS Code suite (${mode}) in VS Code ${vscode.version}`);
  await measureActivation(EXT_ID, mode);
  // scripts/test-vscode.mjs --activation-only: the figure alone, no tests.
  if (process.env.INFLAB_TEST_ACTIVATION_ONLY) return void say('0 passed, 0 failed');
  const r = await runTests(mode === 'restricted' ? restrictedTests() : trustedTests());
  if (r.failed) throw new Error(`${r.failed} VS Code test(s) failed`);
}
