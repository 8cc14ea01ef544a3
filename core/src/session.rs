//! A session is one lease shared by every lock of a client, kept alive by one
//! background task. It owns the loss rule: the hold ends locally at
//! (send time of the last acknowledged keep-alive) + TTL - margin, measured on
//! the monotonic clock, which is before etcd can expire the lease and grant the
//! lock to someone else (etcd's clock starts after our send). The mutex code
//! never touches keep-alive; it asks the session whether it is still alive.
//!
//! An acknowledgement counts only once a linearizable read, sent after it
//! came, is answered in the same raft term ([`Session::renew_on`]): a leader
//! cut off from its peers renews leases until it notices and steps down,
//! while the majority's new leader never sees those renewals, so an answer
//! from it alone proves nothing past the new leader's own expiry.
//!
//! Layer: above the transport, below guards, the engine and the recipes. It
//! owns the lease, the keep-alive stream (keepalive.rs) and the loss rule,
//! and reaches etcd only through the transport's doors: the unary door for
//! grants and revokes, the stream door for the keep-alive stream and the
//! checks pinned to its member.

use crate::poison::Locked;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::error::LossReason;
use crate::transport::{Pinned, Transport};

mod keepalive;
mod patience;

/// Told once when the session is lost (a held lock's guard).
pub(crate) trait OnLoss: Send + Sync {
    fn on_loss(&self, loss: Loss);
}

/// Whether the session's renewal is failing: see [`crate::Guard::renewal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// The lease is proved alive on time: a keep-alive's answer (or, when
    /// answers are late, etcd's time-to-live) came for a request sent within
    /// the last keep-alive interval plus the member silence.
    Ok,
    /// No request has proved the lease alive for that long: the hold is
    /// still valid until `valid_until` (monotonic), and ends then unless a
    /// keep-alive gets through. Guarded work can pause.
    Failing {
        /// When the hold ends locally unless renewed.
        valid_until: Instant,
    },
}

/// The end of a session, with when the hold ended locally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loss {
    /// Why.
    pub reason: LossReason,
    /// When the local hold ended (monotonic).
    pub at: Instant,
}

pub(crate) struct Session {
    pub(crate) lease: i64,
    pub(crate) ttl: i64,
    margin: Duration,
    /// The configured keep-alive interval, if any (else derived from the TTL).
    keepalive: Option<Duration>,
    /// Local validity deadline; only ever moves forward from acknowledged keep-alives.
    deadline: Mutex<Instant>,
    lost: watch::Sender<Option<Loss>>,
    /// Send time of the last request that proved the lease alive (a
    /// keep-alive, a time-to-live, or the grant).
    last_ack: Mutex<Instant>,
    renewal: watch::Sender<Renewal>,
    /// Lock keys in use (held or waiting) on this session, so that concurrent
    /// acquisitions of one name never share a key (etcd PR 11364).
    keys: Mutex<HashSet<Vec<u8>>>,
    /// Keys of `keys` that stay reserved for the session's life: a delete of
    /// one may still reach etcd ([`Session::retire_key`]).
    retired: Mutex<HashSet<Vec<u8>>>,
    /// Guards to tell when the session is lost: a map entry per held lock,
    /// instead of a task per guard.
    listeners: Mutex<HashMap<u64, Weak<dyn OnLoss>>>,
    next_listener: AtomicU64,
    pub(crate) stop: CancellationToken,
    /// Leases that live as long as this session does (renewed right after
    /// each of its acknowledged keep-alives, never after it is lost): one per
    /// lock-delay in whole seconds (TTL + delay), and the shared leases of
    /// the latches and barriers this client has open (with their handles).
    delay_leases: Mutex<HashMap<u64, i64>>,
    shared_leases: Mutex<HashMap<i64, usize>>,
    /// The key the read that checks a renewal reads ([`Session::check`]):
    /// the lock key reserved last (RBAC lets the client read its own keys),
    /// or, before the first, a key of the client's namespace.
    probe: Mutex<Vec<u8>>,
}

impl Session {
    /// `probe`: the key read to check renewals until a lock key is reserved.
    pub(crate) fn new(
        lease: i64,
        ttl: i64,
        margin: Duration,
        granted_at: Instant,
        keepalive: Option<Duration>,
        probe: Vec<u8>,
    ) -> Arc<Session> {
        let (lost, _) = watch::channel(None);
        Arc::new(Session {
            lease,
            ttl,
            margin,
            keepalive,
            deadline: Mutex::new(
                granted_at + Duration::from_secs(ttl as u64).saturating_sub(margin),
            ),
            lost,
            last_ack: Mutex::new(granted_at),
            renewal: watch::channel(Renewal::Ok).0,
            keys: Mutex::new(HashSet::new()),
            retired: Mutex::new(HashSet::new()),
            listeners: Mutex::new(HashMap::new()),
            next_listener: AtomicU64::new(1),
            stop: CancellationToken::new(),
            delay_leases: Mutex::new(HashMap::new()),
            shared_leases: Mutex::new(HashMap::new()),
            probe: Mutex::new(probe),
        })
    }

