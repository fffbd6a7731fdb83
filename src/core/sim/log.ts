/**
 * vLLM-format log lines for the simulated endpoint, in the V1 (≈ v0.12) shape documented for the
 * log auditor: `(PROC pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message`, no ANSI colours, the
 * periodic stats line with `Engine 000: ` and `Preemptions: %d` (preemptions in the window), and
 * uvicorn's access line.
 */
import * as fs from 'node:fs';
import { GiB } from '../units';
import type { EngineConfig } from './engine';

export interface VllmLogOptions {
  /** Where each line goes (without its newline). */
  write: (line: string) => void;
  /** Timestamp source (default: the wall clock). */
  clock?: () => Date;
  apiPid?: number;
  enginePid?: number;
}

/**
 * One stats line the simulated server prints, in the simulator's units (fractions 0..1); the audit
 * reads the printed line back as its own StatsWindow (percentages), audit/windows.ts.
 */
export interface LoggedStats {
  promptTokensPerS: number;
  generationTokensPerS: number;
  running: number;
  waiting: number;
  /** Preemptions during the window. */
  preemptions: number;
  /** 0..1 */
  kvUsage: number;
  /** 0..1, rolling over the last 1,000 requests */
  prefixHitRate: number;
}

const pad = (n: number) => String(n).padStart(2, '0');

