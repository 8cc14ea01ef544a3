//! JNI glue for the etcdlock Java API (`io.etcdlock.NativeBridge`).
//!
//! Everything with logic lives in the core crate; this file converts arguments,
//! turns core errors into one Java exception class per [`ErrorCode`], and hands
//! native objects to Java as `long` handles (`Arc::into_raw`), which the Java
//! side frees exactly once.
//!
//! Rules kept at every entry point:
//! - each `extern "system"` function runs its body inside
//!   [`EnvUnowned::with_env`] (which wraps it in `catch_unwind`) and resolves the
//!   outcome with [`ThrowEtcdLock`], so a Rust error or panic becomes a Java
//!   exception (`InternalException` for panics), never an abort;
//! - blocking calls park the calling Java thread on the core's one shared
//!   runtime; an interruptible wait polls `Thread.isInterrupted()` and cancels
//!   the wait through a [`CancellationToken`] (the core then removes the waiter key);
//! - async completions and loss notifications run on runtime threads, attached
//!   to the JVM only for the duration of the callback (so they never keep the
//!   JVM from exiting), and call static methods of a class cached at `init`
//!   (so they work under any class loader).

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use jni::errors::ErrorPolicy;
use jni::objects::{JByteArray, JClass, JLongArray, JObject, JString, JThrowable, JValue};
use jni::refs::Global;
use jni::sys::{jboolean, jint, jlong};
use jni::vm::JavaVM;
use jni::{jni_sig, jni_str, Env, EnvUnowned};

use etcdlock::{Client, ClientOptions, CancellationToken, Error, ErrorCode, Guard, LockOptions, MultiGuard, TlsOptions};

// ---------------------------------------------------------------------------
// Errors

/// An error on the way back to Java: a core error, or a JNI failure (which
/// usually means a Java exception is already pending).
#[derive(Debug)]
enum NErr {
    Lock(Error),
    Jni(jni::errors::Error),
}

impl std::fmt::Display for NErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NErr::Lock(e) => write!(f, "{e}"),
            NErr::Jni(e) => write!(f, "JNI: {e}"),
        }
    }
}

impl std::error::Error for NErr {}

impl From<jni::errors::Error> for NErr {
    fn from(e: jni::errors::Error) -> Self {
        NErr::Jni(e)
    }
}

impl From<Error> for NErr {
    fn from(e: Error) -> Self {
        NErr::Lock(e)
    }
}

type NResult<T> = std::result::Result<T, NErr>;

fn invalid(msg: impl Into<String>) -> NErr {
    NErr::Lock(Error::new(ErrorCode::InvalidArgument, msg))
}

/// The class whose static methods build exceptions and complete futures.
struct Bridge {
    vm: JavaVM,
    class: Global<JClass<'static>>,
}

static BRIDGE: OnceLock<Bridge> = OnceLock::new();

/// Build the Java exception for (code, reason, message) via
/// `NativeBridge.error(int, int, String)` and throw it.
fn throw_code(env: &mut Env<'_>, code: i32, reason: i32, msg: &str) -> jni::errors::Result<()> {
    let Some(bridge) = BRIDGE.get() else {
        // init() never ran: only possible if someone calls the natives directly.
        return env.throw_new(jni_str!("java/lang/IllegalStateException"), jni::strings::JNIString::new(msg));
    };
    let jmsg = JString::from_str(env, msg)?;
    let obj = env
        .call_static_method(
            &bridge.class,
            jni_str!("error"),
            jni_sig!("(IILjava/lang/String;)Lio/etcdlock/EtcdLockException;"),
            &[JValue::Int(code), JValue::Int(reason), JValue::Object(&jmsg)],
        )?
        .l()?;
    let t = env.cast_local::<JThrowable>(obj)?;
    env.throw(t)
}

/// The error policy of every native method: core errors become the matching
/// `EtcdLockException` subclass; JNI failures and panics become
/// `InternalException` (unless a Java exception is already pending).
struct ThrowEtcdLock;

impl<T: Default> ErrorPolicy<T, NErr> for ThrowEtcdLock {
    type Captures<'unowned_env_local: 'native_method, 'native_method> = ();

