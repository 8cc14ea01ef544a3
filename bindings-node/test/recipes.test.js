'use strict';
// Semaphore, read-write lock, multi-lock, election and the queue view through
// the Node API, against real etcd. The recipes are core's (tested at scale in
// core/tests); these pin the JavaScript shapes, errors and cleanup.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const readline = require('node:readline');
const { Client, Lock, Leadership, MultiLock, LockError, MAX_PERMITS, MAX_MULTI } = require('..');
const { startEtcd, unique, until, etcdctlKeys } = require('./helpers.js');

let etcd;
const clients = [];

async function connect() {
  const c = await Client.connect({ endpoints: etcd.endpoints, ttl: 5 });
  clients.push(c);
  return c;
}

const keys = (prefix) => etcdctlKeys(etcd.endpoints, prefix);

async function rejectsWith(p, code) {
  await assert.rejects(p, (e) => e instanceof LockError && e.code === code, `expected ${code}`);
}

before(async () => {
  etcd = await startEtcd();
});

after(async () => {
  for (const c of clients) await c.close();
  await etcd.stop();
});

describe('semaphore', () => {
  it('three permits are held at once, a fourth waits (one try writes nothing)', async () => {
    const [a, b] = [await connect(), await connect()];
    const name = unique('sem');
    const held = await Promise.all([a.acquirePermit(name, 3), b.acquirePermit(name, 3), a.acquirePermit(name, 3)]);
    assert.equal(new Set(held.map((p) => p.key)).size, 3);
    assert.ok(held.every((p) => p instanceof Lock && p.isHeld));
    assert.deepEqual((await keys(`${name}/`)).sort(), held.map((p) => p.key).sort());
    await rejectsWith(b.acquirePermit(name, 3, { timeout: 0 }), 'Timeout');
    assert.equal((await keys(`${name}/`)).length, 3);
    const fourth = b.acquirePermit(name, 3, { timeout: 20000 });
    await until(async () => (await keys(`${name}/`)).length === 4, { what: "the fourth contender's key" });
    held.sort((x, y) => (x.fencingToken < y.fencingToken ? -1 : 1));
    await held[0].unlock();
    const got = await fourth;
    assert.ok(got.isHeld);
    for (const p of [...held.slice(1), got]) await p.unlock();
    assert.deepEqual(await keys(`${name}/`), []);
  });

  it('never more holders than permits, under contention', async () => {
    const cs = [await connect(), await connect(), await connect()];
    const name = unique('sem-many');
    let active = 0;
    let peak = 0;
    let done = 0;
    await Promise.all(
      Array.from({ length: 9 }, async (_, i) => {
        for (let r = 0; r < 4; r++) {
          const permit = await cs[i % 3].acquirePermit(name, 3, { timeout: 30000 });
          try {
            active++;
            peak = Math.max(peak, active);
            await permit.put(`${name}-ledger/${i}`, String(r)); // guarded: proves the permit is ours in etcd
            active--;
            done++;
          } finally {
            await permit.unlock();
          }
        }
      }),
    );
    assert.equal(done, 36);
    assert.ok(peak >= 1 && peak <= 3, `peak ${peak}`);
    assert.deepEqual(await keys(`${name}/`), []);
  });

  it('bad permit counts and a mismatched count are InvalidArgument', async () => {
    const c = await connect();
    const name = unique('sem-bad');
    for (const bad of [0, -1, 1.5, NaN, Infinity, MAX_PERMITS + 1]) {
      await rejectsWith(c.acquirePermit(name, bad, { timeout: 1000 }), 'InvalidArgument');
    }
    await rejectsWith(c.acquirePermit(name, '3'), 'InvalidArgument');
    const p = await c.acquirePermit(name, 3);
    await rejectsWith(c.acquirePermit(name, 2, { timeout: 5000 }), 'InvalidArgument');
    assert.deepEqual(await keys(`${name}/`), [p.key]);
    await p.unlock();
  });

  it('an aborted permit wait removes its key', async () => {
    const c = await connect();
    const name = unique('sem-abort');
    const p = await c.acquirePermit(name, 1);
    const ac = new AbortController();
    const waiting = c.acquirePermit(name, 1, { signal: ac.signal });
    await until(async () => (await keys(`${name}/`)).length === 2, { what: "the waiter's key" });
    ac.abort(new Error('stop'));
    await assert.rejects(waiting, (e) => e.code === 'Cancelled' && e.cause.message === 'stop');
    await until(async () => (await keys(`${name}/`)).length === 1, { what: "the waiter's key to go" });
    await p.unlock();
  });
});

