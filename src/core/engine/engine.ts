/**
 * Runs cells: parse the YAML, pick the kind by its first key, validate with the kind's schema,
 * resolve the setup in force, run, check the numbers against physics, and shape the outputs.
 * Knows nothing of VS Code; the CLI and the extension both drive it.
 */
import * as path from 'node:path';
import { z } from 'zod';
import { runChecks } from '../checks';
import { checkFacts, readSavedFacts, savedFacts, type Fact } from '../facts';
import { CellError, dedupeFindings, finding, type Finding } from '../findings';
import { parseCell, type ParsedCell } from '../notebook/cellSource';
import { KINDS } from '../kinds';
import { applySetupOverrides, SETUP_KEYS, setupNeeds } from '../kinds/setup';
import { readNeeds, type FileCache, type FileNeed } from './files';
import { errorOutput, findingsOutput, MIME } from './outputs';
import { suggest, zodFindings } from './schema';
import {
  kindId,
  type AnalyzeContext,
  type CellOutput,
  type CellResult,
  type KindModule,
  type NotebookContext,
  type ProgressUpdate,
  type ReadPurpose,
  type Services,
  type Setup,
} from './types';

export function createNotebookContext(dir: string, services: Services = {}): NotebookContext {
  return {
    dir: path.resolve(dir),
    setups: new Map(),
    results: new Map(),
    named: new Map(),
    services,
    files: new Map(),
    ink: new Map(),
  };
}

/**
 * parseCell, remembered for the last few sources: the files a cell needs are found from the same
 * parse that prepareCell then uses (a parse is never mutated: prepareCell copies what it edits).
 */
const parsedCells = new Map<string, ParsedCell>();
function parseCellOnce(source: string): ParsedCell {
  let p = parsedCells.get(source);
  if (!p) {
    p = parseCell(source);
    parsedCells.set(source, p);
    if (parsedCells.size > 64) parsedCells.delete(parsedCells.keys().next().value!);
  }
  return p;
}

/** The files a cell's source names (a setup's model config, a kind's own inputs), from its raw YAML. */
export function cellNeeds(source: string, dir: string): FileNeed[] {
  const parsed = parseCellOnce(source);
  if (parsed.errors.length || !parsed.data || typeof parsed.data !== 'object') return [];
  const data = parsed.data as Record<string, unknown>;
  const needs = setupNeeds(data, dir);
  try {
    needs.push(...(findKind(parsed.kindKey, parsed.kindValue)?.reads?.(data, dir) ?? []));
  } catch {
    // raw data of any shape: a kind that cannot read it needs nothing
  }
  return needs;
}

/** Read what these cells need through the notebook's services into nb.files (never throws). */
export function loadCellFiles(
  sources: string[],
  nb: NotebookContext,
  purpose: ReadPurpose,
  signal?: AbortSignal,
): Promise<void> {
  return readNeeds(
    sources.flatMap((s) => cellNeeds(s, nb.dir)),
    nb.files,
    nb.services,
    { purpose, notebookDir: nb.dir, signal },
  );
}

const sharedSchema = z.object({
  name: z.union([z.string(), z.number()]).transform(String).optional(),
  setup: z.string().optional(),
});

export interface Prepared {
  parsed: ParsedCell;
  kind?: KindModule;
  cell?: unknown;
  name?: string;
  setup?: Setup;
  findings: Finding[];
}

function findKind(key: string | undefined, value: unknown): KindModule | undefined {
  if (!key) return undefined;
  return (
    KINDS.find((k) => k.key === key && k.variant === String(value)) ?? KINDS.find((k) => k.key === key && !k.variant)
  );
}

function unknownKind(parsed: ParsedCell): Finding {
  const key = parsed.kindKey ?? '';
  const variants = KINDS.filter((k) => k.key === key && k.variant);
  if (variants.length) {
    const s = suggest(
      String(parsed.kindValue),
      variants.map((v) => v.variant!),
    );
    return finding(
      'error',
      'unknown-kind',
      `Unknown ${key} "${parsed.kindValue}"${s ? `: did you mean "${key}: ${s}"?` : ''} Known: ${variants.map((v) => v.variant).join(', ')}`,
      [key],
    );
  }
  const keys = [...new Set(KINDS.map((k) => k.key))];
  const s = suggest(key, keys);
  return finding(
    'error',
    'unknown-kind',
    `"${key}" is not a cell kind${s ? `: did you mean "${s}"?` : ''} The first key names the kind: ${keys.join(', ')}`,
    [key],
  );
}

