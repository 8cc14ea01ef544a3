//! Native methods for the recipes (semaphore, read-write lock, election,
//! multi-lock, observe).

use crate::prelude::*;
use etcdlock::poison::Locked;

// ---------------------------------------------------------------------------
// Recipes. A leader travels as its records JSON (`etcdlock::records`, decoded
// by `Records.java`); a multi-lock's keys as one byte[] in a simple big-endian
// encoding that `RecipeCodec.java` reads: an i32 count, then each key as i32
// length + UTF-8 bytes.

pub(crate) struct Enc(pub(crate) Vec<u8>);

impl Enc {
    pub(crate) fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.i32(i32::try_from(b.len()).unwrap_or(i32::MAX));
        self.0.extend_from_slice(b);
        self
    }
}

/// A leader for Java: its records JSON, or null when nobody leads.
pub(crate) fn leader_json<'local>(
    env: &mut Env<'local>,
    leader: Option<&etcdlock::Leader>,
) -> jni::errors::Result<JString<'local>> {
    Ok(match leader {
        Some(l) => env.new_string(etcdlock::records::to_json(l))?,
        None => JString::default(),
    })
}

/// Start one recipe acquisition on the runtime, cancellable by `cancelAsync(id)`;
/// it completes as `lockAsync` does. `timeout_ms < 0`: no limit.
fn start<H, F>(
    id: jlong,
    timeout_ms: jlong,
    extras: bridge::Extras,
    acquire: impl FnOnce(LockOptions) -> F,
) -> NResult<()>
where
    H: std::any::Any + Send + Sync,
    F: Future<Output = etcdlock::Result<H>> + Send + 'static,
{
    let token = CancellationToken::new();
    let opts = acquire_opts(timeout_ms, extras, Some(token.clone()))?;
    async_tokens().locked().insert(id, token);
    spawn_hold(id, acquire(opts))
}

/// `static native void permitAsync(long client, String name, int permits, long timeoutMs,
/// AcquireOptions options, long id)`: a permit of a `permits` semaphore.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_permitAsync<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    permits: jint,
    timeout_ms: jlong,
    options: JObject<'local>,
    id: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let c = borrow::<Client>(client, "client")?;
            let extras = options_extras(env, &options)?;
            let name = opt_string(env, &name)?.unwrap_or_default();
            let permits = u32::try_from(permits).map_err(|_| {
                invalid(format!(
                    "permits must be between 1 and {}, got {permits}",
                    etcdlock::MAX_PERMITS
                ))
            })?;
            start(id, timeout_ms, extras, |opts| async move {
                c.acquire_permit(&name, permits, opts).await
            })
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void readLockAsync(long client, String name, long timeoutMs,
/// AcquireOptions options, long id)`: the read side of a read-write lock.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_readLockAsync<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    timeout_ms: jlong,
    options: JObject<'local>,
    id: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let c = borrow::<Client>(client, "client")?;
            let extras = options_extras(env, &options)?;
            let name = opt_string(env, &name)?.unwrap_or_default();
            start(id, timeout_ms, extras, |opts| async move {
                c.read_lock(&name, opts).await
            })
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void campaignAsync(long client, String name, byte[] value, long timeoutMs,
/// AcquireOptions options, long id)`: campaign with `value` (null: empty); the handle is the
/// leadership's guard.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_campaignAsync<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    value: JByteArray<'local>,
    timeout_ms: jlong,
    options: JObject<'local>,
    id: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let c = borrow::<Client>(client, "client")?;
            let extras = options_extras(env, &options)?;
            let name = opt_string(env, &name)?.unwrap_or_default();
            let value = if value.is_null() {
                Vec::new()
            } else {
                env.convert_byte_array(&value)?
            };
            start(id, timeout_ms, extras, |opts| async move {
                c.campaign(&name, value, opts).await.map(|l| l.into_guard())
            })
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void lockManyAsync(long client, String[] names, long timeoutMs, long id)`:
/// lock every name (the handle is a multi-lock).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_lockManyAsync<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    names: JObjectArray<'local, JString<'local>>,
    timeout_ms: jlong,
    id: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let c = borrow::<Client>(client, "client")?;
            let names = req_strings(env, &names, "lock name")?;
            let extras = options_extras(env, &JObject::null())?;
            start(id, timeout_ms, extras, |opts| async move {
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                c.lock_many(&refs, opts).await
            })
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void proclaim(long guard, byte[] value)`: replace our key's value while held.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_proclaim<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    guard: jlong,
    value: JByteArray<'local>,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let g = crate::guard::borrow_guard(guard)?;
            let v = req_bytes(env, &value, "value")?;
            block(env, async move { g.set_value(v).await }, None)
        })
        .resolve::<ThrowEtcdLock>()
}

/// Call `NativeBridge.observed(long id, int code, int reason, boolean retryable, String leader, String msg)`
/// on a runtime thread (`leader`: its records JSON, null for none).
pub(crate) fn observed(id: jlong, leader: Option<&etcdlock::Leader>, err: Option<&Error>) -> bool {
    with_bridge(|env, bridge| {
        let json = JObject::from(leader_json(env, leader)?);
        let (code, reason, retryable, msg) = match err.map(wire) {
            Some((c, r, retry, m)) => (c, r, retry, JObject::from(JString::from_str(env, m)?)),
            None => (0, 0, false, JObject::null()),
        };
        env.call_static_method(
            &bridge.class,
            jni_str!("observed"),
            jni_sig!("(JIIZLjava/lang/String;Ljava/lang/String;)V"),
            &[
                JValue::Long(id),
                JValue::Int(code),
                JValue::Int(reason),
                JValue::Bool(retryable),
                JValue::Object(&json),
                JValue::Object(&msg),
            ],
        )?;
        Ok(())
    })
}

