'use strict';
// The leader loop: core's LeaderLoop events as an EventEmitter and an async
// iterable; the task of each term runs here, in JavaScript.
const { EventEmitter } = require('node:events');
const native = require('./native.js');
const { LockError, fromNative, invalid } = require('./errors.js');
const { Leadership } = require('./guard.js');
const { leaderOf } = require('./status.js');

function lostError(reason) {
  return new LockError('LockLost', `leadership was lost (${reason})`, { reason });
}

/**
 * One term of leadership, handed to the task: `signal` aborts when the term
 * is over for the task (leadership lost: a `LockLost` LockError with its
 * `reason`; the loop stopped: `Cancelled`; the task returned), `fencingToken`
 * (bigint) and `leadership` (a `Leadership`: guarded `put`/`get`/`delete`,
 * `proclaim`).
 */
class Term {
  #n;
  #controller;

  /** @internal */
  constructor(n) {
    if (!(n instanceof native.NativeTerm)) throw invalid('terms come from client.lead(), not from new Term()');
    this.#n = n;
    this.#controller = new AbortController();
    /** This term's leadership. */
    this.leadership = new Leadership(n.leadership());
    /** The leadership's fencing token: strictly increases from one term to the next. */
    this.fencingToken = this.leadership.fencingToken;
    /** Aborts when the term is over for the task. */
    this.signal = this.#controller.signal;
    const controller = this.#controller;
    n.onCancelled((err, reason) => {
      if (err || controller.signal.aborted) return;
      controller.abort(reason ? lostError(reason) : new LockError('Cancelled', 'the leadership term is over'));
    });
  }

  /** @internal Abort the signal with `reason` (first reason wins). */
  abort(reason) {
    if (!this.#controller.signal.aborted) this.#controller.abort(reason);
  }

  /** @internal The task returned: the loop resigns and campaigns again. */
  end() {
    this.abort(new LockError('Cancelled', 'the leadership task returned'));
    this.#n.end();
  }

  toString() {
    return `Term(${this.leadership.key}, token ${this.fencingToken})`;
  }
}

/**
 * A running leader loop, from `client.lead(name, task, options)`: campaigns
 * for leadership of `name`; once elected runs `task(term)`; when the task
 * returns, resigns and campaigns again (unless `again: false`); when
 * leadership is lost, aborts `term.signal` and campaigns again only after the
 * task has returned, so one loop never runs two tasks at once.
 *
 * Events, in order: `'elected'` (term), `'renewalFailing'`,
 * `'renewalRecovered'`, `'lost'` (reason), `'resigned'`, `'leader'` (leader
 * or null: who leads now, this candidate included), `'error'` (a failed
 * campaign, a LockError, retried after `retry` ms; or the error the task
 * threw; emitted only while an `'error'` listener is registered),
 * `'stopped'` (last). `for await (const ev of loop)` yields the same events
 * as `{ type, term | reason | leader | error }` objects, from the moment the
 * iteration starts, and ends after `stopped`.
 *
 * A running loop keeps the process alive (one pending native Promise, as a
 * pending `lock()`), until it has stopped; the term's `signal` does not.
 */
class LeaderLoop extends EventEmitter {
  #n;
  #task;
  #term = null;
  #queues = new Set();
  #stopped;
  #done = false;

  /** @internal */
  constructor(n, task, signal) {
    super();
    if (!(n instanceof native.NativeLeaderLoop)) throw invalid('leader loops come from client.lead(), not from new LeaderLoop()');
    this.#n = n;
    this.#task = task;
    // An aborted signal already stopped the native loop before it started
    // (client.lead passes it on); a later abort stops it here.
    let onAbort;
    if (signal && !signal.aborted) {
      onAbort = () => this.stop();
      signal.addEventListener('abort', onAbort, { once: true });
    }
    this.#stopped = this.#pump().finally(() => {
      if (onAbort) signal.removeEventListener('abort', onAbort);
    });
  }

  async #pump() {
    for (;;) {
      let ev;
      try {
        ev = await this.#n.next();
      } catch (e) {
        // Internal only (a panic): report it and end as stopped.
        this.#deliver('error', fromNative(e));
        ev = null;
      }
      if (ev === null) break;
      this.#dispatch(ev);
      if (ev.kind === 'stopped') break;
    }
    this.#done = true;
    for (const q of this.#queues) q.end();
    this.#queues.clear();
  }

  #dispatch(ev) {
    switch (ev.kind) {
      case 'elected': {
        const term = new Term(ev.term);
        this.#term = term;
        this.#run(term); // the task starts before the 'elected' listeners run
        this.#deliver('elected', term);
        break;
      }
      case 'lost': {
        this.#term?.abort(lostError(ev.reason));
        this.#deliver('lost', ev.reason);
        break;
      }
      case 'leader':
        this.#deliver('leader', leaderOf(ev.leader ?? null));
        break;
      case 'error':
        this.#deliver('error', fromNative(new Error(ev.error)));
        break;
      default: // renewalFailing, renewalRecovered, resigned, stopped
        this.#deliver(ev.kind);
    }
  }

  // Run the term's task; when it settles the term ends (the loop resigns if
  // still leader). A throw is an 'error' event, never an unhandled rejection.
  #run(term) {
    let running;
    try {
      running = Promise.resolve(this.#task(term));
    } catch (e) {
      running = Promise.reject(e);
    }
    running
      .catch((e) => this.#deliver('error', e))
      .finally(() => {
        if (this.#term === term) this.#term = null;
        term.end();
      });
  }

  #deliver(type, arg) {
    if (type !== 'error' || this.listenerCount('error') > 0) {
      if (arg === undefined) this.emit(type);
      else this.emit(type, arg);
    }
    if (this.#queues.size === 0) return;
    const item = { type };
    if (type === 'elected') item.term = arg;
    else if (type === 'lost') item.reason = arg;
    else if (type === 'leader') item.leader = arg;
    else if (type === 'error') item.error = arg;
    for (const q of this.#queues) q.push(item);
  }

  /**
   * Stop: cancel the campaign, or abort the running term's `signal`, wait for
   * its task to return and resign. Resolves once the loop has stopped (after
   * `'stopped'`). Idempotent.
   * @returns {Promise<void>}
   */
  stop() {
    this.#n.stop();
    this.#term?.abort(new LockError('Cancelled', 'the leader loop was stopped'));
    return this.#stopped;
  }

  /** `await using loop = client.lead(...)` stops it at scope exit. */
  [Symbol.asyncDispose]() {
    return this.stop();
  }

  /** The events from now on as `{ type, ... }` objects; ends after `stopped`. `break` leaves the loop running. */
  [Symbol.asyncIterator]() {
    const items = [];
    let wake = null;
    let ended = this.#done;
    const queues = this.#queues;
    const q = {
      push(item) {
        items.push(item);
        if (wake) wake();
      },
      end() {
        ended = true;
        if (wake) wake();
      },
    };
    if (!ended) queues.add(q);
    return {
      async next() {
        while (items.length === 0 && !ended) await new Promise((r) => (wake = r));
        wake = null;
        if (items.length > 0) return { value: items.shift(), done: false };
        return { value: undefined, done: true };
      },
      async return() {
        queues.delete(q);
        ended = true;
        items.length = 0;
        return { value: undefined, done: true };
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }
}

module.exports = { LeaderLoop, Term };
