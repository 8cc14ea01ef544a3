'use strict';
// Reentrancy (core `lock_reentrant`): the owner is an async context (a
// reentrant withLock's callback) or a ReentrantLock object; a re-entry is
// another handle of the same hold, and a lost hold is never re-entered.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client, ReentrantLock } = require('..');
const { startEtcd, unique, etcdctlKeys } = require('./helpers.js');

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

const code = (c) => (e) => {
  assert.equal(e.code, c, e.stack);
  return true;
};

describe('reentrancy by async context', () => {
  it('a reentrant lock inside a reentrant withLock re-enters the hold: same token, one key, held until the outer release', async () => {
    const [a, b] = [await connect(), await connect()];
    const name = unique('ctx');
    const r = await a.withLock(
      name,
      async (outer) => {
        const inner = await a.lock(name, { reentrant: true, timeout: 0 });
        assert.equal(inner.fencingToken, outer.fencingToken);
        assert.equal(inner.key, outer.key);
        assert.deepEqual(await etcdctlKeys(etcd.endpoints, `${name}/`), [outer.key]);
        // A nested withLock and a tryLock re-enter too.
        const nested = await a.withLock(name, async (l) => l.fencingToken, { reentrant: true });
        assert.equal(nested, outer.fencingToken);
        const tried = await a.tryLock(name, { reentrant: true });
        assert.equal(tried.fencingToken, outer.fencingToken);
        await tried.unlock();
        assert.equal(await b.tryLock(name), null);
        await inner.unlock();
        assert.equal(inner.state, 'released');
        assert.equal(outer.state, 'held');
        assert.equal(await b.tryLock(name), null);
        return 'done';
      },
      { reentrant: true }
    );
    assert.equal(r, 'done');
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `${name}/`), []);
  });

  it('a timer started inside the callback is the same owner', async () => {
    const c = await connect();
    const name = unique('timer');
    await c.withLock(
      name,
      async (outer) => {
        const fromTimer = await new Promise((resolve, reject) => {
          setTimeout(() => c.tryLock(name, { reentrant: true }).then(resolve, reject), 0);
        });
        assert.equal(fromTimer.fencingToken, outer.fencingToken);
        await fromTimer.unlock();
      },
      { reentrant: true }
    );
  });

  it('another async context waits: its one try times out and writes nothing', async () => {
    const c = await connect();
    const name = unique('other');
    let release;
    const gate = new Promise((r) => (release = r));
    let entered;
    const inside = new Promise((r) => (entered = r));
    const first = c.withLock(
      name,
      async () => {
        entered();
        await gate;
      },
      { reentrant: true }
    );
    await inside;
    await assert.rejects(c.withLock(name, async () => assert.fail('entered'), { reentrant: true, timeout: 0 }), code('Timeout'));
    // Outside any reentrant context each call is an owner of its own.
    await assert.rejects(c.lock(name, { reentrant: true, timeout: 0 }), code('Timeout'));
    assert.equal((await etcdctlKeys(etcd.endpoints, `${name}/`)).length, 1);
    release();
    await first;
    const l = await c.lock(name, { reentrant: true, timeout: 5000 });
    await l.unlock();
  });

  it('bad reentrant options are InvalidArgument', async () => {
    const c = await connect();
    await assert.rejects(c.lock(unique('bad'), { reentrant: 'yes' }), code('InvalidArgument'));
    await assert.rejects(c.tryLock(unique('bad'), { reentrant: 1 }), code('InvalidArgument'));
    await assert.rejects(c.acquirePermit(unique('bad'), 2, { reentrant: true }), code('InvalidArgument'));
    await assert.rejects(c.lock('', { reentrant: true }), code('InvalidArgument'));
  });
});

describe('ReentrantLock', () => {
  it('counts holds: lock twice, unlock twice; other objects are other owners', async () => {
    const c = await connect();
    const name = unique('rl');
    const rl = c.reentrantLock(name);
    assert.ok(rl instanceof ReentrantLock);
    assert.throws(() => new ReentrantLock(name), (e) => e.code === 'InvalidArgument');
    assert.equal(rl.holdCount, 0);
    assert.equal(rl.isHeld, false);
    const g1 = await rl.lock();
    const g2 = await rl.tryLock();
    assert.equal(g2.fencingToken, g1.fencingToken);
    assert.equal(rl.holdCount, 2);
    assert.equal(rl.isHeld, true);
    const other = c.reentrantLock(name);
    assert.equal(await other.tryLock(), null);
    await assert.rejects(other.lock({ timeout: 0 }), code('Timeout'));
    assert.equal(other.holdCount, 0);
    await assert.rejects(other.unlock(), code('NotHeld'));
    assert.equal((await etcdctlKeys(etcd.endpoints, `${name}/`)).length, 1);
    await rl.unlock();
    assert.equal(rl.holdCount, 1);
    assert.equal(g2.state, 'released');
    assert.equal(g1.state, 'held');
    await rl.unlock();
    assert.equal(g1.state, 'released');
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `${name}/`), []);
    const fresh = await other.lock({ timeout: 5000 });
    assert.ok(fresh.fencingToken > g1.fencingToken);
    assert.equal(await other.withLock(async (l) => l.fencingToken), fresh.fencingToken);
    assert.equal(other.holdCount, 1);
    await other.unlock();
  });

  it('a lost hold is not re-entered until every handle is unlocked; then a fresh hold', async () => {
    const c = await connect();
    const name = unique('rlost');
    const rl = c.reentrantLock(name);
    const g1 = await rl.lock();
    await rl.lock();
    await etcdctlDel(`${name}/`);
    assert.equal(await g1.lost, 'KeyDeleted');
    await assert.rejects(rl.lock({ timeout: 0 }), (e) => e.code === 'LockLost' && e.reason === 'KeyDeleted');
    await assert.rejects(rl.tryLock(), code('LockLost'));
    assert.equal(rl.holdCount, 2);
    await assert.rejects(rl.unlock(), code('LockLost'));
    await assert.rejects(rl.lock({ timeout: 0 }), code('LockLost'));
    await assert.rejects(rl.unlock(), code('LockLost'));
    assert.equal(rl.holdCount, 0);
    const g2 = await rl.lock({ timeout: 5000 });
    assert.ok(g2.fencingToken > g1.fencingToken);
    await rl.unlock();
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `${name}/`), []);
  });
});

function etcdctlDel(prefix) {
  const { execFile } = require('node:child_process');
  return new Promise((resolve, reject) =>
    execFile('etcdctl', ['--endpoints', etcd.endpoints.join(','), 'del', '--prefix', prefix], { env: { ...process.env, ETCDCTL_API: '3' } }, (err) =>
      err ? reject(err) : resolve()
    )
  );
}
