'use strict';
// Count-down latches and barriers shared by processes (core `Latch`, `Barrier`).
const native = require('./native.js');
const { LockError, call, invalid } = require('./errors.js');
const { checkOptions, optNumber, checkSignal } = require('./args.js');

// A count or a number of parties: a JS number (the native side checks its value).
function countArg(v, what) {
  if (typeof v !== 'number') throw invalid(`${what} must be a number, got ${typeof v}`);
  return v;
}

// Run `start(timeout, cancel)` (a native wait) with `{ timeout, signal }`:
// `timeout` in ms (`Infinity` or absent: no limit), an aborted `signal`
// rejects `Cancelled` (cause: the signal's reason).
async function waitWith(what, options, start) {
  const o = checkOptions(options, 'options');
  let timeout = optNumber(o.timeout, 'timeout');
  if (timeout === Infinity) timeout = undefined;
  const signal = checkSignal(o.signal);
  if (!signal) return call(() => start(timeout, undefined));
  if (signal.aborted) throw new LockError('Cancelled', `${what} was aborted`, { cause: signal.reason });
  const cancel = new native.NativeCancel();
  const onAbort = () => cancel.cancel();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await call(() => start(timeout, cancel));
  } catch (e) {
    if (e.code === 'Cancelled' && signal.aborted) throw new LockError('Cancelled', e.message, { cause: signal.reason });
    throw e;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * A count-down latch shared by every process that opens the same name with
 * the same count (`client.latch(name, count)`; Java's `CountDownLatch` across
 * processes). The latch lives while some client has it open; `close()` this
 * handle when done (or `await using`). After `close()` calls reject `Closed`;
 * once every handle is closed (or its client's session ended) they reject
 * `LockLost` (reason `LeaseExpired`).
 */
class Latch {
  #n;

  /** @internal */
  constructor(n) {
    if (!(n instanceof native.NativeLatch)) throw invalid('latches come from client.latch(name, count), not from new Latch()');
    this.#n = n;
    /** The latch's name. */
    this.name = n.name;
    /** The count it was created with. */
    this.initial = n.initial;
  }

  /**
   * Lower the count by one; at zero every waiter, in every process, is
   * released. At zero already it does nothing. Resolves the count after.
   * @returns {Promise<number>}
   */
  countDown() {
    return call(() => this.#n.countDown());
  }

  /**
   * The count now (one read).
   * @returns {Promise<number>}
   */
  count() {
    return call(() => this.#n.count());
  }

  /**
   * Wait until the count is zero (resolves at once if it is). `timeout` in ms
   * rejects `Timeout` (absent or `Infinity`: no limit; 0: look once);
   * aborting `signal` rejects `Cancelled`.
   * @param {{ timeout?: number, signal?: AbortSignal }} [options]
   * @returns {Promise<void>}
   */
  wait(options) {
    return waitWith(`waiting for latch ${JSON.stringify(this.name)}`, options, (t, c) => this.#n.wait(t, c));
  }

  /** Stop keeping the latch alive from this handle. Idempotent. */
  close() {
    this.#n.close();
  }

  /** `await using latch = await client.latch(...)` closes it at scope exit. */
  [Symbol.asyncDispose]() {
    this.close();
    return Promise.resolve();
  }
}

/**
 * A one-shot barrier for a fixed number of parties (`client.barrier(name,
 * parties)`): `wait()` resolves in every party at once when the last one has
 * arrived. A party that dies or times out while waiting frees its place.
 * `close()` this handle when done (or `await using`).
 */
class Barrier {
  #n;

  /** @internal */
  constructor(n) {
    if (!(n instanceof native.NativeBarrier)) throw invalid('barriers come from client.barrier(name, parties), not from new Barrier()');
    this.#n = n;
    /** The barrier's name. */
    this.name = n.name;
    /** How many parties it waits for. */
    this.parties = n.parties;
  }

  /**
   * Arrive and wait for the other parties. Resolves this party's arrival
   * index (0 for the first, `parties - 1` for the one that released
   * everyone). `timeout` in ms rejects `Timeout` (and this party leaves:
   * its place is free again); aborting `signal` rejects `Cancelled`; a
   * barrier that already released rejects `InvalidArgument`.
   * @param {{ timeout?: number, signal?: AbortSignal }} [options]
   * @returns {Promise<number>}
   */
  wait(options) {
    return waitWith(`waiting at barrier ${JSON.stringify(this.name)}`, options, (t, c) => this.#n.wait(t, c));
  }

  /** Stop keeping the barrier alive from this handle. Idempotent. */
  close() {
    this.#n.close();
  }

  /** `await using barrier = await client.barrier(...)` closes it at scope exit. */
  [Symbol.asyncDispose]() {
    this.close();
    return Promise.resolve();
  }
}

module.exports = { Latch, Barrier, countArg };
