/**
 * The line reader: what a log line looks like before the server's own prefix is reached, and how
 * terminals break or join lines. Logs people have come through docker, compose, kubectl, journald,
 * outer loggers and terminal copies; this turns each physical line into the logical lines the
 * dialect classifies:
 *
 * - wrappers peeled: docker `--timestamps` (RFC 3339 stamp), compose `svc-1  | `, kubectl/k9s box
 *   frames (`│ … │`), `kubectl logs --prefix` (`[pod/x/c] `), journald (`May 12 08:01:39 host
 *   unit[pid]: `), any outer logger in front of a recognisable head, a stage tag after the process
 *   prefix (`(EngineCore_DP0 pid=1) [Stage-0] INFO …`), ANSI colour (real or with its ESC byte lost);
 * - lines hard-wrapped by a terminal rejoined (a stats line that does not end as a whole one does,
 *   a startup line whose rule completes only with the next line);
 * - lines glued together (a lost newline) split at each further head.
 *
 * The reader holds at most one logical line at a time (and at most MAX_JOIN physical lines of it).
 * The byte fast path hands a line here (decoded) whenever `busy` is true or the line is one this
 * reader would change; the tests hold both paths to the same facts.
 */

const ANSI_RE = /\x1b\[[0-9;?]*[A-Za-z]/g;
/** ANSI colour whose ESC byte was lost in a copy: a literal `[1;36m`, `[0;0m`, `[0m`. */
const LOST_ANSI_RE = /\[\d{1,3}(?:;\d{1,3}){0,4}m/g;
const LOST_ANSI_TEST = /\[\d{1,3}(?:;\d{1,3}){0,4}m/;

/** The level of a vLLM head and what follows it, or uvicorn's `LEVEL:     `. */
const LEVEL_HEAD = '(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)(?: \\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d|:\\s{2,}\\S)';
/** A process prefix: "(EngineCore_DP0 pid=12)", "(RayWorkerWrapper pid=3433, ip=10.0.0.2)". */
const PROC = '\\([^()\\n]{1,90}? pid=\\d+[^()\\n]{0,60}?\\)';
/**
 * Where another line's head starts inside a line (glued lines, or an outer logger's prefix): an
 * optional `(Process pid=N) ` prefix (with an optional stage tag), then a level head.
 */
const HEAD_IN_LINE = new RegExp(`(?:${PROC}(?: \\[[\\w.-]{1,24}\\])? )?${LEVEL_HEAD}`, 'g');
/** A line that starts with a head (after peeling). */
const HEAD_AT_START = new RegExp(`^(?:${PROC} (?:\\[[\\w.-]{1,24}\\] )?)?${LEVEL_HEAD}`);
/**
 * The text the byte scanner looks for in a message it would otherwise read as an "other" line: a
 * glued head, or a lost-ESC colour code. Either makes the reader change the line.
 */
export const READER_NEEDLES = [LEVEL_HEAD, LOST_ANSI_TEST.source];

// Wrappers, tried in turn at the start of the line until none matches.
const DOCKER_TS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)? /;
const COMPOSE = /^[A-Za-z0-9][\w.-]{0,62}\s*\| ?/;
const BOX_LEFT = /^[│┃║|] ?/;
const BOX_RIGHT = / *[│┃║|]\s*$/;
const K8S_PREFIX = /^\[pod\/[^\]\s]{1,200}\] /;
const JOURNALD = /^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]{1,64} [\w.@/-]{1,64}(?:\[\d+\])?: /;
/** `(EngineCore_DP0 pid=1) [Stage-0] INFO …`: the tag between the process prefix and the level. */
const STAGE_TAG = new RegExp(`^(${PROC} )\\[[\\w.-]{1,24}\\] (?=(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)[ :])`);

export type WrapperKind =
  | 'docker-timestamp'
  | 'compose'
  | 'box-frame'
  | 'kubectl-prefix'
  | 'journald'
  | 'outer-logger'
  | 'stage-tag'
  | 'lost-esc-ansi';

/** Counts of wrappers peeled, by kind (reported with the facts). */
export type WrapperCounts = Partial<Record<WrapperKind, number>>;

