//! Waiting on the shared runtime from a Java thread, and calls into Java
//! from runtime threads.

use crate::prelude::*;
use etcdlock::poison::Locked;

/// Run `fut` on the shared runtime and park this Java thread until it ends.
/// With `cancel`, the thread wakes every 20 ms to check `Thread.isInterrupted()`
/// and cancels the token once it is (the future then ends with `Cancelled`).
pub(crate) fn block<T, F>(
    env: &mut Env<'_>,
    fut: F,
    cancel: Option<CancellationToken>,
) -> NResult<T>
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
                    .call_static_method(
                        jni_str!("java/lang/Thread"),
                        jni_str!("currentThread"),
                        jni_sig!("()Ljava/lang/Thread;"),
                        &[],
                    )?
                    .l()?;
                thread = Some(t);
            }
            let t = thread.as_ref().expect("set above");
            env.call_method(t, jni_str!("isInterrupted"), jni_sig!("()Z"), &[])?
                .z()
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

/// A runtime thread's attachment to the JVM, made on its first call into
/// Java and kept until the thread ends. As a daemon: the JVM never waits
/// for it at exit. Attaching for one call and detaching after (as before)
/// made HotSpot create, register and retire a `java.lang.Thread` for every
/// completion of a Java future (every `Lock.lock()`).
struct DaemonAttachment(std::cell::Cell<*mut jni::sys::JavaVM>);

impl Drop for DaemonAttachment {
    fn drop(&mut self) {
        let vm = self.0.get();
        if !vm.is_null() {
            // SAFETY: `vm` is the live JVM this thread attached itself to
            // (the library is loaded by it and never outlives it); a thread
            // attached with AttachCurrentThreadAsDaemon detaches itself.
            unsafe { ((*(*vm)).v1_1.DetachCurrentThread)(vm) };
        }
    }
}

thread_local! {
    static ATTACHED: DaemonAttachment = const { DaemonAttachment(std::cell::Cell::new(std::ptr::null_mut())) };
}

/// Attach this thread to `vm` as a daemon named `name`, once, unless it is
/// attached already (a Java thread, or done before).
fn attach_as_daemon(vm: &JavaVM, name: &'static std::ffi::CStr) {
    let _ = ATTACHED.try_with(|a| {
        if !a.0.get().is_null() {
            return;
        }
        let raw = vm.get_raw();
        // SAFETY: `raw` is the JVM's invocation interface (JNI >= 1.4: GetEnv
        // and AttachCurrentThreadAsDaemon exist); the name outlives the call.
        unsafe {
            let mut env: *mut std::ffi::c_void = std::ptr::null_mut();
            if ((*(*raw)).v1_2.GetEnv)(raw, &mut env, jni::sys::JNI_VERSION_1_8)
                != jni::sys::JNI_EDETACHED
            {
                return;
            }
            let mut args = jni::sys::JavaVMAttachArgs {
                version: jni::sys::JNI_VERSION_1_8,
                name: name.as_ptr().cast_mut(),
                group: std::ptr::null_mut(),
            };
            let args_ptr: *mut jni::sys::JavaVMAttachArgs = &mut args;
            if ((*(*raw)).v1_4.AttachCurrentThreadAsDaemon)(raw, &mut env, args_ptr.cast())
                == jni::sys::JNI_OK
            {
                a.0.set(raw);
            }
        }
    });
}

/// Run `f` with a JNI env on this runtime thread (attached to the JVM as a
/// daemon named `etcdlock-rt` on its first call, see `DaemonAttachment`), and
/// the cached bridge class. False if the JVM could not be reached or `f` failed.
pub(crate) fn with_bridge(
    f: impl FnOnce(&mut Env<'_>, &Bridge) -> jni::errors::Result<()>,
) -> bool {
    with_bridge_as(c"etcdlock-rt", f)
}

/// [`with_bridge`] on a thread that attaches itself under the name `name`
/// (core's log thread: `etcdlock-log`).
pub(crate) fn with_bridge_as(
    name: &'static std::ffi::CStr,
    f: impl FnOnce(&mut Env<'_>, &Bridge) -> jni::errors::Result<()>,
) -> bool {
    let Some(bridge) = BRIDGE.get() else {
        return false;
    };
    attach_as_daemon(&bridge.vm, name);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        bridge.vm.attach_current_thread_with_config(
            || {
                jni::vm::AttachConfig::new()
                    .scoped(true)
                    .thread_name(jni_str!("etcdlock-rt"))
            },
            Some(16),
            |env| f(env, bridge),
        )
    }));
    matches!(r, Ok(Ok(())))
}

