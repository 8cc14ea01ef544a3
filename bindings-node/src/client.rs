//! `NativeClient`: connect, lock, try-lock, close, metrics (the recipes are
//! in recipes.rs).

use etcdlock::ErrorCode;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::errors::*;
use crate::guard::NativeLock;
use crate::options::{client_options, NativeOption};
use crate::wait::*;

/// A connected core client.
#[napi]
pub struct NativeClient {
    pub(crate) inner: etcdlock::Client,
}

#[napi]
impl NativeClient {
    /// Connect (resolves a `NativeClient`).
    #[napi(ts_return_type = "Promise<NativeClient>")]
    pub fn connect<'env>(env: &'env Env, options: Vec<NativeOption>) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let opts = client_options(options)?;
            etcdlock::set_language("node");
            promise(env, async move {
                let c = etcdlock::Client::connect(opts)
                    .await
                    .map_err(|e| to_js_err(&e))?;
                Ok(NativeClient { inner: c })
            })
        })
    }

    /// One read through the session (core `ping`): resolves the round trip in ms.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn ping<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                Ok(js(c.ping().await)?.as_secs_f64() * 1000.0)
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
        let l: Vec<(&str, &str)> = labels
            .iter()
            .filter(|p| p.len() == 2)
            .map(|p| (p[0].as_str(), p[1].as_str()))
            .collect();
        self.inner.metrics().to_prometheus(&l)
    }

    /// Core's metrics snapshot as its one JSON encoding
    /// (`records::to_json`), which lib/status.js decodes.
    #[napi]
    pub fn metrics_json(&self) -> String {
        etcdlock::records::to_json(&self.inner.metrics())
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

    /// Acquire; `timeout_ms` bounds the wait, `cancel` aborts it, `extras`
    /// asks for a lock-delay, a lease time or holder metadata.
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn lock<'env>(
        &self,
        env: &'env Env,
        name: String,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
        extras: Option<NativeAcquire>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let opts = acquire_opts(timeout_ms, cancel, extras)?;
            let c = self.inner.clone();
            promise(env, async move {
                let g = c.lock_with(&name, opts).await.map_err(|e| to_js_err(&e))?;
                Ok(NativeLock::new(g))
            })
        })
    }

    /// Try once; resolves `null` when the lock is held elsewhere (or a
    /// vanished holder's lock-delay runs). With `extras`, core's
    /// `try_lock_with` those options.
    #[napi(ts_return_type = "Promise<NativeLock | null>")]
    pub fn try_lock<'env>(
        &self,
        env: &'env Env,
        name: String,
        extras: Option<NativeAcquire>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let once = match extras {
                Some(x) => Some(acquire_opts(None, None, Some(x))?),
                None => None,
            };
            let c = self.inner.clone();
            promise(env, async move {
                let r = match once {
                    Some(o) => c.try_lock_with(&name, o).await,
                    None => c.try_lock(&name).await,
                };
                match r {
                    Ok(g) => Ok(Some(NativeLock::new(g))),
                    Err(e) if e.code() == ErrorCode::WouldBlock => Ok(None),
                    Err(e) => Err(to_js_err(&e)),
                }
            })
        })
    }

    /// [`lock`](Self::lock), reentrant for `owner` (core
    /// `Client::lock_reentrant`): if `owner` holds `name` (taken here), another
    /// handle of that hold at once; a lost hold is `LockLost`.
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn lock_reentrant<'env>(
        &self,
        env: &'env Env,
        name: String,
        owner: i64,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
        extras: Option<NativeAcquire>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let owner = owner_id(owner)?;
            let opts = acquire_opts(timeout_ms, cancel, extras)?;
            let c = self.inner.clone();
            promise(env, async move {
                let g = c
                    .lock_reentrant(&name, owner, opts)
                    .await
                    .map_err(|e| to_js_err(&e))?;
                Ok(NativeLock::new(g))
            })
        })
    }

    /// [`try_lock`](Self::try_lock), reentrant for `owner` (core
    /// `Client::try_lock_reentrant`): resolves `null` when another owner (or
    /// a plain lock) holds `name`.
    #[napi(ts_return_type = "Promise<NativeLock | null>")]
    pub fn try_lock_reentrant<'env>(
        &self,
        env: &'env Env,
        name: String,
        owner: i64,
        extras: Option<NativeAcquire>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let owner = owner_id(owner)?;
            let opts = acquire_opts(None, None, extras)?;
            let c = self.inner.clone();
            promise(env, async move {
                match c.try_lock_reentrant(&name, owner, opts).await {
                    Ok(g) => Ok(Some(NativeLock::new(g))),
                    Err(e) if e.code() == ErrorCode::WouldBlock => Ok(None),
                    Err(e) => Err(to_js_err(&e)),
                }
            })
        })
    }

    /// Keys under a raw (not namespaced) prefix, for tests and tools.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn raw_keys<'env>(&self, env: &'env Env, prefix: String) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                etcdlock::bridge::raw_keys(&c, &prefix)
                    .await
                    .map_err(|e| to_js_err(&e))
            })
        })
    }
}

