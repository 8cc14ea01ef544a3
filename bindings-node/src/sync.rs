//! Count-down latches and barriers (core `Latch`, `Barrier`) on
//! `NativeClient`, and the handles they return. Every wait is a Promise
//! settled from core's runtime, like the locks'; a `NativeCancel` ends it
//! with `Cancelled`.

use std::sync::Arc;

use etcdlock::bridge::{self, Unit};
use etcdlock::{ErrorCode, MAX_SYNC_COUNT};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::client::NativeClient;
use crate::errors::*;
use crate::wait::*;

/// A JS number as a count for core (`what` between 1 and `MAX_SYNC_COUNT`):
/// only what a `u64` cannot hold (negative, fractional, not finite) is
/// refused here, with core's message; core checks the range itself.
fn count_arg(what: &str, v: f64) -> napi::Result<u64> {
    if v.is_finite() && v.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(&v) {
        return Ok(v as u64);
    }
    Err(invalid(format!(
        "{what} must be between 1 and {MAX_SYNC_COUNT}, got {v}"
    )))
}

/// Run `fut`, ending it with `Cancelled` when `cancel` fires.
async fn cancellable<T>(
    what: &str,
    cancel: Option<etcdlock::CancellationToken>,
    fut: impl std::future::Future<Output = etcdlock::Result<T>>,
) -> napi::Result<T> {
    let token = cancel.unwrap_or_default();
    tokio::select! {
        r = fut => js(r),
        _ = token.cancelled() => Err(to_js_err(&etcdlock::Error::new(ErrorCode::Cancelled, format!("{what}: aborted")))),
    }
}

#[napi]
impl NativeClient {
    /// Open the count-down latch `name` with `count` (core `Client::latch`).
    #[napi(ts_return_type = "Promise<NativeLatch>")]
    pub fn latch<'env>(
        &self,
        env: &'env Env,
        name: String,
        count: f64,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let n = count_arg("count", count)?;
            let c = self.inner.clone();
            promise(env, async move {
                let l = js(c.latch(&name, n).await)?;
                Ok(NativeLatch { l: Arc::new(l) })
            })
        })
    }

    /// Open the barrier `name` for `parties` parties (core `Client::barrier`).
    #[napi(ts_return_type = "Promise<NativeBarrier>")]
    pub fn barrier<'env>(
        &self,
        env: &'env Env,
        name: String,
        parties: f64,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let n = count_arg("parties", parties)?;
            let n = u32::try_from(n).map_err(|_| {
                invalid(format!(
                    "parties must be between 1 and {MAX_SYNC_COUNT}, got {parties}"
                ))
            })?;
            let c = self.inner.clone();
            promise(env, async move {
                let b = js(c.barrier(&name, n).await)?;
                Ok(NativeBarrier { b: Arc::new(b) })
            })
        })
    }
}

/// An open count-down latch (core `Latch`); dropping it closes it.
#[napi]
pub struct NativeLatch {
    l: Arc<etcdlock::Latch>,
}

#[napi]
impl NativeLatch {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.l.name().to_string()
    }

    /// The count the latch was created with.
    #[napi(getter)]
    pub fn initial(&self) -> f64 {
        self.l.initial() as f64
    }

    /// Lower the count by one (a no-op at zero); resolves the count after.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn count_down<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let l = self.l.clone();
            promise(env, async move { Ok(js(l.count_down().await)? as f64) })
        })
    }

    /// The count now (one read).
    #[napi(ts_return_type = "Promise<number>")]
    pub fn count<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let l = self.l.clone();
            promise(env, async move { Ok(js(l.count().await)? as f64) })
        })
    }

    /// Wait for zero: `timeout_ms` by core's one timeout rule (absent: no
    /// limit), `cancel` ends the wait with `Cancelled`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn wait<'env>(
        &self,
        env: &'env Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let timeout = js(bridge::opt_timeout("timeout", timeout_ms, Unit::Millis))?;
            let (l, token) = (self.l.clone(), cancel.map(|c| c.token.clone()));
            promise(env, async move {
                cancellable("latch wait", token, l.wait(timeout)).await
            })
        })
    }

    /// Stop renewing the latch from this handle (idempotent).
    #[napi]
    pub fn close(&self) -> napi::Result<()> {
        guard_sync(|| {
            self.l.close();
            Ok(())
        })
    }
}

/// An open barrier (core `Barrier`); dropping it closes it.
#[napi]
pub struct NativeBarrier {
    b: Arc<etcdlock::Barrier>,
}

#[napi]
impl NativeBarrier {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.b.name().to_string()
    }

    /// How many parties it waits for.
    #[napi(getter)]
    pub fn parties(&self) -> u32 {
        self.b.parties()
    }

    /// Arrive and wait for every party: resolves this party's arrival index.
    /// `timeout_ms` and `cancel` as `NativeLatch.wait`.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn wait<'env>(
        &self,
        env: &'env Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let timeout = js(bridge::opt_timeout("timeout", timeout_ms, Unit::Millis))?;
            let (b, token) = (self.b.clone(), cancel.map(|c| c.token.clone()));
            promise(env, async move {
                cancellable("barrier wait", token, b.wait(timeout)).await
            })
        })
    }

    /// Stop renewing the barrier from this handle (idempotent).
    #[napi]
    pub fn close(&self) -> napi::Result<()> {
        guard_sync(|| {
            self.b.close();
            Ok(())
        })
    }
}
