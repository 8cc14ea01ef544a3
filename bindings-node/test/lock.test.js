'use strict';
// The core behaviour suite, in JavaScript, against a real etcd from the harness.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client, LockError, ErrorCode } = require('..');
const { ROOT, startEtcd, unique, until, etcdctlKeys, runNode } = require('./helpers.js');

let etcd;
let clients = [];

async function connect(extra = {}) {
  const c = await Client.connect({ endpoints: etcd.endpoints, ttl: 5, ...extra });
  clients.push(c);
  return c;
}

before(async () => {
  etcd = await startEtcd();
});

after(async () => {
  for (const c of clients) await c.close();
  await etcd.stop();
});

describe('lock', () => {
  it('uncontended lock gives key, bigint token and lease, and unlock removes the key', async () => {
    const c = await connect();
    const name = unique('plain');
    const lock = await c.lock(name);
    assert.equal(lock.name, name);
    assert.equal(typeof lock.fencingToken, 'bigint');
    assert.equal(typeof lock.leaseId, 'bigint');
    assert.ok(lock.fencingToken > 0n);
    assert.equal(lock.key, `${name}/${lock.leaseId.toString(16)}`);
    assert.equal(lock.isHeld, true);
    assert.equal(lock.state, 'held');
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `${name}/`), [lock.key]);
    await lock.unlock();
    assert.equal(lock.isHeld, false);
    assert.equal(lock.state, 'released');
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `${name}/`), []);
    await lock.unlock(); // idempotent
  });

  it('tryLock resolves null when held and a Lock when free', async () => {
    const [a, b] = [await connect(), await connect()];
    const name = unique('try');
    const held = await a.tryLock(name);
    assert.ok(held);
    assert.equal(await b.tryLock(name), null);
    // tryLock leaves no waiter key behind
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `${name}/`), [held.key]);
    await held.unlock();
    const mine = await b.tryLock(name);
    assert.ok(mine && mine.isHeld);
    await mine.unlock();
  });

  it('timeout rejects with code Timeout and leaves no waiter key', async () => {
    const [a, b] = [await connect(), await connect()];
    const name = unique('timeout');
    const held = await a.lock(name);
    const t0 = Date.now();
    const err = await b.lock(name, { timeout: 300 }).then(
      () => assert.fail('acquired a held lock'),
      (e) => e
    );
    assert.ok(err instanceof LockError && err instanceof Error);
    assert.equal(err.code, 'Timeout');
    assert.equal(err.code, ErrorCode.Timeout);
    assert.equal(err.errno, 2);
    assert.ok(Date.now() - t0 >= 290, 'gave up too early');
    await until(async () => (await etcdctlKeys(etcd.endpoints, `${name}/`)).length === 1, { what: 'waiter key removal' });
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `${name}/`), [held.key]);
    await held.unlock();
  });

  it('AbortSignal cancels a wait (code Cancelled) and removes its waiter key', async () => {
    const [a, b] = [await connect(), await connect()];
    const name = unique('abort');
    const held = await a.lock(name);
    const ac = new AbortController();
    const pending = b.lock(name, { signal: ac.signal });
    await until(async () => (await b._rawKeys(`${name}/`)).length === 2, { what: 'waiter key' });
    ac.abort(new Error('user gave up'));
    const err = await pending.then(
      () => assert.fail('acquired a held lock'),
      (e) => e
    );
    assert.equal(err.code, 'Cancelled');
    assert.equal(err.cause.message, 'user gave up');
    await until(async () => (await etcdctlKeys(etcd.endpoints, `${name}/`)).length === 1, { what: 'waiter key removal' });
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `${name}/`), [held.key]);
    // an already-aborted signal rejects at once and queues nothing
    const err2 = await b.lock(name, { signal: AbortSignal.abort() }).catch((e) => e);
    assert.equal(err2.code, 'Cancelled');
    await held.unlock();
    // the lock is usable afterwards
    const again = await b.lock(name, { timeout: 5000 });
    await again.unlock();
  });

  it('waiters acquire in FIFO order', async () => {
    const holderClient = await connect();
    const name = unique('fifo');
    const holder = await holderClient.lock(name);
    const order = [];
    const waits = [];
    for (let i = 0; i < 5; i++) {
      const c = await connect();
      waits.push(
        c.lock(name, { timeout: 20000 }).then(async (l) => {
          order.push(i);
          await l.unlock();
        })
      );
      // queue strictly one after the other: wait until waiter i's key exists
      await until(async () => (await holderClient._rawKeys(`${name}/`)).length === i + 2, { what: `waiter ${i} queued` });
    }
    await holder.unlock();
    await Promise.all(waits);
    assert.deepEqual(order, [0, 1, 2, 3, 4]);
  });

  it('fencing tokens strictly increase from one holder to the next', async () => {
    const [a, b] = [await connect(), await connect()];
    const name = unique('fence');
    let last = 0n;
    for (let i = 0; i < 6; i++) {
      const l = await (i % 2 ? a : b).lock(name);
      assert.ok(l.fencingToken > last, `${l.fencingToken} > ${last}`);
      last = l.fencingToken;
      await l.unlock();
    }
  });

  it('guarded put/get/delete take strings and Buffers and are namespaced', async () => {
    const ns = unique('ns') + '/';
    const c = await connect({ namespace: ns });
    const name = unique('guarded');
    const lock = await c.lock(name);
    assert.ok(lock.key.startsWith(ns));
    await lock.put('k1', 'v1');
    await lock.put(Buffer.from('k2'), Buffer.from([0, 1, 2, 255]));
    await lock.put(new Uint8Array([107, 51]), new Uint8Array([1]));
    assert.equal(await lock.get('k1', 'utf8'), 'v1');
    assert.deepEqual(await lock.get('k2'), Buffer.from([0, 1, 2, 255]));
    assert.deepEqual(await lock.get('k3'), Buffer.from([1]));
    assert.equal(await lock.get('missing'), null);
    assert.deepEqual((await etcdctlKeys(etcd.endpoints, ns)).filter((k) => !k.includes('/' + name)).sort(), [ns + 'k1', ns + 'k2', ns + 'k3']);
    assert.equal(await lock.delete('k1'), true);
    assert.equal(await lock.delete('k1'), false);
    await lock.unlock();
    const err = await lock.put('k1', 'late').catch((e) => e);
    assert.equal(err.code, 'NotHeld');
  });

  it('withLock releases after success and after a throw', async () => {
    const c = await connect();
    const name = unique('with');
    let seen;
    const out = await c.withLock(name, async (lock) => {
      seen = lock;
      assert.equal(lock.isHeld, true);
      return 42;
    });
    assert.equal(out, 42);
    assert.equal(seen.isHeld, false);
    const boom = new Error('boom');
    await assert.rejects(
      c.withLock(name, async (lock) => {
        seen = lock;
        throw boom;
      }),
      (e) => e === boom
    );
    assert.equal(seen.isHeld, false);
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `${name}/`), []);
  });

  it('[Symbol.asyncDispose] releases (what `await using` calls; see types.test.js for the syntax)', async () => {
    const c = await connect();
    const name = unique('dispose');
    const lock = await c.lock(name);
    assert.equal(typeof lock[Symbol.asyncDispose], 'function');
    await lock[Symbol.asyncDispose]();
    assert.equal(lock.isHeld, false);
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `${name}/`), []);
    const next = await c.tryLock(name);
    assert.ok(next);
    await next.unlock();
  });

  it('an outside delete of the key is reported: lost, signal, isHeld, guarded put rejected', async () => {
    const c = await connect();
    const name = unique('deleted');
    const lock = await c.lock(name);
    const raw = await connect();
    // delete our key behind the lock's back, as an operator would
    const { execFileSync } = require('node:child_process');
    execFileSync('etcdctl', ['--endpoints', etcd.endpoints.join(','), 'del', lock.key], { env: { ...process.env, ETCDCTL_API: '3' } });
    assert.equal(await lock.lost, 'KeyDeleted');
    assert.equal(lock.signal.aborted, true);
    assert.equal(lock.signal.reason.code, 'LockLost');
    assert.equal(lock.isHeld, false);
    const err = await lock.put('x', 'y').catch((e) => e);
    assert.equal(err.code, 'LockLost');
    assert.equal(err.reason, 'KeyDeleted');
    const uerr = await lock.unlock().catch((e) => e);
    assert.equal(uerr.code, 'LockLost');
    void raw;
  });

  it('close() ends every hold with ClientClosed and later calls reject Closed', async () => {
    const c = await Client.connect({ endpoints: etcd.endpoints, ttl: 5 });
    const name = unique('closed');
    const lock = await c.lock(name);
    await c.close();
    assert.equal(c.closed, true);
    assert.equal(await lock.lost, 'ClientClosed');
    assert.equal(lock.isHeld, false);
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `${name}/`), []);
    assert.equal((await c.lock(name).catch((e) => e)).code, 'Closed');
    assert.equal((await c.tryLock(name).catch((e) => e)).code, 'Closed');
    await c.close(); // idempotent
  });

  it('Client.connect() without endpoints takes the ETCDLOCK_* environment defaults', async () => {
    const ns = unique('envns') + '/';
    const script = `
      const { Client } = require(${JSON.stringify(ROOT)});
      (async () => {
        const out = [];
        for (const opts of [undefined, { namespace: 'override/' }]) {
          const c = await Client.connect(opts);
          const l = await c.lock('x');
          out.push({ key: l.key, ttl: c.ttl });
          await l.unlock();
          await c.close();
        }
        console.log(JSON.stringify(out));
      })().catch((e) => console.log(JSON.stringify({ code: e.code })));`;
    const env = { ETCDLOCK_ENDPOINTS: etcd.endpoints.join(','), ETCDLOCK_NAMESPACE: ns, ETCDLOCK_TTL: '6' };
    const r = await runNode(['-e', script], { env });
    assert.equal(r.code, 0, r.stderr);
    const [fromEnv, overridden] = JSON.parse(r.stdout);
    assert.ok(fromEnv.key.startsWith(ns + 'x/'), fromEnv.key);
    assert.equal(fromEnv.ttl, 6);
    assert.ok(overridden.key.startsWith('override/x/'), overridden.key);
    assert.equal(overridden.ttl, 6);
    const r2 = await runNode(['-e', script], { env: { ...env, ETCDLOCK_TTL: 'soon' } });
    assert.deepEqual(JSON.parse(r2.stdout), { code: 'InvalidArgument' });
  });

  it('close() while a lock() waits rejects it and leaves no waiter key', async () => {
    const holder = await connect();
    const waiter = await Client.connect({ endpoints: etcd.endpoints, ttl: 5 });
    const name = unique('closewait');
    const held = await holder.lock(name);
    const pending = waiter.lock(name, { timeout: Infinity }).catch((e) => e);
    await until(async () => (await holder._rawKeys(`${name}/`)).length === 2, { what: 'waiter key' });
    await waiter.close();
    const err = await pending;
    // The core reports a waiter whose session was closed as LockLost(ClientClosed).
    assert.ok(err.code === 'Closed' || (err.code === 'LockLost' && err.reason === 'ClientClosed'), `${err.code} ${err.reason}`);
    await until(async () => (await etcdctlKeys(etcd.endpoints, `${name}/`)).length === 1, { what: 'waiter key removal' });
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `${name}/`), [held.key]);
    await held.unlock();
  });

  it('ttl reports the effective lease TTL', async () => {
    const c = await connect({ ttl: 7 });
    assert.equal(c.ttl, 7);
  });

  it('metrics() counts acquisitions, holds and losses (the core source, as in every language)', async () => {
    const c = await connect();
    const other = await connect();
    const name = unique('metrics');
    let m = c.metrics();
    assert.deepEqual(Object.keys(m.acquisitions).sort(), ['acquired', 'cancelled', 'error', 'timeout', 'would_block']);
    assert.deepEqual(Object.keys(m.lost).sort(), ['ClientClosed', 'ConnectionLost', 'KeyDeleted', 'LeaseExpired']);
    assert.deepEqual([m.held, m.waiting, m.holdsEnded], [0, 0, 0]);
    const lock = await c.lock(name);
    assert.equal(c.metrics().held, 1);
    assert.equal(await other.tryLock(name), null);
    await lock.unlock();
    m = c.metrics();
    assert.deepEqual([m.held, m.holdsEnded, m.acquisitions.acquired.count], [0, 1, 1]);
    assert.equal(other.metrics().acquisitions.would_block.count, 1);
    const again = await c.lock(name);
    const { execFileSync } = require('node:child_process');
    execFileSync('etcdctl', ['--endpoints', etcd.endpoints.join(','), 'del', again.key], { env: { ...process.env, ETCDCTL_API: '3' } });
    assert.equal(await again.lost, 'KeyDeleted');
    m = c.metrics();
    assert.deepEqual([m.lost.KeyDeleted, m.held, m.holdsEnded], [1, 0, 2]);
  });

  it('metrics() memberFailures: a dead endpoint listed first, lazily connected, counts one failure (the first request), none after', async () => {
    // Port 1: nothing listens there, and no free-port pick hands it to another process.
    // Lazily: an eager connect probes every member at once and keeps the first to
    // answer, so whether the dead one's refusal counts first is a race.
    const dead = '127.0.0.1:1';
    const c = await connect({ endpoints: [dead, ...etcd.endpoints], lazyConnect: true });
    const afterConnect = c.metrics().memberFailures;
    const lock = await c.lock(unique('member-failures'));
    await lock.unlock();
    assert.deepEqual([afterConnect, c.metrics().memberFailures], [0, 1]);
    const healthy = await connect();
    const m = healthy.metrics();
    assert.equal(m.memberFailures, 0);
    // The record's fields, decoded by name: exactly what index.d.ts declares for Metrics.
    assert.deepEqual(Object.keys(m).sort(), [
      'acquisitions', 'held', 'heldMs', 'holdMs', 'holdsEnded', 'keepaliveRttMs', 'keepalives', 'lost',
      'memberFailures', 'waitHistogram', 'waiting',
    ]);
    assert.deepEqual(Object.keys(m.acquisitions.acquired).sort(), ['count', 'waitMs']);
    assert.deepEqual(m.waitHistogram.acquired.length, 13);
  });
});
