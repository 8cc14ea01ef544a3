//! One acquisition as a value, as Go's `concurrency.Mutex` holds
//! `{session, prefix, key, rev}`: what a call waits for (`name`, its
//! `prefix`), how (`mode`), for how long (`bound`, `timeout`), what ends it
//! early (`cancel`) and what our key carries (`value`). Its steps are its
//! methods: [`Acquisition::queue`] (pipeline.rs) queues a key,
//! [`Acquisition::gate`] passes the lock-delay gate,
//! [`Acquisition::wait_turn`] (turn.rs) waits behind the keys ahead,
//! [`Acquisition::permit`] (semaphore.rs) takes one of N permits,
//! [`Acquisition::read`] (rwlock.rs) the read side. The session, and a
//! lock-delay lease, belong to one attempt: a call whose lease vanished
//! before it queued makes another attempt on a fresh session (pipeline.rs).
//! This file holds the value, the Txns it sends and the guard it grants.

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp};
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::engine::delay::{self, put_record, Gate, Records};
use crate::engine::queue::{kvs, more, revision, Queue, OLDER_READ};
use crate::engine::wait::{timeout_because, timeout_err, Pending};
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::guard::keys::OwnWatch;
use crate::guard::{Grant, Guard};
use crate::names::{prefix_end, show, Mode};
use crate::poison::Locked;
use crate::session::Session;
use crate::transport::Bound;

