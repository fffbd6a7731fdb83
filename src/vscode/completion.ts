/**
 * Completions in inflab cells: the core's completionsAt does the work (kinds, keys with their docs,
 * catalog ids, dtypes, units, setup names, and references: each cell's facts as the core's
 * cellOffers lists them, then value paths); this adapter gathers the cells above (their text and
 * the values and facts their last run saved) and wraps the items.
 */
import * as vscode from 'vscode';
import { completionsAt, type CellAbove, type CompletionKind } from '../core/complete';
import { MIME } from '../core/engine/outputs';
import { readSavedFacts, type Fact } from '../core/facts';
import { CELL_LANGUAGE, itemFromBytes, NOTEBOOK_TYPE } from './serializer';

const KIND: Record<CompletionKind, vscode.CompletionItemKind> = {
  kind: vscode.CompletionItemKind.Class,
  key: vscode.CompletionItemKind.Property,
  value: vscode.CompletionItemKind.EnumMember,
  unit: vscode.CompletionItemKind.Unit,
  reference: vscode.CompletionItemKind.Reference,
};

/** The inflab cells above a cell document, with the values and facts each saved when it last ran. */
export function cellsAbove(document: vscode.TextDocument): CellAbove[] {
  const nb = vscode.workspace.notebookDocuments.find(
    (n) => n.notebookType === NOTEBOOK_TYPE && n.getCells().some((c) => c.document === document),
  );
  if (!nb) return [];
  const out: CellAbove[] = [];
  for (const c of nb.getCells()) {
    if (c.document === document) break;
    if (c.kind !== vscode.NotebookCellKind.Code || c.document.languageId !== CELL_LANGUAGE) continue;
    let values: Record<string, unknown> | undefined;
    let facts: Fact[] | undefined;
    for (const o of c.outputs)
      for (const it of o.items) {
        if (it.mime === MIME.values) values = itemFromBytes(it.mime, it.data).data as Record<string, unknown>;
        // Validated as on open: what no longer validates is left out (the core lists the rest).
        if (it.mime === MIME.facts) facts = readSavedFacts(itemFromBytes(it.mime, it.data).data).facts;
      }
    out.push({ source: c.document.getText(), values, facts });
  }
  return out;
}

export class InflabCompletionProvider implements vscode.CompletionItemProvider {
  static readonly triggers = [':', ' ', '.', '{', ','];

  provideCompletionItems(document: vscode.TextDocument, position: vscode.Position): vscode.CompletionItem[] {
    let items;
    try {
      items = completionsAt(document.getText(), position.line, position.character, cellsAbove(document));
    } catch {
      return [];
    }
    // Replace the word being typed (ids hold '-', references '.', '[', '(' and spaces).
    const line = document.lineAt(position.line).text.slice(0, position.character);
    const m = /[\w\-.[\]()@=*"]*$/.exec(line);
    const range = new vscode.Range(
      position.line,
      position.character - (m?.[0].length ?? 0),
      position.line,
      position.character,
    );
    return items.map((i) => {
      const c = new vscode.CompletionItem(i.label, KIND[i.kind]);
      c.detail = i.detail;
      if (i.documentation) c.documentation = new vscode.MarkdownString(i.documentation);
      c.insertText = i.insertText ?? i.label;
      c.sortText = i.sortText;
      c.range = range;
      if (i.insertText?.endsWith(': ') || i.insertText?.endsWith('\n'))
        c.command = { command: 'editor.action.triggerSuggest', title: 'values' };
      return c;
    });
  }
}
