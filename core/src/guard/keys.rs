//! Helpers on our own lock key, below both the engine (waiting) and the
//! guard (holding), like etcd's `key.go` serves `mutex.go` and
//! `election.go`: delete-until-gone with the client's deadline rules, the
//! watch on our own key that passes from waiter to guard, and why a key
//! went away.

use crate::poison::Locked;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::client::Client;
use crate::error::{ErrorCode, LossReason, Result};
use crate::session::{Loss, OnLoss, Session};
use crate::watch::{Sink, WatchEvent};

/// Delete our key `key` while it is the incarnation created at `rev`, so
/// that a delete reaching etcd late (a request buffered in a member that was
/// paused, which gRPC's deadline does not cut off: the server counts it from
/// when it reads the request) can never remove a later key of the same name
/// (a session reuses its key names, so that their watches are reused).
/// Ok(true) if it deleted that incarnation (or, on a retry, an earlier attempt
/// of this same call did: see `earlier_copy_deleted`), Ok(false) if it was gone.
///
/// `plain`, the caller the only one deleting this incarnation (the unlock
/// that ended the hold), a key this session has reserved
/// ([`Session::reserve_key`]) and no records with it: a plain DeleteRange (with the deleted key's create_revision back,
/// to tell whether it was `rev`), and if any attempt of it may still be on its
/// way (an attempt cut off, failed or retried: its outcome unknown), the key
/// name is retired ([`Session::retire_key`]): this session never makes that
/// key again, so the late copy finds nothing of ours but the incarnation it
/// was sent for. Why not a Txn comparing the revision each time: etcd 3.4
/// applies every Txn on a copy of its uncommitted writes (the backend's read
/// buffer, up to 100 ms of writes), a DeleteRange without it: with many
/// clients, that copy is most of an acquisition's cost to etcd, and etcd's Go
/// Mutex unlocks with a plain Delete (`bench/breadth.sh` compares etcd's CPU
/// per acquisition with Go's). Anything else (cleanups and expiries, which may run beside
/// another delete of the key, records to delete with it, a key not reserved
/// here): one Txn comparing the create_revision, safe whoever else deletes.
pub(crate) async fn delete_incarnation(
    client: &Client,
    session: &Session,
    key: &[u8],
    rev: i64,
    with: &[Vec<u8>],
    plain: bool,
) -> Result<bool> {
    let t = &client.inner.transport;
    if plain && with.is_empty() && session.is_reserved(key) {
        let k = key.to_vec();
        let mut attempts = 0u32;
        // Boxed, as `Client::call` does: a request's future is several KB, and
        // inline it would enlarge Guard::unlock's future, and with it every
        // future that locks and then unlocks, for the whole wait
        // (`a_waiters_futures_carry_no_request_inline` in mutex.rs bounds it).
        let answer = Box::pin(t.call(t.request_bound(), |mut c| {
            attempts += 1;
            let k = k.clone();
            async move {
                c.delete(k, Some(etcd_client::DeleteOptions::new().with_prev_key()))
                    .await
            }
        }))
        .await;
        let (r, uncertain) = (answer.result, answer.uncertain);
        if uncertain || attempts != 1 || r.is_err() {
            session.retire_key(key);
        }
        if r?
            .prev_kvs()
            .first()
            .is_some_and(|kv| kv.create_revision() == rev)
        {
            return Ok(true);
        }
        return Ok(attempts > 1 && uncertain && earlier_copy_deleted(client, session).await);
    }
    let ops = std::iter::once(key)
        .chain(with.iter().map(Vec::as_slice))
        .map(|k| etcd_client::TxnOp::delete(k.to_vec(), None));
    let txn = etcd_client::Txn::new()
        .when([etcd_client::Compare::create_revision(
            key.to_vec(),
            etcd_client::CompareOp::Equal,
            rev,
        )])
        .and_then(ops.collect::<Vec<_>>());
    let mut attempts = 0u32;
    let answer = Box::pin(t.call(t.request_bound(), |mut c| {
        attempts += 1;
        let txn = txn.clone();
        async move { c.txn(txn).await }
    }))
    .await;
    let (r, uncertain) = (answer.result?, answer.uncertain);
    Ok(r.succeeded()
        || (plain && attempts > 1 && uncertain && earlier_copy_deleted(client, session).await))
}