/// The Txn that queues our `key` carrying `value` on `lease` if it is
/// absent, else reads it: an earlier attempt of this very Txn may have
/// landed although its answer never came.
pub(crate) fn put_if_absent(key: &[u8], value: impl Into<Vec<u8>>, lease: i64) -> Txn {
    Txn::new()
        .when([Compare::create_revision(key.to_vec(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(
            key.to_vec(),
            value,
            Some(PutOptions::new().with_lease(lease)),
        )])
        .or_else([TxnOp::get(key.to_vec(), None)])
}

/// Our key's create_revision from [`put_if_absent`]'s answer: the Txn's
/// revision if it put the key, else the key's as read; `None` if the key is
/// not there at all (its lease vanished while we queued).
pub(crate) fn created_at(resp: &etcd_client::TxnResponse) -> Option<i64> {
    if resp.succeeded() {
        Some(revision(resp))
    } else {
        kvs(resp.op_responses().first())
            .first()
            .map(|kv| kv.create_revision())
    }
}

/// One call's acquisition of `name` (see the module doc).
pub(crate) struct Acquisition<'a> {
    pub(crate) client: &'a Client,
    pub(crate) name: &'a str,
    /// `name` + `/` under the client's namespace: where contenders put keys.
    pub(crate) prefix: Vec<u8>,
    pub(crate) mode: Mode,
    /// The call's one bound: its own deadline when it waits, else the
    /// request timeout (a try is one round trip plus failover).
    pub(crate) bound: Bound,
    /// The timeout the caller gave, for the errors that name it.
    pub(crate) timeout: Option<Duration>,
    pub(crate) cancel: &'a CancellationToken,
    /// What our key carries: an election's proclamation; `None`, who we are
    /// (for `etcdlock status`).
    pub(crate) value: Option<&'a [u8]>,
    /// What the errors call it: "lock", "semaphore", "read lock".
    pub(crate) what: &'static str,
    /// The call's admission among this client's acquisitions in progress,
    /// given back once etcd has answered the Txn that queues our key
    /// ([`Acquisition::queued`]).
    pub(crate) admission: std::sync::Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
    /// [`crate::LockOptions::detect_deadlock`].
    pub(crate) detect_deadlock: bool,
}

impl<'a> Acquisition<'a> {
    pub(crate) fn new(
        client: &'a Client,
        name: &'a str,
        mode: Mode,
        bound: Bound,
        timeout: Option<Duration>,
        cancel: &'a CancellationToken,
    ) -> Acquisition<'a> {
        Acquisition {
            client,
            name,
            prefix: crate::engine::keys::prefix(client, name),
            mode,
            bound,
            timeout,
            cancel,
            value: None,
            what: "lock",
            admission: std::sync::Mutex::new(None),
            detect_deadlock: false,
        }
    }

    /// Our key's Txn has been answered: the call is queued in etcd (or has
    /// failed), and its admission goes to the next call.
    pub(crate) fn queued(&self) {
        drop(self.admission.locked().take());
    }

    /// When a wait gives up (`None`: never, or not a wait).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self.bound {
            Bound::Wait(d) => d,
            Bound::Request(_) => None,
        }
    }

    /// `e` with the acquisition named in it.
    pub(crate) fn ctx(&self, e: Error) -> Error {
        e.context(format!("{} {}", self.what, show(self.name)))
    }

    /// An error of a step bounded by the call: a `Timeout` says which
    /// timeout ran out; anything else names the acquisition.
    pub(crate) fn bounded(&self, e: Error) -> Error {
        if e.code() == ErrorCode::Timeout {
            timeout_because(self.name, self.timeout, &e)
        } else {
            self.ctx(e)
        }
    }

    /// What a try (or a wait of timeout zero) says when the lock is taken.
    pub(crate) fn busy(&self) -> Error {
        match self.mode {
            Mode::Once => timeout_err(self.name, self.timeout),
            _ => Error::new(
                ErrorCode::WouldBlock,
                format!("lock {} is held", show(self.name)),
            ),
        }
    }

    /// A guard out of the queue ([`Acquisition::queue`]) past the
    /// lock-delay gate, if it must pass it.
    pub(crate) async fn gate(&self, guard: Guard, gate: Gated) -> Result<Guard> {
        let Gated::Pass(lease) = gate else {
            return Ok(guard);
        };
        let gate = Gate {
            mode: self.mode,
            lease,
            deadline: self.deadline(),
            timeout: self.timeout,
            cancel: self.cancel,
        };
        match delay::delay_gate(self.client, &guard, gate).await {
            Ok(()) => Ok(guard),
            Err(e) => {
                // Granted in the queue but not past the delay: leave it, as
                // an abandoned wait does (the caller waits CLEANUP_GRACE for
                // the delete, which goes on in the background after that, and
                // this client's own try waits for it: no ghost, no overrun
                // of the caller's bound when etcd is slow).
                let ticket = crate::client::cleanups::CleanupTicket::new(
                    &self.client.inner.cleanups,
                    guard.key_bytes(),
                );
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                self.client.inner.handle.spawn(async move {
                    let _ = guard.unlock().await;
                    drop(ticket);
                    let _ = tx.send(());
                });
                let _ = tokio::time::timeout(crate::client::cleanups::CLEANUP_GRACE, rx).await;
                Err(e)
            }
        }
    }

    /// The acquire Txn: queue our key (with a waiter's delay record when
    /// `delay` is given), or for a try/once put it only if the lock is free.
    pub(crate) fn queue_or_try_txn(
        &self,
        session: &Session,
        pending: &mut Pending,
        value: Vec<u8>,
        recs: &Records,
        delay: Option<i64>,
    ) -> Txn {
        let prefix = &self.prefix;
        let key = pending.key.clone();
        let keys_only = || GetOptions::new().with_prefix().with_keys_only();
        let put = TxnOp::put(
            key.clone(),
            value,
            Some(PutOptions::new().with_lease(session.lease)),
        );
        let held_range = || {
            Compare::create_revision(recs.held.clone(), CompareOp::Equal, 0)
                .with_range(prefix_end(&recs.held))
        };
        match (self.mode, delay) {
            // With a delay, the waiter's record goes in with the key (see delay.rs).
            (Mode::Wait, Some(lease)) => {
                pending.extra.push(recs.waiting_of(prefix, &key));
                queue_txn(
                    &key,
                    prefix,
                    put,
                    recs,
                    Some(put_record(recs.waiting_of(prefix, &key), lease)),
                )
            }
            (Mode::Wait, None) => queue_txn(&key, prefix, put, recs, None),
            // Try: put only if nobody holds or waits (no key under the prefix)
            // and no vanished holder's lock-delay runs (no holder record);
            // else read any one key (no sort: cheap) to tell a contender from a
            // key of a nested name, and the holder records likewise.
            (_, delay) => Txn::new()
                .when([
                    Compare::create_revision(prefix.clone(), CompareOp::Equal, 0)
                        .with_range(prefix_end(prefix)),
                    held_range(),
                ])
                .and_then(match delay {
                    Some(lease) => vec![put, put_record(recs.held_of(prefix, &key), lease)],
                    None => vec![put],
                })
                .or_else([
                    TxnOp::get(prefix.clone(), Some(keys_only().with_limit(1))),
                    TxnOp::get(
                        recs.held.clone(),
                        Some(GetOptions::new().with_prefix().with_keys_only()),
                    ),
                ]),
        }
    }

    /// Where our key stands after the acquire Txn `resp` (queued, or found
    /// there from an earlier attempt): its create revision and the queue.
    pub(crate) async fn place(
        &self,
        key: &[u8],
        resp: &etcd_client::TxnResponse,
    ) -> Result<(i64, Queue)> {
        let (client, prefix) = (self.client, &self.prefix);
        let ops = resp.op_responses();
        let ctx = |e| self.ctx(e);
        let (my_rev, queue) = if resp.succeeded() {
            let my_rev = revision(resp);
            match Queue::from_newest(prefix, key, my_rev, kvs(ops.get(1)), !more(ops.get(1))) {
                Some(q) => (my_rev, q),
                None => (
                    my_rev,
                    crate::engine::keys::read_queue(client, prefix, key, my_rev)
                        .await
                        .map_err(ctx)?,
                ),
            }
        } else {
            // Our key was already there: an earlier attempt of this very Txn landed
            // although we never saw its answer.
            match kvs(ops.first()).first().map(|kv| kv.create_revision()) {
                Some(rev) => (
                    rev,
                    crate::engine::keys::read_queue(client, prefix, key, rev)
                        .await
                        .map_err(ctx)?,
                ),
                None => return Err(vanished()),
            }
        };
        Ok((my_rev, queue))
    }
}

