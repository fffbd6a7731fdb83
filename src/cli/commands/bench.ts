/**
 * inflab bench — a sweep without a notebook, on the same engine as the bench cell. The API key
 * comes from INFLAB_API_KEY (or OPENAI_API_KEY) and is never printed or written.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { runSweep, type SweepOptions } from '../../core/bench';
import { benchFindings, benchValues, summaryTable, runFacts, type ReportSpec } from '../../core/bench/report';
import { findModel } from '../../core/catalog';
import { jsonSafe } from '../../core/engine/engine';
import { MIME } from '../../core/engine/outputs';
import { formatFinding } from '../../core/findings';
import { cliServices } from '../services';
import { UsageError } from '../usage';

function list(name: string, v: string | undefined): number[] | undefined {
  if (v === undefined) return undefined;
  const xs = v
    .split(/[,\s]+/)
    .filter(Boolean)
    .map(Number);
  if (!xs.length || xs.some((x) => !Number.isFinite(x) || x <= 0))
    throw new UsageError(`--${name} takes a comma-separated list of positive numbers, e.g. --${name} 1,2,4,8`);
  return xs;
}

function int(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const x = Number(v);
  if (!Number.isInteger(x) || x <= 0)
    throw new UsageError(`--${name} takes a positive whole number, e.g. --${name} 200`);
  return x;
}

export async function benchCommand(argv: string[]): Promise<number> {
  const { values: a } = parseArgs({
    args: argv,
    options: {
      endpoint: { type: 'string' },
      input: { type: 'string' },
      output: { type: 'string' },
      concurrency: { type: 'string' },
      rate: { type: 'string' },
      requests: { type: 'string' },
      duration: { type: 'string' },
      seed: { type: 'string' },
      json: { type: 'string' },
      model: { type: 'string' },
      vocab: { type: 'string' },
      api: { type: 'string' },
      timeout: { type: 'string' },
      burstiness: { type: 'string' },
      warmup: { type: 'string' },
      'stop-above': { type: 'string' },
    },
  });
  if (!a.endpoint)
    throw new UsageError(
      'give --endpoint URL (an OpenAI-compatible server, e.g. http://localhost:8000) or --endpoint sim',
    );
  const input = int('input', a.input);
  const output = int('output', a.output);
  if (!input || !output)
    throw new UsageError('give --input N and --output N (tokens per request), e.g. --input 1000 --output 1000');
  const concurrency = list('concurrency', a.concurrency);
  const rate = list('rate', a.rate);
  if (!concurrency && !rate)
    throw new UsageError('give --concurrency LIST (closed loop, e.g. 1,2,4,8) or --rate LIST (open loop, req/s)');
  if (rate && concurrency && concurrency.length > 1)
    throw new UsageError('with --rate, --concurrency is a single cap on requests in flight, e.g. --concurrency 64');
  const model = a.model ? findModel(a.model) : undefined;
  if (a.model && !model)
    throw new UsageError(`unknown model "${a.model}": give a catalog id (e.g. qwen3-8b) or --vocab N`);
  const vocab = int('vocab', a.vocab) ?? model?.vocab ?? 32000;
  let seed: ReportSpec['seed'];
  if (!a.seed || a.seed === 'per-point') seed = { mode: 'per-point', base: (Math.random() * 2 ** 32) >>> 0 };
  else if (/^\d+$/.test(a.seed)) seed = { mode: 'fixed', value: Number(a.seed) };
  else
    throw new UsageError(
      '--seed takes "per-point" (default) or a whole number (one fixed seed for every point: the prefix-cache trap)',
    );
  const api = a.api ?? 'completions';
  if (api !== 'completions' && api !== 'chat') throw new UsageError('--api takes "completions" or "chat"');
  const durationS = a.duration !== undefined ? Number(a.duration) : undefined;
  if (durationS !== undefined && !(durationS > 0))
    throw new UsageError('--duration takes seconds per point, e.g. --duration 60');
  const requests =
    durationS !== undefined
      ? undefined
      : (int('requests', a.requests) ?? Math.max(100, 4 * Math.max(1, ...(concurrency ?? [1]))));
  const stopAbove = a['stop-above'] !== undefined ? Number(String(a['stop-above']).replace('%', '')) / 100 : 0.5;

  const services = cliServices();
  let endpoint = a.endpoint;
  try {
    if (endpoint === 'sim') endpoint = await services.simEndpoint!(undefined);
    const apiKey = a.endpoint === 'sim' ? undefined : await services.getApiKey!(a.endpoint);
    const opts: SweepOptions = {
      endpoint,
      apiKey,
      api,
      vocab,
      input,
      output,
      concurrency: rate ? undefined : concurrency,
      rate,
      maxConcurrency: rate ? concurrency?.[0] : undefined,
      burstiness: a.burstiness ? Number(a.burstiness) : undefined,
      requests,
      durationMs: durationS !== undefined ? durationS * 1000 : undefined,
      warmup: a.warmup ? Number(a.warmup) : 0,
      seed,
      idleTimeoutMs: a.timeout ? Number(a.timeout) * 1000 : 60_000,
      stopAbove,
    };
    const spec: ReportSpec = {
      mode: rate ? 'open' : 'closed',
      input,
      output,
      requests,
      durationS,
      seed,
      percentiles: [90, 99],
      stopAbove,
      burstiness: opts.burstiness,
    };
    const ac = new AbortController();
    const onSig = () => ac.abort();
    process.once('SIGINT', onSig);
    const result = await runSweep(opts, {
      signal: ac.signal,
      onProgress: (p) => process.stderr.write(`\r[${p.point + 1}/${p.points}] ${p.message}          `),
      onPoint: () => process.stderr.write('\n'),
    }).finally(() => process.off('SIGINT', onSig));
    process.stderr.write('\n');
    const title = `${rate ? 'Open-loop rate run' : 'Concurrency sweep'}: ${input} in / ${output} out tokens`;
    for (const o of [summaryTable(result, spec, title), runFacts(result, spec)])
      console.log(String(o.items.find((i) => i.mime === MIME.plain)!.data) + '\n');
    for (const f of benchFindings(result, spec)) console.log(formatFinding(f));
    if (a.json) {
      const values = benchValues(result, spec);
      const file = path.resolve(a.json);
      fs.writeFileSync(file, JSON.stringify(jsonSafe({ inflab: values, vllm: values.vllm }), null, 2) + '\n');
      console.log(`\nwrote ${file}`);
    }
    const completed = result.points.reduce((s, p) => s + p.metrics.completed, 0);
    return completed > 0 ? 0 : 1;
  } finally {
    await services.close();
  }
}
