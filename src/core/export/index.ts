/**
 * A notebook as the write-up a person posts: one self-contained HTML file (markdown rendered, each
 * cell's YAML, its tables and findings, plots as inline SVG, no script and nothing fetched from the
 * network), or Markdown with each plot as an SVG file beside it. Deterministic: the same notebook
 * gives the same bytes (no dates, no random ids), so an export diffs cleanly in git.
 */
import MarkdownIt from 'markdown-it';
import { MIME } from '../engine/outputs';
import type { NbCell, Notebook } from '../notebook/format';

export interface ExportedFile {
  /** Path relative to the exported document. */
  name: string;
  data: string;
}

const md = new MarkdownIt({ html: false, linkify: false, typographer: false });

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/**
 * HTML and SVG from outputs, with anything active removed: scripts, event handlers, foreign
 * objects, javascript: links and external references (the page must not reach the network).
 */
export function inert(html: string): string {
  return html
    .replace(/<(script|iframe|object|embed|foreignObject|style)\b[\s\S]*?<\/\1\s*>/gi, '')
    .replace(/<\/?(script|iframe|object|embed|foreignObject|link|meta|base)\b[^>]*>/gi, '')
    .replace(/\s+on[a-z]+\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)/gi, '')
    .replace(/\s(href|xlink:href|src)\s*=\s*("|')\s*(?:javascript:|https?:|\/\/)[^"']*\2/gi, '');
}

const STYLE = `
body{font:15px/1.5 -apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#1f2328}
pre.source{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:.6em .8em;overflow:auto;font:13px/1.45 ui-monospace,"DejaVu Sans Mono",monospace}
.cell{margin:1.4em 0}.output{margin:.6em 0 .6em 1em}
table{border-collapse:collapse;margin:.4em 0;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d0d7de;padding:.25em .6em}th{background:#f6f8fa}
.inflab-findings ul{margin:.3em 0;padding-left:1.2em}
pre.error{color:#b42318;background:#fef3f2;border:1px solid #fecdca;border-radius:6px;padding:.6em .8em;white-space:pre-wrap}
pre.text{white-space:pre-wrap;font:13px/1.45 ui-monospace,"DejaVu Sans Mono",monospace}
.plot svg{max-width:100%;height:auto}
`;

/** The title of a notebook: its first markdown heading. */
function titleOf(nb: Notebook): string {
  for (const c of nb.cells) {
    if (c.kind !== 'markdown') continue;
    const m = /^#+\s+(.+)$/m.exec(c.source);
    if (m) return m[1].trim();
  }
  return 'InfLab notebook';
}

type Part =
  | { kind: 'html'; html: string }
  | { kind: 'svg'; svg: string }
  | { kind: 'text'; text: string }
  | { kind: 'error'; text: string };

/** What a cell's outputs show, in order: one part per output (its richest item). */
function partsOf(cell: NbCell): Part[] {
  const out: Part[] = [];
  for (const o of cell.outputs ?? []) {
    const by = new Map(o.items.map((i) => [i.mime, i.data]));
    const err = by.get(MIME.error) as { name?: string; message?: string } | undefined;
    if (err) out.push({ kind: 'error', text: `${err.name ?? 'Error'}: ${err.message ?? ''}` });
    else if (typeof by.get(MIME.svg) === 'string') out.push({ kind: 'svg', svg: by.get(MIME.svg) as string });
    else if (typeof by.get(MIME.html) === 'string') out.push({ kind: 'html', html: by.get(MIME.html) as string });
    else if (typeof by.get(MIME.markdown) === 'string')
      out.push({ kind: 'html', html: md.render(by.get(MIME.markdown) as string) });
    else if (typeof by.get(MIME.plain) === 'string' && !by.has(MIME.values))
      out.push({ kind: 'text', text: by.get(MIME.plain) as string });
  }
  return out;
}

/** The notebook as one self-contained HTML page. */
export function exportHtml(nb: Notebook): string {
  const title = titleOf(nb);
  const body: string[] = [];
  for (const c of nb.cells) {
    if (c.kind === 'markdown') {
      body.push(`<section class="cell markdown">${md.render(c.source)}</section>`);
      continue;
    }
    const parts = partsOf(c)
      .map((p) =>
        p.kind === 'svg'
          ? `<div class="output plot">${inert(p.svg)}</div>`
          : p.kind === 'html'
            ? `<div class="output">${inert(p.html)}</div>`
            : p.kind === 'error'
              ? `<pre class="output error">${esc(p.text)}</pre>`
              : `<pre class="output text">${esc(p.text)}</pre>`,
      )
      .join('\n');
    const status = c.lastRun ? '' : '<div class="output"><em>not run</em></div>';
    body.push(
      `<section class="cell code"><pre class="source"><code>${esc(c.source)}</code></pre>\n${parts}${status}</section>`,
    );
  }
  return (
    `<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n` +
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">\n` +
    `<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>${esc(title)}</title>\n<style>${STYLE}</style>\n</head>\n<body>\n` +
    body.join('\n') +
    `\n</body>\n</html>\n`
  );
}

/** A table (or findings) HTML output as Markdown: a pipe table, or the HTML kept as it is. */
function htmlToMarkdown(html: string): string {
  const table = /<table>([\s\S]*?)<\/table>/.exec(html);
  const title = /<strong>([\s\S]*?)<\/strong>/.exec(html)?.[1];
  if (!table) return inert(html);
  const rows = [...table[1].matchAll(/<tr>([\s\S]*?)<\/tr>/g)].map((r) =>
    [...r[1].matchAll(/<t[hd][^>]*>([\s\S]*?)<\/t[hd]>/g)].map((c) => c[1].replace(/\|/g, '\\|').replace(/\n/g, ' ')),
  );
  if (!rows.length) return inert(html);
  const align = [...table[1].matchAll(/<th style="text-align:(\w+)/g)].map((m) => (m[1] === 'right' ? '---:' : ':---'));
  const note = /<em>([\s\S]*?)<\/em>/.exec(html.slice(html.indexOf('</table>')))?.[1];
  return [
    ...(title ? [`**${title}**`, ''] : []),
    `| ${rows[0].join(' | ')} |`,
    `| ${rows[0].map((_, i) => align[i] ?? '---').join(' | ')} |`,
    ...rows.slice(1).map((r) => `| ${r.join(' | ')} |`),
    ...(note ? ['', `*${note}*`] : []),
  ].join('\n');
}

/**
 * The notebook as Markdown, each plot an SVG file beside it (`${assets}/cell-N-M.svg`, named by
 * position so a re-export overwrites the same files).
 */
export function exportMarkdown(nb: Notebook, assets = 'plots'): { markdown: string; files: ExportedFile[] } {
  const out: string[] = [];
  const files: ExportedFile[] = [];
  nb.cells.forEach((c, i) => {
    if (c.kind === 'markdown') {
      out.push(c.source.trimEnd());
      return;
    }
    out.push('```yaml\n' + c.source.trimEnd() + '\n```');
    let n = 0;
    for (const p of partsOf(c)) {
      if (p.kind === 'svg') {
        const name = `${assets}/cell-${i + 1}-${++n}.svg`;
        files.push({ name, data: inert(p.svg) });
        out.push(`![plot of cell ${i + 1}](${name})`);
      } else if (p.kind === 'html') out.push(htmlToMarkdown(p.html));
      else out.push('```text\n' + p.text.trimEnd() + '\n```');
    }
  });
  return { markdown: out.join('\n\n') + '\n', files };
}
