// Type definitions for etcdlock (Node.js binding of the etcdlock Rust core).
/// <reference types="node" />
import { EventEmitter } from 'node:events';
import type {
  ConnectOptions,
  LockOptions,
  AcquireOptions,
  LockAcquireOptions,
  ReentrantOption,
  WaitOptions,
} from './options';
import type { LockStatus, Metrics, Deadlocks, History } from './records';

// The options (ConnectOptions, LockOptions, ...) live in options.d.ts; the
// records core reports (LockStatus, Metrics, Deadlocks, History) in records.d.ts.
export * from './options';
export * from './records';

/** The core's error names; `LockError.code` is one of these. */
export type ErrorCodeName =
  | 'InvalidArgument'
  | 'Timeout'
  | 'WouldBlock'
  | 'LockLost'
  | 'NotHeld'
  | 'Cancelled'
  | 'Unavailable'
  | 'AuthFailed'
  | 'PermissionDenied'
  | 'Closed'
  | 'Internal'
  | 'Deadlock';

/** Why a held lock ended without `unlock()`. */
export type LossReasonName = 'LeaseExpired' | 'KeyDeleted' | 'ConnectionLost' | 'ClientClosed';

/** `ErrorCode.Timeout === 'Timeout'`, etc. */
export declare const ErrorCode: { readonly [K in ErrorCodeName]: K };
/** `LossReason.KeyDeleted === 'KeyDeleted'`, etc. */
export declare const LossReason: { readonly [K in LossReasonName]: K };

/**
 * Every error etcdlock rejects with.
 *
 * | code | when |
 * |---|---|
 * | InvalidArgument | wrong type, empty or oversized name, TTL out of range, bad endpoint or TLS file |
 * | Timeout | not acquired within `timeout` |
 * | WouldBlock | (not surfaced: `tryLock` resolves `null` instead) |
 * | LockLost | the hold ended; `reason` says why |
 * | NotHeld | guarded operation after `unlock()` |
 * | Cancelled | the `signal` aborted the wait (`cause` is the signal's reason) |
 * | Unavailable | etcd unreachable after retries (message names the endpoints) |
 * | AuthFailed / PermissionDenied | credentials rejected / RBAC denies the prefix |
 * | Closed | the client was closed |
 * | Internal | a bug in etcdlock (never a crash) |
 * | Deadlock | with `detectDeadlock: true`: the wait would close a cycle of clients waiting on each other (the message names it) |
 */
export declare class LockError extends Error {
  readonly name: 'LockError';
  /** The core's error name. */
  readonly code: ErrorCodeName;
  /** The core's numeric code (C status value, 1..12). */
  readonly errno: number;
  /** For `LockLost`: why the hold ended. */
  readonly reason?: LossReasonName;
  /** Whether the same call may succeed if tried again (core's rule: Timeout, WouldBlock, Unavailable). */
  readonly retryable: boolean;
  constructor(code: ErrorCodeName, message: string, options?: { reason?: LossReasonName; retryable?: boolean; cause?: unknown });
}

/**
 * A count-down latch shared by every process that opens the same name with
 * the same count (`client.latch()`). It lives while some client has it open:
 * `close()` it when done. After `close()` calls reject `Closed`; once every
 * handle is closed they reject `LockLost` (`LeaseExpired`).
 */
