/**
 * The byte path (files are read as bytes; access and stats lines are scanned without decoding) must
 * give exactly the facts of the line-by-line text path through classifyLine(): for the reference's
 * example lines and the variants around them, wherever the chunks split the bytes — inside a
 * multi-byte character, between CR and LF, inside an ANSI sequence — and for random logs built to
 * sit on every edge of the fast path (property test).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { auditChunks, auditFile, auditText, classifyLine, generateLog, LogAuditor } from '../../src/core/audit';
import { MESSAGE_NEEDLES } from '../../src/core/audit/parse';
import { ACCESS, BLANK, FALLBACK, LEVEL_NAMES, OTHER, ScanState, scanLine, STATS } from '../../src/core/audit/scan';
import type { AuditFacts } from '../../src/core/audit';

/** Facts as plain data (the windows' columns as rows), for deep comparison. */
function plain(f: AuditFacts) {
  const { windows, files, ...rest } = f;
  return { ...rest, files: files.map(({ path: _p, ...x }) => x), origin: windows.origin, windows: windows.toArray() };
}

function splitAt(buf: Buffer, cuts: number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => Math.max(0, Math.min(buf.length, c))))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let prev = 0;
  for (const c of at) {
    out.push(buf.subarray(prev, c));
    prev = c;
  }
  out.push(buf.subarray(prev));
  return out;
}

const fixture = fs
  .readFileSync(path.join(import.meta.dirname, '../fixtures/logs/vllm-logs-examples.log'), 'utf8')
  .trimEnd()
  .split('\n');
const ansi = (p: string) => `\x1b[1;36m${p}\x1b[0;0m `;
const access = (client: number, route: string, status: number, prefix = ansi('(APIServer pid=4650)')) =>
  `${prefix}INFO:     127.0.0.1:${client} - "${route} HTTP/1.1" ${status} OK`;
const stats = (stamp: string, gen: string, prefix = ansi('(APIServer pid=4650)')) =>
  `${prefix}INFO 12-31 ${stamp} [loggers.py:122] Engine 000: Avg prompt throughput: 1,523.4 tokens/s, Avg generation throughput: ${gen} tokens/s, Running: 24 reqs, Waiting: 3 reqs, Preemptions: 1, GPU KV cache usage: 18.3%, Prefix cache hit rate: 42.1%`;

/** Every kind of line, with the byte path's edges: CRLF, UTF-8, ANSI, routes, a run of access lines. */
const MIXED = [
  ...fixture,
  access(40000, 'POST /v1/completions', 200),
  access(40001, 'POST /v1/completions', 200),
  access(40002, 'POST /v1/completions?stream=1', 500),
  access(40003, 'GET /metrics', 200, ''),
  access(40004, 'POST /v1/completions', 404),
  stats('23:59:50', '812.7'),
  'INFO 12-31 23:59:55 [x.py:1] naïve ünïcode ✓ line 😀',
  "\x1b[1;36m(EngineCore_0 pid=4711)\x1b[0;0m INFO 12-31 23:59:56 [core.py:1] Received request cmpl-1: prompt: 'ü', params: SamplingParams(n=1)",
  '',
  'Traceback (most recent call last):',
  '   ',
  '(APIServer pid=4650) INFO:     Started server process [4650]',
  stats('23:59:59', '1e3'), // an exponent: the byte path leaves it to classifyLine()
  stats('00:00:05', '900.0'), // new year
  access(40005, 'POST /v1/chat/completions', 200),
  'INFO 01-01 00:00:06 [x.py:1] colour \x1b[1mAvg prompt\x1b[0m throughput: in a message',
  stats('00:00:15', '1,000.25'),
];

test('chunks split anywhere give the facts of the text path: every single cut, CRLF and LF', () => {
  for (const eol of ['\n', '\r\n']) {
    const text = MIXED.join(eol); // no final newline
    const want = plain(auditText(text));
    const wantJson = JSON.stringify(want);
    const buf = Buffer.from(text);
    assert.ok(want.windows.length >= 5 && want.access.requests >= 6, 'the log holds windows and requests');
    // Every cut for CRLF; every fifth for LF (one-byte chunks below cut everywhere at once).
    for (let i = 0; i <= buf.length; i += eol === '\r\n' ? 1 : 5) {
      const got = plain(auditChunks(splitAt(buf, [i])));
      if (JSON.stringify(got) !== wantJson) assert.deepEqual(got, want, `cut at byte ${i}`);
    }
    // One byte at a time.
    assert.deepEqual(plain(auditChunks(Array.from(buf, (b) => Buffer.of(b)))), want);
  }
});

