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

mod args;
#[cfg(feature = "bench")]
mod bench;
mod client;
mod errors;
mod guard;
mod leader;
mod logs;
mod mem;
mod multi_watch;
mod once;
mod recipes;
mod status;
mod sync;
mod wait;

/// What every module uses.
mod prelude {
    pub(crate) use std::collections::HashMap;
    pub(crate) use std::future::Future;
    pub(crate) use std::sync::{Arc, Mutex, OnceLock};
    pub(crate) use std::time::Duration;

    pub(crate) use jni::errors::ErrorPolicy;
    pub(crate) use jni::objects::{
        JByteArray, JClass, JLongArray, JObject, JObjectArray, JString, JThrowable, JValue,
    };
    pub(crate) use jni::refs::Global;
    pub(crate) use jni::sys::{jboolean, jdouble, jint, jlong};
    pub(crate) use jni::vm::JavaVM;
    pub(crate) use jni::{jni_sig, jni_str, Env, EnvUnowned};

    pub(crate) use etcdlock::bridge;
    pub(crate) use etcdlock::{
        CancellationToken, Client, Error, ErrorCode, Guard, LockOptions, MultiGuard,
    };

    pub(crate) use crate::args::*;
    pub(crate) use crate::errors::*;
    pub(crate) use crate::wait::*;
}

use crate::prelude::*;

/// `static native void init()`: cache the VM and the bridge class.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_init<'local>(
    mut unowned: EnvUnowned<'local>,
    class: JClass<'local>,
) {
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
        .with_env(|env| -> NResult<JString<'local>> {
            Ok(JString::from_str(env, env!("CARGO_PKG_VERSION"))?)
        })
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
