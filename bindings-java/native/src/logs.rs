//! Core's log events into SLF4J (`io.etcdlock.CoreLogs`): core's one log
//! thread attaches itself to the JVM once, as a daemon named `etcdlock-log`,
//! and calls `NativeBridge.log` for each record at or above the level Java set.

use crate::prelude::*;
use etcdlock::logs::{self, Record};

/// A level as SLF4J's numbers in `CoreLogs`: 1 error, 2 warn, 3 info, 4 debug, 5 trace.
fn level_number(r: &Record) -> jint {
    match r.level.as_str() {
        "ERROR" => 1,
        "WARN" => 2,
        "INFO" => 3,
        "DEBUG" => 4,
        _ => 5,
    }
}

/// Call `NativeBridge.log(int level, String target, String message, String[] fields)`,
/// the fields as alternating names and values.
fn deliver(r: Record) {
    with_bridge_as(c"etcdlock-log", |env, bridge| {
        let target = JString::from_str(env, &r.target)?;
        let message = JString::from_str(env, &r.message)?;
        let fields = env.new_object_array(
            (r.fields.len() * 2) as i32,
            jni_str!("java/lang/String"),
            JObject::null(),
        )?;
        for (i, (k, v)) in r.fields.iter().enumerate() {
            let k = JString::from_str(env, k)?;
            fields.set_element(env, 2 * i, &k)?;
            let v = JString::from_str(env, v)?;
            fields.set_element(env, 2 * i + 1, &v)?;
        }
        env.call_static_method(
            &bridge.class,
            jni_str!("log"),
            jni_sig!("(ILjava/lang/String;Ljava/lang/String;[Ljava/lang/String;)V"),
            &[
                JValue::Int(level_number(&r)),
                JValue::Object(&target),
                JValue::Object(&message),
                JValue::Object(&fields),
            ],
        )?;
        Ok(())
    });
}

/// `static native boolean forwardLogs()`: install core's log subscriber,
/// which hands records to `NativeBridge.log`. False when this library's core
/// had a subscriber already (then nothing changes).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_forwardLogs<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
) -> jboolean {
    unowned
        .with_env(|_env| -> NResult<jboolean> { Ok(logs::forward(deliver)) })
        .resolve::<ThrowEtcdLock>()
}

/// `static native void setLogLevel(int level)`: forward records at `level`
/// and above (the numbers of [`level_number`]; 0 or below: none).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_etcdlock_NativeBridge_setLogLevel<'local>(
    mut unowned: EnvUnowned<'local>,
    _class: JClass<'local>,
    level: jint,
) {
    unowned
        .with_env(|_env| -> NResult<()> {
            logs::set_level(match level {
                i32::MIN..=0 => None,
                1 => Some(tracing::Level::ERROR),
                2 => Some(tracing::Level::WARN),
                3 => Some(tracing::Level::INFO),
                _ => Some(tracing::Level::DEBUG),
            });
            Ok(())
        })
        .resolve::<ThrowEtcdLock>()
}
