/**
 * Hovers on inflab cells. A minimal provider until the core's hover module lands: a quantity under
 * the cursor is shown in its other units (GB vs GiB spelled out), using units.otherUnits.
 */
import * as vscode from 'vscode';
import { parseCell, pathAt } from '../core/notebook/cellSource';
import { DIMS, otherUnits, parseQuantity, type DimName } from '../core/units';

const ALL_DIMS = Object.keys(DIMS).filter((d) => d !== 'ratio') as DimName[];

export function quantityHover(source: string, line: number, character: number): string | undefined {
  const parsed = parseCell(source);
  if (parsed.errors.length) return undefined;
  const at = pathAt(parsed, { line, character });
  if (!at || typeof at.value !== 'string') return undefined;
  for (const d of ALL_DIMS) {
    const r = parseQuantity(at.value, { dims: [d] });
    if (r.ok) {
      const others = otherUnits(r.quantity);
      if (!others.length) return undefined;
      return `**${at.path.join('.')}**: ${at.value}\n\n${others.map((o) => `= ${o}`).join('  \n')}`;
    }
  }
  return undefined;
}

export class InflabHoverProvider implements vscode.HoverProvider {
  provideHover(document: vscode.TextDocument, position: vscode.Position): vscode.Hover | undefined {
    const md = quantityHover(document.getText(), position.line, position.character);
    return md ? new vscode.Hover(new vscode.MarkdownString(md)) : undefined;
  }
}
