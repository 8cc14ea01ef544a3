'use strict';
// The runnable example is part of the suite: two flash-sale workers (the seed's
// two service instances) sell a limited stock; exactly `stock` units are sold.
const { it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Client } = require('..');
const { ROOT, startEtcd, unique, runNode } = require('./helpers.js');

let etcd;
before(async () => {
  etcd = await startEtcd();
});
after(async () => {
  await etcd.stop();
});

it('examples/flash-sale.js: two workers never oversell', async () => {
  const sale = unique('sale');
  const env = { ETCDLOCK_ENDPOINTS: etcd.endpoints.join(',') };
  const args = [path.join(ROOT, 'examples', 'flash-sale.js'), '--stock', '30', '--requests', '25', '--sale', sale];
  const runs = await Promise.all([runNode(args, { env }), runNode(args, { env })]);
  const reports = runs.map((r) => {
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout.trim());
  });
  assert.equal(reports[0].sold + reports[1].sold, 30);
  assert.equal(reports[0].soldOut + reports[1].soldOut, 20);
  const client = await Client.connect({ endpoints: etcd.endpoints });
  try {
    const [stock, lucky] = await client.withLock(`${sale}/lock`, async (l) => [
      await l.get(`${sale}/stock`, 'utf8'),
      await l.get(`${sale}/lucky`, 'utf8'),
    ]);
    assert.equal(stock, '0');
    assert.equal(lucky, '30');
  } finally {
    await client.close();
  }
});

// The README's code blocks (the recipes block included) run in test/readme.test.js.
