//! Native methods of `io.etcdlock.MemStore`: core's fault controls of an
//! in-process store (`etcdlock::MemStore`), reached by the store's name.
//!
//! Java holds no native object for a store: every call opens it by name
//! again (a map lookup in core), so a `MemStore` needs no closing and can
//! never dangle. Each call is a quick, non-blocking step on the store.

use crate::prelude::*;

use etcdlock::MemStore;

fn open(env: &Env<'_>, name: &JString<'_>) -> NResult<MemStore> {
    let name = req_string(env, name, "store name")?;
    Ok(MemStore::open(&name)?)
}

/// A Java `Duration` as nanoseconds (a double: a negative or over-long one
/// reaches core, whose one rule for spans refuses it).
fn span(what: &str, nanos: jdouble) -> NResult<Duration> {
    Ok(bridge::span(what, nanos, bridge::Unit::Nanos)?)
}

/// `static native String memOpen(String name)`: open (start if needed) the store `mem://NAME`;
/// its name as core has it (`InvalidArgument` for a bad one).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_memOpen<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    name: JString<'local>,
) -> JString<'local> {
    unowned
        .with_env(|env| -> NResult<JString<'local>> {
            let st = open(env, &name)?;
            Ok(JString::from_str(env, st.name())?)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native boolean memExpireLease(String name, long lease)`: core's `expire_lease`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_memExpireLease<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    name: JString<'local>,
    lease: jlong,
) -> jboolean {
    unowned
        .with_env(|env| -> NResult<jboolean> { Ok(open(env, &name)?.expire_lease(lease)) })
        .resolve::<ThrowEtcdLock>()
}

/// `static native boolean memDeleteKey(String name, byte[] key)`: core's `delete_key`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_memDeleteKey<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    name: JString<'local>,
    key: JByteArray<'local>,
) -> jboolean {
    unowned
        .with_env(|env| -> NResult<jboolean> {
            let st = open(env, &name)?;
            let key = req_bytes(env, &key, "key")?;
            Ok(st.delete_key(key))
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void memSilence(String name, double nanos)`: core's `silence`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_memSilence<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    name: JString<'local>,
    nanos: jdouble,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let st = open(env, &name)?;
            st.silence(span("silence", nanos)?);
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void memStall(String name, long lease, double nanos)`: core's `stall`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_memStall<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    name: JString<'local>,
    lease: jlong,
    nanos: jdouble,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let st = open(env, &name)?;
            st.stall(lease, span("stall", nanos)?);
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void memResume(String name)`: core's `resume`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_memResume<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    name: JString<'local>,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            open(env, &name)?.resume();
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native Object[] memKeys(String name, byte[] prefix)`: core's `keys`, each a
/// `MemKey` built by `NativeBridge.memKey(byte[] key, byte[] value, long lease, long
/// createRevision, long modRevision)`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_memKeys<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    name: JString<'local>,
    prefix: JByteArray<'local>,
) -> JObjectArray<'local> {
    unowned
        .with_env(|env| -> NResult<JObjectArray<'local>> {
            let st = open(env, &name)?;
            let prefix = req_bytes(env, &prefix, "prefix")?;
            let keys = st.keys(prefix);
            let bridge = BRIDGE
                .get()
                .ok_or_else(|| Error::new(ErrorCode::Internal, "the bridge is not initialised"))?;
            let out = env.new_object_array(
                keys.len() as i32,
                jni_str!("java/lang/Object"),
                JObject::null(),
            )?;
            for (i, k) in keys.iter().enumerate() {
                let key = env.byte_array_from_slice(&k.key)?;
                let value = env.byte_array_from_slice(&k.value)?;
                let obj = env
                    .call_static_method(
                        &bridge.class,
                        jni_str!("memKey"),
                        jni_sig!("([B[BJJJ)Lio/etcdlock/MemKey;"),
                        &[
                            JValue::Object(&key),
                            JValue::Object(&value),
                            JValue::Long(k.lease),
                            JValue::Long(k.create_revision),
                            JValue::Long(k.mod_revision),
                        ],
                    )?
                    .l()?;
                out.set_element(env, i, &obj)?;
                // A long listing must not run out of local references.
                env.delete_local_ref(obj);
                env.delete_local_ref(key);
                env.delete_local_ref(value);
            }
            Ok(out)
        })
        .resolve::<ThrowEtcdLock>()
}
