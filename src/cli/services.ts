/**
 * The CLI's implementations of the engine's host hooks: files read as the user named them (any
 * path: the command line is the user's own choice), keys per endpoint origin from the environment,
 * settings from the environment, the simulator in-process.
 *
 * Keys: `INFLAB_API_KEYS` holds one `ORIGIN=KEY` pair per line or space (e.g.
 * `INFLAB_API_KEYS="http://gpu-a:8000=sk-a https://gpu-b=sk-b"`); `INFLAB_API_KEY` (or
 * `OPENAI_API_KEY`) is the key of the `--endpoint` a command was given, and of no other host. A
 * host a notebook names gets a key only from INFLAB_API_KEYS.
 */
import type { Services } from '../core/engine/types';
import { nodeFiles } from '../core/host/files';
import { settingsFromEnv } from '../core/host/settings';
import { SimEndpoints } from '../core/sim/endpoints';
import { originOf } from '../core/urls';

export interface CliServices extends Services {
  close(): Promise<void>;
}

export interface CliServiceOptions {
  /** The `--endpoint` of the command, if it has one: INFLAB_API_KEY is its key. */
  endpoint?: string;
  /** The environment to read (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** Where a warning goes (default stderr), each said once. */
  warn?(message: string): void;
}

/** INFLAB_API_KEYS parsed: origin → key, and the entries that are not ORIGIN=KEY (by number). */
export function parseApiKeys(text: string | undefined): { keys: Map<string, string>; bad: number[] } {
  const keys = new Map<string, string>();
  const bad: number[] = [];
  (text ?? '')
    .split(/\s+/)
    .filter(Boolean)
    .forEach((entry, i) => {
      const eq = entry.indexOf('=', entry.indexOf('://') + 3);
      const origin = eq > 0 ? originOf(entry.slice(0, eq)) : undefined;
      const key = eq > 0 ? entry.slice(eq + 1) : '';
      if (origin && key) keys.set(origin, key);
      else bad.push(i + 1);
    });
  return { keys, bad };
}

export function cliServices(opts: CliServiceOptions = {}): CliServices {
  const env = opts.env ?? process.env;
  const settings = settingsFromEnv(env);
  const sims = new SimEndpoints(settings.simSpeed);
  const { keys, bad } = parseApiKeys(env.INFLAB_API_KEYS);
  const flagKey = env.INFLAB_API_KEY || env.OPENAI_API_KEY || undefined;
  const flagOrigin = opts.endpoint ? originOf(opts.endpoint) : undefined;
  const warned = new Set<string>();
  const warn = (m: string) => {
    if (warned.has(m)) return;
    warned.add(m);
    (opts.warn ?? ((x: string) => process.stderr.write(`inflab: ${x}\n`)))(m);
  };
  // The entry itself is not quoted: it may be a key.
  if (bad.length)
    warn(
      `INFLAB_API_KEYS: entr${bad.length > 1 ? 'ies' : 'y'} ${bad.join(', ')} ignored: each entry is ORIGIN=KEY, e.g. INFLAB_API_KEYS="http://gpu-box:8000=sk-…"`,
    );
  return {
    async getApiKey(url) {
      const origin = originOf(url);
      if (!origin) return undefined;
      const key = keys.get(origin) ?? (origin === flagOrigin ? flagKey : undefined);
      if (!key && flagKey && origin !== flagOrigin)
        warn(
          `no API key goes to ${origin}: ${env.INFLAB_API_KEY ? 'INFLAB_API_KEY' : 'OPENAI_API_KEY'} is only for --endpoint; for a host a notebook names set INFLAB_API_KEYS="${origin}=KEY"`,
        );
      return key;
    },
    ...nodeFiles(),
    simEndpoint: (setup) => sims.url(setup),
    settings,
    close: () => sims.close(),
  };
}
