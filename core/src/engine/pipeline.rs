//! The front of every acquisition: admission into the client (a bounded
//! number in flight, a local queue per name), the session, the deadline,
//! then the `Acquisition` that queues the key and waits by its rule; and the
//! Guard a granted acquisition becomes. Recipes call it with their
//! differences as data (mode, permits, kind, value).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::engine::acquisition::{Acquisition, LEASE_NOT_FOUND};
use crate::engine::keys::prefix;
use crate::engine::wait::{cancelled, closed_err, timeout_err};
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::guard::Guard;
use crate::meta::LockKind;
use crate::names::{validate_name, Mode};
use crate::options::LockOptions;
use crate::transport::Bound;

/// What an acquisition was let in with ([`admit`]).
pub(crate) struct Admitted {
    /// When a wait gives up (`None`: never, or not a wait).
    deadline: Option<Instant>,
    /// Its place in this client's local queue for the name (a wait).
    place: Option<crate::engine::window::Place>,
    /// Its admission, given back once its key is queued in etcd.
    permit: tokio::sync::OwnedSemaphorePermit,
}

/// Acquire one of `permits` permits of `name` (1: a mutex or an election);
/// `value` is what our key carries (the election's proclamation; by default
/// who we are, for `etcdlock status`).
///
/// The public calls above return this future itself, and it is an
/// `async` block rather than an `async fn` (which keeps a second copy
/// of its arguments): every call pending in a burst carries its size.
#[allow(clippy::manual_async_fn)]
pub(crate) fn acquire_n<'a>(
    client: &'a Client,
    name: &'a str,
    opts: LockOptions,
    mode: Mode,
    value: Option<&'a [u8]>,
    permits: u32,
    kind: LockKind,
) -> impl Future<Output = Result<Guard>> + Send + 'a {
    async move {
        opts.validate()?;
        if permits > 1 && opts.lock_delay.is_some_and(|d| !d.is_zero()) {
            return Err(Error::invalid(
                "lock_delay applies to locks and elections, not to semaphore permits",
            ));
        }
        let m = client.inner.metrics.acquiring();
        let _meta = client.meta_wait(name, kind, &opts.metadata);
        let lease_time = opts.lease_time;
        // Admitted before the call's state is built (boxed below): in a
        // burst of calls, those not admitted yet cost only this future.
        let r = match admit(client, name, mode, &opts).await {
            // Built on the heap: the caller's frame, whose size every
            // pending call carries, keeps only a pointer to it.
            Ok(a) => {
                Box::pin(acquire_n_counted(
                    client, name, opts, mode, value, permits, a,
                ))
                .await
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

pub(crate) async fn acquire_n_counted(
    client: &Client,
    name: &str,
    opts: LockOptions,
    mode: Mode,
    value: Option<&[u8]>,
    permits: u32,
    admitted: Admitted,
) -> Result<Guard> {
    let Admitted {
        deadline,
        place: _place,
        permit,
    } = admitted;
    // The call's one bound: its own timeout when it waits, else the
    // request timeout (a try is one round trip plus failover).
    let bound = match mode {
        Mode::Wait => Bound::Wait(deadline),
        _ => client.request_bound(),
    };
    if mode != Mode::Wait {
        // A key of ours this client is still deleting (an abandoned
        // acquisition) must not make the try fail on its own ghost.
        client
            .inner
            .cleanups
            .settled(&prefix(client, name), bound.end())
            .await;
    }
    let delay_secs = opts.delay_secs()?;
    let cancel = opts.cancel.unwrap_or_default();
    let acq = Acquisition {
        value,
        admission: std::sync::Mutex::new(Some(permit)),
        ..Acquisition::new(client, name, mode, bound, opts.timeout, &cancel)
    };
    let mut attempts = 0;
    let mut retried_delay = false;
    loop {
        // The lease grant runs under the call's bound: a wait's timeout
        // (`Timeout`), or a try's request timeout (`Unavailable`).
        let session = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(cancelled(name)),
            s = client.session_by(bound) => s.map_err(|e| acq.bounded(e))?,
        };
        let r = if permits == 1 {
            let delay = match delay_secs {
                0 => Ok(None),
                secs => client
                    .delay_lease(&session, secs, bound)
                    .await
                    .map(Some)
                    .map_err(|e| acq.bounded(e)),
            };
            match delay {
                Ok(delay) => Box::pin(acq.take(&session, delay)).await,
                Err(e) => Err(e),
            }
        } else {
            Box::pin(acq.permit(&session, permits)).await
        };
        // Closing revokes the lease, which deletes our waiter key: whichever of
        // the watch event and the close signal wins, the caller sees Closed.
        let r = match r {
            Err(e) if client.inner.closed.is_cancelled() && e.code() != ErrorCode::Closed => {
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

/// Let an acquisition of `name` in: its place in this client's local
/// queue for the name when it waits (window.rs), then one of
/// [`ADMITTED`](crate::engine::window::ADMITTED) admissions, within the call's deadline, cancel and close.
pub(crate) async fn admit(
    client: &Client,
    name: &str,
    mode: Mode,
    opts: &LockOptions,
) -> Result<Admitted> {
    validate_name(name)?;
    client.check_open()?;
    let deadline = match mode {
        // A timeout too far to be an instant is no limit at all.
        Mode::Wait => opts.timeout.and_then(|t| Instant::now().checked_add(t)),
        _ => None,
    };
    let never = CancellationToken::new();
    let cancel = opts.cancel.as_ref().unwrap_or(&never);
    // Waiters of this client on this lock queue in etcd a few at a time
    // (window.rs); the place is left when the call returns.
    // The waits below are boxed: a call's future keeps only a pointer
    // to a wait's state (its timers, its place in a queue), allocated
    // while it waits, so a burst of calls costs little per call.
    let place = match mode {
        Mode::Wait => {
            Some(Box::pin(enter_window(client, name, deadline, opts.timeout, cancel)).await?)
        }
        _ => None,
    };
    let admissions = client.inner.admissions.clone();
    // A try is bounded by the request timeout here too: the admitted
    // calls may all be waiting for an etcd that does not answer.
    let try_end = match mode {
        Mode::Wait => None,
        _ => client.request_bound().end(),
    };
    let permit = match admissions.clone().try_acquire_owned() {
        Ok(p) => p,
        Err(_) => {
            let end = deadline.or(try_end);
            Box::pin(wait_admission(
                client,
                name,
                admissions,
                end,
                mode,
                opts.timeout,
                cancel,
            ))
            .await?
        }
    };
    Ok(Admitted {
        deadline,
        place,
        permit,
    })
}

/// Wait for one of [`ADMITTED`](crate::engine::window::ADMITTED) admissions until `end`: a wait's own
/// deadline (`Timeout`), or a try's request timeout (`Unavailable`: the
/// admitted calls may all be waiting for an etcd that does not answer).
pub(crate) async fn wait_admission(
    client: &Client,
    name: &str,
    admissions: Arc<tokio::sync::Semaphore>,
    end: Option<Instant>,
    mode: Mode,
    timeout: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<tokio::sync::OwnedSemaphorePermit> {
    // A timer only when there is an end: a burst's waits carry none.
    let mut timer = end.map(|e| Box::pin(tokio::time::sleep_until(e.into())));
    let expired = async {
        match timer.as_mut() {
            Some(t) => t.await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        _ = client.inner.closed.cancelled() => Err(closed_err(name)),
        _ = cancel.cancelled() => Err(cancelled(name)),
        p = admissions.acquire_owned() => p.map_err(|_| closed_err(name)),
        () = expired => Err(match mode {
            Mode::Wait => timeout_err(name, timeout),
            _ => Error::new(
                ErrorCode::Unavailable,
                format!(
                    "lock {}: not admitted within the request timeout: this client's \
                     acquisitions in progress are all waiting for etcd",
                    crate::names::show(name)
                ),
            ),
        }),
    }
}

/// A place in this client's local queue for `name` (see window.rs).
pub(crate) async fn enter_window(
    client: &Client,
    name: &str,
    deadline: Option<Instant>,
    timeout: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<crate::engine::window::Place> {
    use crate::engine::window::NoPlace;
    client
        .inner
        .windows
        .enter(
            &prefix(client, name),
            deadline,
            cancel,
            &client.inner.closed,
        )
        .await
        .map_err(|n| match n {
            NoPlace::Deadline => timeout_err(name, timeout),
            NoPlace::Cancelled => cancelled(name),
            NoPlace::Closed => closed_err(name),
        })
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
        let opts = LockOptions::default();
        let outer = acquire_n(&c, "x", opts.clone(), Mode::Wait, None, 1, LockKind::Mutex);
        let admitted = admit(&c, "x", Mode::Wait, &opts).await.unwrap();
        let acquire = acquire_n_counted(&c, "x", opts, Mode::Wait, None, 1, admitted);
        let session = crate::session::Session::new(
            1,
            15,
            Duration::from_secs(1),
            std::time::Instant::now(),
            None,
            Vec::new(),
        );
        let delete = crate::engine::keys::delete_incarnation(&c, &session, b"x/1", 1, &[], true);
        let (o, a, d) = (
            std::mem::size_of_val(&outer),
            std::mem::size_of_val(&acquire),
            std::mem::size_of_val(&delete),
        );
        eprintln!("acquire_n future: {o} B, acquire_n_counted future: {a} B, delete_incarnation future: {d} B");
        drop((outer, acquire, delete));
        c.close().await;
        // Boxed, both stay far below the bounds; one request inline takes
        // either above its bound (debug and release builds alike).
        assert!(a < 2048, "acquire_n_counted's future is {a} B");
        // What a call not admitted yet costs (see window::ADMITTED).
        assert!(o < 2048, "acquire_n's future is {o} B");
        assert!(d < 1024, "delete_incarnation's future is {d} B");
    }
}

#[cfg(test)]
mod sizes {
    use super::*;

    /// A pending call costs a burst its future's size (every call waiting
    /// for admission holds one): the public calls return the acquisition's
    /// future itself, with no wrapper around it, and its waits are boxed.
    #[tokio::test]
    async fn a_pending_lock_call_is_small() {
        let c = Client::connect(crate::ClientOptions::new(["mem://size"]))
            .await
            .unwrap();
        let o = LockOptions::default();
        let inner = std::mem::size_of_val(&acquire_n(
            &c,
            "x",
            o.clone(),
            Mode::Wait,
            None,
            1,
            LockKind::Mutex,
        ));
        let lock = std::mem::size_of_val(&c.lock("x"));
        let admit = std::mem::size_of_val(&admit(&c, "x", Mode::Wait, &o));
        eprintln!("lock future {lock} B, acquire_n {inner} B, admit {admit} B");
        assert_eq!(lock, inner);
        assert_eq!(std::mem::size_of_val(&c.lock_with("x", o.clone())), inner);
        assert_eq!(std::mem::size_of_val(&c.try_lock("x")), inner);
        assert!(admit < 512, "admit {admit} B");
        assert!(lock < 1024, "lock {lock} B");
        c.close().await;
    }
}
