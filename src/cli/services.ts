/** The CLI's implementations of the engine's host hooks: keys from the environment, sim in-process. */
import * as fs from 'node:fs/promises';
import type { Services } from '../core/engine/types';
import { SimEndpoints } from '../core/sim/endpoints';

export interface CliServices extends Services {
  close(): Promise<void>;
}

export function cliServices(): CliServices {
  const sims = new SimEndpoints();
  return {
    async getApiKey() {
      return process.env.INFLAB_API_KEY || process.env.OPENAI_API_KEY || undefined;
    },
    async readFile(p) {
      return fs.readFile(p, 'utf8');
    },
    simEndpoint: (setup) => sims.url(setup),
    close: () => sims.close(),
  };
}
