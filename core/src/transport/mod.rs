//! Requests to etcd: which member answers, how many requests are in flight, and
//! what is worth retrying. Everything above (sessions, the watch hub, the lock
//! recipes) goes through here, so failover and backpressure live in one place.
//!
//! Why not etcd-client's balanced channel alone: tower's balancer happily routes
//! to a member that accepts TCP and never answers, and a refused connection
//! fails the request instead of trying the next member (with one dead endpoint
//! listed, 4 connects in 10 fail that way). So each member gets its own
//! channel, connect probes every member at once and keeps the first that
//! answers, and a member that fails is benched with backoff while requests go to
//! the next one.
//!
//! Layer: the bottom one. It owns the members, their connections and the two
//! doors every request leaves by: the unary door (request.rs: a slot, then
//! attempts member after member, reporting whether an outcome is uncertain)
//! and the stream door (stream.rs: a member for a watch or keep-alive
//! stream, and the requests pinned to that stream's member). It calls only
//! etcd-client, tonic and `crate::error`; everything else (sessions, the
//! watch hub, guards, the engine and the recipes) calls it.

use crate::poison::Locked;
use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::error::{Error, ErrorCode, Result};

mod direct;
mod policy;
pub(crate) use policy::{check_endpoint, classify, jitter, mem_store, Answer, Bound, Kind};

mod request;
mod steer;
mod stream;
pub(crate) use steer::Verdict;
pub(crate) use stream::Pinned;

/// Requests one client keeps in flight at most; further ones queue in the
/// client, so a burst of 10,000 acquisitions never meets `too many requests`.
pub(crate) const MAX_IN_FLIGHT: usize = 256;

struct Member {
    url: String,
    client: Mutex<Option<etcd_client::Client>>,
    /// Benched until this instant after a failure.
    down_until: Mutex<Option<Instant>>,
    failures: AtomicU32,
}

pub(crate) struct Transport {
    members: Vec<Member>,
    /// Requests that failed on a member (each benched it), for the metrics.
    pub(crate) member_failures: std::sync::atomic::AtomicU64,
    current: AtomicUsize,
    /// The highest raft term a member's status has shown ([`Transport::judge`]):
    /// a later one means an election happened since.
    term: AtomicU64,
    inflight: Arc<Semaphore>,
    options: etcd_client::ConnectOptions,
    /// The endpoints as given, for messages.
    pub(crate) endpoints: String,
    pub(crate) request_timeout: Duration,
    /// Bumped whenever a member is benched, so streams on it (the watch hub)
    /// move at once instead of waiting for HTTP/2 keep-alive to notice.
    benched_tx: tokio::sync::watch::Sender<u64>,
    /// Plain-text members get the direct HTTP/2 channel ([`direct`]) with
    /// these settings; `None`: etcd-client's own channel for every member.
    direct: Option<direct::DirectOptions>,
    /// What [`Transport::shut`] closes.
    closer: Arc<direct::Closer>,
    /// Cancelled when the client starts closing (it is the client's `closed`):
    /// a lock wait's request, which may otherwise retry for as long as etcd is
    /// away, ends `Closed` at once.
    pub(crate) closing: tokio_util::sync::CancellationToken,
}

impl Transport {
    pub(crate) fn new(
        urls: Vec<String>,
        endpoints: String,
        options: etcd_client::ConnectOptions,
        request_timeout: Duration,
    ) -> Transport {
        Transport {
            member_failures: std::sync::atomic::AtomicU64::new(0),
            members: urls
                .into_iter()
                .map(|url| Member {
                    url,
                    client: Mutex::new(None),
                    down_until: Mutex::new(None),
                    failures: AtomicU32::new(0),
                })
                .collect(),
            current: AtomicUsize::new(0),
            term: AtomicU64::new(0),
            inflight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            options,
            endpoints,
            request_timeout,
            benched_tx: tokio::sync::watch::channel(0).0,
            direct: None,
            closer: direct::Closer::new(),
            closing: Default::default(),
        }
    }

