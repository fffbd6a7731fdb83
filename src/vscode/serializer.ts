/**
 * NotebookSerializer for .inflab files: the file format lives in src/core/notebook/format.ts; this
 * only maps it to VS Code's NotebookData and back. A file that does not parse is never opened as an
 * empty notebook (which a save would write over the original): deserializing throws with the
 * format's message, and VS Code shows it in place of the editor.
 *
 * Output items stay bytes on the way in and out (parseNotebookBytes / serializeNotebookBytes): a
 * notebook holding 50 MB of outputs is not parsed into objects and written back to text on every
 * open and save.
 */
import * as vscode from 'vscode';
import { isJsonMime, MIME } from '../core/engine/outputs';
import {
  itemFromBytes as coreItemFromBytes,
  parseNotebookBytes,
  serializeNotebookBytes,
  type NbCell,
  type NbOutputBytes,
  type NbOutputItem,
  type Notebook,
} from '../core/notebook/format';
import { CELL_LANGUAGE, NOTEBOOK_TYPE } from './ids';

export { CELL_LANGUAGE, NOTEBOOK_TYPE };

/** JSON mimes whose names do not end in +json (VS Code's error item) are kept as JSON too. */
const JSON_LIKE = new Set<string>([MIME.error, 'application/vnd.code.notebook.stdout+json']);

const holdsJson = (mime: string) => isJsonMime(mime) || JSON_LIKE.has(mime);

export function itemFromBytes(mime: string, bytes: Uint8Array): NbOutputItem {
  const item = coreItemFromBytes(mime, bytes);
  if (JSON_LIKE.has(mime) && typeof item.data === 'string') {
    try {
      return { mime, data: JSON.parse(item.data) };
    } catch {
      return item;
    }
  }
  return item;
}

export class InflabSerializer implements vscode.NotebookSerializer {
  deserializeNotebook(content: Uint8Array): vscode.NotebookData {
    // Throws NotebookFormatError with what is wrong and where; VS Code then opens no editor and
    // the file on disk is left as it is.
    return toNotebookData(parseNotebookBytes(content));
  }

  serializeNotebook(data: vscode.NotebookData): Uint8Array {
    return serializeNotebookBytes(fromNotebookData(data), holdsJson);
  }
}

export function toNotebookData(nb: Notebook<NbOutputBytes>): vscode.NotebookData {
  const cells = nb.cells.map((c) => {
    const cell = new vscode.NotebookCellData(
      c.kind === 'markdown' ? vscode.NotebookCellKind.Markup : vscode.NotebookCellKind.Code,
      c.source,
      c.language,
    );
    if (c.metadata) cell.metadata = { ...c.metadata };
    if (c.outputs?.length) {
      cell.outputs = c.outputs.map(
        (o) =>
          new vscode.NotebookCellOutput(
            o.items.map((it) => new vscode.NotebookCellOutputItem(it.bytes, it.mime)),
            o.metadata ? { ...o.metadata } : undefined,
          ),
      );
    }
    if (c.lastRun) {
      const { executionOrder, success, startTime, endTime } = c.lastRun;
      cell.executionSummary = {
        executionOrder,
        success,
        timing: startTime !== undefined && endTime !== undefined ? { startTime, endTime } : undefined,
      };
    }
    return cell;
  });
  const data = new vscode.NotebookData(cells);
  if (nb.metadata) data.metadata = { ...nb.metadata };
  return data;
}

export function fromNotebookData(data: vscode.NotebookData): Notebook<NbOutputBytes> {
  const cells: NbCell<NbOutputBytes>[] = data.cells.map((c) => {
    const cell: NbCell<NbOutputBytes> = {
      kind: c.kind === vscode.NotebookCellKind.Markup ? 'markdown' : 'code',
      language: c.languageId || (c.kind === vscode.NotebookCellKind.Markup ? 'markdown' : CELL_LANGUAGE),
      source: c.value,
    };
    const md = Object.fromEntries(Object.entries(c.metadata ?? {}).filter(([, v]) => v !== undefined));
    if (Object.keys(md).length) cell.metadata = md;
    if (c.outputs?.length) {
      cell.outputs = c.outputs.map((o) => {
        const out: NonNullable<NbCell<NbOutputBytes>['outputs']>[number] = {
          items: o.items.map((it) => ({ mime: it.mime, bytes: it.data })),
        };
        if (o.metadata && Object.keys(o.metadata).length) out.metadata = { ...o.metadata };
        return out;
      });
    }
    const s = c.executionSummary;
    if (s && (s.executionOrder !== undefined || s.success !== undefined || s.timing)) {
      cell.lastRun = {};
      if (s.executionOrder !== undefined) cell.lastRun.executionOrder = s.executionOrder;
      if (s.success !== undefined) cell.lastRun.success = s.success;
      if (s.timing) {
        cell.lastRun.startTime = s.timing.startTime;
        cell.lastRun.endTime = s.timing.endTime;
      }
    }
    return cell;
  });
  const nb: Notebook<NbOutputBytes> = { cells };
  const md = data.metadata ?? {};
  if (Object.keys(md).length) nb.metadata = { ...md };
  return nb;
}
