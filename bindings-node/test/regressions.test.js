'use strict';
// Regression tests for core bugs first seen from Node.
const { it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('..');
const { startEtcd, unique } = require('./helpers.js');

let etcd;
before(async () => {
  etcd = await startEtcd();
});
after(async () => {
  await etcd.stop();
});

it(
  // A predecessor's key name deleted and re-created (its owner relocked at once
  // on the same session) between a waiter's read and its watch used to strand
  // both (fixed in core efd7208).
  'tight relock loops on three clients never strand a waiter (key re-created between read and watch)',
  async () => {
    const name = unique('relock');
    const clients = await Promise.all([0, 1, 2].map(() => Client.connect({ endpoints: etcd.endpoints, ttl: 5 })));
    let done = 0;
    try {
      await Promise.all(
        clients.map(async (c) => {
          for (let i = 0; i < 150; i++) {
            const l = await c.lock(name, { timeout: 5000 });
            await l.unlock();
            done++;
          }
        })
      );
    } finally {
      for (const c of clients) await c.close();
    }
    assert.equal(done, 450);
  }
);
