//! Recipes on `NativeClient` (semaphore, read-write lock, multi-lock,
//! election, status); the objects they return live in `multi`, `election`
//! and `status`.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::client::{acquire_opts, lock_opts, NativeAcquire, NativeClient};
use crate::election::{leader_info, NativeObserver};
use crate::errors::*;
use crate::guard::{bytes, NativeLock};
use crate::multi::NativeMulti;
use crate::wait::*;

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
        extras: Option<NativeAcquire>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            if !(permits.is_finite()
                && permits.fract() == 0.0
                && (0.0..=u32::MAX as f64).contains(&permits))
            {
                return Err(invalid(format!(
                    "permits must be an integer between 1 and {}, got {permits}",
                    etcdlock::MAX_PERMITS
                )));
            }
            let opts = acquire_opts(timeout_ms, cancel, extras)?;
            let c = self.inner.clone();
            promise(env, async move {
                let g = c
                    .acquire_permit(&name, permits as u32, opts)
                    .await
                    .map_err(|e| to_js_err(&e))?;
                Ok(NativeLock::new(g))
            })
        })
    }

    /// The read side of the read-write lock `name` (`lock` is the write side).
    #[napi(ts_return_type = "Promise<NativeLock>")]
    pub fn read_lock<'env>(
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
                let g = c.read_lock(&name, opts).await.map_err(|e| to_js_err(&e))?;
                Ok(NativeLock::new(g))
            })
        })
    }

    /// Every name in `names` together.
    #[napi(ts_return_type = "Promise<NativeMulti>")]
    pub fn lock_many<'env>(
        &self,
        env: &'env Env,
        names: Vec<String>,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> napi::Result<Object<'env>> {
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
        extras: Option<NativeAcquire>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let opts = acquire_opts(timeout_ms, cancel, extras)?;
            let (c, v) = (self.inner.clone(), bytes(&value));
            promise(env, async move {
                let l = c
                    .campaign(&name, v, opts)
                    .await
                    .map_err(|e| to_js_err(&e))?;
                Ok(NativeLock::new(l.into_guard()))
            })
        })
    }

    /// The current leader of `name`, or null.
    #[napi(ts_return_type = "Promise<NativeLeader | null>")]
    pub fn leader<'env>(&self, env: &'env Env, name: String) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                Ok(c.leader(&name)
                    .await
                    .map_err(|e| to_js_err(&e))?
                    .map(leader_info))
            })
        })
    }

    /// Follow the leadership of `name`.
    #[napi]
    pub fn observe(&self, name: String) -> napi::Result<NativeObserver> {
        guard_sync(|| {
            let o = self.inner.observe(&name).map_err(|e| to_js_err(&e))?;
            Ok(NativeObserver {
                o: Arc::new(tokio::sync::Mutex::new(o)),
            })
        })
    }

    /// Holders and waiters of `name`, whatever kind of lock it is: core's
    /// `Status` record as its one JSON encoding (`records::to_json`), which
    /// lib/status.js decodes.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn status<'env>(&self, env: &'env Env, name: String) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                let st = c.status(&name).await.map_err(|e| to_js_err(&e))?;
                Ok(etcdlock::records::to_json(&st))
            })
        })
    }

    /// Every lock under `prefix` (core `list`), as one JSON array of
    /// `Status` records (`records::list_to_json`).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn list<'env>(&self, env: &'env Env, prefix: String) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                let l = c.list(&prefix).await.map_err(|e| to_js_err(&e))?;
                Ok(etcdlock::records::list_to_json(&l))
            })
        })
    }

    /// The cycles of clients waiting on each other under `prefix` (core
    /// `deadlocks`): a `Deadlocks` record as its JSON (`records::to_json`).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn deadlocks<'env>(&self, env: &'env Env, prefix: String) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let c = self.inner.clone();
            promise(env, async move {
                let d = c.deadlocks(&prefix).await.map_err(|e| to_js_err(&e))?;
                Ok(etcdlock::records::to_json(&d))
            })
        })
    }

    /// The history of `name` (core `history`) since `since_ms` ago (absent
    /// or `Infinity`: as far back as etcd keeps; core's rule of a wait's
    /// span), as a `History` record's JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn history<'env>(
        &self,
        env: &'env Env,
        name: String,
        since_ms: Option<f64>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let since = js(etcdlock::bridge::opt_timeout(
                "since",
                since_ms,
                etcdlock::bridge::Unit::Millis,
            ))?;
            let c = self.inner.clone();
            promise(env, async move {
                let h = c.history(&name, since).await.map_err(|e| to_js_err(&e))?;
                Ok(etcdlock::records::to_json(&h))
            })
        })
    }

    /// Release the hold of `name` with fencing token `token` (core `release`).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'env>(
        &self,
        env: &'env Env,
        name: String,
        token: String,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let token: i64 = token
                .parse()
                .map_err(|_| invalid(format!("token must be a fencing token, got {token:?}")))?;
            let c = self.inner.clone();
            promise(env, async move {
                c.release(&name, token).await.map_err(|e| to_js_err(&e))
            })
        })
    }

    /// Release the permit of the semaphore `name` whose id (its fencing
    /// token, a decimal string) is `id` (core `release_permit`).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release_permit<'env>(
        &self,
        env: &'env Env,
        name: String,
        id: String,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let id: i64 = id
                .parse()
                .map_err(|_| invalid(format!("id must be a permit's fencing token, got {id:?}")))?;
            let c = self.inner.clone();
            promise(env, async move {
                c.release_permit(&name, id).await.map_err(|e| to_js_err(&e))
            })
        })
    }
}
