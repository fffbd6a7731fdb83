/** The CLI's implementations of the engine's host hooks: keys from the environment, sim in-process. */
import * as fs from 'node:fs/promises';
import type { Services, Setup } from '../core/engine/types';

export interface CliServices extends Services {
  close(): Promise<void>;
}

export function cliServices(): CliServices {
  let sim: Promise<{ url: string; close(): Promise<void> }> | undefined;
  return {
    async getApiKey() {
      return process.env.INFLAB_API_KEY || process.env.OPENAI_API_KEY || undefined;
    },
    async readFile(p) {
      return fs.readFile(p, 'utf8');
    },
    async simEndpoint(setup?: Setup) {
      if (!sim) {
        sim = import('../core/sim/server').then((m) => m.startSimServer({ setup, speed: Number(process.env.INFLAB_SIM_SPEED) || 1 }));
      }
      return (await sim).url;
    },
    async close() {
      if (sim) await (await sim).close();
    },
  };
}
