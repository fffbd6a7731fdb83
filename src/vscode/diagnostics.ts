/**
 * Findings as diagnostics: static checks (analyzeCells) run as the user types, debounced, plus the
 * findings of each cell's last run. The engine gives a path inside the cell; only here does it
 * become a line and column (rangeOfPath). Quick fixes apply a finding's quickFix with the core's
 * applyQuickFix, keeping comments and the rest of the cell.
 */
import * as vscode from 'vscode';
import { analyzeCells, readAnalysisFiles } from '../core/engine/engine';
import type { Services } from '../core/engine/types';
import { dedupeFindings, type Finding } from '../core/findings';
import { parseCell, rangeOfPath, type SourceRange } from '../core/notebook/cellSource';
import { applyQuickFix } from '../core/quickFix';
import { findingsOfOutputs } from './controller';
import { inflabLog } from './log';
import { CELL_LANGUAGE, NOTEBOOK_TYPE } from './serializer';

const DEBOUNCE_MS = 250;
const SOURCE = 'inflab';

/** Codes that say nothing useful while a person is still typing a cell. */
const QUIET_WHILE_TYPING = new Set(['empty-cell']);

export class InflabDiagnostics implements vscode.Disposable, vscode.CodeActionProvider {
  static readonly providedCodeActionKinds = [vscode.CodeActionKind.QuickFix];
  readonly collection = vscode.languages.createDiagnosticCollection('inflab');
  private readonly disposables: vscode.Disposable[] = [this.collection];
  private readonly timers = new Map<string, ReturnType<typeof setTimeout>>();
  /** Findings of the last run, by cell document URI; dropped when the cell's text changes. */
  private readonly runFindings = new Map<string, { version: number; findings: Finding[] }>();
  private readonly findingOf = new WeakMap<vscode.Diagnostic, Finding>();
  /** Resolves when the next analysis of a notebook has been published (for tests and commands). */
  private readonly waiters = new Map<string, (() => void)[]>();
  /** Analyses in flight (files are read through services first), and the latest one's number. */
  private readonly running = new Map<string, Promise<void>>();
  private readonly generation = new Map<string, number>();

  constructor(private readonly services: Services = {}) {
    this.disposables.push(
      vscode.workspace.onDidOpenNotebookDocument((nb) => this.schedule(nb, 0)),
      vscode.workspace.onDidCloseNotebookDocument((nb) => this.clear(nb)),
      vscode.workspace.onDidChangeNotebookDocument((e) => this.schedule(e.notebook)),
      vscode.workspace.onDidChangeTextDocument((e) => {
        if (e.document.languageId !== CELL_LANGUAGE || e.contentChanges.length === 0) return;
        const nb = notebookOf(e.document);
        if (nb) this.schedule(nb);
      }),
      vscode.languages.registerCodeActionsProvider({ language: CELL_LANGUAGE }, this, {
        providedCodeActionKinds: InflabDiagnostics.providedCodeActionKinds,
      }),
    );
    for (const nb of vscode.workspace.notebookDocuments) this.schedule(nb, 0);
  }

  dispose(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    for (const d of this.disposables) d.dispose();
  }

  /** Record the findings of a run; they stand until the cell is edited. */
  setRunFindings(cell: vscode.NotebookCell, findings: Finding[]): void {
    this.runFindings.set(cell.document.uri.toString(), { version: cell.document.version, findings });
    this.schedule(cell.notebook, 0);
  }

  /** Wait until the notebook's diagnostics are current (the pending debounce has run). */
  whenIdle(nb: vscode.NotebookDocument): Promise<void> {
    const key = nb.uri.toString();
    if (!this.timers.has(key) && !this.running.has(key)) return Promise.resolve();
    return new Promise((r) => this.waiters.set(key, [...(this.waiters.get(key) ?? []), r]));
  }

  private schedule(nb: vscode.NotebookDocument, delay = DEBOUNCE_MS): void {
    if (nb.notebookType !== NOTEBOOK_TYPE) return;
    const key = nb.uri.toString();
    const t = this.timers.get(key);
    if (t) clearTimeout(t);
    this.timers.set(
      key,
      setTimeout(() => {
        this.timers.delete(key);
        const gen = (this.generation.get(key) ?? 0) + 1;
        this.generation.set(key, gen);
        const current = () => this.generation.get(key) === gen;
        const done = this.update(nb, current)
          .catch((e) => console.error('inflab: analysis failed', e))
          .finally(() => {
            if (!current() || this.timers.has(key)) return; // a later analysis resolves the waiters
            this.running.delete(key);
            for (const w of this.waiters.get(key) ?? []) w();
            this.waiters.delete(key);
          });
        this.running.set(key, done);
      }, delay),
    );
  }

  private clear(nb: vscode.NotebookDocument): void {
    for (const c of nb.getCells()) {
      this.collection.delete(c.document.uri);
      this.runFindings.delete(c.document.uri.toString());
    }
  }

