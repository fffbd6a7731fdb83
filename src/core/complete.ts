/**
 * Completions and key docs for the cell language, all read from the kinds' zod schemas and the
 * catalog, so that a new key or a new GPU documents itself: kinds at a cell's first line, the keys
 * of the cell's kind (type, units, default, allowed values, description), catalog ids after gpu: and
 * model:, dtypes, units after a number, setup names, and the references a compare row may take
 * (`CELL.fact(NAME)` from the facts earlier cells saved, listed by cellOffers; `CELL NAME.path` from
 * their values). The editor adapter only wraps the items.
 */
import { z } from 'zod';
import { DTYPES, GPUS, MODELS } from './catalog';
import { cellOffers, offerDetail, type Fact } from './facts';
import { quantityInfo } from './engine/schema';
import { kindId, type KindModule } from './engine/types';
import { KINDS } from './kinds';
import { parseCell } from './notebook/cellSource';
import { DIM_HELP, fmtNum, GiB, unitsOf } from './units';

export type CompletionKind = 'kind' | 'key' | 'value' | 'unit' | 'reference';

export interface CompletionItem {
  label: string;
  kind: CompletionKind;
  /** One line shown beside the label. */
  detail?: string;
  /** Markdown shown in the details pane. */
  documentation?: string;
  /** Text inserted (default: the label). */
  insertText?: string;
  /** Sort key (default: the label). */
  sortText?: string;
}

/** A key of a kind as its schema defines it. */
export interface KeyDoc {
  key: string;
  /** What to write: "a time, e.g. \"23 ms\"", "one of completions, chat", "a whole number". */
  type: string;
  units?: string[];
  /** Unit a bare number is taken in. */
  bare?: string;
  default?: unknown;
  values?: string[];
  description?: string;
  required: boolean;
  /** Keys of a nested mapping (slo: {ttft_p99, …}). */
  children?: KeyDoc[];
  /** Takes one value or a list of them ('many'), or only a list ('only'). */
  list?: 'many' | 'only';
}

/** The keys every cell may carry besides its kind's own (setup keys override the setup in force). */
const SHARED_KEYS: KeyDoc[] = [
  {
    key: 'name',
    type: 'text',
    required: false,
    description: 'Name later cells use to refer to this one (`NAME.value`).',
  },
  {
    key: 'setup',
    type: 'a setup name',
    required: false,
    description: 'Which setup cell above this cell uses (default: the latest).',
  },
  {
    key: 'gpu',
    type: 'a catalog id, or {bandwidth, bf16, memory}',
    required: false,
    description: `The GPU: ${GPUS.map((g) => g.id).join(', ')}, or one defined inline, e.g. {bandwidth: 2039 GB/s, bf16: 312 TFLOPS, memory: 80 GiB}.`,
  },
  {
    key: 'model',
    type: 'a catalog id, or {config: PATH}',
    required: false,
    description: `The model: ${MODELS.map((m) => m.id).join(', ')}, or a Hugging Face config.json: {config: ./config.json}.`,
  },
  {
    key: 'weights',
    type: `one of ${DTYPES.join(', ')}`,
    values: [...DTYPES],
    default: 'bf16',
    required: false,
    description: 'Data type of the weights.',
  },
  {
    key: 'kv_cache',
    type: `one of ${DTYPES.join(', ')}`,
    values: [...DTYPES],
    default: 'bf16',
    required: false,
    description: 'Data type of the KV cache.',
  },
  {
    key: 'endpoint',
    type: '"sim" or an http(s) URL',
    values: ['sim'],
    required: false,
    description:
      'Where bench cells send requests: the built-in simulated vLLM (`sim`) or a server, e.g. http://localhost:8000.',
  },
  {
    key: 'price',
    type: 'a rental price, e.g. "1.20 $/h" (per GPU), "9.60 $/h per node", or {node: 9.60 $/h}',
    units: unitsOf('price_rate'),
    required: false,
    description:
      'What renting the setup costs: every throughput then also reads as $ per million tokens ($/h of every GPU / (tok/s × 3,600) × 10^6).',
  },
];

const SETUP_ONLY = new Set(['name', 'setup']);

