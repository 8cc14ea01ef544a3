//! Waiting for a key of ours to become a hold: the pieces every acquisition
//! shares (the mutex, the read-write lock, the semaphore, the multi-lock).
//! Below all of them, above the client, the session and the watch hub:
//!
//! - [`Pending`]: our key while it is not a held lock yet, deleted (after the
//!   acquire Txn's outcome is known) when the acquisition is abandoned;
//! - the acquire Txn, carried on by the cleanup if the caller gives up, is
//!   sent by [`run_detached`](crate::engine::pipeline::run_detached) (pipeline.rs);
//! - [`end_wait`]: the error each end of an acquisition's wait is
//!   ([`Interrupt`], of the wait engine in waiter.rs).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::TxnResponse;

use crate::client::cleanups::{CleanupTicket, CLEANUP_GRACE};
use crate::client::Client;
use crate::engine::waiter::Interrupt;
use crate::error::{Error, ErrorCode, LossReason};
use crate::guard::keys::{delete_until_gone, why_deleted};
use crate::names::{lost_err, show};
use crate::session::{Loss, Session};
use crate::transport::Answer;

/// An acquire request in flight.
pub(crate) type InFlight = std::pin::Pin<Box<dyn Future<Output = Answer<TxnResponse>> + Send>>;

/// Our key while it is not a held lock yet. If the acquisition is abandoned
/// (timeout, cancel, error, or the future dropped) the key is deleted *after*
/// the acquire Txn's outcome is known, so a Txn still in flight can never
/// land after the delete and leave a ghost that blocks the queue for as long
/// as this client lives (jetcd issue 291; seen in Node with `timeout: 0`).
pub(crate) struct Pending {
    client: Client,
    session: Arc<Session>,
    pub(crate) key: Vec<u8>,
    /// The acquire Txn while in flight: polled by the caller, and carried on by
    /// the cleanup when the caller gives up, so the cleanup learns its outcome.
    pub(crate) txn: Option<InFlight>,
    pub(crate) uncertain: bool,
    pub(crate) watches: Vec<i64>,
    pub(crate) armed: bool,
    /// More keys written by the same Txn (a multi-lock), cleaned up with ours.
    pub(crate) extra: Vec<Vec<u8>>,
    /// The create_revision of our key, and of the extra keys, once the acquire
    /// Txn's answer told it: the cleanup then deletes that incarnation in one
    /// request, with no read first.
    pub(crate) revs: (Option<i64>, Option<i64>),
}

/// What an acquire Txn's answer says of our keys' create_revision: all of
/// them were created at its revision if it succeeded (every acquire Txn
/// creates its keys in the success branch); else ours if the failure branch
/// read it.
pub(crate) fn created_revisions(resp: &TxnResponse, key: &[u8]) -> (Option<i64>, Option<i64>) {
    if resp.succeeded() {
        let rev = resp.header().map(|h| h.revision());
        return (rev, rev);
    }
    let ours = resp.op_responses().iter().find_map(|op| match op {
        etcd_client::TxnOpResponse::Get(g) => g
            .kvs()
            .iter()
            .find(|kv| kv.key() == key)
            .map(|kv| kv.create_revision()),
        _ => None,
    });
    (ours, None)
}

impl Pending {
    /// A key reserved on `session`, not written yet.
    pub(crate) fn new(client: &Client, session: &Arc<Session>, key: Vec<u8>) -> Pending {
        Pending {
            client: client.clone(),
            session: session.clone(),
            key,
            txn: None,
            uncertain: false,
            watches: Vec::new(),
            armed: true,
            extra: Vec::new(),
            revs: (None, None),
        }
    }

    /// Closing revoked the lease and our key with it: only stop the watches.
    pub(crate) fn closed(mut self) {
        self.armed = false;
        for w in self.watches.drain(..) {
            self.client.inner.hub.cancel(w);
        }
    }

    fn cleanup(&mut self) -> impl Future<Output = ()> + Send + 'static {
        self.armed = false;
        let client = self.client.clone();
        let session = self.session.clone();
        let key = std::mem::take(&mut self.key);
        let txn = self.txn.take();
        let mut uncertain = self.uncertain;
        let watches = std::mem::take(&mut self.watches);
        let (mut ours, mut extra_rev) = self.revs;
        let extra = std::mem::take(&mut self.extra);
        let tickets: Vec<CleanupTicket> = extra
            .iter()
            .chain(std::iter::once(&key))
            .map(|k| CleanupTicket::new(&client.inner.cleanups, k))
            .collect();
        async move {
            let _tickets = tickets;
            for w in watches {
                client.inner.hub.cancel(w);
            }
            if let Some(h) = txn {
                let Answer {
                    result: r,
                    uncertain: u,
                } = h.await;
                uncertain |= u;
                if let Ok(resp) = &r {
                    (ours, extra_rev) = created_revisions(resp, &key);
                }
            }
            for (k, rev) in extra
                .into_iter()
                .map(|k| (k, extra_rev))
                .chain(std::iter::once((key, ours)))
            {
                delete_until_gone(&client, &session, &k, rev, uncertain, &[]).await;
                session.release_key(&k);
            }
        }
    }

    /// Whether an attempt's outcome was never learnt.
    pub(crate) fn uncertain(&self) -> bool {
        self.uncertain
    }

    pub(crate) fn mark_uncertain(&mut self) {
        self.uncertain = true;
    }

    /// Hand the keys to the caller: nothing to clean up here any more.
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }

    /// Give up: delete our key, waiting for that at most [`CLEANUP_GRACE`]
    /// (the rest goes on in the background if etcd is slow or unreachable).
    pub(crate) async fn abandon(mut self) {
        let fut = self.cleanup();
        let h = self.client.inner.handle.spawn(fut);
        let _ = tokio::time::timeout(CLEANUP_GRACE, h).await;
    }

    /// Nothing of ours was written (a try that found the lock taken).
    pub(crate) fn forget(mut self) {
        self.armed = false;
        self.session.release_key(&self.key);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.armed {
            let fut = self.cleanup();
            self.client.inner.handle.clone().spawn(fut);
        }
    }
}

