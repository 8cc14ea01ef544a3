'use strict';
/**
 * etcdlock for Node.js: a fair (FIFO), fenced distributed lock on etcd.
 *
 * The lock itself (queueing, keep-alive, loss detection, fencing) lives in the
 * Rust core; this file only adds JavaScript idioms on top of the native module
 * (`loader.js` finds the `.node` file): option objects, `AbortSignal`,
 * `await using`, bigint tokens, and `LockError` with a `code`.
 *
 * @example
 * // An ES module (top-level await); keep data keys outside the lock's prefix.
 * import { Client } from 'etcdlock';
 * const client = await Client.connect({ endpoints: ['127.0.0.1:2379'], ttl: 10 });
 * await client.withLock('stock', async (lock) => {
 *   const n = Number((await lock.get('stock-count', 'utf8')) ?? 0);
 *   await lock.put('stock-count', String(n - 1)); // rejected by etcd if we lost the lock
 * });
 * await client.close();
 */

const native = require('./loader.js').load();

// `await using` looks up Symbol.asyncDispose; Node 18 lacks it. Use the same
// registered symbol TypeScript's downlevel helpers fall back to.
if (typeof Symbol.asyncDispose !== 'symbol') {
  Object.defineProperty(Symbol, 'asyncDispose', { value: Symbol.for('Symbol.asyncDispose') });
}

/** The core's error names, in C status-code order (`ErrorCode.Timeout === 'Timeout'`). */
const ErrorCode = Object.freeze(Object.fromEntries(native.errorCodes().map((c) => [c, c])));
/** Why a held lock ended without `unlock()`. */
const LossReason = Object.freeze({
  LeaseExpired: 'LeaseExpired',
  KeyDeleted: 'KeyDeleted',
  ConnectionLost: 'ConnectionLost',
  ClientClosed: 'ClientClosed',
});
const ERRNO = Object.fromEntries(native.errorCodes().map((c, i) => [c, i + 1]));
/** The most permits one semaphore may have, and the most names one `lockMany` takes. */
const [MAX_PERMITS, MAX_MULTI] = native.recipeLimits();
// Lock -> its native handle, for subclasses (Leadership) that need it.
const NATIVE = new WeakMap();

/**
 * Every error etcdlock rejects with. `code` is the core's error name
 * (`'Timeout'`, `'LockLost'`, ... see `ErrorCode`), `errno` its numeric value,
 * and for `LockLost` `reason` says why the hold ended (see `LossReason`).
 */
class LockError extends Error {
  constructor(code, message, options = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LockError';
    this.code = code;
    this.errno = ERRNO[code] ?? ERRNO.Internal;
    if (options.reason) this.reason = options.reason;
  }
}

const SEP = '\u001f';
// napi's own argument-conversion failures (wrong JS type reached the native side).
const NAPI_TYPE_CODES = new Set([
  'InvalidArg', 'ObjectExpected', 'StringExpected', 'NameExpected', 'FunctionExpected',
  'NumberExpected', 'BooleanExpected', 'ArrayExpected', 'BigintExpected', 'DateExpected',
  'ArrayBufferExpected', 'DetachableArraybufferExpected',
]);

function fromNative(e) {
  if (e instanceof LockError) return e;
  const msg = e && typeof e.message === 'string' ? e.message : String(e);
  if (msg.startsWith('ETCDLOCK' + SEP)) {
    const [, code, reason, ...rest] = msg.split(SEP);
    return new LockError(code, rest.join(SEP), { reason: reason || undefined });
  }
  if (e && NAPI_TYPE_CODES.has(e.code)) {
    return new LockError('InvalidArgument', msg, { cause: e });
  }
  return new LockError('Internal', `a bug in etcdlock: ${msg}`, { cause: e });
}

async function call(fn) {
  try {
    return await fn();
  } catch (e) {
    throw fromNative(e);
  }
}

function invalid(message) {
  return new LockError('InvalidArgument', message);
}

// A JS string may hold a lone UTF-16 surrogate, which no UTF-8 string (hence
// no etcd key or value) can represent; napi's conversion would silently turn
// it into U+FFFD and lock or write a different name. Refuse it instead.
const isWellFormed =
  typeof String.prototype.isWellFormed === 'function'
    ? (s) => s.isWellFormed()
    : (s) => !/\p{Surrogate}/u.test(s); // node 18: in a /u regex only lone surrogates match

