'use strict';
// Run-once jobs (core's record; ShedLock's semantics): one node runs each
// tick of a job scheduled on many (node-cron, setInterval, BullMQ repeat).
const { call, invalid } = require('./errors.js');

function span(v, what, dflt) {
  if (v === undefined && dflt !== undefined) return dflt;
  if (typeof v !== 'number') throw invalid(`${what} must be a number of milliseconds, got ${typeof v}`);
  return v;
}

/**
 * A taken run-once record (`client.takeOnce`). The job stays taken until
 * `lockUntil` whatever happens to this process; call `finish()` when done.
 */
class OnceHold {
  #n;
  #h;
  /** @internal */
  constructor(n, name, h) {
    this.#n = n;
    this.#h = h;
    /** The job's name. */
    this.name = name;
  }

  /** The etcd revision that wrote this hold (rises strictly per job: a fencing token). */
  get revision() {
    return BigInt(this.#h.revision);
  }

  /** When the hold began. */
  get lockedAt() {
    return new Date(this.#h.lockedAtMs);
  }

  /** Until when the job is taken. */
  get lockUntil() {
    return new Date(this.#h.lockUntilMs);
  }

  /**
   * The job is done: keep it taken until `lockedAt + atLeast` ms if that is
   * still ahead (never beyond `lockUntil`), else free it. Resolves false (and
   * changes nothing) if the record is no longer this hold's.
   */
  finish({ atLeast } = {}) {
    const ms = span(atLeast, 'atLeast', 0);
    return call(() => this.#n.onceFinish(this.name, this.#h, ms));
  }

  /** Keep the job taken until now + `atMost` ms; false if the hold expired or is no longer this one. */
  async extend({ atMost } = {}) {
    const ms = span(atMost, 'atMost');
    const h = await call(() => this.#n.onceExtend(this.name, this.#h, ms));
    if (h === null) return false;
    this.#h = h;
    return true;
  }
}

async function takeOnce(n, name, atMost, atLeast) {
  const h = await call(() => n.onceTake(name, span(atMost, 'atMost'), span(atLeast, 'atLeast', 0)));
  return h === null ? null : new OnceHold(n, name, h);
}

module.exports = { OnceHold, takeOnce, span };
