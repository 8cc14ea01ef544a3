'use strict';
// Held locks: Lock (a guard), Leadership, MultiLock.
const native = require('./native.js');
const { LockError, call, invalid } = require('./errors.js');
const { checkText, checkName, checkOptions, optNumber, optString, optBoolean, toBytes, checkSignal } = require('./args.js');

// Lock -> its native handle, for subclasses (Leadership) that need it.
const NATIVE = new WeakMap();

// The renewal as JavaScript sees it, from the native ms-left-or-null.
function renewalOf(ms) {
  return ms === null || ms === undefined ? { failing: false } : { failing: true, validForMs: ms };
}

// Register `listener` for renewal changes of a native lock or multi-lock; the
// callback captures only the listener (not the Lock), like `onEnd`.
function followRenewal(n, listener) {
  if (typeof listener !== 'function') throw invalid('onRenewal() needs a function');
  n.onRenewal((err, ms) => {
    if (err) return;
    listener(renewalOf(ms));
  });
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
    if (!(n instanceof native.NativeLock)) throw invalid('locks come from client.lock(name) and the other acquisitions, not from new Lock()');
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
    return renewalOf(this.#n.renewalValidForMs);
  }

  /**
   * Call `listener({ failing, validForMs })` at each change of `renewal` until
   * the hold ends. Like `lost`, it keeps neither the process nor the lock alive.
   * @param {(renewal: { failing: boolean, validForMs?: number }) => void} listener
   */
  onRenewal(listener) {
    followRenewal(this.#n, listener);
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
    return guardedPut(this.#n, key, value);
  }

  /**
   * Get `key` only while we hold the lock: a Buffer, a string if `encoding` is
   * given, or `null` when absent.
   */
  async get(key, encoding) {
    return guardedGet(this.#n, key, encoding);
  }

  /** Delete `key` only while we hold the lock; resolves true if it existed. */
  async delete(key) {
    return guardedDelete(this.#n, key);
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
 * The loss and renewal members are a `Lock`'s: `lost`, `signal`, `isHeld`,
 * `state`, `renewal`, `onRenewal`.
 */
class MultiLock {
  #n;
  #lost;
  #controller;

  /** @internal */
  constructor(n) {
    if (!(n instanceof native.NativeMulti)) throw invalid('multi-locks come from client.lockMany(names), not from new MultiLock()');
    this.#n = n;
    /** The lock names, in the order given. */
    this.names = n.names;
    /** Our key on each lock. */
    this.keys = n.keys;
    /** The session lease every lock is held on (one client, one lease). */
    this.leaseId = BigInt(n.leaseId);
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

  /** `'held'` while every lock is held, the loss reason of a lock lost (the first in name order), else `'released'`. */
  get state() {
    return this.#n.state;
  }

  /**
   * As `Lock.renewal`: every lock of a multi-lock is on one session, so they
   * are renewed together. `{ failing: true, validForMs }` while the renewal
   * is failing and every lock is held, else `{ failing: false }`.
   * @type {{ failing: boolean, validForMs?: number }}
   */
  get renewal() {
    return renewalOf(this.#n.renewalValidForMs);
  }

  /**
   * Call `listener({ failing, validForMs })` at each change of `renewal` until
   * the hold ends (a lock lost, or released). Keeps neither the process nor
   * the locks alive.
   * @param {(renewal: { failing: boolean, validForMs?: number }) => void} listener
   */
  onRenewal(listener) {
    followRenewal(this.#n, listener);
  }

  /** Release every lock (each is tried; rejects with the first error). */
  unlock() {
    return call(() => this.#n.unlock());
  }

  [Symbol.asyncDispose]() {
    return this.unlock();
  }

  /**
   * Put `key` = `value` only while every lock is held: one etcd transaction
   * compares every key's fencing token (`LockLost` otherwise). The key may not
   * be under any of the locks' prefixes (`InvalidArgument`).
   */
  async put(key, value) {
    return guardedPut(this.#n, key, value);
  }

  /** `get` only while every lock is held (as `Lock.get`). */
  async get(key, encoding) {
    return guardedGet(this.#n, key, encoding);
  }

  /** `delete` only while every lock is held; resolves true if it existed. */
  async delete(key) {
    return guardedDelete(this.#n, key);
  }

  toString() {
    return `MultiLock(${this.names.join(', ')}, ${this.isHeld ? 'held' : 'not held'})`;
  }
}

// Guarded operations of a native lock or multi-lock (both have put/get/delete).
function guardedPut(n, key, value) {
  const k = toBytes(key, 'key');
  const v = toBytes(value, 'value');
  return call(() => n.put(k, v));
}

async function guardedGet(n, key, encoding) {
  const k = toBytes(key, 'key');
  if (encoding !== undefined && !Buffer.isEncoding(encoding)) throw invalid(`unknown encoding ${encoding}`);
  const v = await call(() => n.get(k));
  if (v === null || v === undefined) return null;
  return encoding === undefined ? v : v.toString(encoding);
}

function guardedDelete(n, key) {
  return call(() => n.delete(toBytes(key, 'key')));
}

/**
 * Call `cb(err, reasonOrNull)` once when `lock`'s hold ends (core's loss
 * signal: the reason, or null when released). `cb` must not capture `lock`.
 */
function onHoldEnd(lock, cb) {
  NATIVE.get(lock).onEnd(cb);
}

module.exports = { Lock, Leadership, MultiLock, onHoldEnd };