export declare class Latch implements AsyncDisposable {
  private constructor();
  /** The latch's name. */
  readonly name: string;
  /** The count it was created with. */
  readonly initial: number;
  /** Lower the count by one (nothing at zero); resolves the count after. At zero every waiter is released. */
  countDown(): Promise<number>;
  /** The count now (one read). */
  count(): Promise<number>;
  /** Wait until the count is zero; `Timeout` after `timeout` ms, `Cancelled` when `signal` aborts. */
  wait(options?: WaitOptions): Promise<void>;
  /** Stop keeping the latch alive from this handle. Idempotent. */
  close(): void;
  /** Same as `close()`; used by `await using`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * A one-shot barrier for a fixed number of parties (`client.barrier()`):
 * `wait()` resolves in every party at once when the last has arrived.
 */
export declare class Barrier implements AsyncDisposable {
  private constructor();
  /** The barrier's name. */
  readonly name: string;
  /** How many parties it waits for. */
  readonly parties: number;
  /**
   * Arrive and wait for the others: resolves this party's arrival index (0 first, `parties - 1` last).
   * `Timeout` after `timeout` ms (this party leaves; its place is free again), `Cancelled` when `signal`
   * aborts, `InvalidArgument` when the barrier already released.
   */
  wait(options?: WaitOptions): Promise<number>;
  /** Stop keeping the barrier alive from this handle. Idempotent. */
  close(): void;
  /** Same as `close()`; used by `await using`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** The keep-alive renewal of a held lock: see `Lock.renewal`. */
export interface Renewal {
  failing: boolean;
  /** Present while failing: the ms until the hold ends unless a keep-alive gets through. */
  validForMs?: number;
}

/** A held lock. Release with `unlock()` or `await using`. */
export declare class Lock implements AsyncDisposable {
  protected constructor();
  /** The lock name. */
  readonly name: string;
  /** Our key in etcd (with the namespace), e.g. `orders/694d7a3e4b2c8f05`. */
  readonly key: string;
  /** The session lease id. */
  readonly leaseId: bigint;
  /** Our key's create_revision; strictly increases from one holder to the next. */
  readonly fencingToken: bigint;
  /** Resolves with the reason if the hold ends without `unlock()`; never rejects; pending after a normal unlock. Does not keep the process alive. */
  readonly lost: Promise<LossReasonName>;
  /** Aborts (reason: a `LockLost` `LockError`) when the hold is lost. */
  readonly signal: AbortSignal;
  /** True while held: not unlocked, not lost, inside the local validity window. */
  readonly isHeld: boolean;
  /** `'held'`, `'released'` or the loss reason. */
  readonly state: 'held' | 'released' | LossReasonName;
  /**
   * Whether the keep-alive renewal is failing now (no acknowledgement for an interval past when
   * one was due), with the ms of validity the hold still has. A failing hold is still held.
   */
  readonly renewal: Renewal;
  /** Call `listener` at each change of `renewal` until the hold ends; keeps neither the process nor the lock alive. */
  onRenewal(listener: (renewal: Renewal) => void): void;
  /** Release. Idempotent. Rejects `LockLost` if the hold had been lost before. */
  unlock(): Promise<void>;
  /** Same as `unlock()`; used by `await using`. */
  [Symbol.asyncDispose](): Promise<void>;
  /** Put `key` = `value` only while held (etcd rejects it otherwise: `LockLost`). Keys are namespaced like the lock. */
  put(key: string | Uint8Array, value: string | Uint8Array): Promise<void>;
  /** Get `key` only while held: a Buffer, or `null` when absent. */
  get(key: string | Uint8Array): Promise<Buffer | null>;
  /** Get `key` only while held, decoded as a string, or `null` when absent. */
  get(key: string | Uint8Array, encoding: BufferEncoding): Promise<string | null>;
  /** Delete `key` only while held; resolves true if it existed. */
  delete(key: string | Uint8Array): Promise<boolean>;
}

/** The most permits one semaphore may have. */
export declare const MAX_PERMITS: number;
/** The most names one `lockMany` takes (etcd's default `--max-txn-ops`). */
export declare const MAX_MULTI: number;

/** Leadership won by `client.campaign()`: a `Lock` plus `proclaim` and `resign` (`await using` resigns). */
export declare class Leadership extends Lock {
  private constructor();
  /** Announce a new value as leader; rejects `LockLost` if we no longer lead. */
  proclaim(value: string | Uint8Array): Promise<void>;
  /** Give up leadership (the next candidate leads); same as `unlock()`. */
  resign(): Promise<void>;
}

/** How `client.lead()` campaigns: the campaign's `AcquireOptions` plus these. */
export interface LeadOptions extends AcquireOptions {
  /** The proclamation every candidate sees (`Leader.value`); default empty. */
  value?: string | Uint8Array;
  /** Campaign again after each term and after a failed campaign (default true); false: one term. */
  again?: boolean;
  /** Ms to wait before campaigning again after a failed campaign; default 1000. */
  retry?: number;
  /** Aborting it stops the loop (as `stop()`). */
  signal?: AbortSignal;
}

/**
 * One term of leadership, handed to the task of `client.lead()`. One loop
 * runs one task at a time: it campaigns again only after the task returned.
 */
export declare class Term {
  private constructor();
  /**
   * Aborts when the term is over for the task: leadership lost (reason: a
   * `LockLost` LockError with its `reason`), the loop stopped (`Cancelled`), or
   * the task returned. Return soon after: the loop waits for the task.
   */
  readonly signal: AbortSignal;
  /** The leadership's fencing token: strictly increases from one term to the next. */
  readonly fencingToken: bigint;
  /** This term's leadership: guarded `put`/`get`/`delete` (refused by etcd once lost), `proclaim`. */
  readonly leadership: Leadership;
}

/** The events of a `LeaderLoop` as `for await` yields them, in order; `stopped` is the last. */
export type LeaderLoopEvent =
  | { type: 'elected'; term: Term }
  | { type: 'renewalFailing' }
  | { type: 'renewalRecovered' }
  | { type: 'lost'; reason: LossReasonName }
  | { type: 'resigned' }
  | { type: 'leader'; leader: Leader | null }
  | { type: 'error'; error: unknown }
  | { type: 'stopped' };

/**
 * A running leader loop (`client.lead()`): campaign; when elected run the
 * task with a `Term`; when the task returns, resign and campaign again (unless
 * `again: false`); when leadership is lost, abort `term.signal` and campaign
 * again once the task returned. An EventEmitter of its events, in order, and
 * an async iterable of them (`LeaderLoopEvent`) from the moment iteration
 * starts (`break` leaves the loop running). `'error'` (a failed campaign, or
 * what the task threw) is emitted only while an `'error'` listener is
 * registered. A running loop keeps the process alive (one pending native
 * Promise, as a pending `lock()` does) until it has stopped; `term.signal`
 * does not.
 */
export declare class LeaderLoop extends EventEmitter implements AsyncDisposable, AsyncIterable<LeaderLoopEvent> {
  private constructor();
  /** Elected: the task starts with this term (before the listeners run). */
  on(event: 'elected', listener: (term: Term) => void): this;
  /** Keep-alives are failing while leader: the term ends at the local deadline unless one gets through. */
  on(event: 'renewalFailing' | 'renewalRecovered' | 'resigned' | 'stopped', listener: () => void): this;
  /** Leadership was lost: `term.signal` aborts; the loop campaigns again once the task returned. */
  on(event: 'lost', listener: (reason: LossReasonName) => void): this;
  /** Who leads now (any candidate, this one included; null: nobody). */
  on(event: 'leader', listener: (leader: Leader | null) => void): this;
  /** A campaign failed (a LockError; retried after `retry` ms when `again`), or the task threw. */
  on(event: 'error', listener: (error: unknown) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once(event: 'elected', listener: (term: Term) => void): this;
  once(event: 'lost', listener: (reason: LossReasonName) => void): this;
  once(event: 'leader', listener: (leader: Leader | null) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
  /**
   * Stop: cancel the campaign, or abort the running term's signal, wait for
   * its task to return and resign. Resolves once the loop has stopped (after
   * `'stopped'`). Idempotent.
   */
  stop(): Promise<void>;
  /** `await using loop = client.lead(...)` stops it at scope exit. */
  [Symbol.asyncDispose](): Promise<void>;
  [Symbol.asyncIterator](): AsyncIterator<LeaderLoopEvent>;
}

/** Several locks held together (`client.lockMany()`); losing any one loses the hold. */
export declare class MultiLock implements AsyncDisposable {
  private constructor();
  /** The lock names, in the order given. */
  readonly names: string[];
  /** Our key on each lock. */
  readonly keys: string[];
  /** The session lease every lock is held on (one client, one lease). */
  readonly leaseId: bigint;
  /** The fencing token on each lock (equal: one transaction created every key). */
  readonly fencingTokens: bigint[];
  /** Resolves with the first lock lost and why; pending after `unlock()`. */
  readonly lost: Promise<{ name: string; reason: LossReasonName }>;
  /** Aborts (reason: a `LockLost` `LockError`) when any lock is lost. */
  readonly signal: AbortSignal;
  /** True while every lock is held. */
  readonly isHeld: boolean;
  /** `'held'` while every lock is held, the loss reason of a lock lost (the first in name order), else `'released'`. */
  readonly state: 'held' | 'released' | LossReasonName;
  /**
   * As `Lock.renewal` (every lock is on one session, renewed together): failing, with the ms of
   * validity left, while no keep-alive is acknowledged and every lock is held.
   */
  readonly renewal: Renewal;
  /** Call `listener` at each change of `renewal` until the hold ends (a lock lost, or released); keeps neither the process nor the locks alive. */
  onRenewal(listener: (renewal: Renewal) => void): void;
  /** Put `key` = `value` only while every lock is held (one etcd transaction; `LockLost` otherwise). */
  put(key: string | Uint8Array, value: string | Uint8Array): Promise<void>;
  /** Get `key` only while every lock is held; `null` when absent. */
  get(key: string | Uint8Array): Promise<Buffer | null>;
  /** Get `key` as a string only while every lock is held. */
  get(key: string | Uint8Array, encoding: BufferEncoding): Promise<string | null>;
  /** Delete `key` only while every lock is held; true if it existed. */
  delete(key: string | Uint8Array): Promise<boolean>;
  /** Release every lock. */
  unlock(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** The leader of an election. */
export interface Leader {
  /** The leader's key (with the namespace). */
  key: string;
  /** Its proclamation. */
  value: Buffer;
  /** Its key's create_revision: the leadership's fencing token. */
  revision: bigint;
  leaseId: bigint;
}

/** A connection to etcd that hands out locks (all sharing one lease). */

/** A taken run-once record (`client.takeOnce`); the job stays taken until `lockUntil` whatever happens. */
export declare class OnceHold {
  private constructor();
  /** The job's name. */
  readonly name: string;
  /** The etcd revision that wrote this hold (rises strictly per job: a fencing token). */
  readonly revision: bigint;
  /** When the hold began. */
  readonly lockedAt: Date;
  /** Until when the job is taken. */
  readonly lockUntil: Date;
  /** Done: keep it taken until `lockedAt + atLeast` ms if still ahead, else free it; false if no longer ours. */
  finish(options?: { atLeast?: number }): Promise<boolean>;
  /** Keep it taken until now + `atMost` ms; false if expired or no longer ours. */
  extend(options: { atMost: number }): Promise<boolean>;
}

/**
 * A reentrant lock whose owner is this object (Redisson's `RLock`, Java's
 * `ReentrantLock` with the object in place of the thread), from
 * `client.reentrantLock(name)`. While this object holds the lock, `lock()`
 * and `tryLock()` re-enter at once (another handle of the same hold: same key
 * and fencing token, no etcd request); `unlock()` releases the latest handle,
 * and the lock is free once every handle is released. Every caller sharing
 * the object shares the ownership; other objects (and plain `client.lock()`)
 * wait as usual. A lost hold is not re-entered: `lock()` and `tryLock()`
 * reject `LockLost` until each of its handles is unlocked (each such
 * `unlock()` rejects `LockLost` too), then take a fresh hold.
 */
export declare class ReentrantLock {
  private constructor();
  /** The lock name. */
  readonly name: string;
  /** `lock()` / `tryLock()` handles not yet released by `unlock()`. */
  readonly holdCount: number;
  /** True while this object has a handle and the hold is held. */
  readonly isHeld: boolean;
  /** Acquire or re-enter; options as `client.lock()`. Resolves the new handle. */
  lock(options?: LockAcquireOptions): Promise<Lock>;
  /** Acquire or re-enter if free or ours now; `null` when another owner holds it. */
  tryLock(options?: AcquireOptions): Promise<Lock | null>;
  /** Release the latest handle; rejects `NotHeld` when there is none. */
  unlock(): Promise<void>;
  /** Run `fn` holding (or re-entering) the lock; releases that handle afterwards. */
  withLock<T>(fn: (lock: Lock) => T | Promise<T>, options?: LockAcquireOptions): Promise<T>;
}

/** A key as a `MemStore` holds it (`store.keys()`). */
export interface MemKey {
  /** The whole key (namespace included), as text. */
  key: string;
  value: Buffer;
  /** The lease it lives on (`0n`: none). */
  lease: bigint;
  /** The revision that created it (a lock key's fencing token). */
  createRevision: bigint;
  /** The revision of its last write. */
  modRevision: bigint;
}

/**
 * A handle on the in-process store that `mem://NAME` endpoints reach, for a
 * test to make a hold be lost the ways production loses it. Get one with
 * `MemStore.open(name)`; clients of this process connected to
 * `store.endpoint` see each control as they would see the same thing happen
 * on etcd. A client connected to etcd has no such handle. Every method is
 * synchronous and throws a `LockError` (`InvalidArgument`) for a bad argument.
 *
 * | control | what the store does | what a holder sees |
 * |---|---|---|
 * | `expireLease(lock.leaseId)` | ends the lease now, as its TTL would | `lost` resolves `'LeaseExpired'` |
 * | `deleteKey(lock.key)` | deletes the lock's key, as an operator would | `lost` resolves `'KeyDeleted'`; the next waiter is granted |
 * | `silence(ms)` | answers nothing for `ms` (a hung etcd); leases expire meanwhile | `renewal` turns `{ failing: true }`, then `lost` resolves `'ConnectionLost'`; calls end at their bounds |
 * | `stall(lock.leaseId, ms)` | answers nothing to that lease's client; the others go on | that client as under `silence`; others are granted once its lease expires |
 *
 * @example
 * const store = MemStore.open('orders-test');
 * const client = await Client.connect({ endpoints: [store.endpoint] });
 * const lock = await client.lock('job');
 * store.expireLease(lock.leaseId);
 * await lock.lost; // 'LeaseExpired'
 */
export declare class MemStore {
  private constructor();
  /**
   * The store `mem://NAME` (`''`, the default: the process-wide `mem://`),
   * started if needed. Throws `InvalidArgument` for a name that is not up to
   * 64 of `A-Z a-z 0-9 . _ -`.
   */
  static open(name?: string): MemStore;
  /** What clients give as their endpoint to reach this store: `mem://NAME`. */
  readonly endpoint: string;
  /** The store's name (`''` for `mem://`). */
  readonly name: string;
  /**
   * End lease `leaseId` (a lock's `leaseId`) now, as its time-to-live would:
   * its keys are deleted, its holders' `lost` resolves `'LeaseExpired'`,
   * waiters behind them are granted. False if the store has no such lease.
   */
  expireLease(leaseId: bigint): boolean;
  /**
   * Delete `key` (the whole key: a lock's `key`) as another party would; its
   * holder's `lost` resolves `'KeyDeleted'`. False if there was no such key.
   */
  deleteKey(key: string | Uint8Array): boolean;
  /**
   * Answer nothing for `ms` milliseconds, as an etcd that hangs. A hold's
   * `renewal` turns failing a keep-alive interval after its last renewal and
   * its `lost` resolves `'ConnectionLost'` at its local deadline; lock calls
   * end at their timeout, other calls at the request timeout
   * (`Unavailable`). A later call replaces the end; `0` ends it now.
   */
  silence(ms: number): void;
  /**
   * Answer nothing to the client of lease `leaseId` for `ms` milliseconds
   * while the other clients go on: a client cut off from etcd. `0` ends it.
   */
  stall(leaseId: bigint, ms: number): void;
  /** End every silence and stall now. */
  resume(): void;
  /** The keys under `prefix` (every key for `''`), in key order. */
  keys(prefix?: string | Uint8Array): MemKey[];
}

export declare class Client implements AsyncDisposable {
  private constructor();
  /** Connect and open the session. Rejects `InvalidArgument`, `Unavailable`, `AuthFailed`. */
  static connect(options?: ConnectOptions): Promise<Client>;
  /** What this client has done so far (no etcd request); the same figures in every language. */
  metrics(): Metrics;
  /** The same metrics in Prometheus' text format (core's metric names), with `labels` on every series. */
  prometheus(labels?: Record<string, string>): string;
  /** The effective lease TTL in seconds. */
  readonly ttl: number;
  /** Whether `close()` was called. */
  readonly closed: boolean;
  /** Acquire `name`, waiting in FIFO order (`reentrant`: see `ReentrantOption`). */
  lock(name: string, options?: LockAcquireOptions & ReentrantOption): Promise<Lock>;
  /** Acquire `name` only if free now; `null` when held elsewhere (`reentrant`: see `ReentrantOption`). */
  tryLock(name: string, options?: AcquireOptions & ReentrantOption): Promise<Lock | null>;
  /**
   * Run `fn` while holding `name`; always releases (a lost hold after `fn` succeeded rejects `LockLost`).
   * With `reentrant: true`, `fn` runs in an async context that owns the hold (see `ReentrantOption`).
   */
  withLock<T>(name: string, fn: (lock: Lock) => T | Promise<T>, options?: LockAcquireOptions & ReentrantOption): Promise<T>;
  /** A reentrant lock on `name` owned by the returned object (see `ReentrantLock`). */
  reentrantLock(name: string): ReentrantLock;
  /** `withLock` for one of `permits` permits of the semaphore `name`. */
  withPermit<T>(name: string, permits: number, fn: (permit: Lock) => T | Promise<T>, options?: LockAcquireOptions): Promise<T>;
  /** `withLock` for the read side of the read-write lock `name`. */
  withReadLock<T>(name: string, fn: (lock: Lock) => T | Promise<T>, options?: LockAcquireOptions): Promise<T>;
  /** `withLock` for every name at once (`lockMany`). */
  withLocks<T>(names: string[], fn: (locks: MultiLock) => T | Promise<T>, options?: LockOptions): Promise<T>;
  /** `withLock` for leadership of `name` (`campaign`); resigns afterwards. */
  withLeadership<T>(name: string, value: string | Uint8Array, fn: (leadership: Leadership) => T | Promise<T>, options?: LockAcquireOptions): Promise<T>;
  /** Take job `name`'s run-once record for `atMost` ms if no node holds it; `null` at once if taken. */
  takeOnce(name: string, options: { atMost: number }): Promise<OnceHold | null>;
  /**
   * Run `fn` if this node takes job `name`'s tick (ShedLock's semantics): `fn`'s result, or `undefined`
   * when another node has it. Taken for `atMost` ms; after `fn` settles, kept until `atLeast` ms after the start.
   */
  runOnce<T>(name: string, fn: () => T | Promise<T>, options: { atMost: number; atLeast?: number }): Promise<T | undefined>;
  /** One read through the session, bounded by `requestTimeout`: the round trip in ms. For health checks. */
  ping(): Promise<number>;
  /** One of `permits` permits of the semaphore `name` (FIFO; every contender must agree on `permits`). */
  acquirePermit(name: string, permits: number, options?: LockAcquireOptions): Promise<Lock>;
  /** The read side of the read-write lock `name`; `lock(name)` is the write side. */
  readLock(name: string, options?: LockAcquireOptions): Promise<Lock>;
  /** Every name at once (one transaction: no deadlock); at most `MAX_MULTI` names. */
  lockMany(names: string[], options?: LockOptions): Promise<MultiLock>;
  /** Wait to be elected leader of `name`, announcing `value` (etcdctl elect / Go Election compatible). */
  campaign(name: string, value: string | Uint8Array, options?: LockAcquireOptions): Promise<Leadership>;
  /**
   * Lead the election `name` as a loop: campaign; when elected run
   * `task(term)`; when it returns, resign and campaign again. Returns at once;
   * `await loop.stop()` stops it. Throws `InvalidArgument` on bad input.
   */
  lead(name: string, task: (term: Term) => unknown, options?: LeadOptions): LeaderLoop;
  /** The current leader of `name`, or null. */
  leader(name: string): Promise<Leader | null>;
  /** Leadership changes of `name` (null: no leader), the current state first; ends when `signal` aborts. */
  observe(name: string, options?: { signal?: AbortSignal }): AsyncGenerator<Leader | null, void, undefined>;
  /** Holders and waiters of `name`, whatever kind of lock it is. */
  status(name: string): Promise<LockStatus>;
  /** Every lock under `prefix` (default: all), sorted by name, from one read. */
  list(prefix?: string): Promise<LockStatus[]>;
  /** Cycles of clients waiting on each other under `prefix` (default: all), from one read: `etcdlock deadlocks`. */
  deadlocks(prefix?: string): Promise<Deadlocks>;
  /** Every hold and wait of `name` etcd's history keeps, or those of the last `since` ms: `etcdlock history`. */
  history(name: string, options?: { since?: number }): Promise<History>;
  /** Free a wedged holder: delete the hold of `name` with fencing token `token`; false if none has it. */
  release(name: string, token: bigint | number): Promise<boolean>;
  /** Free a wedged permit: delete the permit of the semaphore `name` whose id (its `fencingToken`) is `id`; false if none has it. */
  releasePermit(name: string, id: bigint | number): Promise<boolean>;
  /**
   * Open the count-down latch `name` with `count` (1 .. 2**31; created if absent, else every opener must give
   * the same count: `InvalidArgument`). Close it when done.
   */
  latch(name: string, count: number): Promise<Latch>;
  /**
   * Open the one-shot barrier `name` for `parties` parties (1 .. 2**31; every opener must give the same number:
   * `InvalidArgument`). Close it when done.
   */
  barrier(name: string, parties: number): Promise<Barrier>;
  /**
   * Revoke the lease (releases every lock: their `lost` resolves `ClientClosed`) and close the connection to
   * etcd. Every pending `lock()` and recipe wait on this client rejects with code `Closed` at once. Settles
   * within `requestTimeout`, whatever etcd does. Idempotent.
   */
  close(): Promise<void>;
  /** Same as `close()`; used by `await using`. */
  [Symbol.asyncDispose](): Promise<void>;
}
