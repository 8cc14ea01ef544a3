//! Native half of the `etcdlock` npm package (napi-rs v3).
//!
//! This layer only converts arguments and maps errors; the lock itself lives in
//! the `etcdlock` core crate. Every asynchronous call returns a Promise created
//! with `env.create_deferred()` and settled from a task on etcdlock's shared
//! runtime (`etcdlock::runtime`), never from a runtime of napi's own. A pending
//! deferred holds a referenced threadsafe function, so a pending `lock()` keeps
//! the Node process alive; nothing else here holds the event loop.
//!
//! Errors reach JavaScript as `Error` objects whose message is
//! `ETCDLOCK\u{1f}<code>\u{1f}<loss reason or empty>\u{1f}<message>`; the JS
//! layer (`index.js`) turns that into a `LockError` with `code` and `reason`.
//! Every entry point runs under `catch_unwind`: a Rust panic becomes an
//! `Internal` error, never an abort.

#![deny(clippy::all)]

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcdlock::{CancellationToken, ErrorCode, GuardState};
use futures_util::FutureExt;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

const SEP: char = '\u{1f}';

fn encode(code: ErrorCode, reason: Option<etcdlock::LossReason>, msg: &str) -> napi::Error {
    let reason = reason.map(|r| r.name()).unwrap_or("");
    napi::Error::new(Status::GenericFailure, format!("ETCDLOCK{SEP}{}{SEP}{reason}{SEP}{msg}", code.name()))
}

fn to_js_err(e: &etcdlock::Error) -> napi::Error {
    encode(e.code(), e.loss_reason(), e.message())
}

fn invalid(msg: impl AsRef<str>) -> napi::Error {
    encode(ErrorCode::InvalidArgument, None, msg.as_ref())
}

fn internal(msg: impl AsRef<str>) -> napi::Error {
    encode(ErrorCode::Internal, None, msg.as_ref())
}

/// Run a synchronous entry point, turning a panic into an `Internal` error.
fn guard_sync<T>(f: impl FnOnce() -> napi::Result<T>) -> napi::Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => Err(internal("a bug in etcdlock (panic in the native binding)")),
    }
}

type Resolver<T> = Box<dyn FnOnce(Env) -> napi::Result<T> + Send>;

/// Create a Promise and settle it from `fut` running on the shared core runtime.
fn promise<'env, T, F>(env: &'env Env, fut: F) -> napi::Result<Object<'env>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = napi::Result<T>> + Send + 'static,
{
    let rt = etcdlock::runtime::runtime().map_err(|e| to_js_err(&e))?;
    let (deferred, promise) = env.create_deferred::<T, Resolver<T>>()?;
    rt.spawn(async move {
        match AssertUnwindSafe(fut).catch_unwind().await {
            Ok(Ok(v)) => deferred.resolve(Box::new(move |_| Ok(v))),
            Ok(Err(e)) => deferred.reject(e),
            Err(_) => deferred.reject(internal("a bug in etcdlock (panic in an async task)")),
        }
    });
    Ok(promise)
}

fn ms(v: f64, what: &str) -> napi::Result<Duration> {
    if !v.is_finite() || !(0.0..=1e13).contains(&v) {
        return Err(invalid(format!("{what} must be a finite number of milliseconds >= 0, got {v}")));
    }
    Ok(Duration::from_micros((v * 1000.0) as u64))
}

/// Options for `NativeClient.connect` (the JS layer validates types first).
#[napi(object)]
pub struct NativeConnectOptions {
    /// `None`: from `ETCDLOCK_ENDPOINTS`, else the default. Every option not
    /// given here comes from its `ETCDLOCK_*` variable, if set (core's one rule).
    pub endpoints: Option<Vec<String>>,
    pub ttl: Option<f64>,
    pub namespace: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub ca: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
    pub domain: Option<String>,
    pub connect_timeout_ms: Option<f64>,
    pub request_timeout_ms: Option<f64>,
    pub margin_ms: Option<f64>,
    pub watch_held_keys: Option<bool>,
}