/// `static native void observe(long client, String name, long id)`: report each
/// leadership state of `name` (the current one first; null = no leader) through
/// `NativeBridge.observed(id, 0, leader, null)` until `cancelAsync(id)` or an error,
/// which ends with one last call carrying the error code (Cancelled after cancelAsync).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_observe<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    id: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let c = borrow::<Client>(client, "client")?;
            let name = req_string(env, &name, "election name")?;
            let mut obs = c.observe(&name)?;
            let token = CancellationToken::new();
            async_tokens().locked().insert(id, token.clone());
            let rt = etcdlock::runtime::runtime()?;
            rt.spawn(async move {
                loop {
                    let next = tokio::select! {
                        biased;
                        _ = token.cancelled() => Err(Error::new(ErrorCode::Cancelled, "observe: cancelled")),
                        r = obs.next() => r,
                    };
                    match next {
                        Ok(l) => {
                            if !observed(id, l.as_ref(), None) {
                                break;
                            }
                        }
                        Err(e) => {
                            observed(id, None, Some(&e));
                            break;
                        }
                    }
                }
                async_tokens().locked().remove(&id);
            });
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native byte[] multiKeys(long multi)`: i32 count, then each key.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_multiKeys<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    multi: jlong,
) -> JByteArray<'local> {
    unowned
        .with_env(|env| -> NResult<JByteArray<'local>> {
            let m = borrow::<MultiGuard>(multi, "multi-lock")?;
            let mut e = Enc(Vec::new());
            e.i32(m.guards().len() as i32);
            for g in m.guards() {
                e.bytes(g.key().as_bytes());
            }
            Ok(env.byte_array_from_slice(&e.0)?)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long multiInfo(long multi, int what)`: 0 = fencing token, 1 = is held (0/1),
/// 2 = index of the first lock lost (-1: none), 3 = its loss reason code (0: none), 4 = ms
/// of validity left while the renewal is failing and every lock is held (-1: renewing).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_multiInfo<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    multi: jlong,
    what: jint,
) -> jlong {
    unowned
        .with_env(|_env| -> NResult<jlong> {
            let m = borrow::<MultiGuard>(multi, "multi-lock")?;
            let lost = m
                .guards()
                .iter()
                .enumerate()
                .find_map(|(i, g)| g.loss().map(|l| (i as jlong, l.reason as jlong)));
            Ok(match what {
                0 => m.guards().first().map(|g| g.fencing_token()).unwrap_or(0),
                1 => m.is_held() as jlong,
                2 => lost.map_or(-1, |l| l.0),
                3 => lost.map_or(0, |l| l.1),
                4 if m.is_held() => crate::guard::left_ms(m.renewal()),
                4 => -1,
                _ => return Err(invalid(format!("unknown multi-lock field {what}"))),
            })
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void multiPut(long multi, byte[] key, byte[] value)`: put
/// guarded by every lock of the multi-lock.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_multiPut<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    multi: jlong,
    key: JByteArray<'local>,
    value: JByteArray<'local>,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let m = borrow::<MultiGuard>(multi, "multi-lock")?;
            let (k, v) = (
                req_bytes(env, &key, "key")?,
                req_bytes(env, &value, "value")?,
            );
            block(env, async move { m.put(k, v).await }, None)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native byte[] multiGet(long multi, byte[] key)`: get guarded by
/// every lock, null if absent.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_multiGet<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    multi: jlong,
    key: JByteArray<'local>,
) -> JByteArray<'local> {
    unowned
        .with_env(|env| -> NResult<JByteArray<'local>> {
            let m = borrow::<MultiGuard>(multi, "multi-lock")?;
            let k = req_bytes(env, &key, "key")?;
            match block(env, async move { m.get(k).await }, None)? {
                Some(v) => Ok(env.byte_array_from_slice(&v)?),
                None => Ok(JByteArray::default()),
            }
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native boolean multiDelete(long multi, byte[] key)`: delete
/// guarded by every lock.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_multiDelete<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    multi: jlong,
    key: JByteArray<'local>,
) -> jboolean {
    unowned
        .with_env(|env| -> NResult<jboolean> {
            let m = borrow::<MultiGuard>(multi, "multi-lock")?;
            let k = req_bytes(env, &key, "key")?;
            block(env, async move { m.delete(k).await }, None)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void multiUnlock(long multi)`: release every lock.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_multiUnlock<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    multi: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let m = borrow::<MultiGuard>(multi, "multi-lock")?;
            if tokio::runtime::Handle::try_current().is_ok() {
                etcdlock::runtime::spawn(async move {
                    let _ = m.unlock().await;
                })?;
                return Ok(());
            }
            block(env, async move { m.unlock().await }, None)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void freeMulti(long multi)`: drop the Java side's reference;
/// locks still held are released in the background.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_freeMulti<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    multi: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            if let Some(m) = free::<MultiGuard>(multi) {
                if m.guards().iter().any(Guard::is_held) {
                    let rt = etcdlock::runtime::runtime()?;
                    rt.spawn(async move {
                        let _ = m.unlock().await;
                    });
                }
            }
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}
