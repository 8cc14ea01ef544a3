//! Native methods that read etcd: leader, status, list; and release by token.

use crate::prelude::*;

use crate::recipes::{encode_leader, Enc};

/// `static native byte[] leader(long client, String name)`: the encoded leader
/// (key, value, revision, lease), or null when nobody leads.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_leader<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
) -> JByteArray<'local> {
    unowned
        .with_env(|env| -> NResult<JByteArray<'local>> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "election name")?;
            match block(env, async move { c.leader(&name).await }, None)? {
                Some(l) => {
                    let mut e = Enc(Vec::new());
                    encode_leader(&mut e, &l);
                    Ok(env.byte_array_from_slice(&e.0)?)
                }
                None => Ok(JByteArray::default()),
            }
        })
        .resolve::<ThrowEtcdLock>()
}

/// One name's status: i64 revision, i32 lock kind (-1 unknown, 0 mutex, 1
/// election, 2 semaphore, 3 rwlock), i32 count, then per contender: key, i32
/// kind (0 exclusive, 1 reader, 2 permit), i32 permits, i32 holds, i64 lease,
/// i64 ttl (-1 unknown), i64 token, owner (absent: -1), i64 age ms (-1
/// unknown), value, host, i32 pid (-1), language, i32 local waiters (-1), i32
/// foreign, i32 metadata pairs then each key and value. Holders first, in queue order.
pub(crate) fn encode_status(e: &mut Enc, st: &etcdlock::Status) {
    let kind = match st.kind {
        None => -1,
        Some(etcdlock::LockKind::Mutex) => 0,
        Some(etcdlock::LockKind::Election) => 1,
        Some(etcdlock::LockKind::Semaphore) => 2,
        Some(etcdlock::LockKind::RwLock) => 3,
    };
    e.i64(st.revision)
        .i32(kind)
        .i32((st.holders.len() + st.waiters.len()) as i32);
    for x in st.holders.iter().chain(st.waiters.iter()) {
        let (kind, permits) = match x.kind {
            etcdlock::ContenderKind::Exclusive => (0, 1),
            etcdlock::ContenderKind::Reader => (1, 1),
            etcdlock::ContenderKind::Permit(n) => (2, n as i32),
        };
        e.bytes(Some(x.key.as_bytes()))
            .i32(kind)
            .i32(permits)
            .i32(x.holds as i32)
            .i64(x.lease_id);
        e.i64(x.ttl_remaining.unwrap_or(-1))
            .i64(x.create_revision)
            .bytes(x.owner.as_deref().map(str::as_bytes));
        e.i64(x.age_ms.map_or(-1, |a| a as i64))
            .bytes(Some(&x.value));
        e.bytes(x.host.as_deref().map(str::as_bytes))
            .i32(x.pid.map_or(-1, |p| p as i32));
        e.bytes(x.language.as_deref().map(str::as_bytes))
            .i32(x.local_waiters.map_or(-1, |n| n as i32))
            .i32(x.foreign as i32);
        e.i32(x.metadata.len() as i32);
        for (k, v) in &x.metadata {
            e.bytes(Some(k.as_bytes())).bytes(Some(v.as_bytes()));
        }
    }
}

/// `static native byte[] status(long client, String name)`: [`encode_status`].
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_status<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
) -> JByteArray<'local> {
    unowned
        .with_env(|env| -> NResult<JByteArray<'local>> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "lock name")?;
            let st = block(env, async move { c.status(&name).await }, None)?;
            let mut e = Enc(Vec::new());
            encode_status(&mut e, &st);
            Ok(env.byte_array_from_slice(&e.0)?)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native byte[] list(long client, String prefix)`: i32 count, then
/// per name: the name, [`encode_status`].
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_list<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    prefix: JString<'local>,
) -> JByteArray<'local> {
    unowned
        .with_env(|env| -> NResult<JByteArray<'local>> {
            let c = borrow::<Client>(client, "client")?;
            let prefix = req_string(env, &prefix, "prefix")?;
            let l = block(env, async move { c.list(&prefix).await }, None)?;
            let mut e = Enc(Vec::new());
            e.i32(l.len() as i32);
            for st in &l {
                e.bytes(Some(st.name.as_bytes()));
                encode_status(&mut e, st);
            }
            Ok(env.byte_array_from_slice(&e.0)?)
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