    fn on_error<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _cap: &mut (),
        err: NErr,
    ) -> jni::errors::Result<T> {
        if env.exception_check() {
            return Ok(T::default());
        }
        let _ = match err {
            NErr::Lock(e) => {
                let reason = e.loss_reason().map(|r| r as i32).unwrap_or(0);
                throw_code(env, e.code() as i32, reason, &e.to_string())
            }
            NErr::Jni(e) => throw_code(env, ErrorCode::Internal as i32, 0, &format!("Internal: JNI error: {e}")),
        };
        Ok(T::default())
    }

    fn on_panic<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _cap: &mut (),
        payload: Box<dyn std::any::Any + Send + 'static>,
    ) -> jni::errors::Result<T> {
        let msg = if let Some(s) = payload.downcast_ref::<&'static str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "non-string panic payload".to_string()
        };
        // Never drop a payload whose Drop might panic again.
        std::mem::forget(payload);
        if env.exception_check() {
            env.exception_clear();
        }
        let _ = throw_code(env, ErrorCode::Internal as i32, 0, &format!("Internal: panic in etcdlock native code: {msg}"));
        Ok(T::default())
    }
}

// ---------------------------------------------------------------------------
// Handles

fn into_handle<T>(v: Arc<T>) -> jlong {
    Arc::into_raw(v) as jlong
}

/// Borrow the object behind a handle (a new strong reference).
///
/// # Safety
/// `h` must be a live handle of type `T` made by [`into_handle`]; the Java side
/// guarantees it (handles are private, freed once, and pinned while in use).
unsafe fn borrow<T>(h: jlong, what: &str) -> NResult<Arc<T>> {
    if h == 0 {
        return Err(NErr::Lock(Error::new(ErrorCode::Closed, format!("the {what} was closed"))));
    }
    let p = h as *const T;
    Arc::increment_strong_count(p);
    Ok(Arc::from_raw(p))
}

/// # Safety
/// As [`borrow`]; called exactly once per handle.
unsafe fn free<T>(h: jlong) -> Option<Arc<T>> {
    if h == 0 {
        None
    } else {
        Some(Arc::from_raw(h as *const T))
    }
}

// ---------------------------------------------------------------------------
// Argument conversion

fn opt_string(env: &Env<'_>, s: &JString<'_>) -> NResult<Option<String>> {
    if s.is_null() {
        return Ok(None);
    }
    Ok(Some(s.try_to_string(env)?))
}

fn req_string(env: &Env<'_>, s: &JString<'_>, what: &str) -> NResult<String> {
    opt_string(env, s)?.ok_or_else(|| invalid(format!("{what} must not be null")))
}

fn req_bytes(env: &Env<'_>, a: &JByteArray<'_>, what: &str) -> NResult<Vec<u8>> {
    if a.is_null() {
        return Err(invalid(format!("{what} must not be null")));
    }
    Ok(env.convert_byte_array(a)?)
}

fn millis(ms: jlong) -> Option<Duration> {
    if ms < 0 {
        None
    } else {
        Some(Duration::from_millis(ms as u64))
    }
}

// ---------------------------------------------------------------------------
// Blocking on the shared runtime

/// Run `fut` on the shared runtime and park this Java thread until it ends.
/// With `cancel`, the thread wakes every 20 ms to check `Thread.isInterrupted()`
/// and cancels the token once it is (the future then ends with `Cancelled`).
fn block<T, F>(env: &mut Env<'_>, fut: F, cancel: Option<CancellationToken>) -> NResult<T>
where
    F: Future<Output = etcdlock::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(invalid(
            "a blocking etcdlock call was made on an etcdlock runtime thread (inside a CompletableFuture \
             callback or loss listener); use the *Async variant or a *Async continuation with an executor",
        ));
    }
    // The core polls the future on this (Java) thread; with a token, it wakes
    // every 20 ms so we can turn Thread.interrupt() into a cancellation (the
    // future then ends with Cancelled and its waiter key is removed).
    let Some(token) = cancel else {
        return Ok(etcdlock::runtime::block_on(fut)?);
    };
    let mut thread: Option<JObject<'_>> = None;
    let mut jni_err: Option<jni::errors::Error> = None;
    let mut check = || -> etcdlock::Result<()> {
        if token.is_cancelled() || jni_err.is_some() {
            return Ok(());
        }
        let interrupted = (|| -> jni::errors::Result<bool> {
            if thread.is_none() {
                let t = env
                    .call_static_method(jni_str!("java/lang/Thread"), jni_str!("currentThread"), jni_sig!("()Ljava/lang/Thread;"), &[])?
                    .l()?;
                thread = Some(t);
            }
            let t = thread.as_ref().expect("set above");
            env.call_method(t, jni_str!("isInterrupted"), jni_sig!("()Z"), &[])?.z()
        })();
        match interrupted {
            Ok(true) => token.cancel(),
            Ok(false) => {}
            Err(e) => {
                jni_err = Some(e);
                token.cancel();
            }
        }
        Ok(())
    };
    let out = etcdlock::runtime::block_on_interruptible(fut, Duration::from_millis(20), &mut check);
    if let Some(e) = jni_err {
        return Err(e.into());
    }
    Ok(out?)
}

