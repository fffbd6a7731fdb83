/**
 * Hovers on inflab cells: a key's doc (core keyHoverAt, from the schema); the core's hoverAt does the rest (a quantity in its other units and what
 * it implies for the setup in force); this adapter finds the setup from the cells above and wraps
 * the markdown.
 */
import * as vscode from 'vscode';
import type { Services, Setup } from '../core/engine/types';
import { keyHoverAt } from '../core/complete';
import { readAnalysisFiles } from '../core/engine/engine';
import { hoverAt, setupAt } from '../core/hover';
import { CELL_LANGUAGE, NOTEBOOK_TYPE } from './serializer';

/** The setup in force for a cell: setups above re-prepared, then the cell's own `setup:`/inline keys. */
function setupFor(document: vscode.TextDocument, services: Services): Promise<Setup | undefined> {
  const nbDoc = vscode.workspace.notebookDocuments.find(
    (nb) => nb.notebookType === NOTEBOOK_TYPE && nb.getCells().some((c) => c.document === document),
  );
  if (!nbDoc) return Promise.resolve(undefined);
  const cells = nbDoc.getCells();
  const sources = cells.map((c) =>
    c.kind === vscode.NotebookCellKind.Code && c.document.languageId === CELL_LANGUAGE ? c.document.getText() : '',
  );
  const index = cells.findIndex((c) => c.document === document);
  const dir = vscode.Uri.joinPath(nbDoc.uri, '..').fsPath;
  return readAnalysisFiles(sources.slice(0, index + 1), dir, services).then((files) =>
    setupAt(sources, index, dir, files),
  );
}

export class InflabHoverProvider implements vscode.HoverProvider {
  constructor(private readonly services: Services) {}

  async provideHover(document: vscode.TextDocument, position: vscode.Position): Promise<vscode.Hover | undefined> {
    let md: string | undefined;
    try {
      // On a key: its doc from the schema; on a value: the quantity in other units.
      md =
        keyHoverAt(document.getText(), position.line, position.character) ??
        hoverAt(document.getText(), position.line, position.character, await setupFor(document, this.services));
    } catch {
      return undefined;
    }
    return md ? new vscode.Hover(new vscode.MarkdownString(md)) : undefined;
  }
}
