//! The one parser of client options (OpenDAL's `Operator::via_iter` shape):
//! every binding and the CLI hands core string pairs, and the environment
//! (`ETCDLOCK_*`) goes through the same parser, so a key means the same and
//! is refused with the same message in every language. `ETCDLOCK_KEY` is not
//! an option: `etcdlock run` exports the lock key under that name.
//!
//! Keys: `endpoints` (comma separated), `ttl`, `namespace`, `username`,
//! `password`, `tls_ca`, `tls_cert`, `tls_key`, `tls_domain`,
//! `connect_timeout`, `request_timeout`, `margin`, `watch_held_keys`,
//! `keepalive_interval`, `lazy_connect`.
//! Durations: `250ms`, `5s`, `2m`, `1h` (also `us`, `ns`), or a plain number
//! of seconds (fractions and exponents allowed). TTL: whole seconds, same syntax. Booleans:
//! `true/false/1/0/yes/no/on/off`. An empty value means "not set".
//!
//! How explicit options and the environment combine (the same in every
//! language): the environment gives the defaults, explicit options override
//! them key by key; an environment variable that does not parse is an error
//! only when its key is not given explicitly.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

mod pairs;
pub use pairs::{env_var, parse_duration, OPTION_KEYS};

/// etcd's upper bound for a lease TTL (`MaxLeaseTTL`, 9,000,000,000 s).
pub const MAX_TTL_SECS: i64 = 9_000_000_000;
/// Longest accepted connect or request timeout (a day).
pub const MAX_CLIENT_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// TLS material, as PEM files.
#[derive(Clone, Default)]
pub struct TlsOptions {
    /// CA bundle that signs the etcd server certificates.
    pub ca: Option<PathBuf>,
    /// Client certificate for mutual TLS.
    pub cert: Option<PathBuf>,
    /// Client private key for mutual TLS.
    pub key: Option<PathBuf>,
    /// Server name to verify instead of the endpoint's host.
    pub domain: Option<String>,
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("ca", &self.ca)
            .field("cert", &self.cert)
            .field("key", &self.key.as_ref().map(|_| "<path>"))
            .field("domain", &self.domain)
            .finish()
    }
}

