//! `NativeLock`: a held lock (core `Guard`).

use std::sync::Arc;

use etcdlock::GuardState;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use crate::errors::*;
use crate::wait::*;

/// A held lock (core `Guard`).
#[napi]
pub struct NativeLock {
    guard: Held,
}

/// What a `NativeLock` holds: its own guard, or a leader-loop term's
/// leadership (which the term owns).
#[derive(Clone)]
enum Held {
    Own(Arc<etcdlock::Guard>),
    Term(etcdlock::Term),
}

impl std::ops::Deref for Held {
    type Target = etcdlock::Guard;
    fn deref(&self) -> &etcdlock::Guard {
        match self {
            Held::Own(g) => g,
            Held::Term(t) => t.leadership(),
        }
    }
}

impl NativeLock {
    pub(crate) fn new(g: etcdlock::Guard) -> Self {
        NativeLock {
            guard: Held::Own(Arc::new(g)),
        }
    }

    /// The leadership of a leader-loop term.
    pub(crate) fn of_term(t: etcdlock::Term) -> Self {
        NativeLock {
            guard: Held::Term(t),
        }
    }
}

pub(crate) fn bytes(b: &Either<String, Buffer>) -> Vec<u8> {
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
            promise(
                env,
                async move { g.unlock().await.map_err(|e| to_js_err(&e)) },
            )
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
            promise(
                env,
                async move { g.put(k, v).await.map_err(|e| to_js_err(&e)) },
            )
        })
    }

    /// Replace our own key's value while held (an election's proclamation).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn set_value<'env>(
        &self,
        env: &'env Env,
        value: Either<String, Buffer>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let v = bytes(&value);
            let g = self.guard.clone();
            promise(env, async move {
                g.set_value(v).await.map_err(|e| to_js_err(&e))
            })
        })
    }

    #[napi(ts_return_type = "Promise<Buffer | null>")]
    pub fn get<'env>(
        &self,
        env: &'env Env,
        key: Either<String, Buffer>,
    ) -> napi::Result<Object<'env>> {
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
    pub fn delete<'env>(
        &self,
        env: &'env Env,
        key: Either<String, Buffer>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let k = bytes(&key);
            let g = self.guard.clone();
            promise(
                env,
                async move { g.delete(k).await.map_err(|e| to_js_err(&e)) },
            )
        })
    }

    /// Call `cb(reasonOrNull)` once when the hold ends: the loss reason name,
    /// or `null` when released normally. The callback is held weakly (it does
    /// not keep the event loop alive) and the watcher does not keep the guard
    /// alive, so a forgotten lock is still released when collected.
    #[napi(ts_args_type = "cb: (err: null | Error, reason: string | null) => void")]
    pub fn on_end(
        &self,
        cb: ThreadsafeFunction<Option<String>, (), Option<String>, Status, true, true>,
    ) -> napi::Result<()> {
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
            etcdlock::Renewal::Failing { valid_until } if self.guard.is_held() => Some(
                valid_until
                    .saturating_duration_since(std::time::Instant::now())
                    .as_secs_f64()
                    * 1000.0,
            ),
            _ => None,
        }
    }

    /// Call `cb(validForMsOrNull)` at each change of the renewal (the ms of
    /// validity left when it starts failing, `null` when it recovers) until the
    /// hold ends. Held weakly, like `onEnd`: it keeps neither the event loop
    /// nor the guard alive.
    #[napi(ts_args_type = "cb: (err: null | Error, validForMs: number | null) => void")]
    pub fn on_renewal(
        &self,
        cb: ThreadsafeFunction<Option<f64>, (), Option<f64>, Status, true, true>,
    ) -> napi::Result<()> {
        guard_sync(|| {
            js(etcdlock::bridge::follow_renewal(
                &self.guard,
                move |left| {
                    cb.call(
                        Ok(left.map(|d| d.as_secs_f64() * 1000.0)),
                        ThreadsafeFunctionCallMode::NonBlocking,
                    );
                },
                || {},
            ))?;
            Ok(())
        })
    }
}