function checkText(s, what) {
  if (!isWellFormed(s)) {
    throw invalid(`${what} contains a lone UTF-16 surrogate, which is not valid Unicode: ${JSON.stringify(s)}`);
  }
  return s;
}

function checkName(name) {
  if (typeof name !== 'string') throw invalid(`lock name must be a string, got ${typeof name}`);
  checkText(name, 'lock name');
}

function checkOptions(opts, what) {
  if (opts === undefined || opts === null) return {};
  if (typeof opts !== 'object') throw invalid(`${what} must be an object, got ${typeof opts}`);
  return opts;
}

function optNumber(v, what) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number') throw invalid(`${what} must be a number, got ${typeof v}`);
  return v;
}

function optString(v, what) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalid(`${what} must be a string, got ${typeof v}`);
  return checkText(v, what);
}

function optBoolean(v, what) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw invalid(`${what} must be a boolean, got ${typeof v}`);
  return v;
}

function toBytes(v, what) {
  if (typeof v === 'string') return checkText(v, what);
  if (Buffer.isBuffer(v)) return v;
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  throw invalid(`${what} must be a string, Buffer or Uint8Array, got ${v === null ? 'null' : typeof v}`);
}

// Built outside any scope that sees the Lock or the native lock: the native
// side holds this callback until the hold ends, and it must not keep them alive.
function onEnd(resolve, controller, name) {
  return (err, reason) => {
    if (err || !reason) return; // released normally: `lost` never settles
    resolve(reason);
    controller.abort(new LockError('LockLost', `lock ${JSON.stringify(name)} was lost (${reason})`, { reason }));
  };
}

/**
 * A held lock. Get one from `client.lock()`, `client.tryLock()` or
 * `client.withLock()`. Release it with `unlock()` or `await using`.
 *
 * Loss is reported three ways: `isHeld` turns false, the `lost` Promise
 * resolves with the reason, and `signal` (an `AbortSignal`) aborts with a
 * `LockLost` error, so it can be handed to `fetch()` and friends.
 */
class Lock {
  #n;
  #lost;
  #controller;

  /** @internal */
  constructor(n) {
    this.#n = n;
    NATIVE.set(this, n);
    /** The lock name. */
    this.name = n.name;
    /** Our key in etcd (with the namespace), e.g. `orders/694d7a3e4b2c8f05`. */
    this.key = n.key;
    /** The session lease id. */
    this.leaseId = BigInt(n.leaseId);
    /** Our key's create_revision: strictly increases from one holder to the next. */
    this.fencingToken = BigInt(n.fencingToken);
  }

  // The loss watcher is registered on first use of `lost` or `signal`, so a
  // lock that never asks costs nothing extra. It captures neither `this` nor
  // the native lock, so a forgotten Lock can still be collected (and is then
  // released in the background by the core).
  #watch() {
    if (this.#lost) return;
    let resolve;
    this.#lost = new Promise((r) => (resolve = r));
    this.#controller = new AbortController();
    this.#n.onEnd(onEnd(resolve, this.#controller, this.name));
  }

  /**
   * Resolves with the `LossReason` if the hold ends without `unlock()`
   * (lease expired, key deleted, connection lost past the safety margin, client
   * closed). Never rejects; stays pending after a normal unlock. Waiting on it
   * does not keep the process alive.
   * @type {Promise<string>}
   */
  get lost() {
    this.#watch();
    return this.#lost;
  }

  /** An `AbortSignal` that aborts (reason: a `LockLost` LockError) when the hold is lost. */
  get signal() {
    this.#watch();
    return this.#controller.signal;
  }

  /** True while held: not unlocked, not lost, and inside the local validity window. */
  get isHeld() {
    return this.#n.isHeld;
  }

  /**
   * Whether the keep-alive renewal is failing now: `{ failing: false }`, or
   * `{ failing: true, validForMs }` once no keep-alive has been acknowledged
   * for an interval past when one was due, with the ms the hold still has. A
   * failing hold is still held: pause guarded work, do not assume it lost.
   * @type {{ failing: boolean, validForMs?: number }}
   */
  get renewal() {
    const ms = this.#n.renewalValidForMs;
    return ms === null || ms === undefined ? { failing: false } : { failing: true, validForMs: ms };
  }

