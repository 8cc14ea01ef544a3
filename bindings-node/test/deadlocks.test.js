'use strict';
// client.deadlocks (cycles of clients waiting on each other, from one read),
// the detectDeadlock acquisition option (the wait that would close a cycle
// rejects `Deadlock`) and client.history (a name's holds and waits from etcd's
// MVCC history), against real etcd.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client, LockError, ErrorCode } = require('..');
const { startEtcd, unique, until } = require('./helpers.js');

let etcd;
const clients = [];

async function connect() {
  const c = await Client.connect({ endpoints: etcd.endpoints, ttl: 10 });
  clients.push(c);
  return c;
}

/** Until `prefix`'s read sees `n` waiting keys (each wait's key has reached etcd). */
async function waitsQueued(c, prefix, n) {
  await until(async () => (await c.deadlocks(prefix)).waits === n, { what: `${n} waits queued under ${prefix}` });
}

before(async () => {
  etcd = await startEtcd();
});

after(async () => {
  for (const c of clients) await c.close();
  await etcd.stop();
});

describe('deadlocks', () => {
  it('finds the cycle of two clients, each holding what the other waits for', async () => {
    const [a, b] = [await connect(), await connect()];
    const base = unique('dl');
    const hx = await a.lock(`${base}/x`);
    const hy = await b.lock(`${base}/y`);
    const none = await a.deadlocks(`${base}/`);
    assert.equal(none.prefix, `${base}/`);
    assert.equal(none.clients, 2);
    assert.equal(none.waits, 0);
    assert.deepEqual(none.cycles, []);
    const wa = a.lock(`${base}/y`, { timeout: 20000 });
    const wb = b.lock(`${base}/x`, { timeout: 20000 });
    await waitsQueued(a, `${base}/`, 2);
    const d = await b.deadlocks(`${base}/`);
    assert.equal(typeof d.revision, 'bigint');
    assert.equal(d.clients, 2);
    assert.equal(d.waits, 2);
    assert.equal(d.cycles.length, 1);
    const edges = d.cycles[0].edges;
    assert.equal(edges.length, 2);
    // Each edge's holder is the next edge's waiter, around the cycle.
    assert.equal(edges[0].holder.leaseId, edges[1].waiter.leaseId);
    assert.equal(edges[1].holder.leaseId, edges[0].waiter.leaseId);
    const byName = Object.fromEntries(edges.map((e) => [e.name, e]));
    assert.deepEqual(Object.keys(byName).sort(), [`${base}/x`, `${base}/y`]);
    const ex = byName[`${base}/x`];
    assert.equal(ex.holder.leaseId, hx.leaseId);
    assert.equal(ex.waiter.leaseId, hy.leaseId);
    assert.equal(ex.fencingToken, hx.fencingToken);
    assert.equal(ex.holderKey, hx.key);
    assert.equal(typeof ex.waiterRevision, 'bigint');
    assert.ok(ex.waiterRevision > hx.fencingToken);
    assert.equal(ex.holder.language, 'node');
    assert.equal(ex.holder.pid, process.pid);
    assert.equal(ex.holder.owner, `${ex.holder.host}:${process.pid}`);
    assert.equal(byName[`${base}/y`].fencingToken, hy.fencingToken);
    // A prefix that holds one of the two names sees no cycle.
    assert.deepEqual((await a.deadlocks(`${base}/x`)).cycles, []);
    // One side gives up: no cycle, and the other is served.
    await hy.unlock();
    const gy = await wa;
    assert.ok(gy.fencingToken > hy.fencingToken);
    assert.deepEqual((await a.deadlocks(`${base}/`)).cycles, []);
    await gy.unlock();
    await hx.unlock();
    await (await wb).unlock();
  });

  it('detectDeadlock: the wait that closes the cycle rejects Deadlock, naming it; the other then acquires', async () => {
    const [a, b] = [await connect(), await connect()];
    const base = unique('dd');
    const hx = await a.lock(`${base}/x`);
    const hy = await b.lock(`${base}/y`);
    const wa = a.lock(`${base}/y`, { timeout: 20000, detectDeadlock: true });
    await waitsQueued(a, `${base}/`, 1);
    const t0 = performance.now();
    const err = await b.lock(`${base}/x`, { timeout: 20000, detectDeadlock: true }).then(
      () => assert.fail('the wait closing the cycle was granted'),
      (e) => e
    );
    const ms = performance.now() - t0;
    assert.ok(err instanceof LockError);
    assert.equal(err.code, ErrorCode.Deadlock);
    assert.equal(err.code, 'Deadlock');
    assert.equal(err.errno, 12);
    assert.equal(err.retryable, false);
    assert.match(err.message, new RegExp(`waits for "${base}/x"`));
    assert.match(err.message, new RegExp(`waits for "${base}/y"`));
    assert.ok(ms < 2000, `Deadlock came ${ms} ms after the wait began`);
    console.log(`detectDeadlock: Deadlock ${ms.toFixed(1)} ms after the closing wait began`);
    // Its key is gone: only a's wait is left, and nothing is a cycle.
    const d = await a.deadlocks(`${base}/`);
    assert.equal(d.waits, 1);
    assert.deepEqual(d.cycles, []);
    await hy.unlock();
    const gy = await wa;
    await gy.unlock();
    await hx.unlock();
  });

  it('detectDeadlock is a boolean; prefix a string', async () => {
    const a = await connect();
    await assert.rejects(a.lock(unique('dd'), { detectDeadlock: 'yes' }), { code: 'InvalidArgument' });
    await assert.rejects(a.tryLock(unique('dd'), { detectDeadlock: 1 }), { code: 'InvalidArgument' });
    await assert.rejects(a.deadlocks(7), TypeError);
    await assert.rejects(a.lockMany([unique('dd')], { detectDeadlock: true }), { code: 'InvalidArgument' });
  });
});

