import * as path from 'node:path';
import { stringify } from 'yaml';
import { createNotebookContext, jsonSafe, runCell } from '../../core/engine/engine';
import { command, type CommandSpec, type Parsed } from '../args';
import { cliServices } from '../services';
import { printCellText } from '../io';
import { UsageError } from '../usage';

export const auditSpec: CommandSpec = {
  name: 'audit',
  args: 'LOGFILE|GLOB|URL',
  summary: 'audit a vLLM server log (or a /metrics URL) as an `audit:` cell does',
  options: {
    json: { type: 'boolean', help: "print the audit cell's {kind, values, facts, findings} as JSON" },
    gpu: {
      type: 'string',
      value: 'ID',
      help: 'catalog GPU, with --model, for the KV-pool check (inflab catalog gpus)',
    },
    model: { type: 'string', value: 'ID', help: 'catalog model, with --gpu (inflab catalog models)' },
    weights: { type: 'string', value: 'DTYPE', help: 'weights dtype of the setup (default bf16)' },
    'kv-cache': { type: 'string', value: 'DTYPE', help: 'KV-cache dtype of the setup (default bf16)' },
    'gpu-memory-utilization': {
      type: 'string',
      value: 'F',
      help: "the server's --gpu-memory-utilization (default 0.9)",
    },
    'hit-threshold': { type: 'string', value: 'PCT', help: 'prefix-cache hit rate that flags contamination, e.g. 10' },
    'no-plot': { type: 'boolean', help: 'leave out the timeline plot' },
  },
};

export const auditCommand = command(auditSpec, async ({ values, positionals }: Parsed): Promise<number> => {
  if (positionals.length !== 1)
    throw new UsageError(
      'give one log file, glob or /metrics URL: inflab audit logs/vllm.log [--json] [--gpu a100-sxm4-80gb --model qwen3-8b]',
    );
  if (!!values.gpu !== !!values.model)
    throw new UsageError(
      'give both --gpu and --model (e.g. --gpu a100-sxm4-80gb --model qwen3-8b) for the KV-pool check, or neither',
    );
  const num = (k: 'gpu-memory-utilization' | 'hit-threshold') => {
    const s = values[k] as string | undefined;
    if (s === undefined) return undefined;
    const v = Number(s);
    if (!Number.isFinite(v))
      throw new UsageError(`--${k} takes a number, e.g. --${k} ${k === 'hit-threshold' ? '10' : '0.9'}`);
    return v;
  };
  const util = num('gpu-memory-utilization');
  const thr = num('hit-threshold');
  const cells: string[] = [];
  if (values.gpu) {
    const setup: Record<string, unknown> = { setup: 'cli', gpu: values.gpu, model: values.model };
    if (values.weights) setup.weights = values.weights;
    if (values['kv-cache']) setup.kv_cache = values['kv-cache'];
    if (util !== undefined) setup.gpu_memory_utilization = util;
    cells.push(stringify(setup));
  }
  const audit: Record<string, unknown> = { audit: positionals[0] };
  if (thr !== undefined) audit.hit_threshold = thr;
  if (values.json || values['no-plot']) audit.plot = false;
  cells.push(stringify(audit));
  const services = cliServices();
  const ctx = createNotebookContext(path.resolve('.'), services);
  let ok = true;
  const out: unknown[] = [];
  try {
    for (let i = 0; i < cells.length; i++) {
      const r = await runCell(cells[i], i, ctx);
      ok &&= r.ok;
      const isAudit = i === cells.length - 1;
      if (values.json) {
        if (isAudit || !r.ok)
          out.push({
            kind: r.kind,
            values: jsonSafe(r.values),
            facts: jsonSafe(r.facts),
            findings: r.findings,
            ...(r.error ? { error: r.error } : {}),
          });
        continue;
      }
      if (!isAudit && r.ok) continue;
      printCellText(r, '\n');
    }
  } finally {
    await services.close();
  }
  if (values.json) console.log(JSON.stringify(out.length === 1 ? out[0] : out, null, 2));
  return ok ? 0 : 1;
});