/** Parse, pick the kind, validate, resolve the setup. No I/O: files come from nb.files (loadCellFiles). */
export function prepareCell(source: string, cellIndex: number, nb: NotebookContext): Prepared {
  const parsed = parseCellOnce(source);
  const out: Prepared = { parsed, findings: [...parsed.errors] };
  if (parsed.errors.length) return out;
  const kind = findKind(parsed.kindKey, parsed.kindValue);
  if (!kind) {
    out.findings.push(unknownKind(parsed));
    return out;
  }
  out.kind = kind;
  const data = { ...(parsed.data as Record<string, unknown>) };
  let setup: Setup | undefined = nb.defaultSetup;
  if (kind.key !== 'setup') {
    const shared = sharedSchema.safeParse({ name: data.name, setup: data.setup });
    if (!shared.success) out.findings.push(...zodFindings(shared.error, sharedSchema));
    out.name = shared.success ? shared.data.name : undefined;
    const setupName = shared.success ? shared.data.setup : undefined;
    delete data.name;
    delete data.setup;
    if (setupName !== undefined) {
      setup = nb.setups.get(setupName);
      if (!setup) {
        const s = suggest(setupName, nb.setups.keys());
        out.findings.push(
          finding(
            'error',
            'unknown-setup',
            `No setup named "${setupName}" above this cell${s ? `: did you mean "${s}"?` : ''}`,
            ['setup'],
            {
              fix: nb.setups.size
                ? `use one of: ${[...nb.setups.keys()].join(', ')}`
                : 'add a setup cell above this one',
            },
          ),
        );
      }
    }
  } else {
    out.name = String(parsed.kindValue ?? 'default');
  }
  // Setup keys: a setup cell defines them (inheriting what it leaves out from the setup above);
  // any other cell may override them for itself alone.
  const overrides: Record<string, unknown> = {};
  for (const k of SETUP_KEYS) {
    if (k in data) {
      overrides[k] = data[k];
      delete data[k];
    }
  }
  if (kind.key === 'setup' || Object.keys(overrides).length) {
    const isSetup = kind.key === 'setup';
    const r = applySetupOverrides(
      setup,
      overrides,
      nb.dir,
      isSetup ? out.name! : (setup?.name ?? 'inline'),
      isSetup,
      nb.files,
    );
    out.findings.push(...r.findings);
    setup = r.setup;
  }
  const res = kind.schema.safeParse(data);
  if (!res.success) {
    out.findings.push(...zodFindings(res.error, kind.schema, [], data));
    return out;
  }
  out.cell = res.data;
  if (kind.key === 'setup' && setup) {
    const { setup: _name, ...knobs } = res.data as Record<string, unknown>;
    setup = { ...setup, server: { ...(setup.server ?? {}), ...knobs } };
  }
  if ((kind.key === 'record' || kind.key === 'compare') && out.name === undefined) out.name = String(parsed.kindValue);
  if (kind.needsSetup && !setup) {
    out.findings.push(
      finding(
        'error',
        'needs-setup',
        `This cell needs a GPU and a model: add a setup cell above it, or write "gpu:" and "model:" in this cell`,
        [parsed.kindKey!],
        {
          fix: 'setup: lab\ngpu: a100-sxm4-80gb\nmodel: qwen3-8b',
        },
      ),
    );
  }
  out.setup = setup;
  return out;
}

/**
 * The files these cells name, read through services for analysis (bounded in size and time, never
 * asking the user, nothing in Restricted Mode): what analyzeCells and setupAt take as `files`.
 */
export async function readAnalysisFiles(sources: string[], dir: string, services: Services): Promise<FileCache> {
  const nb = createNotebookContext(dir, services);
  await loadCellFiles(sources, nb, 'analysis');
  return nb.files;
}