describe('history', () => {
  it('lists every hold and wait with its token, oldest first', async () => {
    const [a, b] = [await connect(), await connect()];
    const name = unique('hist');
    const h1 = await a.lock(name);
    const w = b.lock(name, { timeout: 20000 });
    await waitsQueued(a, name, 1);
    await assert.rejects(a.lock(name, { timeout: 100 }), { code: 'Timeout' });
    await h1.unlock();
    const h2 = await w;
    const live = await a.history(name);
    assert.equal(live.name, name);
    assert.equal(typeof live.revision, 'bigint');
    assert.equal(typeof live.fromRevision, 'bigint');
    assert.ok(live.fromRevision <= h1.fencingToken);
    assert.equal(typeof live.readMs, 'number');
    assert.deepEqual(live.entries.map((e) => e.ended), ['released', 'holding', 'abandoned']);
    const [e1, e2, e3] = live.entries;
    assert.equal(e1.fencingToken, h1.fencingToken);
    assert.equal(e1.leaseId, h1.leaseId);
    assert.equal(e1.key, h1.key);
    assert.equal(e1.kind, 'exclusive');
    assert.equal(e1.language, 'node');
    assert.equal(e1.pid, process.pid);
    assert.equal(e1.grantedRevision, h1.fencingToken);
    assert.equal(typeof e1.endedRevision, 'bigint');
    assert.ok(e1.holdMs >= 0 && e1.endedMs >= e1.grantedMs);
    assert.equal(e2.fencingToken, h2.fencingToken);
    assert.equal(e2.leaseId, h2.leaseId);
    assert.equal(e2.grantedRevision, e1.endedRevision);
    assert.equal(e2.endedRevision, null);
    assert.equal(e2.endedMs, null);
    assert.ok(e2.waitMs >= 0);
    assert.equal(e3.grantedRevision, null);
    assert.equal(e3.holdMs, null);
    assert.equal(e3.leaseId, h1.leaseId);
    await h2.unlock();
    const done = await b.history(name);
    assert.deepEqual(done.entries.map((e) => e.ended), ['released', 'released', 'abandoned']);
    // `since`: an empty window leaves every key out; all of them fit a minute.
    assert.deepEqual((await a.history(name, { since: 0 })).entries, []);
    assert.equal((await a.history(name, { since: 60000 })).entries.length, 3);
    assert.equal((await a.history(name, { since: Infinity })).entries.length, 3);
    assert.deepEqual((await a.history(unique('never'))).entries, []);
  });

  it('refuses a bad name or since', async () => {
    const a = await connect();
    await assert.rejects(a.history(''), { code: 'InvalidArgument' });
    await assert.rejects(a.history(5), { code: 'InvalidArgument' });
    await assert.rejects(a.history('n', { since: -1 }), { code: 'InvalidArgument' });
    await assert.rejects(a.history('n', { since: NaN }), { code: 'InvalidArgument' });
    await assert.rejects(a.history('n', { since: '1m' }), { code: 'InvalidArgument' });
  });
});
