/**
 * Host settings from an environment the host hands over (the CLI's, or the editor's process for
 * what has no configuration key): INFLAB_SIM_SPEED, INFLAB_BENCH_THREADS, INFLAB_BENCH_WORKER.
 * The core itself reads no environment variable.
 */
import type { HostSettings } from '../engine/types';

export function settingsFromEnv(env: Record<string, string | undefined>): HostSettings {
  const num = (v: string | undefined) => (v && Number.isFinite(Number(v)) && Number(v) > 0 ? Number(v) : undefined);
  return {
    simSpeed: num(env.INFLAB_SIM_SPEED),
    benchThreads: num(env.INFLAB_BENCH_THREADS),
    benchWorker: env.INFLAB_BENCH_WORKER || undefined,
  };
}