// ---------------------------------------------------------------------------
// Callbacks into Java from runtime threads

/// Run `f` with a JNI env on this runtime thread, attached to the JVM only for
/// the call (as a daemon-like scoped attachment named `etcdlock-rt`), and the
/// cached bridge class. False if the JVM could not be reached or `f` failed.
fn with_bridge(f: impl FnOnce(&mut Env<'_>, &Bridge) -> jni::errors::Result<()>) -> bool {
    let Some(bridge) = BRIDGE.get() else { return false };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        bridge.vm.attach_current_thread_with_config(
            || jni::vm::AttachConfig::new().scoped(true).thread_name(jni_str!("etcdlock-rt")),
            Some(16),
            |env| f(env, bridge),
        )
    }));
    matches!(r, Ok(Ok(())))
}

/// Call `NativeBridge.complete(long id, long handle, long value, int code, int reason, String msg)`
/// on a runtime thread. Returns false if the JVM could not be reached (the
/// caller then cleans up whatever it meant to hand over).
fn complete(id: jlong, handle: jlong, value: jlong, err: Option<&Error>) -> bool {
    with_bridge(|env, bridge| {
        let (code, reason, msg) = match err {
            Some(e) => (e.code() as i32, e.loss_reason().map(|r| r as i32).unwrap_or(0), Some(e.to_string())),
            None => (0, 0, None),
        };
        let jmsg = match msg {
            Some(m) => JObject::from(JString::from_str(env, m)?),
            None => JObject::null(),
        };
        env.call_static_method(
            &bridge.class,
            jni_str!("complete"),
            jni_sig!("(JJJIILjava/lang/String;)V"),
            &[JValue::Long(id), JValue::Long(handle), JValue::Long(value), JValue::Int(code), JValue::Int(reason), JValue::Object(&jmsg)],
        )?;
        Ok(())
    })
}

/// Cancellation tokens of in-flight `acquireAsync` calls, by Java future id.
fn async_tokens() -> &'static Mutex<HashMap<jlong, CancellationToken>> {
    static T: OnceLock<Mutex<HashMap<jlong, CancellationToken>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
}

// ---------------------------------------------------------------------------
// Native methods of io.etcdlock.NativeBridge

