//! Native methods of a held lock: key, info, unlock, guarded operations,
//! loss and renewal watches, free.

use crate::prelude::*;
use etcdlock::poison::Locked;

/// `static native void cancelAsync(long id)`: cancel an in-flight `lockAsync`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_cancelAsync<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    id: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            if let Some(t) = async_tokens().locked().remove(&id) {
                t.cancel();
            }
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// A hold Java reaches through a guard handle: a lock's guard, or the
/// leadership of a leader loop's term (the same operations).
pub(crate) enum GuardRef {
    Plain(Arc<Guard>),
    Term(Arc<etcdlock::Term>),
}

impl std::ops::Deref for GuardRef {
    type Target = Guard;
    fn deref(&self) -> &Guard {
        match self {
            GuardRef::Plain(g) => g,
            GuardRef::Term(t) => t.leadership(),
        }
    }
}

/// The hold behind a guard handle: a guard, or a leader term. Errors as
/// [`borrow`]: `Closed` once freed, `InvalidArgument` for anything else.
pub(crate) fn borrow_guard(h: jlong) -> NResult<GuardRef> {
    match borrow::<Guard>(h, "guard") {
        Ok(g) => Ok(GuardRef::Plain(g)),
        Err(NErr::Lock(e)) if e.code() == ErrorCode::InvalidArgument => {
            borrow::<etcdlock::Term>(h, "guard").map(GuardRef::Term)
        }
        Err(e) => Err(e),
    }
}

