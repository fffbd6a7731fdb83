import { findGpu, findModel, GPUS, MODELS } from '../../core/catalog';
import { defaultSimSetup, startSimServer } from '../../core/sim/server';
import { command, type CommandSpec, type Parsed } from '../args';
import { UsageError } from '../usage';

export const simSpec: CommandSpec = {
  name: 'sim',
  summary: 'the simulated vLLM endpoint, an OpenAI-compatible server on 127.0.0.1 (runs until Ctrl-C)',
  options: {
    gpu: { type: 'string', value: 'ID', help: 'catalog GPU (default a100-sxm4-80gb)' },
    model: { type: 'string', value: 'ID', help: 'catalog model (default qwen3-8b)' },
    port: { type: 'string', value: 'N', help: 'port on 127.0.0.1 (default: a free one)' },
    log: { type: 'string', value: 'FILE', help: 'vLLM-format log to FILE ("-" for stdout)' },
    speed: { type: 'string', value: 'X', help: 'simulated seconds per wall second (default 1)' },
    'no-prefix-caching': { type: 'boolean', help: 'serve with the prefix cache off' },
    'max-num-seqs': {
      type: 'string',
      value: 'N',
      help: "default: vLLM's for the GPU (256 on an A100, 1024 on an H100)",
    },
    'max-num-batched-tokens': {
      type: 'string',
      value: 'N',
      help: "default: vLLM's for the GPU (2048 on an A100, 8192 on an H100)",
    },
    'max-model-len': { type: 'string', value: 'N', help: "default: the model's max_position_embeddings" },
    'gpu-memory-utilization': { type: 'string', value: 'F', help: 'default 0.9' },
    'prefill-mfu': { type: 'string', value: 'F', help: 'default 0.6' },
    'step-overhead-ms': { type: 'string', value: 'MS', help: 'default 3.27' },
    'num-gpu-blocks': {
      type: 'string',
      value: 'N',
      help: 'KV pool size in 16-token blocks (default: the kv-pool prediction)',
    },
    'stats-interval': { type: 'string', value: 'S', help: 'seconds between stats log lines (default 10)' },
    'served-model-name': { type: 'string', value: 'NAME', help: "default: the model's catalog id" },
  },
};

function num(name: string, v: string | undefined, int = false): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0 || (int && !Number.isInteger(n)))
    throw new UsageError(
      `--${name} takes a positive ${int ? 'integer' : 'number'}, e.g. --${name} ${int ? 256 : 10}; got "${v}"`,
    );
  return n;
}

export const simCommand = command(simSpec, async (p: Parsed): Promise<number> => {
  const values = p.values as Record<string, string | undefined>;
  const { positionals } = p;
  if (positionals.length)
    throw new UsageError(`inflab sim takes no positional arguments (got "${positionals[0]}"); see inflab sim --help`);
  const setup = defaultSimSetup();
  if (values.gpu) {
    const g = findGpu(values.gpu);
    if (!g) throw new UsageError(`unknown GPU "${values.gpu}": use one of ${GPUS.map((x) => x.id).join(', ')}`);
    setup.gpu = g;
  }
  if (values.model) {
    const m = findModel(values.model);
    if (!m) throw new UsageError(`unknown model "${values.model}": use one of ${MODELS.map((x) => x.id).join(', ')}`);
    setup.model = m;
  }
  let port = 0;
  if (values.port !== undefined) {
    port = Number(values.port);
    if (!Number.isInteger(port) || port < 0 || port > 65535)
      throw new UsageError(`--port takes 0..65535, e.g. --port 8000; got "${values.port}"`);
  }
  const util = num('gpu-memory-utilization', values['gpu-memory-utilization']);
  if (util !== undefined && util > 1)
    throw new UsageError(`--gpu-memory-utilization takes a fraction in (0, 1], e.g. 0.9; got ${util}`);
  const mfu = num('prefill-mfu', values['prefill-mfu']);
  if (mfu !== undefined && mfu > 1)
    throw new UsageError(`--prefill-mfu takes a fraction in (0, 1], e.g. 0.6; got ${mfu}`);
  const overheadMs = values['step-overhead-ms'] === '0' ? 0 : num('step-overhead-ms', values['step-overhead-ms']);
  const server = await startSimServer({
    setup,
    port,
    speed: num('speed', values.speed),
    log: values.log === '-' ? 'stdout' : values.log,
    statsIntervalS: num('stats-interval', values['stats-interval']),
    servedModelName: values['served-model-name'],
    engine: {
      prefixCaching: values['no-prefix-caching'] ? false : undefined,
      maxNumSeqs: num('max-num-seqs', values['max-num-seqs'], true),
      maxNumBatchedTokens: num('max-num-batched-tokens', values['max-num-batched-tokens'], true),
      maxModelLen: num('max-model-len', values['max-model-len'], true),
      gpuMemoryUtilization: util,
      prefillMfu: mfu,
      stepOverheadS: overheadMs === undefined ? undefined : overheadMs / 1000,
      numGpuBlocks: num('num-gpu-blocks', values['num-gpu-blocks'], true),
    },
  });
  console.log(`listening on ${server.url}`);
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  await server.close();
  return 0;
});
