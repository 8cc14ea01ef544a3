//! Reentrancy by an explicit owner (Java's `ReentrantLock` per thread,
//! Redisson's `RLock`): a lock taken with [`Client::lock_reentrant`] by an
//! owner is taken again by the same owner at once, without a request, as
//! another handle of the same hold (same key, same fencing token); the hold
//! ends when its last handle is unlocked or dropped. The owner is whatever
//! the caller says it is: a thread id (Python's sync API), a task
//! (asyncio), an async context (Node), a lock object on a thread (Java's
//! `EtcdLock`, which ends a lost hold by unlocking its handles), a number
//! (Rust, C).
//!
//! Invariants (guarded by `tests/reentry.rs`):
//! - a lost hold is never re-entered: the re-entry fails with `LockLost`
//!   until every handle of the lost hold is unlocked or dropped;
//! - other owners, and plain `lock` calls, queue behind the hold as usual;
//! - the table keeps holds weakly: it never keeps a lock held;
//! - with [`crate::LockOptions::detect_deadlock`], an owner whose wait would
//!   close a cycle of owners of this client (owner 1 holds x and waits for
//!   y, owner 2 holds y and asks for x) fails at once with `Deadlock`: etcd
//!   sees one lease there, so [`Client::deadlocks`] cannot; only the client
//!   can, and only for the holds it knows the owner of (reentrant ones).

use crate::client::owners::OwnerWait;
use crate::client::Client;
use crate::error::{Error, ErrorCode, Result};
use crate::guard::Guard;
use crate::names::validate_name;
use crate::options::LockOptions;

/// The body of [`Client::lock_reentrant`].
pub(crate) async fn lock_reentrant(
    client: &Client,
    name: &str,
    owner: u64,
    opts: LockOptions,
) -> Result<Guard> {
    validate_name(name)?;
    let prefix = crate::engine::keys::prefix(client, name);
    if let Some(r) = crate::guard::reentry::reenter(&client.inner.reentry, &prefix, owner) {
        return r;
    }
    let owners = &client.inner.reentry;
    let mark = owners
        .wait_unless_cycle(owner, &prefix, opts.detect_deadlock)
        .map_err(|cycle| local_deadlock(client, name, &cycle))?;
    let g = client.lock_with(name, opts).await;
    drop(mark);
    let g = g?;
    crate::guard::reentry::remember(owners, prefix, owner, &g);
    Ok(g)
}

/// The `Deadlock` of owners of one client waiting on each other's holds.
fn local_deadlock(client: &Client, name: &str, cycle: &[OwnerWait]) -> Error {
    let ns = client.inner.ns.len();
    let waits: Vec<String> = cycle
        .iter()
        .map(|w| {
            let n = &w.prefix[ns.min(w.prefix.len())..w.prefix.len().saturating_sub(1)];
            format!(
                "owner {} waits for \"{}\" held by owner {}",
                w.waiter,
                String::from_utf8_lossy(n),
                w.holder
            )
        })
        .collect();
    Error::new(
        ErrorCode::Deadlock,
        format!(
            "lock \"{name}\": waiting would close a cycle of owners of this client: {}",
            waits.join("; ")
        ),
    )
}

/// The body of [`Client::try_lock_reentrant`].
pub(crate) async fn try_lock_reentrant(
    client: &Client,
    name: &str,
    owner: u64,
    opts: LockOptions,
) -> Result<Guard> {
    validate_name(name)?;
    let prefix = crate::engine::keys::prefix(client, name);
    if let Some(r) = crate::guard::reentry::reenter(&client.inner.reentry, &prefix, owner) {
        return r;
    }
    let g = client.try_lock_with(name, opts).await?;
    crate::guard::reentry::remember(&client.inner.reentry, prefix, owner, &g);
    Ok(g)
}

/// A reentrant lock as a value: the lock `name` of a client, taken per
/// owner ([`Client::lock_reentrant`]).
#[derive(Clone, Debug)]
pub struct ReentrantLock {
    client: Client,
    name: String,
}

impl ReentrantLock {
    /// The reentrant lock `name` of `client` (nothing is sent until a call).
    pub fn new(client: &Client, name: impl Into<String>) -> ReentrantLock {
        ReentrantLock {
            client: client.clone(),
            name: name.into(),
        }
    }

    /// Take it for `owner`: [`Client::lock_reentrant`].
    pub async fn lock(&self, owner: u64, opts: LockOptions) -> Result<Guard> {
        lock_reentrant(&self.client, &self.name, owner, opts).await
    }

    /// One try for `owner`: [`Client::try_lock_reentrant`].
    pub async fn try_lock(&self, owner: u64, opts: LockOptions) -> Result<Guard> {
        try_lock_reentrant(&self.client, &self.name, owner, opts).await
    }
}
