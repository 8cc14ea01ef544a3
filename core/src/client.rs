//! The client: connection, options, and the session it hands to locks.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use etcd_client::{PutOptions, Txn, TxnOp};
use tokio::sync::Mutex as AsyncMutex;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::meta;
use crate::options::{default_margin, ClientOptions};
use crate::session::Session;
use crate::transport::{Bound, Transport};
use crate::watch::WatchHub;

pub(crate) mod cleanups;
mod connect;
mod metaflush;
pub(crate) mod owners;
pub(crate) mod window;

pub(crate) struct Inner {
    pub(crate) transport: Arc<Transport>,
    pub(crate) hub: WatchHub,
    pub(crate) endpoints: String,
    pub(crate) ns: Vec<u8>,
    pub(crate) ttl: AtomicI64,
    requested_ttl: i64,
    margin: Option<Duration>,
    keepalive: Option<Duration>,
    pub(crate) watch_held_keys: bool,
    pub(crate) session: AsyncMutex<Option<Arc<Session>>>,
    pub(crate) closed: CancellationToken,
    pub(crate) windows: crate::client::window::Windows,
    /// Acquisitions of this client between admission and their key queued
    /// in etcd (see `window::ADMITTED`).
    pub(crate) admissions: Arc<tokio::sync::Semaphore>,
    /// Holds taken with an owner (recipes/reentry.rs).
    pub(crate) reentry: owners::Owners,
    pub(crate) cleanups: Arc<crate::client::cleanups::Cleanups>,
    pub(crate) metrics: Arc<crate::metrics::Recorder>,
    pub(crate) meta: crate::meta::Book,
    pid: u32,
    pub(crate) handle: tokio::runtime::Handle,
}

impl Drop for Inner {
    /// The last handle (client or guard) is gone: stop the keep-alive and revoke
    /// the lease, so a forgotten `close()` never leaks a lease kept alive forever.
    fn drop(&mut self) {
        self.closed.cancel();
        if let Some(s) = self.session.get_mut().take() {
            s.mark_lost(LossReason::ClientClosed);
            let t = self.transport.clone();
            self.handle.spawn(async move {
                let _ = t
                    .call_lease(t.request_bound(), move |mut c| {
                        let id = s.lease;
                        async move { c.revoke(id).await }
                    })
                    .await
                    .result;
            });
        }
    }
}

/// A connection to etcd that hands out locks. Cheap to clone (an `Arc`), safe to
/// share across threads and tasks. All locks of a client share one lease.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("endpoints", &self.inner.endpoints)
            .finish()
    }
}

impl Client {
    /// One request through the transport (failover, backpressure, retries
    /// within `bound`; `None`: the request timeout from now), refused once
    /// the client is closed.
    pub(crate) async fn call<T, F, Fut>(&self, bound: Option<Bound>, op: F) -> Result<T>
    where
        F: FnMut(etcd_client::KvClient) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        self.check_open()?;
        let bound = bound.unwrap_or_else(|| self.inner.transport.request_bound());
        // Boxed: a request's future is large (tonic), and the futures that wait
        // on it (a waiter, thousands of them) should not carry it inline.
        Box::pin(self.inner.transport.call(bound, op)).await.result
    }

    /// [`Client::call`] for a bounded history replay (a watch that ends
    /// with the call).
    pub(crate) async fn call_watch<T, F, Fut>(&self, bound: Option<Bound>, op: F) -> Result<T>
    where
        F: FnMut(etcd_client::WatchClient) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        self.check_open()?;
        let bound = bound.unwrap_or_else(|| self.inner.transport.request_bound());
        Box::pin(self.inner.transport.call_watch(bound, op))
            .await
            .result
    }

    /// [`Client::call`] for a lease request.
    pub(crate) async fn call_lease<T, F, Fut>(&self, bound: Option<Bound>, op: F) -> Result<T>
    where
        F: FnMut(etcd_client::LeaseClient) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        self.check_open()?;
        let bound = bound.unwrap_or_else(|| self.inner.transport.request_bound());
        Box::pin(self.inner.transport.call_lease(bound, op))
            .await
            .result
    }

    /// The bound of a public call that starts now and does not wait for a
    /// lock: the client's request timeout.
    pub(crate) fn request_bound(&self) -> Bound {
        self.inner.transport.request_bound()
    }
}

