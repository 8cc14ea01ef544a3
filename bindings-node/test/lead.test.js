'use strict';
// client.lead(): the leader loop (core LeaderLoop) with the task in
// JavaScript. Three candidates across a partition (a harness proxy paused)
// and a stop; re-campaign after the task returns; again: false; a loss's
// reason; the events in order; bad input; a stopped loop lets the process exit.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { once } = require('node:events');
const path = require('node:path');
const { Client, LeaderLoop } = require('..');
const { startEtcd, unique, runNode } = require('./helpers.js');

let etcd;
before(async () => {
  etcd = await startEtcd();
});
after(async () => {
  await etcd?.stop();
});

/** Resolves when `signal` aborts (at once if it has). */
const aborted = (signal) => new Promise((r) => (signal.aborted ? r() : signal.addEventListener('abort', r, { once: true })));

/** Resolves when `cond()` holds, checked at each `ev` of `emitter`; rejects after `ms`. */
function awaitEvent(emitter, ev, cond, ms, what) {
  return new Promise((resolve, reject) => {
    if (cond()) return resolve();
    const t = setTimeout(() => {
      emitter.off(ev, check);
      reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
    }, ms);
    function check() {
      if (!cond()) return;
      clearTimeout(t);
      emitter.off(ev, check);
      resolve();
    }
    emitter.on(ev, check);
  });
}