/// How to reach etcd and how to hold locks. Build with [`ClientOptions::new`]
/// and the `with_*` methods; every binding exposes the same fields.
#[derive(Clone)]
pub struct ClientOptions {
    /// etcd endpoints (`http://127.0.0.1:2379`, `https://...`, or `host:port`),
    /// or one in-process store for unit tests: `mem://` (the process-wide
    /// default store) or `mem://NAME` (clients in this process naming the
    /// same NAME share one store). An in-process store is an etcd v3 server
    /// run inside this process (loopback only), so every lock, recipe and
    /// watch behaves as on etcd; but it **locks nothing across processes**
    /// and dies with the process: it is for unit tests. It cannot be mixed
    /// with etcd endpoints, TLS or credentials (`InvalidArgument`).
    pub endpoints: Vec<String>,
    /// Lease TTL in seconds (default 15). Below etcd's minimum it is raised by
    /// etcd; see [`Client::ttl`](crate::Client::ttl) for the effective value.
    pub ttl_secs: i64,
    /// Prefix prepended to every key this client touches.
    pub namespace: Option<String>,
    /// Username for etcd auth.
    pub username: Option<String>,
    /// Password for etcd auth (never printed).
    pub password: Option<String>,
    /// TLS; `None` means plaintext (and `https://` endpoints are then refused).
    pub tls: Option<TlsOptions>,
    /// Bound on connecting: reaching a member (DNS, TCP, TLS, auth) and
    /// granting the session's lease (default 5 s); `Unavailable` after it.
    pub connect_timeout: Duration,
    /// Bound on every call that does not wait for a lock (try_lock, unlock,
    /// guarded operations, status, ping), retries and failover included:
    /// `Unavailable` when no member answered within it (default 2 s). Calls
    /// that wait for a lock are bounded by their own timeout instead. A
    /// member silent for a quarter of it (at most 500 ms) is left for another, so
    /// an etcd leader election (1-2 s) does not fail a call and a hung member
    /// does not stall one for long.
    pub request_timeout: Duration,
    /// Safety margin subtracted from the lease TTL for local loss detection
    /// (default: TTL/5, at most 2 s).
    pub margin: Option<Duration>,
    /// Watch each held key so an outside delete is reported (default true):
    /// at once for a lock that was waited for (its wait's watch carries on),
    /// within 60 ms plus one read for a lock taken with no wait (its watch
    /// starts once it has been held 50 to 60 ms, so short holds cost no watch).
    /// The session's lease is watched either way.
    pub watch_held_keys: bool,
    /// Time between the session's keep-alives (default: 75 % of the TTL or
    /// TTL - margin - 5 s, whichever is shorter; at small TTLs, where that is
    /// shorter still, a third of the TTL and at most a quarter of TTL -
    /// margin, at least 250 ms: 1 s at TTL 5 s, 8 s at the default TTL 15 s,
    /// 45 s at TTL 60 s; each renewal costs etcd a keep-alive and the read
    /// that proves it, so a longer interval is a cheaper client). Each
    /// renewal goes up to a tenth of the interval early, at random, so that
    /// clients a fault put in phase drift apart. Must be at least 50 ms and
    /// leave room for a second try before the hold ends: at most TTL -
    /// margin - min(5 s, half of TTL - margin).
    pub keepalive_interval: Option<Duration>,
    /// Connect on first use instead of in `connect` (default false: connect
    /// fails fast, within `connect_timeout`, when no member answers). With
    /// it, `connect` only checks the options and returns at once, so a
    /// service can start while etcd is briefly down; `ping` reports
    /// `Unavailable` until a member answers, and each call reaches etcd
    /// within its own bound (a lock call its timeout, anything else the
    /// request timeout), opening the session (lease) on the first that needs
    /// one. Bad credentials then surface at that first call.
    pub lazy_connect: bool,
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("endpoints", &self.endpoints)
            .field("ttl_secs", &self.ttl_secs)
            .field("namespace", &self.namespace)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("margin", &self.margin)
            .field("watch_held_keys", &self.watch_held_keys)
            .field("keepalive_interval", &self.keepalive_interval)
            .field("lazy_connect", &self.lazy_connect)
            .finish()
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            ttl_secs: 15,
            namespace: None,
            username: None,
            password: None,
            tls: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(2),
            margin: None,
            watch_held_keys: true,
            keepalive_interval: None,
            lazy_connect: false,
        }
    }
}

