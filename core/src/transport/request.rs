//! The one door every request leaves by: a slot among the client's requests in flight, then attempts member after member until one answers or the call's bound ends.

use super::*;

impl Transport {
    /// Run one request: bounded in flight, on a healthy member, retried
    /// until `bound` ends (see [`Bound`]): on another member at once when a
    /// member fails or stays silent for [`Transport::silence`], on the same
    /// one after a short jittered backoff (20 to 250 ms) when etcd is busy or
    /// between leaders. It returns by the bound's end, with the result and
    /// whether the outcome is uncertain ([`Answer`]).
    ///
    /// This is the one door every request of the client leaves by: `op`
    /// gets the member's KV client (every hot request, Txn, Range and
    /// DeleteRange, is a KV one); [`Transport::call_lease`] is the same door
    /// for lease requests, [`Transport::call_in_slot`] for a request whose
    /// slot the caller took first.
    pub(crate) async fn call<T, F, Fut>(&self, bound: Bound, op: F) -> Answer<T>
    where
        F: FnMut(etcd_client::KvClient) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        self.call_via(bound, etcd_client::Client::kv_client, op)
            .await
    }

    /// [`Transport::call`] for a lease request (`op` gets the lease client).
    pub(crate) async fn call_lease<T, F, Fut>(&self, bound: Bound, op: F) -> Answer<T>
    where
        F: FnMut(etcd_client::LeaseClient) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        self.call_via(bound, etcd_client::Client::lease_client, op)
            .await
    }

    /// [`Transport::call`] for a bounded replay of etcd's history through a
    /// watch that ends with the call (`op` gets the watch client): a
    /// lock's history, never a live watch (those are `stream.rs`'s).
    pub(crate) async fn call_watch<T, F, Fut>(&self, bound: Bound, op: F) -> Answer<T>
    where
        F: FnMut(etcd_client::WatchClient) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        self.call_via(bound, etcd_client::Client::watch_client, op)
            .await
    }

    /// A slot, then [`Transport::call_in_slot`] with `op` getting what `pick`
    /// takes from the member's client.
    pub(super) async fn call_via<C, T, F, Fut>(
        &self,
        bound: Bound,
        pick: fn(&etcd_client::Client) -> C,
        op: F,
    ) -> Answer<T>
    where
        F: FnMut(C) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        match self.slot(bound).await {
            Ok((permit, bound)) => self.call_in_slot(permit, bound, pick, op).await,
            // Nothing was sent: no doubt about the outcome.
            Err(e) => Answer::sure(Err(e)),
        }
    }

    /// A slot among the client's in-flight requests. Taking it before building
    /// a request's (large) future keeps a burst of 10,000 queued acquisitions
    /// small in memory. A lock wait's slot counts against its deadline
    /// (`Timeout`); any other call's request timeout starts once it has its
    /// slot (the returned bound is moved by the time queued): time spent
    /// behind this client's own requests, each bounded by its own request
    /// timeout, is not etcd being slow.
    pub(crate) async fn slot(
        &self,
        bound: Bound,
    ) -> Result<(tokio::sync::OwnedSemaphorePermit, Bound)> {
        let closed = || Error::new(ErrorCode::Closed, "the client's request slots are closed");
        if let Ok(p) = self.inflight.clone().try_acquire_owned() {
            return Ok((p, bound));
        }
        match bound {
            Bound::Wait(None) => tokio::select! {
                biased;
                p = self.inflight.clone().acquire_owned() => Ok((p.map_err(|_| closed())?, bound)),
                _ = self.closing.cancelled() => Err(Error::new(ErrorCode::Closed, "the client was closed")),
            },
            Bound::Wait(Some(give_up)) => {
                let slot = tokio::time::timeout_at(
                    tokio::time::Instant::from_std(give_up),
                    self.inflight.clone().acquire_owned(),
                );
                match tokio::select! { biased; r = slot => Some(r), _ = self.closing.cancelled() => None } {
                    Some(Ok(Ok(p))) => Ok((p, bound)),
                    Some(Ok(Err(_))) => Err(closed()),
                    Some(Err(_)) => Err(Error::new(ErrorCode::Timeout, "the deadline passed while the request waited for a free slot in this client")),
                    None => Err(Error::new(ErrorCode::Closed, "the client was closed")),
                }
            }
            Bound::Request(end) => {
                let queued = Instant::now();
                let p = self
                    .inflight
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| closed())?;
                Ok((p, Bound::Request(end + queued.elapsed())))
            }
        }
    }

    /// [`Transport::call`] in a slot already taken; `op` gets what `pick`
    /// takes from the member's client. A lock wait's request (`Bound::Wait`)
    /// ends `Closed` as soon as the client closes: without a deadline it would
    /// retry for as long as etcd is away, and closing must end every wait.
    pub(crate) async fn call_in_slot<C, T, F, Fut>(
        &self,
        slot: tokio::sync::OwnedSemaphorePermit,
        bound: Bound,
        pick: fn(&etcd_client::Client) -> C,
        op: F,
    ) -> Answer<T>
    where
        F: FnMut(C) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        // Set by the attempts as they go, so that it survives their future
        // when closing the client cuts them off.
        let mut uncertain = false;
        let result = match bound {
            Bound::Request(_) => self.attempts(slot, bound, &mut uncertain, pick, op).await,
            Bound::Wait(_) => {
                let closed = || Error::new(ErrorCode::Closed, "the client was closed");
                if self.closing.is_cancelled() {
                    return Answer::sure(Err(closed()));
                }
                tokio::select! {
                    biased;
                    r = self.attempts(slot, bound, &mut uncertain, pick, op) => r,
                    _ = self.closing.cancelled() => Err(closed()),
                }
            }
        };
        Answer { result, uncertain }
    }

    /// The attempts of [`Transport::call_in_slot`], member after member, until
    /// one answers or the bound ends.
    pub(super) async fn attempts<C, T, F, Fut>(
        &self,
        _slot: tokio::sync::OwnedSemaphorePermit,
        bound: Bound,
        uncertain: &mut bool,
        pick: fn(&etcd_client::Client) -> C,
        mut op: F,
    ) -> Result<T>
    where
        F: FnMut(C) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let end = bound.end();
        let mut backoff = Duration::from_millis(20);
        let mut last: Option<Error> = None;
        loop {
            // A shut transport refuses every request: retrying would only
            // wait out the bound (a read in flight when its client closed).
            if self.closer.is_closed() {
                return Err(Error::new(ErrorCode::Closed, "the client was closed"));
            }
            let i = self.pick();
            let now = Instant::now();
            if end.is_some_and(|e| now >= e) {
                return Err(self.expired(bound, last.as_ref()));
            }
            let request = std::pin::pin!(async {
                let c = self.member(i, pick).await?;
                op(c).await
            });
            let answered = match self.wait_judged(i, request, bound, uncertain).await {
                Waited::Answer(r) => Some(r),
                Waited::Resend(e) => {
                    last = Some(e);
                    None
                }
                Waited::Expired(e) => return Err(e),
            };
            match answered {
                Some(Ok(v)) => {
                    self.ok(i);
                    return Ok(v);
                }
                Some(Err(e)) => {
                    let kind = classify(&e);
                    let err = Error::from_etcd(e, &self.endpoints);
                    if kind == Kind::Final {
                        return Err(err);
                    }
                    tracing::debug!(member = %self.members[i].url, error = %err, "request failed on a member");
                    last = Some(err);
                    if kind == Kind::MemberDown {
                        *uncertain = true;
                        self.fail(i);
                        self.steer(end).await;
                        // Another member may answer at once.
                        if self.has_alternative(i) {
                            continue;
                        }
                    }
                }
                // Re-sent at once: to the member the verdict chose, or to
                // the same one after waiting `resend_after` for it.
                None => continue,
            }
            if self.closer.is_closed() {
                return Err(Error::new(ErrorCode::Closed, "the client was closed"));
            }
            let wait = jitter(backoff);
            match end {
                Some(e) if Instant::now() + wait >= e => {
                    // Sleep out the rest of the bound: a member may come back
                    // in it, and a lock wait's caller asked for exactly that long.
                    tokio::time::sleep_until(tokio::time::Instant::from_std(e)).await;
                }
                _ => tokio::time::sleep(wait).await,
            }
            backoff = (backoff * 2).min(Duration::from_millis(250));
        }
    }

    /// Wait for `request`, just sent to member `i`. A member that does not
    /// answer within `silence` is judged ([`Transport::judge`]) while the
    /// request stays in flight: left only when it is down or an election
    /// came between, else waited for, twice as long each time, up to
    /// [`Transport::resend_after`]. With no other member to go to, the first
    /// wait is the request timeout.
    async fn wait_judged<T, Fut>(
        &self,
        i: usize,
        mut request: std::pin::Pin<&mut Fut>,
        bound: Bound,
        uncertain: &mut bool,
    ) -> Waited<T>
    where
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let (end, silence) = (bound.end(), self.silence());
        let mut window = if self.has_alternative(i) {
            silence
        } else {
            self.request_timeout.max(silence)
        };
        let (since, sent) = (self.term(), Instant::now());
        loop {
            let mut cut_by_bound = false;
            if let Some(e) = end {
                let left = e.saturating_duration_since(Instant::now());
                if left <= window {
                    window = left;
                    cut_by_bound = true;
                }
            }
            if let Ok(r) = tokio::time::timeout(window, request.as_mut()).await {
                return Waited::Answer(r);
            }
            *uncertain = true;
            let silent = || {
                self.unavailable(format_args!(
                    "{} did not answer within {:?}",
                    self.members[i].url,
                    sent.elapsed()
                ))
            };
            if cut_by_bound {
                // The bound ended a request to a member that may only be
                // slow: no reason to bench it.
                return Waited::Expired(self.expired(bound, Some(&silent())));
            }
            let verdict = tokio::select! {
                r = request.as_mut() => return Waited::Answer(r),
                v = self.judge(i, since, end) => v,
            };
            let waited = sent.elapsed();
            if matches!(verdict, Verdict::Move { .. }) || waited >= self.resend_after() {
                self.follow(i, verdict);
                return Waited::Resend(silent());
            }
            window = match verdict {
                Verdict::Unsure => silence,
                _ => window * 2,
            }
            .min(self.resend_after() - waited);
        }
    }
}

/// How [`Transport::wait_judged`] ended.
enum Waited<T> {
    /// The member answered (or failed).
    Answer(std::result::Result<T, etcd_client::Error>),
    /// Send the request again, at once (the member was left, or waited for long enough).
    Resend(Error),
    /// The call's bound ended.
    Expired(Error),
}
