'use strict';
/**
 * `etcdlock/testing`: a fresh in-process store (`mem://NAME`) per test, the
 * clients connected to it closed after the test, and a way to make a hold
 * be lost. It depends on no test framework:
 *
 * - node:test: `const mem = memStore(t)` closes the fixture in `t.after()`;
 * - Vitest: `memStore(ctx)` with the test context closes it in `ctx.onTestFinished()`;
 * - Jest, Mocha or anything else: `memStore()` and `afterEach(() => mem.close())`,
 *   or `await using mem = memStore()`, or `await withMemStore(async (mem) => ...)`.
 *
 * @example
 * const { test } = require('node:test');
 * const { memStore } = require('etcdlock/testing');
 *
 * test('a lost hold is reported', async (t) => {
 *   const mem = memStore(t);
 *   const client = await mem.client({ ttl: 3 });
 *   const lock = await client.lock('job');
 *   assert.equal(await mem.lose(lock), 'LeaseExpired');
 * });
 */
const crypto = require('node:crypto');
const { Client, MemStore, LockError } = require('./index.js');

const HOWS = ['expire', 'delete', 'stall'];
let seq = 0;

function invalid(message) {
  return new LockError('InvalidArgument', message);
}

/**
 * A fresh store for one test, and the clients it connected. Get one from
 * `memStore()` or `withMemStore()`; `close()` (or `await using`) ends it.
 * While open it keeps the Node process alive, as a server would, so a test
 * can await a loss event (etcdlock's own `lost` and `signal` do not keep a
 * process alive): close it, or give `memStore` the test context.
 */
class MemFixture {
  #clients = new Set();
  #closing = null;
  // Keeps the process alive while the fixture is open: etcdlock's loss
  // events do not (a service has its server for that), and a test that
  // awaits one with nothing else pending would be ended by its runner
  // ("Promise resolution is still pending but the event loop has already
  // resolved") before the loss arrives.
  #alive;

  /** @internal */
  constructor(store) {
    if (!(store instanceof MemStore)) throw invalid('use memStore(t) or withMemStore(fn) for a fixture');
    this.#alive = setInterval(() => {}, 1 << 30);
    /** The store: its fault controls (`expireLease`, `deleteKey`, `silence`, `stall`, `resume`, `keys`). */
    this.store = store;
    /** `mem://NAME`: what a client gives as its endpoint to reach the store. */
    this.endpoint = store.endpoint;
    /** `[endpoint]`, for code under test that takes `endpoints`. */
    this.endpoints = [store.endpoint];
  }

