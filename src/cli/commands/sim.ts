import { parseArgs } from 'node:util';
import { findGpu, findModel, GPUS, MODELS } from '../../core/catalog';
import { defaultSimSetup, startSimServer } from '../../core/sim/server';
import { UsageError } from '../usage';

const HELP = `inflab sim — the simulated vLLM endpoint (runs until Ctrl-C)

  --gpu ID                    catalog GPU (default a100-sxm4-80gb)
  --model ID                  catalog model (default qwen3-8b)
  --port N                    port on 127.0.0.1 (default: a free one)
  --log FILE                  vLLM-format log to FILE ("-" for stdout)
  --speed X                   simulated seconds per wall second (default 1)
  --no-prefix-caching         serve with the prefix cache off
  --max-num-seqs N            default 256
  --max-num-batched-tokens N  default 8192
  --max-model-len N           default: the model's max_position_embeddings
  --gpu-memory-utilization F  default 0.9
  --prefill-mfu F             default 0.6
  --step-overhead-ms MS       default 3.27
  --num-gpu-blocks N          KV pool size in 16-token blocks (default: the kv-pool prediction)
  --stats-interval S          seconds between stats log lines (default 10)
  --served-model-name NAME    default: the model's catalog id`;

function num(name: string, v: string | undefined, int = false): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0 || (int && !Number.isInteger(n)))
    throw new UsageError(
      `--${name} takes a positive ${int ? 'integer' : 'number'}, e.g. --${name} ${int ? 256 : 10}; got "${v}"`,
    );
  return n;
}

export async function simCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      gpu: { type: 'string' },
      model: { type: 'string' },
      port: { type: 'string' },
      log: { type: 'string' },
      speed: { type: 'string' },
      'no-prefix-caching': { type: 'boolean' },
      'max-num-seqs': { type: 'string' },
      'max-num-batched-tokens': { type: 'string' },
      'max-model-len': { type: 'string' },
      'gpu-memory-utilization': { type: 'string' },
      'prefill-mfu': { type: 'string' },
      'step-overhead-ms': { type: 'string' },
      'num-gpu-blocks': { type: 'string' },
      'stats-interval': { type: 'string' },
      'served-model-name': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
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
}
