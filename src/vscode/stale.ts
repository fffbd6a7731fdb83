/**
 * Stale marks: a cell that ran under one setup, whose setup has changed since (a setup cell above
 * edited, or its own gpu/model/… keys), gets a status-bar mark "stale: setup changed" until it runs
 * again. The controller records the setup in force at each run (setupKey).
 */
import * as vscode from 'vscode';
import type { InflabController } from './controller';
import { CELL_LANGUAGE, NOTEBOOK_TYPE } from './ids';

export class StaleMarks implements vscode.NotebookCellStatusBarItemProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeCellStatusBarItems = this.changed.event;
  private readonly subs: vscode.Disposable[];
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly controller: InflabController) {
    this.subs = [
      vscode.notebooks.registerNotebookCellStatusBarItemProvider(NOTEBOOK_TYPE, this),
      controller.onDidChangeRuns(() => this.changed.fire()),
      vscode.workspace.onDidChangeTextDocument((e) => {
        if (e.document.languageId !== CELL_LANGUAGE) return;
        if (this.timer) clearTimeout(this.timer);
        this.timer = setTimeout(() => this.changed.fire(), 300);
      }),
      this.changed,
    ];
  }

  /** Whether a cell ran here under a setup that is no longer the one in force. */
  isStale(cell: vscode.NotebookCell): boolean {
    const ran = this.controller.ranWith.get(cell.document.uri.toString());
    return ran !== undefined && ran !== this.controller.setupKey(cell);
  }

  provideCellStatusBarItems(cell: vscode.NotebookCell): vscode.NotebookCellStatusBarItem[] {
    if (cell.kind !== vscode.NotebookCellKind.Code || !this.isStale(cell)) return [];
    const item = new vscode.NotebookCellStatusBarItem(
      '$(warning) stale: setup changed',
      vscode.NotebookCellStatusBarAlignment.Left,
    );
    item.tooltip =
      'The setup in force for this cell changed since it ran: its outputs show the old setup. Run it again.';
    return [item];
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    for (const s of this.subs) s.dispose();
  }
}