    /// The local validity deadline.
    pub(crate) fn deadline(&self) -> Instant {
        *self.deadline.locked()
    }

    /// A request sent at `sent` proved the lease alive for `ttl` more seconds
    /// (a keep-alive's answer, or a time-to-live's). The deadline moves to
    /// `sent` + `ttl` - margin if that is later, and renewal is on time again
    /// if the request was sent within the last keep-alive interval: the
    /// answer to a keep-alive sent before etcd stalled (answered in order
    /// once etcd is back) moves the deadline but leaves renewal failing until
    /// the answer to a later one comes, instead of on time and at once
    /// overdue again.
    /// A hold whose deadline has passed stays ended: a proof that arrives
    /// late (etcd was slow, or a new leader renewed the lease) does not
    /// revive it, since someone may have acted on `is_held()` turning false.
    fn extend(&self, sent: Instant, ttl: i64) {
        let new = sent + Duration::from_secs(ttl.max(0) as u64).saturating_sub(self.margin);
        let mut d = self.deadline.locked();
        if Instant::now() >= *d {
            return;
        }
        if new > *d {
            *d = new;
        }
        drop(d);
        {
            let mut last = self.last_ack.locked();
            *last = (*last).max(sent);
        }
        if Instant::now() < sent + self.interval() {
            self.renewal
                .send_if_modified(|r| std::mem::replace(r, Renewal::Ok) != Renewal::Ok);
        }
    }

    /// Send time of the last request that proved the lease alive.
    fn last_proof(&self) -> Instant {
        *self.last_ack.locked()
    }

    /// How long the loss's reason can take once the deadline has passed
    /// (see [`Session::why_lost`]), with room for the watchdog to wake.
    pub(crate) fn reason_wait(&self) -> Duration {
        self.margin / 2 + Duration::from_millis(100)
    }

    /// Whether renewal is failing now.
    pub(crate) fn renewal(&self) -> Renewal {
        *self.renewal.borrow()
    }

    /// Every change of [`Session::renewal`].
    pub(crate) fn renewal_changes(&self) -> watch::Receiver<Renewal> {
        self.renewal.subscribe()
    }

    /// Alive now: not marked lost and inside the validity window.
    pub(crate) fn alive(&self) -> bool {
        self.lost.borrow().is_none() && Instant::now() < self.deadline()
    }

    pub(crate) fn loss(&self) -> Option<Loss> {
        *self.lost.borrow()
    }

    /// Mark the session lost (first reason wins) and tell every listener. The
    /// hold ended no later than the deadline.
    pub(crate) fn mark_lost(&self, reason: LossReason) {
        let at = Instant::now().min(self.deadline());
        self.lost.send_if_modified(|cur| {
            if cur.is_none() {
                *cur = Some(Loss { reason, at });
                true
            } else {
                false
            }
        });
        self.stop.cancel();
        let loss = self.loss().unwrap_or(Loss { reason, at });
        let listeners: Vec<_> = self.listeners.locked().drain().collect();
        for (_, l) in listeners {
            if let Some(l) = l.upgrade() {
                l.on_loss(loss);
            }
        }
    }

    /// Tell `l` when the session is lost (at once if it already is). Returns an
    /// id for [`Session::unlisten`].
    pub(crate) fn listen(&self, l: Weak<dyn OnLoss>) -> u64 {
        let id = self.next_listener.fetch_add(1, Ordering::Relaxed);
        self.listeners.locked().insert(id, l.clone());
        if let Some(loss) = self.loss() {
            self.listeners.locked().remove(&id);
            if let Some(l) = l.upgrade() {
                l.on_loss(loss);
            }
        }
        id
    }

    pub(crate) fn unlisten(&self, id: u64) {
        self.listeners.locked().remove(&id);
    }

    /// Resolves when the session is lost.
    pub(crate) async fn wait_lost(&self) -> Loss {
        let mut rx = self.lost.subscribe();
        loop {
            if let Some(l) = *rx.borrow_and_update() {
                return l;
            }
            if rx.changed().await.is_err() {
                return Loss {
                    reason: LossReason::ClientClosed,
                    at: Instant::now(),
                };
            }
        }
    }

    /// Reserve a unique key under `prefix` for this session.
    pub(crate) fn reserve_key(&self, prefix: &[u8]) -> Vec<u8> {
        self.reserve_key_marked(prefix, "")
    }

    /// [`Session::reserve_key`] with `mark` appended (a reader's `-r`).
    pub(crate) fn reserve_key_marked(&self, prefix: &[u8], mark: &str) -> Vec<u8> {
        let mut keys = self.keys.locked();
        use std::io::Write as _;
        let mut key = Vec::with_capacity(prefix.len() + 24);
        key.extend_from_slice(prefix);
        let _ = write!(key, "{:x}{mark}", self.lease);
        // Further keys on one prefix take the smallest free suffix, so a
        // client's keys repeat and the watches on them are reused (watch.rs).
        let mut n = 0u64;
        while keys.contains(&key) {
            n += 1;
            key.truncate(prefix.len());
            let _ = write!(key, "{:x}_{n}{mark}", self.lease);
        }
        keys.insert(key.clone());
        *self.probe.locked() = key.clone();
        key
    }

