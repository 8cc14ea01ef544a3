//! The lock protocol, wire-compatible with etcd's Go `concurrency.Mutex`,
//! `etcdctl lock` and the v3lock service: lock `N` owns the prefix `N/`; each
//! contender puts one key under it, attached to its session lease; the key with
//! the lowest create_revision holds the lock; everyone else waits for the key
//! created just before its own to be deleted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::delay::{put_record, Gate};
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::guard::Guard;
use crate::keys::{why_deleted, OwnEvent, OwnKeyWatch};
use crate::meta::LockKind;
use crate::names::{is_direct_child, lost_err, owner_info, prefix_end, show, validate_name, Mode};
use crate::options::LockOptions;
use crate::queue::{kvs, more, revision, Contender, Queue, Woken, OLDER_READ};
use crate::runtime::sleep_opt;
use crate::session::Session;
use crate::transport::Bound;
use crate::wait::{cancelled, closed_err, timeout_because, timeout_err, Pending, WaitEnds};
use crate::watch::WatchEvent;

/// etcd's answer to a put on a revoked or expired lease.
const LEASE_NOT_FOUND: &str = "requested lease not found";

impl Client {
    /// Wait for the lock `name` and hold it. Waiters are served in the order they
    /// arrived: by create_revision in etcd, and in call order among this
    /// client's waiters, who queue in the client and keep at most
    /// [`crate::QUEUED_PER_CLIENT`] keys in etcd's queue at a time. Dropping the
    /// future cancels the wait and removes the waiter's key.
    ///
    /// ```no_run
    /// # async fn demo() -> etcdlock::Result<()> {
    /// let client = etcdlock::Client::connect(etcdlock::ClientOptions::new(["127.0.0.1:2379"])).await?;
    /// let guard = client.lock("orders").await?;
    /// guard.put("stock", "299").await?; // applied by etcd only while we hold the lock
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self, name: &str) -> Result<Guard> {
        self.lock_with(name, LockOptions::default()).await
    }

    /// [`Client::lock`] with a timeout and/or a cancellation token. A timeout
    /// of zero means one try and no wait: the lock is taken if it is free, else
    /// `Timeout`, and nothing is written to etcd when it is held.
    pub async fn lock_with(&self, name: &str, opts: LockOptions) -> Result<Guard> {
        let mode = if opts.timeout == Some(Duration::ZERO) {
            Mode::Once
        } else {
            Mode::Wait
        };
        self.acquire(name, opts, mode, None).await
    }

    /// Take the lock if it is free; `WouldBlock` if someone holds it or waits for
    /// it. Writes nothing to etcd in that case (one Txn that compares the
    /// prefix), so followers that poll cost etcd a read, not a put and a delete.
    pub async fn try_lock(&self, name: &str) -> Result<Guard> {
        self.acquire(name, LockOptions::default(), Mode::Try, None)
            .await
    }

    /// [`Client::try_lock`] with acquisition options (`lock_delay`,
    /// `lease_time`, `metadata`; a timeout or cancel token is ignored: a try
    /// never waits).
    pub async fn try_lock_with(&self, name: &str, opts: LockOptions) -> Result<Guard> {
        self.acquire(
            name,
            LockOptions {
                timeout: None,
                cancel: None,
                ..opts
            },
            Mode::Try,
            None,
        )
        .await
    }

    /// Acquire `name`; `value` is what our key carries (the election's
    /// proclamation; by default who we are, for `etcdlock status`).
    pub(crate) async fn acquire(
        &self,
        name: &str,
        opts: LockOptions,
        mode: Mode,
        value: Option<&[u8]>,
    ) -> Result<Guard> {
        let kind = if value.is_some() {
            LockKind::Election
        } else {
            LockKind::Mutex
        };
        self.acquire_n(name, opts, mode, value, 1, kind).await
    }

    /// [`Client::acquire`] of one of `permits` permits (1: the mutex).
    pub(crate) async fn acquire_n(
        &self,
        name: &str,
        opts: LockOptions,
        mode: Mode,
        value: Option<&[u8]>,
        permits: u32,
        kind: LockKind,
    ) -> Result<Guard> {
        opts.validate()?;
        if permits > 1 && opts.lock_delay.is_some_and(|d| !d.is_zero()) {
            return Err(Error::invalid(
                "lock_delay applies to locks and elections, not to semaphore permits",
            ));
        }
        let m = self.inner.metrics.acquiring();
        let _meta = self.meta_wait(name, kind, &opts.metadata);
        let lease_time = opts.lease_time;
        let r = Box::pin(self.acquire_n_counted(name, opts, mode, value, permits)).await;
        m.finish(&r);
        if let (Ok(g), Some(t)) = (&r, lease_time) {
            g.expire_after(t);
        }
        r
    }

    async fn acquire_n_counted(
        &self,
        name: &str,
        opts: LockOptions,
        mode: Mode,
        value: Option<&[u8]>,
        permits: u32,
    ) -> Result<Guard> {
        validate_name(name)?;
        self.check_open()?;
        let deadline = match mode {
            // A timeout too far to be an instant is no limit at all.
            Mode::Wait => opts.timeout.and_then(|t| Instant::now().checked_add(t)),
            _ => None,
        };
        // The call's one bound: its own timeout when it waits, else the
        // request timeout (a try is one round trip plus failover).
        let bound = match mode {
            Mode::Wait => Bound::Wait(deadline),
            _ => self.request_bound(),
        };
        if mode != Mode::Wait {
            // A key of ours this client is still deleting (an abandoned
            // acquisition) must not make the try fail on its own ghost.
            self.inner
                .cleanups
                .settled(&self.prefix(name), bound.end())
                .await;
        }
        let delay_secs = opts.delay_secs()?;
        let cancel = opts.cancel.unwrap_or_default();
        // Waiters of this client on this lock queue in etcd a few at a time
        // (window.rs); the place is left when this call returns.
        let _place = match mode {
            Mode::Wait => Some(
                self.enter_window(name, deadline, opts.timeout, &cancel)
                    .await?,
            ),
            _ => None,
        };
        let mut attempts = 0;
        let mut retried_delay = false;
        loop {
            // The lease grant runs under the call's bound: a wait's timeout
            // (`Timeout`), or a try's request timeout (`Unavailable`).
            let session = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(cancelled(name)),
                s = self.session_by(bound) => s.map_err(|e| if e.code() == ErrorCode::Timeout {
                    timeout_because(name, opts.timeout, &e)
                } else {
                    e.context(format!("lock {}", show(name)))
                })?,
            };
            let r = if permits == 1 {
                let delay = match delay_secs {
                    0 => Ok(None),
                    secs => self
                        .delay_lease(&session, secs, bound)
                        .await
                        .map(Some)
                        .map_err(|e| {
                            if e.code() == ErrorCode::Timeout {
                                timeout_because(name, opts.timeout, &e)
                            } else {
                                e.context(format!("lock {}", show(name)))
                            }
                        }),
                };
                match delay {
                    Ok(delay) => {
                        Box::pin(self.acquire_on(
                            name,
                            &session,
                            mode,
                            bound,
                            opts.timeout,
                            &cancel,
                            value,
                            delay,
                        ))
                        .await
                    }
                    Err(e) => Err(e),
                }
            } else {
                Box::pin(self.permit_on(
                    name,
                    &session,
                    mode,
                    bound,
                    opts.timeout,
                    &cancel,
                    permits,
                ))
                .await
            };
            // Closing revokes the lease, which deletes our waiter key: whichever of
            // the watch event and the close signal wins, the caller sees Closed.
            let r = match r {
                Err(e) if self.inner.closed.is_cancelled() && e.code() != ErrorCode::Closed => {
                    Err(closed_err(name))
                }
                r => r,
            };
            match r {
                // The lease vanished (revoked, or expired while we were cut off) before
                // we queued: nothing of ours is in the queue; take a fresh session.
                Err(e) if e.message().contains(LEASE_NOT_FOUND) && attempts < 3 => {
                    attempts += 1;
                    // With a lock-delay the Txn also wrote under the delay
                    // lease, which may be the one that is gone (its renewal
                    // failed while the session's went through): forget it and
                    // try once more on the same session; only a second
                    // refusal says the session's own lease is gone.
                    match session.delay_lease(delay_secs) {
                        Some(id) if delay_secs > 0 && !retried_delay => {
                            retried_delay = true;
                            session.drop_delay_lease(id);
                        }
                        _ => session.mark_lost(LossReason::LeaseExpired),
                    }
                }
                r => return r,
            }
        }
    }

    /// A place in this client's local queue for `name` (see window.rs).
    pub(crate) async fn enter_window(
        &self,
        name: &str,
        deadline: Option<Instant>,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<crate::window::Place> {
        use crate::window::NoPlace;
        self.inner
            .windows
            .enter(&self.prefix(name), deadline, cancel, &self.inner.closed)
            .await
            .map_err(|n| match n {
                NoPlace::Deadline => timeout_err(name, timeout),
                NoPlace::Cancelled => cancelled(name),
                NoPlace::Closed => closed_err(name),
            })
    }

    pub(crate) fn prefix(&self, name: &str) -> Vec<u8> {
        let mut prefix = self.ns_key(name.as_bytes());
        prefix.push(b'/');
        prefix
    }

    #[allow(clippy::too_many_arguments)]
    async fn acquire_on(
        &self,
        name: &str,
        session: &Arc<Session>,
        mode: Mode,
        bound: Bound,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
        value: Option<&[u8]>,
        delay: Option<i64>,
    ) -> Result<Guard> {
        let g = Box::pin(
            self.acquire_undelayed(name, session, mode, bound, timeout, cancel, value, delay),
        )
        .await?;
        let Some(gate) = g.1 else { return Ok(g.0) };
        let deadline = match bound {
            Bound::Wait(d) => d,
            Bound::Request(_) => None,
        };
        match self
            .delay_gate(
                &g.0,
                Gate {
                    mode,
                    lease: gate,
                    deadline,
                    timeout,
                    cancel,
                },
            )
            .await
        {
            Ok(()) => Ok(g.0),
            Err(e) => {
                // Granted in the queue but not past the delay: leave it, as
                // an abandoned wait does (the caller waits CLEANUP_GRACE for
                // the delete, which goes on in the background after that, and
                // this client's own try waits for it: no ghost, no overrun
                // of the caller's bound when etcd is slow).
                let ticket = crate::cleanups::CleanupTicket::new(self, g.0.key_bytes());
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                let guard = g.0;
                self.inner.handle.spawn(async move {
                    let _ = guard.unlock().await;
                    drop(ticket);
                    let _ = tx.send(());
                });
                let _ = tokio::time::timeout(crate::cleanups::CLEANUP_GRACE, rx).await;
                Err(e)
            }
        }
    }

    /// [`Client::acquire_on`] up to the lock-delay gate: the guard, and
    /// whether it must pass the gate (with our delay lease, if any).
    #[allow(clippy::too_many_arguments)]
    async fn acquire_undelayed(
        &self,
        name: &str,
        session: &Arc<Session>,
        mode: Mode,
        bound: Bound,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
        value: Option<&[u8]>,
        delay: Option<i64>,
    ) -> Result<(Guard, Option<Option<i64>>)> {
        let deadline = match bound {
            Bound::Wait(d) => d,
            Bound::Request(_) => None,
        };
        let prefix = self.prefix(name);
        let value = value
            .map(<[u8]>::to_vec)
            .unwrap_or_else(|| owner_info().into_bytes());
        let key = session.reserve_key(&prefix);
        let mut pending = Pending::new(self, session, key.clone());
        let ctx = |e: Error| e.context(format!("lock {}", show(name)));
        let keys_only = || GetOptions::new().with_prefix().with_keys_only();
        let put = TxnOp::put(
            key.clone(),
            value.clone(),
            Some(PutOptions::new().with_lease(session.lease)),
        );
        let recs = self.delay_records(name);
        let held_range = || {
            Compare::create_revision(recs.held.clone(), CompareOp::Equal, 0)
                .with_range(prefix_end(&recs.held))
        };
        let txn = match (mode, delay) {
            // With a delay, the waiter's record goes in with the key (see delay.rs).
            (Mode::Wait, Some(lease)) => {
                pending.extra.push(recs.waiting_of(&prefix, &key));
                queue_txn(
                    &key,
                    &prefix,
                    put,
                    &recs,
                    Some(put_record(recs.waiting_of(&prefix, &key), lease)),
                )
            }
            (Mode::Wait, None) => queue_txn(&key, &prefix, put, &recs, None),
            // Try: put only if nobody holds or waits (no key under the prefix)
            // and no vanished holder's lock-delay runs (no holder record);
            // else read any one key (no sort: cheap) to tell a contender from a
            // key of a nested name, and the holder records likewise.
            (_, delay) => Txn::new()
                .when([
                    Compare::create_revision(prefix.clone(), CompareOp::Equal, 0)
                        .with_range(prefix_end(&prefix)),
                    held_range(),
                ])
                .and_then(match delay {
                    Some(lease) => vec![put, put_record(recs.held_of(&prefix, &key), lease)],
                    None => vec![put],
                })
                .or_else([
                    TxnOp::get(prefix.clone(), Some(keys_only().with_limit(1))),
                    TxnOp::get(
                        recs.held.clone(),
                        Some(GetOptions::new().with_prefix().with_keys_only()),
                    ),
                ]),
        };
        let resp = self
            .run_detached(&mut pending, txn, name, bound, cancel)
            .await
            .map_err(|e| {
                if e.code() == ErrorCode::Timeout {
                    timeout_because(name, timeout, &e)
                } else {
                    ctx(e)
                }
            })?;
        let ops = resp.op_responses();

        if mode != Mode::Wait {
            if !resp.succeeded() {
                match kvs(ops.first()).first() {
                    Some(kv) if is_direct_child(&prefix, kv.key()) => {
                        pending.forget();
                        return Err(self.busy(name, mode, timeout));
                    }
                    _ if crate::delay::blocking(&recs.held, kvs(ops.get(1)), &[]).is_some() => {
                        pending.forget();
                        return Err(crate::delay::in_delay(name, mode, timeout));
                    }
                    // Only keys (or delay records) of nested names (`name/x/...`)
                    // are there: they are not contenders, so queue once and see.
                    _ => {
                        let g = Box::pin(
                            self.try_past_nested(name, session, mode, timeout, pending, value),
                        )
                        .await?;
                        return Ok((g, Some(delay)));
                    }
                }
            }
            let token = revision(&resp);
            let g = self.held(name, session, pending, token, Vec::new(), None);
            if delay.is_some() {
                g.set_delay_records(vec![recs.held_of(&prefix, &key)]);
            }
            return Ok((g, None));
        }
        // Records counted: a holder with a lock-delay is ahead of us or gone
        // before (see delay.rs); with one of our own we put ours when granted.
        let counted = match ops.get(2) {
            Some(etcd_client::TxnOpResponse::Get(r)) => r.count(),
            _ => 1,
        };
        let gate = (delay.is_some() || counted > 0 || !resp.succeeded()).then_some(delay);

        let (my_rev, queue) = if resp.succeeded() {
            let my_rev = revision(&resp);
            match Queue::from_newest(&prefix, &key, my_rev, kvs(ops.get(1)), !more(ops.get(1))) {
                Some(q) => (my_rev, q),
                None => (
                    my_rev,
                    self.read_queue(&prefix, &key, my_rev).await.map_err(ctx)?,
                ),
            }
        } else {
            // Our key was already there: an earlier attempt of this very Txn landed
            // although we never saw its answer.
            match kvs(ops.first()).first().map(|kv| kv.create_revision()) {
                Some(rev) => (rev, self.read_queue(&prefix, &key, rev).await.map_err(ctx)?),
                None => {
                    return Err(Error::lost(
                        LossReason::LeaseExpired,
                        format!("{LEASE_NOT_FOUND}: our key vanished while queueing"),
                    ))
                }
            }
        };
        if queue.pred.is_none() {
            return Ok((
                self.held(name, session, pending, my_rev, Vec::new(), None),
                gate,
            ));
        }
        // Boxed: only contended acquisitions pay for the wait's state.
        let g = Box::pin(self.wait_turn(
            name, session, pending, my_rev, queue, deadline, timeout, cancel,
        ))
        .await?;
        Ok((g, gate))
    }

    /// Queued with `my_rev`: wait until no key older than ours remains.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn wait_turn(
        &self,
        name: &str,
        session: &Arc<Session>,
        mut pending: Pending,
        my_rev: i64,
        mut queue: Queue,
        deadline: Option<Instant>,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<Guard> {
        let prefix = self.prefix(name);
        let key = pending.key.clone();
        let ctx = |e: Error| e.context(format!("lock {}", show(name)));
        // Wait for every key created before ours to go, watching only the newest
        // of them (no thundering herd), and our own key (a waiter whose key or
        // session dies fails at once: etcd issue 19597). Both watches ride the
        // client's one watch stream and start "now"; when etcd reports that
        // "now" is past our last read, one read of both keys closes the gap, so
        // no delete is missed whatever the timing.
        let hub = &self.inner.hub;
        let (own, mut own_rx) = OwnKeyWatch::new();
        let mut own_id = hub.watch(key.clone(), my_rev, own.sink());
        pending.watches.push(own_id);
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel::<(u64, WatchEvent)>();
        // Every watch this wait starts gets a tag; events of watches no longer
        // current are dropped.
        let mut tags = 0u64;
        let watch = |key: &[u8], after: i64, tags: &mut u64| {
            *tags += 1;
            let (tag, tx) = (*tags, ev_tx.clone());
            (
                tag,
                hub.watch(
                    key.to_vec(),
                    after,
                    Arc::new(move |ev| {
                        let _ = tx.send((tag, ev));
                    }),
                ),
            )
        };
        // The predecessor's watch lives as long as the predecessor: a re-read
        // that finds the same predecessor keeps it (no new watch, no gap).
        let mut pred_w: Option<(Contender, u64, i64)> = None;
        let mut waited_on: Vec<Vec<u8>> = Vec::new();
        let closed = self.inner.closed.clone();
        let ends = WaitEnds {
            closed: &closed,
            cancel,
            deadline,
            session,
        };
        let mut backoff = Duration::from_millis(25);
        loop {
            if !queue.mine {
                let reason = why_deleted(self, session).await;
                return Err(lost_err(
                    name,
                    reason,
                    "our waiter key was deleted while waiting",
                ));
            }
            let Some(pred) = queue.pred.clone() else {
                pending.watches.retain(|w| *w != own_id);
                return Ok(self.held(
                    name,
                    session,
                    pending,
                    my_rev,
                    waited_on,
                    Some((own_id, own, own_rx)),
                ));
            };
            if waited_on.last() != Some(&pred.key) {
                waited_on.push(pred.key.clone());
            }
            tracing::trace!(lock = name, pred = %String::from_utf8_lossy(&pred.key), "waiting for predecessor");
            let pred_is_holder = queue.holder.as_ref() == Some(&pred);
            let fresh = !matches!(&pred_w, Some((p, _, _)) if *p == pred);
            if fresh {
                if let Some((_, _, id)) = pred_w.take() {
                    hub.cancel(id);
                    pending.watches.retain(|w| *w != id);
                }
                let (tag, id) = watch(&pred.key, queue.rev, &mut tags);
                pending.watches.push(id);
                pred_w = Some((pred.clone(), tag, id));
            }
            let (pred_tag, pred_id) = pred_w
                .as_ref()
                .map(|(_, t, id)| (*t, *id))
                .unwrap_or_default();
            // Look ahead: watch the key before the predecessor too. Its delete
            // (the predecessor takes the lock) is answered by a re-read while the
            // predecessor holds, off the handoff's path. A missed event there
            // only costs that read later; the predecessor's watch decides.
            let ahead = match (&queue.ahead, pred_is_holder) {
                (Some(a), false) => {
                    let (tag, id) = watch(&a.key, queue.rev, &mut tags);
                    pending.watches.push(id);
                    Some((tag, id))
                }
                _ => None,
            };
            let ahead_tag = ahead.map(|(t, _)| t).unwrap_or(0);
            // Whether the key ahead is known to exist at the read or later (its
            // watch reported no gap, or a point read found it).
            let mut ahead_sure = false;
            // etcd turns "now" into a revision before it registers the watch; a
            // write in between leaves the watch unsynced, served by a 100 ms
            // catch-up loop (what bounds Go's Mutex's handoff rate). For a new
            // watch on the holder, a few reads over its first moments (`polls`) close that
            // window; deeper waiters have time for the loop to catch up.
            let mut polls = [5u64, 10, 20, 40, 40].into_iter();
            let mut next_poll: Option<Instant> = None;
            let woken = loop {
                tokio::select! {
                    biased;
                    i = ends.next(&mut own_rx) => match i {
                        Ok(_) => {
                            // Re-watch our key from the next read on.
                            pending.watches.retain(|w| *w != own_id);
                            break Woken::Reread;
                        }
                        Err(i) => return Err(self.end_wait(i, name, session, pending, timeout, "waiter").await),
                    },
                    Some((tag, ev)) = ev_rx.recv() => {
                        if tag == ahead_tag && tag != 0 {
                            // The key ahead of our predecessor went (the
                            // predecessor's watch stays).
                            match ev {
                                WatchEvent::Deleted { .. } => break Woken::Ahead,
                                // The watch starts after our read: with the whole
                                // queue known we step by its deletes, so look once
                                // whether it is still there (a point read). Without,
                                // a missed delete only costs a read later.
                                WatchEvent::Created { rev } if rev > queue.rev && queue.rest.is_some() => {
                                    let Some(a) = &queue.ahead else { continue };
                                    match self.presence(a, &key, my_rev).await {
                                        Ok((true, true)) => ahead_sure = true,
                                        // Gone, and ours is there: step past it.
                                        Ok((false, true)) => break Woken::Ahead,
                                        // Our key went, or no answer: never step on a
                                        // guess; a read tells.
                                        _ => break Woken::Reread,
                                    }
                                }
                                WatchEvent::Created { .. } => ahead_sure = true,
                                _ => {}
                            }
                            continue;
                        }
                        if tag != pred_tag { continue; }
                        match ev {
                            WatchEvent::Created { rev } => {
                                // The watch starts after `rev`: if the store moved since our
                                // read, one read closes the gap (both keys).
                                if rev > queue.rev && !matches!(self.still_there(&pred, &key, my_rev).await, Ok(true)) {
                                    break Woken::Reread;
                                }
                                if pred_is_holder && fresh {
                                    next_poll = polls.next().map(|ms| Instant::now() + Duration::from_millis(ms));
                                }
                            }
                            WatchEvent::Deleted { .. } => break queue.pred_deleted(&pred, session.alive(), ahead_sure),
                            WatchEvent::Reset => break Woken::Reread,
                        }
                    }
                    _ = sleep_opt(next_poll) => {
                        match self.still_there(&pred, &key, my_rev).await {
                            Ok(false) => break Woken::Reread,
                            _ => next_poll = polls.next().map(|ms| Instant::now() + Duration::from_millis(ms)),
                        }
                    }
                }
            };
            if let Some((_, id)) = ahead {
                hub.cancel(id);
                pending.watches.retain(|w| *w != id);
            }
            if !matches!(woken, Woken::Ahead) {
                // The predecessor changed (or we hold): its watch is done.
                hub.cancel(pred_id);
                pending.watches.retain(|w| *w != pred_id);
                pred_w = None;
            }
            if let Woken::Acquired = woken {
                pending.watches.retain(|w| *w != own_id);
                return Ok(self.held(
                    name,
                    session,
                    pending,
                    my_rev,
                    waited_on,
                    Some((own_id, own, own_rx)),
                ));
            }
            // With the whole queue known, a delete steps it forward; the new
            // watches start at the same read's revision, so the hub replays a
            // delete they would otherwise have missed (or reports the gap).
            let stepped = match woken {
                Woken::Ahead => queue.ahead_gone(&|k, r| hub.deleted_after(k, r)),
                Woken::PredGone => queue.pred_gone(&|k, r| hub.deleted_after(k, r)),
                _ => false,
            };
            if !stepped {
                queue = loop {
                    match self.read_queue(&prefix, &key, my_rev).await {
                        Ok(q) => {
                            backoff = Duration::from_millis(25);
                            break q;
                        }
                        Err(e) if e.code() == ErrorCode::Unavailable && session.alive() => {
                            tokio::select! {
                                _ = tokio::time::sleep(backoff) => {}
                                _ = sleep_opt(deadline) => {
                                    pending.abandon().await;
                                    return Err(timeout_err(name, timeout));
                                }
                                _ = cancel.cancelled() => {
                                    pending.abandon().await;
                                    return Err(cancelled(name));
                                }
                            }
                            backoff = (backoff * 2).min(Duration::from_secs(1));
                        }
                        Err(e) => return Err(ctx(e)),
                    }
                };
            }
            if !pending.watches.contains(&own_id) && queue.mine {
                own_id = hub.watch(key.clone(), queue.rev, own.sink());
                pending.watches.push(own_id);
            }
        }
    }

    /// Try/once found only keys of nested names under the prefix: queue once
    /// (those keys are no contenders) and keep the lock only if that made us
    /// the holder among the direct children.
    async fn try_past_nested(
        &self,
        name: &str,
        session: &Arc<Session>,
        mode: Mode,
        timeout: Option<Duration>,
        mut pending: Pending,
        value: Vec<u8>,
    ) -> Result<Guard> {
        let prefix = self.prefix(name);
        let key = pending.key.clone();
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.clone(),
                value,
                Some(PutOptions::new().with_lease(session.lease)),
            )])
            .or_else([TxnOp::get(key.clone(), None)]);
        let never = CancellationToken::new();
        let resp = self
            .run_detached(&mut pending, txn, name, self.request_bound(), &never)
            .await?;
        let my_rev = if resp.succeeded() {
            revision(&resp)
        } else {
            kvs(resp.op_responses().first())
                .first()
                .map(|kv| kv.create_revision())
                .unwrap_or(0)
        };
        let q = self.read_queue(&prefix, &key, my_rev).await?;
        if q.mine && q.pred.is_none() {
            return Ok(self.held(name, session, pending, my_rev, Vec::new(), None));
        }
        pending.abandon().await;
        Err(self.busy(name, mode, timeout))
    }

    fn busy(&self, name: &str, mode: Mode, timeout: Option<Duration>) -> Error {
        match mode {
            Mode::Once => timeout_err(name, timeout),
            _ => Error::new(
                ErrorCode::WouldBlock,
                format!("lock {} is held", show(name)),
            ),
        }
    }

    /// Whether the predecessor (as created) and our key both still exist: two
    /// point reads in one Txn, O(1) however long the queue (the full queue
    /// read is a sorted range, and etcd reads the whole prefix for those).
    async fn still_there(&self, pred: &Contender, key: &[u8], my_rev: i64) -> Result<bool> {
        self.presence(pred, key, my_rev)
            .await
            .map(|(theirs, ours)| theirs && ours)
    }

    /// Whether `other` (as created) and our key still exist, each: the two
    /// point reads of [`Client::still_there`].
    async fn presence(&self, other: &Contender, key: &[u8], my_rev: i64) -> Result<(bool, bool)> {
        let txn = Txn::new().and_then([
            TxnOp::get(other.key.clone(), Some(GetOptions::new().with_keys_only())),
            TxnOp::get(key.to_vec(), Some(GetOptions::new().with_keys_only())),
        ]);
        let resp = self
            .call(None, |mut c| {
                let t = txn.clone();
                async move { c.txn(t).await }
            })
            .await?;
        let ops = resp.op_responses();
        let rev_of = |i: usize| kvs(ops.get(i)).first().map(|kv| kv.create_revision());
        Ok((rev_of(0) == Some(other.rev), rev_of(1) == Some(my_rev)))
    }

    /// Read the queue around our key in one Txn: our key, and the newest
    /// [`OLDER_READ`] keys older than ours (the predecessor, whether it is the
    /// only one, i.e. the holder, and, when that is all of them, the whole queue). Keys of nested names are skipped by a full scan in the
    /// rare case that they show up.
    pub(crate) async fn read_queue(&self, prefix: &[u8], key: &[u8], my_rev: i64) -> Result<Queue> {
        let older = || {
            GetOptions::new()
                .with_prefix()
                .with_keys_only()
                .with_max_create_revision(my_rev - 1)
        };
        let txn = Txn::new().and_then([
            TxnOp::get(key.to_vec(), Some(GetOptions::new().with_keys_only())),
            TxnOp::get(
                prefix.to_vec(),
                Some(
                    older()
                        .with_sort(SortTarget::Create, SortOrder::Descend)
                        .with_limit(OLDER_READ),
                ),
            ),
        ]);
        let resp = self
            .call(None, |mut c| {
                let t = txn.clone();
                async move { c.txn(t).await }
            })
            .await?;
        let ops = resp.op_responses();
        let mine = kvs(ops.first())
            .first()
            .is_some_and(|kv| kv.create_revision() == my_rev);
        let newest = kvs(ops.get(1));
        let rev = revision(&resp);
        if newest.iter().all(|kv| is_direct_child(prefix, kv.key())) {
            let older: Vec<Contender> = newest.iter().map(Contender::of).collect();
            return Ok(Queue::of_older(mine, &older, !more(ops.get(1)), rev));
        }
        let p = prefix.to_vec();
        let all = self
            .call(None, |mut c| {
                let p = p.clone();
                async move {
                    c.get(
                        p,
                        Some(older().with_sort(SortTarget::Create, SortOrder::Ascend)),
                    )
                    .await
                }
            })
            .await?;
        let older: Vec<Contender> = all
            .kvs()
            .iter()
            .rev()
            .filter(|kv| is_direct_child(prefix, kv.key()))
            .map(Contender::of)
            .collect();
        Ok(Queue::of_older(mine, &older, true, rev))
    }

    pub(crate) fn held(
        &self,
        name: &str,
        session: &Arc<Session>,
        mut pending: Pending,
        token: i64,
        waited_on: Vec<Vec<u8>>,
        own: Option<(i64, Arc<OwnKeyWatch>, mpsc::UnboundedReceiver<OwnEvent>)>,
    ) -> Guard {
        pending.armed = false;
        for w in pending.watches.drain(..) {
            self.inner.hub.cancel(w);
        }
        let key = std::mem::take(&mut pending.key);
        // A waiter's watch on its own key carries on; a lock taken with no
        // wait gets its watch once it has been held a little while (unless
        // the user opted out): see watch::HELD_WATCH_DELAY.
        let later = own.is_none() && self.inner.watch_held_keys;
        Guard::new(
            self.clone(),
            session.clone(),
            name,
            key,
            token,
            waited_on,
            own,
            later,
        )
    }
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
    recs: &crate::delay::Records,
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

    /// A waiter holds its lock call's future (and its caller's, which may
    /// unlock later) for its whole wait: 10,000 queued waiters, 10,000 of
    /// each. An async fn is as large as its largest inline await, used or
    /// not, so a request awaited inline on a path that most calls never take
    /// (the lock-delay lease grant, unlock's delete) makes each waiter larger
    /// by that request's future (several KB). Requests are boxed where they are made; these bounds fail if
    /// one is inlined again. Futures are built, never polled: no etcd needed.
    #[tokio::test]
    async fn a_waiters_futures_carry_no_request_inline() {
        let mut o = crate::ClientOptions::new(["127.0.0.1:1"]);
        o.lazy_connect = true;
        let c = Client::connect(o).await.unwrap();
        let acquire = c.acquire_n_counted("x", LockOptions::default(), Mode::Wait, None, 1);
        let session = crate::session::Session::new(
            1,
            15,
            Duration::from_secs(1),
            std::time::Instant::now(),
            None,
            Vec::new(),
        );
        let delete = crate::keys::delete_incarnation(&c, &session, b"x/1", 1, &[], true);
        let (a, d) = (
            std::mem::size_of_val(&acquire),
            std::mem::size_of_val(&delete),
        );
        eprintln!("acquire_n_counted future: {a} B, delete_incarnation future: {d} B");
        drop((acquire, delete));
        c.close().await;
        // Boxed, both stay far below the bounds; one request inline takes
        // either above its bound (debug and release builds alike).
        assert!(a < 2048, "acquire_n_counted's future is {a} B");
        assert!(d < 1024, "delete_incarnation's future is {d} B");
    }
}