    /// Use the direct HTTP/2 channel for `http://` members (and members
    /// without a scheme), unless `ETCDLOCK_TONIC_CHANNEL=1` asks for
    /// etcd-client's own channel (the channel `https://` members use; the
    /// variable compares the two on plaintext members).
    pub(crate) fn with_direct(mut self, connect_timeout: Duration) -> Transport {
        if std::env::var_os("ETCDLOCK_TONIC_CHANNEL").is_some_and(|v| v == "1") {
            return self;
        }
        self.direct = Some(direct::DirectOptions {
            connect_timeout,
            keep_alive_interval: Duration::from_secs(5),
            keep_alive_timeout: self.request_timeout,
            closer: self.closer.clone(),
        });
        self
    }

    /// Close the connections, for good (the client has closed): a direct
    /// member's socket is closed when this returns (waiting at most until
    /// `until`), whoever still holds its client (a binding's client object
    /// that garbage collection has not freed yet), and no request connects
    /// again; they fail `Closed` (one in flight too, at once). A member on etcd-client's own channel
    /// (TLS) has its client dropped here: its connection closes as soon as
    /// the requests still on it end (tonic closes a channel with its last
    /// handle), unless a bench or test tool keeps a raw client from
    /// `Client::etcd` (the `bench` feature's door).
    pub(crate) async fn shut(&self, until: Instant) {
        self.closer
            .close(until.saturating_duration_since(Instant::now()))
            .await;
        for (i, m) in self.members.iter().enumerate() {
            if self.direct.is_some() && self.plain_url(i).is_some() {
                continue; // its channel refuses from now on
            }
            if m.client.locked().is_none() {
                continue;
            }
            // In its place, a client whose requests fail `Unavailable` (what
            // `Client::etcd` gives after close), never connecting.
            let refusing = self.refusing_client().await;
            let old = std::mem::replace(&mut *m.client.locked(), refusing);
            drop(old);
        }
    }

    /// An etcd-client client on a direct channel of this closed transport:
    /// every request fails at once, and nothing is ever connected.
    async fn refusing_client(&self) -> Option<etcd_client::Client> {
        const NOWHERE: &str = "http://127.0.0.1:1";
        let d = direct::Direct {
            url: http::Uri::from_static(NOWHERE),
            options: direct::DirectOptions {
                connect_timeout: self.request_timeout,
                keep_alive_interval: Duration::from_secs(5),
                keep_alive_timeout: self.request_timeout,
                closer: self.closer.clone(),
            },
        };
        etcd_client::Client::connect_with_balanced_channel([NOWHERE], None, d)
            .await
            .ok()
    }

    /// Member `i`'s URL as `http://`, or `None` for a TLS member.
    fn plain_url(&self, i: usize) -> Option<String> {
        let url = &self.members[i].url;
        match url.split_once("://") {
            None => Some(format!("http://{url}")),
            Some(("http", _)) => Some(url.clone()),
            Some(_) => None,
        }
    }

