//! The one acquisition pipeline: what every recipe that queues a key in
//! etcd goes through, from the call to the Txn that queues its key. A
//! recipe's call builds one [`Request`] (name, options, mode, what the key
//! carries, and its [`Recipe`]: the differences as data) and hands it to
//! [`acquire`], which checks it, admits it into the client (admission.rs),
//! opens the session, takes a fresh session when the lease vanished before
//! the key was queued, and queues the key:
//!
//! `Client::lock` -> [`acquire`] -> [`Acquisition::queue`] -> [`run_detached`]
//! -> `Transport::call_in_slot` -> `Transport::attempts` (transport/request.rs).
//!
//! A semaphore's permit (semaphore.rs) and a read lock (rwlock.rs) queue
//! their keys by their own rule from the same loop; the multi-lock
//! (multi.rs) shares its steps (the session, the retry, [`run_detached`]).
//! The Txns themselves and the guard a granted acquisition becomes are in
//! acquisition.rs.

use std::future::Future;
use std::sync::Arc;

use etcd_client::{Txn, TxnResponse};
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::engine::acquisition::{
    created_at, held, put_if_absent, Acquisition, Gated, LEASE_NOT_FOUND,
};
use crate::engine::admission::{admit, Admitted};
use crate::engine::delay;
use crate::engine::keys::prefix;
use crate::engine::queue::{kvs, revision};
use crate::engine::wait::{
    cancelled, closed_err, created_revisions, pending_abandon, InFlight, Pending,
};
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::guard::Guard;
use crate::meta::LockKind;
use crate::names::{is_direct_child, owner_info, Mode};
use crate::options::LockOptions;
use crate::session::Session;
use crate::transport::{Answer, Bound};

/// What a recipe's call asks of the pipeline, built once by the call and
/// consumed by [`acquire`].
pub(crate) struct Request<'a> {
    pub(crate) name: &'a str,
    pub(crate) opts: LockOptions,
    pub(crate) mode: Mode,
    /// What our key carries: an election's proclamation; `None`, who we are
    /// (for `etcdlock status`).
    pub(crate) value: Option<&'a [u8]>,
    pub(crate) recipe: Recipe,
}

/// What a recipe differs by: whose turn it is, and what it may be asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recipe {
    /// One holder, the oldest key ([`Acquisition::queue`]): a mutex (also
    /// the write side of a read-write lock) or an election. The one that
    /// takes a lock-delay.
    Lock(LockKind),
    /// One of N permits of a semaphore (`Acquisition::permit`).
    Permits(u32),
    /// The read side of a read-write lock (`Acquisition::read`).
    Reader,
}

impl Recipe {
    /// A mutex's (and a read-write lock's writer's) recipe.
    pub(crate) const MUTEX: Recipe = Recipe::Lock(LockKind::Mutex);

    /// What its errors call it ("lock" for a semaphore too, whose own
    /// steps name it).
    fn what(self) -> &'static str {
        match self {
            Recipe::Reader => "read lock",
            _ => "lock",
        }
    }

    /// What `etcdlock status` calls a waiter of it.
    fn kind(self) -> LockKind {
        match self {
            Recipe::Lock(kind) => kind,
            Recipe::Permits(_) => LockKind::Semaphore,
            Recipe::Reader => LockKind::RwLock,
        }
    }
}

