'use strict';
// Client: connect, lock and the recipes, status and metrics.
const native = require('./native.js');
const { LockError, call, fromNative, invalid } = require('./errors.js');
const { checkText, checkName, checkOptions, nativeOptions, optNumber, optString, optBoolean, toBytes, checkSignal, extrasOf, acquire } = require('./args.js');
const { Lock, Leadership, MultiLock } = require('./guard.js');
const { leaderOf, decodeRecord, follow } = require('./status.js');
const { takeOnce, span } = require('./once.js');
const { Latch, Barrier, countArg } = require('./sync.js');
const { LeaderLoop } = require('./leader.js');
const { ReentrantLock, contextOwner, runAs } = require('./reentry.js');
const { addSink, checkLogger, checkLevel } = require('./logging.js');
const { tracerOf, Spans, inHold } = require('./otel.js');


/**
 * A connection to etcd that hands out locks. All locks of a client share one
 * lease, kept alive in the background. An idle client does not keep the Node
 * process alive (a pending `lock()` does); call `close()` to revoke the lease
 * and release every lock at once (it also closes the connection to etcd, not
 * waiting for garbage collection).
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
  #spans = null;
  #unlog = () => {};

  /** @internal */
  constructor(n, { tracer = null, unlog = () => {} } = {}) {
    if (!(n instanceof native.NativeClient)) throw invalid('use Client.connect(options)');
    this.#n = n;
    if (tracer) this.#spans = new Spans(tracer);
    this.#unlog = unlog;
  }

  /**
   * Connect to etcd and open the session (grant the lease).
   * @param {object} options `{ endpoints, ttl, namespace, username, password, tls: { ca, cert, key, domain },
   *   connectTimeout, requestTimeout, margin, watchHeldKeys, releaseOnExit }` (`ttl` in seconds, timeouts and `margin`
   *   in milliseconds, TLS values are PEM file paths; see index.d.ts). `releaseOnExit: true` closes the
   *   client when SIGTERM, SIGINT or SIGHUP arrives (its locks are free at once instead of after the TTL),
   *   then ends the process by that signal unless another listener handles it.
   *   `logger` (any object with `debug/info/warn/error(message, fields)`: console, winston; pino through an
   *   adapter, see docs/guides/node-services.md) receives core's log events at `logLevel` (`debug`, `info`, `warn`, `error`,
   *   `silent`; default: the logger's own `level` if it has one, else `info`); without a logger, `DEBUG=etcdlock`
   *   prints them to stderr. `tracerProvider`: the OpenTelemetry TracerProvider for spans (default: the global
   *   one, when `@opentelemetry/api` is installed).
   *   Every option not given here comes from its `ETCDLOCK_*` variable if set (ETCDLOCK_ENDPOINTS,
   *   ETCDLOCK_TTL, ETCDLOCK_NAMESPACE, ETCDLOCK_USERNAME, ETCDLOCK_PASSWORD, ETCDLOCK_TLS_CA/_TLS_CERT/_TLS_KEY/_TLS_DOMAIN,
   *   ETCDLOCK_CONNECT_TIMEOUT, ETCDLOCK_REQUEST_TIMEOUT, ETCDLOCK_MARGIN, ETCDLOCK_WATCH_HELD_KEYS): the same rule
   *   as every other language, in the core. An option given here wins, and a malformed variable for it is ignored.
   */
  static async connect(options) {
    const o = checkOptions(options, 'options');
    const releaseOnExit = optBoolean(o.releaseOnExit, 'releaseOnExit');
    const logger = checkLogger(o.logger);
    const logLevel = checkLevel(o.logLevel);
    const tracer = tracerOf(o.tracerProvider);
    // From before the connect, so its own events (a member failing over) are logged too.
    const unlog = addSink(logger, logLevel);
    let n;
    try {
      n = await call(() => native.NativeClient.connect(nativeOptions(o)));
    } catch (e) {
      unlog();
      throw e;
    }
    const client = new Client(n, { tracer, unlog });
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
   * `keepaliveRttMs` (null before the first), `waitHistogram` (per outcome, calls by wait
   * bucket) and `memberFailures` (requests that failed on an etcd member).
   * @returns {import('../index').Metrics}
   */
  metrics() {
    return decodeRecord(this.#n.metricsJson());
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
   * @param {{ timeout?: number, signal?: AbortSignal, lockDelay?: number, leaseTime?: number,
   *   metadata?: Record<string, string>, detectDeadlock?: boolean }} [options] `timeout` in ms
   *   (rejects `Timeout`; `Infinity` or absent: no limit); aborting `signal`
   *   rejects `Cancelled`. Either way our waiter key is removed from etcd.
   *   `lockDelay` (ms, Chubby's lock-delay): if this hold ends because its
   *   lease ended (the process died, froze or was cut off) rather than by
   *   `unlock()`, the next holder gets the lock no earlier than this long
   *   after etcd removed our key (rounded up to whole seconds); a clean
   *   `unlock()` hands over at once. `leaseTime` (ms): hold at most this long,
   *   then the hold is released and `lost` resolves `LeaseExpired`.
   *   `metadata`: string pairs (at most 1 KB in all) shown to everyone in
   *   `status()` as the holder's `metadata`. `detectDeadlock: true`: reject
   *   `Deadlock` (naming the cycle) instead of waiting when this wait would
   *   close a cycle of clients waiting on each other (see `deadlocks()`).
   *   Bad values reject `InvalidArgument`
   *   (core's one rule, the same messages in every language).
   *   `reentrant: true`: the owner is the current async context (see `withLock`); if it holds
   *   `name` (taken with `reentrant: true`), another handle of that hold at once, else a new hold
   *   for it. A lost hold is not re-entered (`LockLost` until each of its handles is unlocked).
   * @returns {Promise<Lock>}
   */
  lock(name, options) {
    return this.#traced('lock', name, () => {
      checkName(name);
      const { reentrant, ...o } = checkOptions(options, 'options');
      if (optBoolean(reentrant, 'reentrant')) return this.#lockAs(contextOwner(), name, o);
      return this.#lockPlain(name, o);
    });
  }

  async #lockPlain(name, o) {
    return new Lock(await acquire(`lock ${JSON.stringify(name)}`, o, (t, c, x) => this.#n.lock(name, t, c, x)));
  }

  // Reentrant for `owner` (core `lock_reentrant`).
  async #lockAs(owner, name, options) {
    const { reentrant, ...o } = checkOptions(options, 'options');
    return new Lock(await acquire(`lock ${JSON.stringify(name)}`, o, (t, c, x) => this.#n.lockReentrant(name, owner, t, c, x)));
  }

  // Reentrant for `owner` (core `try_lock_reentrant`).
  async #tryLockAs(owner, name, options) {
    const extras = extrasOf(checkOptions(options, 'options'));
    const n = await call(() => this.#n.tryLockReentrant(name, owner, extras));
    return n ? new Lock(n) : null;
  }

  // Run an acquisition in an `etcdlock.acquire` span (when tracing).
  async #traced(operation, name, start) {
    if (this.#spans === null) return start();
    return this.#spans.acquire(operation, name, start);
  }

  /**
   * A reentrant lock on `name` owned by the returned object (Redisson's
   * `RLock`): its `lock()` / `tryLock()` re-enter while it holds the lock,
   * `unlock()` releases its latest handle, `holdCount` counts them.
   * @param {string} name
   * @returns {ReentrantLock}
   */
  reentrantLock(name) {
    checkName(name);
    return new ReentrantLock(name, (op, owner, options) =>
      op === 'lock'
        ? this.#traced('lock', name, () => this.#lockAs(owner, name, options))
        : this.#traced('try_lock', name, () => this.#tryLockAs(owner, name, options))
    );
  }

  /**
   * Acquire `name` only if it is free right now (never waits, writes nothing
   * when it is taken).
   * @param {string} name
   * @param {{ lockDelay?: number, leaseTime?: number, metadata?: Record<string, string> }} [options]
   *   the acquisition options of `lock()` (`timeout` and `signal` do not apply).
   *   `reentrant: true` re-enters the current async context's hold, as `lock()`.
   * @returns {Promise<Lock|null>} `null` when someone else holds it.
   */
  tryLock(name, options) {
    return this.#traced('try_lock', name, async () => {
      checkName(name);
      const o = checkOptions(options, 'options');
      if (optBoolean(o.reentrant, 'reentrant')) return this.#tryLockAs(contextOwner(), name, o);
      const extras = extrasOf(o);
      const n = await call(() => this.#n.tryLock(name, extras));
      return n ? new Lock(n) : null;
    });
  }

  /**
   * Run `fn(lock)` while holding `name`, and always release afterwards.
   * Resolves with `fn`'s result. If `fn` succeeded but the lock had been lost
   * meanwhile, rejects with `LockLost`; if `fn` threw, that error wins.
   * With `reentrant: true`, `fn` runs in an async context owned by the hold's
   * owner (the current context's owner, or a new one): a `reentrant` lock,
   * tryLock or withLock of `name` inside it (in `fn` and everything `fn`
   * starts) re-enters the hold instead of waiting for it.
   */
  async withLock(name, fn, options) {
    checkFn(fn, 'withLock(name, fn)');
    const o = checkOptions(options, 'options');
    if (optBoolean(o.reentrant, 'reentrant')) {
      checkName(name);
      const owner = contextOwner();
      return runAs(owner, async () => holding(await this.#traced('lock', name, () => this.#lockAs(owner, name, o)), fn));
    }
    return holding(await this.lock(name, options), fn);
  }

  /** `withLock` for one of `permits` permits of the semaphore `name`. */
  async withPermit(name, permits, fn, options) {
    checkFn(fn, 'withPermit(name, permits, fn)');
    return holding(await this.acquirePermit(name, permits, options), fn);
  }

  /** `withLock` for the read side of the read-write lock `name`. */
  async withReadLock(name, fn, options) {
    checkFn(fn, 'withReadLock(name, fn)');
    return holding(await this.readLock(name, options), fn);
  }

  /** `withLock` for every name of `names` at once (`lockMany`). */
  async withLocks(names, fn, options) {
    checkFn(fn, 'withLocks(names, fn)');
    return holding(await this.lockMany(names, options), fn);
  }

  /** `withLock` for leadership of `name` announcing `value` (`campaign`); resigns afterwards. */
  async withLeadership(name, value, fn, options) {
    checkFn(fn, 'withLeadership(name, value, fn)');
    return holding(await this.campaign(name, value, options), fn);
  }

  /**
   * Take job `name`'s run-once record until now + `atMost` ms if no node
   * holds it: a `OnceHold`, or null at once if taken (never waits). The
   * record outlives this process (a node that dies mid-job keeps the job
   * taken until `atMost` runs out). What `runOnce` is made of.
   */
  async takeOnce(name, { atMost } = {}) {
    checkName(name);
    return takeOnce(this.#n, name, atMost);
  }

  /**
   * Run `fn()` if this node takes job `name`'s tick (ShedLock's semantics,
   * the record Java's ShedLock provider and Python's `once` keep): resolves
   * `fn`'s result, or `undefined` at once when another node has the tick.
   * The record is taken for `atMost` ms (the longest the job may run: after
   * it another node may take it even if this one still runs); when `fn`
   * settles it stays taken until `atLeast` ms after the start (above the
   * nodes' clock skew and the schedulers' jitter, below the interval), then
   * frees. `fn`'s error propagates after the record is finished.
   */
  async runOnce(name, fn, { atMost, atLeast } = {}) {
    checkName(name);
    checkFn(fn, 'runOnce(name, fn)');
    const least = span(atLeast, 'atLeast', 0);
    const hold = await takeOnce(this.#n, name, atMost, least);
    if (hold === null) return undefined;
    try {
      return await fn();
    } finally {
      await hold.finish({ atLeast: least });
    }
  }

  /**
   * Check etcd answers through this client's session: one read, bounded by
   * `requestTimeout` (`Unavailable` after it). Resolves the round trip in ms.
   * For health checks.
   * @returns {Promise<number>}
   */
  async ping() {
    return call(() => this.#n.ping());
  }

  /**
   * Take one of `permits` permits of the semaphore `name` (at most `permits`
   * holders at once, cluster-wide; FIFO). Every contender must agree on
   * `permits` (else `InvalidArgument`). Options as `lock()`, except
   * `lockDelay` (`InvalidArgument`: permits have no lock-delay).
   * @returns {Promise<Lock>} the permit: a Lock (token, `lost`, guarded ops, `await using`).
   */
  async acquirePermit(name, permits, options) {
    checkName(name);
    if (typeof permits !== 'number') throw invalid(`permits must be a number, got ${typeof permits}`);
    return new Lock(await acquire(`semaphore ${JSON.stringify(name)}`, options, (t, c, x) => this.#n.acquirePermit(name, permits, t, c, x)));
  }

  /**
   * Take the read side of the read-write lock `name`: shared with readers,
   * excluded by writers. The write side is `lock(name)` (so `etcdctl lock`
   * and Go's Mutex exclude readers too). FIFO: a reader behind a waiting
   * writer waits for it. Options as `lock()`, except `lockDelay`
   * (`InvalidArgument`: read locks have no lock-delay).
   * @returns {Promise<Lock>}
   */
  async readLock(name, options) {
    checkName(name);
    return new Lock(await acquire(`read lock ${JSON.stringify(name)}`, options, (t, c, x) => this.#n.readLock(name, t, c, x)));
  }

  /**
   * Lock every name in `names` together (up to `MAX_MULTI`). The waiter keys
   * are created in one etcd transaction, so every client queues in the same
   * order on every name: no deadlock, no retry loop. Timeout or abort removes
   * every key. Options: `timeout` and `signal` as `lock()` (`lockDelay`,
   * `leaseTime` and `metadata` are refused with `InvalidArgument`).
   * @returns {Promise<MultiLock>}
   */
  async lockMany(names, options) {
    if (!Array.isArray(names)) throw invalid(`names must be an array of strings, got ${typeof names}`);
    for (const n of names) checkName(n);
    return new MultiLock(await acquire(`locks ${JSON.stringify(names)}`, options, (t, c) => this.#n.lockMany(names, t, c), { extras: false }));
  }

  /**
   * Campaign for leadership of `name` announcing `value`, waiting (FIFO
   * among candidates) until elected. Same keys as Go's `concurrency.Election`
   * and `etcdctl elect`. Options as `lock()`.
   * @returns {Promise<Leadership>}
   */
  campaign(name, value, options) {
    return this.#traced('campaign', name, async () => {
      checkName(name);
      const v = toBytes(value, 'value');
      return new Leadership(await acquire(`election ${JSON.stringify(name)}`, options, (t, c, x) => this.#n.campaign(name, v, t, c, x)));
    });
  }

  /**
   * Lead the election `name` as a loop: campaign; when elected run
   * `task(term)` (`term.signal` aborts when leadership is lost or the loop
   * stops; `term.leadership` has the guarded operations); when the task
   * returns, resign and campaign again. Returns the `LeaderLoop` at once (an
   * EventEmitter and an async iterable of its events); `await loop.stop()`
   * stops it. Options: `value` (the proclamation, default empty), `again`
   * (default true; false: one term), `retry` (ms before campaigning again
   * after a failed campaign, default 1000), `signal` (aborting it stops the
   * loop), and the campaign's `lockDelay`, `leaseTime`, `metadata` as
   * `lock()` takes them.
   * @returns {LeaderLoop}
   */
  lead(name, task, options) {
    checkName(name);
    checkFn(task, 'lead(name, task)');
    const o = checkOptions(options, 'options');
    if (o.timeout !== undefined) throw invalid('lead: timeout is not taken (a leader loop campaigns until stopped)');
    const value = o.value === undefined || o.value === null ? '' : toBytes(o.value, 'value');
    const again = optBoolean(o.again, 'again');
    const retry = optNumber(o.retry, 'retry');
    const signal = checkSignal(o.signal);
    const extras = extrasOf(o);
    let n;
    try {
      n = this.#n.leaderLoop(name, value, again, retry, extras, signal?.aborted === true);
    } catch (e) {
      throw fromNative(e);
    }
    return new LeaderLoop(n, task, signal);
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
   * permits, holds, leaseId, ttlRemaining, fencingToken, owner, ageMs, value,
   * host, pid, language, localWaiters, metadata, foreign }` (`metadata`: the
   * plain object the holder passed as the `metadata` option, `{}` if none).
   */
  async status(name) {
    checkName(name);
    return decodeRecord(await call(() => this.#n.status(name)));
  }

  /**
   * Every lock, election, semaphore and read-write lock whose name starts
   * with `prefix` (default: all of this client's namespace), sorted by name,
   * from one read: what `etcdlock list` shows.
   */
  async list(prefix = '') {
    if (typeof prefix !== 'string') throw new TypeError(`prefix must be a string, not ${typeof prefix}`);
    return decodeRecord(await call(() => this.#n.list(prefix)));
  }

  /**
   * The cycles of clients waiting on each other's holds under `prefix`
   * (default: all of this client's namespace), whatever language each uses,
   * from one read: what `etcdlock deadlocks` shows. `{ prefix, revision,
   * clients, waits, cycles: [{ edges: [{ waiter, name, waiterKey, holder,
   * holderKey, fencingToken, waiterRevision }] }] }`, each party `{ leaseId,
   * owner, host, pid, language }`.
   */
  async deadlocks(prefix = '') {
    if (typeof prefix !== 'string') throw new TypeError(`prefix must be a string, not ${typeof prefix}`);
    return decodeRecord(await call(() => this.#n.deadlocks(prefix)));
  }

  /**
   * Every hold and wait of `name` that etcd's history keeps (from its
   * compaction revision), or those queued in the last `since` ms: what
   * `etcdlock history` shows (`History` in index.d.ts).
   * @param {string} name
   * @param {{ since?: number }} [options] `since` in ms (absent or `Infinity`: all)
   */
  async history(name, options) {
    checkName(name);
    const since = optNumber(checkOptions(options, 'options').since, 'since');
    return decodeRecord(await call(() => this.#n.history(name, since)));
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
   * Free a permit of the semaphore `name` whose holder is wedged: `id` is the
   * permit's id, its `fencingToken`. Resolves true if released, false if no
   * permit has that id; the former holder's `lost` resolves with `KeyDeleted`.
   * @param {string} name
   * @param {bigint|number} id
   * @returns {Promise<boolean>}
   */
  async releasePermit(name, id) {
    checkName(name);
    if (typeof id !== 'bigint' && !Number.isSafeInteger(id)) {
      throw new TypeError(`id must be a bigint or a safe integer, not ${typeof id}`);
    }
    return call(() => this.#n.releasePermit(name, String(id)));
  }

  /**
   * Open the count-down latch `name` with `count` (created with it if it does
   * not exist; every process must open it with the same count, else
   * `InvalidArgument`). `countDown()` lowers the count, `wait()` waits for
   * zero, in every process at once. The latch lives while some client has it
   * open: `close()` it when done (its keys expire within the TTL after the
   * last handle closes).
   * @param {string} name
   * @param {number} count 1 .. 2**31
   * @returns {Promise<Latch>}
   */
  async latch(name, count) {
    checkName(name);
    countArg(count, 'count');
    return new Latch(await call(() => this.#n.latch(name, count)));
  }

  /**
   * Open the barrier `name` for `parties` parties: `wait()` resolves in every
   * party at once when the `parties`-th has arrived. Every process must open
   * it with the same number (else `InvalidArgument`). One-shot: once
   * released, a party that arrives is refused (`InvalidArgument`) until every
   * handle is closed and its keys have expired; use a new name per round.
   * @param {string} name
   * @param {number} parties 1 .. 2**31
   * @returns {Promise<Barrier>}
   */
  async barrier(name, parties) {
    checkName(name);
    countArg(parties, 'parties');
    return new Barrier(await call(() => this.#n.barrier(name, parties)));
  }

  /**
   * Revoke the lease (releasing every lock of this client at once; their
   * `lost` resolves with `ClientClosed`) and refuse further calls with
   * `Closed`. Idempotent.
   */
  close() {
    releasing.delete(this);
    this.#unlog();
    return call(() => this.#n.close());
  }

  /** `await using client = await Client.connect(...)` closes it at scope exit. */
  [Symbol.asyncDispose]() {
    return this.close();
  }

  /** @internal The native client (bench.js, in a build with the bench feature). */
  _native() {
    return this.#n;
  }

  /** @internal Raw etcd access for tests and the benchmark (keys not namespaced). */
  _rawKeys(prefix) {
    return call(() => this.#n.rawKeys(prefix));
  }

  /** @internal Benchmark floor: raw Txn (put with lease) + Delete. */
}

function checkFn(fn, what) {
  if (typeof fn !== 'function') throw invalid(`${what}: fn must be a function, got ${typeof fn}`);
}

// Run `fn(lock)` and release `lock` afterwards, whatever happens: `fn`'s
// error wins over a failed release; after a success a lost hold rejects
// `LockLost` (the section may not have been protected to its end).
async function holding(lock, fn) {
  let result;
  try {
    result = await inHold(lock, () => fn(lock));
  } catch (e) {
    await lock.unlock().catch(() => {});
    throw e;
  }
  await lock.unlock();
  return result;
}

module.exports = { Client };
