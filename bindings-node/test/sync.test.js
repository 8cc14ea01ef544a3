'use strict';
// Latches and barriers: across processes (the parent and two node children
// sharing a latch of 3 and a barrier of 3, nothing left under
// in the namespace afterwards: the latch and barrier keys sit beside their
// names, `<namespace>NAME\0etcdlock-latch/...`), and their errors in one process.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Client, Latch, Barrier } = require('..');
const { startEtcd, unique, until, etcdctlKeys, runNode } = require('./helpers.js');

const FIX = path.join(__dirname, 'fixtures');
const TTL_S = 2;
let etcd;

before(async () => {
  etcd = await startEtcd();
});

after(async () => {
  await etcd.stop();
});

describe('latch and barrier', () => {
  it('three processes share a latch of 3 and a barrier of 3; no keys are left once they exit and the TTL passes', async () => {
    const ns = `${unique('sync')}/`;
    const latchName = 'shards';
    const barrierName = 'start';
    const args = [path.join(FIX, 'sync-party.js'), etcd.endpoints.join(','), ns, String(TTL_S), latchName, barrierName];
    const children = [runNode(args, { timeout: 60000 }), runNode(args, { timeout: 60000 })];
    // The parent is the third party.
    const client = await Client.connect({ endpoints: etcd.endpoints, namespace: ns, ttl: TTL_S });
    const latch = await client.latch(latchName, 3);
    const barrier = await client.barrier(barrierName, 3);
    assert.ok(latch instanceof Latch && barrier instanceof Barrier);
    assert.equal(latch.initial, 3);
    assert.equal(barrier.parties, 3);
    const after = await latch.countDown();
    await latch.wait({ timeout: 30000 });
    assert.equal(await latch.count(), 0);
    const index = await barrier.wait({ timeout: 30000 });
    const results = [];
    for (const r of await Promise.all(children)) {
      assert.equal(r.code, 0, r.stderr);
      results.push(JSON.parse(r.stdout.trim()));
    }
    results.push({ after, count: 0, index });
    assert.deepEqual(results.map((r) => r.after).sort(), [0, 1, 2], 'each count-down saw its own count');
    assert.deepEqual(results.map((r) => r.count), [0, 0, 0]);
    assert.deepEqual(results.map((r) => r.index).sort(), [0, 1, 2], 'each party got its own arrival index');
    latch.close();
    barrier.close();
    latch.close(); // idempotent
    await assert.rejects(latch.count(), (e) => e.code === 'Closed');
    await client.close();
    const prefix = ns;
    const t0 = Date.now();
    await until(async () => (await etcdctlKeys(etcd.endpoints, prefix)).length === 0, {
      timeout: (TTL_S + 5) * 1000,
      every: 200,
      what: `no keys under ${prefix}`,
    });
    console.log(`sync: keys under ${prefix} gone ${Date.now() - t0} ms after the last party closed`);
  });

  it('counts, mismatches, timeouts, a finished barrier, and AbortSignal', async () => {
    const ns = `${unique('sync-err')}/`;
    const a = await Client.connect({ endpoints: etcd.endpoints, namespace: ns, ttl: 5 });
    const b = await Client.connect({ endpoints: etcd.endpoints, namespace: ns, ttl: 5 });
    try {
      for (const bad of [0, -1, 1.5, NaN, 2 ** 31 + 1]) {
        await assert.rejects(a.latch('l', bad), (e) => e.code === 'InvalidArgument', `count ${bad}`);
        await assert.rejects(a.barrier('b', bad), (e) => e.code === 'InvalidArgument', `parties ${bad}`);
      }
      await assert.rejects(a.latch('l', '3'), (e) => e.code === 'InvalidArgument');
      const l = await b.latch('l', 2);
      await assert.rejects(a.latch('l', 3), (e) => e.code === 'InvalidArgument');
      await assert.rejects(l.wait({ timeout: 100 }), (e) => e.code === 'Timeout');
      const ac = new AbortController();
      const w = l.wait({ signal: ac.signal });
      setTimeout(() => ac.abort(new Error('stop')), 100);
      await assert.rejects(w, (e) => e.code === 'Cancelled' && e.cause?.message === 'stop');
      assert.equal(await l.countDown(), 1);
      assert.equal(await l.countDown(), 0);
      assert.equal(await l.countDown(), 0, 'a no-op at zero');
      await l.wait({ timeout: 0 });
      await l[Symbol.asyncDispose]();
      const solo = await a.barrier('solo', 1);
      assert.equal(await solo.wait({ timeout: 1000 }), 0);
      await assert.rejects(b.barrier('solo', 1).then((x) => x.wait()), (e) => e.code === 'InvalidArgument');
      solo.close();
      const pair = await a.barrier('pair', 2);
      await assert.rejects(pair.wait({ timeout: 100 }), (e) => e.code === 'Timeout');
      pair.close();
    } finally {
      await a.close();
      await b.close();
    }
    await assert.rejects(a.latch('l', 1), (e) => e.code === 'Closed');
  });
});
