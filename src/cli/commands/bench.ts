/**
 * inflab bench — a `bench: sweep` cell built from the flags and run by the engine, so the flags are
 * the cell's keys (--top-p is top_p), checked by the cell's schema with its messages, and the
 * report and findings are the cell's. The API key comes from INFLAB_API_KEY (or OPENAI_API_KEY) and
 * is never printed or written.
 */
import * as path from 'node:path';
import { parse, stringify } from 'yaml';
import { keysOfKind, type KeyDoc } from '../../core/complete';
import { createNotebookContext, jsonSafe, prepareCell, runCell } from '../../core/engine/engine';
import type { CellResult } from '../../core/engine/types';
import type { Finding } from '../../core/findings';
import { MIME } from '../../core/engine/outputs';
import type { ColumnarRecords } from '../../core/bench/records';
import { saveResultArrays } from '../../core/bench/saveResult';
import { benchSweepKind } from '../../core/kinds/bench';
import { writeFileAtomic } from '../../core/notebook/atomicWrite';
import { command, type CommandSpec, type OptSpec, type Parsed } from '../args';
import { onInterrupt } from '../interrupt';
import { cannotWrite, printCellText, progressPrinter } from '../io';
import { credentialRefusal } from '../../core/urls';
import { cliServices } from '../services';
import { UsageError } from '../usage';

/** Setup keys the bench takes as flags (the same keys a setup cell has). */
const SETUP_FLAGS: Record<string, OptSpec> = {
  endpoint: {
    type: 'string',
    value: 'URL',
    help: 'the OpenAI-compatible server, e.g. http://localhost:8000, or "sim"',
  },
  gpu: {
    type: 'string',
    value: 'ID',
    help: 'the GPU serving it (inflab catalog gpus), or {bandwidth: …, bf16: …, memory: …};\nsim default a100-sxm4-80gb',
  },
  model: {
    type: 'string',
    value: 'ID',
    help: 'the served model (inflab catalog models) or a config.json; its vocabulary makes the prompts;\nsim default qwen3-8b',
  },
  weights: { type: 'string', value: 'DTYPE', help: 'weights dtype (default bf16)' },
  'kv-cache': { type: 'string', value: 'DTYPE', help: 'KV-cache dtype (default bf16)' },
};

/** Flags that are not a key of their own: what each becomes in the cell. */
const ALIASES: Record<string, { help: string; value: string; key: (v: unknown) => Record<string, unknown> }> = {
  'stop-above': {
    value: 'PCT',
    help: 'stop the sweep after a point with more failures than this, e.g. 50% (on_failure: {stop_above: …})',
    key: (v) => ({ on_failure: { stop_above: v } }),
  },
};

const flagOf = (key: string) => key.replace(/_/g, '-');
const keyOf = (flag: string) => flag.replace(/-/g, '_');

function cellKeys(): KeyDoc[] {
  // The kind's own keys (keysOfKind lists the shared setup keys after them: those are the setup flags).
  const setupish = new Set(['name', 'setup', 'gpu', 'model', 'weights', 'kv_cache', 'endpoint']);
  return keysOfKind(benchSweepKind).filter((k) => !setupish.has(k.key));
}

function keyHelp(k: KeyDoc): string {
  const parts = [
    k.children?.length && !k.values?.length
      ? `a mapping of ${k.children.map((s) => s.key).join(', ')}, written "key: value, …"`
      : k.type.replace(/, or a list of them$/, ', or a comma-separated list of them'),
  ];
  if (k.bare) parts.push(`a bare number is ${k.bare}`);
  if (k.default !== undefined) parts.push(`default ${JSON.stringify(k.default)}`);
  return [k.description, parts.join('; ')].filter(Boolean).join('\n');
}

