'use strict';
// The renewal-failing signal: etcd hung (SIGSTOP) for 2.5 s under a holder with
// TTL 5 s makes the renewal fail (with the ms left) and recover; the hold lives.
// The same for a multi-lock, whose locks share the client's session.
const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('..');
const { startEtcd } = require('./helpers.js');

describe('renewal', () => {
  it('fails while etcd hangs and recovers, and the hold survives', { timeout: 30000 }, async () => {
    const etcd = await startEtcd();
    try {
      const client = await Client.connect({ endpoints: etcd.endpoints, ttl: 5 });
      const lock = await client.lock('renewal');
      assert.deepEqual(lock.renewal, { failing: false });
      assert.throws(() => lock.onRenewal(3), (e) => e.code === 'InvalidArgument');
      const events = [];
      let wake;
      lock.onRenewal((r) => {
        events.push(r);
        if (wake) wake();
      });
      const next = (n, ms) =>
        new Promise((resolve, reject) => {
          const t = setTimeout(() => reject(new Error(`no renewal event #${n} within ${ms} ms: ${JSON.stringify(events)}`)), ms);
          const check = () => {
            if (events.length >= n) {
              clearTimeout(t);
              resolve(events[n - 1]);
            }
          };
          wake = check;
          check();
        });
      const t0 = performance.now();
      assert.deepEqual(await etcd.command('pause 0 2500'), { ok: true });
      const failing = await next(1, 2500);
      const at = performance.now() - t0;
      assert.equal(failing.failing, true);
      assert.ok(failing.validForMs > 0 && failing.validForMs < 4500, JSON.stringify(failing));
      assert.equal(lock.renewal.failing, true);
      assert.ok(lock.isHeld);
      assert.deepEqual(await next(2, 3000), { failing: false });
      assert.deepEqual(lock.renewal, { failing: false });
      assert.ok(lock.isHeld);
      console.log(`renewal failing ${at.toFixed(0)} ms after the hang (${failing.validForMs.toFixed(0)} ms left), recovered`);
      await lock.unlock();
      await client.close();
    } finally {
      await etcd.stop();
    }
  });

  it('a multi-lock fails and recovers with its session, and its hold survives', { timeout: 30000 }, async () => {
    const etcd = await startEtcd();
    try {
      const client = await Client.connect({ endpoints: etcd.endpoints, ttl: 5 });
      const many = await client.lockMany(['renewal-a', 'renewal-b']);
      assert.deepEqual(many.renewal, { failing: false });
      assert.throws(() => many.onRenewal(null), (e) => e.code === 'InvalidArgument');
      const events = [];
      let wake;
      many.onRenewal((r) => {
        events.push(r);
        if (wake) wake();
      });
      const next = (n, ms) =>
        new Promise((resolve, reject) => {
          const t = setTimeout(() => reject(new Error(`no renewal event #${n} within ${ms} ms: ${JSON.stringify(events)}`)), ms);
          const check = () => {
            if (events.length >= n) {
              clearTimeout(t);
              resolve(events[n - 1]);
            }
          };
          wake = check;
          check();
        });
      assert.deepEqual(await etcd.command('pause 0 2500'), { ok: true });
      const failing = await next(1, 2500);
      assert.equal(failing.failing, true);
      assert.ok(failing.validForMs > 0 && failing.validForMs < 4500, JSON.stringify(failing));
      assert.equal(many.renewal.failing, true);
      assert.ok(many.renewal.validForMs > 0 && many.renewal.validForMs < 4500, JSON.stringify(many.renewal));
      assert.ok(many.isHeld);
      assert.deepEqual(await next(2, 3000), { failing: false });
      assert.deepEqual(many.renewal, { failing: false });
      assert.ok(many.isHeld);
      assert.equal(many.state, 'held');
      await many.unlock();
      assert.equal(many.state, 'released');
      assert.equal(events.length, 2);
      await client.close();
    } finally {
      await etcd.stop();
    }
  });
});