/// A reentrancy owner as lib/reentry.js numbers them (from 1).
fn owner_id(owner: i64) -> napi::Result<u64> {
    u64::try_from(owner)
        .map_err(|_| invalid(format!("owner must be a non-negative integer, got {owner}")))
}

/// What an acquisition asks for beyond its wait (core `bridge::Extras`), as
/// index.js hands it over: spans in ms, metadata as `[key, value]` pairs.
#[napi(object)]
pub struct NativeAcquire {
    /// Chubby's lock-delay in ms (core `LockOptions::lock_delay`).
    pub lock_delay: Option<f64>,
    /// Hold at most this many ms (core `LockOptions::lease_time`).
    pub lease_time: Option<f64>,
    /// Holder metadata, `[key, value]` pairs (core `LockOptions::metadata`).
    pub metadata: Option<Vec<Vec<String>>>,
    /// Fail a wait that would close a cycle with `Deadlock` (core
    /// `LockOptions::detect_deadlock`).
    pub detect_deadlock: Option<bool>,
}

/// Core's options of one acquisition: the timeout, the cancel handle and the
/// extras, built only by `bridge::acquire_options` (core's one rule and its
/// messages; nothing is checked here but the shape of a metadata pair).
pub(crate) fn acquire_opts(
    timeout_ms: Option<f64>,
    cancel: Option<&NativeCancel>,
    extras: Option<NativeAcquire>,
) -> napi::Result<etcdlock::LockOptions> {
    let extras = match extras {
        None => etcdlock::bridge::Extras::default(),
        Some(x) => {
            let mut metadata = Vec::new();
            for p in x.metadata.unwrap_or_default() {
                let [k, v]: [String; 2] = p.try_into().map_err(|_| {
                    invalid("metadata: each entry must be a [key, value] pair of strings")
                })?;
                metadata.push((k, v));
            }
            etcdlock::bridge::Extras {
                lock_delay: x.lock_delay,
                lease_time: x.lease_time,
                metadata,
                detect_deadlock: x.detect_deadlock.unwrap_or(false),
            }
        }
    };
    let mut o = js(etcdlock::bridge::acquire_options(
        timeout_ms,
        extras,
        etcdlock::bridge::Unit::Millis,
    ))?;
    o.cancel = cancel.map(|c| c.token.clone());
    Ok(o)
}

/// The wait options every acquisition takes: a timeout in ms by core's one
/// rule, and the cancel handle.
pub(crate) fn lock_opts(
    timeout_ms: Option<f64>,
    cancel: Option<&NativeCancel>,
) -> napi::Result<etcdlock::LockOptions> {
    let mut o = js(etcdlock::bridge::lock_options(
        timeout_ms,
        etcdlock::bridge::Unit::Millis,
    ))?;
    o.cancel = cancel.map(|c| c.token.clone());
    Ok(o)
}