impl<'a> Request<'a> {
    /// A call that waits for `name` as `opts` says: a timeout of zero is
    /// one try that says `Timeout` when the name is taken.
    pub(crate) fn new(name: &'a str, opts: LockOptions, recipe: Recipe) -> Request<'a> {
        let mode = if opts.timeout == Some(std::time::Duration::ZERO) {
            Mode::Once
        } else {
            Mode::Wait
        };
        Request {
            name,
            opts,
            mode,
            value: None,
            recipe,
        }
    }

    /// One try (`WouldBlock` when taken): a timeout or cancel token in
    /// `opts` is ignored, a try never waits.
    pub(crate) fn trying(name: &'a str, opts: LockOptions, recipe: Recipe) -> Request<'a> {
        let opts = LockOptions {
            timeout: None,
            cancel: None,
            ..opts
        };
        Request {
            mode: Mode::Try,
            ..Request::new(name, opts, recipe)
        }
    }

    /// The options this recipe takes, before anything is sent.
    fn check(&self) -> Result<()> {
        self.opts.validate()?;
        let not_to = match self.recipe {
            Recipe::Lock(_) => return Ok(()),
            Recipe::Permits(_) => "semaphore permits",
            Recipe::Reader => "read locks",
        };
        if self.opts.lock_delay.is_some_and(|d| !d.is_zero()) {
            return Err(Error::invalid(format!(
                "lock_delay applies to locks and elections, not to {not_to}"
            )));
        }
        Ok(())
    }
}

/// Acquire what `req` asks for: check it, admit it, then on a session
/// queue its key and wait by its recipe's rule; a fresh session when the
/// lease vanished before the key was queued ([`Retry`]).
///
/// The public calls return this future itself, and it is an `async` block
/// rather than an `async fn` (which keeps a second copy of its arguments):
/// every call pending in a burst carries its size.
#[allow(clippy::manual_async_fn)]
pub(crate) fn acquire<'a>(
    client: &'a Client,
    req: Request<'a>,
) -> impl Future<Output = Result<Guard>> + Send + 'a {
    async move {
        req.check()?;
        let m = client.inner.metrics.acquiring();
        let _meta = client.meta_wait(req.name, req.recipe.kind(), &req.opts.metadata);
        let lease_time = req.opts.lease_time;
        // Admitted before the call's state is built (boxed below): in a
        // burst of calls, those not admitted yet cost only this future.
        let r = match admit(client, req.name, req.mode, &req.opts).await {
            Ok(admitted) => {
                // Built on the heap: the caller's frame, whose size every
                // pending call carries, keeps only a pointer to it.
                let attempts = Box::pin(async move {
                    let Admitted {
                        deadline,
                        place: _place,
                        permit,
                    } = admitted;
                    let bound = settle(client, req.name, req.mode, deadline).await;
                    let delay_secs = req.opts.delay_secs()?;
                    let cancel = req.opts.cancel.clone().unwrap_or_default();
                    let acq = Acquisition {
                        value: req.value,
                        what: req.recipe.what(),
                        admission: std::sync::Mutex::new(Some(permit)),
                        detect_deadlock: req.opts.detect_deadlock,
                        ..Acquisition::new(
                            client,
                            req.name,
                            req.mode,
                            bound,
                            req.opts.timeout,
                            &cancel,
                        )
                    };
                    let mut retry = Retry::default();
                    loop {
                        let session = acq.session().await?;
                        let r = match req.recipe {
                            Recipe::Lock(_) => match acq.delay_lease(&session, delay_secs).await {
                                Ok(delay) => match Box::pin(acq.queue(&session, delay)).await {
                                    Ok((guard, Gated::Open)) => Ok(guard),
                                    Ok((guard, gated)) => Box::pin(acq.gate(guard, gated)).await,
                                    Err(e) => Err(e),
                                },
                                Err(e) => Err(e),
                            },
                            Recipe::Permits(n) => Box::pin(acq.permit(&session, n)).await,
                            Recipe::Reader => Box::pin(acq.read(&session)).await,
                        };
                        if let Some(r) = retry.after(&acq, &session, delay_secs, r) {
                            return r;
                        }
                    }
                });
                #[cfg(test)]
                tests::saw_attempts(std::mem::size_of_val(&*attempts));
                attempts.await
            }
            Err(e) => Err(e),
        };
        m.finish(&r);
        if let (Ok(g), Some(t)) = (&r, lease_time) {
            g.expire_after(t);
        }
        r
    }
}

/// The call's one bound: its own deadline when it waits, else the request
/// timeout (a try is one round trip plus failover). A try first waits for
/// a key of ours this client is still deleting (an abandoned acquisition),
/// so that it does not fail on its own ghost.
async fn settle(
    client: &Client,
    name: &str,
    mode: Mode,
    deadline: Option<std::time::Instant>,
) -> Bound {
    if mode == Mode::Wait {
        return Bound::Wait(deadline);
    }
    let bound = client.request_bound();
    client
        .inner
        .cleanups
        .settled(&prefix(client, name), bound.end())
        .await;
    bound
}

/// The lease-not-found retry: the lease vanished (revoked, or expired while
/// we were cut off) before we queued, so nothing of ours is in the queue;
/// take a fresh session, at most three times.
#[derive(Default)]
pub(crate) struct Retry {
    attempts: u32,
    retried_delay: bool,
}