/// `static native void init()`: cache the VM and the bridge class.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_init<'local>(mut unowned: EnvUnowned<'local>, class: JClass<'local>) {
    unowned
        .with_env(|env| -> NResult<()> {
            if BRIDGE.get().is_none() {
                let vm = env.get_java_vm()?;
                let global = env.new_global_ref(&class)?;
                let _ = BRIDGE.set(Bridge { vm, class: global });
            }
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native String version()`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_version<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
) -> JString<'local> {
    unowned
        .with_env(|env| -> NResult<JString<'local>> { Ok(JString::from_str(env, env!("CARGO_PKG_VERSION"))?) })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void panicForTest()`: proves a Rust panic becomes an exception.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_panicForTest<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            panic!("deliberate panic for the test suite");
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long connect(String endpoints, long ttlSecs, String namespace, String user,
/// String password, String ca, String cert, String key, String domain, long connectTimeoutMs,
/// long requestTimeoutMs, long marginMs)`. Endpoints are joined by `\n`; a negative timeout or
/// margin keeps the core's default (the core rejects a margin not below the TTL).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_connect<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    endpoints: JString<'local>,
    ttl_secs: jlong,
    namespace: JString<'local>,
    user: JString<'local>,
    password: JString<'local>,
    ca: JString<'local>,
    cert: JString<'local>,
    key: JString<'local>,
    domain: JString<'local>,
    connect_timeout_ms: jlong,
    request_timeout_ms: jlong,
    margin_ms: jlong,
    watch_held_keys: jint,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            // Not set: null strings, 0 TTL, negative durations, -1 watchHeldKeys.
            // Core's one rule: the ETCDLOCK_* environment fills what is not set.
            let eps = opt_string(env, &endpoints)?;
            let namespace = opt_string(env, &namespace)?;
            let (user, password) = (opt_string(env, &user)?, opt_string(env, &password)?);
            let (ca, cert, key, domain) =
                (opt_string(env, &ca)?, opt_string(env, &cert)?, opt_string(env, &key)?, opt_string(env, &domain)?);
            let mut given: Vec<&str> = Vec::new();
            for (k, set) in [
                ("endpoints", eps.is_some()),
                ("ttl", ttl_secs != 0),
                ("namespace", namespace.is_some()),
                ("username", user.is_some()),
                ("password", password.is_some()),
                ("tls_ca", ca.is_some()),
                ("tls_cert", cert.is_some()),
                ("tls_key", key.is_some()),
                ("tls_domain", domain.is_some()),
                ("connect_timeout", connect_timeout_ms >= 0),
                ("request_timeout", request_timeout_ms >= 0),
                ("margin", margin_ms >= 0),
                ("watch_held_keys", watch_held_keys >= 0),
            ] {
                if set {
                    given.push(k);
                }
            }
            let mut opts = ClientOptions::from_env_except(&given)?;
            if let Some(e) = eps {
                opts.endpoints = e.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
            }
            if ttl_secs != 0 {
                opts.ttl_secs = ttl_secs;
            }
            if namespace.is_some() {
                opts.namespace = namespace;
            }
            if user.is_some() || password.is_some() {
                opts.username = user;
                opts.password = password;
            }
            if ca.is_some() || cert.is_some() || key.is_some() || domain.is_some() {
                // Any TLS option turns TLS on, the domain too (as in every language).
                let tls = opts.tls.get_or_insert_with(TlsOptions::default);
                if ca.is_some() {
                    tls.ca = ca.map(PathBuf::from);
                }
                if cert.is_some() {
                    tls.cert = cert.map(PathBuf::from);
                }
                if key.is_some() {
                    tls.key = key.map(PathBuf::from);
                }
                if domain.is_some() {
                    tls.domain = domain;
                }
            }
            if let Some(d) = millis(connect_timeout_ms) {
                opts.connect_timeout = d;
            }
            if let Some(d) = millis(request_timeout_ms) {
                opts.request_timeout = d;
            }
            if let Some(d) = millis(margin_ms) {
                opts.margin = Some(d);
            }
            if watch_held_keys >= 0 {
                opts.watch_held_keys = watch_held_keys != 0;
            }
            etcdlock::set_language("java");
            let client = block(env, async move { Client::connect(opts).await }, None)?;
            Ok(into_handle(Arc::new(client)))
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long[] metrics(long client)`: core's metrics snapshot, flat:
/// per acquisition result (acquired, timeout, would_block, cancelled, error)
/// its count, then per result its total wait in ns; then waiting, held, the
/// current holds' duration (ns), holds ended, their total time (ns); losses per
/// reason (LossReason::ALL order); keep-alives, last round trip (ns, -1 none).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_metrics<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
) -> JLongArray<'local> {
    unowned
        .with_env(|env| -> NResult<JLongArray<'local>> {
            let c = unsafe { borrow::<Client>(client, "client")? };
            let m = c.metrics();
            let ns = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
            let mut v: Vec<jlong> = Vec::with_capacity(22);
            v.extend(m.acquisitions.iter().map(|a| a.count as jlong));
            v.extend(m.acquisitions.iter().map(|a| ns(a.wait_total)));
            v.extend([m.waiting, m.held, ns(m.held_duration), m.holds_ended as jlong, ns(m.hold_total)]);
            v.extend(m.lost.iter().map(|(_, n)| *n as jlong));
            v.extend([m.keepalives as jlong, m.keepalive_rtt.map(ns).unwrap_or(-1)]);
            let arr = env.new_long_array(v.len())?;
            arr.set_region(env, 0, &v)?;
            Ok(arr)
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
            let c = unsafe { borrow::<Client>(client, "client")? };
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
            let c = unsafe { borrow::<Client>(client, "client")? };
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
            let c = unsafe { borrow::<Client>(client, "client")? };
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
            let c = unsafe { borrow::<Client>(client, "client")? };
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
            if let Some(c) = unsafe { free::<Client>(client) } {
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

/// `static native long lock(long client, String name, long timeoutMs, boolean interruptible)`:
/// wait for the lock; `timeoutMs < 0` waits without bound. Returns a guard handle.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_lock<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    timeout_ms: jlong,
    interruptible: jboolean,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            let c = unsafe { borrow::<Client>(client, "client")? };
            let name = req_string(env, &name, "lock name")?;
            let token = if interruptible { Some(CancellationToken::new()) } else { None };
            let opts = LockOptions { timeout: millis(timeout_ms), cancel: token.clone() };
            let g = block(env, async move { c.lock_with(&name, opts).await }, token)?;
            Ok(into_handle(Arc::new(g)))
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long tryLock(long client, String name)`: the guard, or 0 if held elsewhere.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_tryLock<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            let c = unsafe { borrow::<Client>(client, "client")? };
            let name = req_string(env, &name, "lock name")?;
            match block(env, async move { c.try_lock(&name).await }, None) {
                Ok(g) => Ok(into_handle(Arc::new(g))),
                Err(NErr::Lock(e)) if e.code() == ErrorCode::WouldBlock => Ok(0),
                Err(e) => Err(e),
            }
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void lockAsync(long client, String name, long timeoutMs, long id)`: start
/// acquiring on the runtime; `NativeBridge.complete(id, guardHandle, 0, code, reason, msg)`
/// reports the outcome from a runtime thread.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_lockAsync<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
    timeout_ms: jlong,
    id: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let c = unsafe { borrow::<Client>(client, "client")? };
            let name = req_string(env, &name, "lock name")?;
            let token = CancellationToken::new();
            async_tokens().lock().unwrap_or_else(|p| p.into_inner()).insert(id, token.clone());
            let opts = LockOptions { timeout: millis(timeout_ms), cancel: Some(token) };
            let rt = etcdlock::runtime::runtime()?;
            rt.spawn(async move {
                let r = c.lock_with(&name, opts).await;
                async_tokens().lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                match r {
                    Ok(g) => {
                        let g = Arc::new(g);
                        let h = into_handle(g.clone());
                        if !complete(id, h, 0, None) {
                            // Nobody took the handle: take it back; dropping releases the lock.
                            drop(unsafe { free::<Guard>(h) });
                            let _ = g.unlock().await;
                        }
                    }
                    Err(e) => {
                        complete(id, 0, 0, Some(&e));
                    }
                }
            });
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

// ---------------------------------------------------------------------------
// Recipes. Results that carry several values (leader, status, keys) travel as
// one byte[] in a simple big-endian encoding that `RecipeCodec.java` reads:
// i32 and i64 as DataInput does, a string as i32 length + UTF-8 bytes, absent
// values as length -1.

struct Enc(Vec<u8>);

impl Enc {
    fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn bytes(&mut self, b: Option<&[u8]>) -> &mut Self {
        match b {
            Some(b) => {
                self.i32(i32::try_from(b.len()).unwrap_or(i32::MAX));
                self.0.extend_from_slice(b);
            }
            None => {
                self.i32(-1);
            }
        }
        self
    }
}

fn encode_leader(e: &mut Enc, l: &etcdlock::Leader) {
    e.bytes(Some(&l.key)).bytes(Some(&l.value)).i64(l.revision).i64(l.lease_id);
}

/// Names encoded by Java as i32 count, then i32 length + UTF-8 bytes each.
fn decode_names(b: &[u8]) -> NResult<Vec<String>> {
    let bad = || invalid("malformed name list");
    let mut at = 0usize;
    let next_i32 = |at: &mut usize| -> NResult<i32> {
        let v = b.get(*at..*at + 4).ok_or_else(bad)?;
        *at += 4;
        Ok(i32::from_be_bytes([v[0], v[1], v[2], v[3]]))
    };
    let n = next_i32(&mut at)?;
    let mut out = Vec::with_capacity(n.max(0) as usize);
    for _ in 0..n {
        let len = usize::try_from(next_i32(&mut at)?).map_err(|_| bad())?;
        let v = b.get(at..at + len).ok_or_else(bad)?;
        at += len;
        out.push(String::from_utf8(v.to_vec()).map_err(|_| invalid("a lock name is not valid UTF-8"))?);
    }
    Ok(out)
}

/// `static native void recipeAsync(long client, int kind, String name, byte[] arg, int permits,
/// long timeoutMs, long id)`: start a recipe acquisition on the runtime. kind 1: a permit of a
/// `permits` semaphore; 2: the read side of a read-write lock; 3: campaign with value `arg`;
/// 4: lock every name encoded in `arg` (the handle is then a multi-lock). Completes as `lockAsync`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_recipeAsync<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    kind: jint,
    name: JString<'local>,
    arg: JByteArray<'local>,
    permits: jint,
    timeout_ms: jlong,
    id: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let c = unsafe { borrow::<Client>(client, "client")? };
            let name = opt_string(env, &name)?.unwrap_or_default();
            let arg = if arg.is_null() { Vec::new() } else { env.convert_byte_array(&arg)? };
            let names = if kind == 4 { decode_names(&arg)? } else { Vec::new() };
            if !(1..=4).contains(&kind) {
                return Err(invalid(format!("unknown acquisition kind {kind}")));
            }
            let permits = u32::try_from(permits).map_err(|_| invalid(format!("permits must be between 1 and {}, got {permits}", etcdlock::MAX_PERMITS)))?;
            let token = CancellationToken::new();
            async_tokens().lock().unwrap_or_else(|p| p.into_inner()).insert(id, token.clone());
            let opts = LockOptions { timeout: millis(timeout_ms), cancel: Some(token) };
            let rt = etcdlock::runtime::runtime()?;
            rt.spawn(async move {
                let r: etcdlock::Result<Result<Guard, MultiGuard>> = match kind {
                    1 => c.acquire_permit(&name, permits, opts).await.map(Ok),
                    2 => c.read_lock(&name, opts).await.map(Ok),
                    3 => c.campaign(&name, arg, opts).await.map(|l| Ok(l.into_guard())),
                    _ => {
                        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                        c.lock_many(&refs, opts).await.map(Err)
                    }
                };
                async_tokens().lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                match r {
                    Ok(Ok(g)) => {
                        let g = Arc::new(g);
                        let h = into_handle(g.clone());
                        if !complete(id, h, 0, None) {
                            drop(unsafe { free::<Guard>(h) });
                            let _ = g.unlock().await;
                        }
                    }
                    Ok(Err(m)) => {
                        let m = Arc::new(m);
                        let h = into_handle(m.clone());
                        if !complete(id, h, 0, None) {
                            drop(unsafe { free::<MultiGuard>(h) });
                            let _ = m.unlock().await;
                        }
                    }
                    Err(e) => {
                        complete(id, 0, 0, Some(&e));
                    }
                }
            });
            Ok(())
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
            let g = unsafe { borrow::<Guard>(guard, "guard")? };
            let v = req_bytes(env, &value, "value")?;
            block(env, async move { g.set_value(v).await }, None)
        })
        .resolve::<ThrowEtcdLock>()
}

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
            let c = unsafe { borrow::<Client>(client, "client")? };
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
/// foreign. Holders first, in queue order.
fn encode_status(e: &mut Enc, st: &etcdlock::Status) {
    let kind = match st.kind {
        None => -1,
        Some(etcdlock::LockKind::Mutex) => 0,
        Some(etcdlock::LockKind::Election) => 1,
        Some(etcdlock::LockKind::Semaphore) => 2,
        Some(etcdlock::LockKind::RwLock) => 3,
    };
    e.i64(st.revision).i32(kind).i32((st.holders.len() + st.waiters.len()) as i32);
    for x in st.holders.iter().chain(st.waiters.iter()) {
        let (kind, permits) = match x.kind {
            etcdlock::ContenderKind::Exclusive => (0, 1),
            etcdlock::ContenderKind::Reader => (1, 1),
            etcdlock::ContenderKind::Permit(n) => (2, n as i32),
        };
        e.bytes(Some(x.key.as_bytes())).i32(kind).i32(permits).i32(x.holds as i32).i64(x.lease_id);
        e.i64(x.ttl_remaining.unwrap_or(-1)).i64(x.create_revision).bytes(x.owner.as_deref().map(str::as_bytes));
        e.i64(x.age_ms.map_or(-1, |a| a as i64)).bytes(Some(&x.value));
        e.bytes(x.host.as_deref().map(str::as_bytes)).i32(x.pid.map_or(-1, |p| p as i32));
        e.bytes(x.language.as_deref().map(str::as_bytes)).i32(x.local_waiters.map_or(-1, |n| n as i32)).i32(x.foreign as i32);
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
            let c = unsafe { borrow::<Client>(client, "client")? };
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
            let c = unsafe { borrow::<Client>(client, "client")? };
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
            let c = unsafe { borrow::<Client>(client, "client")? };
            let name = req_string(env, &name, "lock name")?;
            block(env, async move { c.release(&name, token).await }, None)
        })
        .resolve::<ThrowEtcdLock>()
}