  /**
   * Call `listener({ failing, validForMs })` at each change of `renewal` until
   * the hold ends. Like `lost`, it keeps neither the process nor the lock alive.
   * @param {(renewal: { failing: boolean, validForMs?: number }) => void} listener
   */
  onRenewal(listener) {
    if (typeof listener !== 'function') throw invalid('onRenewal() needs a function');
    this.#n.onRenewal((err, ms) => {
      if (err) return;
      listener(ms === null || ms === undefined ? { failing: false } : { failing: true, validForMs: ms });
    });
  }

  /** `'held'`, `'released'`, or the loss reason. */
  get state() {
    return this.#n.state;
  }

  /**
   * Release the lock. Idempotent. Rejects with `LockLost` if the hold had been
   * lost before, so the caller learns the critical section may not have been
   * protected to its end.
   * @returns {Promise<void>}
   */
  unlock() {
    return call(() => this.#n.unlock());
  }

  /** `await using lock = await client.lock(...)` calls `unlock()` at scope exit. */
  [Symbol.asyncDispose]() {
    return this.unlock();
  }

  /**
   * Put `key` = `value` (namespaced like the lock) only while we hold the lock;
   * etcd rejects it (`LockLost`) if we do not.
   */
  async put(key, value) {
    const k = toBytes(key, 'key');
    const v = toBytes(value, 'value');
    return call(() => this.#n.put(k, v));
  }

  /**
   * Get `key` only while we hold the lock: a Buffer, a string if `encoding` is
   * given, or `null` when absent.
   */
  async get(key, encoding) {
    const k = toBytes(key, 'key');
    if (encoding !== undefined && !Buffer.isEncoding(encoding)) throw invalid(`unknown encoding ${encoding}`);
    const v = await call(() => this.#n.get(k));
    if (v === null || v === undefined) return null;
    return encoding === undefined ? v : v.toString(encoding);
  }

  /** Delete `key` only while we hold the lock; resolves true if it existed. */
  async delete(key) {
    const k = toBytes(key, 'key');
    return call(() => this.#n.delete(k));
  }

  toString() {
    return `Lock(${this.key}, token ${this.fencingToken}, ${this.state})`;
  }
}

/**
 * Leadership won by `client.campaign()`: everything a `Lock` has (key,
 * fencing token, `lost`, `signal`, guarded `put`/`get`/`delete`, `await using`
 * resigns) plus `proclaim()` and `resign()`.
 */
class Leadership extends Lock {
  /** Announce a new value as leader; rejects `LockLost` if we no longer lead. */
  async proclaim(value) {
    const v = toBytes(value, 'value');
    return call(() => NATIVE.get(this).setValue(v));
  }

  /** Give up leadership (the next candidate leads); same as `unlock()`. */
  resign() {
    return this.unlock();
  }

  toString() {
    return super.toString().replace(/^Lock/, 'Leadership');
  }
}

function onMultiEnd(resolve, controller) {
  return (err, lost) => {
    if (err || !lost) return;
    const [name, reason] = lost;
    resolve({ name, reason });
    controller.abort(new LockError('LockLost', `lock ${JSON.stringify(name)} was lost (${reason})`, { reason }));
  };
}

/**
 * Several locks held together, from `client.lockMany()`. Losing any one of
 * them is losing the hold: `lost` resolves with `{ name, reason }` of the
 * first, and `signal` aborts. `unlock()` (or `await using`) releases all.
 */
class MultiLock {
  #n;
  #lost;
  #controller;

  /** @internal */
  constructor(n) {
    this.#n = n;
    /** The lock names, in the order given. */
    this.names = n.names;
    /** Our key on each lock. */
    this.keys = n.keys;
    /** The fencing token on each lock (equal: one etcd transaction created every key). */
    this.fencingTokens = n.fencingTokens.map((t) => BigInt(t));
  }

  #watch() {
    if (this.#lost) return;
    let resolve;
    this.#lost = new Promise((r) => (resolve = r));
    this.#controller = new AbortController();
    this.#n.onEnd(onMultiEnd(resolve, this.#controller));
  }

  /** Resolves `{ name, reason }` when a lock is lost; stays pending after `unlock()`. */
  get lost() {
    this.#watch();
    return this.#lost;
  }

  /** Aborts (reason: a `LockLost` LockError) when any lock is lost. */
  get signal() {
    this.#watch();
    return this.#controller.signal;
  }

  /** True while every lock is held. */
  get isHeld() {
    return this.#n.isHeld;
  }

  /** Release every lock (each is tried; rejects with the first error). */
  unlock() {
    return call(() => this.#n.unlock());
  }

  [Symbol.asyncDispose]() {
    return this.unlock();
  }

  toString() {
    return `MultiLock(${this.names.join(', ')}, ${this.isHeld ? 'held' : 'not held'})`;
  }
}

function leaderOf(l) {
  return l ? { key: l.key, value: l.value, revision: BigInt(l.revision), leaseId: BigInt(l.leaseId) } : null;
}

function contenderOf(c) {
  return {
    key: c.key,
    kind: c.kind,
    permits: c.permits ?? null,
    holds: c.holds,
    leaseId: BigInt(c.leaseId),
    ttlRemaining: c.ttlRemaining ?? null,
    fencingToken: BigInt(c.fencingToken),
    owner: c.owner ?? null,
    ageMs: c.ageMs ?? null,
    value: c.value,
    host: c.host ?? null,
    pid: c.pid ?? null,
    language: c.language ?? null,
    localWaiters: c.localWaiters ?? null,
    foreign: c.foreign,
  };
}

function statusOf(st) {
  return {
    name: st.name,
    kind: st.kind ?? null,
    revision: BigInt(st.revision),
    holders: st.holders.map(contenderOf),
    waiters: st.waiters.map(contenderOf),
  };
}

function checkSignal(signal) {
  if (signal === undefined || signal === null) return undefined;
  if (typeof signal !== 'object' || typeof signal.addEventListener !== 'function' || !('aborted' in signal)) {
    throw invalid('signal must be an AbortSignal');
  }
  return signal;
}

// Run `start(timeout, cancel)` (a native acquisition) with the `{ timeout,
// signal }` options every acquisition takes: `Infinity` waits forever, an
// aborted signal rejects `Cancelled` (cause: the signal's reason) and removes
// our waiter keys.
async function acquire(what, options, start) {
  const o = checkOptions(options, 'options');
  let timeout = optNumber(o.timeout, 'timeout');
  if (timeout === Infinity) timeout = undefined; // wait as long as it takes
  const signal = checkSignal(o.signal);
  if (!signal) return call(() => start(timeout, undefined));
  if (signal.aborted) {
    throw new LockError('Cancelled', `waiting for ${what} was aborted`, { cause: signal.reason });
  }
  const cancel = new native.NativeCancel();
  const onAbort = () => cancel.cancel();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await call(() => start(timeout, cancel));
  } catch (e) {
    if (e.code === 'Cancelled' && signal.aborted && e.cause === undefined) {
      throw new LockError('Cancelled', e.message, { cause: signal.reason });
    }
    throw e;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

async function* follow(obs, signal) {
  for (;;) {
    if (signal?.aborted) return;
    const cancel = new native.NativeCancel();
    const onAbort = () => cancel.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    let l;
    try {
      l = await call(() => obs.next(cancel));
    } catch (e) {
      if (e.code === 'Cancelled' && signal?.aborted) return;
      throw e;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    yield leaderOf(l);
  }
}

/**
 * A connection to etcd that hands out locks. All locks of a client share one
 * lease, kept alive in the background. An idle client does not keep the Node
 * process alive (a pending `lock()` does); call `close()` to revoke the lease
 * and release every lock at once.
 */
// Clients opened with `releaseOnExit`: closed (their leases revoked, so their
// locks are free at once, not after the TTL) when SIGTERM, SIGINT or SIGHUP
// arrives. Node's default action for those signals ends the process with no
// JavaScript run (no `exit`/`beforeExit` handlers), so a lock would otherwise
// stay held until its TTL ran out.
const releasing = new Set();
const EXIT_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'];
let exitHandlersInstalled = false;

function releaseOnSignals(client) {
  releasing.add(client);
  if (exitHandlersInstalled) return;
  exitHandlersInstalled = true;
  for (const sig of EXIT_SIGNALS) {
    const onSignal = () => {
      const clients = [...releasing];
      releasing.clear();
      // Bounded: each close is bounded by its client's request timeout; do
      // not let a hung etcd keep a stopping process alive past 2 s.
      const closed = Promise.allSettled(clients.map((c) => c.close()));
      const bound = new Promise((r) => setTimeout(r, 2000).unref());
      Promise.race([closed, bound]).then(() => {
        // Someone else also listens: stopping is theirs to do. Else end the
        // process by the same signal, as the default action would have.
        if (process.listenerCount(sig) > 1) return;
        for (const s of EXIT_SIGNALS) process.removeAllListeners(s);
        process.kill(process.pid, sig);
      });
    };
    process.on(sig, onSignal);
  }
}

class Client {
  #n;

  /** @internal */
  constructor(n) {
    if (!(n instanceof native.NativeClient)) throw invalid('use Client.connect(options)');
    this.#n = n;
  }

  /**
   * Connect to etcd and open the session (grant the lease).
   * @param {object} options `{ endpoints, ttl, namespace, username, password, tls: { ca, cert, key, domain },
   *   connectTimeout, requestTimeout, margin, watchHeldKeys, releaseOnExit }` (`ttl` in seconds, timeouts and `margin`
   *   in milliseconds, TLS values are PEM file paths; see index.d.ts). `releaseOnExit: true` closes the
   *   client when SIGTERM, SIGINT or SIGHUP arrives (its locks are free at once instead of after the TTL),
   *   then ends the process by that signal unless another listener handles it.
   *   Every option not given here comes from its `ETCDLOCK_*` variable if set (ETCDLOCK_ENDPOINTS,
   *   ETCDLOCK_TTL, ETCDLOCK_NAMESPACE, ETCDLOCK_USERNAME, ETCDLOCK_PASSWORD, ETCDLOCK_TLS_CA/_TLS_CERT/_TLS_KEY/_TLS_DOMAIN,
   *   ETCDLOCK_CONNECT_TIMEOUT, ETCDLOCK_REQUEST_TIMEOUT, ETCDLOCK_MARGIN, ETCDLOCK_WATCH_HELD_KEYS): the same rule
   *   as every other language, in the core. An option given here wins, and a malformed variable for it is ignored.
   */
  static async connect(options) {
    const o = checkOptions(options, 'options');
    let endpoints = o.endpoints;
    if (typeof endpoints === 'string') endpoints = endpoints.split(',').map((s) => s.trim()).filter(Boolean);
    if (endpoints !== undefined && endpoints !== null && (!Array.isArray(endpoints) || endpoints.some((e) => typeof e !== 'string'))) {
      throw invalid('endpoints must be an array of strings (or a comma-separated string)');
    }
    if (Array.isArray(endpoints)) for (const e of endpoints) checkText(e, 'endpoint');
    const tls = checkOptions(o.tls, 'tls');
    const ttl = o.ttl;
    const opts = {
      endpoints,
      ttl: optNumber(ttl, 'ttl'),
      namespace: optString(o.namespace, 'namespace'),
      username: optString(o.username, 'username'),
      password: optString(o.password, 'password'),
      ca: optString(tls.ca, 'tls.ca'),
      cert: optString(tls.cert, 'tls.cert'),
      key: optString(tls.key, 'tls.key'),
      domain: optString(tls.domain, 'tls.domain'),
      connectTimeoutMs: optNumber(o.connectTimeout, 'connectTimeout'),
      requestTimeoutMs: optNumber(o.requestTimeout, 'requestTimeout'),
      marginMs: optNumber(o.margin, 'margin'),
      watchHeldKeys: optBoolean(o.watchHeldKeys, 'watchHeldKeys'),
    };
    for (const k of Object.keys(opts)) if (opts[k] === undefined) delete opts[k];
    const releaseOnExit = optBoolean(o.releaseOnExit, 'releaseOnExit');
    const client = new Client(await call(() => native.NativeClient.connect(opts)));
    if (releaseOnExit) releaseOnSignals(client);
    return client;
  }

  /** The effective lease TTL in seconds (etcd raises TTLs below its minimum). */
  get ttl() {
    return this.#n.ttl;
  }

  /** Whether `close()` was called. */
  get closed() {
    return this.#n.closed;
  }

  /**
   * What this client has done so far, from the native core (the same figures in every
   * language); no etcd request. `acquisitions` by outcome (`acquired`, `timeout`,
   * `would_block`, `cancelled`, `error`: each `{ count, waitMs }`), `waiting` and `held` now,
   * `heldMs` (current holds, summed), `holdsEnded` and `holdMs`, `lost` by reason
   * (`LeaseExpired`, `KeyDeleted`, `ConnectionLost`, `ClientClosed`), `keepalives` and
   * `keepaliveRttMs` (null before the first).
   * @returns {import('./index').Metrics}
   */
  metrics() {
    return JSON.parse(this.#n.metricsJson());
  }

  /**
   * The same metrics in Prometheus' text exposition format (0.0.4), named by
   * core's one list (`etcdlock_acquire_seconds`, `etcdlock_held`,
   * `etcdlock_lost_total`, ...), with `labels` on every series: serve it
   * from your `/metrics` route, or append it to prom-client's
   * `register.metrics()`.
   * @param {Record<string, string>} [labels]
   * @returns {string}
   */
  prometheus(labels = {}) {
    return this.#n.prometheus(Object.entries(labels).map(([k, v]) => [String(k), String(v)]));
  }

  /**
   * Acquire `name`, waiting in FIFO order behind earlier waiters.
   * @param {string} name
   * @param {{ timeout?: number, signal?: AbortSignal }} [options] `timeout` in ms
   *   (rejects `Timeout`; `Infinity` or absent: no limit); aborting `signal`
   *   rejects `Cancelled`. Either way our waiter key is removed from etcd.
   * @returns {Promise<Lock>}
   */
  async lock(name, options) {
    checkName(name);
    return new Lock(await acquire(`lock ${JSON.stringify(name)}`, options, (t, c) => this.#n.lock(name, t, c)));
  }

  /**
   * Acquire `name` only if it is free right now.
   * @returns {Promise<Lock|null>} `null` when someone else holds it.
   */
  async tryLock(name) {
    checkName(name);
    const n = await call(() => this.#n.tryLock(name));
    return n ? new Lock(n) : null;
  }

  /**
   * Run `fn(lock)` while holding `name`, and always release afterwards.
   * Resolves with `fn`'s result. If `fn` succeeded but the lock had been lost
   * meanwhile, rejects with `LockLost`; if `fn` threw, that error wins.
   */
  async withLock(name, fn, options) {
    if (typeof fn !== 'function') throw invalid('withLock(name, fn): fn must be a function');
    const lock = await this.lock(name, options);
    let result;
    try {
      result = await fn(lock);
    } catch (e) {
      await lock.unlock().catch(() => {});
      throw e;
    }
    await lock.unlock();
    return result;
  }

  /**
   * Take one of `permits` permits of the semaphore `name` (at most `permits`
   * holders at once, cluster-wide; FIFO). Every contender must agree on
   * `permits` (else `InvalidArgument`). Options as `lock()`.
   * @returns {Promise<Lock>} the permit: a Lock (token, `lost`, guarded ops, `await using`).
   */
  async acquirePermit(name, permits, options) {
    checkName(name);
    if (typeof permits !== 'number') throw invalid(`permits must be a number, got ${typeof permits}`);
    return new Lock(await acquire(`semaphore ${JSON.stringify(name)}`, options, (t, c) => this.#n.acquirePermit(name, permits, t, c)));
  }

  /**
   * Take the read side of the read-write lock `name`: shared with readers,
   * excluded by writers. The write side is `lock(name)` (so `etcdctl lock`
   * and Go's Mutex exclude readers too). FIFO: a reader behind a waiting
   * writer waits for it. Options as `lock()`.
   * @returns {Promise<Lock>}
   */
  async readLock(name, options) {
    checkName(name);
    return new Lock(await acquire(`read lock ${JSON.stringify(name)}`, options, (t, c) => this.#n.readLock(name, t, c)));
  }

  /**
   * Lock every name in `names` together (up to `MAX_MULTI`). The waiter keys
   * are created in one etcd transaction, so every client queues in the same
   * order on every name: no deadlock, no retry loop. Timeout or abort removes
   * every key. Options as `lock()`.
   * @returns {Promise<MultiLock>}
   */
  async lockMany(names, options) {
    if (!Array.isArray(names)) throw invalid(`names must be an array of strings, got ${typeof names}`);
    for (const n of names) checkName(n);
    return new MultiLock(await acquire(`locks ${JSON.stringify(names)}`, options, (t, c) => this.#n.lockMany(names, t, c)));
  }

  /**
   * Campaign for leadership of `name` announcing `value`, waiting (FIFO
   * among candidates) until elected. Same keys as Go's `concurrency.Election`
   * and `etcdctl elect`. Options as `lock()`.
   * @returns {Promise<Leadership>}
   */
  async campaign(name, value, options) {
    checkName(name);
    const v = toBytes(value, 'value');
    return new Leadership(await acquire(`election ${JSON.stringify(name)}`, options, (t, c) => this.#n.campaign(name, v, t, c)));
  }

  /**
   * The current leader of the election `name`: `{ key, value (Buffer),
   * revision (bigint: the leadership's fencing token), leaseId }`, or `null`.
   */
  async leader(name) {
    checkName(name);
    return leaderOf(await call(() => this.#n.leader(name)));
  }

  /**
   * Follow the election `name`: an async iterable of leaders (as `leader()`
   * returns them; `null` while nobody leads), the current state first, then
   * each change. Ends when `options.signal` aborts (or on `break`).
   * @returns {AsyncGenerator<object|null>}
   */
  observe(name, options) {
    checkName(name);
    const signal = checkSignal(checkOptions(options, 'options').signal);
    let obs;
    try {
      obs = this.#n.observe(name);
    } catch (e) {
      throw fromNative(e);
    }
    return follow(obs, signal);
  }

  /**
   * Holders and waiters of `name` for any kind (mutex, semaphore, read-write
   * lock, election; etcdctl and Go keys too): `{ name, revision, holders,
   * waiters }`, each contender `{ key, kind ('exclusive'|'reader'|'permit'),
   * permits, holds, leaseId, ttlRemaining, fencingToken, owner, ageMs, value }`.
   */
  async status(name) {
    checkName(name);
    const st = await call(() => this.#n.status(name));
    return statusOf(st);
  }

  /**
   * Every lock, election, semaphore and read-write lock whose name starts
   * with `prefix` (default: all of this client's namespace), sorted by name,
   * from one read: what `etcdlock list` shows.
   */
  async list(prefix = '') {
    if (typeof prefix !== 'string') throw new TypeError(`prefix must be a string, not ${typeof prefix}`);
    return (await call(() => this.#n.list(prefix))).map(statusOf);
  }

  /**
   * Free a lock whose holder is wedged: delete the hold of `name` whose
   * fencing token is `token`, whoever holds it. Resolves true if released,
   * false if no hold has that token; the former holder's `lost` resolves
   * with `KeyDeleted`.
   */
  async release(name, token) {
    checkName(name);
    if (typeof token !== 'bigint' && !Number.isSafeInteger(token)) {
      throw new TypeError(`token must be a bigint or a safe integer, not ${typeof token}`);
    }
    return call(() => this.#n.release(name, String(token)));
  }

  /**
   * Revoke the lease (releasing every lock of this client at once; their
   * `lost` resolves with `ClientClosed`) and refuse further calls with
   * `Closed`. Idempotent.
   */
  close() {
    releasing.delete(this);
    return call(() => this.#n.close());
  }

  /** `await using client = await Client.connect(...)` closes it at scope exit. */
  [Symbol.asyncDispose]() {
    return this.close();
  }

  /** @internal Raw etcd access for tests and the benchmark (keys not namespaced). */
  _rawKeys(prefix) {
    return call(() => this.#n.rawKeys(prefix));
  }

  /** @internal Benchmark floor: raw Txn (put with lease) + Delete. */
  _rawTxnDelete(key) {
    return call(() => this.#n.rawTxnDelete(key));
  }

  /** @internal Core-only benchmark (see bench.js). */
  _coreBench(name, n) {
    return call(() => this.#n.coreBench(name, n));
  }
}

/** @internal One JS -> core runtime -> JS Promise hop with no etcd work (bench.js). */
function _runtimeRoundTrip() {
  return call(() => native.runtimeRoundTrip());
}

module.exports = { _runtimeRoundTrip, Client, Lock, Leadership, MultiLock, LockError, ErrorCode, LossReason, MAX_PERMITS, MAX_MULTI };
