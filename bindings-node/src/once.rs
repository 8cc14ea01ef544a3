//! Run-once records on `NativeClient` (core's `once_*`): the record Java's
//! ShedLock provider and Python's `once` keep. A hold crosses as
//! `NativeOnceHold`; durations are milliseconds.

use etcdlock::bridge::{self, Unit};
use etcdlock::OnceHold;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::client::NativeClient;
use crate::errors::*;
use crate::wait::*;

/// A taken run-once record.
#[napi(object)]
pub struct NativeOnceHold {
    /// Decimal string (the JS layer makes it a bigint).
    pub revision: String,
    pub locked_at_ms: f64,
    pub lock_until_ms: f64,
}

fn info(h: OnceHold) -> NativeOnceHold {
    NativeOnceHold {
        revision: h.record.revision.to_string(),
        locked_at_ms: h.record.locked_at_ms as f64,
        lock_until_ms: h.record.lock_until_ms as f64,
    }
}

fn hold(name: &str, h: &NativeOnceHold) -> napi::Result<OnceHold> {
    let rev: i64 = h.revision.parse().map_err(|_| {
        invalid(format!(
            "revision must be a decimal integer, got {:?}",
            h.revision
        ))
    })?;
    Ok(OnceHold::mine(
        name,
        rev,
        h.locked_at_ms as i64,
        h.lock_until_ms as i64,
    ))
}

fn span(what: &str, ms: f64) -> napi::Result<std::time::Duration> {
    bridge::span(what, ms, Unit::Millis).map_err(|e| to_js_err(&e))
}

#[napi]
impl NativeClient {
    /// Take job `name`'s run-once record for `at_most_ms` if it is free (null if taken);
    /// `at_least_ms` (used at finish) is checked with it, before anything is taken.
    #[napi(ts_return_type = "Promise<NativeOnceHold | null>")]
    pub fn once_take<'env>(
        &self,
        env: &'env Env,
        name: String,
        at_most_ms: f64,
        at_least_ms: f64,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let (at_most, _) = bridge::once_spans(at_most_ms, at_least_ms, Unit::Millis)
                .map_err(|e| to_js_err(&e))?;
            let c = self.inner.clone();
            promise(env, async move {
                Ok(c.once_take(&name, at_most)
                    .await
                    .map_err(|e| to_js_err(&e))?
                    .map(info))
            })
        })
    }

    /// Finish a hold: taken until lockedAt + `at_least_ms`, or deleted; false if no longer ours.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn once_finish<'env>(
        &self,
        env: &'env Env,
        name: String,
        h: NativeOnceHold,
        at_least_ms: f64,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let (c, h, at_least) = (
                self.inner.clone(),
                hold(&name, &h)?,
                span("atLeast", at_least_ms)?,
            );
            promise(env, async move {
                c.once_finish(&h, at_least).await.map_err(|e| to_js_err(&e))
            })
        })
    }

    /// Extend a hold to now + `at_most_ms`: the new hold, or null if no longer ours.
    #[napi(ts_return_type = "Promise<NativeOnceHold | null>")]
    pub fn once_extend<'env>(
        &self,
        env: &'env Env,
        name: String,
        h: NativeOnceHold,
        at_most_ms: f64,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let (c, h, at_most) = (
                self.inner.clone(),
                hold(&name, &h)?,
                span("atMost", at_most_ms)?,
            );
            promise(env, async move {
                Ok(c.once_extend(&h, at_most)
                    .await
                    .map_err(|e| to_js_err(&e))?
                    .map(info))
            })
        })
    }
}