/// Call `NativeBridge.complete(long id, long handle, long value, int code, int reason, String msg)`
/// on a runtime thread. Returns false if the JVM could not be reached (the
/// caller then cleans up whatever it meant to hand over).
pub(crate) fn complete(id: jlong, handle: jlong, value: jlong, err: Option<&Error>) -> bool {
    with_bridge(|env, bridge| {
        let (code, reason, retryable, msg) = match err.map(wire) {
            Some((c, r, retry, m)) => (c, r, retry, Some(m)),
            None => (0, 0, false, None),
        };
        let jmsg = match msg {
            Some(m) => JObject::from(JString::from_str(env, m)?),
            None => JObject::null(),
        };
        env.call_static_method(
            &bridge.class,
            jni_str!("complete"),
            jni_sig!("(JJJIIZLjava/lang/String;)V"),
            &[
                JValue::Long(id),
                JValue::Long(handle),
                JValue::Long(value),
                JValue::Int(code),
                JValue::Int(reason),
                JValue::Bool(retryable),
                JValue::Object(&jmsg),
            ],
        )?;
        Ok(())
    })
}

/// The one way an asynchronous call reports to Java: start `fut` (its first
/// request leaves from this thread), then on a runtime thread hand its
/// outcome to `NativeBridge.complete(id, ...)` through `report` (a panic in
/// `fut` arrives as `Internal`), and forget `id`'s cancellation token.
fn spawn_reporting<T, F>(
    id: jlong,
    fut: F,
    report: impl FnOnce(etcdlock::Result<T>) + Send + 'static,
) -> NResult<()>
where
    T: Send + 'static,
    F: Future<Output = etcdlock::Result<T>> + Send + 'static,
{
    let started = bridge::spawn_complete(fut, move |r| {
        async_tokens().locked().remove(&id);
        report(r);
    });
    if started.is_err() {
        // Never started: nothing will report or cancel it.
        async_tokens().locked().remove(&id);
    }
    started?;
    Ok(())
}

/// [`spawn_reporting`] for a call that returns a hold (a guard, a
/// multi-lock): Java gets its handle, or the error; a hold that Java can no
/// longer take (the JVM is gone) is released.
pub(crate) fn spawn_hold<H, F>(id: jlong, fut: F) -> NResult<()>
where
    H: std::any::Any + Send + Sync,
    F: Future<Output = etcdlock::Result<H>> + Send + 'static,
{
    spawn_reporting(id, fut, move |r| match r {
        Ok(hold) => {
            let h = into_handle(Arc::new(hold));
            if !complete(id, h, 0, None) {
                // Nobody took the handle: dropping the hold releases it.
                drop(free::<H>(h));
            }
        }
        Err(e) => {
            complete(id, 0, 0, Some(&e));
        }
    })
}

/// [`spawn_reporting`] for a call that returns a number (a latch's wait, a
/// barrier's arrival): Java gets the value, or the error.
pub(crate) fn spawn_value<F>(id: jlong, fut: F) -> NResult<()>
where
    F: Future<Output = etcdlock::Result<jlong>> + Send + 'static,
{
    spawn_reporting(id, fut, move |r| {
        match r {
            Ok(v) => complete(id, 0, v, None),
            Err(e) => complete(id, 0, 0, Some(&e)),
        };
    })
}

/// Cancellation tokens of in-flight `acquireAsync` calls, by Java future id.
pub(crate) fn async_tokens() -> &'static Mutex<HashMap<jlong, CancellationToken>> {
    static T: OnceLock<Mutex<HashMap<jlong, CancellationToken>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
}
