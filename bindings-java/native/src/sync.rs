//! Native methods for count-down latches and barriers (`EtcdLatch`,
//! `EtcdBarrier`): open, count, close and free run on the calling thread (each
//! bounded by the request timeout); the waits run on the runtime and complete
//! a Java future through `NativeBridge.complete`, so the Java caller parks in
//! Java (a virtual thread unmounts) as lock waits do.

use crate::prelude::*;
use etcdlock::poison::Locked;

use etcdlock::{Barrier, Latch};

/// A Java count as core's: a negative one is `InvalidArgument` with core's
/// message for an out-of-range count.
fn count_of(what: &str, n: jlong) -> NResult<u64> {
    u64::try_from(n).map_err(|_| {
        invalid(format!(
            "{what} must be between 1 and {}, got {n}",
            etcdlock::MAX_SYNC_COUNT
        ))
    })
}

/// Run `wait` on the runtime, cancellable through `cancelAsync(id)`, and
/// report its value (or error) with `NativeBridge.complete(id, 0, value, ...)`.
fn spawn_wait<F>(id: jlong, what: String, wait: F) -> NResult<()>
where
    F: Future<Output = etcdlock::Result<jlong>> + Send + 'static,
{
    let token = CancellationToken::new();
    async_tokens().locked().insert(id, token.clone());
    spawn_value(id, async move {
        tokio::select! {
            biased;
            _ = token.cancelled() => Err(Error::new(ErrorCode::Cancelled, format!("{what}: the wait was cancelled"))),
            r = wait => r,
        }
    })
}

/// `static native long latchOpen(long client, String name, long count)`: core's
/// `Client::latch`; a latch handle.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_latchOpen<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    count: jlong,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "latch name")?;
            let count = count_of("count", count)?;
            let l = block(env, async move { c.latch(&name, count).await }, None)?;
            Ok(into_handle(Arc::new(l)))
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long latchCountDown(long latch)`: count down; the count after.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_latchCountDown<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    latch: jlong,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            let l = borrow::<Latch>(latch, "latch")?;
            let n = block(env, async move { l.count_down().await }, None)?;
            Ok(n as jlong)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long latchCount(long latch)`: the count now (one read).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_latchCount<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    latch: jlong,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            let l = borrow::<Latch>(latch, "latch")?;
            let n = block(env, async move { l.count().await }, None)?;
            Ok(n as jlong)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void latchWaitAsync(long latch, long timeoutMs, long id)`: wait for
/// zero on the runtime (`timeoutMs < 0`: no limit); completes `id` with value 0.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_latchWaitAsync<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    latch: jlong,
    timeout_ms: jlong,
    id: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            let l = borrow::<Latch>(latch, "latch")?;
            let timeout = bridge::opt_timeout(
                "timeout",
                (timeout_ms >= 0).then_some(timeout_ms as f64),
                bridge::Unit::Millis,
            )?;
            let what = format!("latch {:?}", l.name());
            spawn_wait(id, what, async move { l.wait(timeout).await.map(|()| 0) })
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void latchClose(long latch)`: stop renewing the latch's lease
/// from this handle (idempotent).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_latchClose<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    latch: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            let l = borrow::<Latch>(latch, "latch")?;
            l.close();
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void freeLatch(long latch)`: drop the Java side's reference
/// (the last one closes the latch).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_freeLatch<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    latch: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            drop(free::<Latch>(latch));
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long barrierOpen(long client, String name, int parties)`: core's
/// `Client::barrier`; a barrier handle.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_barrierOpen<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    parties: jint,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "barrier name")?;
            let parties = u32::try_from(parties).map_err(|_| {
                invalid(format!(
                    "parties must be between 1 and {}, got {parties}",
                    etcdlock::MAX_SYNC_COUNT
                ))
            })?;
            let b = block(env, async move { c.barrier(&name, parties).await }, None)?;
            Ok(into_handle(Arc::new(b)))
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void barrierWaitAsync(long barrier, long timeoutMs, long id)`: arrive
/// and wait on the runtime (`timeoutMs < 0`: no limit); completes `id` with the
/// arrival index as its value.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_barrierWaitAsync<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    barrier: jlong,
    timeout_ms: jlong,
    id: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            let b = borrow::<Barrier>(barrier, "barrier")?;
            let timeout = bridge::opt_timeout(
                "timeout",
                (timeout_ms >= 0).then_some(timeout_ms as f64),
                bridge::Unit::Millis,
            )?;
            let what = format!("barrier {:?}", b.name());
            spawn_wait(
                id,
                what,
                async move { b.wait(timeout).await.map(jlong::from) },
            )
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void barrierClose(long barrier)`: stop renewing the barrier's
/// lease from this handle (idempotent).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_barrierClose<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    barrier: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            let b = borrow::<Barrier>(barrier, "barrier")?;
            b.close();
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void freeBarrier(long barrier)`: drop the Java side's reference
/// (the last one closes the barrier).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_freeBarrier<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    barrier: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            drop(free::<Barrier>(barrier));
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}
