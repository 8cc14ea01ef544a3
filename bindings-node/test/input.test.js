'use strict';
// Bad input never crashes: every mistake is a rejected Promise with a code.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client, LockError } = require('..');
const { startEtcd, unique, runNode } = require('./helpers.js');

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

async function rejectsWith(promiseOrFn, code) {
  let p;
  try {
    p = typeof promiseOrFn === 'function' ? promiseOrFn() : promiseOrFn;
  } catch (e) {
    assert.fail(`threw synchronously instead of rejecting: ${e}`);
  }
  assert.ok(p && typeof p.then === 'function', 'did not return a Promise');
  const err = await p.then(
    (v) => assert.fail(`resolved with ${v}`),
    (e) => e
  );
  assert.ok(err instanceof LockError, `not a LockError: ${err && err.stack}`);
  assert.equal(err.code, code, err.message);
  return err;
}

describe('connect options', () => {
  it('wrong types reject InvalidArgument', async () => {
    await rejectsWith(() => Client.connect(42), 'InvalidArgument');
    await rejectsWith(() => Client.connect({ endpoints: 5 }), 'InvalidArgument');
    await rejectsWith(() => Client.connect({ endpoints: [1, 2] }), 'InvalidArgument');
    await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, ttl: '5' }), 'InvalidArgument');
    await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, namespace: 3 }), 'InvalidArgument');
    await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, tls: 'yes' }), 'InvalidArgument');
    await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, tls: { ca: 1 } }), 'InvalidArgument');
  });

  it('bad TTL values reject InvalidArgument', async () => {
    for (const ttl of [0, -1, 1.5, NaN, Infinity, 9e9 + 1, 1e300]) {
      await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, ttl }), 'InvalidArgument');
    }
  });

  it('empty or malformed endpoints reject InvalidArgument', async () => {
    await rejectsWith(() => Client.connect({ endpoints: [] }), 'InvalidArgument');
    await rejectsWith(() => Client.connect({ endpoints: [''] }), 'InvalidArgument');
    await rejectsWith(() => Client.connect({ endpoints: ['http://bad host:1'] }), 'InvalidArgument');
    await rejectsWith(() => Client.connect({ endpoints: ['https://127.0.0.1:1'] }), 'InvalidArgument');
    await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, username: 'u' }), 'InvalidArgument');
    await rejectsWith(
      () => Client.connect({ endpoints: ['127.0.0.1:1'], tls: { ca: '/nonexistent/ca.pem' } }),
      'InvalidArgument'
    );
  });

  it('an unreachable endpoint rejects Unavailable naming it', async () => {
    const err = await rejectsWith(
      () => Client.connect({ endpoints: ['127.0.0.1:1'], connectTimeout: 1000 }),
      'Unavailable'
    );
    assert.match(err.message, /127\.0\.0\.1:1/);
  });

  it('a margin above half the TTL rejects InvalidArgument (refused, not clamped to fit); half of it connects', async () => {
    for (const margin of [2501, 5000, 5001, 60000, -1, NaN, Infinity]) {
      await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, ttl: 5, margin }), 'InvalidArgument');
    }
    const c = await Client.connect({ endpoints: etcd.endpoints, ttl: 5, margin: 2500 });
    await c.close();
  });

  it('keepaliveInterval, declared only in options.d.ts, reaches core: a good value connects, a bad one carries core\'s message', async () => {
    const c = await Client.connect({ endpoints: etcd.endpoints, ttl: 5, keepaliveInterval: 250 });
    const lock = await c.lock(unique('ka'));
    assert.equal(lock.isHeld, true);
    await lock.unlock();
    await c.close();
    for (const keepaliveInterval of [1, 3000, -1, NaN, '1s']) {
      const err = await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, ttl: 5, keepaliveInterval }), 'InvalidArgument');
      assert.match(err.message, /keepalive/i);
    }
  });

  it('lazyConnect: connect resolves without etcd, and each call keeps its own bound', async () => {
    const down = ['127.0.0.1:1'];
    let t = performance.now();
    const c = await Client.connect({ endpoints: down, lazyConnect: true, requestTimeout: 500 });
    assert.ok(performance.now() - t < 200, `lazy connect took ${performance.now() - t} ms`);
    t = performance.now();
    await rejectsWith(() => c.ping(), 'Unavailable');
    assert.ok(performance.now() - t < 500 + 700, `ping took ${performance.now() - t} ms`);
    t = performance.now();
    await rejectsWith(() => c.tryLock(unique('lazy')), 'Unavailable');
    assert.ok(performance.now() - t < 500 + 700, `tryLock took ${performance.now() - t} ms`);
    t = performance.now();
    await assert.rejects(() => c.lock(unique('lazy'), { timeout: 1000 }), (e) => ['Timeout', 'Unavailable'].includes(e.code));
    assert.ok(performance.now() - t < 1000 + 700, `lock(1 s) took ${performance.now() - t} ms`);
    await c.close();
    const live = await Client.connect({ endpoints: etcd.endpoints, lazyConnect: true });
    const lock = await live.lock(unique('lazy'));
    assert.equal(lock.isHeld, true);
    await lock.unlock();
    await live.close();
    await rejectsWith(() => Client.connect({ endpoints: down, connectTimeout: 300 }), 'Unavailable');
    await rejectsWith(() => Client.connect({ endpoints: down, lazyConnect: 'yes' }), 'InvalidArgument');
  });

  it('an unknown option is refused by name, not ignored', async () => {
    const err = await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, tll: 5 }), 'InvalidArgument');
    assert.match(err.message, /unknown option "tll"/);
  });

  it('errors say whether a retry may succeed', async () => {
    const bad = await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, ttl: 0 }), 'InvalidArgument');
    assert.equal(bad.retryable, false);
    const down = await rejectsWith(() => Client.connect({ endpoints: ['127.0.0.1:1'], connectTimeout: 300 }), 'Unavailable');
    assert.equal(down.retryable, true);
  });

  it('negative timeouts reject InvalidArgument', async () => {
    await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, connectTimeout: -5 }), 'InvalidArgument');
    await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, requestTimeout: 0 }), 'InvalidArgument');
  });
});

