//! What every language binding needs from core, written once: options from
//! string pairs, one rule for call timeouts, one wire form of an error, a
//! handle table for languages that hold native objects by number, the
//! interruptible blocking wait of synchronous bindings and the completion
//! adapter of asynchronous ones. A binding keeps only argument conversion and
//! its language's idiom (exception classes, Promises, `errno`-style codes).
//!
//! ```
//! use etcdlock::bridge::{self, Unit};
//! // A binding turns its typed arguments into pairs; core parses and checks them.
//! let pairs = [("ttl", "10".to_string()), ("connect_timeout", bridge::duration_value(2500.0, Unit::Millis))];
//! let opts = bridge::client_options(pairs).unwrap();
//! assert_eq!(opts.ttl_secs, 10);
//! assert_eq!(bridge::timeout("timeout", f64::INFINITY, Unit::Seconds).unwrap(), None);
//! ```

use crate::poison::Locked;
use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;

use crate::{ClientOptions, Error, ErrorCode, LockOptions, LossReason, Result};

pub use crate::runtime::block_on_interruptible;

/// The unit a language gives durations in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Python, the CLI and the environment.
    Seconds,
    /// Node and C.
    Millis,
    /// Java's `Duration`.
    Nanos,
}

impl Unit {
    fn suffix(self) -> &'static str {
        match self {
            Unit::Seconds => "s",
            Unit::Millis => "ms",
            Unit::Nanos => "ns",
        }
    }

    fn secs(self, v: f64) -> f64 {
        match self {
            Unit::Seconds => v,
            Unit::Millis => v / 1e3,
            Unit::Nanos => v / 1e9,
        }
    }
}

/// A number of `unit`s as an option value ([`crate::parse_duration`]
/// syntax). NaN, infinities and negatives pass through as text, so the option
/// parser refuses them with its one message per key.
pub fn duration_value(v: f64, unit: Unit) -> String {
    format!("{v}{}", unit.suffix())
}

/// What a client option's value is, so a binding converts its typed value
/// to the option string without a list of its own: adding an option to core
/// needs, per language, only its typed declaration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    /// Endpoints: a list, joined with commas.
    List,
    /// Whole seconds (`ttl`).
    WholeSeconds,
    /// A duration in the language's [`Unit`] ([`duration_value`]).
    Duration,
    /// `true` or `false`.
    Bool,
    /// Text (a file path, a name, a password).
    Text,
}

/// Every client option with its kind, in [`crate::OPTION_KEYS`] order.
pub fn options() -> impl Iterator<Item = (&'static str, OptionKind)> {
    crate::OPTION_KEYS
        .into_iter()
        .map(|k| (k, option_kind(k).expect("every key has a kind")))
}

/// The kind of option `key`, `None` for an unknown key.
pub fn option_kind(key: &str) -> Option<OptionKind> {
    Some(match key {
        "endpoints" => OptionKind::List,
        "ttl" => OptionKind::WholeSeconds,
        "connect_timeout" | "request_timeout" | "margin" | "keepalive_interval" => {
            OptionKind::Duration
        }
        "watch_held_keys" | "lazy_connect" => OptionKind::Bool,
        "namespace" | "username" | "password" | "tls_ca" | "tls_cert" | "tls_key"
        | "tls_domain" => OptionKind::Text,
        _ => return None,
    })
}

/// The core key of an option as a language spells it: the key itself
/// (`request_timeout`), its camelCase (`requestTimeout`, Node and Java), and
/// the short TLS names Python and the CLI use (`ca`, `cert`, `key`,
/// `domain`). `None` for anything else.
pub fn option_key(name: &str) -> Option<&'static str> {
    let short = match name {
        "ca" => Some("tls_ca"),
        "cert" => Some("tls_cert"),
        "key" => Some("tls_key"),
        "domain" => Some("tls_domain"),
        _ => None,
    };
    short.or_else(|| {
        crate::OPTION_KEYS
            .into_iter()
            .find(|k| *k == name || camel(k) == name)
    })
}

/// `snake_case` as `camelCase`.
fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut up = false;
    for c in key.chars() {
        match c {
            '_' => up = true,
            c if up => {
                out.push(c.to_ascii_uppercase());
                up = false;
            }
            c => out.push(c),
        }
    }
    out
}

