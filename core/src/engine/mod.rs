//! The acquisition engine: what every recipe that queues a key in etcd goes
//! through. Admission into the client (a bounded number of acquisitions in
//! flight, a local queue per name), the session, the Txn that queues the key,
//! the wait by a rule that says whose turn it is, the lock-delay gate, and the
//! cleanup of a key whose wait ended without a hold.
//!
//! It may call: client, session, transport, watch, guard, names, options,
//! meta, metrics, error. It never names a recipe: recipes give it their
//! differences as data. Its functions take the `&Client` they work for;
//! none is a method of `Client` (the client stays a handle: connection,
//! options, session, close). `pipeline.rs` is the one path from a recipe's
//! `Request` to the Txn that queues its key (check, admission, session,
//! the lease-not-found retry, the queue Txn and `run_detached`, which
//! sends it), `admission.rs` the admission and the local queue per name,
//! `acquisition.rs` the acquisition as a value, its Txns and the guard it
//! grants, `waiter.rs` the wait engine's one loop (a driver says whose turn
//! it is; the loop owns the ends of every wait: close, cancel, deadline,
//! loss), `rule.rs` an acquisition's wait on it (and the reading rule of
//! the semaphore and read lock), `turn.rs` the mutex's driver (a handoff
//! costs no read), `delay.rs` the lock-delay gate (a driver too; the latch
//! and barrier in recipes/sync.rs are others), `wait.rs` the pending key,
//! its cleanup and the errors a wait ends with, `keys.rs` the key helpers
//! shared with the guard, `cycle.rs` the opt-in deadlock check of a wait
//! (through `waitgraph`).

pub(crate) mod acquisition;
pub(crate) mod admission;
pub(crate) mod cycle;
pub(crate) mod delay;
pub(crate) mod keys;
pub(crate) mod pipeline;
pub(crate) mod queue;
pub(crate) mod rule;
pub(crate) mod turn;
pub(crate) mod wait;
pub(crate) mod waiter;
