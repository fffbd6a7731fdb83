import type { Setup } from '../engine/types';

export interface SimServerOptions {
  setup?: Setup;
  port?: number;
  speed?: number;
}

export async function startSimServer(_opts: SimServerOptions): Promise<{ url: string; close(): Promise<void> }> {
  throw new Error('the simulated endpoint is not built yet');
}