/**
 * Checks that need no measurement, for every cell in order (setups carry forward); what the editor
 * shows as the user types. Returns one list of findings per cell. Does no I/O: a file a cell names
 * (a model's config.json) is looked up in `files` (readAnalysisFiles), and is "not read" without it.
 */
export function analyzeCells(
  sources: string[],
  dir: string,
  services: Services = {},
  files: FileCache = new Map(),
): Finding[][] {
  const nb = { ...createNotebookContext(dir, services), files };
  return sources.map((src, i) => {
    const p = prepareCell(src, i, nb);
    if (!p.kind || p.cell === undefined || p.findings.some((f) => f.severity === 'error'))
      return dedupeFindings(p.findings);
    const ctx: AnalyzeContext = { notebook: nb, setup: p.setup, cellIndex: i };
    const fs: Finding[] = [...p.findings];
    try {
      if (p.kind.key === 'setup') registerSetup(nb, p, i);
      fs.push(...(p.kind.analyze?.(p.cell, ctx) ?? []));
      const facts = p.kind.statedFacts?.(p.cell);
      fs.push(...runChecks({ kind: kindId(p.kind), cell: p.cell, facts, setup: p.setup, notebook: nb, cellIndex: i }));
    } catch (e) {
      fs.push(errorFinding(e));
    }
    return dedupeFindings(fs);
  });
}

function registerSetup(nb: NotebookContext, p: Prepared, cellIndex: number): void {
  if (!p.setup) return;
  const s: Setup = { ...p.setup, cellIndex };
  nb.setups.set(s.name, s);
  nb.defaultSetup = s;
}

function errorFinding(e: unknown): Finding {
  if (e instanceof CellError) return finding('error', e.code, e.message, e.path);
  return finding('error', 'internal', `Internal error: ${(e as Error)?.message ?? e}`);
}

export interface RunCellOptions {
  signal?: AbortSignal;
  onProgress?(update: ProgressUpdate): void;
}

/** Run one cell in a notebook context; never throws (a failure is an error result). */
export async function runCell(
  source: string,
  cellIndex: number,
  nb: NotebookContext,
  opts: RunCellOptions = {},
): Promise<CellResult> {
  const started = performance.now();
  await loadCellFiles([source], nb, 'run', opts.signal);
  const p = prepareCell(source, cellIndex, nb);
  const kind = p.kind ? kindId(p.kind) : (p.parsed.kindKey ?? 'unknown');
  const fail = (
    message: string,
    code: string,
    pathInCell: (string | number)[],
    findings: Finding[],
    outputs: CellOutput[] = [],
  ): CellResult => {
    const fo = findingsOutput(findings);
    const result: CellResult = {
      kind,
      name: p.name,
      values: {},
      facts: [],
      findings,
      outputs: [errorOutput(message), ...outputs, ...(fo ? [fo] : [])],
      ok: false,
      error: { message, code, path: pathInCell },
      durationMs: performance.now() - started,
    };
    nb.results.set(cellIndex, result);
    return result;
  };
  const errors = p.findings.filter((f) => f.severity === 'error');
  if (!p.kind || p.cell === undefined || errors.length) {
    const first = errors[0] ?? finding('error', 'invalid', 'The cell could not be read');
    const msg = errors.map((e) => (e.path.length ? `${e.path.join('.')}: ${e.message}` : e.message)).join('\n');
    return fail(msg, first.code, first.path, p.findings);
  }
  const signal = opts.signal ?? new AbortController().signal;
  if (signal.aborted) return fail('Cancelled before it started', 'cancelled', [], p.findings);
  try {
    const out = await p.kind.run(p.cell, {
      notebook: nb,
      setup: p.setup,
      cellIndex,
      signal,
      progress: (u) => opts.onProgress?.(u),
    });
    const values = out.values ?? {};
    const { facts, findings: factFindings } = checkFacts(jsonSafe(out.facts ?? []));
    const findings = dedupeFindings([
      ...p.findings,
      ...factFindings,
      ...(out.findings ?? []),
      ...(p.kind.analyze?.(p.cell, { notebook: nb, setup: p.setup, cellIndex }) ?? []),
      ...runChecks({ kind, cell: p.cell, values, facts, setup: p.setup, notebook: nb, cellIndex }),
    ]);
    const outputs = [...(out.outputs ?? [])];
    const fo = findingsOutput(findings);
    if (fo) outputs.push(fo);
    attachValues(outputs, values, facts);
    const result: CellResult = {
      kind,
      name: p.name,
      values,
      facts,
      findings,
      outputs,
      ok: true,
      durationMs: performance.now() - started,
    };
    if (p.kind.key === 'setup') registerSetup(nb, p, cellIndex);
    nb.results.set(cellIndex, result);
    if (p.name !== undefined) nb.named.set(p.name, result);
    return result;
  } catch (e) {
    if (signal.aborted) return fail('Cancelled', 'cancelled', [], p.findings);
    const f = errorFinding(e);
    return fail(f.message, f.code, f.path, [...p.findings, f]);
  }
}

