'use strict';
// etcdlock/testing, first as a user writes a test with it ("my job stops
// writing when it loses its lock"), then each of its promises: a fresh store
// per fixture, clients closed after the test (node:test's t.after, a
// Vitest-shaped onTestFinished, withMemStore, await using), lose() by each
// way, and bad arguments as LockError InvalidArgument.
const { describe, it, test } = require('node:test');
const assert = require('node:assert/strict');
const { PassThrough, addAbortSignal } = require('node:stream');
const { memStore, withMemStore, MemFixture } = require('etcdlock/testing');
const { LockError, MemStore } = require('etcdlock');

// --- A test a user writes -------------------------------------------------

// The code under test: holds the lock `reports` and writes each batch that
// arrives on `batches`; stops when the hold is lost. Resolves why it stopped.
async function reportJob(client, batches, save) {
  const lock = await client.lock('reports');
  addAbortSignal(lock.signal, batches); // a lost hold ends the stream (AbortError)
  try {
    for await (const batch of batches) {
      await lock.put('reports-last', batch); // guarded: etcd refuses it once the hold is gone
      save(batch);
    }
  } catch (e) {
    if (e.name !== 'AbortError') throw e;
  }
  return lock.state; // 'released' or the loss reason
}

test('my job stops writing when it loses its lock', { timeout: 20000 }, async (t) => {
  const mem = memStore(t); // a fresh store; its clients are closed after the test
  const client = await mem.client({ ttl: 3 });
  const batches = new PassThrough({ objectMode: true });
  const saved = [];
  let firstSaved;
  const wrote = new Promise((resolve) => (firstSaved = resolve));
  const job = reportJob(client, batches, (b) => {
    saved.push(b);
    firstSaved();
  });
  batches.write('batch-1');
  await wrote; // the job holds the lock and has written
  const [holder] = (await client.status('reports')).holders;
  await mem.lose(holder); // its lease ends, as when the process stalls past its TTL
  assert.equal(await job, 'LeaseExpired'); // the job saw the loss and stopped
  assert.deepEqual(saved, ['batch-1']);
  assert.equal(mem.store.keys('reports-last')[0].value.toString(), 'batch-1');
  const next = await client.tryLock('reports'); // free for the next worker
  assert.notEqual(next, null);
});

// --- The helper's promises ------------------------------------------------

describe('memStore(t) with node:test', () => {
  let kept;
  it('gives a fresh store and clients connected to it', async (t) => {
    const mem = memStore(t);
    assert.ok(mem instanceof MemFixture);
    assert.ok(mem.store instanceof MemStore);
    assert.match(mem.endpoint, /^mem:\/\/test-\d+-\d+-[0-9a-f]{6}$/);
    assert.deepEqual(mem.endpoints, [mem.endpoint]);
    const other = memStore(t);
    assert.notEqual(other.endpoint, mem.endpoint);
    const a = await mem.client({ ttl: 5, namespace: 'app/' });
    const b = await other.client();
    // Two stores: the same lock name is free in each.
    const la = await a.lock('job');
    const lb = await b.lock('job');
    assert.ok(la.key.startsWith('app/job/'));
    assert.deepEqual(mem.store.keys('app/').map((k) => k.key), [la.key]);
    assert.deepEqual(other.store.keys('app/'), []);
    assert.equal(a.ttl, 5);
    kept = { a, b, la, lb };
  });

  it('closed the clients of the test before', () => {
    assert.equal(kept.a.closed, true);
    assert.equal(kept.b.closed, true);
    assert.equal(kept.la.state, 'ClientClosed');
    assert.equal(kept.lb.state, 'ClientClosed');
  });
});