/**
 * The line without its wrappers (and without ANSI colour), as the dialect reads it. `seen` gets
 * each kind of wrapper peeled.
 */
export function peelLine(raw: string, seen?: WrapperCounts, learned?: RegExp[]): string {
  let line = raw;
  if (line.length && line.charCodeAt(line.length - 1) === 13) line = line.slice(0, -1);
  if (line.indexOf('\x1b') >= 0) line = line.replace(ANSI_RE, '');
  const note = (k: WrapperKind) => {
    if (seen) seen[k] = (seen[k] ?? 0) + 1;
  };
  for (let round = 0; round < 6; round++) {
    const c = line.charCodeAt(0);
    let m: RegExpExecArray | null = null;
    if (c >= 48 && c <= 57 && (m = DOCKER_TS.exec(line))) note('docker-timestamp');
    else if (c === 91 && (m = K8S_PREFIX.exec(line))) note('kubectl-prefix');
    else if (c === 91 && (m = /^\[\d{1,3}(?:;\d{1,3}){0,4}m/.exec(line))) note('lost-esc-ansi');
    else if ((c === 0x2502 || c === 0x2503 || c === 0x2551 || c === 124) && (m = BOX_LEFT.exec(line))) {
      note('box-frame');
      line = line.replace(BOX_RIGHT, '');
    } else if (((c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57)) && !HEAD_AT_START.test(line)) {
      if ((m = JOURNALD.exec(line))) note('journald');
      else if ((m = COMPOSE.exec(line))) note('compose');
    }
    if (!m) break;
    line = line.slice(m[0].length);
  }
  // A head lost its ESC bytes: `[1;36m(EngineCore_DP0 pid=87)[0;0m WARNING …`.
  if (line.indexOf('m') >= 0 && LOST_ANSI_TEST.test(line)) {
    const stripped = line.replace(LOST_ANSI_RE, '');
    if (stripped !== line && (HEAD_AT_START.test(stripped) || HEAD_AT_START.test(stripped.trimStart()))) {
      note('lost-esc-ansi');
      line = stripped;
    }
  }
  if (line.charCodeAt(0) === 40) {
    const st = STAGE_TAG.exec(line);
    if (st) {
      note('stage-tag');
      line = st[1] + line.slice(st[0].length);
    }
  }
  // An outer logger: its own stamp and level before the server's head. Its shape is learned, so
  // that its lines with no server head after it (a traceback's) are peeled too.
  if (line.length && !HEAD_AT_START.test(line)) {
    HEAD_IN_LINE.lastIndex = 0;
    const h = HEAD_IN_LINE.exec(line.length > 400 ? line.slice(0, 400) : line);
    if (h && h.index > 0 && /[\s\-:|\]>)]$/.test(line.slice(0, h.index))) {
      note('outer-logger');
      if (learned && learned.length < 4) {
        const re = prefixShape(line.slice(0, h.index));
        if (!learned.some((r) => r.source === re.source)) learned.push(re);
      }
      line = line.slice(h.index);
      const st = STAGE_TAG.exec(line);
      if (st) line = st[1] + line.slice(st[0].length);
    } else if (learned)
      for (const re of learned) {
        const m = re.exec(line);
        if (m) {
          note('outer-logger');
          line = line.slice(m[0].length);
          break;
        }
      }
  }
  return line;
}

/** An outer logger's prefix as a pattern: its text with every run of digits free. */
function prefixShape(prefix: string): RegExp {
  return new RegExp('^' + prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\d+/g, '\\d+'));
}

/** Does the line start with a server head (after peeling)? */
export function startsWithHead(line: string): boolean {
  return HEAD_AT_START.test(line);
}

/** Where further heads start in a line that starts with one (glued lines), after `from`. */
export function gluedAt(line: string): number[] {
  const out: number[] = [];
  HEAD_IN_LINE.lastIndex = 1;
  for (let m = HEAD_IN_LINE.exec(line); m; m = HEAD_IN_LINE.exec(line)) {
    // A level word inside a message ("… INFO: …") is no head unless it carries a stamp or
    // uvicorn's spacing, which LEVEL_HEAD requires; a head after a space is a message quoting one.
    const before = line.charCodeAt(m.index - 1);
    if (before !== 32 && before !== 9) out.push(m.index);
    if (out.length >= 64) break;
  }
  return out;
}

