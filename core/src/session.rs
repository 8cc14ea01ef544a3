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

use crate::poison::Locked;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::error::LossReason;
use crate::transport::Transport;

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

/// How a keep-alive stream ended ([`Session::renew_on`]).
enum StreamEnd {
    /// The lease is gone; the session is marked lost.
    Lost,
    /// The stream failed or was closed.
    Failed,
    /// Its member answered neither a keep-alive nor a question within the silence.
    Silent,
}

/// What etcd said of a lease whose keep-alive answer is late ([`Session::confirm`]).
enum Confirmed {
    /// It lives; with the time-to-live it gave, as a proof still to check
    /// (`None`: under a second left, or no read on this stream yet to give
    /// the term to check it against).
    Alive(Option<Proof>),
    /// It is gone: expired or revoked.
    Gone,
    /// No answer within the member silence: the member (or the path to it) is down.
    Silent,
}

/// An answer that proved the lease alive for `ttl` seconds from `sent`, if
/// the leader that renewed it was still the leader after it: checked by a
/// linearizable read answered in raft term `term` ([`Session::renew_on`]).
#[derive(Debug, Clone, Copy)]
struct Proof {
    sent: Instant,
    ttl: i64,
    term: u64,
}

/// How the read that checks a [`Proof`] ended ([`Session::check`]).
enum Checked {
    /// Answered, in this raft term.
    Term(u64),
    /// The key it reads is not ours to read (RBAC): nothing can be checked.
    Denied,
    /// Another error (the leader changed, etcd is overloaded): renew again.
    Failed,
    /// No answer within the silence: the member answers keep-alives but no
    /// linearizable read (a leader cut off from its peers does just that).
    Silent,
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
    /// `sent` + `ttl` - margin if that is later, and renewal is on time again.
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
        self.renewal
            .send_if_modified(|r| std::mem::replace(r, Renewal::Ok) != Renewal::Ok);
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
    async fn renew_extras(&self, client: &etcd_client::Client, silence: Duration) {
        for id in self.extra_leases() {
            let mut lease = client.lease_client();
            let r = tokio::time::timeout(silence, async {
                let (_keeper, mut stream) = lease.keep_alive(id).await?;
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
    /// [`crate::keys::delete_incarnation`]). A new session has a new lease,
    /// and with it new key names. One entry per such delete, which only a
    /// failing or hung member causes.
    pub(crate) fn retire_key(&self, key: &[u8]) {
        let keys = self.keys.locked();
        if keys.contains(key) {
            self.retired.locked().insert(key.to_vec());
        }
    }

    /// The keep-alive task: one per session. Sends a keep-alive every
    /// [`Session::interval`] and, after a failure, retries at once on another
    /// member until the validity window closes.
    pub(crate) async fn run(
        self: Arc<Session>,
        transport: Arc<Transport>,
        metrics: Arc<crate::metrics::Recorder>,
    ) {
        let stop = self.stop.clone();
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = self.watchdog(&transport) => {}
            _ = self.clone().keep_alive(transport.clone(), metrics) => {}
        }
    }

    /// Time between keep-alives: a third of the TTL, and at most a quarter of
    /// what the margin leaves of it, so that after a fault a session has at
    /// least three intervals (TTL - margin - interval) to get a keep-alive
    /// through: at TTL 5 s, 3 s, more than etcd's election plus the ~1 s it
    /// takes to leave a silent member.
    pub(crate) fn interval(&self) -> Duration {
        if let Some(k) = self.keepalive {
            return k;
        }
        let ttl = Duration::from_secs(self.ttl.max(1) as u64);
        (ttl / 3)
            .min(ttl.saturating_sub(self.margin) / 4)
            .max(Duration::from_millis(250))
    }

    async fn watchdog(&self, transport: &Transport) {
        // Renewal is failing once a whole interval (plus the member silence a
        // keep-alive is given to answer) has passed since the last
        // acknowledged keep-alive was sent with no new acknowledgement.
        let overdue = self.interval() + transport.silence();
        let mut changes = self.renewal.subscribe();
        loop {
            let d = self.deadline();
            let risk_at = *self.last_ack.locked() + overdue;
            let failing = *changes.borrow_and_update() != Renewal::Ok;
            let wake = if failing || risk_at >= d { d } else { risk_at };
            tokio::select! {
                _ = tokio::time::sleep_until(tokio::time::Instant::from_std(wake)) => {}
                // Recovered: the next risk is measured from the new acknowledgement.
                _ = changes.changed() => continue,
            }
            let now = Instant::now();
            if now < self.deadline() {
                let last = *self.last_ack.locked();
                if now >= last + overdue {
                    let valid_until = self.deadline();
                    if self.renewal.send_if_modified(|r| {
                        let was_ok = *r == Renewal::Ok;
                        *r = Renewal::Failing { valid_until };
                        was_ok
                    }) {
                        tracing::warn!(
                            lease = format!("{:x}", self.lease),
                            left_ms = (valid_until - now).as_millis() as u64,
                            "keep-alive renewal failing"
                        );
                    }
                }
                continue;
            }
            if now >= self.deadline() {
                // The hold has ended locally (`alive()` is false from the
                // deadline on, with no network call); the reason comes from etcd
                // if it answers within half the margin.
                let reason = self.why_lost(transport).await;
                tracing::warn!(lease = format!("{:x}", self.lease), %reason, "no keep-alive acknowledged in time; lock holds on this session end");
                self.mark_lost(reason);
                return;
            }
        }
    }

    /// Ask etcd what became of the lease: gone (expired or revoked) is
    /// `LeaseExpired`; no answer is `ConnectionLost`; alive (a leader change
    /// renewed it, or the acknowledgement came too late) is `ConnectionLost`
    /// too: the hold ended at the local deadline all the same, since only
    /// then is it safe for everyone (see [`Session::extend`]).
    ///
    /// The question gets half the margin (at most the request timeout): the
    /// margin is what separates the local deadline from the earliest instant
    /// etcd can expire the lease and grant the lock to someone else, and the
    /// loss event must reach the holder before that, reason or not.
    async fn why_lost(&self, transport: &Transport) -> LossReason {
        let lease = self.lease;
        let ask = (self.margin / 2).min(transport.request_timeout);
        let bound = crate::transport::Bound::Request(Instant::now() + ask);
        let r = transport
            .call_lease(
                bound,
                |mut c| async move { c.time_to_live(lease, None).await },
            )
            .await
            .result;
        match r {
            Ok(t) if t.ttl() <= 0 => LossReason::LeaseExpired,
            Ok(t) => {
                tracing::info!(lease = format!("{:x}", lease), ttl = t.ttl(), "etcd says the lease is alive; the hold ended at its local deadline all the same");
                LossReason::ConnectionLost
            }
            Err(e) if e.message().contains("lease not found") => LossReason::LeaseExpired,
            Err(_) => LossReason::ConnectionLost,
        }
    }

    /// A keep-alive's answer is late: ask etcd once (`LeaseTimeToLive`, on
    /// the keep-alive's own member, within `within`) whether the lease lives,
    /// instead of taking the member for dead.
    ///
    /// Why an answer can be late on a healthy path: etcd's gRPC proxy
    /// (`etcd grpc-proxy`, server/proxy/grpcproxy/lease.go) keeps each lease
    /// alive with its own client lessor, which renews every TTL/3 (checked
    /// every 500 ms), and answers a client's keep-alive with the next answer
    /// etcd gives to *its* renewal: up to TTL/3 + 0.5 s after the request.
    /// With one request in flight, the proxy drops the answers that come while
    /// no request of ours waits, and replies to ours with the first that comes
    /// after it counted it: a renewal etcd made about when our request reached
    /// the proxy, or later. So [`Session::extend`]'s rule holds for it, up
    /// to the proxy's own scheduling, which the margin covers; it is only late.
    ///
    /// The time-to-live answer is a proof of its own: etcd's leader computed
    /// the remaining TTL `r` (whole seconds, rounded down) after this request
    /// was sent, so the lease lives at least until send + `r`, and the local
    /// deadline may move to send + `r` - margin, as for a keep-alive, once
    /// [`Session::check`] shows that leader still led after it. The term to
    /// check against is that of the last read on this stream (`read_term`,
    /// or one made first), answered before this request was sent: etcd fills a time-to-live's
    /// header only after the leader's answer, so its own term could be a
    /// later leader's. A proxy forwards this request to etcd unchanged. `r`
    /// = 0 proves nothing either way (under a second left, or expiring); a
    /// negative `r` or "lease not found" is a lease that is gone.
    async fn confirm(
        &self,
        client: &etcd_client::Client,
        within: Duration,
        read_term: Option<u64>,
    ) -> Confirmed {
        // No read on this stream yet (answers late from its start, as through
        // the proxy): one now, for the term.
        let read_term = match read_term {
            Some(t) => Some(t),
            None => match self.check(client, within).await {
                Checked::Term(t) => Some(t),
                _ => None,
            },
        };
        let asked = Instant::now();
        let mut lease = client.lease_client();
        match tokio::time::timeout(within, lease.time_to_live(self.lease, None)).await {
            Ok(Ok(t)) if t.ttl() > 0 => {
                tracing::trace!(
                    lease = format!("{:x}", self.lease),
                    ttl = t.ttl(),
                    "keep-alive answer late; etcd says the lease lives"
                );
                Confirmed::Alive(read_term.map(|term| Proof {
                    sent: asked,
                    ttl: t.ttl(),
                    term,
                }))
            }
            Ok(Ok(t)) if t.ttl() == 0 => Confirmed::Alive(None),
            Ok(Ok(_)) => Confirmed::Gone,
            Ok(Err(e)) if e.to_string().contains("requested lease not found") => Confirmed::Gone,
            _ => Confirmed::Silent,
        }
    }

    /// One linearizable read on the stream's member (a count of the probe
    /// key, which RBAC lets us read once it is a lock key of ours), within
    /// `within`: the raft term it was answered in.
    ///
    /// Why it proves a renewal: etcd fills a keep-alive answer's header
    /// (term T: that of the last entry the member applied) before it renews,
    /// and the member renews on the leader of its current term, which is T or
    /// later (or is that leader). A linearizable read needs its leader, of
    /// some term L, to hear from a quorum after the read arrived, and its
    /// answer carries a term >= L. So a read sent after the answer came and
    /// answered in term T has L <= T <= the renewing leader's term; and since
    /// a quorum that elected the renewing leader can no longer serve a lower
    /// term, L is that term: the leader that renewed still led after the
    /// renewal, so any later leader starts the lease afresh after that
    /// (etcd's `Promote`), and the lease lives at least until send + TTL.
    /// A leader cut off from its peers answers keep-alives until it steps
    /// down, but no read: its answers are never counted, and a stream whose
    /// member cannot answer reads is left for another member.
    async fn check(&self, client: &etcd_client::Client, within: Duration) -> Checked {
        let key = self.probe.locked().clone();
        let mut kv = client.kv_client();
        let opts = etcd_client::GetOptions::new().with_count_only();
        match tokio::time::timeout(within, kv.get(key, Some(opts))).await {
            Ok(Ok(r)) => match r.header() {
                Some(h) => Checked::Term(h.raft_term()),
                None => Checked::Failed,
            },
            Ok(Err(etcd_client::Error::GRpcStatus(st)))
                if st.code() == tonic::Code::PermissionDenied =>
            {
                Checked::Denied
            }
            Ok(Err(_)) => Checked::Failed,
            Err(_) => Checked::Silent,
        }
    }

    /// Renew the lease on one keep-alive stream until it fails, its member
    /// stays silent, or the lease is gone.
    ///
    /// A keep-alive is due an interval after the last proof of life. Each
    /// request gets one answer, in order, and an answer is dated by the send
    /// time of its request ([`Session::extend`]), once a read checked it
    /// ([`Session::check`]): the read is sent as the answer comes, and the
    /// newest answer not yet checked waits for the next read. A read answered
    /// in another term (the leader changed) or failing proves nothing, and
    /// another keep-alive goes at once (at most every `every`); a read not
    /// answered within the silence leaves the member. On a direct member the answer comes
    /// within a round trip. A relaying proxy (`etcd grpc-proxy`)
    /// holds the requests until its own renewal and then answers all of them
    /// at once ([`Session::confirm`]): so while an answer is outstanding,
    /// another keep-alive goes out every `min(interval, margin) / 2`, and the
    /// last answer of such a burst is dated by the request sent last before
    /// the proxy's renewal, not by one sent up to TTL/3 + 0.5 s before it.
    /// A member that answers none of this within the silence, and not the
    /// question `confirm` asks either, is silent.
    async fn renew_on(
        self: &Arc<Session>,
        keeper: &mut etcd_client::LeaseKeeper,
        stream: &mut etcd_client::LeaseKeepAliveStream,
        client: &etcd_client::Client,
        member: usize,
        metrics: &Arc<crate::metrics::Recorder>,
        silence: Duration,
    ) -> StreamEnd {
        let interval = self.interval();
        let every = (interval.min(self.margin) / 2).max(Duration::from_millis(50));
        // Send times of the requests not yet answered, oldest first.
        let mut sent: std::collections::VecDeque<Instant> = Default::default();
        let mut asked: Option<Instant> = None;
        let mut confirm: Option<futures_util::future::BoxFuture<'_, Confirmed>> = None;
        // The newest answer not yet checked, and the read checking another.
        let mut unchecked: Option<Proof> = None;
        let mut checking: Option<(futures_util::future::BoxFuture<'_, Checked>, Proof)> = None;
        // The term of the last read answered on this stream.
        let mut read_term: Option<u64> = None;
        // Send time of the last answer, checked or not: the next keep-alive
        // is due an interval after it.
        let mut answered: Option<Instant> = None;
        // After a term mismatch: renew again then (at most every `every`).
        let mut resend_at: Option<Instant> = None;
        let mut last_send: Option<Instant> = None;
        loop {
            if checking.is_none() {
                if let Some(p) = unchecked.take() {
                    checking = Some((Box::pin(self.check(client, silence)), p));
                }
            }
            let send_at = match sent.back() {
                None => {
                    let due =
                        answered.map_or(self.last_proof(), |a| a.max(self.last_proof())) + interval;
                    resend_at.map_or(due, |r| r.min(due))
                }
                Some(last) => *last + every,
            };
            if Instant::now() >= send_at {
                let at = Instant::now();
                if keeper.keep_alive().await.is_err() {
                    return StreamEnd::Failed;
                }
                resend_at = None;
                last_send = Some(at);
                sent.push_back(at);
                continue;
            }
            // A proof is due an interval after the last one, and the watchdog
            // reports renewal failing half a silence after that. Ask when the
            // oldest keep-alive is late by half a silence, or by then at the
            // latest; one question at a time, half a silence apart at least.
            let ask_at = sent.front().map(|oldest| {
                let at = (*oldest).min(self.last_proof() + interval) + silence / 2;
                asked.map_or(at, |a| at.max(a + silence / 2))
            });
            tokio::select! {
                r = stream.message() => {
                    let Ok(Some(resp)) = r else { return StreamEnd::Failed };
                    // An answer makes a pending question moot.
                    confirm = None;
                    if resp.ttl() <= 0 {
                        self.mark_lost(LossReason::LeaseExpired);
                        return StreamEnd::Lost;
                    }
                    // An answer no request of ours is waiting for proves
                    // nothing we can date.
                    let Some(at) = sent.pop_front() else { continue };
                    let term = resp.header().map(|h| h.raft_term());
                    tracing::trace!(
                        lease = format!("{:x}", self.lease),
                        member,
                        sent_mono_ms = crate::runtime::instant_to_mono_ns(at) / 1_000_000,
                        rtt_ms = at.elapsed().as_millis() as u64,
                        ttl = resp.ttl(),
                        term,
                        "keep-alive acknowledged"
                    );
                    metrics.keepalive(at.elapsed());
                    answered = Some(at);
                    match term {
                        Some(term) => unchecked = Some(Proof { sent: at, ttl: resp.ttl(), term }),
                        // Not etcd's answer (etcd always sends a header):
                        // nothing to check it against.
                        None => self.proved(at, resp.ttl(), client, silence),
                    }
                }
                () = tokio::time::sleep_until(send_at.into()) => {}
                () = async { tokio::time::sleep_until(ask_at.unwrap_or_else(Instant::now).into()).await }, if confirm.is_none() && ask_at.is_some() => {
                    asked = Some(Instant::now());
                    confirm = Some(Box::pin(self.confirm(client, silence / 2, read_term)));
                }
                c = async { confirm.as_mut().expect("guarded").await }, if confirm.is_some() => {
                    confirm = None;
                    match c {
                        Confirmed::Alive(Some(p)) => {
                            if !unchecked.is_some_and(|u| u.sent >= p.sent) {
                                unchecked = Some(p);
                            }
                        }
                        Confirmed::Alive(None) => {}
                        Confirmed::Gone => {
                            self.mark_lost(LossReason::LeaseExpired);
                            return StreamEnd::Lost;
                        }
                        Confirmed::Silent => return StreamEnd::Silent,
                    }
                }
                c = async { checking.as_mut().expect("guarded").0.as_mut().await }, if checking.is_some() => {
                    let (_, p) = checking.take().expect("guarded");
                    let again = match c {
                        Checked::Term(t) => {
                            read_term = Some(t);
                            if t == p.term {
                                self.proved(p.sent, p.ttl, client, silence);
                                false
                            } else {
                                // The leader changed around the renewal: renew
                                // again (its answer carries the new term).
                                tracing::debug!(lease = format!("{:x}", self.lease), member, renewed_in = p.term, read_in = t, "keep-alive answered in another term than the read after it; renewing again");
                                true
                            }
                        }
                        Checked::Denied => {
                            // RBAC keeps the probe key from us (before the
                            // first lock key): count the answer unchecked.
                            tracing::debug!(lease = format!("{:x}", self.lease), "the read that checks a renewal was refused (RBAC); counting the renewal unchecked");
                            self.proved(p.sent, p.ttl, client, silence);
                            false
                        }
                        Checked::Failed => {
                            tracing::debug!(lease = format!("{:x}", self.lease), member, "the read that checks a renewal failed; renewing again");
                            true
                        }
                        Checked::Silent => {
                            tracing::debug!(lease = format!("{:x}", self.lease), member, "member answers keep-alives but no linearizable read within the silence; leaving it");
                            return StreamEnd::Silent;
                        }
                    };
                    if again && unchecked.is_none() && sent.is_empty() {
                        let now = Instant::now();
                        resend_at = Some(last_send.map_or(now, |l| (l + every).max(now)));
                    }
                }
            }
        }
    }

    /// A checked answer: the deadline moves, and the leases renewed with the
    /// session's (lock-delays, latches) are renewed now.
    fn proved(
        self: &Arc<Session>,
        sent: Instant,
        ttl: i64,
        client: &etcd_client::Client,
        silence: Duration,
    ) {
        self.extend(sent, ttl);
        if self.has_extras() {
            // Off the session's own loop: a slow renewal of many latches
            // never delays the next keep-alive.
            let (me, c) = (self.clone(), client.clone());
            tokio::spawn(async move { me.renew_extras(&c, silence).await });
        }
    }

    /// Keep-alives go to a healthy member; a member that fails or stays silent
    /// for [`Transport::silence`] is benched and the stream re-opened on the
    /// next one (a stuck renewal blocks etcd's keep-alive stream, so the
    /// stream is never reused after a silence).
    async fn keep_alive(
        self: Arc<Session>,
        transport: Arc<Transport>,
        metrics: Arc<crate::metrics::Recorder>,
    ) {
        let silence = transport.silence();
        let mut retry = Duration::from_millis(20);
        loop {
            let Ok((member, client)) = transport.stream_client().await else {
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(Duration::from_millis(250));
                continue;
            };
            let mut lease = client.lease_client();
            let opened = tokio::time::timeout(silence, lease.keep_alive(self.lease)).await;
            let (mut keeper, mut stream) = match opened {
                Ok(Ok(pair)) => pair,
                _ => {
                    transport.fail(member);
                    tokio::time::sleep(retry).await;
                    retry = (retry * 2).min(Duration::from_millis(250));
                    continue;
                }
            };
            match self
                .renew_on(&mut keeper, &mut stream, &client, member, &metrics, silence)
                .await
            {
                StreamEnd::Lost => return,
                StreamEnd::Failed => transport.fail(member),
                StreamEnd::Silent => {
                    // Steer the next stream to a member that answers.
                    transport.fail(member);
                    transport.steer(None).await;
                }
            }
            tokio::time::sleep(retry).await;
            retry = (retry * 2).min(Duration::from_millis(250));
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