/// A list option's value (endpoints) from a language's list: the items
/// joined with commas. An empty list, an empty item or an item with a comma
/// is `InvalidArgument` (an empty value would mean "not given").
pub fn list_value<S: AsRef<str>>(key: &str, items: &[S]) -> Result<String> {
    if items.is_empty() {
        return Err(Error::invalid(format!("{key}: the list is empty")));
    }
    for i in items {
        let i = i.as_ref();
        if i.trim().is_empty() || i.contains(',') {
            return Err(Error::invalid(format!("{key}: bad item {i:?}")));
        }
    }
    Ok(items
        .iter()
        .map(|i| i.as_ref().trim())
        .collect::<Vec<_>>()
        .join(","))
}

/// The message for an option name no key answers to.
pub fn unknown_option(name: &str) -> Error {
    Error::invalid(format!(
        "unknown option {name:?}; the options are {}",
        crate::OPTION_KEYS.join(", ")
    ))
}

/// Client options from a binding: the `ETCDLOCK_*` environment gives the
/// defaults, `pairs` (keys of [`crate::OPTION_KEYS`], in order, later wins)
/// override it key by key, and the result is checked as `connect` checks it.
/// An empty value means "not given". Every binding calls this and nothing
/// else to build options.
pub fn client_options<K: AsRef<str>, V: AsRef<str>>(
    pairs: impl IntoIterator<Item = (K, V)>,
) -> Result<ClientOptions> {
    let o = ClientOptions::from_env_and_pairs(pairs)?;
    o.validate()?;
    Ok(o)
}

/// The one rule for the timeout of a call that waits (lock, wait for loss,
/// observe): `None` (no limit) for +infinity or a value too large to be an
/// instant; `InvalidArgument` for NaN and negatives; else the duration.
pub fn timeout(what: &str, v: f64, unit: Unit) -> Result<Option<Duration>> {
    if v.is_nan() || v < 0.0 {
        return Err(Error::invalid(format!(
            "{what} must be a non-negative number ({}), got {v}",
            unit.suffix()
        )));
    }
    let secs = unit.secs(v);
    // A century is no limit in practice and keeps `now + timeout` an instant.
    if secs > MAX_WAIT.as_secs_f64() {
        return Ok(None);
    }
    Ok(Some(Duration::from_secs_f64(secs)))
}