/// etcd's answer to a put on a revoked or expired lease.
pub(crate) const LEASE_NOT_FOUND: &str = "requested lease not found";

/// Our key was not there after the Txn that queues it: its lease vanished
/// while we queued (the pipeline retries on a fresh session).
pub(crate) fn vanished() -> Error {
    Error::lost(
        LossReason::LeaseExpired,
        format!("{LEASE_NOT_FOUND}: our key vanished while queueing"),
    )
}

/// Whether a guard out of the queue must still pass the lock-delay gate.
pub(crate) enum Gated {
    /// No delay record can be ahead of it: granted as it is.
    Open,
    /// Pass the gate, with our own delay lease if the caller asked for a
    /// lock-delay.
    Pass(Option<i64>),
}

/// The guard of a granted acquisition: the pending key's watches end (our
/// own key's watch carries on), and the key becomes the hold's.
pub(crate) fn held(
    client: &Client,
    name: &str,
    session: &Arc<Session>,
    mut pending: Pending,
    token: i64,
    waited_on: Vec<Vec<u8>>,
    own: Option<OwnWatch>,
) -> Guard {
    pending.armed = false;
    for w in pending.watches.drain(..) {
        client.inner.hub.cancel(w);
    }
    let key = std::mem::take(&mut pending.key);
    // A waiter's watch on its own key carries on; a lock taken with no
    // wait gets its watch once it has been held a little while (unless
    // the user opted out): see watch::HELD_WATCH_DELAY.
    let later = own.is_none() && client.inner.watch_held_keys;
    Guard::new(
        client.clone(),
        session.clone(),
        name,
        key,
        Grant {
            token,
            waited_on,
            own,
            watch_later: later,
        },
    )
}