fn build_options(o: NativeConnectOptions) -> napi::Result<etcdlock::ClientOptions> {
    // The environment gives defaults for the options not given here, the same
    // rule in every language (core's `from_env_except`): a malformed variable
    // for an option given explicitly is ignored.
    let given: Vec<&str> = [
        ("endpoints", o.endpoints.is_some()),
        ("ttl", o.ttl.is_some()),
        ("namespace", o.namespace.is_some()),
        ("username", o.username.is_some()),
        ("password", o.password.is_some()),
        ("tls_ca", o.ca.is_some()),
        ("tls_cert", o.cert.is_some()),
        ("tls_key", o.key.is_some()),
        ("tls_domain", o.domain.is_some()),
        ("connect_timeout", o.connect_timeout_ms.is_some()),
        ("request_timeout", o.request_timeout_ms.is_some()),
        ("margin", o.margin_ms.is_some()),
        ("watch_held_keys", o.watch_held_keys.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, given)| given.then_some(k))
    .collect();
    let mut opts = etcdlock::ClientOptions::from_env_except(&given).map_err(|e| to_js_err(&e))?;
    if let Some(e) = o.endpoints {
        opts.endpoints = e;
    }
    if let Some(t) = o.ttl {
        if !t.is_finite() || t.fract() != 0.0 || t < 1.0 || t > etcdlock::MAX_TTL_SECS as f64 {
            return Err(invalid(format!(
                "ttl must be a whole number of seconds between 1 and {}, got {t}",
                etcdlock::MAX_TTL_SECS
            )));
        }
        opts.ttl_secs = t as i64;
    }
    if o.namespace.is_some() {
        opts.namespace = o.namespace;
    }
    if o.username.is_some() || o.password.is_some() {
        opts.username = o.username;
        opts.password = o.password;
    }
    if o.ca.is_some() || o.cert.is_some() || o.key.is_some() || o.domain.is_some() {
        // Given TLS options override their variables one by one.
        let mut tls = opts.tls.take().unwrap_or_default();
        if let Some(v) = o.ca {
            tls.ca = Some(PathBuf::from(v));
        }
        if let Some(v) = o.cert {
            tls.cert = Some(PathBuf::from(v));
        }
        if let Some(v) = o.key {
            tls.key = Some(PathBuf::from(v));
        }
        if o.domain.is_some() {
            tls.domain = o.domain;
        }
        opts.tls = Some(tls);
    }
    if let Some(v) = o.connect_timeout_ms {
        opts.connect_timeout = ms(v, "connectTimeout")?;
    }
    if let Some(v) = o.request_timeout_ms {
        opts.request_timeout = ms(v, "requestTimeout")?;
    }
    if let Some(v) = o.margin_ms {
        opts.margin = Some(ms(v, "margin")?);
    }
    if let Some(w) = o.watch_held_keys {
        opts.watch_held_keys = w;
    }
    Ok(opts)
}

/// A cancellation handle an `AbortSignal` drives (core `CancellationToken`).
#[napi]
pub struct NativeCancel {
    token: CancellationToken,
}

#[napi]
impl NativeCancel {
    #[napi(constructor)]
    pub fn new() -> Self {
        NativeCancel { token: CancellationToken::new() }
    }

    #[napi]
    pub fn cancel(&self) {
        self.token.cancel();
    }
}

impl Default for NativeCancel {
    fn default() -> Self {
        Self::new()
    }
}

/// A connected core client.
#[napi]
pub struct NativeClient {
    inner: etcdlock::Client,
}