impl ClientOptions {
    /// Options for these endpoints, everything else default.
    pub fn new<S: Into<String>>(endpoints: impl IntoIterator<Item = S>) -> Self {
        ClientOptions {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }
    /// Set the lease TTL in seconds.
    pub fn with_ttl(mut self, secs: i64) -> Self {
        self.ttl_secs = secs;
        self
    }
    /// Set the key namespace.
    pub fn with_namespace(mut self, ns: impl Into<String>) -> Self {
        self.namespace = Some(ns.into());
        self
    }
    /// Set username and password.
    pub fn with_user(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.username = Some(user.into());
        self.password = Some(password.into());
        self
    }
    /// Set TLS material.
    pub fn with_tls(mut self, tls: TlsOptions) -> Self {
        self.tls = Some(tls);
        self
    }
    /// Set the connect timeout.
    pub fn with_connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }
    /// Set the per-request timeout.
    pub fn with_request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    /// Options from the `ETCDLOCK_*` environment variables, through the one
    /// parser ([`ClientOptions::from_pairs`]): `ETCDLOCK_ENDPOINTS` (comma
    /// separated), `ETCDLOCK_TTL`, `ETCDLOCK_NAMESPACE`, `ETCDLOCK_USERNAME`,
    /// `ETCDLOCK_PASSWORD`, `ETCDLOCK_TLS_CA`, `ETCDLOCK_TLS_CERT`,
    /// `ETCDLOCK_TLS_KEY`, `ETCDLOCK_TLS_DOMAIN`, `ETCDLOCK_CONNECT_TIMEOUT`,
    /// `ETCDLOCK_REQUEST_TIMEOUT`, `ETCDLOCK_MARGIN`, `ETCDLOCK_WATCH_HELD_KEYS`.
    /// `ETCDLOCK_CA` and `ETCDLOCK_CERT` are still read, with a deprecation
    /// warning; `ETCDLOCK_KEY` is not (`etcdlock run` exports the lock key under
    /// that name).
    pub fn from_env() -> Result<Self> {
        ClientOptions::from_env_and_pairs(Vec::<(String, String)>::new())
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.endpoints.is_empty() {
            return Err(Error::invalid("no etcd endpoints given"));
        }
        let mem: Vec<&str> = self
            .endpoints
            .iter()
            .filter_map(|e| crate::transport::mem_store(e)?.ok())
            .collect();
        if !mem.is_empty() {
            if mem.len() != self.endpoints.len() {
                return Err(Error::invalid(format!(
                    "endpoints {:?} mix the in-process mem:// store with etcd endpoints; a client uses one or the other",
                    self.endpoints.join(",")
                )));
            }
            if mem.iter().any(|n| *n != mem[0]) {
                return Err(Error::invalid(format!(
                    "endpoints {:?} name more than one in-process store; a client uses one",
                    self.endpoints.join(",")
                )));
            }
            if self.tls.is_some() || self.username.is_some() || self.password.is_some() {
                return Err(Error::invalid(
                    "the in-process mem:// store has no TLS and no users: give neither TLS options nor credentials with it",
                ));
            }
        }
        for e in &self.endpoints {
            crate::transport::check_endpoint(e)?;
            if e.starts_with("https://") && self.tls.is_none() {
                return Err(Error::invalid(format!(
                    "endpoint {e} uses https but no TLS options (CA) were given; refusing to fall back to plaintext"
                )));
            }
        }
        if self.ttl_secs <= 0 || self.ttl_secs > MAX_TTL_SECS {
            return Err(Error::invalid(format!(
                "ttl must be between 1 and {MAX_TTL_SECS} seconds, got {}",
                self.ttl_secs
            )));
        }
        if let Some(m) = self.margin {
            // Above half the TTL, a hold would end locally before the next
            // keep-alive could renew it: refuse it rather than
            // clamp it in silence.
            if m.as_millis() * 2 > u128::from(self.ttl_secs as u64) * 1000 {
                return Err(Error::invalid(format!(
                    "margin ({m:?}) must be at most half the ttl ({} s)",
                    self.ttl_secs
                )));
            }
        }
        if let Some(k) = self.keepalive_interval {
            let margin = self.margin.unwrap_or_else(|| default_margin(self.ttl_secs));
            let most = max_keepalive_interval(self.ttl_secs, margin);
            if k < Duration::from_millis(50) || k > most {
                return Err(Error::invalid(format!(
                    "keepalive_interval ({k:?}) must be between 50ms and ttl - margin - min(5s, half of ttl - margin) ({most:?})"
                )));
            }
        }
        if self.connect_timeout.is_zero() || self.request_timeout.is_zero() {
            return Err(Error::invalid("timeouts must be positive"));
        }
        // One ceiling: a bound is added to the current instant, and a day is
        // already no bound at all for one request.
        for (what, d) in [
            ("connect_timeout", self.connect_timeout),
            ("request_timeout", self.request_timeout),
        ] {
            if d > MAX_CLIENT_TIMEOUT {
                return Err(Error::invalid(format!(
                    "{what} ({d:?}) must be at most {MAX_CLIENT_TIMEOUT:?}"
                )));
            }
        }
        if self.username.is_some() != self.password.is_some() {
            return Err(Error::invalid("username and password go together"));
        }
        Ok(())
    }
}

/// The margin when none is given: a fifth of the TTL, at most 2 s.
pub(crate) fn default_margin(ttl_secs: i64) -> Duration {
    Duration::from_millis((ttl_secs.max(0) as u64 * 1000 / 5).min(2000))
}

/// What a session keeps free after a renewal to get the next one through
/// when the TTL allows: an etcd election (1-2 s at etcd's default 1 s
/// election timeout), leaving a silent member (at most 500 ms) and the
/// retries after it.
const RENEWAL_ROOM: Duration = Duration::from_secs(5);