pub(crate) async fn pending_abandon(pending: &mut Pending) {
    let fut = pending.cleanup();
    let h = pending.client.inner.handle.spawn(fut);
    let _ = tokio::time::timeout(CLEANUP_GRACE, h).await;
}

pub(crate) fn cancelled(name: &str) -> Error {
    Error::new(
        ErrorCode::Cancelled,
        format!("lock {} cancelled while waiting", show(name)),
    )
}

pub(crate) fn closed_err(name: &str) -> Error {
    Error::new(
        ErrorCode::Closed,
        format!("lock {}: the client was closed while waiting", show(name)),
    )
}

pub(crate) fn timeout_err(name: &str, t: Option<Duration>) -> Error {
    Error::new(
        ErrorCode::Timeout,
        format!(
            "lock {} not acquired within {:?}",
            show(name),
            t.unwrap_or_default()
        ),
    )
}

/// [`timeout_err`] for a call whose time ran out in a request: says what etcd
/// did (`cause`, the transport's `Timeout`).
pub(crate) fn timeout_because(name: &str, t: Option<Duration>, cause: &Error) -> Error {
    Error::new(
        ErrorCode::Timeout,
        format!(
            "lock {} not acquired within {:?}: {}",
            show(name),
            t.unwrap_or_default(),
            cause.message()
        ),
    )
}

/// The error of a hold that ended (`Some`: lost) while `doing`.
pub(crate) fn hold_ended(name: &str, l: Option<Loss>, doing: &str) -> Error {
    match l {
        Some(l) => lost_err(name, l.reason, &format!("the hold ended while {doing}")),
        None => closed_err(name),
    }
}

/// The error an [`Interrupt`] is for the acquisition of `name`, after the
/// cleanup it needs (`what`: which of our keys, for a deleted own key).
pub(crate) async fn end_wait(
    client: &Client,
    i: Interrupt,
    name: &str,
    session: &Session,
    pending: Pending,
    timeout: Option<Duration>,
    what: &str,
) -> Error {
    match i {
        Interrupt::Closed => {
            pending.closed();
            closed_err(name)
        }
        Interrupt::Cancelled => {
            pending.abandon().await;
            cancelled(name)
        }
        Interrupt::Deadline => {
            pending.abandon().await;
            timeout_err(name, timeout)
        }
        // The session's end takes our key with it (or will): the pending
        // key's drop cleans up what is left.
        Interrupt::SessionLost(l) if l.reason == LossReason::ClientClosed => closed_err(name),
        Interrupt::SessionLost(l) => lost_err(name, l.reason, "the session ended while waiting"),
        Interrupt::HoldEnded(l) => hold_ended(name, l, "waiting"),
        Interrupt::OwnDeleted => {
            let reason = why_deleted(client, session).await;
            lost_err(
                name,
                reason,
                &format!("our {what} key was deleted while waiting"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_ends_a_wait_has_its_own_code_and_names_the_lock() {
        let cases = [
            (cancelled("jobs"), ErrorCode::Cancelled),
            (closed_err("jobs"), ErrorCode::Closed),
            (
                timeout_err("jobs", Some(Duration::from_secs(2))),
                ErrorCode::Timeout,
            ),
        ];
        for (e, code) in cases {
            assert_eq!(e.code(), code, "{e}");
            assert!(e.message().starts_with("lock \"jobs\""), "{e}");
        }
        assert_eq!(
            timeout_err("jobs", Some(Duration::from_secs(2))).message(),
            "lock \"jobs\" not acquired within 2s"
        );
    }

    #[test]
    fn a_timeout_in_a_request_says_what_etcd_did() {
        let cause = Error::new(ErrorCode::Timeout, "no answer from http://127.0.0.1:2379");
        let e = timeout_because("jobs", Some(Duration::from_millis(500)), &cause);
        assert_eq!(e.code(), ErrorCode::Timeout);
        assert_eq!(
            e.message(),
            "lock \"jobs\" not acquired within 500ms: no answer from http://127.0.0.1:2379"
        );
    }
}
