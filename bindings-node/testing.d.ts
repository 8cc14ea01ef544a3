import type { Client, ConnectOptions, Lock, LossReasonName, MemStore, MultiLock } from './index';

/**
 * What `memStore(t)` takes as a test context: node:test's `TestContext`
 * (its `after()`) or Vitest's test context (its `onTestFinished()`).
 */
export type TestContextLike =
  | { after(fn: () => Promise<void>): unknown }
  | { onTestFinished(fn: () => Promise<void>): unknown };

/** How `lose()` makes a hold be lost: see `MemFixture.lose`. */
export type LoseHow = 'expire' | 'delete' | 'stall';

/**
 * A fresh in-process store for one test, and the clients it connected. Get
 * one from `memStore()` or `withMemStore()`; `close()` (or `await using`)
 * ends every silence and stall and closes its clients.
 */
export declare class MemFixture implements AsyncDisposable {
  private constructor();
  /** The store and its fault controls (`expireLease`, `deleteKey`, `silence`, `stall`, `resume`, `keys`). */
  readonly store: MemStore;
  /** `mem://NAME`: what a client gives as its endpoint to reach the store. */
  readonly endpoint: string;
  /** `[endpoint]`, for code under test that takes `endpoints`. */
  readonly endpoints: string[];
  /** A client connected to the store (`Client.connect`'s options but `endpoints`), closed by `close()`. */
  client(options?: Omit<ConnectOptions, 'endpoints'>): Promise<Client>;
  /**
   * Make `lock`'s hold be lost and wait until its holder has seen the loss:
   * `'expire'` (default) ends its lease (`'LeaseExpired'`), `'delete'` deletes
   * its key (`'KeyDeleted'`), `'stall'` answers nothing to its client until
   * the loss (`'ConnectionLost'`, within the client's TTL). Resolves what
   * `lock.lost` resolves; rejects `Timeout` after `within` ms (default
   * 60 000), `InvalidArgument` if the lock is not held in this store.
   */
  lose(lock: Lock, how?: LoseHow, options?: { within?: number }): Promise<LossReasonName>;
  lose(lock: MultiLock, how?: LoseHow, options?: { within?: number }): Promise<{ name: string; reason: LossReasonName }>;
  /**
   * A holder as `client.status(name).holders` lists it, for code under test
   * that keeps its Lock to itself: resolves once the store has acted (a
   * stall lasts until `store.resume()` or `close()`); the test then awaits
   * what the code does about the loss.
   */
  lose(holder: { key: string; leaseId: bigint }, how?: LoseHow): Promise<void>;
  /** End every silence and stall, close every client `client()` made. Idempotent. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * A fresh store (a name of its own) for one test. With a test context `t`
 * (node:test's `t`, Vitest's test context) it is closed after the test;
 * without one, close it yourself (`afterEach`, `await using`).
 */
export function memStore(t?: TestContextLike): MemFixture;

/** Run `fn(mem)` with a fresh store and close it afterwards, whatever happens; resolves `fn`'s result. */
export function withMemStore<T>(fn: (mem: MemFixture) => T | Promise<T>): Promise<T>;
