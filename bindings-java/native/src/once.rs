//! Native methods for run-once records (core's `once_*`, the record Java's
//! ShedLock provider keeps). A hold crosses as `long[3]` {revision,
//! lockedAtMs, lockUntilMs}; times are ms since the epoch from the caller's
//! clock (ShedLock's `ClockProvider`).

use crate::prelude::*;

use etcdlock::OnceHold;

fn hold_array<'local>(env: &mut Env<'local>, h: Option<OnceHold>) -> NResult<JLongArray<'local>> {
    match h {
        None => Ok(JLongArray::default()),
        Some(h) => {
            let arr = env.new_long_array(3)?;
            arr.set_region(
                env,
                0,
                &[
                    h.record.revision,
                    h.record.locked_at_ms,
                    h.record.lock_until_ms,
                ],
            )?;
            Ok(arr)
        }
    }
}

/// `static native long[] onceTake(long client, String name, long nowMs, long lockUntilMs)`:
/// the hold, or null if the job is taken.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_onceTake<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    now_ms: jlong,
    until_ms: jlong,
) -> JLongArray<'local> {
    unowned
        .with_env(|env| -> NResult<JLongArray<'local>> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "job name")?;
            let h = block(
                env,
                async move { c.once_take_at(&name, now_ms, until_ms).await },
                None,
            )?;
            hold_array(env, h)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native boolean onceFinish(long client, String name, long revision, long lockedAtMs,
/// long lockUntilMs, long nowMs, long atLeastUntilMs)`: false if the hold is no longer ours.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_onceFinish<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    revision: jlong,
    locked_at_ms: jlong,
    lock_until_ms: jlong,
    now_ms: jlong,
    at_least_until_ms: jlong,
) -> jboolean {
    unowned
        .with_env(|env| -> NResult<jboolean> {
            let c = borrow::<Client>(client, "client")?;
            let h = OnceHold::mine(
                &req_string(env, &name, "job name")?,
                revision,
                locked_at_ms,
                lock_until_ms,
            );
            block(
                env,
                async move { c.once_finish_at(&h, now_ms, at_least_until_ms).await },
                None,
            )
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long[] onceExtend(long client, String name, long revision, long lockedAtMs,
/// long lockUntilMs, long nowMs, long newLockUntilMs)`: the new hold, or null.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_onceExtend<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    revision: jlong,
    locked_at_ms: jlong,
    lock_until_ms: jlong,
    now_ms: jlong,
    until_ms: jlong,
) -> JLongArray<'local> {
    unowned
        .with_env(|env| -> NResult<JLongArray<'local>> {
            let c = borrow::<Client>(client, "client")?;
            let h = OnceHold::mine(
                &req_string(env, &name, "job name")?,
                revision,
                locked_at_ms,
                lock_until_ms,
            );
            let n = block(
                env,
                async move { c.once_extend_at(&h, now_ms, until_ms).await },
                None,
            )?;
            hold_array(env, n)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long[] onceRecord(long client, String name)`: the job's record as
/// {revision, lockedAtMs, lockUntilMs}, or null if there is none.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_onceRecord<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
) -> JLongArray<'local> {
    unowned
        .with_env(|env| -> NResult<JLongArray<'local>> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "job name")?;
            let n = name.clone();
            let r = block(env, async move { c.once_record(&n).await }, None)?;
            hold_array(env, r.map(|record| OnceHold { name, record }))
        })
        .resolve::<ThrowEtcdLock>()
}
