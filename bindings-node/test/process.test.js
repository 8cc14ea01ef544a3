'use strict';
// Behaviour that needs other processes or threads: mutual exclusion across
// processes, loss of a SIGSTOPped holder, event-loop liveness, worker_threads.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const readline = require('node:readline');
const { Worker } = require('node:worker_threads');
const { Client } = require('..');
const { ROOT, startEtcd, unique, until, runNode } = require('./helpers.js');

const FIX = path.join(__dirname, 'fixtures');
let etcd;
let client;

before(async () => {
  etcd = await startEtcd();
  client = await Client.connect({ endpoints: etcd.endpoints, ttl: 5 });
});

after(async () => {
  await client.close();
  await etcd.stop();
});

async function readCounter(key) {
  return client.withLock(unique('read'), async (l) => Number((await l.get(key, 'utf8')) ?? '0'));
}

describe('processes and threads', () => {
  it('mutual exclusion: 4 processes x 4 async tasks keep a non-atomic counter exact', async () => {
    const name = unique('mutex');
    const counter = unique('counter');
    const PROCS = 4;
    const TASKS = 4;
    const ITERS = 8;
    const runs = await Promise.all(
      Array.from({ length: PROCS }, () =>
        runNode([path.join(FIX, 'counter.js'), etcd.endpoints.join(','), name, counter, String(TASKS), String(ITERS)], { timeout: 120000 })
      )
    );
    for (const r of runs) {
      assert.equal(r.code, 0, r.stderr);
      assert.equal(JSON.parse(r.stdout.trim()).maxInside, 1);
    }
    assert.equal(await readCounter(counter), PROCS * TASKS * ITERS);
  });

  it('a holder SIGSTOPped past its TTL loses the lock; after SIGCONT its guarded put is rejected', async () => {
    const name = unique('stopped');
    const child = spawn(process.execPath, [path.join(FIX, 'holder.js'), etcd.endpoints.join(','), name], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const exited = new Promise((r) => child.once('exit', (code) => r(code)));
    const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const first = JSON.parse((await lines.next()).value);
    assert.equal(first.held, true);
    child.kill('SIGSTOP');
    try {
      // etcd expires the frozen holder's lease; we get the lock only then.
      const t0 = Date.now();
      const mine = await client.lock(name, { timeout: 30000 });
      assert.ok(Date.now() - t0 >= 1000, 'acquired while the stopped holder still held it');
      assert.ok(mine.fencingToken > BigInt(first.token));
      await mine.put('fenced', 'fresh');
      child.kill('SIGCONT');
      child.stdin.write('go\n');
      const result = JSON.parse((await lines.next()).value);
      assert.equal(result.heldAfterResume, false);
      assert.equal(result.putCode, 'LockLost');
      // Paused past its TTL, the holder asks etcd why: the lease is gone there.
      assert.equal(result.putReason, 'LeaseExpired');
      assert.equal(result.lost, 'LeaseExpired');
      assert.equal(result.signalAborted, true);
      assert.equal(await mine.get('fenced', 'utf8'), 'fresh');
      await mine.unlock();
      assert.equal(await exited, 0);
    } finally {
      child.kill('SIGCONT');
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  for (const [sig, release] of [['SIGTERM', true], ['SIGINT', true], ['SIGTERM', false]]) {
    it(`${sig} with releaseOnExit ${release}: the lock is ${release ? 'free within 1 s' : 'held until the TTL'}`, async () => {
      const name = unique('exit');
      const child = spawn(process.execPath, [path.join(FIX, 'exit-holder.js'), etcd.endpoints.join(','), name, String(release)], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const exited = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
      try {
        const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
        assert.equal(JSON.parse((await lines.next()).value).held, true);
        child.kill(sig);
        const t0 = Date.now();
        if (release) {
          const mine = await client.lock(name, { timeout: 1000 });
          assert.ok(Date.now() - t0 <= 1000, `free after ${Date.now() - t0} ms`);
          await mine.unlock();
          // The process still ends by the signal, as its default action would.
          assert.deepEqual(await exited, { code: null, signal: sig });
        } else {
          // Node's default action runs no JavaScript: the lease lives on until its TTL.
          assert.deepEqual(await exited, { code: null, signal: sig });
          await assert.rejects(client.lock(name, { timeout: 1000 }), (e) => e.code === 'Timeout');
        }
      } finally {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }
    });
  }

  it('a pending lock() keeps the process alive until it is granted', async () => {
    const name = unique('pending');
    const held = await client.lock(name);
    const child = spawn(process.execPath, [path.join(FIX, 'pending.js'), etcd.endpoints.join(','), name], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    const exited = new Promise((r) => child.once('exit', (code) => r(code)));
    try {
      await until(async () => (await client._rawKeys(`${name}/`)).length === 2, { what: 'child waiter key' });
      // Nothing else is on the child's event loop; without the pending
      // Promise's handle it would have exited by now.
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(child.exitCode, null, 'the child exited while its lock() was pending');
      await held.unlock();
      assert.equal(await exited, 0);
      assert.match(out, /acquired \d+/);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('an idle client does not keep the event loop alive after close()', async () => {
    const r = await runNode([path.join(FIX, 'idle.js'), etcd.endpoints.join(','), unique('idle')], { timeout: 15000 });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'closed');
  });

  it('a Lock dropped without unlock() is released when garbage-collected', async () => {
    const r = await runNode(['--expose-gc', path.join(FIX, 'forgotten.js'), etcd.endpoints.join(','), unique('forgotten')], { timeout: 30000 });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'released');
  });

  it('works inside worker_threads, concurrently with the main thread', async () => {
    const name = unique('workers');
    const counter = unique('wcounter');
    const ITERS = 10;
    const workers = [0, 1].map(
      () =>
        new Promise((resolve, reject) => {
          const w = new Worker(path.join(FIX, 'worker.js'), { workerData: { endpoints: etcd.endpoints, name, counter, iters: ITERS } });
          w.once('message', resolve);
          w.once('error', reject);
          w.once('exit', (code) => reject(new Error(`worker exited with ${code} before reporting`)));
        })
    );
    for (let i = 0; i < ITERS; i++) {
      await client.withLock(name, async (l) => {
        const v = Number((await l.get(counter, 'utf8')) ?? '0');
        await l.put(counter, String(v + 1));
      }, { timeout: 30000 });
    }
    const results = await Promise.all(workers);
    for (const r of results) {
      assert.equal(r.error, undefined, r.error);
      assert.equal(r.err, 'InvalidArgument');
      const toks = r.tokens.map(BigInt);
      for (let i = 1; i < toks.length; i++) assert.ok(toks[i] > toks[i - 1]);
    }
    assert.equal(await readCounter(counter), 3 * ITERS);
  });

  it('terminating a worker with a pending lock() does not crash the process', async () => {
    const name = unique('terminate');
    const held = await client.lock(name);
    const code = `
      const { parentPort, workerData } = require('node:worker_threads');
      const { Client } = require(${JSON.stringify(ROOT)});
      (async () => {
        const c = await Client.connect({ endpoints: workerData.endpoints, ttl: 5 });
        parentPort.postMessage('waiting');
        await c.lock(workerData.name);
      })();`;
    const w = new Worker(code, { eval: true, workerData: { endpoints: etcd.endpoints, name } });
    await new Promise((r) => w.once('message', r));
    await until(async () => (await client._rawKeys(`${name}/`)).length === 2, { what: 'worker waiter key' });
    await w.terminate();
    await held.unlock();
    // the main thread's client keeps working
    const again = await client.lock(name, { timeout: 15000 });
    assert.ok(again.isHeld);
    await again.unlock();
  });
});
