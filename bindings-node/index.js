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


// `await using` looks up Symbol.asyncDispose; Node 18 lacks it. Use the same
// registered symbol TypeScript's downlevel helpers fall back to (before the
// classes that define it load).
if (typeof Symbol.asyncDispose !== 'symbol') {
  Object.defineProperty(Symbol, 'asyncDispose', { value: Symbol.for('Symbol.asyncDispose') });
}

const native = require('./lib/native.js');
const { ErrorCode, LossReason, LockError } = require('./lib/errors.js');
const { Lock, Leadership, MultiLock } = require('./lib/guard.js');
const { Client } = require('./lib/client.js');
const { Latch, Barrier } = require('./lib/sync.js');
const { LeaderLoop, Term } = require('./lib/leader.js');
const { ReentrantLock } = require('./lib/reentry.js');

/** The most permits one semaphore may have, and the most names one `lockMany` takes. */
const [MAX_PERMITS, MAX_MULTI] = native.recipeLimits();

const { OnceHold } = require('./lib/once.js');
const { MemStore } = require('./lib/mem.js');

module.exports = { Client, Lock, Leadership, LeaderLoop, Term, MultiLock, ReentrantLock, Latch, Barrier, OnceHold, MemStore, LockError, ErrorCode, LossReason, MAX_PERMITS, MAX_MULTI };