function vllmTimestamp(d: Date): string {
  return `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** 410240 → "410,240" (Python's "{:,}"). */
function commaInt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** The V1 stats line's message (after the prefix), E format. */
function formatStatsMessage(s: LoggedStats): string {
  return (
    `Engine 000: Avg prompt throughput: ${s.promptTokensPerS.toFixed(1)} tokens/s, ` +
    `Avg generation throughput: ${s.generationTokensPerS.toFixed(1)} tokens/s, ` +
    `Running: ${s.running} reqs, Waiting: ${s.waiting} reqs, Preemptions: ${s.preemptions}, ` +
    `GPU KV cache usage: ${(s.kvUsage * 100).toFixed(1)}%, Prefix cache hit rate: ${(s.prefixHitRate * 100).toFixed(1)}%`
  );
}

const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  400: 'Bad Request',
  404: 'Not Found',
  405: 'Method Not Allowed',
  413: 'Request Entity Too Large',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export class VllmLog {
  private readonly clock: () => Date;
  readonly apiPid: number;
  readonly enginePid: number;
  constructor(private readonly opts: VllmLogOptions) {
    this.clock = opts.clock ?? (() => new Date());
    this.apiPid = opts.apiPid ?? process.pid;
    this.enginePid = opts.enginePid ?? process.pid + 1;
  }

  line(proc: 'api' | 'engine', level: 'INFO' | 'WARNING' | 'ERROR' | 'DEBUG', where: string, message: string) {
    const prefix = proc === 'api' ? `(APIServer pid=${this.apiPid}) ` : `(EngineCore_DP0 pid=${this.enginePid}) `;
    this.opts.write(`${prefix}${level} ${vllmTimestamp(this.clock())} [${where}] ${message}`);
  }

  /** uvicorn's access line. */
  access(remote: string, method: string, path: string, status: number) {
    this.opts.write(
      `(APIServer pid=${this.apiPid}) INFO:     ${remote} - "${method} ${path} HTTP/1.1" ${status} ${STATUS_TEXT[status] ?? ''}`.trimEnd(),
    );
  }

  uvicorn(message: string) {
    this.opts.write(`(APIServer pid=${this.apiPid}) INFO:     ${message}`);
  }

  stats(s: LoggedStats) {
    this.line('api', 'INFO', 'loggers.py:248', formatStatsMessage(s));
  }

  /** The startup facts a real V1 server prints, from the engine's configuration. */
  startup(cfg: EngineConfig, modelName: string, host: string, port: number) {
    const weightsGiB = cfg.pool.weights_bytes / GiB;
    const kvGiB = (cfg.numGpuBlocks * cfg.pool.page_size_bytes * cfg.pool.layers_per_gpu) / GiB;
    const poolTokens = cfg.numGpuBlocks * cfg.blockSize;
    const loadS = cfg.pool.weights_bytes / 4e9;
    const args: string[] = [
      `'model': '${modelName}'`,
      `'host': '${host}'`,
      `'port': ${port}`,
      `'max_model_len': ${cfg.maxModelLen}`,
      `'max_num_seqs': ${cfg.maxNumSeqs}`,
      `'max_num_batched_tokens': ${cfg.maxNumBatchedTokens}`,
    ];
    if (cfg.gpuMemoryUtilization !== 0.9) args.push(`'gpu_memory_utilization': ${cfg.gpuMemoryUtilization}`);
    if (!cfg.prefixCaching) args.push(`'enable_prefix_caching': False`);
    this.line('api', 'INFO', 'api_server.py:1896', `vLLM API server version 0.12.0 (simulated)`);
    this.line('api', 'INFO', 'utils.py:328', `non-default args: {${args.join(', ')}}`);
    this.line(
      'engine',
      'INFO',
      'core.py:93',
      `Initializing a V1 LLM engine (v0.12.0) with config: model='${modelName}', dtype=torch.${cfg.setup.weights === 'fp16' ? 'float16' : 'bfloat16'}, max_seq_len=${cfg.maxModelLen}, enable_prefix_caching=${cfg.prefixCaching ? 'True' : 'False'}, chunked_prefill_enabled=True`,
    );
    this.line(
      'engine',
      'INFO',
      'scheduler.py:222',
      `Chunked prefill is enabled with max_num_batched_tokens=${cfg.maxNumBatchedTokens}.`,
    );
    this.line('engine', 'INFO', 'default_loader.py:267', `Loading weights took ${loadS.toFixed(2)} seconds`);
    this.line(
      'engine',
      'INFO',
      'gpu_model_runner.py:2653',
      `Model loading took ${weightsGiB.toFixed(4)} GiB memory and ${(loadS + 0.8).toFixed(6)} seconds`,
    );
    this.line('engine', 'INFO', 'gpu_worker.py:298', `Available KV cache memory: ${kvGiB.toFixed(2)} GiB`);
    this.line('engine', 'INFO', 'kv_cache_utils.py:1087', `GPU KV cache size: ${commaInt(poolTokens)} tokens`);
    this.line(
      'engine',
      'INFO',
      'kv_cache_utils.py:1091',
      `Maximum concurrency for ${commaInt(cfg.maxModelLen)} tokens per request: ${(poolTokens / cfg.maxModelLen).toFixed(2)}x`,
    );
    this.line('engine', 'INFO', 'gpu_model_runner.py:3480', `Graph capturing finished in 0 secs, took 0.00 GiB`);
    this.line(
      'engine',
      'INFO',
      'core.py:210',
      `init engine (profile, create kv cache, warmup model) took ${(loadS + 1).toFixed(2)} seconds`,
    );
    this.line('engine', 'INFO', 'topk_topp_sampler.py:49', 'Using FlashInfer for top-p & top-k sampling.');
    this.line('api', 'INFO', 'api_server.py:1971', `Starting vLLM API server 0 on http://${host}:${port}`);
    this.uvicorn(`Started server process [${this.apiPid}]`);
    this.uvicorn('Waiting for application startup.');
    this.uvicorn('Application startup complete.');
  }
}

/**
 * A log file the simulator appends to, where a failure to write never stops serving: a full disk
 * (ENOSPC), a file that cannot be opened, an I/O error are said once through `warn`, and the
 * simulator serves on (later lines are tried again, silently, in case space comes back).
 */
export function fileLogSink(
  file: string,
  warn: (message: string) => void,
): { write(line: string): void; close(): void } {
  let fd: number | undefined;
  let warned = false;
  const say = (e: unknown, what: string) => {
    if (warned) return;
    warned = true;
    warn(
      `the log ${file} ${what} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): the simulator serves on without it; free space or give another --log`,
    );
  };
  try {
    fd = fs.openSync(file, 'a');
  } catch (e) {
    say(e, 'cannot be opened');
  }
  return {
    write(line) {
      if (fd === undefined) return;
      try {
        fs.writeSync(fd, line + '\n');
      } catch (e) {
        say(e, 'cannot be written');
      }
    },
    close() {
      if (fd === undefined) return;
      try {
        fs.closeSync(fd);
      } catch {
        // closing a log that could not be written: nothing more to say
      }
      fd = undefined;
    },
  };
}
