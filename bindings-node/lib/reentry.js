'use strict';
// Reentrancy owners (core `Client::lock_reentrant`): an async context
// (AsyncLocalStorage) or a ReentrantLock object. Core keeps the holds and
// their handles; this file only says who the owner is.
const { AsyncLocalStorage } = require('node:async_hooks');
const { LockError } = require('./errors.js');

// Owner numbers, unique in the process (core keys its table by name and owner).
let lastOwner = 0;
const newOwner = () => ++lastOwner;

// The owner of the current async context: set by a reentrant `withLock` for
// its callback (and everything that callback starts).
const context = new AsyncLocalStorage();

/** The current async context's owner, or a fresh one when there is none. */
function contextOwner() {
  return context.getStore() ?? newOwner();
}

/** Run `fn()` in an async context owned by `owner`. */
function runAs(owner, fn) {
  return context.run(owner, fn);
}

/**
 * A reentrant lock on `name` whose owner is this object (Redisson's `RLock`,
 * Java's `ReentrantLock`, with the object in place of the thread): `lock()`
 * while this object holds the lock takes it again at once (another handle of
 * the same hold: same key, same fencing token, nothing written to etcd);
 * `unlock()` releases the latest handle, and the lock is free when the last
 * one is released. Other objects and plain `client.lock()` calls wait as
 * usual. A lost hold is never re-entered: `lock()` rejects `LockLost` until
 * every handle of it is unlocked.
 */
class ReentrantLock {
  #acquire;
  #owner;
  #handles = [];

  /** @internal */
  constructor(name, acquire) {
    if (typeof acquire !== 'function') throw new LockError('InvalidArgument', 'reentrant locks come from client.reentrantLock(name), not from new ReentrantLock()');
    this.#acquire = acquire;
    this.#owner = newOwner();
    /** The lock name. */
    this.name = name;
  }

  /**
   * Acquire (or re-enter) the lock: options as `client.lock()`. Resolves the
   * new handle (a `Lock`); release it with this object's `unlock()`.
   * @returns {Promise<import('./guard.js').Lock>}
   */
  async lock(options) {
    const l = await this.#acquire('lock', this.#owner, options);
    this.#handles.push(l);
    return l;
  }

  /**
   * Acquire (or re-enter) only if it is free or ours right now: the new
   * handle, or `null` when another owner holds it. Options as `client.tryLock()`.
   */
  async tryLock(options) {
    const l = await this.#acquire('tryLock', this.#owner, options);
    if (l) this.#handles.push(l);
    return l;
  }

  /**
   * Release the latest handle (the lock is free once every handle is
   * released). Rejects `NotHeld` when this object has no handle, and
   * `LockLost` (the handle is released all the same) when the hold was lost.
   */
  async unlock() {
    const l = this.#handles.pop();
    if (!l) throw new LockError('NotHeld', `lock ${JSON.stringify(this.name)} is not held by this ReentrantLock`);
    return l.unlock();
  }

  /** `lock()` calls not yet matched by an `unlock()`. */
  get holdCount() {
    return this.#handles.length;
  }

  /** True while this object has a handle and the hold is held. */
  get isHeld() {
    const l = this.#handles[this.#handles.length - 1];
    return l !== undefined && l.isHeld;
  }

  /** Run `fn(lock)` holding (or re-entering) the lock; release the handle afterwards. */
  async withLock(fn, options) {
    if (typeof fn !== 'function') throw new LockError('InvalidArgument', `withLock(fn): fn must be a function, got ${typeof fn}`);
    const l = await this.lock(options);
    let result;
    try {
      result = await fn(l);
    } catch (e) {
      await this.#release(l).catch(() => {});
      throw e;
    }
    await this.#release(l);
    return result;
  }

  // Release `l` and forget it, wherever it is in the stack.
  #release(l) {
    const i = this.#handles.lastIndexOf(l);
    if (i >= 0) this.#handles.splice(i, 1);
    return l.unlock();
  }

  toString() {
    return `ReentrantLock(${this.name}, holdCount ${this.#handles.length})`;
  }
}

module.exports = { ReentrantLock, contextOwner, runAs };
