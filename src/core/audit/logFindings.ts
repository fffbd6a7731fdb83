/**
 * Findings about the log itself rather than the load it records: the server failing (errors,
 * tracebacks, engine deaths, out-of-memory — each citing its line, an out-of-memory saying what to
 * change), values that cannot be right (a parse warning, not a finding about the server), lines
 * skipped as too long, lines the parser does not know (the informative ones listed), no stats.
 * Text is quoted only from a file recognised as a server log, cut and redacted (see quote.ts).
 */
import { finding, type CellPath, type Finding } from '../findings';
import { fmtNum } from '../units';
import { dialectById } from './dialect';
import type { AuditFacts, CrashFact } from './parse';
import { MAX_LINE_BYTES } from './parse';

type Cite = (facts: AuditFacts, line: number) => string;

const quoted = (c: { text?: string }) => (c.text ? `: "${c.text}"` : '');

export function logFindings(facts: AuditFacts, at: CellPath, cite: Cite): Finding[] {
  const out: Finding[] = [];
  const d = dialectById(facts.dialect);
  out.push(...crashFindings(facts, at, cite));
  if (facts.parse_warnings.length) {
    const w = facts.parse_warnings;
    out.push(
      finding(
        'warning',
        'audit-parse-warning',
        `${w.length} value${w.length > 1 ? 's' : ''} in the log cannot be right and ${w.length > 1 ? 'were' : 'was'} left out of the timeline: ${w
          .slice(0, 4)
          .map((x) => `${x.what} (${cite(facts, x.line)})`)
          .join('; ')}${w.length > 4 ? '; …' : ''}.`,
        at,
        {
          cause:
            'The log is corrupt there (two lines written over each other, or a cut copy), or the server printed a bad value.',
          fix: 'audit the original log file rather than a copy; the findings leave these windows out',
        },
      ),
    );
  }
  const ll = facts.long_lines;
  if (ll.count)
    out.push(
      finding(
        'info',
        'audit-long-lines',
        `${fmtNum(ll.count, 0)} line${ll.count > 1 ? 's' : ''} longer than ${fmtNum(MAX_LINE_BYTES / 2 ** 20, 0)} MiB ${ll.count > 1 ? 'were' : 'was'} skipped unread (${ll.lines
          .slice(0, 5)
          .map((l) => cite(facts, l))
          .join(', ')}${ll.count > 5 ? ', …' : ''}; the longest ${fmtNum(ll.max_bytes / 2 ** 20, 1)} MiB).`,
        at,
        { cause: 'No server log line is that long: binary data, or a file that is not a log.' },
      ),
    );
  if (facts.dialect === undefined && facts.lines > 0) {
    out.push(
      finding(
        'warning',
        'audit-not-a-server-log',
        `No line of the ${fmtNum(facts.lines, 0)} reads as a vLLM or SGLang server log line, so nothing is quoted from it.`,
        at,
        {
          fix: "audit the server's own log (e.g. `vllm serve … 2>&1 | tee logs/vllm.log`, or `docker logs CONTAINER > vllm.log`), or a /metrics URL",
        },
      ),
    );
    return out;
  }
  if (!facts.windows.length && facts.lines > 0) {
    out.push(
      finding(
        'info',
        'audit-no-stats',
        `No ${d.statsLine} in ${fmtNum(facts.lines, 0)} lines: no timeline, no segments.`,
        at,
        {
          cause: facts.crashes.some((c) => c.phase === 'startup')
            ? 'The server failed before it served (see the error findings).'
            : 'The server ran without periodic stats (vLLM: --disable-log-stats), or the log holds only startup.',
          fix: d.remedies.noStats,
        },
      ),
    );
  }
  if (facts.unknown_lines > 0 && facts.unknown_lines > 0.2 * facts.lines) {
    const s = facts.unknown_samples[0];
    out.push(
      finding(
        'info',
        'audit-unknown-lines',
        `${fmtNum(facts.unknown_lines, 0)} of ${fmtNum(facts.lines, 0)} lines are not in ${d.name}'s log format (first at ${cite(facts, s.line)}${quoted(s)}).`,
        at,
        { cause: 'Tracebacks, progress bars, or another program writing to the same file.' },
      ),
    );
  }
  const inf = facts.informative_unknown;
  if (inf.count)
    out.push(
      finding(
        'info',
        'audit-informative-unknown',
        `${fmtNum(inf.count, 0)} line${inf.count > 1 ? 's' : ''} the audit does not read look informative (a name and a number): ${inf.samples
          .slice(0, 3)
          .map((s) => `${cite(facts, s.line)}${quoted(s)}`)
          .join('; ')}${inf.count > 3 ? '; …' : ''}.`,
        at,
        {
          cause: 'A wording this audit does not know yet (another version, a plugin, an outer tool).',
          fix: 'check these lines by hand; the facts above do not include them',
        },
      ),
    );
  return out;
}

