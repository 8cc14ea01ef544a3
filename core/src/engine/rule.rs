//! The wait engine of the semaphore and the read-write lock, as Curator's
//! `LockInternals` drives its recipes: the engine queues nothing and decides
//! nothing; a recipe's [`Rule`] reads the queue around our key and says
//! whether we may hold or which keys to wait behind, and the engine does the
//! rest the same way for every recipe: the watch on our own key (a waiter
//! whose key or session dies fails at once), the watches on the keys ahead
//! ([`wait_any_deleted`](crate::engine::wait::wait_any_deleted)), re-reads after etcd was unavailable, the
//! caller's deadline, cancel and close ([`WaitEnds`]), and the cleanup of
//! our key when the wait ends without the lock ([`Pending`]).
//!
//! The mutex keeps its own wait ([`Acquisition::wait_turn`]): it steps a
//! known queue forward on deletes and looks one key ahead, so a handoff
//! costs no read; its rule (wait behind the one key just older than ours)
//! is the semaphore's with one permit.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::acquisition::Acquisition;
use crate::engine::keys::{why_deleted, OwnKeyWatch};
use crate::engine::wait::{self, timeout_err, Pending, Recheck, WaitEnds};
use crate::error::{ErrorCode, Result};
use crate::guard::Guard;
use crate::names::{lost_err, Mode};
use crate::runtime::sleep_opt;
use crate::session::Session;

/// What one read of the queue says to a waiter.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Turn {
    /// The revision of the read (the keys' watches start after it).
    pub(crate) rev: i64,
    /// The keys to wait behind: the delete of any one may let us hold.
    /// Empty: we may hold now.
    pub(crate) behind: Vec<Vec<u8>>,
    /// The key [`Guard::waited_on`] names for this wait, if the recipe names one.
    pub(crate) blocker: Option<Vec<u8>>,
}

/// A recipe's rule for who may hold.
pub(crate) trait Rule {
    /// Read the queue around our key: our [`Turn`]. An error with code
    /// `LockLost` says our key is gone; any other error ends the wait as it
    /// is (with the recipe's context), after `Unavailable` was retried while
    /// the call may wait.
    fn read(&self) -> impl Future<Output = Result<Turn>> + Send;
}

impl Acquisition<'_> {
    /// Wait on `session` with our key (`pending`, created at `my_rev`) until
    /// `rule` says we may hold. `role` names our key in errors ("waiter",
    /// "reader").
    pub(crate) async fn wait_by<R: Rule + Sync>(
        &self,
        session: &Arc<Session>,
        mut pending: Pending,
        my_rev: i64,
        rule: &R,
        role: &str,
    ) -> Result<Guard> {
        let (client, name, timeout) = (self.client, self.name, self.timeout);
        let deadline = self.deadline();
        let key = pending.key.clone();
        let hub = &client.inner.hub;
        let (own, mut own_rx) = OwnKeyWatch::new();
        let mut own_id = hub.watch(key.clone(), my_rev, own.sink());
        pending.watches.push(own_id);
        let mut own_reset = false;
        let closed = client.inner.closed.clone();
        let mut waited_on: Vec<Vec<u8>> = Vec::new();
        loop {
            let turn = match rule.read().await {
                Ok(t) => t,
                Err(e) if e.code() == ErrorCode::LockLost => {
                    let reason = why_deleted(client, session).await;
                    let why = format!("our {role} key was deleted while waiting");
                    return Err(lost_err(name, reason, &why));
                }
                Err(e)
                    if e.code() == ErrorCode::Unavailable
                        && session.alive()
                        && self.mode == Mode::Wait =>
                {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
                        _ = sleep_opt(deadline) => {
                            pending.abandon().await;
                            return Err(timeout_err(name, timeout));
                        }
                    }
                }
                Err(e) => {
                    pending.abandon().await;
                    return Err(e);
                }
            };
            if own_reset {
                // etcd dropped the watch on our key (compaction): watch it
                // again from this read.
                pending.watches.retain(|w| *w != own_id);
                own_id = hub.watch(key.clone(), turn.rev, own.sink());
                pending.watches.push(own_id);
                own_reset = false;
            }
            if turn.behind.is_empty() {
                pending.watches.retain(|w| *w != own_id);
                let own = Some((own_id, own, own_rx));
                return Ok(crate::engine::acquisition::held(
                    client, name, session, pending, my_rev, waited_on, own,
                ));
            }
            if self.mode != Mode::Wait {
                pending.abandon().await;
                return Err(timeout_err(name, timeout));
            }
            if let Some(b) = turn.blocker {
                if waited_on.last() != Some(&b) {
                    waited_on.push(b);
                }
            }
            let ends = WaitEnds {
                closed: &closed,
                cancel: self.cancel,
                deadline,
                session,
            };
            let keys = &turn.behind;
            let woke = wait::wait_any_deleted(
                client,
                &mut pending,
                keys,
                turn.rev,
                &ends,
                &mut own_rx,
                || async {
                    // The watches started after our read: are these still
                    // the keys to wait behind? (one read)
                    matches!(rule.read().await, Ok(now) if now.behind == *keys)
                },
            )
            .await;
            match woke {
                Ok(Recheck::OwnReset) => own_reset = true,
                Ok(Recheck::Changed) => {}
                Err(i) => {
                    let e = wait::end_wait(client, i, name, session, pending, timeout, role).await;
                    return Err(e);
                }
            }
        }
    }
}