describe('client.lead', () => {
  it('three candidates: a partitioned leader is cancelled within the TTL before the next task starts; stop hands over in under 1 s; one task at a time', { timeout: 60000 }, async () => {
    const name = unique('lead');
    const ttl = 3;
    const px = await etcd.proxy();
    const clients = [
      await Client.connect({ endpoints: [px.endpoint], ttl }),
      await Client.connect({ endpoints: etcd.endpoints, ttl }),
      await Client.connect({ endpoints: etcd.endpoints, ttl }),
    ];
    const { EventEmitter } = require('node:events');
    const bus = new EventEmitter();
    const starts = [];
    const cancels = [];
    let running = 0;
    let most = 0;
    let writes = 0;
    const task = (who) => async (term) => {
      running++;
      most = Math.max(most, running);
      const at = performance.now();
      await term.leadership.put('leader-writes', String(term.fencingToken));
      writes++;
      // Counted as started once its write is through (the test awaits starts).
      starts.push({ who, token: term.fencingToken, at });
      bus.emit('start');
      await aborted(term.signal);
      cancels.push({ who, at: performance.now(), reason: term.signal.reason });
      running--;
    };
    const loops = [];
    const events = [[], [], []];
    const lead = (i) => {
      const lp = clients[i].lead(name, task(i), { value: `c${i}` });
      for (const ev of ['elected', 'renewalFailing', 'renewalRecovered', 'lost', 'resigned', 'stopped']) {
        lp.on(ev, (arg) => events[i].push(ev === 'lost' ? `lost:${arg}` : ev));
      }
      lp.on('error', (e) => events[i].push(`error:${e.code}`));
      loops[i] = lp;
    };
    try {
      lead(0);
      await awaitEvent(bus, 'start', () => starts.length >= 1, 10000, 'candidate 0 elected');
      assert.equal(starts[0].who, 0);
      lead(1);
      lead(2);

      const cut = performance.now();
      assert.deepEqual(await etcd.proxyPause(px.index), { ok: true });
      await awaitEvent(bus, 'start', () => starts.length >= 2, 3 * ttl * 1000, 'a second term');
      const cancelled = cancels[0].at - cut;
      const next = starts[1].at - cut;
      assert.equal(cancels[0].who, 0);
      assert.ok(cancelled < ttl * 1000, `the partitioned leader's task ran ${cancelled.toFixed(0)} ms past the cut`);
      assert.ok(cancels[0].at < starts[1].at, 'the next task started before the old one was cancelled');
      assert.equal(cancels[0].reason.code, 'LockLost');
      assert.notEqual(starts[1].who, 0);
      assert.ok(starts[1].token > starts[0].token, `${starts[1].token} after ${starts[0].token}`);
      assert.deepEqual(await etcd.proxyResume(px.index), { ok: true });

      const second = starts[1].who;
      const stopAt = performance.now();
      const stopping = loops[second].stop();
      await awaitEvent(bus, 'start', () => starts.length >= 3, 5000, 'a third term');
      const handover = starts[2].at - stopAt;
      assert.ok(handover < 1000, `handover took ${handover.toFixed(0)} ms`);
      assert.ok(starts[2].who !== second && starts[2].who !== undefined);
      assert.ok(starts[2].token > starts[1].token);
      await stopping;
      assert.deepEqual(events[second].slice(-3), ['elected', 'resigned', 'stopped']);
      console.log(
        `partition: old task cancelled ${cancelled.toFixed(0)} ms after the cut, next task started ${next.toFixed(0)} ms after it (TTL ${ttl} s); stop handed over in ${handover.toFixed(0)} ms`
      );
    } finally {
      await Promise.all(loops.map((lp) => lp.stop()));
      await Promise.all(clients.map((c) => c.close()));
    }
    assert.equal(most, 1, 'two tasks ran at once');
    assert.equal(running, 0);
    assert.equal(writes, starts.length);
    // Candidate 0: elected, renewal failing, lost (never resigned for that term); stopped last.
    assert.deepEqual(events[0].slice(0, 2), ['elected', 'renewalFailing']);
    assert.match(events[0][2], /^lost:/);
    assert.equal(events[0].at(-1), 'stopped');
    for (const e of events) assert.equal(e.filter((x) => x === 'stopped').length, 1);
  });

  it('a task that returns resigns and the loop campaigns again (tokens strictly increase); events arrive in order', { timeout: 30000 }, async () => {
    const c = await Client.connect({ endpoints: etcd.endpoints, ttl: 10 });
    try {
      const name = unique('lead-again');
      const tokens = [];
      // The first term waits until the loop has reported us as leader. That
      // 'leader' event may come before the task starts (and pushes its
      // token) or after it: the newest one is kept, and checked on both.
      let lastLeader = null;
      let wake = null;
      const check = () => {
        const l = lastLeader;
        if (wake && l && l.value.toString() === 'me' && l.revision === tokens[0]) {
          wake();
          wake = null;
        }
      };
      const loop = c.lead(
        name,
        async (term) => {
          tokens.push(term.fencingToken);
          assert.ok(term.leadership.isHeld);
          if (tokens.length === 1) {
            await new Promise((r) => {
              wake = r;
              check();
            });
          }
          if (tokens.length < 3) return;
          await aborted(term.signal);
        },
        { value: 'me' }
      );
      assert.ok(loop instanceof LeaderLoop);
      const onLeader = (l) => {
        lastLeader = l;
        check();
      };
      loop.on('leader', onLeader);
      const seen = [];
      for await (const ev of loop) {
        if (ev.type === 'leader') continue;
        seen.push(ev.type);
        if (ev.type === 'elected') assert.equal(typeof ev.term.fencingToken, 'bigint');
        if (seen.filter((t) => t === 'elected').length === 3 && ev.type === 'elected') loop.stop();
      }
      loop.off('leader', onLeader);
      assert.deepEqual(seen, ['elected', 'resigned', 'elected', 'resigned', 'elected', 'resigned', 'stopped']);
      assert.equal(tokens.length, 3);
      assert.ok(tokens[0] < tokens[1] && tokens[1] < tokens[2], tokens.join(' < '));
      await loop.stop(); // idempotent, resolves at once

      // again: false runs one term.
      const one = c.lead(name, async () => {}, { value: 'once', again: false });
      const evs = [];
      for await (const ev of one) if (ev.type !== 'leader') evs.push(ev.type);
      assert.deepEqual(evs, ['elected', 'resigned', 'stopped']);
    } finally {
      await c.close();
    }
  });

  it('a lost term reports its reason, aborts the signal, and the loop campaigns again after the task returned', { timeout: 30000 }, async () => {
    const c = await Client.connect({ endpoints: etcd.endpoints, ttl: 10 });
    try {
      const name = unique('lead-lost');
      const reasons = [];
      const lp = c.lead(name, async (term) => {
        await aborted(term.signal);
        reasons.push(term.signal.reason);
      });
      const [term] = await once(lp, 'elected');
      const lost = once(lp, 'lost');
      const again = once(lp, 'elected');
      assert.equal(await c.release(name, term.fencingToken), true);
      assert.deepEqual(await lost, ['KeyDeleted']);
      const [term2] = await again;
      assert.ok(term2.fencingToken > term.fencingToken);
      assert.equal(reasons.length, 1);
      assert.equal(reasons[0].code, 'LockLost');
      assert.equal(reasons[0].reason, 'KeyDeleted');
      const stopped = once(lp, 'stopped');
      await lp.stop();
      await stopped;
      assert.equal(term2.signal.reason.code, 'Cancelled');
    } finally {
      await c.close();
    }
  });

  it('an aborted signal stops the loop; bad input is a LockError InvalidArgument', { timeout: 30000 }, async () => {
    const c = await Client.connect({ endpoints: etcd.endpoints, ttl: 10 });
    try {
      const name = unique('lead-bad');
      const bad = (fn) => assert.throws(fn, (e) => e.name === 'LockError' && e.code === 'InvalidArgument');
      bad(() => c.lead(name));
      bad(() => c.lead('', async () => {}));
      bad(() => c.lead(name, async () => {}, { retry: -1 }));
      bad(() => c.lead(name, async () => {}, { again: 'yes' }));
      bad(() => c.lead(name, async () => {}, { value: 42 }));
      bad(() => c.lead(name, async () => {}, { timeout: 5 }));
      bad(() => c.lead(name, async () => {}, { signal: {} }));
      const ac = new AbortController();
      const lp = c.lead(name, async (term) => aborted(term.signal), { signal: ac.signal });
      await once(lp, 'elected');
      const evs = [];
      lp.on('resigned', () => evs.push('resigned'));
      lp.on('stopped', () => evs.push('stopped'));
      ac.abort();
      await once(lp, 'stopped');
      assert.deepEqual(evs, ['resigned', 'stopped']);
      const pre = new AbortController();
      pre.abort();
      const none = c.lead(name, async () => assert.fail('no term after an aborted signal'), { signal: pre.signal });
      const got = [];
      for await (const ev of none) got.push(ev.type);
      assert.deepEqual(got.filter((t) => t !== 'leader'), ['stopped']);
    } finally {
      await c.close();
    }
  });

  it('a stopped loop and a closed client let the process exit by itself', { timeout: 30000 }, async () => {
    const script = `
      const { Client } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
      (async () => {
        const c = await Client.connect({ endpoints: ${JSON.stringify(etcd.endpoints)}, ttl: 10 });
        const lp = c.lead('exit-${process.pid}', async (term) => { await new Promise((r) => term.signal.addEventListener('abort', r)); });
        lp.once('elected', async () => { await lp.stop(); await c.close(); console.log('stopped'); });
      })();
    `;
    const r = await runNode(['-e', script], { timeout: 20000 });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'stopped');
  });
});