#[napi]
impl NativeClient {
    /// Connect (resolves a `NativeClient`).
    #[napi(ts_return_type = "Promise<NativeClient>")]
    pub fn connect<'env>(env: &'env Env, opts: NativeConnectOptions) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let opts = build_options(opts)?;
            etcdlock::set_language("node");
            promise(env, async move {
                let c = etcdlock::Client::connect(opts).await.map_err(|e| to_js_err(&e))?;
                Ok(NativeClient { inner: c })
            })
        })
    }

    /// Effective lease TTL in seconds.
    #[napi(getter)]
    pub fn ttl(&self) -> f64 {
        self.inner.ttl() as f64
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Core's metrics in Prometheus' text format, `labels` ([name, value]
    /// pairs) on every series.
    #[napi]
    pub fn prometheus(&self, labels: Vec<Vec<String>>) -> String {
        let l: Vec<(&str, &str)> = labels.iter().filter(|p| p.len() == 2).map(|p| (p[0].as_str(), p[1].as_str())).collect();
        self.inner.metrics().to_prometheus(&l)
    }

    /// Core's metrics snapshot as JSON (index.js parses it): every field is a
    /// number (durations in ms) or null.
    #[napi]
    pub fn metrics_json(&self) -> String {
        let m = self.inner.metrics();
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
        let acq: Vec<String> = m
            .acquisitions
            .iter()
            .map(|a| format!("\"{}\":{{\"count\":{},\"waitMs\":{}}}", a.result.name(), a.count, ms(a.wait_total)))
            .collect();
        let lost: Vec<String> = m.lost.iter().map(|(r, n)| format!("\"{}\":{n}", r.name())).collect();
        let rtt = m.keepalive_rtt.map(|d| ms(d).to_string()).unwrap_or_else(|| "null".into());
        format!(
            "{{\"acquisitions\":{{{}}},\"waiting\":{},\"held\":{},\"heldMs\":{},\"holdsEnded\":{},\"holdMs\":{},\"lost\":{{{}}},\"keepalives\":{},\"keepaliveRttMs\":{rtt}}}",
            acq.join(","),
            m.waiting,
            m.held,
            ms(m.held_duration),
            m.holds_ended,
            ms(m.hold_total),
            lost.join(","),
            m.keepalives
        )
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                c.close().await;
                Ok(())
            })
        })
    }

    /// Acquire; `timeout_ms` bounds the wait, `cancel` aborts it.
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn lock<'env>(
        &self,
        env: &'env Env,
        name: String,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let timeout = timeout_ms.map(|v| ms(v, "timeout")).transpose()?;
            let opts = etcdlock::LockOptions { timeout, cancel: cancel.map(|c| c.token.clone()) };
            let c = self.inner.clone();
            promise(env, async move {
                let g = c.lock_with(&name, opts).await.map_err(|e| to_js_err(&e))?;
                Ok(NativeLock::new(g))
            })
        })
    }

    /// Try once; resolves `null` when the lock is held elsewhere.
    #[napi(ts_return_type = "Promise<NativeLock | null>")]
    pub fn try_lock<'env>(&self, env: &'env Env, name: String) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                match c.try_lock(&name).await {
                    Ok(g) => Ok(Some(NativeLock::new(g))),
                    Err(e) if e.code() == ErrorCode::WouldBlock => Ok(None),
                    Err(e) => Err(to_js_err(&e)),
                }
            })
        })
    }

    /// Benchmark floor (`etcdlock::bench_floor::txn_delete_round`): one raw Txn
    /// (put `key` with the session lease if absent + read the owner, the first
    /// key under `key`'s prefix) plus one raw Delete, on the client's etcd
    /// connection. Not namespaced.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn raw_txn_delete<'env>(&self, env: &'env Env, key: String) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                raw_txn_delete(&c, key.into_bytes()).await.map_err(|e| to_js_err(&e))
            })
        })
    }

    /// Keys under a raw (not namespaced) prefix, for tests and tools.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn raw_keys<'env>(&self, env: &'env Env, prefix: String) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let mut etcd = self.inner.etcd();
            promise(env, async move {
                let opts = etcd_client::GetOptions::new().with_prefix().with_keys_only();
                let r = etcd.get(prefix, Some(opts)).await.map_err(|e| internal(e.to_string()))?;
                Ok(r.kvs().iter().map(|kv| String::from_utf8_lossy(kv.key()).into_owned()).collect::<Vec<_>>())
            })
        })
    }

    /// Core-only benchmark: `n` uncontended lock+unlock cycles timed inside
    /// Rust (no JS in the loop), then `n` raw Txn+Delete floors. Resolves
    /// `[coreNs..., rawNs...]` (2n latencies in nanoseconds).
    #[napi(ts_return_type = "Promise<number[]>")]
    pub fn core_bench<'env>(&self, env: &'env Env, name: String, n: u32) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                let mut out = Vec::with_capacity(2 * n as usize);
                let core = etcdlock::bench_floor::lock_unlock(&c, &name, n as usize).await.map_err(|e| to_js_err(&e))?;
                out.extend(core.iter().map(|d| d.as_nanos() as f64));
                let key = format!("{name}-raw/k").into_bytes();
                for _ in 0..n {
                    let t = Instant::now();
                    raw_txn_delete(&c, key.clone()).await.map_err(|e| to_js_err(&e))?;
                    out.push(t.elapsed().as_nanos() as f64);
                }
                Ok(out)
            })
        })
    }
}

