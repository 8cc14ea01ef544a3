//! The wait engine's one loop, as Curator's `LockInternals` drives its
//! recipes: the engine decides nothing about whose turn it is; a
//! [`Driver`] (Curator's `getsTheLock`) says whether we may go on or which
//! keys to wait behind, and [`wait_for`] does the rest the same way for
//! every wait: the select on close, cancel, deadline, the session's end and
//! our own key or hold ([`WaitEnds::next`], [`Own`]), the retry of a read
//! that found etcd unavailable, and the watch of our own key again after
//! etcd dropped it. [`any_deleted`] is the one wait for the keys behind.
//!
//! Its users: an acquisition's wait behind the keys ahead (rule.rs:
//! `Acquisition::wait_on`, with the semaphore's and the read lock's
//! `Rule`, and the mutex's stepping driver of turn.rs), the lock-delay gate
//! (delay.rs), the latch and the barrier (recipes/sync.rs), the last three
//! through [`wait_out`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::error::{Error, ErrorCode, Result};
use crate::guard::keys::{OwnEvent, OwnKeyWatch};
use crate::runtime::sleep_opt;
use crate::session::{Loss, Session};
use crate::watch::WatchEvent;

/// What ends a wait, other than the keys it watches.
#[derive(Debug)]
pub(crate) enum Interrupt {
    /// The client was closed (its lease revoked, our key with it).
    Closed,
    /// The caller's cancellation token fired.
    Cancelled,
    /// The deadline passed.
    Deadline,
    /// The session ended (lease expired, connection lost, client closed).
    SessionLost(Loss),
    /// Our own key was deleted while we waited.
    OwnDeleted,
    /// The hold we wait in ended: lost (`Some`) or released.
    HoldEnded(Option<Loss>),
}

/// What ends a wait besides the keys it watches, in the order every wait
/// checks them: close, cancel, deadline, the session, then our own key or
/// hold ([`Own`]). A wait that has no cancel or no session of its own (a
/// latch, a barrier, the lock-delay gate) leaves them out.
pub(crate) struct WaitEnds<'a> {
    pub(crate) closed: &'a CancellationToken,
    pub(crate) cancel: Option<&'a CancellationToken>,
    pub(crate) deadline: Option<Instant>,
    pub(crate) session: Option<&'a Session>,
}

/// What of ours a wait watches besides the keys ahead: nothing, our queued
/// key (a waiter whose key dies fails at once: etcd issue 19597), or a hold
/// (the lock-delay gate runs while we hold).
pub(crate) enum Own<'a> {
    Nothing,
    Key(&'a mut OwnKey),
    /// The end of a hold: its `LossSignal::wait` (`Some`: lost).
    Hold(Pin<&'a mut (dyn Future<Output = Option<Loss>> + Send)>),
}

/// The watch on our own queued key during a wait.
pub(crate) struct OwnKey {
    key: Vec<u8>,
    pub(crate) id: i64,
    pub(crate) sink: Arc<OwnKeyWatch>,
    pub(crate) rx: mpsc::UnboundedReceiver<OwnEvent>,
    /// etcd dropped the watch (compaction, stream reset): watch again from
    /// the next read.
    reset: bool,
}

impl OwnKey {
    /// Watch our `key` (created at `rev`); its id goes to `watches`.
    pub(crate) fn watch(client: &Client, key: Vec<u8>, rev: i64, watches: &mut Vec<i64>) -> OwnKey {
        let (sink, rx) = OwnKeyWatch::new();
        let id = client.inner.hub.watch(key.clone(), rev, sink.sink());
        watches.push(id);
        OwnKey {
            key,
            id,
            sink,
            rx,
            reset: false,
        }
    }
}

impl Own<'_> {
    /// After a read at `rev`: watch our key again if its watch was reset.
    pub(crate) fn resume(&mut self, client: &Client, watches: &mut Vec<i64>, rev: i64) {
        if let Own::Key(k) = self {
            if k.reset {
                watches.retain(|w| *w != k.id);
                k.id = client.inner.hub.watch(k.key.clone(), rev, k.sink.sink());
                watches.push(k.id);
                k.reset = false;
            }
        }
    }

    /// The next event of ours that matters: `Ok` when our key's watch was
    /// reset (read again), `Err` when the wait ends. Cancel-safe.
    async fn next(&mut self) -> std::result::Result<(), Interrupt> {
        match self {
            Own::Nothing => std::future::pending().await,
            Own::Key(k) => loop {
                match k.rx.recv().await {
                    Some(OwnEvent::Created(_)) => {}
                    Some(OwnEvent::Deleted) => return Err(Interrupt::OwnDeleted),
                    Some(OwnEvent::Reset) | None => {
                        k.reset = true;
                        return Ok(());
                    }
                }
            },
            Own::Hold(l) => Err(Interrupt::HoldEnded(l.as_mut().await)),
        }
    }
}