/** What the dialect says about one logical line, as far as the reader needs it. */
export interface LineShape {
  /** The line may continue on the next physical line (a hard wrap cut it). */
  cut: boolean;
  /** Higher is a better reading (used to choose how to join two pieces). */
  score: number;
  /** The dialect's classification of the line, handed on with it (so it is not classified twice). */
  parsed?: unknown;
}

export interface LogicalLine {
  text: string;
  /** Physical line number (1-based) where it starts. */
  line: number;
  parsed?: unknown;
}

const MAX_JOIN = 8;
const MAX_JOIN_CHARS = 16_384;

/**
 * Physical lines in, logical lines out. `shape` is the dialect's judgement of a line (is it cut,
 * how well does it read); `emit` receives each logical line.
 */
export class LineReader {
  private held?: { text: string; line: number; pieces: number };
  readonly wrappers: WrapperCounts = {};
  /** Outer loggers' prefixes seen in front of a server head. */
  readonly learned: RegExp[] = [];
  /** Off for a dialect whose own lines start with a stamp (SGLang): no outer logger is learned. */
  learn = true;
  rejoined = 0;
  split = 0;

  constructor(
    private shape: (text: string) => LineShape,
    private emit: (l: LogicalLine) => void,
  ) {}

  /** A line is held: the next physical line must come through push() (the byte path decodes it). */
  get busy(): boolean {
    return this.held !== undefined;
  }

  /** Would this line (already free of wrappers) be changed by the reader? (The byte path asks.) */
  wouldChange(text: string): boolean {
    return gluedAt(text).length > 0 || this.shape(text).cut;
  }

  /** Does the line start with an outer logger's prefix seen before? (The byte path asks.) */
  hasLearnedPrefix(text: string): boolean {
    return this.learned.some((r) => r.test(text));
  }

  private lastLine = 0;

  push(raw: string, line: number): void {
    this.lastLine = line;
    const text = peelLine(raw, this.wrappers, this.learn ? this.learned : undefined);
    const head = startsWithHead(text);
    if (this.held) {
      if (head || !text.trim()) this.flush();
      else {
        this.continueWith(text);
        return;
      }
    }
    if (!head) return this.emit({ text, line });
    const cuts = gluedAt(text);
    if (cuts.length) {
      this.split += cuts.length;
      let prev = 0;
      for (const c of cuts) {
        this.emit({ text: text.slice(prev, c), line });
        prev = c;
      }
      return this.offer(text.slice(prev), line);
    }
    this.offer(text, line);
  }

  /** The end of the input: a held line goes out as it is. */
  end(): void {
    this.flush();
  }

  private offer(text: string, line: number): void {
    const s = this.shape(text);
    if (s.cut) this.held = { text, line, pieces: 1 };
    else this.emit({ text, line, parsed: s.parsed });
  }

  private continueWith(next: string): void {
    const h = this.held!;
    const a = h.text + next;
    const b = h.text + ' ' + next;
    const sa = this.shape(a);
    const sb = this.shape(b);
    // A hard wrap keeps every character; a copy from a terminal may drop the space at the cut.
    const [text, s] = sb.score > sa.score ? [b, sb] : [a, sa];
    if (s.score <= this.shape(h.text).score) {
      // The next line does not continue this one (it reads no better joined): two lines.
      this.flush();
      this.emit({ text: next, line: this.lastLine });
      return;
    }
    this.rejoined++;
    if (!s.cut || h.pieces + 1 >= MAX_JOIN || text.length > MAX_JOIN_CHARS) {
      this.held = undefined;
      this.emit({ text, line: h.line, parsed: s.parsed });
    } else this.held = { text, line: h.line, pieces: h.pieces + 1 };
  }

  private flush(): void {
    const h = this.held;
    if (!h) return;
    this.held = undefined;
    this.emit({ text: h.text, line: h.line });
  }
}
