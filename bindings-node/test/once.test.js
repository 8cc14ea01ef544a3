'use strict';
// runOnce / takeOnce: core's run-once record (the one Java's ShedLock
// provider and Python's once keep), across clients: one run per tick,
// atLeast, a late finish touching nothing, errors, bad input.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client, OnceHold, LockError } = require('..');
const { startEtcd, unique, etcdctlKeys } = require('./helpers.js');

let etcd;
let a;
let b;

before(async () => {
  etcd = await startEtcd();
  a = await Client.connect({ endpoints: etcd.endpoints });
  b = await Client.connect({ endpoints: etcd.endpoints });
});

after(async () => {
  await a.close();
  await b.close();
  await etcd.stop();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe('runOnce', () => {
  it('runs each tick on one client only, kept until atLeast', async () => {
    const name = unique('once');
    const runs = [];
    const job = (who) => async () => {
      runs.push(who);
      await sleep(20);
      return who;
    };
    const started = Date.now();
    const results = await Promise.all([a, b, a, b, a, b].map((c, i) => c.runOnce(name, job(i % 2 ? 'b' : 'a'), { atMost: 30000, atLeast: 800 })));
    assert.equal(runs.length, 1, `ran ${runs}`);
    assert.deepEqual(results.filter((r) => r !== undefined), runs);
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, '__etcdlock/once/'), [`__etcdlock/once/${name}`]);
    assert.equal(await b.runOnce(name, job('late'), { atMost: 30000 }), undefined, 'still taken within atLeast');
    while (Date.now() - started < 800) await sleep(20);
    let r;
    const deadline = Date.now() + 5000;
    while ((r = await b.runOnce(name, job('next'), { atMost: 30000 })) === undefined) {
      assert.ok(Date.now() < deadline, 'free after atLeast');
      await sleep(20);
    }
    assert.equal(r, 'next');
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `__etcdlock/once/${name}`), [], 'finished after atLeast: deleted');
  });

  it("propagates fn's error after finishing the record", async () => {
    const name = unique('once-err');
    await assert.rejects(a.runOnce(name, () => { throw new Error('boom'); }, { atMost: 30000 }), /boom/);
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `__etcdlock/once/${name}`), []);
    assert.equal(await a.runOnce(name, () => 7, { atMost: 30000 }), 7);
  });

  it('takeOnce: extend, expiry, and a late finish that touches nothing', async () => {
    const name = unique('once-steps');
    const h = await a.takeOnce(name, { atMost: 500 });
    assert.ok(h instanceof OnceHold);
    assert.equal(typeof h.revision, 'bigint');
    assert.ok(Math.abs(h.lockUntil - h.lockedAt - 500) <= 1);
    assert.equal(await b.takeOnce(name, { atMost: 10000 }), null);
    const rev = h.revision;
    assert.equal(await h.extend({ atMost: 500 }), true);
    assert.ok(h.revision > rev);
    await sleep(600); // the record's wall-clock expiry is what this test is about
    const hb = await b.takeOnce(name, { atMost: 10000 });
    assert.ok(hb && hb.revision > h.revision);
    assert.equal(await h.finish(), false);
    assert.equal(await h.extend({ atMost: 10000 }), false);
    assert.equal(await a.takeOnce(name, { atMost: 10000 }), null);
    assert.equal(await hb.finish(), true);
    assert.ok(await a.takeOnce(name, { atMost: 10000 }));
  });

  it('bad input is a typed InvalidArgument', async () => {
    const name = unique('once-bad');
    // Each call starts inside assert.rejects: a rejection that settles before
    // it is awaited would otherwise be an unhandled rejection, which fails
    // the test whatever the assertion says.
    for (const [what, call] of [
      ['atMost 0', () => a.takeOnce(name, { atMost: 0 })],
      ['atMost missing', () => a.takeOnce(name)],
      ['atMost NaN', () => a.takeOnce(name, { atMost: NaN })],
      ['atMost string', () => a.runOnce(name, () => 1, { atMost: '5' })],
      ['atLeast negative', () => a.runOnce(name, () => 1, { atMost: 5, atLeast: -1 })],
      ['fn missing', () => a.runOnce(name, undefined, { atMost: 5 })],
      ['empty name', () => a.takeOnce('', { atMost: 5 })],
      ['reserved name', () => a.takeOnce('__etcdlock/meta/x', { atMost: 5 })],
    ]) {
      await assert.rejects(call, (e) => e instanceof LockError && e.code === 'InvalidArgument', what);
    }
    assert.deepEqual(await etcdctlKeys(etcd.endpoints, `__etcdlock/once/${name}`), [], 'nothing taken by bad calls');
  });
});