  /**
   * A client connected to the store, closed by `close()`. `options` are
   * `Client.connect`'s (`ttl`, `namespace`, `requestTimeout`, ...) without
   * `endpoints`, which is the store's.
   * @param {object} [options]
   * @returns {Promise<Client>}
   */
  async client(options) {
    if (options !== undefined && (options === null || typeof options !== 'object')) {
      throw invalid(`options must be an object, got ${options === null ? 'null' : typeof options}`);
    }
    if (options && options.endpoints !== undefined) throw invalid(`a fixture's clients connect to ${this.endpoint}: leave out endpoints`);
    if (this.#closing) throw new LockError('Closed', `the fixture of ${this.endpoint} was closed`);
    const c = await Client.connect({ ...options, endpoints: this.endpoints });
    this.#clients.add(c);
    return c;
  }

  /**
   * Make `lock`'s hold be lost, the way production loses it, and wait until
   * its holder has seen the loss:
   *
   * | `how` | the store | the holder's `lost` |
   * |---|---|---|
   * | `'expire'` (default) | ends the lock's lease, as its TTL would (every lock of that client goes) | `'LeaseExpired'`, at once |
   * | `'delete'` | deletes the lock's key, as an operator would | `'KeyDeleted'`, at once |
   * | `'stall'` | answers nothing to the lock's client (as a client cut off) until the holder has seen the loss | `'ConnectionLost'`, within the client's TTL |
   *
   * `lock` is a `Lock` (also a permit, a read lock, a `Leadership`) or a
   * `MultiLock`: resolves what its `lost` resolves (the reason; a
   * MultiLock's `{ name, reason }`), rejects `Timeout` if no loss is seen
   * within `within` ms (default 60 000). It may also be a holder as
   * `client.status(name)` lists it (`{ key, leaseId }`), for code under
   * test that keeps its Lock to itself: then it resolves once the store has
   * acted (a stall lasts until `store.resume()` or `close()`), and the test
   * awaits what the code does about it. `InvalidArgument` if the lock is
   * not held in this store.
   * @param {object} lock
   * @param {'expire'|'delete'|'stall'} [how]
   * @param {{ within?: number }} [options]
   */
  async lose(lock, how = 'expire', { within = 60000 } = {}) {
    if (!lock || typeof lock !== 'object' || typeof lock.leaseId !== 'bigint') {
      throw invalid('lose(lock): lock must be a Lock, a MultiLock or a holder from client.status() (with a bigint leaseId)');
    }
    if (!HOWS.includes(how)) throw invalid(`lose(lock, how): how must be one of ${HOWS.join(', ')}, got ${String(how)}`);
    if (typeof within !== 'number' || !(within >= 0)) throw invalid(`within must be a non-negative number (ms), got ${String(within)}`);
    const key = typeof lock.key === 'string' ? lock.key : Array.isArray(lock.keys) ? lock.keys[0] : undefined;
    if (typeof key !== 'string') throw invalid('lose(lock): lock has no key');
    const { store } = this;
    if (!store.keys(key).some((k) => k.key === key && k.lease === lock.leaseId)) {
      throw invalid(`lose(lock): ${key} is not held in ${this.endpoint} (released, lost already, or another store)`);
    }
    // Before the fault, so the loss cannot be missed.
    const lost = lock.lost instanceof Promise ? lock.lost : null;
    if (how === 'expire') store.expireLease(lock.leaseId);
    else if (how === 'delete') store.deleteKey(key);
    else store.stall(lock.leaseId, lost ? Math.max(within, 1) : 3600e3);
    if (!lost) return undefined;
    let timer;
    const late = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new LockError('Timeout', `lose(lock, '${how}'): ${key} reported no loss within ${within} ms`)), within);
    });
    try {
      return await Promise.race([lost, late]);
    } finally {
      clearTimeout(timer);
      // The client was cut off until it saw the loss; it is back now.
      if (how === 'stall') store.stall(lock.leaseId, 0);
    }
  }

  /**
   * End every silence and stall of the store, then close every client
   * `client()` made (their locks are released). Idempotent; resolves once
   * all are closed.
   * @returns {Promise<void>}
   */
  close() {
    if (!this.#closing) {
      clearInterval(this.#alive);
      this.store.resume();
      const clients = [...this.#clients];
      this.#clients.clear();
      this.#closing = Promise.allSettled(clients.map((c) => c.close())).then(() => undefined);
    }
    return this.#closing;
  }

  /** `await using mem = memStore()` closes it at scope exit. */
  [Symbol.asyncDispose]() {
    return this.close();
  }

  toString() {
    return `MemFixture(${this.endpoint}, ${this.#closing ? 'closed' : `${this.#clients.size} clients`})`;
  }
}

/**
 * A fresh store (a name of its own: `mem://test-PID-N-HEX`) for one test.
 * With a test context `t` it is closed after the test: node:test's
 * `t.after()`, Vitest's `onTestFinished()`. Without one, close it yourself
 * (`await mem.close()` in `afterEach`, or `await using`).
 * @param {{ after?: Function, onTestFinished?: Function }} [t]
 * @returns {MemFixture}
 */
function memStore(t) {
  let register;
  if (t !== undefined && t !== null) {
    if (typeof t.after === 'function') register = (fn) => t.after(fn);
    else if (typeof t.onTestFinished === 'function') register = (fn) => t.onTestFinished(fn);
    else throw invalid('memStore(t): t must be a test context with after() (node:test) or onTestFinished() (Vitest); leave it out elsewhere and call close()');
  }
  const name = `test-${process.pid}-${++seq}-${crypto.randomBytes(3).toString('hex')}`;
  const mem = new MemFixture(MemStore.open(name));
  if (register) register(() => mem.close());
  return mem;
}

/**
 * Run `fn(mem)` with a fresh store and close it afterwards, whatever
 * happens; resolves `fn`'s result. For any framework, with no hooks.
 * @template T
 * @param {(mem: MemFixture) => T | Promise<T>} fn
 * @returns {Promise<T>}
 */
async function withMemStore(fn) {
  if (typeof fn !== 'function') throw invalid(`withMemStore(fn): fn must be a function, got ${typeof fn}`);
  const mem = memStore();
  try {
    return await fn(mem);
  } finally {
    await mem.close();
  }
}

module.exports = { memStore, withMemStore, MemFixture };
