// Type definitions for etcdlock (Node.js binding of the etcdlock Rust core):
// the options of connecting, acquiring and waiting. index.d.ts re-exports
// every name here; import them from 'etcdlock'.

export interface TlsOptions {
  /** PEM file with the CA that signs the etcd server certificates. */
  ca?: string;
  /** PEM file with the client certificate (mutual TLS). */
  cert?: string;
  /** PEM file with the client private key (mutual TLS). */
  key?: string;
  /** Server name to verify instead of the endpoint's host. */
  domain?: string;
}

export interface ConnectOptions {
  /**
   * `['127.0.0.1:2379']`, `['http://...']`, `['https://...']` (needs `tls`), or a comma-separated string.
   * When omitted, every option defaults from the `ETCDLOCK_*` environment variables (ETCDLOCK_ENDPOINTS,
   * ETCDLOCK_TTL, ETCDLOCK_NAMESPACE, ETCDLOCK_USERNAME, ETCDLOCK_PASSWORD, ETCDLOCK_TLS_CA/_TLS_CERT/_TLS_KEY/_TLS_DOMAIN), and the fields
   * given here override them. With neither: `http://127.0.0.1:2379`.
   */
  endpoints?: string[] | string;
  /** Lease TTL in whole seconds (1..9e9, default 15). etcd may raise it; see `client.ttl`. */
  ttl?: number;
  /** Prefix prepended to every key this client touches (lock keys and guarded keys). */
  namespace?: string;
  username?: string;
  password?: string;
  tls?: TlsOptions;
  /** Bound on reaching etcd at connect time, in ms (default 5000). */
  connectTimeout?: number;
  /** Bound in ms on every call that does not wait for a lock (tryLock, unlock, guarded operations, status), retries and failover included: `Unavailable` after it (default 2000). Lock calls are bounded by their own timeout. */
  requestTimeout?: number;
  /**
   * Close this client when SIGTERM, SIGINT or SIGHUP arrives, so its locks are free at once
   * instead of after the TTL (Node's default action for those signals runs no JavaScript);
   * then end the process by that signal unless another listener for it exists. Default false.
   */
  releaseOnExit?: boolean;
  /** Safety margin in ms subtracted from the TTL for local loss detection (default: TTL/5, at most 2000). At most half the TTL (else `InvalidArgument`). */
  margin?: number;
  /** Watch each held key so an outside delete is reported at once (default true). */
  watchHeldKeys?: boolean;
  /** Milliseconds between lease keep-alives (default 75 % of the TTL or TTL - margin - 5 s, whichever is shorter, 8 s at TTL 15; at small TTLs TTL/3, at most (TTL - margin)/4, at least 250 ms): when set, at least 50, at most TTL - margin - min(5 s, half of TTL - margin) (else `InvalidArgument`). */
  keepaliveInterval?: number;
  /**
   * Resolve `connect` at once without reaching etcd (default false: reject
   * `Unavailable` within `connectTimeout` when no member answers). A service
   * can then start while etcd is briefly down: `ping()` rejects `Unavailable`
   * until a member answers, and each call reaches etcd within its own bound
   * (a lock call its timeout, anything else `requestTimeout`).
   */
  lazyConnect?: boolean;
  /**
   * Receives core's log events: `logger[level](message, fields)` with `level`
   * one of `debug` (a hold acquired or released), `info` (an etcd member
   * failing over, the watch stream re-created), `warn` (keep-alives failing,
   * a hold lost, an unlock that could not reach etcd), `error`; `message` is
   * core's text (`'lock lost'`), `fields` a plain object of strings: the
   * event's fields (`lock`, `reason`, `fencing_token`, `lease`, ...) and
   * `target` (the core module). `console` and winston take this shape as is;
   * pino takes `(fields, message)`: pass an adapter (see the Node services
   * guide, docs/guides/node-services.md, "Logging").
   * Events are process-wide: each distinct logger of an open client gets
   * every client's events at or above its level, on the main thread (the
   * first JavaScript environment that gave a logger). A logger that throws
   * loses that record only. Delivery never keeps the process alive.
   * Without a logger, `DEBUG=etcdlock` (the `debug` package's convention:
   * `etcdlock`, `etcdlock:*`, `etcdlock:warn`, `*`, `-` to skip) prints the
   * events to stderr.
   */
  logger?: Logger;
  /**
   * The least severe event the `logger` gets (default: the logger's own
   * `level` property when it has one, as pino's and winston's loggers do,
   * else `'info'`). A level the logger has no method for is not delivered.
   */
  logLevel?: LogLevel;
  /**
   * The OpenTelemetry TracerProvider for this client's spans (default: the
   * global one, `trace.getTracer('etcdlock', version)`, when the optional
   * peer dependency `@opentelemetry/api` is installed). Spans: `etcdlock.acquire`
   * around `lock`, `tryLock`, `campaign` (and `withLock`, reentrant forms),
   * `etcdlock.hold` from acquisition to unlock or loss; their attributes are in the
   * Node services guide (docs/guides/node-services.md, "OpenTelemetry").
   */
  tracerProvider?: TracerProviderLike;
}