describe('closing', () => {
  it('registers with a Vitest-shaped context (onTestFinished)', async () => {
    const hooks = [];
    const mem = memStore({ onTestFinished: (fn) => hooks.push(fn) });
    const c = await mem.client();
    assert.equal(hooks.length, 1);
    await hooks[0]();
    assert.equal(c.closed, true);
  });

  it('withMemStore closes after fn, also when fn throws, and resolves its result', async () => {
    let client;
    const r = await withMemStore(async (mem) => {
      client = await mem.client();
      return (await client.lock('job')).fencingToken > 0n;
    });
    assert.equal(r, true);
    assert.equal(client.closed, true);
    await assert.rejects(
      withMemStore(async (mem) => {
        client = await mem.client();
        throw new Error('boom');
      }),
      /boom/
    );
    assert.equal(client.closed, true);
  });

  it('close() resumes the store, closes every client, is idempotent; await using calls it', async () => {
    const mem = memStore();
    const c = await mem.client({ requestTimeout: 1000 });
    await c.lock('job');
    mem.store.silence(60000);
    const t0 = performance.now();
    await mem.close();
    assert.ok(performance.now() - t0 < 1000, 'the silence ended before the clients closed');
    assert.equal(c.closed, true);
    assert.deepEqual(mem.store.keys(), [], 'leases revoked: no key left');
    await mem.close();
    assert.equal(mem[Symbol.asyncDispose], MemFixture.prototype[Symbol.asyncDispose]);
    await assert.rejects(mem.client(), (e) => e instanceof LockError && e.code === 'Closed');
    const m2 = memStore();
    const c2 = await m2.client();
    await m2[Symbol.asyncDispose]();
    assert.equal(c2.closed, true);
  });
});

describe('lose()', () => {
  it("'expire', 'delete' and 'stall' lose the hold with LeaseExpired, KeyDeleted, ConnectionLost", { timeout: 20000 }, async (t) => {
    const mem = memStore(t);
    const client = await mem.client({ ttl: 3 });
    assert.equal(await mem.lose(await client.lock('a')), 'LeaseExpired');
    assert.equal(await mem.lose(await client.lock('b'), 'delete'), 'KeyDeleted');
    const held = await client.lock('c');
    const t0 = performance.now();
    assert.equal(await mem.lose(held, 'stall'), 'ConnectionLost');
    assert.ok(performance.now() - t0 < 4000, `within the TTL: ${(performance.now() - t0).toFixed(0)} ms`);
    // The stall ended with the loss: the client is served again.
    const again = await client.lock('c', { timeout: 5000 });
    assert.ok(again.fencingToken > held.fencingToken);
    // A MultiLock resolves what its `lost` does.
    assert.deepEqual(await mem.lose(await client.lockMany(['m1', 'm2']), 'delete'), { name: 'm1', reason: 'KeyDeleted' });
  });

  it('a holder from status(): resolves once the store acted', async (t) => {
    const mem = memStore(t);
    const client = await mem.client();
    const lock = await client.lock('job');
    const [holder] = (await client.status('job')).holders;
    assert.equal(await mem.lose(holder, 'delete'), undefined);
    assert.equal(await lock.lost, 'KeyDeleted');
  });

  it('rejects InvalidArgument for a lock not held in its store, a bad way, no lock', async (t) => {
    const mem = memStore(t);
    const other = memStore(t);
    const client = await mem.client();
    const lock = await client.lock('job');
    const elsewhere = await (await other.client()).lock('job');
    const bad = async (p, re) => {
      const e = await p.then(
        () => assert.fail('resolved'),
        (x) => x
      );
      assert.ok(e instanceof LockError, e && e.stack);
      assert.equal(e.code, 'InvalidArgument', e.message);
      if (re) assert.match(e.message, re);
    };
    await bad(mem.lose(elsewhere), /is not held in mem:\/\/test-/);
    await bad(mem.lose(lock, 'pause'), /how must be one of expire, delete, stall/);
    await bad(mem.lose(lock, 'expire', { within: -1 }));
    await bad(mem.lose(undefined));
    await bad(mem.lose({ key: lock.key, leaseId: 5 }));
    await bad(mem.client({ endpoints: ['mem://x'] }), /leave out endpoints/);
    await bad(mem.client('ttl'));
    await lock.unlock();
    await bad(mem.lose(lock), /released, lost already, or another store/);
    assert.throws(() => memStore({}), (e) => e instanceof LockError && e.code === 'InvalidArgument');
    assert.throws(() => new MemFixture({}), (e) => e instanceof LockError && e.code === 'InvalidArgument');
    await bad(withMemStore('fn'));
  });

  it('rejects Timeout when no loss is seen within `within`', async (t) => {
    const mem = memStore(t);
    const client = await mem.client({ ttl: 10 });
    const lock = await client.lock('job');
    // A 10 s TTL is not lost in 200 ms of stall.
    await assert.rejects(mem.lose(lock, 'stall', { within: 200 }), (e) => e instanceof LockError && e.code === 'Timeout');
    assert.equal(lock.isHeld, true);
  });
});