/// Call `NativeBridge.observed(long id, int code, byte[] leader, String msg)` on a runtime thread.
fn observed(id: jlong, leader: Option<&etcdlock::Leader>, err: Option<&Error>) -> bool {
    with_bridge(|env, bridge| {
        let bytes = match leader {
            Some(l) => {
                let mut e = Enc(Vec::new());
                encode_leader(&mut e, l);
                JObject::from(env.byte_array_from_slice(&e.0)?)
            }
            None => JObject::null(),
        };
        let (code, msg) = match err {
            Some(e) => (e.code() as i32, JObject::from(JString::from_str(env, e.to_string())?)),
            None => (0, JObject::null()),
        };
        env.call_static_method(
            &bridge.class,
            jni_str!("observed"),
            jni_sig!("(JI[BLjava/lang/String;)V"),
            &[JValue::Long(id), JValue::Int(code), JValue::Object(&bytes), JValue::Object(&msg)],
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
            let c = unsafe { borrow::<Client>(client, "client")? };
            let name = req_string(env, &name, "election name")?;
            let mut obs = c.observe(&name)?;
            let token = CancellationToken::new();
            async_tokens().lock().unwrap_or_else(|p| p.into_inner()).insert(id, token.clone());
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
                async_tokens().lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
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
            let m = unsafe { borrow::<MultiGuard>(multi, "multi-lock")? };
            let mut e = Enc(Vec::new());
            e.i32(m.guards().len() as i32);
            for g in m.guards() {
                e.bytes(Some(g.key().as_bytes()));
            }
            Ok(env.byte_array_from_slice(&e.0)?)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long multiInfo(long multi, int what)`: 0 = fencing token, 1 = is held (0/1),
/// 2 = index of the first lock lost (-1: none), 3 = its loss reason code (0: none).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_multiInfo<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    multi: jlong,
    what: jint,
) -> jlong {
    unowned
        .with_env(|_env| -> NResult<jlong> {
            let m = unsafe { borrow::<MultiGuard>(multi, "multi-lock")? };
            let lost = m.guards().iter().enumerate().find_map(|(i, g)| g.loss().map(|l| (i as jlong, l.reason as jlong)));
            Ok(match what {
                0 => m.guards().first().map(|g| g.fencing_token()).unwrap_or(0),
                1 => m.is_held() as jlong,
                2 => lost.map_or(-1, |l| l.0),
                3 => lost.map_or(0, |l| l.1),
                _ => return Err(invalid(format!("unknown multi-lock field {what}"))),
            })
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
            let m = unsafe { borrow::<MultiGuard>(multi, "multi-lock")? };
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
            if let Some(m) = unsafe { free::<MultiGuard>(multi) } {
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

/// `static native void cancelAsync(long id)`: cancel an in-flight `lockAsync`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_cancelAsync<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    id: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            if let Some(t) = async_tokens().lock().unwrap_or_else(|p| p.into_inner()).remove(&id) {
                t.cancel();
            }
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
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
            let g = unsafe { borrow::<Guard>(guard, "guard")? };
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
            let g = unsafe { borrow::<Guard>(guard, "guard")? };
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
            let g = unsafe { borrow::<Guard>(guard, "guard")? };
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
            let g = unsafe { borrow::<Guard>(guard, "guard")? };
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
            let g = unsafe { borrow::<Guard>(guard, "guard")? };
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
            let g = unsafe { borrow::<Guard>(guard, "guard")? };
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
            let mut signal = unsafe { borrow::<Guard>(guard, "guard")? }.lost_signal();
            let rt = etcdlock::runtime::runtime()?;
            rt.spawn(async move {
                let loss = signal.wait().await;
                complete(id, 0, loss.map(|l| l.reason as jlong).unwrap_or(0), None);
            });
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// Ms of validity left while `g`'s renewal is failing and it is held, else -1.
fn renewal_ms(g: &Guard) -> jlong {
    match g.renewal() {
        etcdlock::Renewal::Failing { valid_until } if g.is_held() => {
            valid_until.saturating_duration_since(std::time::Instant::now()).as_millis() as jlong
        }
        _ => -1,
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
            let g = unsafe { borrow::<Guard>(guard, "guard")? };
            let mut changes = g.renewal_changes();
            let mut ended = g.lost_signal();
            let was_failing = failing;
            let rt = etcdlock::runtime::runtime()?;
            rt.spawn(async move {
                loop {
                    let now = *changes.borrow_and_update();
                    if matches!(now, etcdlock::Renewal::Failing { .. }) != was_failing {
                        let ms = match now {
                            etcdlock::Renewal::Failing { valid_until } => {
                                valid_until.saturating_duration_since(std::time::Instant::now()).as_millis() as jlong
                            }
                            etcdlock::Renewal::Ok => -1,
                        };
                        complete(id, 0, ms, None);
                        return;
                    }
                    tokio::select! {
                        _ = ended.wait() => break,
                        r = changes.changed() => if r.is_err() { break },
                    }
                }
                complete(id, 0, -2, None);
            });
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void freeGuard(long guard)`: drop the Java side's reference;
/// a guard still held is released in the background.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_freeGuard<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    guard: jlong,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            if let Some(g) = unsafe { free::<Guard>(guard) } {
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

/// `static native void rawRoundTrip(long client, String key, long lease)`: one
/// round of `etcdlock::bench_floor::txn_delete_round` (raw Txn: put with
/// `lease` if absent + read the owner under `key`'s prefix; then Delete),
/// bypassing the lock protocol; the benchmark's floor.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_rawRoundTrip<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    key: JString<'local>,
    lease: jlong,
) {
    unowned
        .with_env(|env| -> NResult<()> {
            let c = unsafe { borrow::<Client>(client, "client")? };
            let key = req_string(env, &key, "key")?;
            block(
                env,
                async move {
                    use etcd_client_shim::*;
                    raw_round_trip(c.etcd(), key, lease).await
                },
                None,
            )
        })
        .resolve::<ThrowEtcdLock>()
}

mod etcd_client_shim {
    use etcdlock::{Error, ErrorCode};

    fn e(err: impl std::fmt::Display) -> Error {
        Error::new(ErrorCode::Unavailable, err.to_string())
    }

    pub(crate) async fn raw_round_trip(mut etcd: etcd_client::Client, key: String, lease: i64) -> etcdlock::Result<()> {
        etcdlock::bench_floor::txn_delete_round(&mut etcd, key, lease).await.map(|_| ())
    }

    /// Grant a lease for the raw floor (so the put carries a lease like a lock key does).
    pub(crate) async fn grant(mut etcd: etcd_client::Client, ttl: i64) -> etcdlock::Result<i64> {
        Ok(etcd.lease_grant(ttl, None).await.map_err(e)?.id())
    }
}

/// `static native long rawGrant(long client, long ttl)`: a lease for [`rawRoundTrip`].
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_rawGrant<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    ttl: jlong,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            let c = unsafe { borrow::<Client>(client, "client")? };
            block(env, async move { etcd_client_shim::grant(c.etcd(), ttl).await }, None)
        })
        .resolve::<ThrowEtcdLock>()
}

/// `static native long coreLockUnlock(long client, String name)`: one uncontended
/// lock + unlock done entirely inside the core (one JNI call); the benchmark's
/// measure of what the Java layer adds. Returns the fencing token.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_coreLockUnlock<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    client: jlong,
    name: JString<'local>,
) -> jlong {
    unowned
        .with_env(|env| -> NResult<jlong> {
            let c = unsafe { borrow::<Client>(client, "client")? };
            let name = req_string(env, &name, "lock name")?;
            block(
                env,
                async move {
                    let g = c.lock(&name).await?;
                    let t = g.fencing_token();
                    g.unlock().await?;
                    Ok(t)
                },
                None,
            )
        })
        .resolve::<ThrowEtcdLock>()
}
