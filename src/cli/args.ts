/**
 * Every command declares its options once (name, value, help); from that come its --help text, the
 * top-level usage, and the messages for a wrong flag ("unknown option --concurency; did you mean
 * --concurrency?").
 */
import { parseArgs } from 'node:util';
import { suggest } from '../core/engine/schema';
import { UsageError } from './usage';

export interface OptSpec {
  type: 'string' | 'boolean';
  /** What the value is called in the help: FILE, N, URL. */
  value?: string;
  help: string;
  short?: string;
  /** May be given more than once. */
  multiple?: boolean;
}

export interface CommandSpec {
  name: string;
  /** Positional arguments as the synopsis writes them: "NOTEBOOK", "[gpus|models]". */
  args?: string;
  summary: string;
  options: Record<string, OptSpec>;
  /** Lines after the options. */
  notes?: string;
}

const HELP: OptSpec = { type: 'boolean', short: 'h', help: 'print this help and exit' };

export function optionsOf(spec: CommandSpec): Record<string, OptSpec> {
  return { ...spec.options, help: HELP };
}

function flag(name: string, o: OptSpec): string {
  return `--${name}${o.type === 'string' ? ` ${o.value ?? 'VALUE'}` : ''}`;
}

export function synopsis(spec: CommandSpec): string {
  return `inflab ${spec.name}${spec.args ? ` ${spec.args}` : ''}`;
}

/** The command's --help: synopsis, summary, every option with its help. */
export function helpText(spec: CommandSpec): string {
  const opts = Object.entries(optionsOf(spec));
  const left = opts.map(([n, o]) => (o.short ? `-${o.short}, ` : '    ') + flag(n, o));
  const w = Math.min(34, Math.max(...left.map((l) => l.length)) + 2);
  const lines = opts.map(([, o], i) => {
    const l = left[i];
    const help = o.help.split('\n').join(`\n${' '.repeat(w + 2)}`);
    return l.length < w ? `  ${l.padEnd(w)}${help}` : `  ${l}\n${' '.repeat(w + 2)}${help}`;
  });
  return [`${synopsis(spec)} — ${spec.summary}`, '', ...lines, ...(spec.notes ? ['', spec.notes] : [])].join('\n');
}

export interface Parsed {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
  help: boolean;
}

/**
 * Parse argv against the command's options. A wrong flag is a UsageError that names it and the
 * nearest right one; a string option without its value says what value it takes.
 */
export function parseCommand(spec: CommandSpec, argv: string[]): Parsed {
  const options = optionsOf(spec);
  const { tokens } = parseArgs({
    args: argv,
    options: Object.fromEntries(
      Object.entries(options).map(([n, o]) => [
        n,
        { type: o.type, ...(o.short ? { short: o.short } : {}), ...(o.multiple ? { multiple: true } : {}) },
      ]),
    ),
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  const values: Parsed['values'] = {};
  const positionals: string[] = [];
  const names = Object.keys(options);
  for (const t of tokens) {
    if (t.kind === 'positional') {
      positionals.push(t.value);
      continue;
    }
    if (t.kind !== 'option') continue;
    const o = options[t.name];
    if (!o) {
      const s = suggest(t.name, names);
      throw new UsageError(`unknown option ${t.rawName}${s ? `; did you mean --${s}?` : ''}`);
    }
    if (o.type === 'boolean') {
      if (t.value !== undefined)
        throw new UsageError(`--${t.name} takes no value (got "${t.value}"): write just --${t.name}`);
      values[t.name] = true;
      continue;
    }
    // A string option swallows the next argument; if that is one of our flags, the value was forgotten.
    const next = t.value;
    if (next === undefined || (t.inlineValue === false && /^--?[a-z]/i.test(next) && isFlag(next, options)))
      throw new UsageError(`${t.rawName} needs a value: ${flag(t.name, o)} (${o.help.split('\n')[0]})`);
    if (o.multiple) values[t.name] = [...((values[t.name] as string[] | undefined) ?? []), next];
    else if (values[t.name] !== undefined && values[t.name] !== next)
      throw new UsageError(`--${t.name} was given twice ("${values[t.name]}" and "${next}"): give it once`);
    else values[t.name] = next;
  }
  return { values, positionals, help: values.help === true };
}

function isFlag(arg: string, options: Record<string, OptSpec>): boolean {
  const name = arg.replace(/^--?/, '').split('=')[0];
  return name in options || Object.values(options).some((o) => o.short === name);
}

/** A command as main (and tests) call it: argv in, exit code out; --help prints the help and exits 0. */
export function command(spec: CommandSpec, run: (p: Parsed) => Promise<number>): (argv: string[]) => Promise<number> {
  return async (argv) => {
    const p = parseCommand(spec, argv);
    if (p.help) {
      console.log(helpText(spec));
      return 0;
    }
    return run(p);
  };
}
