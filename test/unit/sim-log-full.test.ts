/**
 * `inflab sim --log FILE` on a full disk: /dev/full fails every write with ENOSPC (the kernel's
 * full device, so no tmpfs mount is needed). The simulator starts, serves a streamed completion,
 * warns once, and closes; before the fix the first log line's ENOSPC was uncaught.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { test } from 'node:test';
import { startSimServer } from '../../src/core/sim/server';

test(
  'sim --log on a full disk (ENOSPC from /dev/full): starts, serves, warns once',
  { skip: fs.existsSync('/dev/full') ? false : 'no /dev/full on this system to inject ENOSPC' },
  async () => {
    const warnings: string[] = [];
    const sim = await startSimServer({ port: 0, speed: 50, log: '/dev/full', onLogWarning: (m) => warnings.push(m) });
    try {
      for (let i = 0; i < 2; i++) {
        const r = await fetch(`${sim.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'qwen3-8b', prompt: 'hello there', max_tokens: 4, stream: true }),
        });
        assert.equal(r.status, 200);
        assert.match(await r.text(), /\[DONE\]/);
      }
      assert.equal(warnings.length, 1, warnings.join('\n'));
      assert.match(warnings[0], /\/dev\/full cannot be written \(ENOSPC\).*serves on/);
    } finally {
      await sim.close();
    }
  },
);