describe('read-write lock', () => {
  it('readers share; a queued writer goes before later readers', async () => {
    const [a, b] = [await connect(), await connect()];
    const name = unique('rw');
    const r1 = await a.readLock(name);
    const r2 = await b.readLock(name, { timeout: 5000 });
    assert.ok(r1.isHeld && r2.isHeld && r1.key.endsWith('-r'));
    assert.equal(await b.tryLock(name), null);
    const writer = b.lock(name, { timeout: 20000 });
    await until(async () => (await keys(`${name}/`)).length === 3, { what: "the writer's key" });
    await rejectsWith(a.readLock(name, { timeout: 0 }), 'Timeout');
    let laterHeld = false;
    const later = a.readLock(name, { timeout: 20000 }).then((g) => ((laterHeld = true), g));
    await until(async () => (await keys(`${name}/`)).length === 4, { what: "the later reader's key" });
    await r1.unlock();
    await r2.unlock();
    const w = await writer;
    assert.ok(w.isHeld);
    assert.equal(laterHeld, false);
    await w.unlock();
    const r3 = await later;
    assert.ok(r3.isHeld);
    await r3.unlock();
    assert.deepEqual(await keys(`${name}/`), []);
  });
});

describe('multi-lock', () => {
  it('holds every name with one revision, and a one-try on an overlap leaves no key', async () => {
    const [a, b] = [await connect(), await connect()];
    const base = unique('multi');
    const names = [`${base}-a`, `${base}-b`, `${base}-c`];
    const m = await a.lockMany(names, { timeout: 5000 });
    {
      assert.ok(m instanceof MultiLock && m.isHeld);
      assert.deepEqual(m.names, names);
      assert.equal(new Set(m.fencingTokens).size, 1);
      for (const [i, n] of names.entries()) {
        assert.deepEqual(await keys(`${n}/`), [m.keys[i]]);
        assert.equal(await b.tryLock(n), null);
      }
      await rejectsWith(b.lockMany([`${base}-z`, names[1]], { timeout: 0 }), 'Timeout');
      assert.deepEqual(await keys(`${base}-z/`), []);
    }
    await m[Symbol.asyncDispose]();
    assert.equal(m.isHeld, false);
    for (const n of names) assert.deepEqual(await keys(`${n}/`), []);
  });

  it('opposite orders never deadlock, and exclusion holds', async () => {
    const cs = [await connect(), await connect()];
    const base = unique('multi-order');
    const [x, y] = [`${base}-x`, `${base}-y`];
    let inside = 0;
    let bad = 0;
    let n = 0;
    await Promise.all(
      Array.from({ length: 4 }, async (_, i) => {
        for (let r = 0; r < 10; r++) {
          const m = await cs[i % 2].lockMany(i % 2 ? [y, x] : [x, y], { timeout: 30000 });
          if (++inside > 1) bad++;
          await new Promise((r) => setImmediate(r)); // let the event loop run inside the hold
          inside--;
          n++;
          await m.unlock();
        }
      }),
    );
    assert.deepEqual({ n, bad, inside }, { n: 40, bad: 0, inside: 0 });
  });

  it('losing one lock loses the hold', async () => {
    const c = await connect();
    const base = unique('multi-lost');
    const m = await c.lockMany([`${base}-a`, `${base}-b`]);
    const { execFile } = require('node:child_process');
    await new Promise((res, rej) =>
      execFile('etcdctl', ['--endpoints', etcd.endpoints.join(','), 'del', m.keys[1]], { env: { ...process.env, ETCDCTL_API: '3' } }, (e) => (e ? rej(e) : res())),
    );
    assert.deepEqual(await m.lost, { name: `${base}-b`, reason: 'KeyDeleted' });
    assert.equal(m.signal.aborted, true);
    assert.equal(m.isHeld, false);
    await rejectsWith(m.unlock(), 'LockLost');
  });

  it("has a Lock's loss and renewal members: one loss, reported once with its name and reason", async () => {
    const c = await connect();
    const base = unique('multi-members');
    const names = [`${base}-a`, `${base}-b`, `${base}-c`];
    const m = await c.lockMany(names);
    assert.equal(m.state, 'held');
    assert.deepEqual(m.renewal, { failing: false });
    assert.throws(() => m.onRenewal(3), (e) => e instanceof LockError && e.code === 'InvalidArgument');
    const renewals = [];
    m.onRenewal((r) => renewals.push(r));
    const aborts = [];
    m.signal.addEventListener('abort', () => aborts.push(m.signal.reason));
    const { execFile } = require('node:child_process');
    await new Promise((res, rej) =>
      execFile('etcdctl', ['--endpoints', etcd.endpoints.join(','), 'del', m.keys[1]], { env: { ...process.env, ETCDCTL_API: '3' } }, (e) => (e ? rej(e) : res())),
    );
    assert.deepEqual(await m.lost, { name: names[1], reason: 'KeyDeleted' });
    assert.equal(aborts.length, 1);
    assert.ok(aborts[0] instanceof LockError && aborts[0].code === 'LockLost' && aborts[0].reason === 'KeyDeleted', String(aborts[0]));
    assert.equal(m.state, 'KeyDeleted');
    assert.equal(m.isHeld, false);
    assert.deepEqual(m.renewal, { failing: false });
    await rejectsWith(m.unlock(), 'LockLost');
    assert.equal(m.state, 'KeyDeleted');
    assert.equal(aborts.length, 1);
    assert.deepEqual(renewals, []);

    // Released normally: 'released', and `lost` stays pending.
    const r = await c.lockMany([`${base}-x`, `${base}-y`]);
    const seen = [];
    r.lost.then((v) => seen.push(v));
    assert.equal(r.state, 'held');
    await r.unlock();
    assert.equal(r.state, 'released');
    assert.deepEqual(r.renewal, { failing: false });
    assert.deepEqual(await keys(`${base}-x/`), []); // a round trip after the release
    assert.deepEqual(seen, []);
    assert.equal(r.signal.aborted, false);
  });

  it('bad input is InvalidArgument', async () => {
    const c = await connect();
    const n = unique('multi-bad');
    await rejectsWith(c.lockMany([]), 'InvalidArgument');
    await rejectsWith(c.lockMany(Array.from({ length: MAX_MULTI + 1 }, (_, i) => `${n}-${i}`)), 'InvalidArgument');
    await rejectsWith(c.lockMany([n, n]), 'InvalidArgument');
    await rejectsWith(c.lockMany(n), 'InvalidArgument');
    await rejectsWith(c.lockMany([n, 'x\uDC00']), 'InvalidArgument');
  });
});