test('cuts inside a multi-byte character and between CR and LF, in a file read in small chunks', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'inflab-audit-bytes-'));
  try {
    const text = MIXED.join('\r\n') + '\r\n';
    const buf = Buffer.from(text);
    // The cuts the test is about are there to be made.
    const emoji = buf.indexOf(Buffer.from('😀'));
    const crlf = buf.indexOf('\r\n');
    assert.ok(emoji > 0 && crlf > 0);
    const want = plain(auditText(text));
    for (const cuts of [
      [emoji + 1],
      [emoji + 2, emoji + 3],
      [crlf + 1],
      [crlf + 1, emoji + 1, buf.indexOf('\x1b[1;36m') + 2],
    ])
      assert.deepEqual(plain(auditChunks(splitAt(buf, cuts))), want, `cuts ${cuts}`);
    const p = path.join(dir, 'v.log');
    fs.writeFileSync(p, buf);
    for (const chunkBytes of [1, 2, 3, 5, 7, 64, 1000]) {
      const r = await auditFile(p, { chunkBytes });
      assert.deepEqual(plain(r.facts), want, `chunkBytes ${chunkBytes}`);
      assert.equal(r.facts.files[0].lines, want.lines);
      assert.equal(r.facts.bytes, buf.length);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("a generated log: access and stats lines are read as bytes, the facts are the text path's", () => {
  const text = generateLog(200, { accessPerWindow: 5, pointWindows: 20 });
  const a = new LogAuditor();
  a.beginFile('<bytes>');
  const buf = Buffer.from(text);
  for (const c of splitAt(buf, [1000, 5000, 5001, 20000, 40000])) a.feedChunk(c);
  a.endChunks();
  a.facts.bytes = a.facts.files[0].bytes = buf.length;
  const f = a.finish();
  const want = plain(auditText(text));
  assert.deepEqual(plain(f), want);
  assert.equal(want.windows.length, 200);
  // Only the startup block and the stray traceback lines needed decoding.
  assert.ok(a.decodedLines <= 10 + want.unknown_lines, `decoded ${a.decodedLines} of ${want.lines} lines`);
});

test("near misses after good lines (the templates are warm): the text path's facts", () => {
  const P = ansi('(APIServer pid=4650)');
  const good = [
    access(1, 'POST /v1/completions', 200),
    stats('10:00:00', '5.0'),
    access(2, 'POST /v1/completions', 200),
  ];
  const near = [
    // Unicode spaces end uvicorn's client (\S+), at every alignment of the four-byte steps.
    ...['a', 'ab', 'abc', 'abcd', 'abcde'].flatMap((c) =>
      ['\u00a0', '\u2003', '\u3000', '\u0085', '\ufeff', 'ü', '\x7f', '\x1b', '\t'].map(
        (sp) => `${P}INFO:     ${c}${sp}1 - "POST /v1/completions HTTP/1.1" 200 OK`,
      ),
    ),
    `${P}INFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 20`,
    `${P}INFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 2000 OK`,
    `${P}INFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1"  200 OK`,
    `${P}INFO:      127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 200 OK`,
    `${P}INFO:     127.0.0.1:5 - "POST /v1/completions?a=1 HTTP/1.1" 200 OK`,
    `${P}INFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 200 ${'x'.repeat(200)}`,
    '(APIServer pid=4650)XINFO 12-31 10:00:10 [x.py:1] Added request 1.',
    '(APIServer pid=4650)\x1b[0mXINFO 12-31 10:00:10 [x.py:1] Added request 1.',
    '(APIServer pid=4650)XINFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 200 OK',
    `${P}INFO 12-31 1x:00:10 [x.py:1] Added request 1.`,
    `${P}INFO 12-31 10:00:1x [x.py:1] Added request 1.`,
    `${P}INFO 12-31 10:0x:10 [x.py:1] Added request 1.`,
    `${P}INFO 12-31 10:00:10 [x.py:1] Engine 7:_Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s`,
    `${P}INFO 12-31 10:00:10 [x.py:1] Engine 7: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 123456789012345678 reqs`,
    `${P}INFO 12-31 10:00:10 [x.py:1] Engine 7: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 0.123456789012345678 tokens/s`,
  ];
  for (const l of near)
    for (const eol of ['\n', '\r\n']) {
      const text = [...good, l, ...good, l].join(eol);
      assert.deepEqual(plain(auditChunks([Buffer.from(text)])), plain(auditText(text)), JSON.stringify(l));
    }
});

test("stats lines read through the last line's skeleton: near misses give the text path's facts", () => {
  const P = ansi('(APIServer pid=4650)');
  const head = `${P}INFO 12-31 10:00:00 [loggers.py:122] Engine 000: `;
  const line = (body: string) => head + body;
  const std = (p: string, g: string, r = '24', w = '3') =>
    `Avg prompt throughput: ${p} tokens/s, Avg generation throughput: ${g} tokens/s, Running: ${r} reqs, Waiting: ${w} reqs, GPU KV cache usage: 18.3%, Prefix cache hit rate: 42.1%`;
  const pairs: [string, string][] = [
    [std('1.0', '2.0'), std('1,523.4', '12,345,678.25', '0', '100')],
    [std('1.0', '2.0'), std('1.0', '2.0') + ', Waiting: 9 reqs'],
    [std('1.0', '2.0'), std('1.0', '2.0') + 'x'],
    [std('1.0', '2.0'), std('1.0', '2.0').slice(0, -1)],
    [std('1.0', '2.0'), std('1.2.3', '2')],
    [std('1.0', '2.0'), std('1e3', '2')],
    [std('1.0', '2.0'), std('1,', '2')],
    [std('1.0', '2.0'), std('.5', '2')],
    [std('1.0', '2.0'), std('1234567890123456', '2')],
    [std('1.0', '2.0'), std('1.0', '2.0', '24\x1b[0m')],
    // A number followed by a key without ", ": a trailing comma on the number would make a new part.
    [
      'Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 5 Waiting: 3 reqs',
      'Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 5, Waiting: 3 reqs',
    ],
    [
      'Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 5 Waiting: 3 reqs',
      'Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 5,5 Waiting: 3 reqs',
    ],
    [
      'Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Pending: 4 reqs, Waiting: 3 reqs',
      'Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Pending: 7 reqs, Waiting: 1 reqs',
    ],
  ];
  for (const [a, b] of pairs) {
    const text = [
      line(a),
      line(b).replace('10:00:00', '10:00:10'),
      line(a).replace('10:00:00', '10:00:20'),
      line(b).replace('10:00:00', '10:00:30'),
    ].join('\n');
    assert.deepEqual(plain(auditChunks([Buffer.from(text)])), plain(auditText(text)), JSON.stringify(b));
  }
});

// ---------------------------------------------------------------------------------------------
// Random logs around the fast path's edges: every fragment is either what it accepts or a near miss.

const pick = <T>(...xs: T[]) => fc.constantFrom(...xs);
/** Mostly one of the forms the fast path reads, sometimes a near miss: most lines then differ from a good line in one place. */
const ok = (good: string[], near: string[]) =>
  fc.oneof({ weight: 12, arbitrary: fc.constantFrom(...good) }, { weight: 1, arbitrary: fc.constantFrom(...near) });
const lead = ok(
  ['', '\x1b[1;36m'],
  [' ', '\t', '\x1b[0m\x1b[1m', '\x1b[', '\x1b[12', '\x1b', '\x1b[1;36', '\x1b[1;36m '],
);
const closeAnsi = ok(['', '\x1b[0;0m', '\x1b[0m\x1b[0m'], ['\x1b[9', '\x1b', '\x1b[0;0m\x1b']);
const procName = ok(
  ['APIServer pid=4650', 'EngineCore_DP0 pid=4711', 'VllmWorker rank=1 pid=99'],
  [
    'NoPid',
    'x'.repeat(89) + ' pid=1',
    'x'.repeat(90) + ' pid=1',
    'a) (b pid=2',
    'ü pid=3',
    'a\x1bb pid=4',
    'pid=5',
    ' pid=',
    'a\tb pid=6',
  ],
);
const prefix = fc.oneof(
  fc.constant(''),
  fc.tuple(procName, closeAnsi, ok([' '], ['', '  ', '\x1b[0m '])).map(([n, c, sp]) => `(${n})${c}${sp}`),
);
const word = ok(
  ['INFO', 'WARNING', 'ERROR', 'DEBUG', 'CRITICAL'],
  ['toString', 'info', 'INF', 'NOTICE', '__proto__', 'INFOS', 'XINFO'],
);
const digits = (n: number) => fc.integer({ min: 0, max: 10 ** n - 1 }).map((v) => String(v).padStart(n, '0'));
const stamp = fc.oneof(
  {
    weight: 12,
    arbitrary: fc
      .tuple(digits(2), digits(2), digits(2), digits(2), digits(2))
      .map(([mo, d, h, m, s]) => `${mo}-${d} ${h}:${m}:${s}`),
  },
  {
    weight: 1,
    arbitrary: pick(
      '12-31 23:59:59',
      '01-01 00:00:01',
      '1a-01 00:00:01',
      '01-01 00:00',
      '01-01 00:00:0x',
      '01-01 00:00:x0',
      '01-01 0x:00:00',
      '01-01 x0:00:00',
      '02-29 12:00:00',
      '01/01 00:00:01',
      '1-01 00:00:01',
    ),
  },
);
const frac = ok(['', ',123', '.5'], ['.', ',', ',12a', ':5']);
const bracket = ok(
  ['[loggers.py:122] ', 'metrics.py:351] ', '[x.py:1]'],
  [
    '[ü.py:1] ',
    '[' + 'y'.repeat(117) + '] ',
    '[' + 'y'.repeat(118) + '] ',
    '[' + 'y'.repeat(119) + '] ',
    '[no close ',
    '[a\x1b.py:1] ',
    '[a\tb] ',
    '',
  ],
);
const num = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 200000 }).map(String) },
  { weight: 6, arbitrary: fc.double({ min: 0, max: 1e5, noNaN: true }).map((v) => v.toFixed(1)) },
  {
    weight: 1,
    arbitrary: fc
      .double({ min: 0, max: 1e7, noNaN: true })
      .map((v) => v.toFixed(2).replace(/\B(?=(\d{3})+(?!\d))/g, ',')),
  },
  { weight: 1, arbitrary: fc.double({ min: 0, max: 1e3, noNaN: true }).map((v) => String(v)) },
  {
    weight: 1,
    arbitrary: pick(
      '1e3',
      '1.2.3',
      '.5',
      '-1',
      ' 5',
      '',
      'NaN',
      '5,',
      '1,.5',
      '1..5',
      '12345678901234567',
      '0.1234567890123456789',
      '123456789012345.6',
      '7E2',
      '3.e1',
      '0x10',
      'Infinity',
    ),
  },
);
const statKey = pick(
  'Avg prompt throughput',
  'Avg generation throughput',
  'Running',
  'Waiting',
  'Pending',
  'Swapped',
  'Deferred',
  'Preemptions',
  'GPU KV cache usage',
  'CPU KV cache usage',
  'Prefix cache hit rate',
  'External prefix cache hit rate',
  'MM cache hit rate',
  'Unknown key',
  'Running:',
  'running',
);
const unit = ok([' tokens/s', ' reqs', '%', '%.', ''], [' \x1b[0m', '\x1b[0m', ', ', ',']);
const statsMsg = fc
  .tuple(
    ok(
      ['', 'Engine 000: ', 'Engine 1: '],
      [
        'Engine 1234567890: ',
        '2 Engines Aggregated: ',
        'Engine x: ',
        'Engine 0:  ',
        'note: ',
        'Engine 0:',
        'Engine : ',
        'Engine 7:_',
      ],
    ),
    num,
    num,
    fc.array(fc.tuple(statKey, num, unit), { maxLength: 8 }),
    ok([', '], [',', ' ,', ',  ', ', \x1b[0m']),
  )
  .map(
    ([head, p, g, parts, sep]) =>
      `${head}Avg prompt throughput: ${p} tokens/s, Avg generation throughput: ${g} tokens/s${parts.map(([k, v, u]) => `${sep}${k}: ${v}${u}`).join('')}`,
  );
