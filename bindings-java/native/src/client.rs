//! Native methods of `NativeBridge` for the client: connect, metrics,
//! ping, close, lock, lock-async (plain, or reentrant for an owner).

use crate::prelude::*;
use etcdlock::poison::Locked;

/// `static native long connect(String[] options)`: core option keys and
/// values, alternating (`"ttl", "15", "request_timeout", "2000ms", ...`);
/// core's one rule fills what is not given from the `ETCDLOCK_*` environment
/// and checks every value.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_connect<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    options: JObjectArray<'local, JString<'local>>,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            if options.is_null() {
                return Err(invalid("options must not be null"));
            }
            let n = options.len(env)?;
            let mut items = Vec::with_capacity(n);
            for i in 0..n {
                let s = options.get_element(env, i)?;
                items.push(req_string(env, &s, "an option")?);
            }
            if items.len() % 2 != 0 {
                return Err(invalid("options come as key, value pairs"));
            }
            let pairs: Vec<(&str, &str)> = items
                .chunks(2)
                .map(|p| (p[0].as_str(), p[1].as_str()))
                .collect();
            let opts = bridge::client_options(pairs)?;
            etcdlock::set_language("java");
            let client = block(env, async move { Client::connect(opts).await }, None)?;
            Ok(into_handle(Arc::new(client)))
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native String metrics(long client)`: core's metrics snapshot
/// ([`etcdlock::Metrics`]) as its records JSON ([`etcdlock::records::to_json`]).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_metrics<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
) -> JString<'local> {
    unowned
        .with_env(|env| -> NResult<JString<'local>> {
            let c = borrow::<Client>(client, "client")?;
            Ok(env.new_string(etcdlock::records::to_json(&c.metrics()))?)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long ping(long client)`: core's health check; its round trip in ns.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_ping<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            let c = borrow::<Client>(client, "client")?;
            let d = block(env, async move { c.ping().await }, None)?;
            Ok(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native String endpoints(long client)`: the endpoints in use, as configured.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_endpoints<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
) -> JString<'local> {
    unowned
        .with_env(|env| -> NResult<JString<'local>> {
            let c = borrow::<Client>(client, "client")?;
            Ok(env.new_string(c.endpoints())?)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long ttl(long client)`: the effective TTL in seconds.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_ttl<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
) -> jlong {
    unowned
        .with_env(|_env| -> NResult<jlong> {
            let c = borrow::<Client>(client, "client")?;
            Ok(c.ttl())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void close(long client)`: revoke the lease, end every hold and wait.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_close<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let c = borrow::<Client>(client, "client")?;
            block(
                env,
                async move {
                    c.close().await;
                    Ok(())
                },
                None,
            )
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void freeClient(long client)`: drop the Java side's reference.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_freeClient<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            if let Some(c) = free::<Client>(client) {
                if !c.is_closed() {
                    // Closing needs the runtime; do it there so a free never blocks.
                    if let Ok(rt) = etcdlock::runtime::runtime() {
                        rt.spawn(async move { c.close().await });
                    }
                }
            }
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `lock_with`, or `lock_reentrant` for `owner` when one is given (the
/// `lockReentrant*` entries: `EtcdLock`'s per-thread holds).
async fn lock_as(
    c: Arc<Client>,
    name: String,
    owner: Option<u64>,
    opts: LockOptions,
) -> etcdlock::Result<Guard> {
    match owner {
        Some(o) => c.lock_reentrant(&name, o, opts).await,
        None => c.lock_with(&name, opts).await,
    }
}

/// The arguments of `lock`, `lockAsync` and their reentrant forms, as Java
/// passed them (`owner`: the reentrant forms' owner).
struct LockArgs<'a, 'l> {
    client: jlong,
    name: &'a JString<'l>,
    owner: Option<u64>,
    timeout_ms: jlong,
    lock_delay_ms: jdouble,
    lease_time_ms: jdouble,
    metadata: &'a JObjectArray<'l, JString<'l>>,
    detect_deadlock: jboolean,
}

impl LockArgs<'_, '_> {
    /// Converted: the client, the name and the options (`cancel`: the
    /// async forms' token).
    fn convert(
        &self,
        env: &mut Env<'_>,
        cancel: Option<CancellationToken>,
    ) -> NResult<(Arc<Client>, String, LockOptions)> {
        let c = borrow::<Client>(self.client, "client")?;
        let name = req_string(env, self.name, "lock name")?;
        let mut extras = extras(env, self.lock_delay_ms, self.lease_time_ms, self.metadata)?;
        extras.detect_deadlock = self.detect_deadlock;
        let opts = acquire_opts(self.timeout_ms, extras, cancel)?;
        Ok((c, name, opts))
    }

    /// The body of `lock` and `lockReentrant`: the lock waited for on this
    /// thread; a guard handle.
    fn here(&self, env: &mut Env<'_>) -> NResult<jlong> {
        let (c, name, opts) = self.convert(env, None)?;
        let g = block(env, lock_as(c, name, self.owner, opts), None)?;
        Ok(into_handle(Arc::new(g)))
    }

    /// The body of `lockAsync` and `lockReentrantAsync`: the lock started
    /// here and reported on the runtime.
    fn started(&self, env: &mut Env<'_>, id: jlong) -> NResult<()> {
        let token = CancellationToken::new();
        let (c, name, opts) = self.convert(env, Some(token.clone()))?;
        async_tokens().locked().insert(id, token);
        // Started on this thread (the lock's Txn leaves from here), finished
        // and reported on the runtime.
        spawn_hold(id, lock_as(c, name, self.owner, opts))
    }
}

/// `static native long lock(long client, String name, long timeoutMs, double lockDelayMs,
/// double leaseTimeMs, String[] metadata, boolean detectDeadlock)`: wait for the lock on this (platform) thread,
/// uninterruptibly; `timeoutMs < 0` waits without bound. Returns a guard handle.
///
/// The lock's future runs on the calling thread, which the runtime worker that
/// reads etcd's answer unparks directly: one thread wake-up per call, as C's
/// blocking calls. `lockAsync` instead finishes on the runtime and completes a
/// Java future through an upcall (`NativeBridge.complete`), which then unparks the
/// caller. Java uses this for `lock()`/`acquire()` on platform threads; a virtual
/// thread must not block here (it would pin its carrier) and takes `lockAsync`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_lock<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    timeout_ms: jlong,
    lock_delay_ms: jdouble,
    lease_time_ms: jdouble,
    metadata: JObjectArray<'local, JString<'local>>,
    detect_deadlock: jboolean,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            LockArgs {
                client,
                name: &name,
                owner: None,
                timeout_ms,
                lock_delay_ms,
                lease_time_ms,
                metadata: &metadata,
                detect_deadlock,
            }
            .here(env)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long lockReentrant(long client, String name, long owner, long timeoutMs,
/// double lockDelayMs, double leaseTimeMs, String[] metadata, boolean detectDeadlock)`: `lock`, reentrant for
/// `owner` (core's `lock_reentrant`: another handle of `owner`'s hold at once, or
/// `LockLost` if that hold was lost).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_lockReentrant<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    owner: jlong,
    timeout_ms: jlong,
    lock_delay_ms: jdouble,
    lease_time_ms: jdouble,
    metadata: JObjectArray<'local, JString<'local>>,
    detect_deadlock: jboolean,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            LockArgs {
                client,
                name: &name,
                owner: Some(owner as u64),
                timeout_ms,
                lock_delay_ms,
                lease_time_ms,
                metadata: &metadata,
                detect_deadlock,
            }
            .here(env)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void lockAsync(long client, String name, long timeoutMs, double lockDelayMs,
/// double leaseTimeMs, String[] metadata, boolean detectDeadlock, long id)`: start acquiring on the runtime (extras as
/// [`extras`] reads them); `NativeBridge.complete(id, guardHandle, 0, code, reason, msg)`
/// reports the outcome from a runtime thread.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_lockAsync<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    timeout_ms: jlong,
    lock_delay_ms: jdouble,
    lease_time_ms: jdouble,
    metadata: JObjectArray<'local, JString<'local>>,
    detect_deadlock: jboolean,
    id: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            LockArgs {
                client,
                name: &name,
                owner: None,
                timeout_ms,
                lock_delay_ms,
                lease_time_ms,
                metadata: &metadata,
                detect_deadlock,
            }
            .started(env, id)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void lockReentrantAsync(long client, String name, long owner,
/// long timeoutMs, double lockDelayMs, double leaseTimeMs, String[] metadata, boolean detectDeadlock, long id)`:
/// `lockAsync`, reentrant for `owner` as `lockReentrant`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_lockReentrantAsync<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    owner: jlong,
    timeout_ms: jlong,
    lock_delay_ms: jdouble,
    lease_time_ms: jdouble,
    metadata: JObjectArray<'local, JString<'local>>,
    detect_deadlock: jboolean,
    id: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            LockArgs {
                client,
                name: &name,
                owner: Some(owner as u64),
                timeout_ms,
                lock_delay_ms,
                lease_time_ms,
                metadata: &metadata,
                detect_deadlock,
            }
            .started(env, id)
        })
        .resolve::<ThrowEtcdLock>()
}
