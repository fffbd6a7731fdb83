/**
 * inflab — the same engine as the extension, without VS Code.
 * Exit codes: 0 every cell ran (findings do not fail a run), 1 a cell failed, 2 usage error.
 */
import { parseArgs } from 'node:util';
import { auditCommand } from './commands/audit';
import { benchCommand } from './commands/bench';
import { evalCommand } from './commands/eval';
import { runCommand } from './commands/run';
import { simCommand } from './commands/sim';
import { UsageError } from './usage';

const USAGE = `inflab — inference lab notebooks, headless

  inflab run NOTEBOOK [--out PATH]        run every cell in order; write the executed notebook
  inflab eval FILE.yaml [--json]          each YAML document (--- separated) is a cell
  inflab sim [--gpu ID] [--model ID] [--port N] [--log FILE] [--speed X]
                                          the simulated vLLM endpoint
  inflab bench --endpoint URL --input N --output N (--concurrency LIST | --rate LIST)
               [--requests N] [--seed per-point|N] [--json FILE]
  inflab audit LOGFILE [--json]           audit a vLLM server log

Exit codes: 0 ran (findings do not fail a run), 1 a cell failed, 2 usage error.`;

const COMMANDS: Record<string, (argv: string[]) => Promise<number>> = {
  run: runCommand,
  eval: evalCommand,
  sim: simCommand,
  bench: benchCommand,
  audit: auditCommand,
};

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    console.log(USAGE);
    return cmd ? 0 : 2;
  }
  const fn = COMMANDS[cmd];
  if (!fn) {
    console.error(`inflab: unknown command "${cmd}"\n\n${USAGE}`);
    return 2;
  }
  try {
    return await fn(rest);
  } catch (e) {
    if (e instanceof UsageError || (e as any)?.code?.startsWith?.('ERR_PARSE_ARGS')) {
      console.error(`inflab ${cmd}: ${(e as Error).message}\n\n${USAGE}`);
      return 2;
    }
    console.error(`inflab ${cmd}: ${(e as Error).stack ?? e}`);
    return 1;
  }
}

export { parseArgs };

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    console.error(e);
    process.exitCode = 1;
  },
);