/// The one rule for a run-once span (`at_most`, `at_least`, see
/// [`crate::Client::once_take`]): a finite, non-negative number of `unit`s
/// up to a century; anything else is `InvalidArgument` naming `what`.
pub fn span(what: &str, v: f64, unit: Unit) -> Result<Duration> {
    let secs = unit.secs(v);
    if !secs.is_finite() || secs < 0.0 || secs > MAX_WAIT.as_secs_f64() {
        return Err(Error::invalid(format!(
            "{what} must be a finite, non-negative number ({}) up to a century, got {v}",
            unit.suffix()
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The spans of a run-once job, checked together before anything is taken
/// (so a bad `at_least` never surfaces after the job ran): each by [`span`],
/// `at_most` positive, `at_least` not above `at_most` (ShedLock's rule).
pub fn once_spans(at_most: f64, at_least: f64, unit: Unit) -> Result<(Duration, Duration)> {
    let (most, least) = (
        span("at_most", at_most, unit)?,
        span("at_least", at_least, unit)?,
    );
    if most.is_zero() {
        return Err(Error::invalid(format!(
            "at_most must be positive, got {at_most}"
        )));
    }
    if least > most {
        return Err(Error::invalid(format!(
            "at_least ({at_least}) must not exceed at_most ({at_most})"
        )));
    }
    Ok((most, least))
}

/// A timeout beyond this is "no limit" ([`timeout`]).
pub const MAX_WAIT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// [`timeout`] for an optional value (`None` is no limit).
pub fn opt_timeout(what: &str, v: Option<f64>, unit: Unit) -> Result<Option<Duration>> {
    v.map_or(Ok(None), |v| timeout(what, v, unit))
}

/// Options of one acquisition from a language's timeout (`None`: no limit),
/// by the rule of [`timeout`]. Bindings build `LockOptions` only here, so an
/// option added to it reaches every language from core.
pub fn lock_options(v: Option<f64>, unit: Unit) -> Result<LockOptions> {
    Ok(LockOptions {
        timeout: opt_timeout("timeout", v, unit)?,
        ..LockOptions::default()
    })
}

/// What an acquisition may ask for beyond its timeout, as a binding has it
/// from its language (spans in the binding's [`Unit`]): see
/// [`LockOptions::lock_delay`], [`LockOptions::lease_time`],
/// [`LockOptions::metadata`].
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// Lock-delay, in units (`None` or 0: none).
    pub lock_delay: Option<f64>,
    /// Lease time, in units (`None`: none).
    pub lease_time: Option<f64>,
    /// Holder metadata pairs.
    pub metadata: Vec<(String, String)>,
    /// See [`LockOptions::detect_deadlock`].
    pub detect_deadlock: bool,
}

/// [`lock_options`] with [`Extras`], each checked by one rule (a span by
/// [`span`], then the limits of [`LockOptions`]), so every language refuses
/// the same values with the same message.
pub fn acquire_options(timeout: Option<f64>, extras: Extras, unit: Unit) -> Result<LockOptions> {
    let mut o = lock_options(timeout, unit)?;
    o.lock_delay = extras
        .lock_delay
        .map(|v| span("lock_delay", v, unit))
        .transpose()?;
    o.lease_time = extras
        .lease_time
        .map(|v| span("lease_time", v, unit))
        .transpose()?;
    o.metadata = extras.metadata;
    o.detect_deadlock = extras.detect_deadlock;
    o.validate()?;
    Ok(o)
}

/// An error as every binding hands it to its language: code, loss reason,
/// message and whether retrying the same call may succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// The code (its `name()` is the language-visible name).
    pub code: ErrorCode,
    /// Why a hold ended, for `LockLost`.
    pub reason: Option<LossReason>,
    /// The message, without the code.
    pub message: String,
    /// See [`Error::retryable`].
    pub retryable: bool,
}

const SEP: char = '\u{1f}';

impl WireError {
    /// One string for bindings whose error carries only a message (napi):
    /// `ETCDLOCK<US>code<US>reason<US>retryable<US>message`, US being U+001F,
    /// retryable `1` or `0`.
    pub fn encode(&self) -> String {
        let reason = self.reason.map(LossReason::name).unwrap_or("");
        let retry = u8::from(self.retryable);
        format!(
            "ETCDLOCK{SEP}{}{SEP}{reason}{SEP}{retry}{SEP}{}",
            self.code.name(),
            self.message
        )
    }

    /// The inverse of [`WireError::encode`]; `None` for any other string.
    pub fn decode(s: &str) -> Option<WireError> {
        let mut parts = s
            .strip_prefix("ETCDLOCK")?
            .strip_prefix(SEP)?
            .splitn(4, SEP);
        let code = parts.next()?;
        let code = ErrorCode::ALL.into_iter().find(|c| c.name() == code)?;
        let reason = match parts.next()? {
            "" => None,
            r => Some(LossReason::ALL.into_iter().find(|x| x.name() == r)?),
        };
        let retryable = match parts.next()? {
            "1" => true,
            "0" => false,
            _ => return None,
        };
        Some(WireError {
            code,
            reason,
            retryable,
            message: parts.next()?.to_string(),
        })
    }
}

impl From<&Error> for WireError {
    fn from(e: &Error) -> WireError {
        WireError {
            code: e.code(),
            reason: e.loss_reason(),
            message: e.message().to_string(),
            retryable: e.retryable(),
        }
    }
}

/// A panic's payload as an `Internal` error (never an abort across an FFI
/// boundary).
pub fn panic_error(payload: Box<dyn Any + Send>) -> Error {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    Error::new(
        ErrorCode::Internal,
        format!("a bug in etcdlock (panic: {what}); the process is fine"),
    )
}

/// Run `f`, turning a panic into an `Internal` error.
pub fn catch<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(panic_error(p)))
}

/// Run `fut` ([`crate::runtime::start`]ed: its first request leaves from the
/// calling thread) and hand its result (a panic as `Internal`) to `done` on a
/// runtime thread. Aborting the returned handle drops the future, which
/// cancels a lock wait and removes its waiter key, and `done` is then never
/// called.
pub fn spawn_complete<T, F, D>(fut: F, done: D) -> Result<crate::runtime::Started>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
    D: FnOnce(Result<T>) + Send + 'static,
{
    crate::runtime::start(async move {
        let r = AssertUnwindSafe(fut)
            .catch_unwind()
            .await
            .unwrap_or_else(|p| Err(panic_error(p)));
        crate::runtime::on_runtime().await;
        // A panicking callback ends this task only.
        let _ = catch_unwind(AssertUnwindSafe(move || done(r)));
    })
}

/// Follow `g`'s keep-alive renewal on the shared runtime: `changed(Some(left))`
/// when renewals start failing (`left`: how long the hold stays valid
/// without one), `changed(None)` when they recover, then `ended()` once the
/// hold ends. Calls come in order, one at a time, on a runtime thread; the
/// task does not keep the guard alive.
pub fn follow_renewal(
    g: &crate::Guard,
    mut changed: impl FnMut(Option<Duration>) + Send + 'static,
    ended: impl FnOnce() + Send + 'static,
) -> Result<()> {
    let mut changes = g.renewal_changes();
    let mut end = g.lost_signal();
    crate::runtime::runtime()?.spawn(async move {
        loop {
            tokio::select! {
                _ = end.wait() => break,
                r = changes.changed() => {
                    if r.is_err() {
                        break;
                    }
                    let left = match *changes.borrow_and_update() {
                        crate::Renewal::Failing { valid_until } => Some(valid_until.saturating_duration_since(std::time::Instant::now())),
                        crate::Renewal::Ok => None,
                    };
                    changed(left);
                }
            }
        }
        ended();
    });
    Ok(())
}

/// Native objects held by number (Java's `long` handles): a stale, foreign or
/// twice-released number is a typed error, never a dangling pointer. Numbers
/// are never reused.
pub struct Handles<T: ?Sized> {
    map: Mutex<BTreeMap<u64, Arc<T>>>,
    next: std::sync::atomic::AtomicU64,
    what: &'static str,
}

impl<T: ?Sized> Handles<T> {
    /// An empty table; `what` names the objects in messages ("client").
    pub const fn new(what: &'static str) -> Handles<T> {
        Handles {
            map: Mutex::new(BTreeMap::new()),
            next: std::sync::atomic::AtomicU64::new(1),
            what,
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<T>>> {
        self.map.locked()
    }

    /// Keep `v`; its number is never 0.
    pub fn insert(&self, v: T) -> u64
    where
        T: Sized,
    {
        self.insert_arc(Arc::new(v))
    }

    /// Keep `v` (shared, or of a type only known at run time, as
    /// `Handles<dyn Any + Send + Sync>` holds); its number is never 0.
    pub fn insert_arc(&self, v: Arc<T>) -> u64 {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.map().insert(id, v);
        id
    }

    /// The object of `id`; `Closed` once released, `InvalidArgument` for a
    /// number this table never gave.
    pub fn get(&self, id: u64) -> Result<Arc<T>> {
        if let Some(v) = self.map().get(&id) {
            return Ok(v.clone());
        }
        if id != 0 && id < self.next.load(std::sync::atomic::Ordering::Relaxed) {
            Err(Error::new(
                ErrorCode::Closed,
                format!("this {} was closed", self.what),
            ))
        } else {
            Err(Error::invalid(format!("not a {} handle: {id}", self.what)))
        }
    }

    /// Release `id`, returning its object the first time only.
    pub fn remove(&self, id: u64) -> Option<Arc<T>> {
        self.map().remove(&id)
    }

    /// How many objects are held.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The keys under a raw (not namespaced) `prefix`, in key order, for tests
/// and tools (Node's `rawKeys`). One read through the unary door.
pub async fn raw_keys(c: &crate::Client, prefix: &str) -> Result<Vec<String>> {
    c.check_open()?;
    let t = &c.inner.transport;
    let answer = t.call(t.request_bound(), |mut kv| {
        let opts = etcd_client::GetOptions::new()
            .with_prefix()
            .with_keys_only();
        let from = prefix.to_string();
        async move { kv.get(from, Some(opts)).await }
    });
    let mut r = Box::pin(answer).await.result?;
    Ok(r.take_kvs()
        .iter()
        .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
        .collect())
}

/// A signal per change (put or delete) of the keys or meta records of the
/// locks under `prefix` in the client's namespace, for the CLI's `watch`:
/// the receiver yields `()` after each change and `None` once either watch
/// stream ends. The watches open on the stream door.
pub async fn list_changes(
    c: &crate::Client,
    prefix: &str,
) -> Result<tokio::sync::mpsc::UnboundedReceiver<()>> {
    use etcd_client::{EventType, WatchOptions};
    c.check_open()?;
    let t = &c.inner.transport;
    let pinned = t.stream_door().await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    for sub in [
        prefix.to_string(),
        format!("{}{prefix}", crate::META_PREFIX),
    ] {
        let mut from = c.inner.ns.clone();
        from.extend_from_slice(sub.as_bytes());
        let opened = pinned.watch(from, WatchOptions::new().with_prefix()).await;
        let mut s = opened.map_err(|e| {
            t.fail(pinned.member);
            Error::from_etcd(e, &t.endpoints)
        })?;
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Ok(Some(r)) = s.message().await {
                let changed = r
                    .events()
                    .iter()
                    .any(|e| matches!(e.event_type(), EventType::Put | EventType::Delete));
                if changed && tx.send(()).is_err() {
                    return;
                }
            }
        });
    }
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_finite_and_not_negative() {
        assert_eq!(
            span("at_most", 1.5, Unit::Seconds).unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(span("at_least", 0.0, Unit::Millis).unwrap(), Duration::ZERO);
        assert_eq!(
            span("at_most", 2e9, Unit::Nanos).unwrap(),
            Duration::from_secs(2)
        );
        for bad in [f64::NAN, -1.0, f64::INFINITY, 1e12] {
            let e = span("at_most", bad, Unit::Seconds).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument);
            assert!(e.message().contains("at_most"), "{e}");
        }
        assert_eq!(
            once_spans(2.0, 1.0, Unit::Seconds).unwrap(),
            (Duration::from_secs(2), Duration::from_secs(1))
        );
        assert!(once_spans(0.0, 0.0, Unit::Seconds)
            .unwrap_err()
            .message()
            .contains("at_most must be positive"));
        assert!(once_spans(1.0, 2.0, Unit::Seconds)
            .unwrap_err()
            .message()
            .contains("must not exceed"));
        assert!(once_spans(1.0, -2.0, Unit::Seconds)
            .unwrap_err()
            .message()
            .contains("at_least"));
    }

    #[test]
    fn every_spelling_of_a_key_finds_it() {
        for k in crate::OPTION_KEYS {
            assert_eq!(option_key(k), Some(k));
            assert_eq!(option_key(&camel(k)), Some(k));
        }
        assert_eq!(option_key("keepaliveInterval"), Some("keepalive_interval"));
        assert_eq!(option_key("tlsCa"), Some("tls_ca"));
        assert_eq!(option_key("ca"), Some("tls_ca"));
        assert_eq!(option_key("domain"), Some("tls_domain"));
        for bad in ["", "Ttl", "request-timeout", "ttl_", "tls"] {
            assert_eq!(option_key(bad), None, "{bad}");
        }
        assert!(unknown_option("tll").message().contains("\"tll\""));
        assert_eq!(
            list_value("endpoints", &["a:1", " b:2 "]).unwrap(),
            "a:1,b:2"
        );
        for bad in [&[][..], &[""][..], &["a:1,b:2"][..], &["a:1", " "][..]] {
            assert_eq!(
                list_value("endpoints", bad).unwrap_err().code(),
                ErrorCode::InvalidArgument
            );
        }
    }

    #[test]
    fn options_come_from_pairs_in_every_unit() {
        let o = client_options([
            ("endpoints", "127.0.0.1:1,127.0.0.1:2".to_string()),
            ("request_timeout", duration_value(750.0, Unit::Millis)),
            ("connect_timeout", duration_value(2.5, Unit::Seconds)),
            ("margin", duration_value(1e9, Unit::Nanos)),
            ("keepalive_interval", duration_value(0.5, Unit::Seconds)),
        ])
        .unwrap();
        assert_eq!(o.endpoints.len(), 2);
        assert_eq!(
            (o.request_timeout, o.connect_timeout),
            (Duration::from_millis(750), Duration::from_millis(2500))
        );
        assert_eq!(
            (o.margin, o.keepalive_interval),
            (
                Some(Duration::from_secs(1)),
                Some(Duration::from_millis(500))
            )
        );
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            let e = client_options([("request_timeout", duration_value(bad, Unit::Millis))])
                .unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument);
            assert!(e.message().starts_with("request_timeout: "), "{e}");
        }
        // Checked as connect checks: above the ceiling, or a keep-alive too slow to renew in time.
        assert!(client_options([("request_timeout", "25h")]).is_err());
        let e = client_options([("ttl", "5"), ("keepalive_interval", "3s")]).unwrap_err();
        assert!(e.message().contains("keepalive_interval"), "{e}");
        assert!(client_options([("ttl", "5"), ("keepalive_interval", "10ms")]).is_err());
    }

    #[test]
    fn every_option_has_a_kind() {
        assert_eq!(options().count(), crate::OPTION_KEYS.len());
        assert_eq!(
            option_kind("keepalive_interval"),
            Some(OptionKind::Duration)
        );
        assert_eq!(option_kind("nope"), None);
    }

    #[test]
    fn one_timeout_rule() {
        assert_eq!(
            timeout("t", 1500.0, Unit::Millis).unwrap(),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            timeout("t", 0.0, Unit::Seconds).unwrap(),
            Some(Duration::ZERO)
        );
        assert_eq!(timeout("t", f64::INFINITY, Unit::Seconds).unwrap(), None);
        assert_eq!(timeout("t", 1e300, Unit::Nanos).unwrap(), None);
        assert_eq!(opt_timeout("t", None, Unit::Seconds).unwrap(), None);
        for bad in [f64::NAN, -0.5, f64::NEG_INFINITY] {
            assert_eq!(
                timeout("t", bad, Unit::Seconds).unwrap_err().code(),
                ErrorCode::InvalidArgument
            );
        }
    }

    #[test]
    fn wire_errors_round_trip() {
        for code in ErrorCode::ALL {
            for reason in [None, Some(LossReason::KeyDeleted)] {
                let e = Error::with_reason(code, reason, "m\u{1f}with a separator");
                let w = WireError::from(&e);
                assert_eq!(WireError::decode(&w.encode()), Some(w.clone()));
                assert_eq!(
                    w.retryable,
                    matches!(
                        code,
                        ErrorCode::Timeout | ErrorCode::WouldBlock | ErrorCode::Unavailable
                    )
                );
            }
        }
        assert_eq!(WireError::decode("plain message"), None);
        assert_eq!(
            WireError::decode("ETCDLOCK\u{1f}Nope\u{1f}\u{1f}0\u{1f}m"),
            None
        );
        assert_eq!(
            WireError::decode("ETCDLOCK\u{1f}Timeout\u{1f}\u{1f}m"),
            None
        );
    }

    #[test]
    fn panics_become_internal_errors() {
        let e = catch::<()>(|| panic!("boom {}", 1)).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Internal);
        assert!(e.message().contains("boom 1"), "{e}");
        let (tx, rx) = std::sync::mpsc::channel();
        spawn_complete(async { panic!("in a task") }, move |r: Result<()>| {
            tx.send(r).unwrap()
        })
        .unwrap();
        let r = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(r.unwrap_err().code(), ErrorCode::Internal);
    }

    #[test]
    fn aborted_completions_never_call_back() {
        let (tx, rx) = std::sync::mpsc::channel::<Result<()>>();
        let h = spawn_complete(std::future::pending(), move |r| tx.send(r).unwrap()).unwrap();
        h.abort();
        assert!(
            rx.recv_timeout(Duration::from_secs(5)).is_err(),
            "the sender is dropped, never called"
        );
    }

    #[test]
    fn handles_refuse_stale_and_foreign_numbers() {
        let t: Handles<String> = Handles::new("client");
        let a = t.insert("a".into());
        assert_ne!(a, 0);
        assert_eq!(*t.get(a).unwrap(), "a");
        assert!(t.remove(a).is_some());
        assert!(t.remove(a).is_none(), "a second release finds nothing");
        assert_eq!(t.get(a).unwrap_err().code(), ErrorCode::Closed);
        assert_eq!(t.get(0).unwrap_err().code(), ErrorCode::InvalidArgument);
        assert_eq!(t.get(999).unwrap_err().code(), ErrorCode::InvalidArgument);
        assert!(t.is_empty());
    }
}