    /// What a member refuses to connect with once the transport is shut.
    fn shut_error() -> etcd_client::Error {
        etcd_client::Error::IoError(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "the client was closed",
        ))
    }

    /// Changes whenever a member is benched.
    pub(crate) fn benched_events(&self) -> tokio::sync::watch::Receiver<u64> {
        self.benched_tx.subscribe()
    }

    pub(crate) fn members_len(&self) -> usize {
        self.members.len()
    }

    /// Whether member `i` is benched now.
    pub(crate) fn is_benched(&self, i: usize) -> bool {
        self.benched(i, Instant::now()).is_some()
    }

    fn unavailable(&self, why: impl std::fmt::Display) -> Error {
        Error::new(
            ErrorCode::Unavailable,
            format!("etcd at {}: {why}", self.endpoints),
        )
    }

    /// The member's client, made on first use. Making it talks to the member
    /// only when credentials are set (etcd-client authenticates at once).
    async fn member_client(
        &self,
        i: usize,
    ) -> std::result::Result<etcd_client::Client, etcd_client::Error> {
        self.member(i, etcd_client::Client::clone).await
    }

    /// What `pick` takes from the member's client (made on first use). A
    /// request needs only its own service's client, not a clone of the whole
    /// `etcd_client::Client` (eight of them) made and dropped per request.
    async fn member<C>(
        &self,
        i: usize,
        pick: fn(&etcd_client::Client) -> C,
    ) -> std::result::Result<C, etcd_client::Error> {
        let m = &self.members[i];
        if let Some(c) = m.client.locked().as_ref() {
            return Ok(pick(c));
        }
        if self.closer.is_closed() {
            return Err(Self::shut_error());
        }
        // Boxed: connecting is rare, and its future would make every request's larger.
        let plain = self.plain_url(i);
        let c = match (&self.direct, plain) {
            (Some(o), Some(url)) => {
                let d = direct::Direct {
                    url: url
                        .parse()
                        .map_err(|e| etcd_client::Error::InvalidArgs(format!("{url}: {e}")))?,
                    options: o.clone(),
                };
                Box::pin(etcd_client::Client::connect_with_balanced_channel(
                    [url.as_str()],
                    Some(self.options.clone()),
                    d,
                ))
                .await?
            }
            _ => {
                Box::pin(etcd_client::Client::connect(
                    [m.url.as_str()],
                    Some(self.options.clone()),
                ))
                .await?
            }
        };
        let out = pick(&c);
        *m.client.locked() = Some(c);
        // Shut while this connected: `shut` closes first, then replaces the
        // clients it finds, so either it finds this one, or this sees it closed.
        if self.closer.is_closed() {
            drop(m.client.locked().take());
            return Err(Self::shut_error());
        }
        Ok(out)
    }

    fn benched(&self, i: usize, now: Instant) -> Option<Instant> {
        let d = *self.members[i].down_until.locked();
        d.filter(|t| *t > now)
    }

    /// The member to use now: the current one unless benched, else the next
    /// that is not, else the one whose bench ends first.
    fn pick(&self) -> usize {
        let n = self.members.len();
        let now = Instant::now();
        let cur = self.current.load(Ordering::Relaxed) % n;
        let mut best = (cur, Instant::now() + Duration::from_secs(3600));
        for k in 0..n {
            let i = (cur + k) % n;
            match self.benched(i, now) {
                None => {
                    if i != cur {
                        self.current.store(i, Ordering::Relaxed);
                    }
                    return i;
                }
                Some(t) if t < best.1 => best = (i, t),
                Some(_) => {}
            }
        }
        best.0
    }

    /// Bench a member that failed; requests move to the next one.
    pub(crate) fn fail(&self, i: usize) {
        let m = &self.members[i];
        self.member_failures.fetch_add(1, Ordering::Relaxed);
        let n = m.failures.fetch_add(1, Ordering::Relaxed).min(6);
        let bench = jitter(Duration::from_millis(100) * (1 << n)).min(Duration::from_secs(5));
        *m.down_until.locked() = Some(Instant::now() + bench);
        self.benched_tx.send_modify(|n| *n += 1);
        if self.members.len() > 1 {
            let _ = self.current.compare_exchange(
                i,
                (i + 1) % self.members.len(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            tracing::info!(member = %m.url, "etcd member failed; trying the next one");
        }
    }

    fn ok(&self, i: usize) {
        let m = &self.members[i];
        if m.failures.swap(0, Ordering::Relaxed) != 0 {
            *m.down_until.locked() = None;
        }
    }

    /// The URL of the member requests go to now.
    pub(crate) fn member_in_use(&self) -> &str {
        &self.members[self.current.load(Ordering::Relaxed) % self.members.len()].url
    }

    /// The client of the member in use (for tools and tests; no failover).
    #[cfg(feature = "bench")]
    pub(crate) fn any_client(&self) -> Option<etcd_client::Client> {
        let i = self.current.load(Ordering::Relaxed) % self.members.len();
        let c = self.members[i].client.locked().clone();
        c.or_else(|| self.members.iter().find_map(|m| m.client.locked().clone()))
    }

    /// Probe every member at once and make the first that answers current.
    /// Fails with `Unavailable` (naming the endpoints and the last cause) when
    /// none answers before `deadline`, or at once with a final error such as
    /// `AuthFailed`.
    pub(crate) async fn connect(self: &Arc<Self>, deadline: Instant) -> Result<()> {
        let mut probes = tokio::task::JoinSet::new();
        for i in 0..self.members.len() {
            let t = self.clone();
            probes.spawn(async move {
                let r = async {
                    let st = t.pinned(i).await?.status().await?;
                    t.saw(&st);
                    Ok::<_, etcd_client::Error>(())
                }
                .await;
                (i, r)
            });
        }
        let mut last: Option<Error> = None;
        let until = tokio::time::Instant::from_std(deadline);
        loop {
            match tokio::time::timeout_at(until, probes.join_next()).await {
                Ok(Some(Ok((i, Ok(()))))) => {
                    self.ok(i);
                    self.current.store(i, Ordering::Relaxed);
                    // The slower probes may still finish and warm their member's channel.
                    probes.detach_all();
                    return Ok(());
                }
                Ok(Some(Ok((i, Err(e))))) => {
                    let kind = classify(&e);
                    let err = Error::from_etcd(e, &self.members[i].url);
                    if kind == Kind::Final && err.code() != ErrorCode::Unavailable {
                        return Err(err);
                    }
                    self.fail(i);
                    last = Some(err);
                }
                Ok(Some(Err(join))) => {
                    last = Some(Error::new(
                        ErrorCode::Internal,
                        format!("connect probe failed: {join}"),
                    ))
                }
                Ok(None) => break,
                Err(_) => break,
            }
        }
        let cause = last
            .map(|e| format!("; last error: {}", e.message()))
            .unwrap_or_default();
        Err(Error::new(
            ErrorCode::Unavailable,
            format!(
                "no etcd endpoint answered within the connect timeout: {}{cause}",
                self.endpoints
            ),
        ))
    }

    /// How long a member may stay silent on one attempt before the request
    /// moves to another member (and the member is benched): a quarter of the
    /// request timeout, between 250 and 500 ms. Two silent members in a row
    /// (a follower stuck forwarding to a hung leader, then that leader) still
    /// leave a call time to reach the third within its bound. HTTP/2 pings
    /// cannot find a hung member this fast: etcd answers pings more often than
    /// every 5 s (`--grpc-keepalive-min-time`) with GOAWAY `too_many_pings`.
    pub(crate) fn silence(&self) -> Duration {
        (self.request_timeout / 4).clamp(Duration::from_millis(250), Duration::from_millis(500))
    }

    /// How long one attempt waits for a member judged alive before it is
    /// sent again ([`Transport::judge`]): four request timeouts, at least
    /// 2 s. etcd answers every request it does not lose by then (a proposal
    /// Raft dropped ends in etcd's own request timeout, 5 s plus two
    /// election timeouts by default), and HTTP/2 keep-alive finds a dead
    /// connection sooner.
    pub(crate) fn resend_after(&self) -> Duration {
        (self.request_timeout * 4).max(Duration::from_secs(2))
    }

    /// The bound of a call that starts now and is not a lock wait.
    pub(crate) fn request_bound(&self) -> Bound {
        Bound::Request(Instant::now() + self.request_timeout)
    }

    /// Whether a member other than `i` is not benched now.
    fn has_alternative(&self, i: usize) -> bool {
        let now = Instant::now();
        (0..self.members.len()).any(|k| k != i && self.benched(k, now).is_none())
    }

    /// The error of a call whose bound ran out; `last` says what etcd did.
    pub(crate) fn expired(&self, bound: Bound, last: Option<&Error>) -> Error {
        let cause = last
            .map(|e| format!("; last: {}", e.message()))
            .unwrap_or_default();
        match bound {
            Bound::Wait(_) => Error::new(
                ErrorCode::Timeout,
                format!(
                    "etcd at {} did not answer before the deadline{cause}",
                    self.endpoints
                ),
            ),
            Bound::Request(_) => self.unavailable(format_args!(
                "no answer within the request timeout ({:?}){cause}",
                self.request_timeout
            )),
        }
    }
}