/// The keep-alive interval when none is given. Every renewal costs etcd two
/// messages (the keep-alive and the read that proves it, see
/// `session/keepalive.rs`), so the interval is as long as the room after it
/// allows, and the session renews no more often than etcd's Go client does
/// (every TTL/3: one message) at large TTLs:
///
/// - 75 % of the TTL or TTL - margin - 5 s, whichever is shorter: 5 s (at
///   least) is left after each renewal to get the next one through an etcd
///   leader change; at TTL 15 s, every 8 s (15-17 messages a minute, sent up
///   to a tenth early; Go about 11.4); at TTL 60 s, every 45 s (2.7-3.0 a
///   minute; Go about 3.0);
/// - at small TTLs, where that leaves no interval, a third of the TTL and at
///   most a quarter of TTL - margin (three more tries before the hold ends),
///   at least 250 ms: at TTL 5 s, every second.
pub(crate) fn default_keepalive_interval(ttl_secs: i64, margin: Duration) -> Duration {
    let ttl = Duration::from_secs(ttl_secs.max(1) as u64);
    let room = ttl.saturating_sub(margin);
    let short = (ttl / 3).min(room / 4).max(Duration::from_millis(250));
    let long = ttl.mul_f64(0.75).min(room.saturating_sub(RENEWAL_ROOM));
    short.max(long)
}

/// The longest keep-alive interval a client may set: one that leaves
/// min(5 s, half of TTL - margin) for a second try before the hold ends.
pub(crate) fn max_keepalive_interval(ttl_secs: i64, margin: Duration) -> Duration {
    let room = Duration::from_secs(ttl_secs.max(1) as u64).saturating_sub(margin);
    room.saturating_sub(RENEWAL_ROOM.min(room / 2))
}

/// The longest lock-delay or lease time an acquisition may ask for.
pub const MAX_LOCK_DELAY: Duration = Duration::from_secs(24 * 3600);

/// The most bytes of holder metadata (keys and values together) one
/// acquisition may carry.
pub const MAX_METADATA_BYTES: usize = 1024;

/// Options for one lock acquisition.
#[derive(Debug, Clone, Default)]
pub struct LockOptions {
    /// Give up with `Timeout` after this long (`None`: wait as long as it takes).
    pub timeout: Option<Duration>,
    /// Give up with `Cancelled` when this token is cancelled. (Dropping the
    /// future also cancels; the token is for callers that need the error.)
    pub cancel: Option<CancellationToken>,
    /// Chubby's lock-delay (Consul's `LockDelay`): if this hold ends because
    /// its lease ended (the process died or froze, its session expired or was
    /// revoked, it was cut off from etcd) rather than by `unlock`, the next
    /// holder, `try_lock` included, is granted the lock no earlier than this
    /// long after etcd removed the key, so that requests the vanished holder
    /// still had in flight drain first. A clean `unlock` (or drop, or
    /// `Client::close`, or an operator's `Client::release`) hands over at once.
    ///
    /// Rounded up to whole seconds (etcd leases count seconds), plus up to a
    /// second more (etcd revokes expired leases on a 500 ms tick, so the
    /// record's lease gets one second of headroom), and at most
    /// [`MAX_LOCK_DELAY`]. It costs the holder one more round trip per
    /// acquisition and a second lease per session and delay. Honoured by every
    /// etcdlock contender of `lock`/`try_lock`/`campaign` in any language;
    /// `etcdctl lock`, Go's `concurrency.Mutex` and etcdlock's `lock_many`,
    /// read locks and permits do not know of it and do not wait for it.
    pub lock_delay: Option<Duration>,
    /// Hold at most this long (Redisson's `leaseTime`, its
    /// `RPermitExpirableSemaphore`): when it has passed, the hold is released
    /// by the client even if the holder never unlocks (its guard reports the
    /// loss with `LeaseExpired`). Without it (the default) a hold lasts until
    /// `unlock` or the session's end. At most [`MAX_LOCK_DELAY`].
    pub lease_time: Option<Duration>,
    /// Who holds, as everyone can read it in `status`/`list` (ShedLock's
    /// `lockedBy`): string pairs, at most [`MAX_METADATA_BYTES`] in all.
    /// etcdlock adds the host, pid and language itself. Stored in the name's
    /// meta record, which is written once a name has been in use for 100 ms (the meta records' tick).
    pub metadata: Vec<(String, String)>,
    /// Fail the wait with `Deadlock` if it would close a cycle of clients
    /// waiting on each other's holds (off by default). The check reads the
    /// client's namespace when the call's key is queued, each time the key
    /// it waits behind changes, and while it waits (after 1, 2 and 4 s,
    /// then every 5 s). The wait that closes a cycle fails at once; an
    /// earlier one only on a cycle seen at two of its checks in a row, so
    /// one member backs off and the others are served, also when the wait
    /// that closed the cycle did not opt in. Costs one read of the
    /// namespace per check. Reentrant locks also check the client's own
    /// owners ([`crate::Client::lock_reentrant`]). See
    /// [`crate::Client::deadlocks`] for what etcd's state can show.
    pub detect_deadlock: bool,
}