function makeBenchSpec(): CommandSpec {
  const options: Record<string, OptSpec> = { ...SETUP_FLAGS };
  for (const k of cellKeys())
    options[flagOf(k.key)] = {
      type: 'string',
      value: k.list ? 'LIST' : k.children?.length && !k.values?.length ? 'MAP' : 'VALUE',
      help: keyHelp(k),
    };
  for (const [f, a] of Object.entries(ALIASES)) options[f] = { type: 'string', value: a.value, help: a.help };
  options.json = {
    type: 'string',
    value: 'FILE',
    help: "write the run's values and vLLM --save-result-shaped results to FILE (its folder must exist)",
  };
  return {
    name: 'bench',
    summary: 'a bench: sweep cell from flags: every key of the cell is a flag (top_p is --top-p)',
    options,
    notes: [
      'Values are written as in a cell: "1000" or "1k tokens", "500 ms", "4 req/s", "90%"; a list as 1,2,4 or [1, 2, 4];',
      'a mapping as "ttft_p99: 500 ms, tpot_p99: 50 ms". A key left out takes the cell\'s default.',
      'Example: inflab bench --endpoint sim --input 1000 --output 200 --concurrency 1,8,64 --requests 100 --slo "ttft_p99: 2 s"',
    ].join('\n'),
  };
}

export const benchSpec = makeBenchSpec();

/** A flag's text as the YAML value a cell would hold. */
function yamlValue(text: string, doc?: KeyDoc): unknown {
  const t = text.trim();
  const scalar = (s: string) => {
    try {
      return parse(s) ?? s;
    } catch {
      return s;
    }
  };
  if (doc?.list && !t.startsWith('[') && (t.includes(',') || doc.list === 'only'))
    return t
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean)
      .map(scalar);
  // "ttft_p99: 500 ms, tpot_p99: 50 ms" (YAML wants the space after each colon: add it)
  if (doc?.children?.length && !t.startsWith('{') && t.includes(':')) return scalar(`{${t.replace(/:(?=\S)/g, ': ')}}`);
  return scalar(t);
}

interface Built {
  setup: string;
  bench: string;
  /** Cell key → the flag it came from (for messages). */
  flags: Map<string, string>;
}

function buildCells(values: Parsed['values']): Built {
  const docs = new Map(cellKeys().map((k) => [k.key, k]));
  const flags = new Map<string, string>();
  const endpoint = values.endpoint as string | undefined;
  if (!endpoint)
    throw new UsageError(
      'give --endpoint URL (an OpenAI-compatible server, e.g. http://localhost:8000) or --endpoint sim',
    );
  // Credentials in the URL are refused before the URL is quoted anywhere (redacted even then).
  const refused = credentialRefusal(
    endpoint,
    '--endpoint',
    'give its key in INFLAB_API_KEY (the --endpoint key) or INFLAB_API_KEYS="http://host:8000=KEY"',
  );
  if (refused) throw new UsageError(refused);
  const setup: Record<string, unknown> = { setup: 'cli' };
  for (const f of Object.keys(SETUP_FLAGS)) {
    const v = values[f];
    if (typeof v !== 'string') continue;
    const key = keyOf(f);
    flags.set(key, `--${f}`);
    setup[key] = f === 'endpoint' ? v : f === 'model' && /\.json$/i.test(v) ? { config: v } : yamlValue(v);
  }
  if (endpoint === 'sim') {
    setup.gpu ??= 'a100-sxm4-80gb';
    setup.model ??= 'qwen3-8b';
  } else if (setup.gpu === undefined || setup.model === undefined)
    throw new UsageError(
      `give ${setup.gpu === undefined ? '--gpu ID' : ''}${setup.gpu === undefined && setup.model === undefined ? ' and ' : ''}${setup.model === undefined ? '--model ID' : ''} for ${endpoint}: the model's vocabulary makes the prompts and the GPU's physics checks the numbers (inflab catalog lists the ids; --model also takes a config.json)`,
    );
  const bench: Record<string, unknown> = { bench: 'sweep' };
  for (const [f, v] of Object.entries(values)) {
    if (typeof v !== 'string' || f in SETUP_FLAGS || f === 'json') continue;
    const alias = ALIASES[f];
    if (alias) {
      const entry = alias.key(yamlValue(v));
      for (const k of Object.keys(entry)) flags.set(k, `--${f}`);
      Object.assign(bench, entry);
      continue;
    }
    const key = keyOf(f);
    flags.set(key, `--${f}`);
    bench[key] = yamlValue(v, docs.get(key));
  }
  return { setup: stringify(setup), bench: stringify(bench), flags };
}

