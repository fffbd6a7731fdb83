/** Builders for the outputs a cell produces. Each output carries a text/plain twin for the CLI. */
import { FACTS_MIME } from '../facts/schema';
import { formatFinding, type Finding } from '../findings';
import type { CellOutput } from './types';

export const MIME = {
  vegaLite5: 'application/vnd.vegalite.v5+json',
  vegaLite6: 'application/vnd.vegalite.v6+json',
  svg: 'image/svg+xml',
  html: 'text/html',
  plain: 'text/plain',
  markdown: 'text/markdown',
  /** Named values of a cell, kept in the notebook so later cells and re-analysis can use them. */
  values: 'application/vnd.inflab.values+json',
  /** A cell's facts, versioned ({version, facts}); validated when the notebook is reopened. */
  facts: FACTS_MIME,
  /** Raw per-request records of a bench point, columnar, kept in the notebook. */
  records: 'application/vnd.inflab.records+json',
  findings: 'application/vnd.inflab.findings+json',
  error: 'application/vnd.code.notebook.error',
} as const;

export function isJsonMime(mime: string): boolean {
  return mime === 'application/json' || mime.endsWith('+json');
}

export interface Column<R> {
  key: keyof R & string;
  label: string;
  /** Formatter for the cell; numbers default to a locale format. */
  fmt?: (v: any, row: R) => string;
  align?: 'left' | 'right';
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function cellText<R>(c: Column<R>, row: R): string {
  const v = row[c.key];
  if (c.fmt) return c.fmt(v, row);
  if (typeof v === 'number')
    return Number.isInteger(v) ? v.toLocaleString('en-US') : v.toLocaleString('en-US', { maximumFractionDigits: 2 });
  return v === undefined || v === null ? '' : String(v);
}

/**
 * A column whose label and cells are all at most this many characters (a number with its unit, a
 * point, a verdict) keeps each cell on one line in HTML; a column holding sentences wraps. Without
 * it a table with one prose column squeezed the others to their longest word ("output" over
 * "tok/s", the verdict's mark over its word).
 */
const NOWRAP_MAX = 24;

/** A table as HTML (for the editor) and aligned plain text (for the CLI). */
export function tableOutput<R>(title: string, columns: Column<R>[], rows: R[], note?: string): CellOutput {
  const texts = rows.map((r) => columns.map((c) => cellText(c, r)));
  const right = (c: Column<R>) =>
    c.align === 'right' || (c.align === undefined && rows.length > 0 && typeof rows[0][c.key] === 'number');
  const widths = columns.map((c, i) => Math.max(c.label.length, ...texts.map((t) => t[i].length)));
  const style = (i: number) =>
    `text-align:${right(columns[i]) ? 'right' : 'left'}${widths[i] <= NOWRAP_MAX ? ';white-space:nowrap' : ''}`;
  const html =
    `<div class="inflab-table"><div><strong>${esc(title)}</strong></div>` +
    `<table><thead><tr>${columns.map((c, i) => `<th style="${style(i)}">${esc(c.label)}</th>`).join('')}</tr></thead>` +
    `<tbody>${texts.map((t) => `<tr>${t.map((x, i) => `<td style="${style(i)}">${esc(x)}</td>`).join('')}</tr>`).join('')}</tbody></table>` +
    (note ? `<div><em>${esc(note)}</em></div>` : '') +
    `</div>`;
  const line = (cells: string[]) =>
    cells
      .map((x, i) => (right(columns[i]) ? x.padStart(widths[i]) : x.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  const plain = [
    title,
    line(columns.map((c) => c.label)),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...texts.map(line),
    ...(note ? [note] : []),
  ].join('\n');
  return {
    items: [
      { mime: MIME.html, data: html },
      { mime: MIME.plain, data: plain },
    ],
  };
}

/** Key/value facts as a two-column table. */
const FACT_VALUE_RIGHT_ALIGN_MAX = 40;

export function factsOutput(title: string, facts: [string, string][], note?: string): CellOutput {
  // Short values (numbers with units) line up on the right; a table holding sentences reads from the left.
  const prose = facts.some(([, v]) => v.length > FACT_VALUE_RIGHT_ALIGN_MAX);
  return tableOutput(
    title,
    [
      { key: 'k', label: 'quantity', align: 'left' },
      { key: 'v', label: 'value', align: prose ? 'left' : 'right' },
    ],
    facts.map(([k, v]) => ({ k, v })),
    note,
  );
}

export function findingsOutput(findings: Finding[]): CellOutput | undefined {
  if (!findings.length) return undefined;
  const icon = { error: '⛔', warning: '⚠️', info: 'ℹ️' } as const;
  const html =
    `<div class="inflab-findings"><strong>Findings</strong><ul>` +
    findings
      .map(
        (f) =>
          `<li>${icon[f.severity]} ${f.severity} <code>${esc(f.code)}</code>${f.path.length ? ` at <code>${esc(f.path.join('.'))}</code>` : ''}: ${esc(f.message)}` +
          (f.cause ? `<br>cause: ${esc(f.cause)}` : '') +
          (f.fix ? `<br>fix: ${esc(f.fix)}` : '') +
          `</li>`,
      )
      .join('') +
    `</ul></div>`;
  return {
    items: [
      { mime: MIME.html, data: html },
      { mime: MIME.findings, data: findings },
      { mime: MIME.plain, data: ['Findings', ...findings.map(formatFinding)].join('\n') },
    ],
  };
}

export function errorOutput(message: string, name = 'InfLab'): CellOutput {
  return {
    items: [
      { mime: MIME.error, data: { name, message } },
      { mime: MIME.plain, data: `${name}: ${message}` },
    ],
  };
}