  /** Analyze every inflab cell of a notebook in order and publish one diagnostic per finding. */
  async update(nb: vscode.NotebookDocument, current: () => boolean = () => true): Promise<void> {
    if (nb.isClosed) return;
    const cells = nb.getCells();
    const isInflab = (c: vscode.NotebookCell) =>
      c.kind === vscode.NotebookCellKind.Code && c.document.languageId === CELL_LANGUAGE;
    const sources = cells.map((c) => (isInflab(c) ? c.document.getText() : ''));
    let analyzed: Finding[][];
    try {
      const dir = vscode.Uri.joinPath(nb.uri, '..').fsPath;
      analyzed = analyzeCells(sources, dir, this.services, await readAnalysisFiles(sources, dir, this.services));
    } catch (e) {
      analyzed = sources.map(() => []);
      inflabLog().error(`analysis of ${nb.uri.fsPath} failed: ${(e as Error)?.stack ?? e}`);
    }
    // A newer analysis started while files were read: it publishes instead.
    if (nb.isClosed || !current()) return;
    for (const cell of cells) {
      const uri = cell.document.uri;
      if (!isInflab(cell)) {
        this.collection.delete(uri);
        continue;
      }
      const source = sources[cell.index];
      const run = this.runFindings.get(uri.toString());
      let fromRun: Finding[];
      if (run && run.version === cell.document.version) fromRun = run.findings;
      else if (run) {
        this.runFindings.delete(uri.toString());
        fromRun = [];
      } else fromRun = cell.document.version <= 1 ? findingsOfOutputs(cell) : [];
      const all = dedupeFindings([...analyzed[cell.index].filter((f) => !QUIET_WHILE_TYPING.has(f.code)), ...fromRun]);
      const parsed = parseCell(source);
      const diags = all.map((f) => {
        const d = new vscode.Diagnostic(toRange(rangeOfPath(parsed, f.path, f.offset)), messageOf(f), severityOf(f));
        d.source = SOURCE;
        d.code = f.code;
        d.relatedInformation = relatedOf(f, cells);
        this.findingOf.set(d, f);
        return d;
      });
      this.collection.set(uri, diags);
    }
  }

  provideCodeActions(
    document: vscode.TextDocument,
    _range: vscode.Range,
    context: vscode.CodeActionContext,
  ): vscode.CodeAction[] {
    const actions: vscode.CodeAction[] = [];
    for (const d of context.diagnostics) {
      const f =
        this.findingOf.get(d) ??
        this.collection
          .get(document.uri)
          ?.map((x) => this.findingOf.get(x))
          .find((x) => x && x.code === d.code && x.quickFix);
      if (!f?.quickFix) continue;
      const text = document.getText();
      let edited: string;
      try {
        edited = applyQuickFix(text, f.quickFix);
      } catch {
        continue;
      }
      if (edited === text) continue;
      const action = new vscode.CodeAction(f.quickFix.title, vscode.CodeActionKind.QuickFix);
      action.diagnostics = [d];
      action.isPreferred = true;
      action.edit = new vscode.WorkspaceEdit();
      action.edit.replace(
        document.uri,
        new vscode.Range(document.positionAt(0), document.positionAt(text.length)),
        edited,
      );
      actions.push(action);
    }
    return actions;
  }
}

function notebookOf(doc: vscode.TextDocument): vscode.NotebookDocument | undefined {
  return vscode.workspace.notebookDocuments.find(
    (nb) => nb.notebookType === NOTEBOOK_TYPE && nb.getCells().some((c) => c.document === doc),
  );
}

function toRange(r: SourceRange): vscode.Range {
  return new vscode.Range(r.start.line, r.start.character, r.end.line, r.end.character);
}

function severityOf(f: Finding): vscode.DiagnosticSeverity {
  return f.severity === 'error'
    ? vscode.DiagnosticSeverity.Error
    : f.severity === 'warning'
      ? vscode.DiagnosticSeverity.Warning
      : vscode.DiagnosticSeverity.Information;
}

function messageOf(f: Finding): string {
  let s = f.message;
  if (f.cause) s += `\nCause: ${f.cause}`;
  if (f.fix) s += `\nFix: ${f.fix}`;
  return s;
}

function relatedOf(f: Finding, cells: vscode.NotebookCell[]): vscode.DiagnosticRelatedInformation[] | undefined {
  const out: vscode.DiagnosticRelatedInformation[] = [];
  for (const r of f.related ?? []) {
    if (r.cellIndex === undefined || !cells[r.cellIndex]) continue;
    const c = cells[r.cellIndex];
    const range = toRange(rangeOfPath(parseCell(c.document.getText()), r.path ?? []));
    out.push(new vscode.DiagnosticRelatedInformation(new vscode.Location(c.document.uri, range), r.message));
  }
  return out.length ? out : undefined;
}
