'use strict';
// MemStore: the fault controls of an in-process store (`mem://NAME`).
const native = require('./native.js');
const { fromNative, invalid } = require('./errors.js');
const { checkText, toBytes } = require('./args.js');

// Run a synchronous native call, its errors as LockErrors.
function sync(fn) {
  try {
    return fn();
  } catch (e) {
    throw fromNative(e);
  }
}

function leaseArg(v) {
  if (typeof v === 'bigint') return v.toString();
  if (Number.isSafeInteger(v)) return String(v);
  throw invalid(`leaseId must be a bigint (a lock's leaseId), got ${v === null ? 'null' : typeof v === 'number' ? v : typeof v}`);
}

function msArg(v, what) {
  // Core checks the value (finite, non-negative, up to a century); only the type is ours.
  if (typeof v !== 'number') throw invalid(`${what}: ms must be a number, got ${v === null ? 'null' : typeof v}`);
  return v;
}

/**
 * A handle on the in-process store that `mem://NAME` endpoints reach: what a
 * test does to it, as a fault or another party would. Get one with
 * `MemStore.open(name)` (`''`: the process-wide `mem://`); clients of this
 * process that connect to `store.endpoint` see every control as they would
 * see the same thing happen on etcd, with the same signals and reasons. A
 * client connected to etcd has no such handle.
 *
 * | control | what the store does | what a holder sees |
 * |---|---|---|
 * | `expireLease(lock.leaseId)` | ends the lease now, as its TTL would | `lost` resolves `'LeaseExpired'` |
 * | `deleteKey(lock.key)` | deletes the lock's key, as an operator would | `lost` resolves `'KeyDeleted'`; the next waiter is granted |
 * | `silence(ms)` | answers nothing for `ms` (a hung etcd); leases expire meanwhile | `renewal` turns `{ failing: true }`, then `lost` resolves `'ConnectionLost'`; calls end at their bounds |
 * | `stall(lock.leaseId, ms)` | answers nothing to that lease's client, the others go on | that client as under silence; others are granted once its lease expires |
 *
 * Every method is synchronous; bad arguments throw a `LockError` with code
 * `InvalidArgument`. The store itself lives as long as the process.
 */
class MemStore {
  #n;

  /** @internal */
  constructor(n) {
    if (!(n instanceof native.NativeMemStore)) throw invalid("use MemStore.open(name) (a store comes from its name, e.g. MemStore.open('orders-test'))");
    this.#n = n;
    /** What clients give as their endpoint to reach this store: `mem://NAME`. */
    this.endpoint = n.endpoint;
    /** The store's name (`''` for `mem://`). */
    this.name = n.name;
  }

  /**
   * The store `mem://NAME` (`''`, the default: the process-wide `mem://`),
   * started if no client started it yet. Throws `InvalidArgument` for a name
   * that is not up to 64 of `A-Z a-z 0-9 . _ -`.
   * @param {string} [name]
   * @returns {MemStore}
   */
  static open(name = '') {
    if (typeof name !== 'string') throw invalid(`store name must be a string, got ${name === null ? 'null' : typeof name}`);
    checkText(name, 'store name');
    return new MemStore(sync(() => native.NativeMemStore.open(name)));
  }

  /**
   * End lease `leaseId` now, as its time-to-live would: every key on it is
   * deleted at one revision, its holders' `lost` resolves `'LeaseExpired'`,
   * and waiters behind them are granted. A lock's lease is `lock.leaseId`.
   * @param {bigint} leaseId
   * @returns {boolean} false if the store has no such lease
   */
  expireLease(leaseId) {
    const id = leaseArg(leaseId);
    return sync(() => this.#n.expireLease(id));
  }

  /**
   * Delete `key` as another party would (an operator, a script): a lock's
   * key is `lock.key`; its holder's `lost` resolves `'KeyDeleted'`.
   * @param {string | Uint8Array} key the whole key, namespace included
   * @returns {boolean} false if there was no such key
   */
  deleteKey(key) {
    const k = toBytes(key, 'key');
    return sync(() => this.#n.deleteKey(k));
  }

  /**
   * Answer nothing for `ms` milliseconds, as an etcd that hangs: requests,
   * keep-alives and watch events wait, and are answered when the silence
   * ends if their caller still waits. Leases whose time-to-live runs out
   * meanwhile expire. A hold's `renewal` turns `{ failing: true }` a
   * keep-alive interval after its last renewal and its `lost` resolves
   * `'ConnectionLost'` at its local deadline; lock calls end at their
   * timeout, other calls at the request timeout (`Unavailable`). A later
   * call replaces the end; `0` ends it now.
   * @param {number} ms
   */
  silence(ms) {
    msArg(ms, 'silence');
    sync(() => this.#n.silence(ms));
  }

  /**
   * Answer nothing to the client of lease `leaseId` for `ms` milliseconds
   * while every other client goes on: a client cut off from etcd. Its holds
   * turn failing and are lost (`'ConnectionLost'`) as under `silence`; once
   * its lease expires, other clients are granted its locks. `0` ends it now.
   * @param {bigint} leaseId
   * @param {number} ms
   */
  stall(leaseId, ms) {
    const id = leaseArg(leaseId);
    msArg(ms, 'stall');
    sync(() => this.#n.stall(id, ms));
  }

  /** End every silence and stall now. */
  resume() {
    sync(() => this.#n.resume());
  }

  /**
   * The keys under `prefix` (every key for `''`), in key order, as the store
   * holds them: `{ key, value, lease, createRevision, modRevision }` (`key`
   * as text, `value` a Buffer, the rest bigints; `lease` 0n for none; a lock
   * key's `createRevision` is its fencing token). For a test to assert on.
   * @param {string | Uint8Array} [prefix]
   * @returns {MemKey[]}
   */
  keys(prefix = '') {
    const p = toBytes(prefix, 'prefix');
    return sync(() => this.#n.keys(p)).map((k) => ({
      key: k.key,
      value: k.value,
      lease: BigInt(k.lease),
      createRevision: BigInt(k.createRevision),
      modRevision: BigInt(k.modRevision),
    }));
  }

  toString() {
    return `MemStore(${this.endpoint})`;
  }
}

module.exports = { MemStore };