/// The wait options every acquisition takes.
fn lock_opts(timeout_ms: Option<f64>, cancel: Option<&NativeCancel>) -> napi::Result<etcdlock::LockOptions> {
    let timeout = timeout_ms.map(|v| ms(v, "timeout")).transpose()?;
    Ok(etcdlock::LockOptions { timeout, cancel: cancel.map(|c| c.token.clone()) })
}

/// The current leader of an election.
#[napi(object)]
pub struct NativeLeader {
    pub key: String,
    pub value: Buffer,
    /// Decimal string (the JS layer makes it a bigint).
    pub revision: String,
    pub lease_id: String,
}

fn leader_info(l: etcdlock::Leader) -> NativeLeader {
    NativeLeader {
        key: String::from_utf8_lossy(&l.key).into_owned(),
        value: Buffer::from(l.value),
        revision: l.revision.to_string(),
        lease_id: l.lease_id.to_string(),
    }
}

/// One key in the queue of a name (core `Contender`).
#[napi(object)]
pub struct NativeContender {
    pub key: String,
    /// "exclusive", "reader" or "permit".
    pub kind: String,
    pub permits: Option<u32>,
    pub holds: bool,
    pub lease_id: String,
    pub ttl_remaining: Option<f64>,
    pub fencing_token: String,
    pub owner: Option<String>,
    pub age_ms: Option<f64>,
    pub value: Buffer,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub language: Option<String>,
    pub local_waiters: Option<u32>,
    pub foreign: bool,
}

/// Holders and waiters of one name (core `Status`).
#[napi(object)]
pub struct NativeStatus {
    pub name: String,
    /// "mutex", "election", "semaphore", "rwlock", or none.
    pub kind: Option<String>,
    pub revision: String,
    pub holders: Vec<NativeContender>,
    pub waiters: Vec<NativeContender>,
}

fn contender_info(c: etcdlock::Contender) -> NativeContender {
    let (kind, permits) = match c.kind {
        etcdlock::ContenderKind::Exclusive => ("exclusive", None),
        etcdlock::ContenderKind::Reader => ("reader", None),
        etcdlock::ContenderKind::Permit(n) => ("permit", Some(n)),
    };
    NativeContender {
        key: c.key,
        kind: kind.into(),
        permits,
        holds: c.holds,
        lease_id: c.lease_id.to_string(),
        ttl_remaining: c.ttl_remaining.map(|t| t as f64),
        fencing_token: c.create_revision.to_string(),
        owner: c.owner,
        age_ms: c.age_ms.map(|a| a as f64),
        value: Buffer::from(c.value),
        host: c.host,
        pid: c.pid,
        language: c.language,
        local_waiters: c.local_waiters,
        foreign: c.foreign,
    }
}

fn status_info(st: etcdlock::Status) -> NativeStatus {
    NativeStatus {
        name: st.name,
        kind: st.kind.map(|k| k.name().to_string()),
        revision: st.revision.to_string(),
        holders: st.holders.into_iter().map(contender_info).collect(),
        waiters: st.waiters.into_iter().map(contender_info).collect(),
    }
}