/** Values and facts ride along with the first output so a saved notebook keeps them for later cells. */
function attachValues(outputs: CellOutput[], values: Record<string, unknown>, facts: Fact[]): void {
  const items = [
    ...(Object.keys(values).length ? [{ mime: MIME.values, data: jsonSafe(values) }] : []),
    ...(facts.length ? [{ mime: MIME.facts, data: savedFacts(facts) }] : []),
  ];
  if (!items.length) return;
  if (outputs.length) outputs[0].items.push(...items);
  else outputs.push({ items: [...items, { mime: MIME.plain, data: JSON.stringify(jsonSafe(values), null, 2) }] });
}

/** Values as plain JSON: Maps and class instances flattened, non-finite numbers to null. */
export function jsonSafe<T>(v: T): T {
  return JSON.parse(
    JSON.stringify(v, (_k, x) =>
      typeof x === 'number' && !Number.isFinite(x) ? null : x instanceof Map ? Object.fromEntries(x) : x,
    ),
  );
}

/** Facts read, once, from the values of a result saved before facts existed. Never throws. */
function migratedFacts(kind: KindModule, values: Record<string, unknown>, cell: unknown) {
  try {
    return checkFacts(jsonSafe(kind.migrate?.(values, cell) ?? []), 'Fact read from the saved values');
  } catch (e) {
    const message = `The saved values of this cell could not be read as facts (${(e as Error)?.message ?? e}): run the cell again`;
    return { facts: [] as Fact[], findings: [finding('info', 'facts-unreadable', message)] };
  }
}

/**
 * Rebuild a cell's result from its saved outputs (values and facts items), so that cells after it
 * see its numbers without re-running it (a bench that took an hour is not re-run to compare it).
 * Saved facts are validated: one that no longer validates is dropped with a finding on the result.
 * A notebook saved before facts existed has only values: its facts are read from them, once, here.
 * Files come from nb.files: load them first (loadCellFiles) where a setup may name a model config.
 */
export function restoreResult(
  source: string,
  cellIndex: number,
  outputs: CellOutput[],
  nb: NotebookContext,
): CellResult | undefined {
  const p = prepareCell(source, cellIndex, nb);
  if (!p.kind || p.cell === undefined) return undefined;
  if (p.kind.key === 'setup') {
    registerSetup(nb, p, cellIndex);
    return undefined;
  }
  const items = outputs.flatMap((o) => o.items);
  const item = items.find((i) => i.mime === MIME.values);
  const factsItem = items.find((i) => i.mime === MIME.facts);
  if (!item && !factsItem) return undefined;
  const values = (item?.data ?? {}) as Record<string, unknown>;
  const { facts, findings } = factsItem ? readSavedFacts(factsItem.data) : migratedFacts(p.kind, values, p.cell);
  const result: CellResult = {
    kind: kindId(p.kind),
    name: p.name,
    values,
    facts,
    findings,
    outputs,
    ok: true,
  };
  nb.results.set(cellIndex, result);
  if (p.name !== undefined) nb.named.set(p.name, result);
  return result;
}