impl LockOptions {
    /// Wait at most `timeout`.
    pub fn timeout(timeout: Duration) -> Self {
        LockOptions {
            timeout: Some(timeout),
            ..LockOptions::default()
        }
    }

    /// With [`LockOptions::lock_delay`] set.
    pub fn with_lock_delay(mut self, d: Duration) -> Self {
        self.lock_delay = Some(d);
        self
    }

    /// With [`LockOptions::lease_time`] set.
    pub fn with_lease_time(mut self, d: Duration) -> Self {
        self.lease_time = Some(d);
        self
    }

    /// With [`LockOptions::detect_deadlock`] on.
    pub fn with_detect_deadlock(mut self) -> Self {
        self.detect_deadlock = true;
        self
    }

    /// With one more [`LockOptions::metadata`] pair.
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.push((key.into(), value.into()));
        self
    }

    /// The lock-delay in whole seconds (0: none), checked.
    pub(crate) fn delay_secs(&self) -> Result<u64> {
        check_span("lock_delay", self.lock_delay)?;
        Ok(self
            .lock_delay
            .map_or(0, |d| d.as_secs() + u64::from(d.subsec_nanos() > 0)))
    }

    /// Check every option that has a rule (spans, metadata size).
    pub(crate) fn validate(&self) -> Result<()> {
        check_span("lock_delay", self.lock_delay)?;
        check_span("lease_time", self.lease_time)?;
        if self.lease_time == Some(Duration::ZERO) {
            return Err(Error::invalid("lease_time must be positive"));
        }
        let size: usize = self.metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
        if size > MAX_METADATA_BYTES {
            return Err(Error::invalid(format!(
                "metadata is {size} bytes; the limit is {MAX_METADATA_BYTES}"
            )));
        }
        if let Some((k, _)) = self.metadata.iter().find(|(k, _)| k.is_empty()) {
            return Err(Error::invalid(format!(
                "metadata keys must not be empty, got {k:?}"
            )));
        }
        Ok(())
    }
}