#[napi]
impl NativeClient {
    /// One of `permits` permits of the semaphore `name` (a lock handle).
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn acquire_permit<'env>(
        &self,
        env: &'env Env,
        name: String,
        permits: f64,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            if !(permits.is_finite() && permits.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&permits)) {
                return Err(invalid(format!("permits must be an integer between 1 and {}, got {permits}", etcdlock::MAX_PERMITS)));
            }
            let opts = lock_opts(timeout_ms, cancel)?;
            let c = self.inner.clone();
            promise(env, async move {
                let g = c.acquire_permit(&name, permits as u32, opts).await.map_err(|e| to_js_err(&e))?;
                Ok(NativeLock::new(g))
            })
        })
    }

    /// The read side of the read-write lock `name` (`lock` is the write side).
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn read_lock<'env>(&self, env: &'env Env, name: String, timeout_ms: Option<f64>, cancel: Option<&NativeCancel>) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let opts = lock_opts(timeout_ms, cancel)?;
            let c = self.inner.clone();
            promise(env, async move {
                let g = c.read_lock(&name, opts).await.map_err(|e| to_js_err(&e))?;
                Ok(NativeLock::new(g))
            })
        })
    }

    /// Every name in `names` together.
    #[napi(ts_return_type = "Promise<NativeMulti>")]
    pub fn lock_many<'env>(&self, env: &'env Env, names: Vec<String>, timeout_ms: Option<f64>, cancel: Option<&NativeCancel>) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let opts = lock_opts(timeout_ms, cancel)?;
            let c = self.inner.clone();
            promise(env, async move {
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                let m = c.lock_many(&refs, opts).await.map_err(|e| to_js_err(&e))?;
                Ok(NativeMulti { m: Arc::new(m) })
            })
        })
    }

    /// Campaign for leadership of `name` with `value` (a lock handle; `setValue` proclaims).
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn campaign<'env>(
        &self,
        env: &'env Env,
        name: String,
        value: Either<String, Buffer>,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let opts = lock_opts(timeout_ms, cancel)?;
            let (c, v) = (self.inner.clone(), bytes(&value));
            promise(env, async move {
                let l = c.campaign(&name, v, opts).await.map_err(|e| to_js_err(&e))?;
                Ok(NativeLock::new(l.into_guard()))
            })
        })
    }

    /// The current leader of `name`, or null.
    #[napi(ts_return_type = "Promise<NativeLeader | null>")]
    pub fn leader<'env>(&self, env: &'env Env, name: String) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move { Ok(c.leader(&name).await.map_err(|e| to_js_err(&e))?.map(leader_info)) })
        })
    }

    /// Follow the leadership of `name`.
    #[napi]
    pub fn observe(&self, name: String) -> napi::Result<NativeObserver> {
        guard_sync(|| {
            let o = self.inner.observe(&name).map_err(|e| to_js_err(&e))?;
            Ok(NativeObserver { o: Arc::new(tokio::sync::Mutex::new(o)) })
        })
    }

    /// Holders and waiters of `name`, whatever kind of lock it is.
    #[napi(ts_return_type = "Promise<NativeStatus>")]
    pub fn status<'env>(&self, env: &'env Env, name: String) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                let st = c.status(&name).await.map_err(|e| to_js_err(&e))?;
                Ok(status_info(st))
            })
        })
    }

    /// Every lock under `prefix` (core `list`).
    #[napi(ts_return_type = "Promise<NativeStatus[]>")]
    pub fn list<'env>(&self, env: &'env Env, prefix: String) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                let l = c.list(&prefix).await.map_err(|e| to_js_err(&e))?;
                Ok(l.into_iter().map(status_info).collect::<Vec<_>>())
            })
        })
    }

    /// Release the hold of `name` with fencing token `token` (core `release`).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'env>(&self, env: &'env Env, name: String, token: String) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let token: i64 = token.parse().map_err(|_| invalid(format!("token must be a fencing token, got {token:?}")))?;
            let c = self.inner.clone();
            promise(env, async move { c.release(&name, token).await.map_err(|e| to_js_err(&e)) })
        })
    }
}

/// Several locks held together (core `MultiGuard`).
#[napi]
pub struct NativeMulti {
    m: Arc<etcdlock::MultiGuard>,
}

#[napi]
impl NativeMulti {
    #[napi(getter)]
    pub fn names(&self) -> Vec<String> {
        self.m.guards().iter().map(|g| g.name().to_string()).collect()
    }

    #[napi(getter)]
    pub fn keys(&self) -> Vec<String> {
        self.m.guards().iter().map(|g| g.key()).collect()
    }

    /// Decimal strings (the JS layer makes them bigints).
    #[napi(getter)]
    pub fn fencing_tokens(&self) -> Vec<String> {
        self.m.guards().iter().map(|g| g.fencing_token().to_string()).collect()
    }

    #[napi(getter)]
    pub fn is_held(&self) -> bool {
        guard_sync(|| Ok(self.m.is_held())).unwrap_or(false)
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn unlock<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let m = self.m.clone();
            promise(env, async move { m.unlock().await.map_err(|e| to_js_err(&e)) })
        })
    }

    /// Call `cb([name, reason])` once when the first lock is lost, or
    /// `cb(null)` when released; like `NativeLock.onEnd`, it keeps neither
    /// the callback's event loop nor the locks alive.
    #[napi(ts_args_type = "cb: (err: null | Error, lost: string[] | null) => void")]
    pub fn on_end(&self, cb: ThreadsafeFunction<Option<Vec<String>>, (), Option<Vec<String>>, Status, true, true>) -> napi::Result<()> {
        guard_sync(|| {
            let rt = etcdlock::runtime::runtime().map_err(|e| to_js_err(&e))?;
            let signals: Vec<(String, etcdlock::LossSignal)> = self.m.guards().iter().map(|g| (g.name().to_string(), g.lost_signal())).collect();
            rt.spawn(async move {
                let mut set = tokio::task::JoinSet::new();
                for (name, mut s) in signals {
                    set.spawn(async move { s.wait().await.map(|l| vec![name, l.reason.name().to_string()]) });
                }
                let mut first = None;
                while let Some(r) = set.join_next().await {
                    if let Ok(Some(l)) = r {
                        first = Some(l);
                        break;
                    }
                }
                cb.call(Ok(first), ThreadsafeFunctionCallMode::NonBlocking);
            });
            Ok(())
        })
    }
}