    /// The lease for a lock-delay of `secs` seconds on this session, if granted.
    pub(crate) fn delay_lease(&self, secs: u64) -> Option<i64> {
        self.delay_leases.locked().get(&secs).copied()
    }

    /// Record the lease granted for a lock-delay of `secs`; if another call
    /// recorded one first, that one is returned (and `id` is the caller's to
    /// revoke).
    pub(crate) fn set_delay_lease(&self, secs: u64, id: i64) -> i64 {
        *self.delay_leases.locked().entry(secs).or_insert(id)
    }

    /// Forget a delay lease etcd no longer has.
    pub(crate) fn drop_delay_lease(&self, id: i64) {
        self.delay_leases.locked().retain(|_, v| *v != id);
    }

    /// Every delay lease (for close, which revokes them).
    pub(crate) fn delay_lease_ids(&self) -> Vec<i64> {
        self.delay_leases.locked().values().copied().collect()
    }

    /// Renew `lease` with this session from now on (a latch or barrier
    /// handle opened); counted, see [`Session::unshare`].
    pub(crate) fn share(&self, lease: i64) {
        *self.shared_leases.locked().entry(lease).or_insert(0) += 1;
    }

    /// A handle that renewed `lease` is done with it.
    pub(crate) fn unshare(&self, lease: i64) {
        let mut m = self.shared_leases.locked();
        if let Some(n) = m.get_mut(&lease) {
            *n -= 1;
            if *n == 0 {
                m.remove(&lease);
            }
        }
    }

    fn has_extras(&self) -> bool {
        !self.delay_leases.locked().is_empty() || !self.shared_leases.locked().is_empty()
    }

    fn extra_leases(&self) -> Vec<i64> {
        let mut v = self.delay_lease_ids();
        v.extend(self.shared_leases.locked().keys().copied());
        v
    }

    /// One keep-alive for each extra lease, after the session's own was
    /// acknowledged (so a delay lease is renewed later than the session's and
    /// outlives it by at least its delay). A lease etcd no longer has is
    /// forgotten.
    async fn renew_extras(&self, client: &Pinned, silence: Duration) {
        for id in self.extra_leases() {
            let r = tokio::time::timeout(silence, async {
                let (_keeper, mut stream) = client.keep_alive(id).await?;
                stream.message().await
            })
            .await;
            if let Ok(Ok(Some(resp))) = r {
                if resp.ttl() <= 0 {
                    self.drop_delay_lease(id);
                    self.shared_leases.locked().remove(&id);
                }
            }
        }
    }

    /// The key is free for this session's next acquisition under its
    /// prefix, unless it was retired.
    pub(crate) fn release_key(&self, key: &[u8]) {
        let mut keys = self.keys.locked();
        if !self.retired.locked().contains(key) {
            keys.remove(key);
        }
    }

    /// Whether `key` is one of this session's reserved keys.
    pub(crate) fn is_reserved(&self, key: &[u8]) -> bool {
        self.keys.locked().contains(key)
    }

    /// Never make `key` again in this session: a plain delete of it may still
    /// reach etcd (an attempt whose outcome we never learnt,
    /// [`crate::guard::keys::delete_incarnation`]). A new session has a new lease,
    /// and with it new key names. One entry per such delete, which only a
    /// failing or hung member causes.
    pub(crate) fn retire_key(&self, key: &[u8]) {
        let keys = self.keys.locked();
        if keys.contains(key) {
            self.retired.locked().insert(key.to_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A released key name is made again (its watch is reused); a retired one
    /// never is in this session, even once released, since a delete of it may
    /// still reach etcd (keys::delete_incarnation).
    #[test]
    fn a_retired_key_is_never_made_again_a_released_one_is() {
        let s = Session::new(
            0xab,
            15,
            Duration::from_secs(1),
            Instant::now(),
            None,
            Vec::new(),
        );
        let k = s.reserve_key(b"n/");
        assert_eq!(k, b"n/ab");
        s.release_key(&k);
        assert_eq!(s.reserve_key(b"n/"), b"n/ab", "a released name is reused");
        s.retire_key(&k);
        assert!(s.is_reserved(&k));
        s.release_key(&k);
        assert!(s.is_reserved(&k), "a retired name stays reserved");
        let next = s.reserve_key(b"n/");
        assert_eq!(next, b"n/ab_1");
        s.release_key(&next);
        assert_eq!(s.reserve_key(b"n/"), b"n/ab_1");
        // Retiring a name not reserved here does nothing.
        s.retire_key(b"m/ab");
        assert_eq!(s.reserve_key(b"m/"), b"m/ab");
    }
}
