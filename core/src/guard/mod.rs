//! A held lock: its state, its release, and the signals of its end.

mod guarded;
mod handles;
pub(crate) mod reentry;
pub(crate) use guarded::{delete_all, get_all, put_all};
mod cell;
mod state;
use cell::StateCell;

use crate::poison::Locked;
pub(crate) use handles::WeakHold;
use state::{end_hold, observed};

use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use tokio::sync::watch;

use crate::client::Client;
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::guard::keys::{
    delete_incarnation, delete_until_gone, loss_now, why_deleted, OwnKeyListener, OwnKeyWatch,
    OwnWatch,
};
use crate::names::show;
use crate::session::{Loss, OnLoss, Session};
use crate::watch::Later;

pub(crate) mod keys;
mod loss;

/// Where a guard stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardState {
    /// We hold the lock.
    Held,
    /// Released by `unlock` (or drop).
    Released,
    /// The hold ended without `unlock`.
    Lost(Loss),
}

impl GuardState {
    /// The name every language shows: `"held"`, `"released"` or `"lost"`.
    pub fn name(&self) -> &'static str {
        match self {
            GuardState::Held => "held",
            GuardState::Released => "released",
            GuardState::Lost(_) => "lost",
        }
    }
}

impl Shared {
    /// The hold's state (every handle's, until one is unlocked alone).
    fn hold_state(&self) -> GuardState {
        let s = &self.session;
        let stored = self.state.get();
        let session_loss = if s.alive() { None } else { s.loss() };
        match observed(stored, s.alive(), session_loss, s.deadline()) {
            // The session settled the loss before this guard heard of it: record it.
            GuardState::Lost(loss) if stored == GuardState::Held && session_loss.is_some() => {
                self.mark_lost(loss);
                self.state.get()
            }
            st => st,
        }
    }
}

struct Shared {
    client: Client,
    session: Arc<Session>,
    name: String,
    key: Vec<u8>,
    token: i64,
    waited_on: Vec<Vec<u8>>,
    state: StateCell,
    /// The watch on our key (one id on the client's stream), while held.
    watch_id: Mutex<Option<i64>>,
    /// Our entry in the session's loss listeners.
    listener: Mutex<Option<u64>>,
    /// A background delete of our key is pending: the key name must stay
    /// reserved until it is done, or a new acquisition on this session could
    /// reuse the name and have its fresh key deleted by it.
    releasing: std::sync::atomic::AtomicBool,
    /// When the hold began (for the client's hold-time metrics).
    started: std::time::Instant,
    /// Our lock-delay records (see delay.rs), deleted with our key by a
    /// clean release.
    records: Mutex<Vec<Vec<u8>>>,
    /// Handles of this hold not yet ended: 1, plus one per re-entry
    /// ([`Client::lock_reentrant`]). The hold is released when the last
    /// handle ends (unlocked or dropped).
    handles: std::sync::atomic::AtomicUsize,
    me: Weak<Shared>,
}

/// A held lock: its key, lease, fencing token, loss notification, guarded
/// operations and `unlock`. Dropping a guard that is still held releases the
/// lock in the background. All methods take `&self`, so a guard can be shared
/// (e.g. in an `Arc`) by the bindings.
pub struct Guard {
    shared: Arc<Shared>,
    /// This handle was unlocked (its count in `Shared::handles` given back).
    done: std::sync::atomic::AtomicBool,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("name", &self.shared.name)
            .field("key", &self.key())
            .field("fencing_token", &self.shared.token)
            .field("state", &self.shared.state.get())
            .finish()
    }
}

/// What a won acquisition hands to its guard: the fencing token (our key's
/// create_revision), the keys it waited behind, the watch on our own key a
/// waiter already runs, and whether a guard taken with no wait should start
/// one once it has been held a while (see `watch::HELD_WATCH_DELAY`).
pub(crate) struct Grant {
    pub(crate) token: i64,
    pub(crate) waited_on: Vec<Vec<u8>>,
    pub(crate) own: Option<OwnWatch>,
    pub(crate) watch_later: bool,
}

