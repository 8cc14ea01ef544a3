'use strict';
// The with* helpers of every recipe: the hold ends however `fn` ends (return,
// throw, a lost hold), an aborted or timed-out acquisition runs nothing and
// leaves no key; plus ping() and misuse of the constructors.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const { Client, Lock, MultiLock, LockError } = require('..');
const { startEtcd, unique, etcdctlKeys } = require('./helpers.js');

let etcd;
let client;
let other;

before(async () => {
  etcd = await startEtcd();
  client = await Client.connect({ endpoints: etcd.endpoints, ttl: 5 });
  other = await Client.connect({ endpoints: etcd.endpoints, ttl: 5 });
});

after(async () => {
  await client.close();
  await other.close();
  await etcd.stop();
});

const del = (key) =>
  new Promise((res, rej) =>
    execFile('etcdctl', ['--endpoints', etcd.endpoints.join(','), 'del', key], { env: { ...process.env, ETCDCTL_API: '3' } }, (e) => (e ? rej(e) : res()))
  );

// Each recipe: how to hold it with the helper, how another client takes the
// same thing (to prove exclusion), and the key(s) of a hold.
const recipes = {
  withLock: { run: (c, n, fn, o) => c.withLock(n, fn, o), take: (c, n, o) => c.lock(n, o), keys: (l) => [l.key] },
  withPermit: { run: (c, n, fn, o) => c.withPermit(n, 1, fn, o), take: (c, n, o) => c.acquirePermit(n, 1, o), keys: (l) => [l.key] },
  withReadLock: { run: (c, n, fn, o) => c.withReadLock(n, fn, o), take: (c, n, o) => c.lock(n, o), keys: (l) => [l.key] },
  withLocks: { run: (c, n, fn, o) => c.withLocks([n, `${n}-b`], fn, o), take: (c, n, o) => c.lockMany([n, `${n}-b`], o), keys: (m) => m.keys },
  withLeadership: { run: (c, n, fn, o) => c.withLeadership(n, 'me', fn, o), take: (c, n, o) => c.campaign(n, 'other', o), keys: (l) => [l.key] },
};

for (const [helper, r] of Object.entries(recipes)) {
  describe(helper, () => {
    it('holds during fn, resolves its result, and releases', async () => {
      const name = unique(helper);
      const out = await r.run(client, name, async (h) => {
        assert.equal(h.isHeld, true);
        // Another client cannot take it meanwhile (a read lock excludes a writer).
        await assert.rejects(r.take(other, name, { timeout: 0 }), (e) => e instanceof LockError && e.code === 'Timeout');
        return 42;
      });
      assert.equal(out, 42);
      const again = await r.take(other, name, { timeout: 2000 });
      await again.unlock();
      assert.deepEqual(await etcdctlKeys(etcd.endpoints, name), []);
    });

    it('a throwing fn rejects with its error and releases', async () => {
      const name = unique(helper);
      const boom = new Error('boom');
      let seen;
      await assert.rejects(
        r.run(client, name, (h) => {
          seen = h;
          throw boom;
        }),
        (e) => e === boom
      );
      assert.equal(seen.isHeld, false);
      assert.deepEqual(await etcdctlKeys(etcd.endpoints, name), []);
    });

    it('an aborted or timed-out acquisition runs nothing and leaves no key', async () => {
      const name = unique(helper);
      const held = await r.take(other, name);
      let ran = 0;
      await assert.rejects(r.run(client, name, () => ran++, { timeout: 100 }), (e) => e.code === 'Timeout');
      const ac = new AbortController();
      const p = r.run(client, name, () => ran++, { signal: ac.signal });
      setTimeout(() => ac.abort(new Error('stop')), 100);
      await assert.rejects(p, (e) => e.code === 'Cancelled');
      assert.equal(ran, 0);
      const keys = await etcdctlKeys(etcd.endpoints, name);
      assert.deepEqual(keys.sort(), r.keys(held).filter((k) => k.startsWith(name)).sort());
      await held.unlock();
    });

    it('a hold lost during fn rejects LockLost after fn returns', async () => {
      const name = unique(helper);
      await assert.rejects(
        r.run(client, name, async (h) => {
          await del(r.keys(h)[0]);
          await h.lost;
          return 'done';
        }),
        (e) => e instanceof LockError && e.code === 'LockLost'
      );
    });
  });
}

describe('ping and constructor misuse', () => {
  it('ping resolves a round trip in ms; a closed client rejects Closed', async () => {
    const c = await Client.connect({ endpoints: etcd.endpoints });
    const ms = await c.ping();
    assert.ok(ms > 0 && ms < 2000, `${ms}`);
    await c.close();
    await assert.rejects(c.ping(), (e) => e.code === 'Closed');
  });

  it('new Lock / new MultiLock / new Client are typed InvalidArgument errors', () => {
    for (const make of [() => new Lock({}), () => new MultiLock({}), () => new Client({})]) {
      assert.throws(make, (e) => e instanceof LockError && e.code === 'InvalidArgument');
    }
  });

  it('a with* helper without a function is InvalidArgument', async () => {
    await assert.rejects(client.withPermit(unique('nofn'), 1, 'x'), (e) => e.code === 'InvalidArgument');
  });
});

describe('MultiLock guarded operations', () => {
  it('put/get/delete need every lock; a lock lost from outside rejects LockLost and leaves the data', async () => {
    const name = unique('mguard');
    const m = await client.lockMany([`${name}-1`, `${name}-2`]);
    await m.put(`${name}-ledger`, '100');
    assert.equal(await m.get(`${name}-ledger`, 'utf8'), '100');
    assert.equal(await m.delete(`${name}-ledger`), true);
    assert.equal(await m.get(`${name}-ledger`), null);
    await assert.rejects(m.put(`${name}-2/inside`, 'x'), (e) => e.code === 'InvalidArgument');
    await m.put(`${name}-ledger`, '1');
    await del(m.keys[1]);
    await assert.rejects(m.put(`${name}-ledger`, '2'), (e) => e.code === 'LockLost' && e.reason === 'KeyDeleted');
    const lost = await m.lost;
    assert.deepEqual(lost, { name: `${name}-2`, reason: 'KeyDeleted' });
    await assert.rejects(m.unlock(), (e) => e.code === 'LockLost');
    const probe = await other.lock(`${name}-probe`);
    assert.equal(await probe.get(`${name}-ledger`, 'utf8'), '1');
    await probe.unlock();
  });
});
