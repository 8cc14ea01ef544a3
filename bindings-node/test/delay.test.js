'use strict';
// Acquisition options across processes: Chubby's lock-delay after a holder
// process is SIGKILLed (its lease expires), a clean unlock that hands over at
// once, lease time, holder metadata in status, and releasePermit.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const readline = require('node:readline');
const { Client } = require('..');
const { startEtcd, unique, until } = require('./helpers.js');

const FIX = path.join(__dirname, 'fixtures');
const TTL_S = 2;
const DELAY_MS = 3000;
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

/** A child holding `name` with ttl 2 s and lockDelay 3000 ms: `{ child, info, lines, exited }`. */
async function delayHolder(name) {
  const child = spawn(process.execPath, [path.join(FIX, 'delay-holder.js'), etcd.endpoints.join(','), name, String(TTL_S), String(DELAY_MS)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const first = await lines.next();
  assert.ok(!first.done, 'the holder exited before holding');
  const info = JSON.parse(first.value);
  assert.equal(info.held, true);
  return { child, info, lines, exited };
}

/** Resolve once `name` has a waiter (our lock call queued behind the holder). */
function queued(name) {
  return until(async () => (await client.status(name)).waiters.length > 0, { what: `a waiter on ${name}` });
}

describe('acquisition options', () => {
  it('lock-delay: a SIGKILLed holder hands over no earlier than kill + 3 s and before kill + TTL + 3 s + 1 s headroom + 2 s', async (t) => {
    const name = unique('delay-kill');
    const h = await delayHolder(name);
    try {
      // The holder's metadata reaches status once its meta record is written (~100 ms).
      const st = await until(async () => {
        const s = await client.status(name);
        return s.holders[0]?.metadata?.role ? s : null;
      }, { what: 'the holder metadata in status' });
      assert.deepEqual(st.holders[0].metadata, { role: 'delay-holder', pid: String(h.child.pid) });
      const waiting = client.lock(name, { timeout: 20000 });
      await queued(name);
      const killedAt = Date.now();
      h.child.kill('SIGKILL');
      assert.equal((await h.exited).signal, 'SIGKILL');
      // While the delay runs, a try finds the lock taken (our waiter queues too).
      assert.equal(await client.tryLock(name), null);
      const mine = await waiting;
      const after = Date.now() - killedAt;
      t.diagnostic(`lock-delay: acquired ${after} ms after SIGKILL (bounds: >= ${DELAY_MS}, < ${TTL_S * 1000 + DELAY_MS + 1000 + 2000})`);
      console.log(`lock-delay: acquired ${after} ms after SIGKILL`);
      assert.ok(after >= DELAY_MS, `acquired ${after} ms after the kill, inside the ${DELAY_MS} ms lock-delay`);
      assert.ok(after < TTL_S * 1000 + DELAY_MS + 1000 + 2000, `acquired only ${after} ms after the kill`);
      assert.ok(mine.fencingToken > BigInt(h.info.token));
      await mine.unlock();
    } finally {
      h.child.kill('SIGKILL');
    }
  });

  it('lock-delay: a clean unlock hands over in < 500 ms', async (t) => {
    const name = unique('delay-clean');
    const h = await delayHolder(name);
    try {
      const waiting = client.lock(name, { timeout: 20000 });
      await queued(name);
      const t0 = Date.now();
      h.child.stdin.write('unlock\n');
      const mine = await waiting;
      const took = Date.now() - t0;
      t.diagnostic(`clean unlock handed over in ${took} ms`);
      console.log(`lock-delay: clean unlock handed over in ${took} ms`);
      assert.ok(took < 500, `a clean unlock handed over after ${took} ms`);
      assert.deepEqual(JSON.parse((await h.lines.next()).value), { unlocked: true });
      await mine.unlock();
    } finally {
      h.child.stdin.end();
      h.child.kill('SIGKILL');
      await h.exited;
    }
  });

  it('leaseTime ends the hold with LeaseExpired; tryLock takes the options too', async () => {
    const name = unique('lease-time');
    const t0 = Date.now();
    const lock = await client.lock(name, { leaseTime: 1000, metadata: { job: 'nightly' } });
    assert.equal(await lock.lost, 'LeaseExpired');
    const held = Date.now() - t0;
    assert.ok(held >= 900 && held < 3000, `held ${held} ms with leaseTime 1000`);
    const again = await client.tryLock(name, { leaseTime: 5000, metadata: { job: 'again' } });
    assert.ok(again, 'free after the lease time');
    // The meta record (one per session and name) is brought up to date within a tick (~100 ms).
    const st = await until(async () => {
      const s = await client.status(name);
      return s.holders[0]?.metadata?.job === 'again' ? s : null;
    }, { what: 'the new metadata in status' });
    assert.deepEqual(st.holders[0].metadata, { job: 'again' });
    const other = await Client.connect({ endpoints: etcd.endpoints });
    try {
      assert.equal(await other.tryLock(name, { metadata: { job: 'third' } }), null);
    } finally {
      await other.close();
    }
    await again.unlock();
  });

  it('bad options reject InvalidArgument with core messages, and nothing is written', async () => {
    const name = unique('bad-options');
    const cases = [
      [() => client.lock(name, { lockDelay: -1 }), /lock_delay/],
      [() => client.lock(name, { leaseTime: 0 }), /lease_time/],
      [() => client.lock(name, { metadata: { k: 'v'.repeat(1100) } }), /metadata/],
      [() => client.lock(name, { metadata: { k: 1 } }), /metadata\.k must be a string/],
      [() => client.lock(name, { metadata: ['k', 'v'] }), /plain object/],
      [() => client.lock(name, { lockDelay: '3s' }), /lockDelay must be a number/],
      [() => client.acquirePermit(name, 2, { lockDelay: 1000 }), /lock_delay|lock-delay/],
      [() => client.readLock(name, { lockDelay: 1000 }), /lock_delay|lock-delay/],
      [() => client.lockMany([name], { metadata: { a: 'b' } }), /not taken here/],
      [() => client.tryLock(name, { leaseTime: -5 }), /lease_time/],
    ];
    for (const [call, message] of cases) {
      await assert.rejects(call(), (e) => e.code === 'InvalidArgument' && message.test(e.message), String(call));
    }
    assert.equal((await client.status(name)).holders.length, 0);
  });

  it('releasePermit frees a wedged permit by its id; its holder sees KeyDeleted', async () => {
    const name = unique('release-permit');
    const other = await Client.connect({ endpoints: etcd.endpoints });
    try {
      const permit = await other.acquirePermit(name, 1, { metadata: { worker: 'w1' } });
      assert.equal(await client.releasePermit(name, permit.fencingToken - 1n), false);
      assert.equal(permit.isHeld, true);
      assert.equal(await client.releasePermit(name, permit.fencingToken), true);
      assert.equal(await permit.lost, 'KeyDeleted');
      const mine = await client.acquirePermit(name, 1, { timeout: 2000 });
      await mine.unlock();
      await assert.rejects(client.releasePermit(name, 'x'), TypeError);
    } finally {
      await other.close();
    }
  });
});
