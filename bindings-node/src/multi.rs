//! `NativeMulti`: several locks held together (core `MultiGuard`).

use std::sync::Arc;

use etcdlock::{ErrorCode, GuardState, Renewal};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use crate::errors::*;
use crate::guard::bytes;
use crate::wait::*;

/// Several locks held together (core `MultiGuard`).
#[napi]
pub struct NativeMulti {
    pub(crate) m: Arc<etcdlock::MultiGuard>,
}

#[napi]
impl NativeMulti {
    /// Guarded put under every lock of the multi-lock.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn put<'env>(
        &self,
        env: &'env Env,
        key: Either<String, Buffer>,
        value: Either<String, Buffer>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let (m, k, v) = (self.m.clone(), bytes(&key), bytes(&value));
            promise(env, async move { js(m.put(k, v).await) })
        })
    }

    /// Guarded get under every lock.
    #[napi(ts_return_type = "Promise<Buffer | null>")]
    pub fn get<'env>(
        &self,
        env: &'env Env,
        key: Either<String, Buffer>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let (m, k) = (self.m.clone(), bytes(&key));
            promise(
                env,
                async move { Ok(js(m.get(k).await)?.map(Buffer::from)) },
            )
        })
    }

    /// Guarded delete under every lock.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn delete<'env>(
        &self,
        env: &'env Env,
        key: Either<String, Buffer>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let (m, k) = (self.m.clone(), bytes(&key));
            promise(env, async move { js(m.delete(k).await) })
        })
    }

    #[napi(getter)]
    pub fn names(&self) -> Vec<String> {
        self.m
            .guards()
            .iter()
            .map(|g| g.name().to_string())
            .collect()
    }

    #[napi(getter)]
    pub fn keys(&self) -> Vec<String> {
        self.m.guards().iter().map(|g| g.key()).collect()
    }

    /// The session lease every lock is held on, as a decimal string (the JS
    /// layer makes it a bigint).
    #[napi(getter)]
    pub fn lease_id(&self) -> String {
        self.m
            .guards()
            .first()
            .map_or(0, |g| g.lease_id())
            .to_string()
    }

    /// Decimal strings (the JS layer makes them bigints).
    #[napi(getter)]
    pub fn fencing_tokens(&self) -> Vec<String> {
        self.m
            .guards()
            .iter()
            .map(|g| g.fencing_token().to_string())
            .collect()
    }

    #[napi(getter)]
    pub fn is_held(&self) -> bool {
        guard_sync(|| Ok(self.m.is_held())).unwrap_or(false)
    }

    /// `"held"` while every lock is held; the loss reason name of a lock
    /// lost (the first in name order); else `"released"`.
    #[napi(getter)]
    pub fn state(&self) -> String {
        let states: Vec<GuardState> = self.m.guards().iter().map(|g| g.state()).collect();
        let lost = states.iter().find_map(|s| match s {
            GuardState::Lost(l) => Some(l.reason.name()),
            _ => None,
        });
        match lost {
            Some(reason) => reason.into(),
            None if states.iter().all(|s| *s == GuardState::Held) => "held".into(),
            None => "released".into(),
        }
    }

    /// As `NativeLock.renewalValidForMs`: every lock of a multi-lock is on
    /// one session (one lease), so they are renewed together. Null unless
    /// the renewal is failing while every lock is held.
    #[napi(getter)]
    pub fn renewal_valid_for_ms(&self) -> Option<f64> {
        match self.m.renewal() {
            Renewal::Failing { valid_until } if self.m.is_held() => Some(
                valid_until
                    .saturating_duration_since(std::time::Instant::now())
                    .as_secs_f64()
                    * 1000.0,
            ),
            _ => None,
        }
    }

    /// As `NativeLock.onRenewal`, until the multi-lock's hold ends (a lock
    /// lost, or released). Held weakly: it keeps neither the event loop nor
    /// the locks alive.
    #[napi(ts_args_type = "cb: (err: null | Error, validForMs: number | null) => void")]
    pub fn on_renewal(
        &self,
        cb: ThreadsafeFunction<Option<f64>, (), Option<f64>, Status, true, true>,
    ) -> napi::Result<()> {
        guard_sync(|| {
            let rt = etcdlock::runtime::runtime().map_err(|e| to_js_err(&e))?;
            let mut changes = self.m.renewal_changes().ok_or_else(|| {
                to_js_err(&etcdlock::Error::new(
                    ErrorCode::Internal,
                    "a multi-lock without locks",
                ))
            })?;
            let mut ended = self.m.lost_signal();
            rt.spawn(async move {
                let end = ended.wait();
                tokio::pin!(end);
                loop {
                    tokio::select! {
                        _ = &mut end => break,
                        r = changes.changed() => {
                            if r.is_err() {
                                break;
                            }
                            let left = match *changes.borrow_and_update() {
                                Renewal::Failing { valid_until } => Some(
                                    valid_until
                                        .saturating_duration_since(std::time::Instant::now())
                                        .as_secs_f64()
                                        * 1000.0,
                                ),
                                Renewal::Ok => None,
                            };
                            cb.call(Ok(left), ThreadsafeFunctionCallMode::NonBlocking);
                        }
                    }
                }
            });
            Ok(())
        })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn unlock<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let m = self.m.clone();
            promise(
                env,
                async move { m.unlock().await.map_err(|e| to_js_err(&e)) },
            )
        })
    }

    /// Call `cb([name, reason])` once when the first lock is lost, or
    /// `cb(null)` when released; like `NativeLock.onEnd`, it keeps neither
    /// the callback's event loop nor the locks alive.
    #[napi(ts_args_type = "cb: (err: null | Error, lost: string[] | null) => void")]
    pub fn on_end(
        &self,
        cb: ThreadsafeFunction<Option<Vec<String>>, (), Option<Vec<String>>, Status, true, true>,
    ) -> napi::Result<()> {
        guard_sync(|| {
            let rt = etcdlock::runtime::runtime().map_err(|e| to_js_err(&e))?;
            let mut signal = self.m.lost_signal();
            rt.spawn(async move {
                let first = signal
                    .wait()
                    .await
                    .map(|(name, loss)| vec![name, loss.reason.name().to_string()]);
                cb.call(Ok(first), ThreadsafeFunctionCallMode::NonBlocking);
            });
            Ok(())
        })
    }
}