describe('election', () => {
  it('campaign, proclaim, resign, and observe (including no leader)', async () => {
    const [a, b] = [await connect(), await connect()];
    const name = unique('elect');
    assert.equal(await a.leader(name), null);
    const ac = new AbortController();
    const seen = [];
    const follower = (async () => {
      for await (const l of b.observe(name, { signal: ac.signal })) {
        seen.push(l && l.value.toString());
      }
    })();
    const step = async (n) => {
      await until(() => seen.length >= n, { what: `observation ${n}` });
    };
    await step(1);
    assert.deepEqual(seen, [null]);
    const lead = await a.campaign(name, 'node-a', { timeout: 5000 });
    assert.ok(lead instanceof Leadership && lead instanceof Lock);
    await step(2);
    assert.equal(seen[1], 'node-a');
    const now = await b.leader(name);
    assert.deepEqual(now, { key: lead.key, value: Buffer.from('node-a'), revision: lead.fencingToken, leaseId: lead.leaseId });
    await lead.proclaim('node-a v2');
    await step(3);
    assert.equal(seen[2], 'node-a v2');
    const second = b.campaign(name, 'node-b', { timeout: 20000 });
    await until(async () => (await keys(`${name}/`)).length === 2, { what: "the second candidate's key" });
    await lead.resign();
    const l2 = await second;
    await step(4);
    assert.equal(seen[3], 'node-b');
    await l2.resign();
    await step(5);
    assert.equal(seen[4], null);
    ac.abort();
    await follower; // the iterator ends when its signal aborts
  });

  it('a deposed leader cannot proclaim', async () => {
    const c = await connect();
    const name = unique('elect-deposed');
    const lead = await c.campaign(name, 'v1');
    const { execFile } = require('node:child_process');
    await new Promise((res, rej) =>
      execFile('etcdctl', ['--endpoints', etcd.endpoints.join(','), 'del', lead.key], { env: { ...process.env, ETCDCTL_API: '3' } }, (e) => (e ? rej(e) : res())),
    );
    assert.equal(await lead.lost, 'KeyDeleted');
    await rejectsWith(lead.proclaim('v2'), 'LockLost');
  });

  it('etcdctl elect -l follows a Node leader', async () => {
    const c = await connect();
    const name = unique('elect-etcdctl');
    const lead = await c.campaign(name, 'from-node');
    const w = spawn('etcdctl', ['--endpoints', etcd.endpoints.join(','), 'elect', '-l', name], { env: { ...process.env, ETCDCTL_API: '3' } });
    try {
      const rl = readline.createInterface({ input: w.stdout });
      const it = rl[Symbol.asyncIterator]();
      assert.equal((await it.next()).value, lead.key);
      assert.equal((await it.next()).value, 'from-node');
    } finally {
      w.kill();
    }
    await lead.resign();
  });
});

describe('status', () => {
  it('shows holders and waiters of a semaphore', async () => {
    const c = await connect();
    const name = unique('status');
    const g1 = await c.acquirePermit(name, 2);
    const g2 = await c.acquirePermit(name, 2);
    const third = c.acquirePermit(name, 2, { timeout: 20000 });
    await until(async () => (await keys(`${name}/`)).length === 3, { what: "the waiter's key" });
    const st = await c.status(name);
    assert.equal(st.name, name);
    assert.equal(typeof st.revision, 'bigint');
    assert.deepEqual(st.holders.map((h) => h.key), [g1.key, g2.key]);
    assert.equal(st.waiters.length, 1);
    for (const x of [...st.holders, ...st.waiters]) {
      assert.equal(x.kind, 'permit');
      assert.equal(x.permits, 2);
      assert.ok(x.owner.endsWith(`:${process.pid}`));
      assert.equal(x.leaseId, g1.leaseId);
      assert.ok(x.ttlRemaining > 0 && x.ttlRemaining <= 5);
    }
    assert.equal(st.holders[0].fencingToken, g1.fencingToken);
    await g1.unlock();
    const g3 = await third;
    await g2.unlock();
    await g3.unlock();
    const empty = await c.status(name);
    assert.deepEqual([empty.holders, empty.waiters], [[], []]);
  });
});
