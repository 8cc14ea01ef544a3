'use strict';
// The fault controls of an in-process store (MemStore), from Node: each
// travels the real path (core/tests/mem_faults.rs shows the same in Rust),
// so a holder sees what it would see on etcd: the renewal failing first,
// then the loss with its reason, waiters granted in order, calls ending at
// their bounds. Bad arguments throw LockError InvalidArgument.
const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { Client, MemStore, LockError } = require('..');
const { unique, until } = require('./helpers.js');

/** A store of its own for one test (the name says which). */
const fresh = (what) => MemStore.open(unique(`mem-${what}`).slice(0, 64));

const connect = (store, ttl = 15) => Client.connect({ endpoints: [store.endpoint], ttl, requestTimeout: 1000 });

/** `p`, or a rejection naming `what` once `ms` pass. */
function within(p, ms, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** The first renewal event of `lock` (it fires when the renewal starts failing). */
function firstRenewal(lock) {
  return new Promise((resolve) => lock.onRenewal(resolve));
}

/** What a sync call threw (it must throw). */
function thrown(fn) {
  try {
    fn();
  } catch (e) {
    return e;
  }
  assert.fail('did not throw');
}

describe('MemStore', () => {
  it('opens the store of a name: endpoint, name, the same store twice, mem:// for the empty name', async () => {
    const store = fresh('open');
    assert.match(store.endpoint, /^mem:\/\/mem-open-/);
    assert.equal(store.endpoint, `mem://${store.name}`);
    assert.equal(String(store), `MemStore(${store.endpoint})`);
    assert.equal(MemStore.open().endpoint, 'mem://');
    assert.equal(MemStore.open('').name, '');
    const client = await connect(store);
    try {
      const lock = await client.lock('job', { metadata: { who: 'test' } });
      // Another handle on the same name sees the same keys.
      const [k] = MemStore.open(store.name).keys(lock.key);
      assert.equal(k.key, lock.key);
      assert.equal(k.lease, lock.leaseId);
      assert.equal(k.createRevision, lock.fencingToken);
      assert.equal(typeof k.modRevision, 'bigint');
      assert.ok(Buffer.isBuffer(k.value));
      assert.deepEqual(store.keys('no-such-prefix/'), []);
      assert.ok(store.keys().some((x) => x.key === lock.key), 'every key for no prefix');
      assert.deepEqual(store.keys(Buffer.from(lock.key)).map((x) => x.key), [lock.key]);
      await lock.unlock();
      assert.deepEqual(store.keys(lock.key), [], 'released: the key is gone');
    } finally {
      await client.close();
    }
  });

  it('expireLease: the holder loses with LeaseExpired and the waiter is granted', { timeout: 20000 }, async () => {
    const store = fresh('expire');
    const a = await connect(store);
    const b = await connect(store);
    try {
      const held = await a.lock('job');
      const waiting = b.lock('job', { timeout: 10000 });
      // The waiter's key is in the store behind the holder's (a status read, not a sleep).
      await until(async () => (await a.status('job')).waiters.length === 1, { timeout: 5000, what: 'the waiter queued' });
      assert.equal(store.expireLease(held.leaseId), true);
      assert.equal(store.expireLease(held.leaseId), false, 'gone already');
      assert.equal(await within(held.lost, 5000, 'the loss'), 'LeaseExpired');
      assert.equal(held.state, 'LeaseExpired');
      assert.equal(held.isHeld, false);
      assert.equal(held.signal.reason.code, 'LockLost');
      assert.equal(held.signal.reason.reason, 'LeaseExpired');
      const next = await within(waiting, 5000, 'the waiter granted');
      assert.ok(next.fencingToken > held.fencingToken);
      await assert.rejects(held.unlock(), (e) => e.code === 'LockLost' && e.reason === 'LeaseExpired');
      await next.unlock();
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('deleteKey: the holder loses with KeyDeleted', { timeout: 20000 }, async () => {
    const store = fresh('delete');
    const a = await connect(store);
    try {
      const held = await a.lock('job');
      assert.deepEqual(store.keys(held.key).map((k) => k.lease), [held.leaseId]);
      assert.equal(store.deleteKey(held.key), true);
      assert.equal(store.deleteKey(held.key), false, 'no such key any more');
      assert.equal(await within(held.lost, 5000, 'the loss'), 'KeyDeleted');
      await assert.rejects(held.unlock(), (e) => e.code === 'LockLost' && e.reason === 'KeyDeleted');
      // The lease lives on: the client takes the lock again.
      const again = await a.lock('job', { timeout: 5000 });
      assert.equal(again.leaseId, held.leaseId);
      await again.unlock();
      // A key as bytes.
      const other = await a.lock('other');
      assert.equal(store.deleteKey(Buffer.from(other.key)), true);
      assert.equal(await within(other.lost, 5000, 'the loss'), 'KeyDeleted');
    } finally {
      await a.close();
    }
  });

  it('silence: the hold turns failing, then is lost with ConnectionLost; calls end at their bounds', { timeout: 30000 }, async () => {
    const store = fresh('silence');
    const a = await connect(store, 3);
    try {
      const held = await a.lock('job');
      const events = [];
      const failing = firstRenewal(held);
      failing.then(() => events.push('failing'));
      held.lost.then((r) => events.push(r));
      const t0 = performance.now();
      store.silence(60000);
      // A lock call ends at its timeout, a one-try at the request timeout.
      const [timed, tried] = await Promise.all([
        a.lock('other', { timeout: 500 }).then(() => 'ok', (e) => e.code),
        a.tryLock('other').then(() => 'ok', (e) => e.code),
      ]);
      assert.deepEqual([timed, tried], ['Timeout', 'Unavailable']);
      assert.ok(performance.now() - t0 < 1700, `calls returned after ${(performance.now() - t0).toFixed(0)} ms`);
      // At risk first (still held), then lost.
      const r = await within(failing, 5000, 'the renewal failing');
      assert.equal(r.failing, true);
      assert.ok(r.validForMs > 0 && r.validForMs < 3000, JSON.stringify(r));
      assert.equal(held.isHeld, true, 'failing is not lost');
      assert.equal(await within(held.lost, 5000, 'the loss'), 'ConnectionLost');
      assert.ok(performance.now() - t0 < 4000, `lost within the TTL: ${(performance.now() - t0).toFixed(0)} ms`);
      assert.deepEqual(events, ['failing', 'ConnectionLost']);
      await assert.rejects(held.unlock(), (e) => e.code === 'LockLost' && e.reason === 'ConnectionLost');
      // The store answers again: a new hold is granted.
      store.resume();
      const again = await a.lock('job', { timeout: 10000 });
      assert.ok(again.fencingToken > held.fencingToken);
      await again.unlock();
    } finally {
      store.resume();
      await a.close();
    }
  });

  it('stall: one client turns failing then loses with ConnectionLost while the others go on', { timeout: 30000 }, async () => {
    const store = fresh('stall');
    const a = await connect(store, 3);
    const b = await connect(store, 3);
    try {
      const held = await a.lock('job');
      const events = [];
      const failing = firstRenewal(held);
      failing.then(() => events.push('failing'));
      held.lost.then((r) => events.push(r));
      const t0 = performance.now();
      store.stall(held.leaseId, 60000);
      // b goes on while a is stalled.
      const other = await b.lock('other', { timeout: 1000 });
      assert.ok(performance.now() - t0 < 1000, `b was served in ${(performance.now() - t0).toFixed(0)} ms`);
      assert.equal((await within(failing, 5000, 'the renewal failing')).failing, true);
      assert.equal(await within(held.lost, 6000, 'the loss'), 'ConnectionLost');
      assert.deepEqual(events, ['failing', 'ConnectionLost']);
      // Once a's lease expires in the store, b is granted a's lock.
      const next = await b.lock('job', { timeout: 6000 });
      assert.ok(next.fencingToken > held.fencingToken);
      store.stall(held.leaseId, 0);
      await next.unlock();
      await other.unlock();
    } finally {
      store.resume();
      await a.close();
      await b.close();
    }
  });

  it('a MultiLock: its lease expired loses it with LeaseExpired', { timeout: 20000 }, async () => {
    const store = fresh('multi');
    const a = await connect(store);
    try {
      const many = await a.lockMany(['x', 'y']);
      assert.equal(typeof many.leaseId, 'bigint');
      assert.deepEqual(store.keys(many.keys[0]).map((k) => k.lease), [many.leaseId]);
      assert.equal(store.expireLease(many.leaseId), true);
      assert.equal((await within(many.lost, 5000, 'the loss')).reason, 'LeaseExpired');
    } finally {
      await a.close();
    }
  });

  it('bad arguments throw LockError InvalidArgument, never crash', () => {
    const store = fresh('input');
    const bad = [
      () => MemStore.open('a/b'),
      () => MemStore.open('x'.repeat(65)),
      () => MemStore.open(3),
      () => MemStore.open(null),
      () => MemStore.open('\ud800'),
      () => new MemStore(),
      () => new MemStore({}),
      () => store.expireLease('1'),
      () => store.expireLease(1.5),
      () => store.expireLease(2n ** 63n),
      () => store.expireLease(undefined),
      () => store.deleteKey(null),
      () => store.deleteKey(42),
      () => store.deleteKey('\udc00'),
      () => store.silence(-1),
      () => store.silence(NaN),
      () => store.silence(Infinity),
      () => store.silence('100'),
      () => store.silence(),
      () => store.silence(1e13), // more than a century
      () => store.stall(1n, -5),
      () => store.stall(1n, NaN),
      () => store.stall(1n),
      () => store.stall(null, 100),
      () => store.keys(5),
      () => store.keys(null),
    ];
    for (const [i, fn] of bad.entries()) {
      const e = thrown(fn);
      assert.ok(e instanceof LockError, `#${i}: not a LockError: ${e && e.stack}`);
      assert.equal(e.code, 'InvalidArgument', `#${i}: ${e.message}`);
    }
    assert.match(thrown(() => store.silence(-1)).message, /silence: ms must be a finite, non-negative number/);
    assert.match(thrown(() => MemStore.open('a/b')).message, /up to 64 of A-Z a-z 0-9 \. _ -/);
    // Edge values that are fine: a lease the store never had, a negative id, zero ends nothing.
    assert.equal(store.expireLease(12345n), false);
    assert.equal(store.expireLease(-1n), false);
    assert.equal(store.expireLease(7), false);
    assert.equal(store.deleteKey(''), false);
    store.silence(0);
    store.stall(1n, 0);
    store.resume();
  });
});
