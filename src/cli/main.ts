/**
 * inflab — the same engine as the extension, without VS Code.
 * Exit codes: 0 every cell ran (findings do not fail a run), 1 a cell failed, 2 usage error,
 * 130 interrupted (Ctrl-C).
 */
import { version } from '../../package.json';
import { helpText, type CommandSpec } from './args';
import { auditCommand, auditSpec } from './commands/audit';
import { benchCommand, benchSpec } from './commands/bench';
import { catalogCommand, catalogSpec } from './commands/catalog';
import { evalCommand, evalSpec } from './commands/eval';
import { exportCommand, exportSpec } from './commands/export';
import { inkCommand, inkSpec } from './commands/ink';
import { runCommand, runSpec } from './commands/run';
import { simCommand, simSpec } from './commands/sim';
import { UsageError } from './usage';

interface Command {
  spec: CommandSpec;
  run(argv: string[]): Promise<number>;
}

export const COMMANDS: Command[] = [
  { spec: runSpec, run: runCommand },
  { spec: inkSpec, run: inkCommand },
  { spec: evalSpec, run: evalCommand },
  { spec: benchSpec, run: benchCommand },
  { spec: auditSpec, run: auditCommand },
  { spec: simSpec, run: simCommand },
  { spec: catalogSpec, run: catalogCommand },
  { spec: exportSpec, run: exportCommand },
];

/** The top-level usage: every command with every flag it takes. */
export function usage(): string {
  const blocks = COMMANDS.map(({ spec }) => {
    const flags = Object.entries(spec.options).map(
      ([n, o]) => `[--${n}${o.type === 'string' ? ` ${o.value ?? 'VALUE'}` : ''}]`,
    );
    const lines: string[] = [];
    let line = `  inflab ${spec.name}${spec.args ? ` ${spec.args}` : ''}`;
    for (const f of flags) {
      if (line.length + f.length + 1 > 100) {
        lines.push(line);
        line = ' '.repeat(4 + spec.name.length + 6);
      }
      line += ` ${f}`;
    }
    lines.push(line);
    return `${lines.join('\n')}\n      ${spec.summary}`;
  });
  return [
    `inflab ${version} — inference lab notebooks, headless`,
    '',
    ...blocks,
    '',
    '  inflab --version        print the version',
    '  inflab COMMAND --help   every option of a command, with what it takes',
    '',
    'Exit codes: 0 ran (findings do not fail a run), 1 a cell failed, 2 usage error, 130 interrupted.',
    'API key: INFLAB_API_KEY (or OPENAI_API_KEY), sent only to the endpoint you name.',
  ].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    const sub = cmd === 'help' && rest[0] ? COMMANDS.find((c) => c.spec.name === rest[0]) : undefined;
    if (sub) console.log(helpText(sub.spec));
    else (cmd ? console.log : console.error)(usage());
    return cmd ? 0 : 2;
  }
  if (cmd === '--version' || cmd === '-v' || cmd === 'version') {
    console.log(version);
    return 0;
  }
  const command = COMMANDS.find((c) => c.spec.name === cmd);
  if (!command) {
    const { suggest } = await import('../core/engine/schema');
    const s = suggest(
      cmd,
      COMMANDS.map((c) => c.spec.name),
    );
    console.error(`inflab: unknown command "${cmd}"${s ? `; did you mean "inflab ${s}"?` : ''}\n\n${usage()}`);
    return 2;
  }
  try {
    return await command.run(rest);
  } catch (e) {
    if (e instanceof UsageError) {
      console.error(`inflab ${cmd}: ${e.message}\n(inflab ${cmd} --help lists every option)`);
      return 2;
    }
    console.error(`inflab ${cmd}: ${(e as Error).stack ?? e}`);
    return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    console.error(e);
    process.exitCode = 1;
  },
);