const otherMsg = pick(
  "Received request cmpl-1: prompt: 'naïve ✓'",
  'Added request cmpl-1.',
  '',
  'Using FlashInfer for top-p & top-k sampling.',
  'GPU KV cache size: 410,240 tokens',
  'Prefix cache hit rate: GPU: 37.50%, CPU: 0.00%',
  'Sequence group 7 is preempted by PreemptionMode.RECOMPUTE mode. total_num_cumulative_preemption=3',
  'a sampler note',
  'colour \x1b[1mGPU KV cache\x1b[0m size: 1 tokens',
  'GPU KV cache \x1b[1msize: 5 tokens',
  'note: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s',
);
const vllmLine = fc
  .tuple(word, ok([' '], ['  ', '\t', ':']), stamp, frac, ok([' '], ['', '  ']), bracket, fc.oneof(statsMsg, otherMsg))
  .map(([w, sp, s, f, sp2, b, m]) => `${w}${sp}${s}${f}${sp2}${b}${m}`);
const accessLine = fc
  .tuple(
    ok(['INFO', 'WARNING', 'ERROR'], ['DEBUG', 'info', 'CRITICAL', 'INFOO']),
    ok(['     ', ' '], ['\t', '', ' \t ', '\x0b', ' \x1b ', '\x1b[0m ']),
    ok(
      ['127.0.0.1:5', '10.0.0.7:40000', '[::1]:8'],
      ['ü:1', '', 'a\x1bb', 'x"y', 'a\tb', 'a\x7fb', 'a\u00a0b', 'a\u2003b'],
    ),
    ok([' - "'], [' -"', ' - ', '  - "']),
    ok(['POST', 'GET'], ['post', '', 'P0ST']),
    ok(['/v1/completions', '/v1/chat/completions?x=1&y=2', '/m?', '/a?b?c'], ['/ü', '', '/a b', '/a\x1b']),
    ok(['1.1', '2', '1.0'], ['', 'x', '1 1']),
    ok(['" '], ['"', ' ', '"  ']),
    ok(['200', '404', '500', '007'], ['5', '20x', ' 200']),
    ok([' OK', '', ' Not Found'], ['\x1b[0m', ' ' + 'z'.repeat(80), '0']),
  )
  .map(
    ([lv, ws, client, dash, method, p, ver, q, status, tail]) =>
      `${lv}:${ws}${client}${dash}${method} ${p} HTTP/${ver}${q}${status}${tail}`,
  );