impl Client {
    /// Connect to etcd and open the session (grant its lease). With a
    /// `mem://` or `mem://NAME` endpoint it starts (or joins) the in-process
    /// etcd of that name instead: the same protocol, revisions, leases and
    /// watches as etcd, for unit tests without etcd. It **locks nothing
    /// across processes** (see [`ClientOptions::endpoints`]). Fails with
    /// `Unavailable` when no endpoint answers within the connect timeout,
    /// `AuthFailed` on bad credentials, `InvalidArgument` on bad options.
    /// With [`ClientOptions::lazy_connect`] it only checks the options (and
    /// reads the TLS files) and returns at once: the first call that needs
    /// etcd connects, within that call's own bound.
    pub async fn connect(opts: ClientOptions) -> Result<Client> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::invalid(
                "Client::connect must run inside a tokio runtime (or use etcdlock::blocking)",
            )
        })?;
        opts.validate()?;
        let endpoints = opts.endpoints.join(",");
        let (urls, co) = connect::channel(&opts)?;
        let deadline = Instant::now() + opts.connect_timeout;
        let transport = Arc::new(
            Transport::new(urls, endpoints.clone(), co, opts.request_timeout)
                .with_direct(opts.connect_timeout),
        );
        if !opts.lazy_connect {
            transport.connect(deadline).await?;
        }
        // Closing the client also ends its lock waits' requests (Transport::call_in_slot).
        let closed = transport.closing.clone();
        let hub = WatchHub::start(transport.clone(), &handle, closed.clone());
        let inner = Arc::new(Inner {
            transport,
            hub,
            endpoints,
            ns: opts.namespace.clone().unwrap_or_default().into_bytes(),
            ttl: AtomicI64::new(opts.ttl_secs),
            requested_ttl: opts.ttl_secs,
            margin: opts.margin,
            keepalive: opts.keepalive_interval,
            watch_held_keys: opts.watch_held_keys,
            session: AsyncMutex::new(None),
            closed,
            windows: Default::default(),
            admissions: Arc::new(tokio::sync::Semaphore::new(crate::client::window::ADMITTED)),
            reentry: Default::default(),
            cleanups: Default::default(),
            meta: Default::default(),
            metrics: Arc::new(crate::metrics::Recorder::new()),
            pid: crate::runtime::current_pid(),
            handle,
        });
        let client = Client { inner };
        if opts.lazy_connect {
            tracing::debug!(endpoints = %client.inner.endpoints, "lazy connect: etcd is reached by the first call");
            return Ok(client);
        }
        // Opening the session proves a member answers and reports the effective TTL.
        client
            .session_by(Bound::Request(deadline))
            .await
            .map_err(|e| {
                if matches!(e.code(), ErrorCode::Unavailable | ErrorCode::Timeout) {
                    Error::new(
                        ErrorCode::Unavailable,
                        format!(
                            "no etcd endpoint answered within {:?}: {} ({})",
                            opts.connect_timeout,
                            client.inner.endpoints,
                            e.message()
                        ),
                    )
                } else {
                    e
                }
            })?;
        Ok(client)
    }

    /// The effective lease TTL in seconds (etcd raises TTLs below its minimum).
    pub fn ttl(&self) -> i64 {
        self.inner.ttl.load(Ordering::Relaxed)
    }

    /// The endpoints, as given.
    pub fn endpoints(&self) -> &str {
        &self.inner.endpoints
    }

    /// The current session's lease id, if a session is open.
    pub async fn lease_id(&self) -> Option<i64> {
        self.inner
            .session
            .lock()
            .await
            .as_ref()
            .filter(|s| s.alive())
            .map(|s| s.lease)
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.inner.closed.is_cancelled() {
            return Err(Error::new(ErrorCode::Closed, "the client was closed"));
        }
        if self.inner.pid != crate::runtime::current_pid() {
            return Err(Error::new(
                ErrorCode::Closed,
                "this client was created in the parent process before fork(); create a new client in the child",
            ));
        }
        Ok(())
    }

    /// The live session, or a fresh one (new lease) if there is none or it was
    /// lost; the lease grant is retried within the call's `bound`.
    pub(crate) async fn session_by(&self, bound: Bound) -> Result<Arc<Session>> {
        self.check_open()?;
        {
            let slot = self.inner.session.lock().await;
            if let Some(s) = slot.as_ref().filter(|s| s.alive()) {
                return Ok(s.clone());
            }
        }
        // Boxed: a lock call's future stays small unless it has to grant a lease.
        Box::pin(self.open_session(bound)).await
    }

    async fn open_session(&self, bound: Bound) -> Result<Arc<Session>> {
        let mut slot = self.inner.session.lock().await;
        if let Some(s) = slot.as_ref() {
            if s.alive() {
                return Ok(s.clone());
            }
            // A lost session's lease may still exist (e.g. after a partition):
            // revoke it, once the session has named its loss (it may be asking
            // etcd why right now).
            let old = s.clone();
            let t = self.inner.transport.clone();
            self.inner.handle.spawn(async move {
                if tokio::time::timeout(
                    t.request_timeout + Duration::from_millis(100),
                    old.wait_lost(),
                )
                .await
                .is_err()
                {
                    old.mark_lost(LossReason::ConnectionLost);
                }
                let _ = t
                    .call_lease(t.request_bound(), move |mut c| {
                        let id = old.lease;
                        async move { c.revoke(id).await }
                    })
                    .await
                    .result;
            });
        }
        let mut sent = Instant::now();
        let ttl = self.inner.requested_ttl;
        let resp = self
            .inner
            .transport
            .call_lease(bound, |mut c| {
                sent = Instant::now();
                async move { c.grant(ttl, None).await }
            })
            .await
            .result?;
        let ttl = resp.ttl().max(1);
        self.inner.ttl.store(ttl, Ordering::Relaxed);
        let margin = self
            .inner
            .margin
            .unwrap_or_else(|| default_margin(ttl))
            // Checked at connect against the requested TTL; etcd may grant a
            // longer one (its minimum), never a shorter one.
            .min(Duration::from_millis(ttl as u64 * 1000 / 2));
        // Until the first lock key, renewals are checked by reading a key of
        // the namespace (one that does not exist).
        let mut probe = self.inner.ns.clone();
        probe.extend_from_slice(format!("{:x}", resp.id()).as_bytes());
        let s = Session::new(resp.id(), ttl, margin, sent, self.inner.keepalive, probe);
        tracing::debug!(lease = format!("{:x}", resp.id()), ttl, "session opened");
        self.inner.handle.spawn(
            s.clone()
                .run(self.inner.transport.clone(), self.inner.metrics.clone()),
        );
        *slot = Some(s.clone());
        Ok(s)
    }

    /// Close the client: revoke the session's lease (which releases every lock it
    /// holds at once), report `ClientClosed` to their guards, refuse further
    /// calls with `Closed`, and close the connection to etcd, though handles
    /// to this client live on (a plaintext member's before this returns; a
    /// TLS member's as soon as the requests still on it end). Idempotent.
    pub async fn close(&self) {
        if self.inner.closed.is_cancelled() {
            return;
        }
        // One bound for all of it, as for any call that is not a lock wait:
        // the revokes and the connection's close share the request timeout,
        // whatever etcd does (hung, down, slow).
        let until = Instant::now() + self.inner.transport.request_timeout;
        // Every lock wait of this client ends `Closed` now, also one whose
        // request is retrying while etcd is away (and one granting a lease
        // in the session slot taken below).
        self.inner.closed.cancel();
        let slot = tokio::time::timeout_at(until.into(), self.inner.session.lock()).await;
        let Ok(mut slot) = slot else {
            // A try_lock or guarded call is granting a lease with etcd slow:
            // its session, if it gets one, is ended when the grant is done.
            let c = self.clone();
            self.inner.handle.spawn(async move {
                let s = c.inner.session.lock().await.take();
                let t = c.inner.transport.clone();
                if let Some(s) = s {
                    s.mark_lost(LossReason::ClientClosed);
                    let _ = t
                        .call_lease(t.request_bound(), move |mut c| {
                            let id = s.lease;
                            async move { c.revoke(id).await }
                        })
                        .await
                        .result;
                }
                t.shut(Instant::now() + t.request_timeout).await;
            });
            return;
        };
        let s = slot.take();
        drop(slot);
        if let Some(s) = s {
            s.mark_lost(LossReason::ClientClosed);
            if self.inner.pid != crate::runtime::current_pid() {
                // A forked child: the connection belongs to the parent; the lease is the parent's business.
                return;
            }
            if !s.alive() && s.deadline() < Instant::now() {
                // Known lost: etcd is unreachable or the lease is gone; don't make the caller wait.
                let t = self.inner.transport.clone();
                self.inner.handle.spawn(async move {
                    let _ = t
                        .call_lease(t.request_bound(), move |mut c| {
                            let id = s.lease;
                            async move { c.revoke(id).await }
                        })
                        .await
                        .result;
                    t.shut(Instant::now() + t.request_timeout).await;
                });
                return;
            }
            let t = &self.inner.transport;
            let bound = Bound::Request(until);
            // A clean end: the lock-delays of this session's holds do not
            // apply (their leases go first, together, then the session's).
            let delays = s.delay_lease_ids().into_iter().map(|id| async move {
                let _ = t
                    .call_lease(bound, move |mut c| async move { c.revoke(id).await })
                    .await
                    .result;
            });
            futures_util::future::join_all(delays).await;
            let _ = t
                .call_lease(bound, move |mut c| {
                    let id = s.lease;
                    async move { c.revoke(id).await }
                })
                .await
                .result;
        } else if self.inner.pid != crate::runtime::current_pid() {
            return;
        }
        // The connection goes now, not when the last handle to this client is
        // dropped (in Java, Python and Node: when garbage collection frees it).
        self.inner.transport.shut(until).await;
    }

    /// The lease that carries the lock-delay records of `session`'s holds
    /// with a delay of `secs` seconds: TTL + `secs` + 1, renewed right after
    /// the session's own keep-alives, so it outlives the session's lease by
    /// at least the delay. The extra second covers etcd's expiry loop, which
    /// revokes expired leases on a 500 ms tick: the session's lease may go
    /// up to a tick late and this one on time (granted on first use).
    pub(crate) async fn delay_lease(
        &self,
        session: &Session,
        secs: u64,
        bound: Bound,
    ) -> Result<i64> {
        if let Some(id) = session.delay_lease(secs) {
            return Ok(id);
        }
        let ttl = session.ttl + secs as i64 + 1;
        // Boxed: a lock call's future is held for its whole wait and is as
        // large as its largest inline await, used or not; inline, this grant
        // would make every lock call larger, lock-delay or not
        // (`a_waiters_futures_carry_no_request_inline` in mutex.rs bounds it).
        let resp = Box::pin(
            self.inner
                .transport
                .call_lease(bound, move |mut c| async move { c.grant(ttl, None).await }),
        )
        .await
        .result?;
        let id = session.set_delay_lease(secs, resp.id());
        if id != resp.id() {
            let (t, ours) = (self.inner.transport.clone(), resp.id());
            self.inner.handle.spawn(async move {
                let _ = t
                    .call_lease(t.request_bound(), move |mut c| async move {
                        c.revoke(ours).await
                    })
                    .await
                    .result;
            });
        }
        Ok(id)
    }

    /// Whether [`Client::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.is_cancelled()
    }

    /// The raw etcd-client handle of the member in use (for tests, benchmarks
    /// and tools; keys are not namespaced; no failover). A client that has
    /// not reached etcd yet ([`ClientOptions::lazy_connect`]) connects first,
    /// within the request timeout: `Unavailable` when no member answers,
    /// `Closed` when the client was closed before it ever connected. The
    /// handle of a closed client fails every request.
    #[cfg(feature = "bench")]
    pub async fn etcd(&self) -> Result<etcd_client::Client> {
        if let Some(c) = self.inner.transport.any_client() {
            return Ok(c);
        }
        self.check_open()?;
        let t = &self.inner.transport;
        t.connect(Instant::now() + t.request_timeout).await?;
        t.any_client()
            .ok_or_else(|| Error::new(ErrorCode::Closed, "the client was closed"))
    }

    /// Watch streams this client has opened: one for all its waits and held
    /// keys, plus one per re-creation after a stream failure.
    pub fn watch_streams_opened(&self) -> u64 {
        self.inner.hub.streams_opened()
    }

    /// The endpoint requests go to now (it changes on failover).
    pub fn member_in_use(&self) -> String {
        self.inner.transport.member_in_use().to_string()
    }

    /// Watch subscriptions right now (each waiter has two or three: its own
    /// key, its predecessor and the key ahead of it; each held lock one).
    pub fn active_watches(&self) -> i64 {
        self.inner.hub.active()
    }

    /// Watches this client keeps registered in etcd: one per watched key,
    /// shared by every wait and hold on that key, and kept for a while after
    /// the last of them ends so the next acquisition reuses it.
    pub fn etcd_watches(&self) -> i64 {
        self.inner.hub.etcd_watches()
    }

    /// Check that etcd answers and the client's session is alive (a lost one is
    /// reopened, as the next lock call would): one count-only read, bounded by
    /// the request timeout. Returns its round trip. `Unavailable` when no
    /// member answers, `Closed` after [`Client::close`]. For health checks.
    pub async fn ping(&self) -> Result<Duration> {
        self.check_open()?;
        let t = Instant::now();
        let bound = self.request_bound();
        self.session_by(bound).await?;
        let key = self.ns_key(b"etcdlock-ping");
        self.call(Some(bound), |mut c| {
            let k = key.clone();
            async move {
                c.get(k, Some(etcd_client::GetOptions::new().with_count_only()))
                    .await
            }
        })
        .await?;
        Ok(t.elapsed())
    }

    /// What this client has done so far: acquisitions by outcome and their
    /// wait time, waiters and holds now, hold time, losses by reason, and the
    /// keep-alive's last round trip (see [`crate::Metrics`]). A few atomic
    /// loads: cheap enough to poll.
    pub fn metrics(&self) -> crate::metrics::Metrics {
        let mut m = self.inner.metrics.snapshot();
        m.member_failures = self.inner.transport.member_failures.load(Ordering::Relaxed);
        m
    }

    /// The namespace prefix applied to keys.
    pub fn namespace(&self) -> &[u8] {
        &self.inner.ns
    }

    /// Count an acquisition of `name` as `kind` in the meta records until the
    /// returned mark is dropped (starting their flush task if it is idle).
    pub(crate) fn meta_wait<'a>(
        &'a self,
        name: &'a str,
        kind: crate::meta::LockKind,
        metadata: &[(String, String)],
    ) -> metaflush::MetaWait<'a> {
        if self.inner.meta.wait_started(name, kind, metadata) {
            self.inner
                .handle
                .spawn(metaflush::flush_meta(Arc::downgrade(&self.inner)));
        }
        metaflush::MetaWait {
            inner: &self.inner,
            name,
        }
    }

    pub(crate) fn ns_key(&self, key: &[u8]) -> Vec<u8> {
        let mut k = self.inner.ns.clone();
        k.extend_from_slice(key);
        k
    }
}
