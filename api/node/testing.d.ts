import type { Client, ConnectOptions, Lock, LossReasonName, MemStore, MultiLock } from './index';
export type TestContextLike =
  | { after(fn: () => Promise<void>): unknown }
  | { onTestFinished(fn: () => Promise<void>): unknown };
export type LoseHow = 'expire' | 'delete' | 'stall';
export declare class MemFixture implements AsyncDisposable {
  private constructor();
  readonly store: MemStore;
  readonly endpoint: string;
  readonly endpoints: string[];
  client(options?: Omit<ConnectOptions, 'endpoints'>): Promise<Client>;
  lose(lock: Lock, how?: LoseHow, options?: { within?: number }): Promise<LossReasonName>;
  lose(lock: MultiLock, how?: LoseHow, options?: { within?: number }): Promise<{ name: string; reason: LossReasonName }>;
  lose(holder: { key: string; leaseId: bigint }, how?: LoseHow): Promise<void>;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}
export function memStore(t?: TestContextLike): MemFixture;
export function withMemStore<T>(fn: (mem: MemFixture) => T | Promise<T>): Promise<T>;
