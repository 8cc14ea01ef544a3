'use strict';
// client.list (every lock under a prefix, with kind, holder and local queue)
// and client.release (free a wedged holder by its fencing token), against real etcd.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('..');
const { startEtcd, unique, until } = require('./helpers.js');

let etcd;
const clients = [];

async function connect() {
  const c = await Client.connect({ endpoints: etcd.endpoints, ttl: 5 });
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

describe('list and release', () => {
  it('lists every kind with its holder, language and local queue', async () => {
    const [a, b] = [await connect(), await connect()];
    const name = unique('fleet');
    const held = await a.lock(`${name}/mutex`);
    const waits = Array.from({ length: 5 }, () => b.lock(`${name}/mutex`, { timeout: 30000 }).then((l) => l.unlock()));
    const leader = await a.campaign(`${name}/election`, 'node-a');
    const permit = await a.acquirePermit(`${name}/sem`, 3);
    const reader = await a.readLock(`${name}/rw`);
    let l;
    await until(async () => {
      l = await a.list(`${name}/`);
      return l.length === 4 && l.every((s) => s.kind) && l.some((s) => s.waiters.some((w) => w.localWaiters === 5));
    }, { what: 'every kind and the local queue in the meta records' });
    assert.deepEqual(l.map((s) => s.name), [`${name}/election`, `${name}/mutex`, `${name}/rw`, `${name}/sem`]);
    const by = Object.fromEntries(l.map((s) => [s.name, s]));
    const m = by[`${name}/mutex`];
    assert.equal(m.kind, 'mutex');
    assert.equal(m.holders.length, 1);
    assert.equal(m.waiters.length, 2);
    assert.equal(m.holders[0].fencingToken, held.fencingToken);
    assert.equal(m.holders[0].language, 'node');
    assert.equal(m.holders[0].pid, process.pid);
    assert.equal(m.holders[0].foreign, false);
    assert.deepEqual(m.waiters.map((w) => w.localWaiters), [5, 5]);
    assert.equal(by[`${name}/election`].kind, 'election');
    assert.equal(by[`${name}/election`].holders[0].value.toString(), 'node-a');
    assert.equal(by[`${name}/sem`].kind, 'semaphore');
    assert.equal(by[`${name}/rw`].kind, 'rwlock');
    assert.equal((await a.status(`${name}/mutex`)).kind, 'mutex');
    await held.unlock();
    await Promise.all(waits);
    await leader.resign();
    await permit.unlock();
    await reader.unlock();
    await until(async () => (await a.list(`${name}/`)).length === 0, { what: 'nothing left' });
  });

  it('release by token frees a wedged holder, who learns it', async () => {
    const [holder, admin] = [await connect(), await connect()];
    const name = unique('wedged');
    const l = await holder.lock(name);
    assert.equal(await admin.release(name, l.fencingToken + 1n), false);
    assert.equal(await admin.release(name, l.fencingToken), true);
    const reason = await Promise.race([l.lost, new Promise((r) => setTimeout(() => r('late'), 5000))]);
    assert.equal(reason, 'KeyDeleted');
    assert.equal(await admin.release(name, l.fencingToken), false);
    const next = await admin.tryLock(name);
    assert.ok(next && next.fencingToken > l.fencingToken);
    await next.unlock();
    await assert.rejects(admin.release(name, 'x'), TypeError);
  });
});

describe('prometheus', () => {
  it('exposes core metric names in the text format, with labels', async () => {
    const c = await connect();
    const l = await c.lock(unique('prom'));
    const text = c.prometheus({ service: 'orders' });
    assert.match(text, /^# TYPE etcdlock_acquire_seconds histogram$/m);
    assert.match(text, /^etcdlock_held\{service="orders"\} 1$/m);
    assert.match(text, /^etcdlock_acquire_seconds_count\{service="orders",result="acquired"\} 1$/m);
    await l.unlock();
    assert.match(c.prometheus(), /^etcdlock_held 0$/m);
  });
});