const junk = pick(
  'Traceback (most recent call last):',
  '  File "x.py", line 1',
  'Loading safetensors checkpoint shards:  40% Completed | 2/5',
  '\r',
  '😀',
  'INFO:     Started server process [1]',
  '   ',
  '\x1b[0m',
);
const line = fc
  .tuple(
    lead,
    prefix,
    fc.oneof({ weight: 3, arbitrary: accessLine }, { weight: 3, arbitrary: vllmLine }, { weight: 1, arbitrary: junk }),
  )
  .map(([l, p, b]) => l + p + b);

test('property: one line at a time, what the byte scanner says is what classifyLine() says', () => {
  const counts = new Map<number, number>();
  fc.assert(
    fc.property(line, ok(['', '\r'], ['\r\r']), (text, cr) => {
      const raw = text + cr;
      const buf = Buffer.from(raw);
      const st = Object.assign(new ScanState(), { needles: MESSAGE_NEEDLES });
      // Twice: the first pass checks the head the long way, the second through the templates it kept.
      for (const pass of [0, 1]) {
        const k = scanLine(buf, 0, buf.length, st);
        counts.set(k, (counts.get(k) ?? 0) + 1);
        if (k === FALLBACK) continue;
        const c = classifyLine(raw);
        const at = `pass ${pass}: ${JSON.stringify(raw)}`;
        if (k === BLANK) assert.equal(c.kind, 'blank', at);
        else if (k === ACCESS) {
          assert.equal(c.kind, 'access', at);
          assert.equal(st.status, c.access!.status, at);
          const q = c.access!.path.indexOf('?');
          assert.equal(st.routeKey, `${c.access!.method} ${q >= 0 ? c.access!.path.slice(0, q) : c.access!.path}`, at);
        } else {
          assert.equal(c.kind, k === STATS ? 'stats' : 'vllm', at);
          assert.equal(LEVEL_NAMES[st.level], c.level, at);
          assert.deepEqual([st.month, st.day, st.secOfDay], [c.month, c.day, c.secOfDay], at);
          assert.equal(String(st.stampDigits).padStart(10, '0'), c.stamp!.replace(/\D/g, ''), at);
          if (k === STATS) assert.deepEqual(st.stats, c.stats, at);
        }
      }
    }),
    { numRuns: 3000, seed: 7 },
  );
  // The fast path is exercised, not just the fallback.
  for (const k of [ACCESS, STATS, OTHER])
    assert.ok((counts.get(k) ?? 0) > 150, `kind ${k}: ${JSON.stringify([...counts])}`);
});

test("property: random logs on the fast path's edges give the text path's facts, split anywhere", () => {
  fc.assert(
    fc.property(
      // A small pool of lines repeated in random order (so the templates are reused and then missed).
      fc.array(line, { minLength: 1, maxLength: 6 }),
      fc.array(fc.nat(), { minLength: 1, maxLength: 40 }),
      pick('\n', '\r\n'),
      fc.boolean(),
      fc.array(fc.nat(), { maxLength: 4 }),
      (pool, order, eol, finalEol, cuts) => {
        const text = order.map((i) => pool[i % pool.length]).join(eol) + (finalEol ? eol : '');
        const buf = Buffer.from(text);
        const want = plain(auditText(text));
        assert.deepEqual(plain(auditChunks([buf])), want);
        assert.deepEqual(
          plain(
            auditChunks(
              splitAt(
                buf,
                cuts.map((c) => c % (buf.length + 1)),
              ),
            ),
          ),
          want,
        );
      },
    ),
    { numRuns: 600, seed: 20251129 },
  );
});
