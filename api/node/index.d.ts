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
export * from './options';
export * from './records';
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
export type LossReasonName = 'LeaseExpired' | 'KeyDeleted' | 'ConnectionLost' | 'ClientClosed';
export declare const ErrorCode: { readonly [K in ErrorCodeName]: K };
export declare const LossReason: { readonly [K in LossReasonName]: K };
export declare class LockError extends Error {
  readonly name: 'LockError';
  readonly code: ErrorCodeName;
  readonly errno: number;
  readonly reason?: LossReasonName;
  readonly retryable: boolean;
  constructor(code: ErrorCodeName, message: string, options?: { reason?: LossReasonName; retryable?: boolean; cause?: unknown });
}
export declare class Latch implements AsyncDisposable {
  private constructor();
  readonly name: string;
  readonly initial: number;
  countDown(): Promise<number>;
  count(): Promise<number>;
  wait(options?: WaitOptions): Promise<void>;
  close(): void;
  [Symbol.asyncDispose](): Promise<void>;
}
export declare class Barrier implements AsyncDisposable {
  private constructor();
  readonly name: string;
  readonly parties: number;
  wait(options?: WaitOptions): Promise<number>;
  close(): void;
  [Symbol.asyncDispose](): Promise<void>;
}
export interface Renewal {
  failing: boolean;
  validForMs?: number;
}
export declare class Lock implements AsyncDisposable {
  protected constructor();
  readonly name: string;
  readonly key: string;
  readonly leaseId: bigint;
  readonly fencingToken: bigint;
  readonly lost: Promise<LossReasonName>;
  readonly signal: AbortSignal;
  readonly isHeld: boolean;
  readonly state: 'held' | 'released' | LossReasonName;
  readonly renewal: Renewal;
  onRenewal(listener: (renewal: Renewal) => void): void;
  unlock(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
  put(key: string | Uint8Array, value: string | Uint8Array): Promise<void>;
  get(key: string | Uint8Array): Promise<Buffer | null>;
  get(key: string | Uint8Array, encoding: BufferEncoding): Promise<string | null>;
  delete(key: string | Uint8Array): Promise<boolean>;
}
export declare const MAX_PERMITS: number;
export declare const MAX_MULTI: number;
export declare class Leadership extends Lock {
  private constructor();
  proclaim(value: string | Uint8Array): Promise<void>;
  resign(): Promise<void>;
}
export interface LeadOptions extends AcquireOptions {
  value?: string | Uint8Array;
  again?: boolean;
  retry?: number;
  signal?: AbortSignal;
}
export declare class Term {
  private constructor();
  readonly signal: AbortSignal;
  readonly fencingToken: bigint;
  readonly leadership: Leadership;
}
export type LeaderLoopEvent =
  | { type: 'elected'; term: Term }
  | { type: 'renewalFailing' }
  | { type: 'renewalRecovered' }
  | { type: 'lost'; reason: LossReasonName }
  | { type: 'resigned' }
  | { type: 'leader'; leader: Leader | null }
  | { type: 'error'; error: unknown }
  | { type: 'stopped' };
export declare class LeaderLoop extends EventEmitter implements AsyncDisposable, AsyncIterable<LeaderLoopEvent> {
  private constructor();
  on(event: 'elected', listener: (term: Term) => void): this;
  on(event: 'renewalFailing' | 'renewalRecovered' | 'resigned' | 'stopped', listener: () => void): this;
  on(event: 'lost', listener: (reason: LossReasonName) => void): this;
  on(event: 'leader', listener: (leader: Leader | null) => void): this;
  on(event: 'error', listener: (error: unknown) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once(event: 'elected', listener: (term: Term) => void): this;
  once(event: 'lost', listener: (reason: LossReasonName) => void): this;
  once(event: 'leader', listener: (leader: Leader | null) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
  [Symbol.asyncIterator](): AsyncIterator<LeaderLoopEvent>;
}
export declare class MultiLock implements AsyncDisposable {
  private constructor();
  readonly names: string[];
  readonly keys: string[];
  readonly leaseId: bigint;
  readonly fencingTokens: bigint[];
  readonly lost: Promise<{ name: string; reason: LossReasonName }>;
  readonly signal: AbortSignal;
  readonly isHeld: boolean;
  readonly state: 'held' | 'released' | LossReasonName;
  readonly renewal: Renewal;
  onRenewal(listener: (renewal: Renewal) => void): void;
  put(key: string | Uint8Array, value: string | Uint8Array): Promise<void>;
  get(key: string | Uint8Array): Promise<Buffer | null>;
  get(key: string | Uint8Array, encoding: BufferEncoding): Promise<string | null>;
  delete(key: string | Uint8Array): Promise<boolean>;
  unlock(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}
export interface Leader {
  key: string;
  value: Buffer;
  revision: bigint;
  leaseId: bigint;
}
export declare class OnceHold {
  private constructor();
  readonly name: string;
  readonly revision: bigint;
  readonly lockedAt: Date;
  readonly lockUntil: Date;
  finish(options?: { atLeast?: number }): Promise<boolean>;
  extend(options: { atMost: number }): Promise<boolean>;
}
export declare class ReentrantLock {
  private constructor();
  readonly name: string;
  readonly holdCount: number;
  readonly isHeld: boolean;
  lock(options?: LockAcquireOptions): Promise<Lock>;
  tryLock(options?: AcquireOptions): Promise<Lock | null>;
  unlock(): Promise<void>;
  withLock<T>(fn: (lock: Lock) => T | Promise<T>, options?: LockAcquireOptions): Promise<T>;
}
export interface MemKey {
  key: string;
  value: Buffer;
  lease: bigint;
  createRevision: bigint;
  modRevision: bigint;
}
export declare class MemStore {
  private constructor();
  static open(name?: string): MemStore;
  readonly endpoint: string;
  readonly name: string;
  expireLease(leaseId: bigint): boolean;
  deleteKey(key: string | Uint8Array): boolean;
  silence(ms: number): void;
  stall(leaseId: bigint, ms: number): void;
  resume(): void;
  keys(prefix?: string | Uint8Array): MemKey[];
}
export declare class Client implements AsyncDisposable {
  private constructor();
  static connect(options?: ConnectOptions): Promise<Client>;
  metrics(): Metrics;
  prometheus(labels?: Record<string, string>): string;
  readonly ttl: number;
  readonly closed: boolean;
  lock(name: string, options?: LockAcquireOptions & ReentrantOption): Promise<Lock>;
  tryLock(name: string, options?: AcquireOptions & ReentrantOption): Promise<Lock | null>;
  withLock<T>(name: string, fn: (lock: Lock) => T | Promise<T>, options?: LockAcquireOptions & ReentrantOption): Promise<T>;
  reentrantLock(name: string): ReentrantLock;
  withPermit<T>(name: string, permits: number, fn: (permit: Lock) => T | Promise<T>, options?: LockAcquireOptions): Promise<T>;
  withReadLock<T>(name: string, fn: (lock: Lock) => T | Promise<T>, options?: LockAcquireOptions): Promise<T>;
  withLocks<T>(names: string[], fn: (locks: MultiLock) => T | Promise<T>, options?: LockOptions): Promise<T>;
  withLeadership<T>(name: string, value: string | Uint8Array, fn: (leadership: Leadership) => T | Promise<T>, options?: LockAcquireOptions): Promise<T>;
  takeOnce(name: string, options: { atMost: number }): Promise<OnceHold | null>;
  runOnce<T>(name: string, fn: () => T | Promise<T>, options: { atMost: number; atLeast?: number }): Promise<T | undefined>;
  ping(): Promise<number>;
  acquirePermit(name: string, permits: number, options?: LockAcquireOptions): Promise<Lock>;
  readLock(name: string, options?: LockAcquireOptions): Promise<Lock>;
  lockMany(names: string[], options?: LockOptions): Promise<MultiLock>;
  campaign(name: string, value: string | Uint8Array, options?: LockAcquireOptions): Promise<Leadership>;
  lead(name: string, task: (term: Term) => unknown, options?: LeadOptions): LeaderLoop;
  leader(name: string): Promise<Leader | null>;
  observe(name: string, options?: { signal?: AbortSignal }): AsyncGenerator<Leader | null, void, undefined>;
  status(name: string): Promise<LockStatus>;
  list(prefix?: string): Promise<LockStatus[]>;
  deadlocks(prefix?: string): Promise<Deadlocks>;
  history(name: string, options?: { since?: number }): Promise<History>;
  release(name: string, token: bigint | number): Promise<boolean>;
  releasePermit(name: string, id: bigint | number): Promise<boolean>;
  latch(name: string, count: number): Promise<Latch>;
  barrier(name: string, parties: number): Promise<Barrier>;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}
