/**
 * A minimal test runner for the extension host (no mocha needed): tests run in order, each with a
 * timeout; every result is printed as it ends and appended to INFLAB_TEST_LOG when set (so the
 * harness outside the browser can read it), and the last line is exactly "N passed, N failed".
 */
import * as fs from 'node:fs';

export interface TestCase {
  name: string;
  fn: () => Promise<void> | void;
  timeoutMs?: number;
  skip?: string | false;
}

const logFile = process.env.INFLAB_TEST_LOG;

export function say(line: string): void {
  console.log(line);
  if (logFile) fs.appendFileSync(logFile, line + '\n');
}

export async function runTests(tests: TestCase[]): Promise<{ passed: number; failed: number; skipped: number }> {
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  for (const t of tests) {
    if (t.skip) {
      skipped++;
      say(`- skip ${t.name} (${t.skip})`);
      continue;
    }
    const t0 = Date.now();
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([
        Promise.resolve().then(t.fn),
        new Promise(
          (_r, rej) =>
            (timer = setTimeout(
              () => rej(new Error(`timed out after ${t.timeoutMs ?? 60_000} ms`)),
              t.timeoutMs ?? 60_000,
            )),
        ),
      ]);
      passed++;
      say(`✔ ${t.name} (${Date.now() - t0} ms)`);
    } catch (e) {
      failed++;
      const err = e as Error;
      say(
        `✖ ${t.name} (${Date.now() - t0} ms)\n    ${(err?.stack ?? String(e)).split('\n').slice(0, 6).join('\n    ')}`,
      );
    } finally {
      clearTimeout(timer);
    }
  }
  say(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
  return { passed, failed, skipped };
}