/// A retried delete found the key gone after an earlier attempt whose outcome
/// we never learned (a member stopping gracefully applies a request and closes
/// the stream before its answer: etcd's graceful stop, a rolling restart).
/// While the session's lease lives, nothing but a delete removes its key, and
/// this hold's own delete was on its way: the earlier copy deleted it, and the
/// hold ended by its own release, not by a loss. A lease that is gone, or
/// that cannot be asked about, leaves it a loss (`false`): unlock then says
/// `LockLost`, the safe answer when we cannot tell. (An operator deleting the
/// key by hand at that same moment is taken for our own delete.)
async fn earlier_copy_deleted(client: &Client, session: &Session) -> bool {
    if session.loss().is_some() {
        return false;
    }
    let r = lease_ttl(client, session).await;
    matches!(r, Ok(ttl) if ttl > 0)
}

/// The create_revision of our key as etcd has it now (None: absent).
async fn current_incarnation(client: &Client, key: &[u8]) -> Result<Option<i64>> {
    let t = &client.inner.transport;
    let k = key.to_vec();
    let r = Box::pin(t.call(t.request_bound(), |mut c| {
        let k = k.clone();
        async move {
            c.get(k, Some(etcd_client::GetOptions::new().with_keys_only()))
                .await
        }
    }))
    .await
    .result?;
    Ok(r.kvs().first().map(|kv| kv.create_revision()))
}

