//! An acquisition's wait behind the keys ahead, on the engine's one loop
//! (waiter.rs): [`Acquisition::wait_on`] watches our own key, runs a
//! [`Driver`] through [`wait_for`], and turns how the wait ended into a
//! guard or an error, after the cleanup of our key when the wait ends
//! without the lock ([`Pending`]). The semaphore and the read lock give a
//! [`Rule`] (one read of the queue, driven by [`ByRule`]); the mutex, the
//! election and the multi-lock give the stepping driver of turn.rs, with
//! which a handoff costs no read.

use std::future::Future;
use std::sync::Arc;

use crate::client::Client;
use crate::engine::acquisition::Acquisition;
use crate::engine::wait::{self, timeout_err, Pending};
/// Rules name their turn in the engine's terms.
pub(crate) use crate::engine::waiter::Turn;
use crate::engine::waiter::{
    any_deleted, drop_watches, wait_for, Driver, Own, OwnKey, Stop, WaitEnds, Waiter,
};
use crate::error::{ErrorCode, Result};
use crate::guard::keys::why_deleted;
use crate::guard::Guard;
use crate::names::{lost_err, Mode};
use crate::session::Session;

/// A recipe's rule for who may hold, by one read of the queue (the
/// semaphore, the read lock).
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
        pending: Pending,
        my_rev: i64,
        rule: &R,
        role: &str,
    ) -> Result<Guard> {
        let mut driver = ByRule {
            client: self.client,
            rule,
            live: Vec::new(),
        };
        self.wait_on(session, pending, my_rev, &mut driver, role)
            .await
    }

    /// Wait on `session` with our key (`pending`, created at `my_rev`)
    /// until `driver` says we may hold: the guard, or the error the wait
    /// ended with, after the cleanup of our key.
    pub(crate) async fn wait_on<D: Driver>(
        &self,
        session: &Arc<Session>,
        mut pending: Pending,
        my_rev: i64,
        driver: &mut D,
        role: &str,
    ) -> Result<Guard> {
        let (client, name, timeout) = (self.client, self.name, self.timeout);
        let mut own = OwnKey::watch(client, pending.key.clone(), my_rev, &mut pending.watches);
        let closed = client.inner.closed.clone();
        let mut w = Waiter {
            client,
            ends: WaitEnds {
                closed: &closed,
                cancel: Some(self.cancel),
                deadline: self.deadline(),
                session: Some(session),
            },
            own: Own::Key(&mut own),
            watches: &mut pending.watches,
            blockers: Vec::new(),
            may_wait: self.mode == Mode::Wait,
            cycle_check: self.detect_deadlock.then_some((name, my_rev)),
        };
        let r = wait_for(&mut w, driver).await;
        let blockers = std::mem::take(&mut w.blockers);
        drop(w);
        match r {
            Ok(turn) if turn.behind.is_empty() => {
                pending.watches.retain(|w| *w != own.id);
                let own = Some((own.id, own.sink, own.rx));
                Ok(crate::engine::acquisition::held(
                    client, name, session, pending, my_rev, blockers, own,
                ))
            }
            Ok(_) => {
                pending.abandon().await;
                Err(timeout_err(name, timeout))
            }
            Err(Stop::Failed(e)) if e.code() == ErrorCode::LockLost => {
                let reason = why_deleted(client, session).await;
                let why = format!("our {role} key was deleted while waiting");
                Err(lost_err(name, reason, &why))
            }
            Err(Stop::Failed(e)) => {
                pending.abandon().await;
                Err(e)
            }
            Err(Stop::End(i)) => {
                Err(wait::end_wait(client, i, name, session, pending, timeout, role).await)
            }
        }
    }
}

/// The driver of a [`Rule`]: read, then wait for any key behind to go.
pub(crate) struct ByRule<'r, R> {
    client: &'r Client,
    rule: &'r R,
    live: Vec<i64>,
}

impl<R: Rule + Sync> Driver for ByRule<'_, R> {
    async fn turn(&mut self, watches: &mut Vec<i64>) -> Result<Turn> {
        drop_watches(self.client, &mut self.live, watches);
        self.rule.read().await
    }

    async fn wake(&mut self, client: &Client, watches: &mut Vec<i64>, turn: &Turn) {
        let rule = self.rule;
        let unchanged = || async {
            // The watches started after our read: are these still the keys
            // to wait behind? (one read)
            matches!(rule.read().await, Ok(now) if now.behind == turn.behind)
        };
        any_deleted(client, watches, &mut self.live, turn, unchanged).await
    }
}
