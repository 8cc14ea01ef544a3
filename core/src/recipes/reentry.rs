//! Reentrancy by an explicit owner (Java's `ReentrantLock` per thread,
//! Redisson's `RLock`): a lock taken with [`Client::lock_reentrant`] by an
//! owner is taken again by the same owner at once, without a request, as
//! another handle of the same hold (same key, same fencing token); the hold
//! ends when its last handle is unlocked or dropped. The owner is whatever
//! the caller says it is: a thread id (Python's sync API), a task
//! (asyncio), an async context (Node), a number (Rust, C).
//!
//! Invariants (guarded by `tests/reentry.rs`):
//! - a lost hold is never re-entered: the re-entry fails with `LockLost`
//!   until every handle of the lost hold is unlocked or dropped;
//! - other owners, and plain `lock` calls, queue behind the hold as usual;
//! - the table keeps holds weakly: it never keeps a lock held.

use crate::client::Client;
use crate::error::Result;
use crate::guard::Guard;
use crate::names::validate_name;
use crate::options::LockOptions;

impl Client {
    /// [`Client::lock_with`], reentrant for `owner`: if `owner` holds `name`
    /// (taken with this method), another handle of that hold at once (no
    /// request; same key and fencing token); the lock is released when every
    /// handle is unlocked or dropped. A hold that was lost is not re-entered
    /// (`LockLost`, until its handles are unlocked or dropped). Other owners
    /// wait as for [`Client::lock_with`].
    pub async fn lock_reentrant(&self, name: &str, owner: u64, opts: LockOptions) -> Result<Guard> {
        validate_name(name)?;
        let prefix = self.prefix(name);
        if let Some(r) = self.inner.reentry.reenter(&prefix, owner) {
            return r;
        }
        let g = self.lock_with(name, opts).await?;
        self.inner.reentry.remember(prefix, owner, &g);
        Ok(g)
    }

    /// [`Client::try_lock_with`], reentrant for `owner` as
    /// [`Client::lock_reentrant`]: a re-entry never waits; another owner's
    /// hold is `WouldBlock`.
    pub async fn try_lock_reentrant(
        &self,
        name: &str,
        owner: u64,
        opts: LockOptions,
    ) -> Result<Guard> {
        validate_name(name)?;
        let prefix = self.prefix(name);
        if let Some(r) = self.inner.reentry.reenter(&prefix, owner) {
            return r;
        }
        let g = self.try_lock_with(name, opts).await?;
        self.inner.reentry.remember(prefix, owner, &g);
        Ok(g)
    }
}