type AnyDef = {
  type: string;
  innerType?: z.ZodTypeAny;
  in?: z.ZodTypeAny;
  options?: z.ZodTypeAny[];
  entries?: Record<string, string>;
  values?: unknown[];
  element?: z.ZodTypeAny;
  shape?: Record<string, z.ZodTypeAny>;
  defaultValue?: unknown;
  checks?: { _zod?: { def?: { check?: string; format?: string } } }[];
};
const defOf = (s: unknown): AnyDef | undefined => (s as { _zod?: { def?: AnyDef } })?._zod?.def;
const descOf = (s: unknown): string | undefined =>
  (s as { description?: string })?.description ?? z.globalRegistry.get(s as z.ZodTypeAny)?.description;

/** Describe one value schema: what to write, its units, default and allowed values. */
function describe(key: string, s0: z.ZodTypeAny): KeyDoc {
  const doc: KeyDoc = { key, type: 'a value', required: true };
  let s: z.ZodTypeAny | undefined = s0;
  for (let i = 0; i < 12 && s; i++) {
    doc.description ??= descOf(s);
    const q = quantityInfo(s);
    if (q) {
      const h = DIM_HELP[q.dims[0]];
      doc.type = `${q.dims.map((d) => DIM_HELP[d].noun).join(' or ')}, e.g. "${h.example}"`;
      doc.units = q.dims.flatMap((d) => unitsOf(d));
      doc.bare = q.bare;
      return doc;
    }
    const d = defOf(s);
    if (!d) break;
    if (d.type === 'optional') {
      doc.required = false;
      s = d.innerType;
    } else if (d.type === 'default') {
      doc.required = false;
      const v = d.defaultValue;
      doc.default = typeof v === 'function' ? (v as () => unknown)() : v;
      s = d.innerType;
    } else if (d.type === 'pipe') s = d.in;
    else if (d.type === 'nullable' || d.type === 'readonly') s = d.innerType;
    else if (d.type === 'union' && d.options) {
      // A list-or-one (oneOrMany) reads as its item; literals and enums pool their values.
      const parts = d.options.map((o) => describe(key, o));
      const arr = parts.find((p) => p.type.startsWith('a list of'));
      const values = parts.flatMap((p) => p.values ?? []);
      const units = parts.flatMap((p) => p.units ?? []);
      if (units.length) doc.units = [...new Set(units)];
      if (values.length) doc.values = [...new Set(values)];
      doc.bare ??= parts.find((p) => p.bare)?.bare;
      const one = parts.find((p) => !p.type.startsWith('a list of'));
      doc.type = arr && one ? `${one.type}, or a list of them` : [...new Set(parts.map((p) => p.type))].join(' or ');
      if (arr && one) doc.list = 'many';
      doc.children = parts.find((p) => p.children)?.children;
      return doc;
    } else if (d.type === 'enum' && d.entries) {
      doc.values = Object.values(d.entries).map(String);
      doc.type = `one of ${doc.values.join(', ')}`;
      return doc;
    } else if (d.type === 'literal' && d.values) {
      doc.values = d.values.map(String);
      doc.type = doc.values.map((v) => `"${v}"`).join(' or ');
      return doc;
    } else if (d.type === 'number') {
      const int = d.checks?.some((c) => c._zod?.def?.format === 'safeint' || c._zod?.def?.check === 'int');
      doc.type = int ? 'a whole number' : 'a number';
      return doc;
    } else if (d.type === 'boolean') {
      doc.type = 'true or false';
      doc.values = ['true', 'false'];
      return doc;
    } else if (d.type === 'string') {
      doc.type = 'text';
      return doc;
    } else if (d.type === 'array' && d.element) {
      const e = describe(key, d.element);
      doc.type = `a list of ${e.type.replace(/^an? /, '')}`;
      doc.list = 'only';
      doc.units = e.units;
      doc.values = e.values;
      doc.bare = e.bare;
      doc.children = e.children;
      return doc;
    } else if (d.type === 'object' && d.shape) {
      doc.type = 'a mapping';
      doc.children = Object.entries(d.shape).map(([k, v]) => describe(k, v));
      return doc;
    } else if (d.type === 'record') {
      doc.type = 'a mapping';
      return doc;
    } else break;
  }
  return doc;
}