impl Retry {
    /// The call's answer after an attempt on `session` ended with `r`, or
    /// `None`: make another attempt.
    pub(crate) fn after<T>(
        &mut self,
        acq: &Acquisition<'_>,
        session: &Session,
        delay_secs: u64,
        r: Result<T>,
    ) -> Option<Result<T>> {
        match r {
            // Closing revokes the lease, which deletes our waiter key: whichever
            // of the watch event and the close signal wins, the caller sees Closed.
            Err(e) if acq.client.inner.closed.is_cancelled() && e.code() != ErrorCode::Closed => {
                Some(Err(closed_err(acq.name)))
            }
            Err(e) if e.message().contains(LEASE_NOT_FOUND) && self.attempts < 3 => {
                self.attempts += 1;
                // With a lock-delay the Txn also wrote under the delay
                // lease, which may be the one that is gone (its renewal
                // failed while the session's went through): forget it and
                // try once more on the same session; only a second
                // refusal says the session's own lease is gone.
                match session.delay_lease(delay_secs) {
                    Some(id) if delay_secs > 0 && !self.retried_delay => {
                        self.retried_delay = true;
                        session.drop_delay_lease(id);
                    }
                    _ => session.mark_lost(LossReason::LeaseExpired),
                }
                None
            }
            r => Some(r),
        }
    }
}

impl Acquisition<'_> {
    /// The session of an attempt, its lease granted under the call's bound:
    /// a wait's timeout (`Timeout`), or a try's request timeout
    /// (`Unavailable`).
    pub(crate) async fn session(&self) -> Result<Arc<Session>> {
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(cancelled(self.name)),
            s = self.client.session_by(self.bound) => s.map_err(|e| self.bounded(e)),
        }
    }

    /// Our delay lease on `session` when the caller asked for a lock-delay
    /// of `secs` seconds.
    async fn delay_lease(&self, session: &Session, secs: u64) -> Result<Option<i64>> {
        if secs == 0 {
            return Ok(None);
        }
        self.client
            .delay_lease(session, secs, self.bound)
            .await
            .map(Some)
            .map_err(|e| self.bounded(e))
    }

    /// Queue our key on `session` and wait our turn (a lock, an election):
    /// the guard, and whether it must still pass the lock-delay gate
    /// ([`Acquisition::gate`]; `delay`: our own delay lease, if the caller
    /// asked for a lock-delay). The Txn is sent right here
    /// ([`run_detached`]).
    pub(crate) async fn queue(
        &self,
        session: &Arc<Session>,
        delay: Option<i64>,
    ) -> Result<(Guard, Gated)> {
        let (client, name, prefix) = (self.client, self.name, &self.prefix);
        let value = self
            .value
            .map(<[u8]>::to_vec)
            .unwrap_or_else(|| owner_info().into_bytes());
        let key = session.reserve_key(prefix);
        let mut pending = Pending::new(client, session, key.clone());
        let recs = delay::delay_records(client, name);
        let txn = self.queue_or_try_txn(session, &mut pending, value.clone(), &recs, delay);
        let resp = run_detached(client, &mut pending, txn, name, self.bound, self.cancel).await;
        self.queued();
        let resp = resp.map_err(|e| self.bounded(e))?;
        let ops = resp.op_responses();

        if self.mode != Mode::Wait {
            if !resp.succeeded() {
                match kvs(ops.first()).first() {
                    Some(kv) if is_direct_child(prefix, kv.key()) => {
                        pending.forget();
                        return Err(self.busy());
                    }
                    _ if crate::engine::delay::blocking(&recs.held, kvs(ops.get(1)), &[])
                        .is_some() =>
                    {
                        pending.forget();
                        return Err(crate::engine::delay::in_delay(
                            name,
                            self.mode,
                            self.timeout,
                        ));
                    }
                    // Only keys (or delay records) of nested names (`name/x/...`)
                    // are there: they are not contenders, so queue once and see.
                    _ => {
                        let g = Box::pin(self.try_past_nested(session, pending, value)).await?;
                        return Ok((g, Gated::Pass(delay)));
                    }
                }
            }
            let token = revision(&resp);
            let g = held(client, name, session, pending, token, Vec::new(), None);
            if delay.is_some() {
                g.set_delay_records(vec![recs.held_of(prefix, &key)]);
            }
            return Ok((g, Gated::Open));
        }
        // Records counted: a holder with a lock-delay is ahead of us or gone
        // before (see delay.rs); with one of our own we put ours when granted.
        let counted = match ops.get(2) {
            Some(etcd_client::TxnOpResponse::Get(r)) => r.count(),
            _ => 1,
        };
        let gate = if delay.is_some() || counted > 0 || !resp.succeeded() {
            Gated::Pass(delay)
        } else {
            Gated::Open
        };

        let (my_rev, queue) = self.place(&key, &resp).await?;
        if queue.pred.is_none() {
            return Ok((
                held(client, name, session, pending, my_rev, Vec::new(), None),
                gate,
            ));
        }
        // Boxed: only contended acquisitions pay for the wait's state.
        let g = Box::pin(self.wait_turn(session, pending, my_rev, queue)).await?;
        Ok((g, gate))
    }

    /// Try/once found only keys of nested names under the prefix: queue once
    /// (those keys are no contenders) and keep the lock only if that made us
    /// the holder among the direct children.
    async fn try_past_nested(
        &self,
        session: &Arc<Session>,
        mut pending: Pending,
        value: Vec<u8>,
    ) -> Result<Guard> {
        let client = self.client;
        let key = pending.key.clone();
        let txn = put_if_absent(&key, value, session.lease);
        let never = CancellationToken::new();
        let resp = run_detached(
            client,
            &mut pending,
            txn,
            self.name,
            client.request_bound(),
            &never,
        )
        .await?;
        let my_rev = created_at(&resp).unwrap_or(0);
        let q = crate::engine::keys::read_queue(client, &self.prefix, &key, my_rev).await?;
        if q.mine && q.pred.is_none() {
            return Ok(held(
                client,
                self.name,
                session,
                pending,
                my_rev,
                Vec::new(),
                None,
            ));
        }
        pending.abandon().await;
        Err(self.busy())
    }
}