fn check_span(what: &str, d: Option<Duration>) -> Result<()> {
    match d {
        Some(d) if d > MAX_LOCK_DELAY => Err(Error::invalid(format!(
            "{what} must be at most {} s, got {} s",
            MAX_LOCK_DELAY.as_secs(),
            d.as_secs_f64()
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn invalid(r: Result<()>) -> bool {
        r.is_err_and(|e| e.code() == ErrorCode::InvalidArgument)
    }

    #[test]
    fn the_default_keepalive_interval_leaves_room_and_costs_no_more_than_go_at_large_ttls() {
        let ms = |ttl: i64| default_keepalive_interval(ttl, default_margin(ttl)).as_millis();
        // (TTL s, interval ms): the table of docs/concepts/time.md.
        let table = [
            (1, 250),
            (2, 400),
            (5, 1000),
            (10, 3000),
            (15, 8000),
            (30, 22500),
            (60, 45000),
            (300, 225000),
        ];
        for (ttl, want) in table {
            assert_eq!(ms(ttl), want, "ttl {ttl}");
            let i = default_keepalive_interval(ttl, default_margin(ttl));
            assert!(
                i <= max_keepalive_interval(ttl, default_margin(ttl)),
                "ttl {ttl}"
            );
            // Two messages per interval (keep-alive, read), sent up to a
            // tenth early, against Go's one per TTL/3: the bounds the
            // capacity page states.
            let ratio = 2.0 / (i.as_secs_f64() * 0.9) / (3.0 / ttl as f64);
            if ttl >= 30 {
                assert!(ratio <= 1.0, "ttl {ttl}: {ratio}");
            } else if ttl >= 15 {
                assert!(ratio <= 1.5, "ttl {ttl}: {ratio}");
            }
        }
        let o = |ttl: i64, k: u64| ClientOptions {
            ttl_secs: ttl,
            keepalive_interval: Some(Duration::from_millis(k)),
            ..ClientOptions::default()
        };
        assert!(o(15, 8000).validate().is_ok());
        assert!(invalid(o(15, 8001).validate()));
        assert!(o(5, 2000).validate().is_ok());
        assert!(invalid(o(5, 3000).validate()));
        assert!(invalid(o(5, 49).validate()));
    }

    #[test]
    fn lock_options_are_checked_before_any_request() {
        let d = |ms: u64| LockOptions::default().with_lock_delay(Duration::from_millis(ms));
        assert_eq!(LockOptions::default().delay_secs().unwrap(), 0);
        assert_eq!(d(1000).delay_secs().unwrap(), 1);
        assert_eq!(
            d(1200).delay_secs().unwrap(),
            2,
            "rounded up to whole seconds"
        );
        assert_eq!(d(1).delay_secs().unwrap(), 1);
        assert!(LockOptions::default()
            .with_lock_delay(MAX_LOCK_DELAY)
            .validate()
            .is_ok());
        let over = MAX_LOCK_DELAY + Duration::from_secs(1);
        assert!(invalid(
            LockOptions::default().with_lock_delay(over).validate()
        ));
        assert!(LockOptions::default()
            .with_lock_delay(over)
            .delay_secs()
            .is_err());
        assert!(invalid(
            LockOptions::default().with_lease_time(over).validate()
        ));
        assert!(invalid(
            LockOptions::default()
                .with_lease_time(Duration::ZERO)
                .validate()
        ));
    }

    #[test]
    fn metadata_is_bounded_and_keyed() {
        let half = "v".repeat(MAX_METADATA_BYTES / 2);
        let at_limit = LockOptions::default()
            .with_metadata("k", &half[1..])
            .with_metadata("j", &half[1..]);
        assert!(at_limit.validate().is_ok());
        assert!(invalid(at_limit.with_metadata("x", "").validate()));
        assert!(invalid(
            LockOptions::default().with_metadata("", "v").validate()
        ));
    }

    #[test]
    fn a_mem_endpoint_stands_alone() {
        let v = |eps: &[&str]| ClientOptions::new(eps.iter().copied()).validate();
        assert!(v(&["mem://"]).is_ok());
        assert!(v(&["mem://a", "mem://a"]).is_ok());
        assert!(invalid(v(&["mem://a", "mem://b"])), "two stores");
        assert!(
            invalid(v(&["mem://", "http://127.0.0.1:2379"])),
            "mixed with etcd"
        );
        assert!(invalid(v(&["mem://a:1"])), "a port");
        assert!(invalid(v(&[])), "no endpoints");
        let mut o = ClientOptions::new(["mem://"]);
        o.username = Some("u".into());
        o.password = Some("p".into());
        assert!(invalid(o.validate()), "credentials with mem://");
    }

    #[test]
    fn one_duration_syntax() {
        assert_eq!(
            parse_duration("t", "250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(parse_duration("t", "5s").unwrap(), Duration::from_secs(5));
        assert_eq!(
            parse_duration("t", "1.5").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_duration("t", "2m").unwrap(), Duration::from_secs(120));
        assert_eq!(
            parse_duration("t", "1h").unwrap(),
            Duration::from_secs(3600)
        );
        assert_eq!(
            parse_duration("t", "1e-3").unwrap(),
            Duration::from_millis(1)
        );
        assert_eq!(
            parse_duration("t", "2.5e3ms").unwrap(),
            Duration::from_millis(2500)
        );
        assert_eq!(
            parse_duration("t", "1500us").unwrap(),
            Duration::from_micros(1500)
        );
        assert_eq!(parse_duration("t", "7ns").unwrap(), Duration::from_nanos(7));
        for bad in [
            "", "x", "-1", "5d", "NaN", "inf", "infms", "NaNs", "-2ms", "1e400", "ms", "s", "5 sec",
        ] {
            assert_eq!(
                parse_duration("t", bad).unwrap_err().code(),
                ErrorCode::InvalidArgument,
                "{bad}"
            );
        }
    }

    #[test]
    fn every_key_parses_and_unknown_keys_are_refused() {
        let o = ClientOptions::from_pairs([
            ("endpoints", "http://a:2379, http://b:2379"),
            ("ttl", "10"),
            ("namespace", "ns/"),
            ("username", "u"),
            ("password", "p"),
            ("tls_ca", "/ca.pem"),
            ("tls_domain", "etcd.local"),
            ("connect_timeout", "2s"),
            ("request_timeout", "750ms"),
            ("margin", "1s"),
            ("watch_held_keys", "false"),
        ])
        .unwrap();
        assert_eq!(o.endpoints, vec!["http://a:2379", "http://b:2379"]);
        assert_eq!(
            (o.ttl_secs, o.namespace.as_deref(), o.username.as_deref()),
            (10, Some("ns/"), Some("u"))
        );
        let tls = o.tls.as_ref().unwrap();
        assert_eq!(
            (tls.ca.as_deref(), tls.domain.as_deref()),
            (Some(std::path::Path::new("/ca.pem")), Some("etcd.local"))
        );
        assert_eq!(
            (o.connect_timeout, o.request_timeout, o.margin),
            (
                Duration::from_secs(2),
                Duration::from_millis(750),
                Some(Duration::from_secs(1))
            )
        );
        assert!(!o.watch_held_keys);
        assert_eq!(
            ClientOptions::from_pairs([("tls_kye", "x")])
                .unwrap_err()
                .code(),
            ErrorCode::InvalidArgument
        );
        assert_eq!(
            ClientOptions::from_pairs([("ttl", "1.5")])
                .unwrap_err()
                .code(),
            ErrorCode::InvalidArgument
        );
        assert_eq!(
            ClientOptions::from_pairs([("watch_held_keys", "maybe")])
                .unwrap_err()
                .code(),
            ErrorCode::InvalidArgument
        );
        // Empty values mean "not set".
        assert_eq!(
            ClientOptions::from_pairs([("ttl", "")]).unwrap().ttl_secs,
            15
        );
    }

    #[test]
    fn huge_timeouts_are_refused_not_a_panic() {
        let o = ClientOptions::from_pairs([("request_timeout", "100000000000")]).unwrap();
        assert_eq!(o.validate().unwrap_err().code(), ErrorCode::InvalidArgument);
        let o = ClientOptions::from_pairs([("connect_timeout", "25h")]).unwrap();
        assert_eq!(o.validate().unwrap_err().code(), ErrorCode::InvalidArgument);
        assert!(ClientOptions::from_pairs([("request_timeout", "24h")])
            .unwrap()
            .validate()
            .is_ok());
    }

    #[test]
    fn explicit_options_override_the_environment_key_by_key() {
        // Only this test touches these variables.
        std::env::set_var("ETCDLOCK_TTL", "not-a-number");
        std::env::set_var("ETCDLOCK_NAMESPACE", "from-env/");
        std::env::set_var("ETCDLOCK_KEY", "app/lock/694d"); // `etcdlock run`'s lock key: never a TLS key
        let o = ClientOptions::from_env_and_pairs([("ttl", "7")]).unwrap();
        assert_eq!((o.ttl_secs, o.namespace.as_deref()), (7, Some("from-env/")));
        assert!(o.tls.is_none(), "ETCDLOCK_KEY is not read as a TLS key");
        let e = ClientOptions::from_env_and_pairs(Vec::<(String, String)>::new()).unwrap_err();
        assert!(e.message().contains("ETCDLOCK_TTL"), "{e}");
        std::env::remove_var("ETCDLOCK_TTL");
        std::env::remove_var("ETCDLOCK_NAMESPACE");
        std::env::remove_var("ETCDLOCK_KEY");
    }
}
