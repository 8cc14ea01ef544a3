//! Admission into the client: an acquisition that waits first takes its
//! place in this client's local queue for the name (window.rs), then one of
//! [`ADMITTED`](crate::client::window::ADMITTED) admissions (the
//! acquisitions in flight toward etcd), within the call's deadline, cancel
//! and close. A try is bounded by the request timeout here too. The
//! admission is given back once the call's key is queued in etcd
//! ([`Acquisition::queued`](crate::engine::acquisition::Acquisition::queued)).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::engine::keys::prefix;
use crate::engine::wait::{cancelled, closed_err, timeout_err};
use crate::error::{Error, ErrorCode, Result};
use crate::names::{validate_name, Mode};
use crate::options::LockOptions;

/// What an acquisition was let in with ([`admit`]).
pub(crate) struct Admitted {
    /// When a wait gives up (`None`: never, or not a wait).
    pub(crate) deadline: Option<Instant>,
    /// Its place in this client's local queue for the name (a wait).
    pub(crate) place: Option<crate::client::window::Place>,
    /// Its admission, given back once its key is queued in etcd.
    pub(crate) permit: tokio::sync::OwnedSemaphorePermit,
}

/// When a call in `mode` with `timeout` gives up waiting (`None`: never,
/// or not a wait).
pub(crate) fn deadline_of(mode: Mode, timeout: Option<Duration>) -> Option<Instant> {
    match mode {
        // A timeout too far to be an instant is no limit at all.
        Mode::Wait => timeout.and_then(|t| Instant::now().checked_add(t)),
        _ => None,
    }
}

/// Let an acquisition of `name` in: its place in this client's local
/// queue for the name when it waits (window.rs), then one of
/// [`ADMITTED`](crate::client::window::ADMITTED) admissions, within the call's deadline, cancel and close.
pub(crate) async fn admit(
    client: &Client,
    name: &str,
    mode: Mode,
    opts: &LockOptions,
) -> Result<Admitted> {
    validate_name(name)?;
    client.check_open()?;
    let deadline = deadline_of(mode, opts.timeout);
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

/// Wait for one of [`ADMITTED`](crate::client::window::ADMITTED) admissions until `end`: a wait's own
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
) -> Result<crate::client::window::Place> {
    use crate::client::window::NoPlace;
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