/// Delete one of our keys, retrying until it is gone or our lease (and with it
/// the key) is gone anyway. `rev`: the create_revision of the incarnation to
/// delete, if known (else it is read first). Every delete is a Txn
/// conditional on that revision ([`delete_incarnation`]). `uncertain`: a write of ours to
/// this key may still be in flight (an attempt whose outcome we never learnt),
/// so look once more after it should have landed, and delete what it created.
/// The key stays reserved in the session until this returns.
pub(crate) async fn delete_until_gone(
    client: &Client,
    session: &Session,
    key: &[u8],
    rev: Option<i64>,
    uncertain: bool,
    with: &[Vec<u8>],
) {
    let t = &client.inner.transport;
    let mut backoff = Duration::from_millis(50);
    let mut rounds = if uncertain { 2 } else { 1 };
    let mut rev = rev;
    loop {
        let step = match rev {
            Some(r) => delete_incarnation(client, session, key, r, with, false)
                .await
                .map(|_| true),
            None => current_incarnation(client, key).await.map(|found| {
                rev = found;
                found.is_none()
            }),
        };
        match step {
            Ok(true) => {
                rev = None;
                rounds -= 1;
                if rounds == 0 {
                    return;
                }
                // A late attempt is normally cut off by gRPC after the request
                // timeout; look once more after that.
                tokio::time::sleep(t.request_timeout + Duration::from_millis(100)).await;
                continue;
            }
            // Read it: now delete that incarnation.
            Ok(false) => continue,
            // Denied or refused for good (RBAC, auth): retrying cannot help, and
            // nothing of ours was written where we may not write.
            Err(e) if !matches!(e.code(), ErrorCode::Unavailable | ErrorCode::Timeout) => {
                tracing::debug!(error = %e, "deleting lock key refused; giving up");
                return;
            }
            Err(e) => tracing::debug!(error = %e, "deleting lock key; retrying"),
        }
        if session.loss().is_some()
            && Instant::now() > session.deadline() + Duration::from_secs(session.ttl as u64)
        {
            return; // the lease has certainly expired on the server; the key went with it
        }
        if client.inner.closed.is_cancelled() {
            return; // closing revoked the lease
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

/// Our session's lease's TTL as etcd has it now (one request, under the
/// client's request bound): `<= 0` once etcd expired the lease.
async fn lease_ttl(client: &Client, session: &Session) -> Result<i64> {
    let lease = session.lease;
    let r = Box::pin(
        client
            .inner
            .transport
            .call_lease(client.request_bound(), |mut c| async move {
                c.time_to_live(lease, None).await
            }),
    )
    .await
    .result;
    r.map(|t| t.ttl())
}

/// Why our key went away: if etcd no longer knows our lease it was revoked or
/// expired (the keys of a lease go with it), and the whole session is lost;
/// otherwise someone deleted the key itself.
pub(crate) async fn why_deleted(client: &Client, session: &Session) -> LossReason {
    if let Some(l) = session.loss() {
        return l.reason;
    }
    let r = lease_ttl(client, session).await;
    match r {
        Ok(ttl) if ttl <= 0 => {
            session.mark_lost(LossReason::LeaseExpired);
            LossReason::LeaseExpired
        }
        _ => LossReason::KeyDeleted,
    }
}

/// An event about our own key, for the waiter that owns it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum OwnEvent {
    /// The watch is registered; deletes after this revision are reported.
    Created(i64),
    Deleted,
    Reset,
}

/// The watch on our own key. It is created when the key is (from its
/// create_revision on, so no delete is ever missed) and passes from the waiter
/// to the guard on acquisition: one watch id for the key's whole life.
pub(crate) struct OwnKeyWatch {
    waiter: Mutex<Option<mpsc::UnboundedSender<OwnEvent>>>,
    guard: Mutex<Option<Weak<dyn OwnKeyListener>>>,
}

/// The guard side of [`OwnKeyWatch`].
pub(crate) trait OwnKeyListener: OnLoss {
    fn key_watch_created(&self, rev: i64);
    fn key_deleted(&self);
    fn key_watch_reset(&self);
}

fn deliver(g: &dyn OwnKeyListener, ev: OwnEvent) {
    match ev {
        OwnEvent::Created(rev) => g.key_watch_created(rev),
        OwnEvent::Deleted => g.key_deleted(),
        OwnEvent::Reset => g.key_watch_reset(),
    }
}

/// A waiter's watch on its own key as the wait hands it to the guard: the
/// hub's watch id, the watch, and the events it received since.
pub(crate) type OwnWatch = (i64, Arc<OwnKeyWatch>, mpsc::UnboundedReceiver<OwnEvent>);

impl OwnKeyWatch {
    pub(crate) fn new() -> (Arc<OwnKeyWatch>, mpsc::UnboundedReceiver<OwnEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Arc::new(OwnKeyWatch {
                waiter: Mutex::new(Some(tx)),
                guard: Mutex::new(None),
            }),
            rx,
        )
    }

    pub(crate) fn sink(self: &Arc<Self>) -> Sink {
        let me = self.clone();
        Arc::new(move |ev| {
            let ev = match ev {
                WatchEvent::Created { rev } => OwnEvent::Created(rev),
                WatchEvent::Deleted { .. } => OwnEvent::Deleted,
                WatchEvent::Reset => OwnEvent::Reset,
            };
            if let Some(w) = me.waiter.locked().as_ref() {
                let _ = w.send(ev);
                return;
            }
            let g = me.guard.locked().as_ref().and_then(Weak::upgrade);
            if let Some(g) = g {
                deliver(&*g, ev);
            }
        })
    }

    /// Hand the watch to the guard; events the waiter had not consumed yet are
    /// replayed to it.
    pub(crate) fn hand_over(
        &self,
        guard: Weak<dyn OwnKeyListener>,
        mut pending: mpsc::UnboundedReceiver<OwnEvent>,
    ) {
        *self.guard.locked() = Some(guard.clone());
        self.waiter.locked().take();
        if let Some(g) = guard.upgrade() {
            while let Ok(ev) = pending.try_recv() {
                deliver(&*g, ev);
            }
        }
    }
}

/// A loss, now (or at the session's deadline if that came first).
pub(crate) fn loss_now(session: &Session, reason: LossReason) -> Loss {
    Loss {
        reason,
        at: Instant::now().min(session.deadline()),
    }
}