/** `logLevel`: the least severe core event a logger gets; `silent`: none. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

/** What `ConnectOptions.logger` takes: any object with some of these methods (console, winston, a pino adapter). */
export interface Logger {
  debug?(message: string, fields: LogFields): unknown;
  info?(message: string, fields: LogFields): unknown;
  warn?(message: string, fields: LogFields): unknown;
  error?(message: string, fields: LogFields): unknown;
  /** pino's and winston's current level, read as the default `logLevel`. */
  level?: string;
}

/** A core log event's fields (`lock`, `reason`, `fencing_token`, `lease`, ...) and `target`, the core module that emitted it. */
export interface LogFields {
  target: string;
  [field: string]: string;
}

/** An OpenTelemetry `TracerProvider` (from `@opentelemetry/api`; typed structurally so the API stays optional). */
export interface TracerProviderLike {
  getTracer(name: string, version?: string, options?: object): unknown;
}

export interface LockOptions {
  /**
   * Give up with `Timeout` after this many milliseconds (default or `Infinity`: wait as long as it takes).
   * `0` is one try: takes a free lock, rejects `Timeout` at once (writing nothing) when it is held.
   * Negative or `NaN`: `InvalidArgument`.
   */
  timeout?: number;
  /** Aborting it rejects the wait with `Cancelled` and removes our waiter key. */
  signal?: AbortSignal;
}

/**
 * What an acquisition may ask for beyond its wait (`lock`, `tryLock`,
 * `acquirePermit`, `readLock`, `campaign` and their `with*` forms). The values
 * are checked by the core with the same rule and messages as in every
 * etcdlock language: a bad one rejects `InvalidArgument`.
 */
export interface AcquireOptions {
  /**
   * Chubby's lock-delay, in ms: if this hold ends because its lease ended (the
   * process died or froze, its session expired, it was cut off from etcd)
   * rather than by `unlock()`, the next holder gets the lock no earlier than
   * this long after etcd removed the key, so requests the vanished holder still
   * had in flight drain first. A clean `unlock()`, `close()` or an operator's
   * `release()` hands over at once. Rounded up to whole seconds; at most 24 h.
   * Not for permits or read locks (`InvalidArgument`).
   */
  lockDelay?: number;
  /**
   * Hold at most this many ms: then the hold is released even if the holder
   * never unlocks, and `lost` resolves `LeaseExpired`. At most 24 h; positive.
   */
  leaseTime?: number;
  /** Who holds, as every `status()`/`list()` shows it (`Contender.metadata`): string pairs, at most 1 KB in all. */
  metadata?: Record<string, string>;
  /**
   * Reject `Deadlock` (the message names the cycle) instead of waiting when
   * this wait would close a cycle of clients waiting on each other's holds
   * (this client holds x and waits for y while the holder of y waits for x,
   * in any language). Checked when the key queues and again each time the key
   * it waits behind changes (one read of the namespace per check); of several
   * waits of a cycle checked at once only the youngest fails. Default false.
   */
  detectDeadlock?: boolean;
}

/** The options of a waiting acquisition: the wait (`LockOptions`) and `AcquireOptions`. */
export interface LockAcquireOptions extends LockOptions, AcquireOptions {}

/**
 * Reentrancy by async context, for `lock`, `tryLock` and `withLock`.
 *
 * With `reentrant: true` the hold belongs to the current async context's
 * owner. A reentrant `withLock` runs its callback in a context owned by the
 * hold's owner (the enclosing context's, or a new one): inside it, in the
 * callback and everything it starts (awaits, timers, promises), a reentrant
 * `lock`, `tryLock` or `withLock` of the same name re-enters the hold at
 * once: another handle (a `Lock`) of the same hold, with the same key and
 * fencing token, nothing written to etcd. The lock is released when its
 * last handle is unlocked. Outside any reentrant `withLock` there is no
 * owner to re-enter: the call takes a hold of its own. Other contexts, other
 * clients and plain calls wait as usual. A lost hold is never re-entered:
 * the owner's next reentrant call rejects `LockLost` until every handle of
 * the lost hold is unlocked. For an explicit owner see `client.reentrantLock()`.
 */
export interface ReentrantOption {
  /** Re-enter the current async context's hold of this name (default false). */
  reentrant?: boolean;
}

/** The options of a latch or barrier wait. */
export interface WaitOptions {
  /** Give up with `Timeout` after this many ms (absent or `Infinity`: no limit; `0`: look once). */
  timeout?: number;
  /** Aborting it rejects the wait with `Cancelled`. */
  signal?: AbortSignal;
}