function shapeOf(s: z.ZodTypeAny): Record<string, z.ZodTypeAny> | undefined {
  let cur: z.ZodTypeAny | undefined = s;
  for (let i = 0; i < 10 && cur; i++) {
    const d = defOf(cur);
    if (!d) return undefined;
    if (d.type === 'object') return d.shape;
    cur = d.innerType ?? d.in;
  }
  return undefined;
}

const docsCache = new WeakMap<KindModule, KeyDoc[]>();

/** Every key a cell of this kind may carry, its own first, then the shared ones. */
export function keysOfKind(kind: KindModule): KeyDoc[] {
  const hit = docsCache.get(kind);
  if (hit) return hit;
  const own = Object.entries(shapeOf(kind.schema) ?? {})
    .filter(([k]) => k !== kind.key)
    .map(([k, v]) => describe(k, v));
  const names = new Set(own.map((d) => d.key));
  const shared = SHARED_KEYS.filter((d) => !names.has(d.key) && !(kind.key === 'setup' && SETUP_ONLY.has(d.key)));
  const docs = [...own, ...shared];
  docsCache.set(kind, docs);
  return docs;
}

/** The kind a cell's first line names (`predict: floors`), if any. */
export function kindOfSource(source: string): KindModule | undefined {
  const first = source.split('\n').find((l) => l.trim() && !l.trim().startsWith('#'));
  const m = first && /^([\w-]+)\s*:\s*(.*?)\s*(#.*)?$/.exec(first);
  if (!m) return undefined;
  return KINDS.find((k) => k.key === m[1] && k.variant === m[2]) ?? KINDS.find((k) => k.key === m[1] && !k.variant);
}

/** Markdown for a key: what to write, units, default, values, description. */
export function keyDocMarkdown(d: KeyDoc, kind?: KindModule): string {
  const lines = [`**${d.key}**${kind ? ` — ${kindId(kind)}` : ''}${d.required ? ' (required)' : ''}`];
  if (d.description) lines.push('', d.description);
  lines.push('', `Write ${d.type}.`);
  if (d.units?.length)
    lines.push(`Units: ${[...new Set(d.units)].join(', ')}${d.bare ? ` (a bare number is taken in ${d.bare})` : ''}.`);
  if (d.default !== undefined) lines.push(`Default: \`${JSON.stringify(d.default)}\`.`);
  if (d.children?.length) lines.push(`Keys: ${d.children.map((c) => c.key).join(', ')}.`);
  return lines.join('\n');
}

/** What a cell above offers to later ones: its name, and the values and facts it saved when it last ran. */
export interface CellAbove {
  source: string;
  values?: Record<string, unknown>;
  /** Its facts as saved (the host reads them with readSavedFacts); what cellOffers lists. */
  facts?: Fact[];
}

function nameOf(source: string): { name?: string; setupName?: string } {
  const p = parseCell(source);
  if (p.errors.length || !p.data || typeof p.data !== 'object') return {};
  const data = p.data as Record<string, unknown>;
  if (p.kindKey === 'setup') return { setupName: String(p.kindValue ?? 'default') };
  if (data.name !== undefined) return { name: String(data.name) };
  if (p.kindKey === 'record' || p.kindKey === 'compare') return { name: String(p.kindValue) };
  return {};
}

/** Reference paths into a values object: `.key`, `[0]` and `[*]` for lists (the first element's keys). */
export function valuePaths(values: unknown, limit = 200): string[] {
  const out: string[] = [];
  const walk = (v: unknown, at: string, depth: number) => {
    if (out.length >= limit || depth > 6) return;
    if (Array.isArray(v)) {
      if (!v.length) return;
      out.push(`${at}[0]`, `${at}[*]`);
      walk(v[0], `${at}[0]`, depth + 1);
      return;
    }
    if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        out.push(`${at}.${k}`);
        walk(x, `${at}.${k}`, depth + 1);
      }
    }
  };
  walk(values, '', 0);
  return out.map((p) => p.replace(/^\./, ''));
}

const REFERENCE_KEYS = new Set(['predicted', 'measured']);

function gpuItems(): CompletionItem[] {
  return GPUS.map((g) => ({
    label: g.id,
    kind: 'value',
    detail: `${g.name}: ${fmtNum(g.bandwidth / 1e9, 0)} GB/s, ${fmtNum(g.memory / GiB, 0)} GiB${g.peak.bf16 ? `, ${fmtNum(g.peak.bf16 / 1e12, 0)} TFLOPS bf16` : ''}`,
    documentation: `Source: ${g.source}`,
  }));
}

