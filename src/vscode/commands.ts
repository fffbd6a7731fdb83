/**
 * Commands that start and share a notebook: "InfLab: New Lab Notebook" (a day template, or a blank
 * lab, written into the workspace with the files it reads) and "Export Notebook as HTML/Markdown"
 * (core/export). The templates are the core's TEMPLATES list, read from the extension's examples/.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { serializeNotebook } from '../core/notebook/format';
import { BLANK_NOTEBOOK, TEMPLATES } from '../core/templates';
import { NOTEBOOK_TYPE } from './ids';
import { inflabLog } from './log';
import { InflabSerializer } from './serializer';

/** A file name in `dir` not taken yet: day4.inflab, day4-2.inflab, … */
function freeName(dir: string, file: string): string {
  const stem = file.replace(/\.inflab$/, '');
  let name = file;
  for (let n = 2; fs.existsSync(path.join(dir, name)); n++) name = `${stem}-${n}.inflab`;
  return name;
}

/**
 * Create a notebook from a template (its file name, or 'blank'; asked when not given) in `dir`
 * (default: the first workspace folder; without one, an untitled notebook). Returns its URI.
 */
export async function newNotebook(
  context: vscode.ExtensionContext,
  template?: string,
  dir?: string,
): Promise<vscode.Uri | undefined> {
  let pick = template;
  if (!pick) {
    const items = [
      ...TEMPLATES.map((t) => ({ label: t.title, description: t.file, detail: t.description, id: t.file })),
      { label: 'Blank lab', description: '', detail: 'one setup cell on the simulated endpoint', id: 'blank' },
    ];
    const chosen = await vscode.window.showQuickPick(items, {
      title: 'InfLab: New Lab Notebook',
      placeHolder: 'Start from a day template (each runs end to end on the simulated endpoint)',
      matchOnDetail: true,
    });
    if (!chosen) return undefined;
    pick = chosen.id;
  }
  const t = TEMPLATES.find((x) => x.file === pick);
  if (!t && pick !== 'blank')
    throw new Error(`no template "${pick}": use one of ${TEMPLATES.map((x) => x.file).join(', ')} or blank`);
  const examples = path.join(context.extensionPath, 'examples');
  const text = t ? fs.readFileSync(path.join(examples, t.file), 'utf8') : serializeNotebook(BLANK_NOTEBOOK as never);
  const ws = vscode.workspace.workspaceFolders?.find((f) => f.uri.scheme === 'file');
  const target = dir ?? ws?.uri.fsPath;
  if (!target) {
    const data = new InflabSerializer().deserializeNotebook(new TextEncoder().encode(text));
    const doc = await vscode.workspace.openNotebookDocument(NOTEBOOK_TYPE, data);
    await vscode.window.showNotebookDocument(doc);
    return doc.uri;
  }
  // Nothing the user has is overwritten: the notebook takes a free name, needed files are copied only when absent.
  const name = freeName(target, t?.file ?? 'lab.inflab');
  for (const n of t?.needs ?? []) {
    const to = path.join(target, n);
    if (!fs.existsSync(to)) {
      fs.mkdirSync(path.dirname(to), { recursive: true });
      fs.copyFileSync(path.join(examples, n), to);
    }
  }
  const file = path.join(target, name);
  fs.writeFileSync(file, text, { flag: 'wx' });
  const uri = vscode.Uri.file(file);
  await vscode.window.showNotebookDocument(await vscode.workspace.openNotebookDocument(uri));
  inflabLog().info(`new lab notebook ${file} from ${t?.file ?? 'blank'}`);
  return uri;
}

/** Export a notebook (the active one by default) beside its file; returns the written path. */
export async function exportNotebook(
  format: 'html' | 'md',
  uri?: vscode.Uri,
  out?: string,
): Promise<string | undefined> {
  const doc = uri
    ? vscode.workspace.notebookDocuments.find((d) => d.uri.toString() === uri.toString())
    : vscode.window.activeNotebookEditor?.notebook;
  if (!doc || doc.notebookType !== NOTEBOOK_TYPE) {
    void vscode.window.showWarningMessage('InfLab: open an InfLab notebook to export it.');
    return undefined;
  }
  // The notebook as it is in the editor (outputs included), not as last saved.
  const bytes = new InflabSerializer().serializeNotebook(
    new vscode.NotebookData(
      doc.getCells().map((c) => {
        const d = new vscode.NotebookCellData(c.kind, c.document.getText(), c.document.languageId);
        d.outputs = [...c.outputs];
        d.executionSummary = c.executionSummary;
        d.metadata = c.metadata;
        return d;
      }),
    ),
  );
  const { parseNotebook } = await import('../core/notebook/format');
  const nb = parseNotebook(new TextDecoder().decode(bytes));
  // markdown-it loads only when a notebook is exported.
  const { exportHtml, exportMarkdown } = await import('../core/export');
  const base =
    doc.uri.scheme === 'file'
      ? doc.uri.fsPath.replace(/\.inflab$/, '')
      : path.join(vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? process.cwd(), 'notebook');
  const file = out ?? `${base}.${format}`;
  if (format === 'html') fs.writeFileSync(file, exportHtml(nb));
  else {
    const assets = `${path.basename(file).replace(/\.md$/, '')}-plots`;
    const { markdown, files } = exportMarkdown(nb, assets);
    for (const f of files) {
      fs.mkdirSync(path.dirname(path.join(path.dirname(file), f.name)), { recursive: true });
      fs.writeFileSync(path.join(path.dirname(file), f.name), f.data);
    }
    fs.writeFileSync(file, markdown);
  }
  inflabLog().info(`exported ${doc.uri.fsPath} to ${file}`);
  if (!out) {
    const open = 'Open';
    void vscode.window.showInformationMessage(`InfLab: exported to ${path.basename(file)}`, open).then((p) => {
      if (p === open) void vscode.env.openExternal(vscode.Uri.file(file));
    });
  }
  return file;
}
