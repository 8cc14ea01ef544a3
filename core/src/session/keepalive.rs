//! The session's keep-alive: one task per session renews its lease, proves
//! each renewal against the raft term, and marks the session lost when the
//! lease is gone or its validity window runs out.

use super::patience::Waits;
use super::*;
use crate::transport::{classify, Kind};

/// How a keep-alive stream ended ([`Session::renew_on`]).
enum StreamEnd {
    /// The lease is gone; the session is marked lost.
    Lost,
    /// The stream failed or was closed, or its member refused a request as
    /// one that is down ([`Checked::Down`]): the member is benched.
    Failed,
    /// Its member answered neither a keep-alive nor a question in time ([`Session::patience`]).
    Silent,
}

/// What etcd said of a lease whose keep-alive answer is late ([`Session::confirm`]).
pub(super) enum Confirmed {
    /// It lives; with the time-to-live it gave, as a proof still to check
    /// (`None`: under a second left, or no read on this stream yet to give
    /// the term to check it against).
    Alive(Option<Proof>),
    /// It is gone: expired or revoked.
    Gone,
    /// No answer within the member silence: the member (or the path to it) is down.
    Silent,
    /// The member takes no new request ([`Checked::Down`]).
    Down,
}

/// An answer that proved the lease alive for `ttl` seconds from `sent`, if
/// the leader that renewed it was still the leader after it: checked by a
/// linearizable read answered in raft term `term` ([`Session::renew_on`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Proof {
    sent: Instant,
    ttl: i64,
    term: u64,
}

/// How the read that checks a [`Proof`] ended ([`Session::check`]).
pub(super) enum Checked {
    /// Answered, in this raft term.
    Term(u64),
    /// The key it reads is not ours to read (RBAC): nothing can be checked.
    Denied,
    /// Another error (the leader changed, etcd is overloaded): renew again.
    Failed,
    /// No answer in time ([`Session::patience`]): the member answers keep-alives but no
    /// linearizable read (a leader cut off from its peers does just that).
    Silent,
    /// Refused as by a member that is down ([`Kind::MemberDown`]): one stopping
    /// gracefully (GOAWAY, its listener closed) still answers the keep-alive
    /// stream open on it but no read, so renewing there proves nothing and the
    /// hold would end while etcd keeps the lease: leave it.
    Down,
}

impl Session {
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