function modelItems(): CompletionItem[] {
  return MODELS.map((m) => ({
    label: m.id,
    kind: 'value',
    detail: `${m.name}: ${m.layers} layers, hidden ${m.hidden}`,
  }));
}

function keyItems(docs: KeyDoc[], present: Set<string>, kind?: KindModule): CompletionItem[] {
  return docs
    .filter((d) => !present.has(d.key))
    .map((d, i) => ({
      label: d.key,
      kind: 'key' as const,
      detail: `${d.type}${d.default !== undefined ? ` (default ${JSON.stringify(d.default)})` : ''}`,
      documentation: keyDocMarkdown(d, kind),
      insertText: `${d.key}: `,
      sortText: `${d.required ? 0 : 1}${String(i).padStart(3, '0')}`,
    }));
}

/** The key a line's text up to the cursor is the value of (the last `key:` on it, in or out of {…}). */
function keyBefore(text: string): { key: string; value: string } | undefined {
  const m = /(?:^|[{,]|^\s*-)\s*([\w-]+)\s*:\s*([^,{}]*)$/.exec(text) ?? /^\s*(?:-\s+)?([\w-]+)\s*:\s*(.*)$/.exec(text);
  return m ? { key: m[1], value: m[2] } : undefined;
}

/** The nearest mapping key above `line` with less indentation than `indent` (a nested key's parent). */
function parentKey(lines: string[], line: number, indent: number): string | undefined {
  for (let i = line - 1; i >= 0; i--) {
    const l = lines[i];
    if (!l.trim() || l.trim().startsWith('#')) continue;
    const ind = l.length - l.trimStart().length;
    if (ind < indent) {
      const m = /^\s*(?:-\s+)?([\w-]+)\s*:/.exec(l);
      return m?.[1];
    }
  }
  return undefined;
}

/** Completions at a position of a cell (0-based line and character), given the cells above it. */
export function completionsAt(
  source: string,
  line: number,
  character: number,
  above: CellAbove[] = [],
): CompletionItem[] {
  const lines = source.split('\n');
  const text = (lines[line] ?? '').slice(0, character);
  const firstContent = lines.findIndex((l) => l.trim() && !l.trim().startsWith('#'));
  const isFirst = firstContent === -1 || firstContent >= line;
  if (/#/.test(text.replace(/"[^"]*"|'[^']*'/g, ''))) return [];

  // The kind line: `predict: ` offers the variants; at the start, every kind.
  if (isFirst) {
    const kv = /^([\w-]+)\s*:\s*(\S*)$/.exec(text);
    if (kv) {
      return KINDS.filter((k) => k.key === kv[1] && k.variant).map((k) => ({
        label: k.variant!,
        kind: 'kind',
        detail: k.summary,
      }));
    }
    if (/^[\w-]*$/.test(text))
      return KINDS.map((k) => ({
        label: kindId(k),
        kind: 'kind',
        detail: k.summary,
        insertText: k.variant ? `${kindId(k)}\n` : `${k.key}: `,
      }));
    return [];
  }

  const kind = kindOfSource(source);
  const docs = kind ? keysOfKind(kind) : SHARED_KEYS;
  const indent = text.length - text.trimStart().length;
  const kb = keyBefore(text);
  // Key position: nothing but (indented) word characters before the cursor on this line.
  if (!kb) {
    if (!/^\s*(?:-\s+)?[\w-]*$/.test(text)) return [];
    const present = new Set(
      lines
        .map((l) => /^(\s*)([\w-]+)\s*:/.exec(l))
        .filter((m) => m && m[1].length === indent)
        .map((m) => m![2]),
    );
    if (indent === 0) return keyItems(docs, present, kind);
    const parent = parentKey(lines, line, indent);
    const pd = docs.find((d) => d.key === parent);
    return pd?.children ? keyItems(pd.children, present, kind) : [];
  }

  // Value position.
  const { key, value } = kb;
  const inFlow = text.lastIndexOf('{') > text.lastIndexOf('}');
  let doc = docs.find((d) => d.key === key);
  if (!doc && (indent > 0 || inFlow)) {
    const parent = inFlow ? keyBefore(text.slice(0, text.lastIndexOf('{')))?.key : parentKey(lines, line, indent);
    doc = docs.find((d) => d.key === parent)?.children?.find((c) => c.key === key);
  }
  if (key === 'gpu' && !inFlow) return gpuItems();
  if (key === 'model' && !inFlow) return modelItems();
  if (key === 'setup' && kind?.key !== 'setup')
    return above
      .map((c) => nameOf(c.source).setupName)
      .filter((n): n is string => !!n)
      .map((n) => ({ label: n, kind: 'value' as const, detail: 'setup above' }));
  if (REFERENCE_KEYS.has(key)) {
    const items: CompletionItem[] = [];
    for (const c of above) {
      const n = nameOf(c.source).name;
      if (!n) continue;
      // Its facts first (the unit is the fact's), then the older value paths.
      const offers = cellOffers(n, c.facts ?? []);
      offers.forEach((o, j) =>
        items.push({
          label: o.ref,
          kind: 'reference',
          detail: offerDetail(o) || `fact of "${n}"`,
          documentation:
            o.points > 1
              ? `A curve: pick one point with \`${o.ref.replace(/\)$/, ` @ ${o.axis}=${o.xs[0]})`)}\`.`
              : undefined,
          sortText: `0${String(j).padStart(4, '0')}`,
        }),
      );
      const paths = c.values ? valuePaths(c.values) : [];
      if (!paths.length && !offers.length)
        items.push({ label: `${n}.`, kind: 'reference', detail: 'a named cell above (run it to list its values)' });
      for (const p of paths)
        items.push({
          label: `${n}.${p}`,
          kind: 'reference',
          detail: `value of "${n}"`,
          sortText: `1${p}`,
          // Inside {…} a reference holding [ ] must be quoted.
          insertText: inFlow && /[[\]]/.test(p) ? `"${n}.${p}"` : undefined,
        });
    }
    return items;
  }
  if (!doc) return [];
  // After a number: the units of the key's dimension.
  if (doc.units?.length && /^\[?\s*(?:[\d.,_]+\s*,\s*)*[\d.,_]+\s+\S*$/.test(value))
    return [...new Set(doc.units)].map((u) => ({ label: u, kind: 'unit' as const, detail: doc!.type }));
  if (doc.values?.length)
    return doc.values.map((v) => ({
      label: v,
      kind: 'value' as const,
      detail: doc!.default !== undefined && String(doc!.default) === v ? 'default' : doc!.type,
    }));
  if (doc.units?.length && value.trim() === '')
    return [
      {
        label: exampleOf(doc),
        kind: 'value',
        detail: doc.type,
        documentation: keyDocMarkdown(doc, kind),
      },
    ];
  return [];
}

function exampleOf(d: KeyDoc): string {
  const m = /e\.g\. "([^"]+)"/.exec(d.type);
  return m ? m[1] : '';
}

