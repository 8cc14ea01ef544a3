//! Native methods that read etcd: leader, status, list, deadlocks, history;
//! and release by token.

use crate::prelude::*;

use crate::recipes::leader_json;

/// `static native String leader(long client, String name)`: the leader's
/// records JSON ([`etcdlock::records::to_json`]), or null when nobody leads.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_leader<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
) -> JString<'local> {
    unowned
        .with_env(|env| -> NResult<JString<'local>> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "election name")?;
            let l = block(env, async move { c.leader(&name).await }, None)?;
            Ok(leader_json(env, l.as_ref())?)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native String status(long client, String name)`: the name's
/// [`etcdlock::Status`] as its records JSON ([`etcdlock::records::to_json`]).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_status<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
) -> JString<'local> {
    unowned
        .with_env(|env| -> NResult<JString<'local>> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "lock name")?;
            let st = block(env, async move { c.status(&name).await }, None)?;
            Ok(env.new_string(etcdlock::records::to_json(&st))?)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native String list(long client, String prefix)`: the status of
/// every name under the prefix, as one records JSON array
/// ([`etcdlock::records::list_to_json`]).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_list<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    prefix: JString<'local>,
) -> JString<'local> {
    unowned
        .with_env(|env| -> NResult<JString<'local>> {
            let c = borrow::<Client>(client, "client")?;
            let prefix = req_string(env, &prefix, "prefix")?;
            let l = block(env, async move { c.list(&prefix).await }, None)?;
            Ok(env.new_string(etcdlock::records::list_to_json(&l))?)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native String deadlocks(long client, String prefix)`: the cycles of
/// clients waiting on each other under the prefix ([`etcdlock::records::Deadlocks`]),
/// as its records JSON.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_deadlocks<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    prefix: JString<'local>,
) -> JString<'local> {
    unowned
        .with_env(|env| -> NResult<JString<'local>> {
            let c = borrow::<Client>(client, "client")?;
            let prefix = req_string(env, &prefix, "prefix")?;
            let d = block(env, async move { c.deadlocks(&prefix).await }, None)?;
            Ok(env.new_string(etcdlock::records::to_json(&d))?)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native String history(long client, String name, double sinceMs)`: the
/// name's history from etcd's MVCC history ([`etcdlock::records::History`]) as its
/// records JSON; `sinceMs` NaN: as far back as etcd keeps (else core's rule of a
/// wait's span: negative is `InvalidArgument`, beyond a century is all).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_history<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    since_ms: jdouble,
) -> JString<'local> {
    unowned
        .with_env(|env| -> NResult<JString<'local>> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "lock name")?;
            let since = if since_ms.is_nan() {
                None
            } else {
                bridge::timeout("since", since_ms, bridge::Unit::Millis)?
            };
            let h = block(env, async move { c.history(&name, since).await }, None)?;
            Ok(env.new_string(etcdlock::records::to_json(&h))?)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native boolean release(long client, String name, long token)`: core's `release`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_release<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    token: jlong,
) -> jboolean {
    unowned
        .with_env(|env| -> NResult<jboolean> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "lock name")?;
            block(env, async move { c.release(&name, token).await }, None)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native boolean releasePermit(long client, String name, long id)`: core's
/// `release_permit` (the permit's id is its fencing token).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_releasePermit<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    id: jlong,
) -> jboolean {
    unowned
        .with_env(|env| -> NResult<jboolean> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "semaphore name")?;
            block(env, async move { c.release_permit(&name, id).await }, None)
        })
        .resolve::<ThrowEtcdLock>()
}