    /// Time between keep-alives: the configured one, else
    /// [`crate::options::default_keepalive_interval`] (long at large TTLs,
    /// since each renewal costs etcd a keep-alive and a read; at least 5 s,
    /// or three more intervals at small TTLs, left to get one through after
    /// a fault).
    pub(crate) fn interval(&self) -> Duration {
        self.keepalive
            .unwrap_or_else(|| crate::options::default_keepalive_interval(self.ttl, self.margin))
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
        client: &Pinned,
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
        match tokio::time::timeout(within, client.time_to_live(self.lease)).await {
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
            Ok(Err(e)) if classify(&e) == Kind::MemberDown => Confirmed::Down,
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
    async fn check(&self, client: &Pinned, within: Duration) -> Checked {
        let key = self.probe.locked().clone();
        match tokio::time::timeout(within, client.count(key)).await {
            Ok(Ok(r)) => match r.header() {
                Some(h) => Checked::Term(h.raft_term()),
                None => Checked::Failed,
            },
            Ok(Err(etcd_client::Error::GRpcStatus(st)))
                if st.code() == tonic::Code::PermissionDenied =>
            {
                Checked::Denied
            }
            Ok(Err(e)) if classify(&e) == Kind::MemberDown => Checked::Down,
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
    /// another keep-alive goes at once (at most every `every`); a read refused
    /// as by a member that is down ([`Checked::Down`]) leaves it; a read not
    /// answered in time ([`Session::patience`]) leaves the member. On a direct member the answer comes
    /// within a round trip. A relaying proxy (`etcd grpc-proxy`)
    /// holds the requests until its own renewal and then answers all of them
    /// at once ([`Session::confirm`]): so while an answer is outstanding,
    /// another keep-alive goes out every `min(interval, margin) / 2`, and the
    /// last answer of such a burst is dated by the request sent last before
    /// the proxy's renewal, not by one sent up to TTL/3 + 0.5 s before it.
    /// A member that answers none of this in time, and not the
    /// question `confirm` asks either, is silent.
    async fn renew_on(
        self: &Arc<Session>,
        keeper: &mut etcd_client::LeaseKeeper,
        stream: &mut etcd_client::LeaseKeepAliveStream,
        client: &Pinned,
        member: usize,
        metrics: &Arc<crate::metrics::Recorder>,
        silence: Duration,
    ) -> StreamEnd {
        let interval = self.interval();
        let every = (interval.min(self.margin) / 2).max(Duration::from_millis(50));
        // Each renewal comes up to a tenth of the interval early, at a point
        // drawn anew after every answer: clients that a fault put in phase
        // (all renewing as etcd comes back) drift apart again instead of
        // renewing together from then on.
        let mut early = spread(interval);
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
        let mut waits = Waits::new(silence);
        // How long the recent renewals took, from send to proof (the
        // slowest, halving with each faster one): etcd slowed by load.
        let mut slow = Duration::ZERO;
        loop {
            if checking.is_none() {
                if let Some(p) = unchecked.take() {
                    let within = waits.check.min(self.patience(silence));
                    checking = Some((Box::pin(self.check(client, within)), p));
                }
            }
            let send_at = match sent.back() {
                None => self.due(answered, interval - early, slow, resend_at),
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
                    match self.on_answer(&resp, &mut sent, member, metrics, client, silence) {
                        Err(end) => return end,
                        Ok(Some((at, proof))) => {
                            answered = Some(at);
                            early = spread(interval);
                            if proof.is_some() {
                                unchecked = proof;
                            }
                        }
                        Ok(None) => {}
                    }
                }
                () = tokio::time::sleep_until(send_at.into()) => {}
                () = async { tokio::time::sleep_until(ask_at.unwrap_or_else(Instant::now).into()).await }, if confirm.is_none() && ask_at.is_some() => {
                    asked = Some(Instant::now());
                    let within = waits.confirm.min(self.patience(silence));
                    confirm = Some(Box::pin(self.confirm(client, within, read_term)));
                }
                c = async { confirm.as_mut().expect("guarded").await }, if confirm.is_some() => {
                    confirm = None;
                    if waits.ask_again(&c, self.patience(silence), silence) {
                        continue;
                    }
                    if let Some(end) = self.on_confirmed(c, &mut unchecked) {
                        return end;
                    }
                }
                c = async { checking.as_mut().expect("guarded").0.as_mut().await }, if checking.is_some() => {
                    let (_, p) = checking.take().expect("guarded");
                    let again = if waits.read_again(&c, self.patience(silence), silence) {
                        tracing::debug!(lease = format!("{:x}", self.lease), member, "the read that checks a renewal was not answered in time; renewing again on this member");
                        true
                    } else {
                        match self.on_checked(c, p, &mut read_term, member, client, silence) {
                            Ok(again) => {
                                if !again {
                                    slow = (slow / 2).max(p.sent.elapsed());
                                }
                                again
                            }
                            Err(end) => return end,
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

    /// A keep-alive answer on the stream: `Err` when etcd says the lease is
    /// gone; `Ok(None)` for an answer no request of ours waits for; else the
    /// send time of the request it answers and the proof to check (`None`
    /// when it was counted at once).
    fn on_answer(
        self: &Arc<Session>,
        resp: &etcd_client::LeaseKeepAliveResponse,
        sent: &mut std::collections::VecDeque<Instant>,
        member: usize,
        metrics: &Arc<crate::metrics::Recorder>,
        client: &Pinned,
        silence: Duration,
    ) -> std::result::Result<Option<(Instant, Option<Proof>)>, StreamEnd> {
        if resp.ttl() <= 0 {
            self.mark_lost(LossReason::LeaseExpired);
            return Err(StreamEnd::Lost);
        }
        // An answer no request of ours is waiting for proves nothing we can date.
        let Some(at) = sent.pop_front() else {
            return Ok(None);
        };
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
        match term {
            Some(term) => Ok(Some((
                at,
                Some(Proof {
                    sent: at,
                    ttl: resp.ttl(),
                    term,
                }),
            ))),
            // Not etcd's answer (etcd always sends a header): nothing to
            // check it against.
            None => {
                self.proved(at, resp.ttl(), client, silence);
                Ok(Some((at, None)))
            }
        }
    }

    /// The answer to a question about the lease: a newer proof to check, or
    /// the end of the stream (`Some`) when the lease is gone or the member silent.
    fn on_confirmed(&self, c: Confirmed, unchecked: &mut Option<Proof>) -> Option<StreamEnd> {
        match c {
            Confirmed::Alive(Some(p)) => {
                if !unchecked.as_ref().is_some_and(|u| u.sent >= p.sent) {
                    *unchecked = Some(p);
                }
                None
            }
            Confirmed::Alive(None) => None,
            Confirmed::Gone => {
                self.mark_lost(LossReason::LeaseExpired);
                Some(StreamEnd::Lost)
            }
            Confirmed::Silent => Some(StreamEnd::Silent),
            Confirmed::Down => Some(StreamEnd::Failed),
        }
    }

    /// The read that checks proof `p` answered: `Ok(true)` to renew again
    /// (the term moved, or the read failed), `Ok(false)` once counted, `Err`
    /// when the member stays silent.
    fn on_checked(
        self: &Arc<Session>,
        c: Checked,
        p: Proof,
        read_term: &mut Option<u64>,
        member: usize,
        client: &Pinned,
        silence: Duration,
    ) -> std::result::Result<bool, StreamEnd> {
        match c {
            Checked::Term(t) => {
                *read_term = Some(t);
                if t == p.term {
                    self.proved(p.sent, p.ttl, client, silence);
                    Ok(false)
                } else {
                    // The leader changed around the renewal: renew
                    // again (its answer carries the new term).
                    tracing::debug!(lease = format!("{:x}", self.lease), member, renewed_in = p.term, read_in = t, "keep-alive answered in another term than the read after it; renewing again");
                    Ok(true)
                }
            }
            Checked::Denied => {
                // RBAC keeps the probe key from us (before the
                // first lock key): count the answer unchecked.
                tracing::debug!(lease = format!("{:x}", self.lease), "the read that checks a renewal was refused (RBAC); counting the renewal unchecked");
                self.proved(p.sent, p.ttl, client, silence);
                Ok(false)
            }
            Checked::Failed => {
                tracing::debug!(
                    lease = format!("{:x}", self.lease),
                    member,
                    "the read that checks a renewal failed; renewing again"
                );
                Ok(true)
            }
            // Benched, as `keep_alive` logs ("etcd member failed").
            Checked::Down => Err(StreamEnd::Failed),
            Checked::Silent => {
                tracing::debug!(
                    lease = format!("{:x}", self.lease),
                    member,
                    "member answers keep-alives but no linearizable read in time; leaving it"
                );
                Err(StreamEnd::Silent)
            }
        }
    }

    /// A checked answer: the deadline moves, and the leases renewed with the
    /// session's (lock-delays, latches) are renewed now.
    fn proved(self: &Arc<Session>, sent: Instant, ttl: i64, client: &Pinned, silence: Duration) {
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
            let Ok(client) = transport.stream_door().await else {
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(Duration::from_millis(250));
                continue;
            };
            let member = client.member;
            let opened = tokio::time::timeout(silence, client.keep_alive(self.lease)).await;
            let (mut keeper, mut stream) = match opened {
                Ok(Ok(pair)) => pair,
                // An error (refused, reset) benches the member; no answer in
                // time leaves it only for one that answers.
                failed => {
                    if failed.is_ok() {
                        transport.fail(member);
                    } else {
                        transport.leave_silent(member, None).await;
                    }
                    tokio::time::sleep(crate::transport::jitter(retry)).await;
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
                // Steer the next stream to a member that answers.
                StreamEnd::Silent => transport.leave_silent(member, None).await,
            }
            tokio::time::sleep(crate::transport::jitter(retry)).await;
            retry = (retry * 2).min(Duration::from_millis(250));
        }
    }
}

/// How early a renewal goes: a random-ish point of the first tenth of
/// `interval` (`jitter` gives one of the upper half of what it is given).
fn spread(interval: Duration) -> Duration {
    let tenth = interval / 10;
    (crate::transport::jitter(tenth) * 2).saturating_sub(tenth)
}
