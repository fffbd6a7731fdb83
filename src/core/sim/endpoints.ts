/**
 * The simulated endpoints behind `endpoint: sim`, started on demand in this process: one per
 * distinct setup (GPU, model, dtypes, server knobs), shared by every cell with that setup, so a
 * sweep's later cells see the same server (and its prefix cache) as the earlier ones. Both hosts,
 * the CLI and the editor, use it; the server code loads only when a first endpoint starts.
 */
import type { Setup } from '../engine/types';

interface Running {
  url: string;
  close(): Promise<void>;
}

export class SimEndpoints {
  private readonly servers = new Map<string, Promise<Running>>();

  /** `speed` > 1 runs the simulator faster than simulated time (a host setting; default 1). */
  constructor(private readonly speed = 1) {}

  async url(setup?: Setup): Promise<string> {
    const key = setup
      ? JSON.stringify([
          setup.gpu,
          setup.model.id,
          setup.model.params.total,
          setup.weights,
          setup.kvCache,
          setup.server ?? {},
        ])
      : '';
    let server = this.servers.get(key);
    if (!server) {
      server = import('./server').then((m) => m.startSimServer({ setup, speed: this.speed }));
      this.servers.set(key, server);
      // A server that failed to start is tried again by the next cell.
      server.catch(() => this.servers.delete(key));
    }
    return (await server).url;
  }

  async close(): Promise<void> {
    const all = [...this.servers.values()];
    this.servers.clear();
    await Promise.all(
      all.map((s) =>
        s.then(
          (x) => x.close(),
          () => undefined,
        ),
      ),
    );
  }
}
