import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SimEndpoints } from '../../src/core/sim/endpoints';
import { defaultSimSetup } from '../../src/core/sim/server';
import { findGpu } from '../../src/core/catalog';

test('endpoint: sim starts one server per distinct setup, shared by cells with the same setup, and closes them', async () => {
  const sims = new SimEndpoints(1);
  const a100 = defaultSimSetup();
  const h100 = { ...a100, gpu: findGpu('h100-sxm')! };
  const first = await sims.url(a100);
  try {
    assert.equal(await sims.url({ ...a100 }), first, 'the same setup reuses its server (and its prefix cache)');
    const other = await sims.url(h100);
    assert.notEqual(other, first, 'another GPU gets its own simulated server');
    for (const u of [first, other]) assert.equal((await fetch(`${u}/health`)).status, 200);
  } finally {
    await sims.close();
  }
  await assert.rejects(fetch(`${first}/health`), 'closed servers refuse connections');
});
