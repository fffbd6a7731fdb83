/**
 * "InfLab: Ink this prediction": asks for ink on a prediction cell (its metadata `"ink": true`) and
 * runs it, so that its outputs are frozen with the time and the inputs' hash (core/notebook/ink.ts,
 * applied by the controller after the run). What may be inked, and the messages, are the core's.
 */
import * as vscode from 'vscode';
import { inkOf, inkRefusal, INK_KEY, inkAfterRun, type Ink } from '../core/notebook/ink';
import type { CellOutput } from '../core/engine/types';
import type { NbCell } from '../core/notebook/format';
import { NOTEBOOK_TYPE } from './ids';

/** A VS Code cell as the core's NbCell, for what the core decides from source and metadata. */
function asNbCell(cell: vscode.NotebookCell): NbCell {
  return {
    kind: cell.kind === vscode.NotebookCellKind.Code ? 'code' : 'markdown',
    language: cell.document.languageId,
    source: cell.document.getText(),
    metadata: { ...cell.metadata },
  };
}

/**
 * After a successful run of a cell that asked for ink or is in ink: the outputs to show (a note
 * first) and the cell's metadata updated (frozen original, or one more revision). Undefined for a
 * cell with no ink.
 */
export function inkAfterVsRun(
  cell: vscode.NotebookCell,
  outputs: CellOutput[],
  at: number,
): { outputs: CellOutput[]; metadata: Record<string, unknown> } | undefined {
  const before = asNbCell(cell);
  if (inkOf(before) === undefined) return undefined;
  const after = inkAfterRun(before, outputs, at);
  return { outputs: after.outputs ?? outputs, metadata: after.metadata ?? {} };
}

/** The command's cell: the one whose toolbar was used, else the active editor's first selected cell. */
function targetCell(arg: unknown): vscode.NotebookCell | undefined {
  const a = arg as { cell?: vscode.NotebookCell } | vscode.NotebookCell | undefined;
  if (a && 'document' in a && 'notebook' in a) return a;
  if (a && 'cell' in a && a.cell) return a.cell;
  const editor = vscode.window.activeNotebookEditor;
  const sel = editor?.selections[0];
  return editor && sel && sel.end > sel.start ? editor.notebook.cellAt(sel.start) : undefined;
}

/** Ink the prediction: returns the cell's ink record after its run (undefined when nothing was inked). */
export async function inkCellCommand(arg?: unknown): Promise<Ink | undefined> {
  const cell = targetCell(arg);
  if (!cell || cell.notebook.notebookType !== NOTEBOOK_TYPE) {
    void vscode.window.showWarningMessage('InfLab: select a prediction cell of an InfLab notebook to ink it.');
    return undefined;
  }
  const nb = asNbCell(cell);
  const refusal = inkRefusal(nb);
  if (refusal) {
    void vscode.window.showWarningMessage(`InfLab: ${refusal}.`);
    return undefined;
  }
  const ink = inkOf(nb);
  if (ink && ink !== 'requested') {
    if ('problem' in ink) void vscode.window.showWarningMessage(`InfLab: ${ink.problem}`);
    else
      void vscode.window.showInformationMessage(
        `InfLab: this prediction is in ink since ${ink.original.inked_at} (${ink.revisions.length} revision(s)); running it again adds a revision and keeps the original.`,
      );
    return undefined;
  }
  const edit = new vscode.WorkspaceEdit();
  edit.set(cell.notebook.uri, [
    vscode.NotebookEdit.updateCellMetadata(cell.index, { ...cell.metadata, [INK_KEY]: true }),
  ]);
  if (!(await vscode.workspace.applyEdit(edit))) {
    void vscode.window.showErrorMessage('InfLab: the cell could not be marked for ink; nothing was changed.');
    return undefined;
  }
  await vscode.commands.executeCommand('notebook.cell.execute', {
    ranges: [{ start: cell.index, end: cell.index + 1 }],
    document: cell.notebook.uri,
  });
  const after = inkOf(asNbCell(cell.notebook.cellAt(cell.index)));
  return after && after !== 'requested' && !('problem' in after) ? after : undefined;
}
