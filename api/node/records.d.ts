export interface Contender {
  key: string;
  kind: 'exclusive' | 'reader' | 'permit';
  permits: number | null;
  holds: boolean;
  leaseId: bigint;
  ttlRemaining: number | null;
  fencingToken: bigint;
  owner: string | null;
  ageMs: number | null;
  value: Buffer;
  host: string | null;
  pid: number | null;
  language: string | null;
  localWaiters: number | null;
  metadata: Record<string, string>;
  foreign: boolean;
}
export interface LockStatus {
  name: string;
  kind: 'mutex' | 'election' | 'semaphore' | 'rwlock' | null;
  revision: bigint;
  holders: Contender[];
  waiters: Contender[];
}
export interface Party {
  leaseId: bigint;
  owner: string | null;
  host: string | null;
  pid: number | null;
  language: string | null;
}
export interface WaitEdge {
  waiter: Party;
  name: string;
  waiterKey: string;
  holder: Party;
  holderKey: string;
  fencingToken: bigint;
  waiterRevision: bigint;
}
export interface Deadlocks {
  prefix: string;
  revision: bigint;
  clients: number;
  waits: number;
  cycles: { edges: WaitEdge[] }[];
}
export interface HistoryEntry {
  key: string;
  kind: 'exclusive' | 'reader' | 'permit';
  permits: number | null;
  leaseId: bigint;
  fencingToken: bigint;
  owner: string | null;
  host: string | null;
  pid: number | null;
  language: string | null;
  queuedMs: number;
  grantedRevision: bigint | null;
  grantedMs: number | null;
  endedRevision: bigint | null;
  endedMs: number | null;
  ended: 'released' | 'lease_ended' | 'abandoned' | 'holding' | 'waiting';
  waitMs: number;
  holdMs: number | null;
}
export interface History {
  name: string;
  revision: bigint;
  fromRevision: bigint;
  readMs: number;
  entries: HistoryEntry[];
}
export interface Metrics {
  acquisitions: Record<'acquired' | 'timeout' | 'would_block' | 'cancelled' | 'error', { count: number; waitMs: number }>;
  waiting: number;
  held: number;
  heldMs: number;
  holdsEnded: number;
  holdMs: number;
  lost: Record<'LeaseExpired' | 'KeyDeleted' | 'ConnectionLost' | 'ClientClosed', number>;
  keepalives: number;
  keepaliveRttMs: number | null;
  waitHistogram: Record<'acquired' | 'timeout' | 'would_block' | 'cancelled' | 'error', number[]>;
  memberFailures: number;
}
