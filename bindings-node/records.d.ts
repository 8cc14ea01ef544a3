// Type definitions for etcdlock (Node.js binding of the etcdlock Rust core):
// the records core reports (status, list, metrics, deadlocks, history), as
// lib/status.js decodes them from core's one JSON encoding of each. index.d.ts
// re-exports every name here; import them from 'etcdlock'.
/// <reference types="node" />

/** One key in the queue of a name (`client.status()`). */
export interface Contender {
  key: string;
  kind: 'exclusive' | 'reader' | 'permit';
  /** The semaphore's permit count, for `'permit'`. */
  permits: number | null;
  /** Holds now (by its kind's rule), or waits. */
  holds: boolean;
  leaseId: bigint;
  /** Seconds left on its lease, if etcd reports it. */
  ttlRemaining: number | null;
  fencingToken: bigint;
  /** `host:pid` for etcdlock keys; null for etcdctl and Go keys. */
  owner: string | null;
  ageMs: number | null;
  value: Buffer;
  /** The holder's host and process id (etcdlock keys). */
  host: string | null;
  pid: number | null;
  /** The language its client uses etcdlock from ('node', 'python', ...), once its meta record is written (~100 ms). */
  language: string | null;
  /** Acquisitions of this name in progress in its client: its local queue (it keeps at most two keys per name in etcd). */
  localWaiters: number | null;
  /** The holder's `metadata` acquisition option (`{}` when none was given). */
  metadata: Record<string, string>;
  /** A key without etcdlock's owner info: etcdctl, Go's Mutex or Election. */
  foreign: boolean;
}

/** Holders and waiters of one name, as one read saw them. */
export interface LockStatus {
  name: string;
  /** What the name is used as, from the contenders' records or keys; null when they do not tell. */
  kind: 'mutex' | 'election' | 'semaphore' | 'rwlock' | null;
  revision: bigint;
  /** Oldest first. */
  holders: Contender[];
  /** In the order they will be served. */
  waiters: Contender[];
}

/** A client in a deadlock cycle: its lease and who it is, from its key. */
export interface Party {
  leaseId: bigint;
  /** `host:pid`, for etcdlock keys. */
  owner: string | null;
  host: string | null;
  pid: number | null;
  /** The language it uses etcdlock from ('node', 'java', ...). */
  language: string | null;
}

/** One wait of a cycle: `waiter` waits in `name` for `holder`. */
export interface WaitEdge {
  waiter: Party;
  name: string;
  /** The waiter's queued key (with the namespace). */
  waiterKey: string;
  holder: Party;
  holderKey: string;
  /** The holder's fencing token. */
  fencingToken: bigint;
  /** The waiter's key's create_revision: when its wait reached etcd. */
  waiterRevision: bigint;
}

/** The cycles of clients waiting on each other under a prefix, from one read (`client.deadlocks()`). */
export interface Deadlocks {
  prefix: string;
  revision: bigint;
  /** Clients with a key under the prefix. */
  clients: number;
  /** Queued keys that wait. */
  waits: number;
  /** One per group of clients waiting on each other (each edge's holder is the next edge's waiter, the last's the first's); empty: none. */
  cycles: { edges: WaitEdge[] }[];
}

/** One key queued on a name in its history: a wait, and the hold it became (`client.history()`). */
export interface HistoryEntry {
  key: string;
  kind: 'exclusive' | 'reader' | 'permit';
  permits: number | null;
  leaseId: bigint;
  /** Its create_revision: its fencing token if it held. */
  fencingToken: bigint;
  owner: string | null;
  host: string | null;
  pid: number | null;
  language: string | null;
  /** When it was queued (ms since the epoch, the key's own stamp). */
  queuedMs: number;
  grantedRevision: bigint | null;
  /** When it came to hold (ms since the epoch, estimated between stamps by revision). */
  grantedMs: number | null;
  endedRevision: bigint | null;
  endedMs: number | null;
  /** `released` (deleted while its lease lived on), `lease_ended` (gone with its lease), `abandoned` (deleted before it held), or still `holding`/`waiting`. */
  ended: 'released' | 'lease_ended' | 'abandoned' | 'holding' | 'waiting';
  waitMs: number;
  holdMs: number | null;
}

/** A name's history from etcd's MVCC history, back to etcd's compaction revision (`client.history()`). */
export interface History {
  name: string;
  /** The store revision of the read (the history ends there). */
  revision: bigint;
  /** The first revision replayed: etcd's compaction revision (or 1). */
  fromRevision: bigint;
  readMs: number;
  /** Oldest first. */
  entries: HistoryEntry[];
}

/** A snapshot of a client's metrics (`client.metrics()`); durations in ms. */
export interface Metrics {
  acquisitions: Record<'acquired' | 'timeout' | 'would_block' | 'cancelled' | 'error', { count: number; waitMs: number }>;
  /** Acquisition calls in progress. */
  waiting: number;
  /** Locks held now, and how long they have been held, summed. */
  held: number;
  heldMs: number;
  /** Holds that ended (released or lost), and their total time. */
  holdsEnded: number;
  holdMs: number;
  lost: Record<'LeaseExpired' | 'KeyDeleted' | 'ConnectionLost' | 'ClientClosed', number>;
  keepalives: number;
  /** The last keep-alive round trip, or null before the first. */
  keepaliveRttMs: number | null;
  /**
   * Acquisition calls per outcome by their wait: entry `i` counts the calls whose wait was at
   * most the `i`-th of core's buckets (1, 2.5, 5, 10, 25, 50, 100, 250, 500 ms, 1, 5, 30 s) and
   * above the one before; the last entry counts the calls beyond every bucket.
   */
  waitHistogram: Record<'acquired' | 'timeout' | 'would_block' | 'cancelled' | 'error', number[]>;
  /** Requests that failed on an etcd member (which the client then avoided for a while); 0 while every member answers. */
  memberFailures: number;
}