/// Run the acquire Txn on the runtime, detached from the caller: a cancel or
/// timeout stops the caller's wait, never the request, and the cleanup
/// learns the Txn's outcome before it deletes the key.
pub(crate) async fn run_detached(
    client: &Client,
    pending: &mut Pending,
    txn: Txn,
    name: &str,
    bound: Bound,
    cancel: &CancellationToken,
) -> Result<TxnResponse> {
    let t = client.inner.transport.clone();
    let closed = client.inner.closed.clone();
    // Wait for a request slot first (nothing written yet, so a cancel here
    // needs no cleanup), then run the request detached.
    let (slot, bound) = tokio::select! {
        biased;
        s = t.slot(bound) => s?,
        _ = cancel.cancelled() => return Err(cancelled(name)),
    };
    // Polled here, not spawned (a task per acquisition cost two thread
    // wake-ups); if the caller gives up, the cleanup carries it on.
    let h: InFlight = Box::pin(async move {
        if closed.is_cancelled() {
            return Answer::sure(Err(Error::new(ErrorCode::Closed, "the client was closed")));
        }
        t.call_in_slot(slot, bound, etcd_client::Client::kv_client, |mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })
        .await
    });
    pending.txn = Some(h);
    // The bound limits the request itself (the transport retries until
    // then); a cancel stops only our wait for it.
    let out = {
        let Some(h) = pending.txn.as_mut() else {
            unreachable!()
        };
        tokio::select! {
            biased;
            r = h => Some(r),
            _ = cancel.cancelled() => None,
        }
    };
    let r = match out {
        Some(joined) => {
            pending.txn = None;
            let Answer {
                result: r,
                uncertain,
            } = joined;
            pending.uncertain |= uncertain;
            if let Ok(resp) = &r {
                pending.revs = created_revisions(resp, &pending.key);
            }
            r
        }
        None => Err(cancelled(name)),
    };
    if r.is_err() {
        // Whatever happened, no key of ours may stay behind: delete it (after
        // the Txn's outcome is known) before answering.
        pending_abandon(pending).await;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::time::Duration;

    thread_local! {
        /// The size of the last attempts future [`acquire`] boxed on this thread.
        static ATTEMPTS: Cell<usize> = const { Cell::new(0) };
    }

    pub(super) fn saw_attempts(size: usize) {
        ATTEMPTS.with(|c| c.set(size));
    }

    /// A waiter holds its lock call's future (and its caller's, which may
    /// unlock later) for its whole wait: 10,000 queued waiters, 10,000 of
    /// each. An async fn is as large as its largest inline await, used or
    /// not, so a request awaited inline on a path that most calls never take
    /// (the lock-delay lease grant, unlock's delete) makes each waiter larger
    /// by that request's future (several KB). Requests are boxed where they
    /// are made; these bounds fail if one is inlined again. The futures are
    /// built, and the call polled once (admitted at once, it boxes its
    /// attempts, whose size it notes, and waits for a session from an
    /// address that never answers): nothing is sent to etcd.
    #[tokio::test]
    async fn a_waiters_futures_carry_no_request_inline() {
        let mut o = crate::options::ClientOptions::new(["127.0.0.1:1"]);
        o.lazy_connect = true;
        let c = Client::connect(o).await.unwrap();
        let opts = LockOptions::default();
        let outer = acquire(&c, Request::new("x", opts.clone(), Recipe::MUTEX));
        let mut call = Box::pin(acquire(&c, Request::new("x", opts, Recipe::MUTEX)));
        std::future::poll_fn(|cx| {
            let _ = call.as_mut().poll(cx);
            std::task::Poll::Ready(())
        })
        .await;
        drop(call);
        let session = crate::session::Session::new(
            1,
            15,
            Duration::from_secs(1),
            std::time::Instant::now(),
            None,
            Vec::new(),
        );
        let delete = crate::guard::keys::delete_incarnation(&c, &session, b"x/1", 1, &[], true);
        let (o, a, d) = (
            std::mem::size_of_val(&outer),
            ATTEMPTS.with(Cell::get),
            std::mem::size_of_val(&delete),
        );
        eprintln!("acquire future: {o} B, its attempts: {a} B, delete_incarnation future: {d} B");
        drop((outer, delete));
        c.close().await;
        assert!(a > 0, "the call was not admitted at its first poll");
        // Boxed, both stay far below the bounds; one request inline takes
        // either above its bound (debug and release builds alike).
        assert!(a < 2048, "acquire's attempts future is {a} B");
        // What a call not admitted yet costs (see window::ADMITTED).
        assert!(o < 2048, "acquire's future is {o} B");
        assert!(d < 1024, "delete_incarnation's future is {d} B");
    }

    /// A pending call costs a burst its future's size (every call waiting
    /// for admission holds one): the public calls return the acquisition's
    /// future itself, with no wrapper around it, and its waits are boxed.
    #[tokio::test]
    async fn a_pending_lock_call_is_small() {
        let c = Client::connect(crate::options::ClientOptions::new(["mem://size"]))
            .await
            .unwrap();
        let o = LockOptions::default();
        let inner =
            std::mem::size_of_val(&acquire(&c, Request::new("x", o.clone(), Recipe::MUTEX)));
        let lock = std::mem::size_of_val(&c.lock("x"));
        let admit = std::mem::size_of_val(&admit(&c, "x", Mode::Wait, &o));
        eprintln!("lock future {lock} B, acquire {inner} B, admit {admit} B");
        assert_eq!(lock, inner);
        assert_eq!(std::mem::size_of_val(&c.lock_with("x", o.clone())), inner);
        assert_eq!(std::mem::size_of_val(&c.try_lock("x")), inner);
        assert!(admit < 512, "admit {admit} B");
        assert!(lock < 1024, "lock {lock} B");
        c.close().await;
    }

    #[test]
    fn a_request_takes_its_mode_from_its_timeout_and_a_try_ignores_it() {
        let zero = LockOptions {
            timeout: Some(Duration::ZERO),
            ..Default::default()
        };
        assert_eq!(
            Request::new("x", zero.clone(), Recipe::MUTEX).mode,
            Mode::Once
        );
        assert_eq!(
            Request::new("x", LockOptions::default(), Recipe::Reader).mode,
            Mode::Wait
        );
        let t = Request::trying("x", zero, Recipe::MUTEX);
        assert_eq!((t.mode, t.opts.timeout), (Mode::Try, None));
    }

    #[test]
    fn a_lock_delay_is_refused_where_it_does_not_apply() {
        let delayed = LockOptions {
            lock_delay: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        assert!(Request::new("x", delayed.clone(), Recipe::MUTEX)
            .check()
            .is_ok());
        let e = Request::new("x", delayed.clone(), Recipe::Reader)
            .check()
            .unwrap_err();
        assert_eq!(
            e.message(),
            "lock_delay applies to locks and elections, not to read locks"
        );
        let e = Request::new("x", delayed, Recipe::Permits(2))
            .check()
            .unwrap_err();
        assert!(e.message().ends_with("not to semaphore permits"), "{e}");
    }
}