/// Leadership changes of one election (core `Observer`).
#[napi]
pub struct NativeObserver {
    o: Arc<tokio::sync::Mutex<etcdlock::Observer>>,
}

#[napi]
impl NativeObserver {
    /// The next leadership state (the first call: the current one); null is
    /// "no leader". `cancel` ends the wait with `Cancelled`.
    #[napi(ts_return_type = "Promise<NativeLeader | null>")]
    pub fn next<'env>(&self, env: &'env Env, cancel: Option<&NativeCancel>) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let o = self.o.clone();
            let token = cancel.map(|c| c.token.clone()).unwrap_or_default();
            promise(env, async move {
                let mut o = tokio::select! {
                    g = o.lock() => g,
                    _ = token.cancelled() => return Err(encode(ErrorCode::Cancelled, None, "observe: aborted")),
                };
                tokio::select! {
                    r = o.next() => Ok(r.map_err(|e| to_js_err(&e))?.map(leader_info)),
                    _ = token.cancelled() => Err(encode(ErrorCode::Cancelled, None, "observe: aborted")),
                }
            })
        })
    }
}

async fn raw_txn_delete(c: &etcdlock::Client, key: Vec<u8>) -> etcdlock::Result<()> {
    let lease = c.lease_id().await.unwrap_or(0);
    etcdlock::bench_floor::txn_delete_round(&mut c.etcd(), key, lease).await.map(|_| ())
}

/// A held lock (core `Guard`).
#[napi]
pub struct NativeLock {
    guard: Arc<etcdlock::Guard>,
}

impl NativeLock {
    fn new(g: etcdlock::Guard) -> Self {
        NativeLock { guard: Arc::new(g) }
    }
}

fn bytes(b: &Either<String, Buffer>) -> Vec<u8> {
    match b {
        Either::A(s) => s.as_bytes().to_vec(),
        Either::B(b) => b.to_vec(),
    }
}