/** Markdown for the key under a position, if the position is on a key. */
export function keyHoverAt(source: string, line: number, character: number): string | undefined {
  const l = source.split('\n')[line] ?? '';
  const re = /([\w-]+)\s*:/g;
  for (let m = re.exec(l); m; m = re.exec(l)) {
    if (character < m.index || character > m.index + m[1].length) continue;
    const kind = kindOfSource(source);
    const isKindLine =
      source.split('\n').findIndex((x) => x.trim() && !x.trim().startsWith('#')) === line && m.index === 0;
    if (isKindLine && kind) return `**${kindId(kind)}**\n\n${kind.summary}`;
    const docs = kind ? keysOfKind(kind) : SHARED_KEYS;
    const indent = l.length - l.trimStart().length;
    let d = docs.find((x) => x.key === m[1]);
    if (indent > 0 || l.slice(0, m.index).includes('{')) {
      const lines = source.split('\n');
      const parent = l.slice(0, m.index).includes('{')
        ? keyBefore(l.slice(0, l.lastIndexOf('{', m.index)))?.key
        : parentKey(lines, line, indent);
      d = docs.find((x) => x.key === parent)?.children?.find((c) => c.key === m[1]) ?? d;
    }
    return d ? keyDocMarkdown(d, kind) : undefined;
  }
  return undefined;
}
