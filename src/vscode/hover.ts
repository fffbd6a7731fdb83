/**
 * Hovers on inflab cells: a key's doc (core keyHoverAt, from the schema); the core's hoverAt does the rest (a quantity in its other units and what
 * it implies for the setup in force); this adapter finds the setup from the cells above and wraps
 * the markdown.
 */
import * as vscode from 'vscode';
import type { Setup } from '../core/engine/types';
import { keyHoverAt } from '../core/complete';
import { hoverAt, setupAt } from '../core/hover';
import { CELL_LANGUAGE, NOTEBOOK_TYPE } from './serializer';

/** The setup in force for a cell: setups above re-prepared, then the cell's own `setup:`/inline keys. */
function setupFor(document: vscode.TextDocument): Setup | undefined {
  const nbDoc = vscode.workspace.notebookDocuments.find(
    (nb) => nb.notebookType === NOTEBOOK_TYPE && nb.getCells().some((c) => c.document === document),
  );
  if (!nbDoc) return undefined;
  const cells = nbDoc.getCells();
  const sources = cells.map((c) =>
    c.kind === vscode.NotebookCellKind.Code && c.document.languageId === CELL_LANGUAGE ? c.document.getText() : '',
  );
  const index = cells.findIndex((c) => c.document === document);
  return setupAt(sources, index, vscode.Uri.joinPath(nbDoc.uri, '..').fsPath);
}

export class InflabHoverProvider implements vscode.HoverProvider {
  provideHover(document: vscode.TextDocument, position: vscode.Position): vscode.Hover | undefined {
    let md: string | undefined;
    try {
      // On a key: its doc from the schema; on a value: the quantity in other units.
      md =
        keyHoverAt(document.getText(), position.line, position.character) ??
        hoverAt(document.getText(), position.line, position.character, setupFor(document));
    } catch {
      return undefined;
    }
    return md ? new vscode.Hover(new vscode.MarkdownString(md)) : undefined;
  }
}