impl WaitEnds<'_> {
    /// The next of them to happen, or `Ok(())` when the watch on our own key
    /// was reset. Cancel-safe: a `select!` may drop it and call it again.
    /// The one place that waits for close, cancel, a deadline or a loss.
    pub(crate) async fn next(&self, own: &mut Own<'_>) -> std::result::Result<(), Interrupt> {
        let cancel = async {
            match self.cancel {
                Some(c) => c.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let lost = async {
            match self.session {
                Some(s) => s.wait_lost().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = self.closed.cancelled() => Err(Interrupt::Closed),
            _ = cancel => Err(Interrupt::Cancelled),
            _ = sleep_opt(self.deadline) => Err(Interrupt::Deadline),
            l = lost => Err(Interrupt::SessionLost(l)),
            r = own.next() => r,
        }
    }
}

/// What one look at the state says to a waiter.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Turn {
    /// The revision of the read (the keys' watches start after it).
    pub(crate) rev: i64,
    /// The keys to wait behind: the delete of any one may let us go on.
    /// Empty: we may go on now.
    pub(crate) behind: Vec<Vec<u8>>,
    /// The key [`Guard::waited_on`] names for this wait, if the recipe names one.
    pub(crate) blocker: Option<Vec<u8>>,
}

impl Turn {
    /// We may go on now.
    pub(crate) fn go(rev: i64) -> Turn {
        Turn {
            rev,
            behind: Vec::new(),
            blocker: None,
        }
    }

    /// Wait behind `key`, read at `rev`.
    pub(crate) fn behind(rev: i64, key: Vec<u8>, named: bool) -> Turn {
        Turn {
            rev,
            blocker: named.then(|| key.clone()),
            behind: vec![key],
        }
    }
}

/// What drives one wait: the engine asks it for our [`Turn`], and while we
/// must wait, waits for the event that may change it.
pub(crate) trait Driver: Send {
    /// Our turn now: read, or stepped from what an event said. The ids of
    /// the watches it starts go to `watches` (cleaned up with our key).
    fn turn(&mut self, watches: &mut Vec<i64>) -> impl Future<Output = Result<Turn>> + Send;

    /// Wait until `turn` may have changed (a key it waits behind went).
    /// The engine drops it when the wait ends another way, or our key's
    /// watch was reset; the next [`Driver::turn`] reads then.
    fn wake(
        &mut self,
        client: &Client,
        watches: &mut Vec<i64>,
        turn: &Turn,
    ) -> impl Future<Output = ()> + Send;
}

/// One wait's setting: what ends it ([`WaitEnds`], [`Own`]), where the
/// ids of its watches go, and whether it may wait at all.
pub(crate) struct Waiter<'a, 'o> {
    pub(crate) client: &'a Client,
    pub(crate) ends: WaitEnds<'a>,
    pub(crate) own: Own<'o>,
    pub(crate) watches: &'a mut Vec<i64>,
    /// The keys waited behind, in order (each once in a row).
    pub(crate) blockers: Vec<Vec<u8>>,
    /// `false`: look once (a try); a turn that must wait is returned as is.
    pub(crate) may_wait: bool,
    /// The opt-in deadlock check of a queued key: (name, our key's
    /// create_revision), run when the keys we wait behind change.
    pub(crate) cycle_check: Option<(&'a str, i64)>,
}

/// How a wait ends without a turn to go on.
#[derive(Debug)]
pub(crate) enum Stop {
    /// Close, cancel, deadline, loss: [`WaitEnds::next`].
    End(Interrupt),
    /// The driver's read failed.
    Failed(Error),
}

/// The wait engine's one loop: ask `driver` for our turn until it says go
/// (or, for a wait that may not wait, once), waiting in between for its
/// keys or for what ends the wait. A read that finds etcd unavailable is
/// retried with backoff while the session lives and the call may wait.
pub(crate) async fn wait_for<D: Driver>(
    w: &mut Waiter<'_, '_>,
    driver: &mut D,
) -> std::result::Result<Turn, Stop> {
    let mut backoff = Duration::from_millis(25);
    let deadline = w.ends.deadline;
    let mut cycles = w
        .cycle_check
        .map(|(name, my_rev)| crate::engine::cycle::CycleWatch::new(name, my_rev, deadline));
    loop {
        let turn = match driver.turn(w.watches).await {
            Ok(t) => t,
            Err(e)
                if e.code() == ErrorCode::Unavailable
                    && w.may_wait
                    && w.ends.session.is_some_and(|s| s.alive()) =>
            {
                tokio::select! {
                    biased;
                    i = w.ends.next(&mut w.own) => i.map_err(Stop::End)?,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
            Err(e) => return Err(Stop::Failed(e)),
        };
        backoff = Duration::from_millis(25);
        w.own.resume(w.client, w.watches, turn.rev);
        if turn.behind.is_empty() || !w.may_wait {
            return Ok(turn);
        }
        if let Some(b) = &turn.blocker {
            if w.blockers.last() != Some(b) {
                w.blockers.push(b.clone());
            }
        }
        if let Some(c) = cycles.as_mut() {
            if let Some(e) = c.on_turn(w.client, &turn.behind).await {
                return Err(Stop::Failed(e));
            }
        }
        let wake = driver.wake(w.client, w.watches, &turn);
        tokio::pin!(wake);
        loop {
            let due = cycles.as_ref().map(|c| c.due());
            tokio::select! {
                biased;
                i = w.ends.next(&mut w.own) => {
                    i.map_err(Stop::End)?;
                    break;
                }
                _ = &mut wake => break,
                _ = sleep_opt(due) => {
                    if let Some(c) = cycles.as_mut() {
                        if let Some(e) = c.recheck(w.client).await {
                            return Err(Stop::Failed(e));
                        }
                    }
                }
            }
        }
    }
}

/// [`wait_for`] for a wait with no queued key of its own (the lock-delay
/// gate, a latch, a barrier): its watches end with the call.
pub(crate) async fn wait_out<D: Driver>(
    client: &Client,
    ends: WaitEnds<'_>,
    own: Own<'_>,
    may_wait: bool,
    driver: &mut D,
) -> std::result::Result<Turn, Stop> {
    let mut watches = Vec::new();
    let mut w = Waiter {
        client,
        ends,
        own,
        watches: &mut watches,
        blockers: Vec::new(),
        may_wait,
        cycle_check: None,
    };
    let r = wait_for(&mut w, driver).await;
    for id in watches {
        client.inner.hub.cancel(id);
    }
    r
}

/// Stop the watches in `live`, and forget them in `watches`.
pub(crate) fn drop_watches(client: &Client, live: &mut Vec<i64>, watches: &mut Vec<i64>) {
    for id in live.iter() {
        client.inner.hub.cancel(*id);
    }
    watches.retain(|w| !live.contains(w));
    live.clear();
}

/// The one wait-for-delete: watch `turn.behind` from `turn.rev` (the
/// revision of the read that found them) on the client's watch stream and
/// return when any of them is deleted, or its watch is reset, or a watch
/// starts past `turn.rev` and `unchanged` (one read) says the keys to watch
/// are no longer these. A delete between the read and the watch's start is
/// never missed: the watch starts at `turn.rev + 1`, or `unchanged` closes
/// the gap. The watches end with the call; if the call is dropped, their
/// ids stay in `live` (and `watches`) for the caller to stop.
pub(crate) async fn any_deleted<F, Fut>(
    client: &Client,
    watches: &mut Vec<i64>,
    live: &mut Vec<i64>,
    turn: &Turn,
    mut unchanged: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    drop_watches(client, live, watches);
    let (hub, after) = (&client.inner.hub, turn.rev);
    let (tx, mut rx) = mpsc::unbounded_channel::<WatchEvent>();
    for k in &turn.behind {
        let tx = tx.clone();
        let id = hub.watch(
            k.clone(),
            after,
            Arc::new(move |ev| {
                let _ = tx.send(ev);
            }),
        );
        live.push(id);
        watches.push(id);
    }
    drop(tx);
    while let Some(ev) = rx.recv().await {
        match ev {
            WatchEvent::Created { rev } if rev > after => {
                if !unchanged().await {
                    break;
                }
            }
            WatchEvent::Created { .. } => {}
            WatchEvent::Deleted { .. } | WatchEvent::Reset => break,
        }
    }
    drop_watches(client, live, watches);
}

/// A driver's wake for one key: no read closes a gap, the next turn does.
pub(crate) async fn key_deleted(
    client: &Client,
    watches: &mut Vec<i64>,
    live: &mut Vec<i64>,
    turn: &Turn,
) {
    any_deleted(client, watches, live, turn, || async { false }).await
}