/// The Txn that queues a waiter (and takes the lock if nobody is ahead):
/// if our `key` is absent, `put` it, read the newest keys under `prefix`
/// (the queue up to [`OLDER_READ`] ahead of us, keys only) and count the
/// name's lock-delay records, plus `record` (our waiter record, with a
/// lock-delay); else read our key. The benchmark floor sends this same Txn
/// (`bench_floor::txn_delete_round`), so the two cannot drift apart.
pub(crate) fn queue_txn(
    key: &[u8],
    prefix: &[u8],
    put: TxnOp,
    recs: &crate::engine::delay::Records,
    record: Option<TxnOp>,
) -> Txn {
    let newest = GetOptions::new()
        .with_prefix()
        .with_keys_only()
        .with_sort(SortTarget::Create, SortOrder::Descend)
        .with_limit(OLDER_READ + 1);
    let mut ops = vec![
        put,
        TxnOp::get(prefix.to_vec(), Some(newest)),
        TxnOp::get(
            recs.all.clone(),
            Some(GetOptions::new().with_prefix().with_count_only()),
        ),
    ];
    ops.extend(record);
    Txn::new()
        .when([Compare::create_revision(key.to_vec(), CompareOp::Equal, 0)])
        .and_then(ops)
        .or_else([TxnOp::get(key.to_vec(), None)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::ClientOptions;

    /// A client that never connects: these tests send nothing.
    async fn offline(namespace: Option<&str>) -> Client {
        let mut o = ClientOptions::new(["127.0.0.1:1"]);
        o.lazy_connect = true;
        o.namespace = namespace.map(str::to_string);
        Client::connect(o).await.unwrap()
    }

    #[tokio::test]
    async fn an_acquisition_queues_under_its_name_in_the_namespace() {
        let c = offline(Some("app/")).await;
        let never = CancellationToken::new();
        let a = Acquisition::new(&c, "jobs", Mode::Wait, Bound::Wait(None), None, &never);
        assert_eq!(a.prefix, b"app/jobs/");
        assert_eq!((a.what, a.value), ("lock", None));
        c.close().await;
    }

    #[tokio::test]
    async fn a_wait_ends_at_its_deadline_and_a_try_has_none() {
        let c = offline(None).await;
        let never = CancellationToken::new();
        let at = Instant::now() + Duration::from_secs(3);
        let wait = Acquisition::new(&c, "x", Mode::Wait, Bound::Wait(Some(at)), None, &never);
        assert_eq!(wait.deadline(), Some(at));
        let forever = Acquisition::new(&c, "x", Mode::Wait, Bound::Wait(None), None, &never);
        assert_eq!(forever.deadline(), None);
        let try_ = Acquisition::new(&c, "x", Mode::Try, c.request_bound(), None, &never);
        assert_eq!(try_.deadline(), None);
        c.close().await;
    }

    #[tokio::test]
    async fn a_taken_lock_is_would_block_for_a_try_and_timeout_for_timeout_zero() {
        let c = offline(None).await;
        let never = CancellationToken::new();
        let zero = Some(Duration::ZERO);
        let try_ = Acquisition::new(&c, "orders", Mode::Try, c.request_bound(), None, &never);
        let e = try_.busy();
        assert_eq!(e.code(), ErrorCode::WouldBlock);
        assert_eq!(e.message(), "lock \"orders\" is held");
        let once = Acquisition::new(&c, "orders", Mode::Once, c.request_bound(), zero, &never);
        let e = once.busy();
        assert_eq!(e.code(), ErrorCode::Timeout);
        assert!(
            e.message()
                .starts_with("lock \"orders\" not acquired within 0ns"),
            "{e}"
        );
        c.close().await;
    }

    #[tokio::test]
    async fn a_step_that_ran_out_of_time_names_the_callers_timeout_and_the_cause() {
        let c = offline(None).await;
        let never = CancellationToken::new();
        let t = Some(Duration::from_millis(250));
        let a = Acquisition::new(&c, "orders", Mode::Wait, Bound::Wait(None), t, &never);
        let e = a.bounded(Error::new(ErrorCode::Timeout, "etcd was slow"));
        assert_eq!(e.code(), ErrorCode::Timeout);
        assert_eq!(
            e.message(),
            "lock \"orders\" not acquired within 250ms: etcd was slow"
        );
        let e = a.bounded(Error::new(ErrorCode::Unavailable, "no member answered"));
        assert_eq!(e.code(), ErrorCode::Unavailable);
        assert_eq!(e.message(), "lock \"orders\": no member answered");
        c.close().await;
    }

    #[tokio::test]
    async fn permit_counts_and_a_lock_delay_on_permits_are_refused_before_any_request() {
        let c = offline(None).await;
        for permits in [0, crate::recipes::semaphore::MAX_PERMITS + 1] {
            let e = c
                .acquire_permit("pool", permits, crate::options::LockOptions::default())
                .await
                .unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
            assert!(
                e.message().contains("permits must be between 1 and 1024"),
                "{e}"
            );
        }
        let delayed = crate::options::LockOptions {
            lock_delay: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        let e = c.acquire_permit("pool", 2, delayed).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert!(e.message().contains("lock_delay applies to locks"), "{e}");
        c.close().await;
    }
}