impl Guard {
    pub(crate) fn new(
        client: Client,
        session: Arc<Session>,
        name: &str,
        key: Vec<u8>,
        grant: Grant,
    ) -> Guard {
        let Grant {
            token,
            waited_on,
            own,
            watch_later,
        } = grant;
        tracing::debug!(lock = name, fencing_token = token, "acquired");
        let state = StateCell::new(GuardState::Held);
        let shared = Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            client,
            session,
            name: name.to_string(),
            key,
            token,
            waited_on,
            state,
            watch_id: Mutex::new(None),
            listener: Mutex::new(None),
            releasing: std::sync::atomic::AtomicBool::new(false),
            started: std::time::Instant::now(),
            records: Mutex::new(Vec::new()),
            handles: std::sync::atomic::AtomicUsize::new(1),
        });
        shared.client.inner.metrics.hold_started(shared.started);
        shared.client.inner.meta.hold_started(&shared.name);
        // No task per guard: the session tells us when it is lost, the client's
        // watch stream when our key goes.
        let as_loss: Weak<dyn OnLoss> = Arc::downgrade(&shared) as Weak<dyn OnLoss>;
        let id = shared.session.listen(as_loss);
        *shared.listener.locked() = Some(id);
        if let Some((watch_id, w, pending)) = own {
            *shared.watch_id.locked() = Some(watch_id);
            let as_key: Weak<dyn OwnKeyListener> =
                Arc::downgrade(&shared) as Weak<dyn OwnKeyListener>;
            w.hand_over(as_key, pending);
        }
        if watch_later {
            let as_later: Weak<dyn Later> = Arc::downgrade(&shared) as Weak<dyn Later>;
            shared.client.inner.hub.later(as_later);
        }
        if shared.state.get() != GuardState::Held {
            shared.detach();
        }
        Guard {
            shared,
            done: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Our key in etcd (with the namespace), e.g. `orders/694d7a3e4b2c8f05`.
    pub fn key(&self) -> String {
        String::from_utf8_lossy(&self.shared.key).into_owned()
    }

    /// Our key as bytes.
    pub fn key_bytes(&self) -> &[u8] {
        &self.shared.key
    }

    /// The keys this acquisition waited on, in order: each is the key created
    /// just before ours that was still present (empty if uncontended). Handy for
    /// diagnosing queues; the tests use it to prove there is no herd.
    pub fn waited_on(&self) -> Vec<String> {
        self.shared
            .waited_on
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect()
    }

    /// The session's lease id.
    pub fn lease_id(&self) -> i64 {
        self.shared.session.lease
    }

    /// The fencing token: our key's create_revision. It strictly increases from
    /// one holder of a lock to the next; hand it to resources that can reject
    /// writes from a stale holder.
    pub fn fencing_token(&self) -> i64 {
        self.shared.token
    }

    /// True while the lock is held: not unlocked, not reported lost, and inside
    /// the local validity window (checked against the monotonic clock now, so it
    /// turns false on time even if no task has run yet).
    pub fn is_held(&self) -> bool {
        self.shared.state.get() == GuardState::Held
            && self.shared.session.alive()
            && !self.ended_alone()
    }

    /// The current state.
    pub fn state(&self) -> GuardState {
        if self.ended_alone() && self.shared.state.get() == GuardState::Held {
            // This handle was unlocked; a re-entry still holds the lock.
            return GuardState::Released;
        }
        self.shared.hold_state()
    }

    /// How the hold ended, if it was lost.
    pub fn loss(&self) -> Option<Loss> {
        match self.state() {
            GuardState::Lost(l) => Some(l),
            _ => None,
        }
    }

    /// The instant at which the hold ends locally unless another keep-alive is
    /// acknowledged before then.
    pub fn valid_until(&self) -> Instant {
        self.shared.session.deadline()
    }

    /// Resolves when the hold ends: `Some(loss)` if it was lost, `None` if it
    /// was released by `unlock`.
    pub async fn wait_lost(&self) -> Option<Loss> {
        self.lost_signal().wait().await
    }

    /// A receiver that sees every state change (for bindings that push events).
    pub fn subscribe(&self) -> watch::Receiver<GuardState> {
        self.shared.state.subscribe()
    }

    /// Whether the session's keep-alive renewal is failing now: `Failing`
    /// once no keep-alive has been acknowledged for an interval past when one
    /// was due, with the instant the hold ends unless one gets through; `Ok`
    /// again when one does (Redisson users ask for this, #4698). A hold that
    /// is failing is still held: this is the time to pause guarded work, not
    /// to assume the lock is gone. [`Guard::renewal_changes`] sees each change.
    pub fn renewal(&self) -> crate::session::Renewal {
        self.shared.session.renewal()
    }

    /// Every change of [`Guard::renewal`] (Failing, then Ok on recovery), as a
    /// receiver that does not keep the guard alive; it ends with the session.
    pub fn renewal_changes(&self) -> watch::Receiver<crate::session::Renewal> {
        self.shared.session.renewal_changes()
    }

    /// The end of this hold as an owned value that does not keep the guard
    /// (or its lock) alive, like Go's `Session.Done()`: hand it to a task or
    /// another thread and await [`LossSignal::wait`].
    pub fn lost_signal(&self) -> LossSignal {
        LossSignal {
            rx: self.shared.state.subscribe(),
            session: self.shared.session.clone(),
        }
    }

    /// Past the local deadline, while the session asks etcd why (at most
    /// half the margin): wait for its answer, so that an operation refused
    /// for the loss gives etcd's reason, and the loss event has fired by the
    /// time the caller sees the refusal.
    async fn settle_loss(&self) {
        let s = &self.shared.session;
        if self.shared.state.get() == GuardState::Held && !s.alive() && s.loss().is_none() {
            let _ = tokio::time::timeout(s.reason_wait(), s.wait_lost()).await;
        }
    }

    fn check_held(&self) -> Result<()> {
        match self.state() {
            GuardState::Held => Ok(()),
            GuardState::Released => Err(Error::new(
                ErrorCode::NotHeld,
                format!(
                    "lock {} was already released by this handle",
                    show(&self.shared.name)
                ),
            )),
            GuardState::Lost(l) => Err(Error::lost(
                l.reason,
                format!("lock {} was lost ({})", show(&self.shared.name), l.reason),
            )),
        }
    }

    /// Release the lock: delete our key. Idempotent (a second call is `Ok`).
    /// If etcd is unreachable the delete is retried in the background until the
    /// lease would have expired anyway, and `Ok` is returned. Returns `LockLost`
    /// if the hold had already been lost (known before, or found at unlock: our
    /// key was gone), so the caller learns that its critical section may not
    /// have been protected to the end.
    pub async fn unlock(&self) -> Result<()> {
        let first = !self.done.load(std::sync::atomic::Ordering::SeqCst);
        if !self.end_handle() {
            // A re-entry still holds the lock: only this handle ends.
            return if first {
                match self.shared.state.get() {
                    GuardState::Lost(l) => Err(Error::lost(
                        l.reason,
                        format!(
                            "lock {} had been lost ({})",
                            show(&self.shared.name),
                            l.reason
                        ),
                    )),
                    _ => Ok(()),
                }
            } else {
                Ok(())
            };
        }
        let prev = self.shared.state.get();
        match prev {
            GuardState::Released => return Ok(()),
            GuardState::Lost(_) | GuardState::Held => {}
        }
        self.settle_loss().await;
        let was = self.state();
        let mut ended = false;
        self.shared.state.send_if_modified(|s| {
            ended = end_hold(s, GuardState::Released);
            if ended {
                self.shared
                    .client
                    .inner
                    .metrics
                    .hold_ended(self.shared.started, None);
                self.shared.client.inner.meta.hold_ended(&self.shared.name);
            }
            ended
        });
        self.shared.detach();
        let sh = self.shared.clone();
        let del = async move {
            // Of our incarnation only: a copy of this request that reaches
            // etcd late cannot delete the next key this session makes here.
            // A plain delete only if this call ended the hold: then no other
            // delete of the key (a lease_time expiry's) runs beside it.
            let records = sh.records.locked().clone();
            match delete_incarnation(&sh.client, &sh.session, &sh.key, sh.token, &records, ended)
                .await
            {
                Ok(deleted) => {
                    tracing::debug!(lock = %sh.name, "released");
                    sh.session.release_key(&sh.key);
                    if deleted {
                        return None;
                    }
                    // Our key was already gone: the hold ended earlier, unseen
                    // (the key watch was off or not yet told), and someone may
                    // have held the lock since. Say so, with etcd's reason.
                    let reason = why_deleted(&sh.client, &sh.session).await;
                    if reason == LossReason::ClientClosed {
                        // This client closed while the unlock was on its way:
                        // revoking our own lease released the key; nothing was lost.
                        return None;
                    }
                    tracing::warn!(lock = %sh.name, %reason, "unlock found the lock already lost");
                    Some(reason)
                }
                Err(e) => {
                    tracing::warn!(lock = %sh.name, error = %e, "unlock could not reach etcd; retrying in the background");
                    sh.release_in_background();
                    None
                }
            }
        };
        let mut found_lost = None;
        if self.shared.client.is_closed() {
            // Closing revoked the lease; the key is gone with it.
        } else if let GuardState::Lost(_) = was {
            // Known lost: don't make the caller wait on an etcd that may be gone.
            self.shared.release_in_background();
        } else {
            found_lost = del.await;
        }
        match (was, found_lost) {
            (GuardState::Lost(l), _) => Err(Error::lost(
                l.reason,
                format!("lock {} had been lost before unlock ({})", show(&self.shared.name), l.reason),
            )),
            (_, Some(reason)) => Err(Error::lost(
                reason,
                format!("lock {} had been lost before unlock ({reason}): its key was gone when unlock came", show(&self.shared.name)),
            )),
            _ => Ok(()),
        }
    }

    /// The client this guard came from.
    pub fn client(&self) -> &Client {
        &self.shared.client
    }

    pub(crate) fn session(&self) -> &Arc<Session> {
        &self.shared.session
    }

    /// Keys a clean release deletes with ours (the lock-delay records).
    pub(crate) fn set_delay_records(&self, keys: Vec<Vec<u8>>) {
        *self.shared.records.locked() = keys;
    }

    /// End the hold when `after` has passed (the acquisition's lease time):
    /// the guard reports `LeaseExpired`, then the key is deleted (with its
    /// lock-delay records: the hold ran its course, no delay applies).
    pub(crate) fn expire_after(&self, after: std::time::Duration) {
        let weak = Arc::downgrade(&self.shared);
        let at = tokio::time::Instant::now() + after;
        self.shared.client.inner.handle.spawn(async move {
            tokio::time::sleep_until(at).await;
            let Some(sh) = weak.upgrade() else { return };
            if sh.state.get() != GuardState::Held {
                return;
            }
            // This client's own try_lock on the name waits for the delete
            // (it never meets its own ghost), as after an abandoned wait.
            let ticket =
                crate::client::cleanups::CleanupTicket::new(&sh.client.inner.cleanups, &sh.key);
            // Only if this ends the hold: an unlock that ended it first
            // deletes the key itself.
            if !sh.mark_lost(Loss {
                reason: LossReason::LeaseExpired,
                at: Instant::now(),
            }) {
                return;
            }
            sh.releasing
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let records = sh.records.locked().clone();
            delete_until_gone(
                &sh.client,
                &sh.session,
                &sh.key,
                Some(sh.token),
                false,
                &records,
            )
            .await;
            sh.session.release_key(&sh.key);
            drop(ticket);
        });
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.end_handle() {
            // A re-entry still holds the lock.
            return;
        }
        let st = self.shared.state.get();
        if let GuardState::Lost(_) = st {
            // Our key is gone (or dies with the lost session); free the name for
            // reuse, unless a background delete of it is still pending (it frees the
            // name when done).
            if !self
                .shared
                .releasing
                .load(std::sync::atomic::Ordering::SeqCst)
            {
                self.shared.session.release_key(&self.shared.key);
            }
        }
        if st != GuardState::Held || self.shared.client.is_closed() {
            return;
        }
        let sh = &self.shared;
        sh.state.send_if_modified(|s| {
            let ended = end_hold(s, GuardState::Released);
            if ended {
                sh.client.inner.metrics.hold_ended(sh.started, None);
                sh.client.inner.meta.hold_ended(&sh.name);
            }
            ended
        });
        self.shared.detach();
        self.shared.release_in_background();
    }
}

/// The end of a hold, owned: see [`Guard::lost_signal`].
#[derive(Clone)]
pub struct LossSignal {
    rx: watch::Receiver<GuardState>,
    session: Arc<Session>,
}

impl fmt::Debug for LossSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LossSignal")
            .field("state", &*self.rx.borrow())
            .finish()
    }
}

impl LossSignal {
    /// Resolves when the hold ends: `Some(loss)` if it was lost, `None` if it
    /// was released (or the guard is gone).
    pub async fn wait(&mut self) -> Option<Loss> {
        loop {
            match *self.rx.borrow_and_update() {
                GuardState::Held => {}
                GuardState::Released => return None,
                GuardState::Lost(l) => return Some(l),
            }
            tokio::select! {
                r = self.rx.changed() => if r.is_err() { return None },
                // The session's watchdog marks the guard too; this covers a guard
                // dropped while its session dies.
                l = self.session.wait_lost() => return Some(l),
            }
        }
    }

    /// The state now, without waiting.
    pub fn state(&self) -> GuardState {
        let s = &self.session;
        observed(*self.rx.borrow(), s.alive(), s.loss(), s.deadline())
    }
}