function crashFindings(facts: AuditFacts, at: CellPath, cite: Cite): Finding[] {
  const out: Finding[] = [];
  const d = dialectById(facts.dialect);
  const cs = facts.crashes;
  if (!cs.length) return out;
  const oom = cs.filter((c) => c.kind === 'oom');
  for (const c of oom.slice(0, 3)) {
    const fix =
      c.phase === 'serving'
        ? d.remedies.oomServing
        : c.after === 'nothing'
          ? d.remedies.oomWeights
          : d.remedies.oomStartup;
    const when =
      c.phase === 'serving'
        ? 'while serving'
        : c.after === 'nothing'
          ? 'at startup, before the weights finished loading'
          : c.after === 'weights'
            ? 'at startup, after the weights loaded (profiling or KV cache allocation)'
            : 'at startup, after the KV cache was allocated (CUDA graph capture or warmup)';
    out.push(
      finding('error', 'audit-out-of-memory', `Out of GPU memory ${when} at ${cite(facts, c.line)}${quoted(c)}.`, at, {
        cause:
          c.after === 'nothing'
            ? 'The weights (per GPU) are larger than the free GPU memory, or another process holds memory on the GPU.'
            : 'The memory vLLM reserves (gpu_memory_utilization × the card) plus what it needs to profile or capture graphs exceeds what is free.',
        fix,
      }),
    );
  }
  for (const c of cs.filter((x) => x.kind === 'kv-too-small').slice(0, 2))
    out.push(
      finding(
        'error',
        'audit-kv-cache-too-small',
        `The KV cache cannot hold one request of the maximum length at ${cite(facts, c.line)}${quoted(c)}: the server refused to start.`,
        at,
        { fix: d.remedies.kvTooSmall },
      ),
    );
  for (const c of cs.filter((x) => x.kind === 'engine-dead').slice(0, 2))
    out.push(
      finding(
        'error',
        'audit-engine-died',
        `The engine died at ${cite(facts, c.line)}${quoted(c)}${phaseNote(c)}.`,
        at,
        {
          cause:
            'An error in the engine process (see the traceback above this line in the log); the API server stops answering after it.',
          fix: 'read the first traceback before this line for the cause; measurements after it are not of a serving engine',
        },
      ),
    );
  const rest = cs.filter((x) => x.kind === 'traceback' || x.kind === 'exception');
  if (rest.length)
    out.push(
      finding(
        rest.some((c) => c.phase === 'startup') ? 'error' : 'warning',
        'audit-traceback',
        `${rest.length} traceback${rest.length > 1 ? 's' : ''} or exception${rest.length > 1 ? 's' : ''} in the log: ${rest
          .slice(0, 3)
          .map((c) => `${cite(facts, c.line)}${quoted(c)}${phaseNote(c)}`)
          .join('; ')}${rest.length > 3 ? '; …' : ''}.`,
        at,
        {
          fix: 'read the exception at the end of each traceback; a request that failed there is missing from the measurements',
        },
      ),
    );
  const errs = cs.filter((x) => x.kind === 'error');
  if (errs.length)
    out.push(
      finding(
        'warning',
        'audit-error-lines',
        `${errs.length}${facts.crash_count > cs.length ? '+' : ''} error line${errs.length > 1 ? 's' : ''} in the log: ${errs
          .slice(0, 3)
          .map((c) => `${cite(facts, c.line)}${quoted(c)}`)
          .join('; ')}${errs.length > 3 ? '; …' : ''}.`,
        at,
      ),
    );
  return out;
}

const phaseNote = (c: CrashFact) => (c.phase === 'startup' ? ' (at startup: the server never served)' : '');