/// `static native String guardKey(long guard)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_guardKey<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    guard: jlong,
) -> JString<'local> {
    unowned
        .with_env(|env| -> NResult<JString<'local>> {
            let g = borrow_guard(guard)?;
            Ok(JString::from_str(env, g.key())?)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long guardInfo(long guard, int what)`: 0 = lease id, 1 = fencing token,
/// 2 = is held (0/1), 3 = loss reason code (0 = not lost), 4 = ms of validity left while
/// the keep-alive renewal is failing (-1 = not failing).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_guardInfo<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    guard: jlong,
    what: jint,
) -> jlong {
    unowned
        .with_env(|_env| -> NResult<jlong> {
            let g = borrow_guard(guard)?;
            Ok(match what {
                0 => g.lease_id(),
                1 => g.fencing_token(),
                2 => g.is_held() as jlong,
                3 => g.loss().map(|l| l.reason as jlong).unwrap_or(0),
                4 => renewal_ms(&g),
                _ => return Err(invalid(format!("unknown guard field {what}"))),
            })
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void unlock(long guard)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_unlock<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    guard: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let g = borrow_guard(guard)?;
            if tokio::runtime::Handle::try_current().is_ok() {
                // Closing a guard inside a CompletableFuture callback or loss listener (a
                // runtime thread) must not block that thread: release in the background.
                etcdlock::runtime::spawn(async move {
                    let _ = g.unlock().await;
                })?;
                return Ok(());
            }
            block(env, async move { g.unlock().await }, None)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void put(long guard, byte[] key, byte[] value)`: guarded put.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_put<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    guard: jlong,
    key: JByteArray<'local>,
    value: JByteArray<'local>,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let g = borrow_guard(guard)?;
            let k = req_bytes(env, &key, "key")?;
            let v = req_bytes(env, &value, "value")?;
            block(env, async move { g.put(k, v).await }, None)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native byte[] get(long guard, byte[] key)`: guarded get, null if absent.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_get<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    guard: jlong,
    key: JByteArray<'local>,
) -> JByteArray<'local> {
    unowned
        .with_env(|env| -> NResult<JByteArray<'local>> {
            let g = borrow_guard(guard)?;
            let k = req_bytes(env, &key, "key")?;
            match block(env, async move { g.get(k).await }, None)? {
                Some(v) => Ok(env.byte_array_from_slice(&v)?),
                None => Ok(JByteArray::default()),
            }
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native boolean delete(long guard, byte[] key)`: guarded delete.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_delete<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    guard: jlong,
    key: JByteArray<'local>,
) -> jboolean {
    unowned
        .with_env(|env| -> NResult<jboolean> {
            let g = borrow_guard(guard)?;
            let k = req_bytes(env, &key, "key")?;
            block(env, async move { g.delete(k).await }, None)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void watchLoss(long guard, long id)`: when the hold ends,
/// `NativeBridge.complete(id, 0, reason, 0, 0, null)` runs on a runtime thread
/// (`reason` 0 = released normally).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_watchLoss<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    guard: jlong,
    id: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            // Core's owned loss signal: the watcher does not keep the guard alive.
            let mut signal = borrow_guard(guard)?.lost_signal();
            let rt = etcdlock::runtime::runtime()?;
            rt.spawn(async move {
                let loss = signal.wait().await;
                complete(id, 0, loss.map(|l| l.reason as jlong).unwrap_or(0), None);
            });
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// Report to `id` once the renewal (`changes`) is no longer `failing` (or
/// is, if it was not): `NativeBridge.complete(id, 0, ms, 0, 0, null)` with
/// the ms of validity left while failing, -1 when renewed; -2 when the hold
/// ends first (`ended`). Runs on the runtime and keeps no hold alive.
pub(crate) fn spawn_renewal_watch(
    id: jlong,
    mut changes: tokio::sync::watch::Receiver<etcdlock::Renewal>,
    failing: bool,
    ended: impl Future<Output = ()> + Send + 'static,
) -> NResult<()> {
    let rt = etcdlock::runtime::runtime()?;
    rt.spawn(async move {
        tokio::pin!(ended);
        loop {
            let now = *changes.borrow_and_update();
            if matches!(now, etcdlock::Renewal::Failing { .. }) != failing {
                complete(id, 0, left_ms(now), None);
                return;
            }
            tokio::select! {
                _ = &mut ended => break,
                r = changes.changed() => if r.is_err() { break },
            }
        }
        complete(id, 0, -2, None);
    });
    Ok(())
}

/// Ms of validity left while `g`'s renewal is failing and it is held, else -1.
pub(crate) fn renewal_ms(g: &Guard) -> jlong {
    if g.is_held() {
        left_ms(g.renewal())
    } else {
        -1
    }
}

/// Ms of validity left while a renewal is failing, else -1 (Java's `Renewal.ofMillis`).
pub(crate) fn left_ms(r: etcdlock::Renewal) -> jlong {
    match r {
        etcdlock::Renewal::Failing { valid_until } => valid_until
            .saturating_duration_since(std::time::Instant::now())
            .as_millis() as jlong,
        etcdlock::Renewal::Ok => -1,
    }
}

/// `static native void watchRenewal(long guard, long id, boolean failing)`: once the
/// renewal's state differs from `failing`, `NativeBridge.complete(id, 0, ms, 0, 0, null)`
/// runs on a runtime thread with `ms` as `guardInfo(guard, 4)` gives it (-1: renewed
/// again); -2 when the hold ends first. Java re-arms it with the state it saw, so no
/// change is missed between two watches.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_watchRenewal<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    guard: jlong,
    id: jlong,
    failing: jboolean,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            let g = borrow_guard(guard)?;
            let mut ended = g.lost_signal();
            spawn_renewal_watch(id, g.renewal_changes(), failing, async move {
                ended.wait().await;
            })
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void freeGuard(long guard)`: drop the Java side's reference;
/// a guard still held is released in the background (a leader term's is left
/// to its loop, which resigns when the term ends).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_freeGuard<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    guard: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            // A leader term's hold: the loop resigns it when the term ends.
            if free::<etcdlock::Term>(guard).is_some() {
                return Ok(());
            }
            if let Some(g) = free::<Guard>(guard) {
                if g.is_held() {
                    // Loss watchers may keep other references alive; release explicitly.
                    let rt = etcdlock::runtime::runtime()?;
                    rt.spawn(async move {
                        let _ = g.unlock().await;
                    });
                }
            }
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}
