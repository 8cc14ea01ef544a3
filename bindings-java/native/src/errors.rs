//! Core errors as Java exceptions: every error reaches Java through
//! `NativeBridge.error(int code, int reason, boolean retryable, String
//! message)` with core's wire form (`bridge::WireError`), which builds the
//! matching `EtcdLockException` subclass.

use crate::prelude::*;

/// An error on the way back to Java: a core error, or a JNI failure (which
/// usually means a Java exception is already pending).
#[derive(Debug)]
pub(crate) enum NErr {
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

pub(crate) type NResult<T> = std::result::Result<T, NErr>;

pub(crate) fn invalid(msg: impl Into<String>) -> NErr {
    NErr::Lock(Error::new(ErrorCode::InvalidArgument, msg))
}

/// The class whose static methods build exceptions and complete futures.
pub(crate) struct Bridge {
    pub(crate) vm: JavaVM,
    pub(crate) class: Global<JClass<'static>>,
}

pub(crate) static BRIDGE: OnceLock<Bridge> = OnceLock::new();

/// The wire form of a core error as JNI values: code, loss reason (0:
/// none), retryable, message.
pub(crate) fn wire(e: &Error) -> (i32, i32, bool, String) {
    let w = bridge::WireError::from(e);
    (
        w.code as i32,
        w.reason.map(|r| r as i32).unwrap_or(0),
        w.retryable,
        e.to_string(),
    )
}

/// Build the Java exception for `e` via `NativeBridge.error` and throw it.
pub(crate) fn throw(env: &mut Env<'_>, e: &Error) -> jni::errors::Result<()> {
    let (code, reason, retryable, msg) = wire(e);
    let Some(bridge) = BRIDGE.get() else {
        // init() never ran: only possible if someone calls the natives directly.
        return env.throw_new(
            jni_str!("java/lang/IllegalStateException"),
            jni::strings::JNIString::new(msg),
        );
    };
    let jmsg = JString::from_str(env, msg)?;
    let obj = env
        .call_static_method(
            &bridge.class,
            jni_str!("error"),
            jni_sig!("(IIZLjava/lang/String;)Lio/etcdlock/EtcdLockException;"),
            &[
                JValue::Int(code),
                JValue::Int(reason),
                JValue::Bool(retryable),
                JValue::Object(&jmsg),
            ],
        )?
        .l()?;
    let t = env.cast_local::<JThrowable>(obj)?;
    env.throw(t)
}

/// The error policy of every native method: core errors become the matching
/// `EtcdLockException` subclass; JNI failures and panics become
/// `InternalException` (unless a Java exception is already pending).
pub(crate) struct ThrowEtcdLock;

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
            NErr::Lock(e) => throw(env, &e),
            NErr::Jni(e) => throw(
                env,
                &Error::new(ErrorCode::Internal, format!("JNI error: {e}")),
            ),
        };
        Ok(T::default())
    }

    fn on_panic<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _cap: &mut (),
        payload: Box<dyn std::any::Any + Send + 'static>,
    ) -> jni::errors::Result<T> {
        let e = bridge::panic_error(payload);
        if env.exception_check() {
            env.exception_clear();
        }
        let _ = throw(env, &e);
        Ok(T::default())
    }
}