describe('lock arguments', () => {
  it('non-string names reject InvalidArgument', async () => {
    for (const name of [undefined, null, 42, {}, ['a'], Symbol('x'), 10n]) {
      await rejectsWith(() => client.lock(name), 'InvalidArgument');
      await rejectsWith(() => client.tryLock(name), 'InvalidArgument');
    }
  });

  it('empty and oversized names reject InvalidArgument', async () => {
    await rejectsWith(() => client.lock(''), 'InvalidArgument');
    await rejectsWith(() => client.tryLock(''), 'InvalidArgument');
    const huge = 'x'.repeat(32 * 1024 + 1);
    await rejectsWith(() => client.lock(huge), 'InvalidArgument');
    await rejectsWith(() => client.tryLock(huge), 'InvalidArgument');
  });

  it('bad options reject InvalidArgument', async () => {
    const name = unique('opts');
    await rejectsWith(() => client.lock(name, 5), 'InvalidArgument');
    await rejectsWith(() => client.lock(name, { timeout: '1s' }), 'InvalidArgument');
    await rejectsWith(() => client.lock(name, { timeout: -1 }), 'InvalidArgument');
    await rejectsWith(() => client.lock(name, { timeout: NaN }), 'InvalidArgument');
    await rejectsWith(() => client.lock(name, { signal: 'stop' }), 'InvalidArgument');
    await rejectsWith(() => client.withLock(name, 'not a function'), 'InvalidArgument');
  });

  it('bad guarded-op arguments reject InvalidArgument, and the lock still works', async () => {
    const lock = await client.lock(unique('ops'));
    await rejectsWith(() => lock.put(1, 'v'), 'InvalidArgument');
    await rejectsWith(() => lock.put('k', null), 'InvalidArgument');
    await rejectsWith(() => lock.put('k', { a: 1 }), 'InvalidArgument');
    await rejectsWith(() => lock.get(undefined), 'InvalidArgument');
    await rejectsWith(() => lock.get('k', 'klingon'), 'InvalidArgument');
    await rejectsWith(() => lock.delete([]), 'InvalidArgument');
    // a value over etcd's request limit is refused by etcd, mapped, not fatal
    await rejectsWith(() => lock.put('big', Buffer.alloc(2 * 1024 * 1024)), 'InvalidArgument');
    await lock.put('k', 'v');
    assert.equal(await lock.get('k', 'utf8'), 'v');
    await lock.unlock();
  });

  it('a lone UTF-16 surrogate in any string argument rejects InvalidArgument; paired ones are fine', async () => {
    const lone = ['\ud800', 'job\udc00', '\udc00\ud800'];
    for (const s of lone) {
      await rejectsWith(() => client.lock(s), 'InvalidArgument');
      await rejectsWith(() => client.tryLock(s), 'InvalidArgument');
      await rejectsWith(() => client.withLock(s, () => {}), 'InvalidArgument');
      await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, namespace: s }), 'InvalidArgument');
      await rejectsWith(() => Client.connect({ endpoints: [`127.0.0.1:${s}`] }), 'InvalidArgument');
      await rejectsWith(() => Client.connect({ endpoints: `127.0.0.1:1,${s}` }), 'InvalidArgument');
      await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, username: s, password: 'p' }), 'InvalidArgument');
      await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, username: 'u', password: s }), 'InvalidArgument');
      await rejectsWith(() => Client.connect({ endpoints: etcd.endpoints, tls: { ca: s } }), 'InvalidArgument');
    }
    const lock = await client.lock(unique('surrogates'));
    const k = unique('k');
    for (const s of lone) {
      await rejectsWith(() => lock.put(k + s, 'v'), 'InvalidArgument');
      await rejectsWith(() => lock.put(k, s), 'InvalidArgument');
      await rejectsWith(() => lock.get(s), 'InvalidArgument');
      await rejectsWith(() => lock.delete(s), 'InvalidArgument');
      // nothing was written under the U+FFFD spelling
      assert.equal(await lock.get(k + s.replace(/\p{Surrogate}/gu, '\ufffd')), null);
    }
    assert.equal(await lock.get(k), null);
    // a surrogate pair is one well-formed code point
    await lock.put('emoji-\ud83d\ude00', 'v-\ud83d\ude00');
    assert.equal(await lock.get('emoji-\ud83d\ude00', 'utf8'), 'v-\ud83d\ude00');
    await lock.unlock();
    const named = await client.lock(`${unique('pair')}-\ud83d\ude00`);
    assert.ok(named.name.endsWith('\ud83d\ude00'));
    await named.unlock();
  });

  it('the native classes refuse direct misuse with a LockError, not a crash', async () => {
    assert.throws(() => new Client({}), (e) => e.code === 'InvalidArgument');
  });
});

describe('options and the environment (one rule, in core)', () => {
  it('variables fill the options not given, explicit options win, a malformed variable for a given option is ignored', async () => {
    const script = `
      const { Client } = require(${JSON.stringify(require.resolve('..'))});
      (async () => {
        const c = await Client.connect({ endpoints: ${JSON.stringify(etcd.endpoints)}, ttl: 7 });
        const l = await c.lock('env-rule');
        console.log(JSON.stringify({ ttl: c.ttl, key: l.key }));
        await l.unlock();
        await c.close();
      })().catch((e) => { console.log(JSON.stringify({ error: e.code || String(e) })); });`;
    const env = { ETCDLOCK_TTL: 'not-a-ttl', ETCDLOCK_NAMESPACE: 'from-env/', ETCDLOCK_ENDPOINTS: '127.0.0.1:1' };
    const r = await runNode(['-e', script], { env });
    const out = JSON.parse(r.stdout.trim().split('\n').pop());
    assert.equal(out.error, undefined, r.stderr);
    assert.equal(out.ttl, 7);
    assert.ok(out.key.startsWith('from-env/env-rule/'), out.key);
  });
});
