//! Recipes on `NativeClient` (semaphore, read-write lock, multi-lock,
//! election, status) and the objects they return.

use std::sync::Arc;

use etcdlock::ErrorCode;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use crate::client::{acquire_opts, lock_opts, NativeAcquire, NativeClient};
use crate::errors::*;
use crate::guard::{bytes, NativeLock};
use crate::wait::*;

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
    /// The holder's metadata (`LockOptions::metadata`), `[key, value]` pairs.
    pub metadata: Vec<Vec<String>>,
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
        metadata: c.metadata.into_iter().map(|(k, v)| vec![k, v]).collect(),
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

/// Several locks held together (core `MultiGuard`).
#[napi]
pub struct NativeMulti {
    m: Arc<etcdlock::MultiGuard>,
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
            let signals: Vec<(String, etcdlock::LossSignal)> = self
                .m
                .guards()
                .iter()
                .map(|g| (g.name().to_string(), g.lost_signal()))
                .collect();
            rt.spawn(async move {
                let mut set = tokio::task::JoinSet::new();
                for (name, mut s) in signals {
                    set.spawn(async move {
                        s.wait()
                            .await
                            .map(|l| vec![name, l.reason.name().to_string()])
                    });
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
    pub fn next<'env>(
        &self,
        env: &'env Env,
        cancel: Option<&NativeCancel>,
    ) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let o = self.o.clone();
            let token = cancel.map(|c| c.token.clone()).unwrap_or_default();
            promise(env, async move {
                let mut o = tokio::select! {
                    g = o.lock() => g,
                    _ = token.cancelled() => return Err(to_js_err(&etcdlock::Error::new(ErrorCode::Cancelled, "observe: aborted"))),
                };
                tokio::select! {
                    r = o.next() => Ok(r.map_err(|e| to_js_err(&e))?.map(leader_info)),
                    _ = token.cancelled() => Err(to_js_err(&etcdlock::Error::new(ErrorCode::Cancelled, "observe: aborted"))),
                }
            })
        })
    }
}