#[napi]
impl NativeLock {
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.guard.key()
    }

    #[napi(getter)]
    pub fn name(&self) -> String {
        self.guard.name().to_string()
    }

    /// Lease id as a decimal string (the JS layer makes it a bigint).
    #[napi(getter)]
    pub fn lease_id(&self) -> String {
        self.guard.lease_id().to_string()
    }

    /// Fencing token as a decimal string (the JS layer makes it a bigint).
    #[napi(getter)]
    pub fn fencing_token(&self) -> String {
        self.guard.fencing_token().to_string()
    }

    #[napi(getter)]
    pub fn is_held(&self) -> bool {
        guard_sync(|| Ok(self.guard.is_held())).unwrap_or(false)
    }

    /// `"held"`, `"released"` or the loss reason name.
    #[napi(getter)]
    pub fn state(&self) -> String {
        match self.guard.state() {
            GuardState::Held => "held".into(),
            GuardState::Released => "released".into(),
            GuardState::Lost(l) => l.reason.name().into(),
        }
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn unlock<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let g = self.guard.clone();
            promise(env, async move { g.unlock().await.map_err(|e| to_js_err(&e)) })
        })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn put<'env>(
        &self,
        env: &'env Env,
        key: Either<String, Buffer>,
        value: Either<String, Buffer>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let (k, v) = (bytes(&key), bytes(&value));
            let g = self.guard.clone();
            promise(env, async move { g.put(k, v).await.map_err(|e| to_js_err(&e)) })
        })
    }

    /// Replace our own key's value while held (an election's proclamation).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn set_value<'env>(&self, env: &'env Env, value: Either<String, Buffer>) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let v = bytes(&value);
            let g = self.guard.clone();
            promise(env, async move { g.set_value(v).await.map_err(|e| to_js_err(&e)) })
        })
    }

    #[napi(ts_return_type = "Promise<Buffer | null>")]
    pub fn get<'env>(&self, env: &'env Env, key: Either<String, Buffer>) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let k = bytes(&key);
            let g = self.guard.clone();
            promise(env, async move {
                let v = g.get(k).await.map_err(|e| to_js_err(&e))?;
                Ok(v.map(Buffer::from))
            })
        })
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn delete<'env>(&self, env: &'env Env, key: Either<String, Buffer>) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let k = bytes(&key);
            let g = self.guard.clone();
            promise(env, async move { g.delete(k).await.map_err(|e| to_js_err(&e)) })
        })
    }

    /// Call `cb(reasonOrNull)` once when the hold ends: the loss reason name,
    /// or `null` when released normally. The callback is held weakly (it does
    /// not keep the event loop alive) and the watcher does not keep the guard
    /// alive, so a forgotten lock is still released when collected.
    #[napi(ts_args_type = "cb: (err: null | Error, reason: string | null) => void")]
    pub fn on_end(&self, cb: ThreadsafeFunction<Option<String>, (), Option<String>, Status, true, true>) -> napi::Result<()> {
        guard_sync(|| {
            let rt = etcdlock::runtime::runtime().map_err(|e| to_js_err(&e))?;
            // Core's owned loss signal: `None` when released (or the guard was
            // collected), the loss otherwise; it does not keep the guard alive.
            let mut signal = self.guard.lost_signal();
            rt.spawn(async move {
                let reason = signal.wait().await.map(|l| l.reason.name().to_string());
                cb.call(Ok(reason), ThreadsafeFunctionCallMode::NonBlocking);
            });
            Ok(())
        })
    }

    /// Milliseconds of validity left while the keep-alive renewal is failing
    /// (no acknowledgement for an interval past when one was due), else null.
    #[napi(getter)]
    pub fn renewal_valid_for_ms(&self) -> Option<f64> {
        match self.guard.renewal() {
            etcdlock::Renewal::Failing { valid_until } if self.guard.is_held() => {
                Some(valid_until.saturating_duration_since(std::time::Instant::now()).as_secs_f64() * 1000.0)
            }
            _ => None,
        }
    }

    /// Call `cb(validForMsOrNull)` at each change of the renewal (the ms of
    /// validity left when it starts failing, `null` when it recovers) until the
    /// hold ends. Held weakly, like `onEnd`: it keeps neither the event loop
    /// nor the guard alive.
    #[napi(ts_args_type = "cb: (err: null | Error, validForMs: number | null) => void")]
    pub fn on_renewal(&self, cb: ThreadsafeFunction<Option<f64>, (), Option<f64>, Status, true, true>) -> napi::Result<()> {
        guard_sync(|| {
            let rt = etcdlock::runtime::runtime().map_err(|e| to_js_err(&e))?;
            let mut changes = self.guard.renewal_changes();
            let mut ended = self.guard.lost_signal();
            rt.spawn(async move {
                loop {
                    tokio::select! {
                        _ = ended.wait() => break,
                        r = changes.changed() => {
                            if r.is_err() {
                                break;
                            }
                            let v = match *changes.borrow_and_update() {
                                etcdlock::Renewal::Ok => None,
                                etcdlock::Renewal::Failing { valid_until } => {
                                    Some(valid_until.saturating_duration_since(std::time::Instant::now()).as_secs_f64() * 1000.0)
                                }
                            };
                            cb.call(Ok(v), ThreadsafeFunctionCallMode::NonBlocking);
                        }
                    }
                }
            });
            Ok(())
        })
    }
}

/// A Promise settled from the shared runtime with no etcd work: the cost of one
/// JS -> runtime -> JS hop (the benchmark reports it).
#[napi(ts_return_type = "Promise<void>")]
pub fn runtime_round_trip(env: &Env) -> napi::Result<Object<'_>> {
    guard_sync(|| promise(env, async { Ok(()) }))
}

/// The most permits one semaphore may have, and the most names one `lockMany` takes.
#[napi]
pub fn recipe_limits() -> Vec<u32> {
    vec![etcdlock::MAX_PERMITS, etcdlock::MAX_MULTI as u32]
}

/// The core's error names, in numeric order (index + 1 = C status code).
#[napi]
pub fn error_codes() -> Vec<String> {
    ErrorCode::ALL.iter().map(|c| c.name().to_string()).collect()
}