/** A finding of the built cells as a flag message: "--timeout: 0 s must be greater than zero". */
function flagMessage(f: Finding, flags: Map<string, string>): string {
  const key = f.path.length ? String(f.path[0]) : undefined;
  const flag = key !== undefined ? flags.get(key) : undefined;
  const fix = f.fix ? ` (${f.fix})` : '';
  if (f.code === 'unknown-key' || !flag) return `${f.message}${fix}`;
  // The flag names the place: drop the key the cell's message starts with ("rate: must be …").
  let m = f.message;
  for (const k of f.path) if (m.startsWith(`${k}: `)) m = m.slice(String(k).length + 2);
  return `${flag}: ${m}${fix}`;
}

export const benchCommand = command(benchSpec, async ({ values, positionals }: Parsed): Promise<number> => {
  if (positionals.length)
    throw new UsageError(`inflab bench takes only flags (got "${positionals[0]}"), e.g. --concurrency 1,2,4`);
  const built = buildCells(values);
  const json = values.json as string | undefined;
  const unwritable = json ? cannotWrite(json) : undefined;
  if (unwritable) throw new UsageError(`--json ${json}: ${unwritable}`);
  // INFLAB_API_KEY is the key of --endpoint (and of no other host).
  const services = cliServices({ endpoint: values.endpoint as string | undefined });
  const ctx = createNotebookContext(path.resolve('.'), services);
  const ac = new AbortController();
  const offSig = onInterrupt(() => {
    ac.abort();
    process.stderr.write('\ninterrupted: stopping; the finished points are reported (partial)\n');
  });
  let r: CellResult;
  try {
    const s = await runCell(built.setup, 0, ctx);
    const bad = (fs: Finding[]) => fs.filter((f) => f.severity === 'error');
    if (!s.ok)
      throw new UsageError(
        bad(s.findings)
          .map((f) => flagMessage(f, built.flags))
          .join('\n'),
      );
    const p = prepareCell(built.bench, 1, ctx);
    if (bad(p.findings).length)
      throw new UsageError(
        bad(p.findings)
          .map((f) => flagMessage(f, built.flags))
          .join('\n'),
      );
    const progress = progressPrinter();
    r = await runCell(built.bench, 1, ctx, { signal: ac.signal, onProgress: progress.update });
    progress.end();
  } finally {
    offSig();
    await services.close();
  }
  printCellText(r, '\n', (f) => (f.path.length ? (built.flags.get(String(f.path[0])) ?? '') : ''));
  if (json && r.ok) {
    const v = jsonSafe(r.values);
    const file = path.resolve(json);
    try {
      writeFileAtomic(
        file,
        JSON.stringify({ inflab: v, facts: jsonSafe(r.facts), vllm: withRequestArrays(r, v.vllm) }, null, 2) + '\n',
      );
    } catch (e) {
      console.error(`inflab bench: ${(e as Error).message}`);
      return 1;
    }
    console.log(`\nwrote ${file}`);
  }
  if (ac.signal.aborted) return 130;
  const points = (r.values.points ?? []) as { completed?: number }[];
  const completed = points.reduce((s, p) => s + (p.completed ?? 0), 0);
  return r.ok && completed > 0 ? 0 : 1;
});

/**
 * vLLM `--save-result` points with their per-request arrays (ttfts, itls, input_lens, output_lens,
 * errors and InfLab's own), from the records the cell kept, so anyone's tools can re-analyse a run.
 */
function withRequestArrays(r: CellResult, vllm: unknown): unknown {
  if (!Array.isArray(vllm)) return vllm;
  const rec = r.outputs.flatMap((o) => o.items).find((i) => i.mime === MIME.records)?.data as
    { points?: { index: number; rate?: number; records?: ColumnarRecords }[] } | undefined;
  return vllm.map((point, i) => {
    const p = rec?.points?.find((q) => q.index === i);
    const arrays = p?.records
      ? saveResultArrays({ records: p.records, loop: p.rate !== undefined ? 'open' : 'closed' })
      : undefined;
    return arrays && point && typeof point === 'object' ? { ...point, ...arrays } : point;
  });
}
