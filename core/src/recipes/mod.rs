//! The recipes built on the engine: mutex, read-write lock, semaphore,
//! multi-lock, election and its leader loop, latch and barrier, run-once,
//! and reentrant holds. Each is the keys it writes and the rule for whose
//! turn it is; the engine does the queueing and the waiting.
//!
//! It may call: engine, client, session, transport, watch, guard, names,
//! options, meta, metrics, error. Nothing below it names a recipe.

pub(crate) mod election;
pub(crate) mod leader;
pub(crate) mod multi;
pub(crate) mod mutex;
pub(crate) mod once;
pub(crate) mod reentry;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
pub(crate) mod sync;

use crate::client::Client;
use crate::engine::delay::{self, Records};

/// Convenience calls on [`Client`]: each a one-line delegation.
impl Client {
    /// The lock-delay record keys of `name` (status reads them).
    pub(crate) fn delay_records(&self, name: &str) -> Records {
        delay::delay_records(self, name)
    }
}
