//! Core's log events for C programs: a callback that receives each event at
//! or above a level (core's `logs::forward`, as Python's `logging` gets them).

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::Mutex;

use etcdlock_core::logs::{self, Record};

use crate::*;

/// A log callback (etcdlock_set_logger): level is one of ETCDLOCK_LOG_ERROR to
/// ETCDLOCK_LOG_DEBUG; target the core module (`etcdlock::session`, ...);
/// message what happened (`acquired`, `released`, `lost`, ...); fields the
/// event's fields as `key=value` pairs separated by spaces (`lock=orders
/// fencing_token=42`). The strings are valid during the call only.
pub type etcdlock_log_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        level: c_int,
        target: *const c_char,
        message: *const c_char,
        fields: *const c_char,
    ),
>;

/// The callback (never NULL here) and its user_data.
struct Sink(
    unsafe extern "C" fn(*mut c_void, c_int, *const c_char, *const c_char, *const c_char),
    UserData,
);

static SINK: Mutex<Option<Sink>> = Mutex::new(None);

fn text(s: String) -> CString {
    CString::new(s.replace('\0', "\\0")).unwrap_or_default()
}

fn deliver(r: Record) {
    let sink = SINK.lock().unwrap_or_else(|p| p.into_inner());
    let Some(Sink(log, ref ud)) = *sink else {
        return;
    };
    let user_data = ud.0;
    drop(sink);
    let level = match r.level {
        tracing::Level::ERROR => ETCDLOCK_LOG_ERROR,
        tracing::Level::WARN => ETCDLOCK_LOG_WARN,
        tracing::Level::INFO => ETCDLOCK_LOG_INFO,
        _ => ETCDLOCK_LOG_DEBUG,
    };
    let fields = r
        .fields
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    let (target, message, fields) = (text(r.target), text(r.message), text(fields));
    // SAFETY: the caller's callback, with the user_data it gave; the strings
    // outlive the call.
    unsafe {
        log(
            user_data,
            level,
            target.as_ptr(),
            message.as_ptr(),
            fields.as_ptr(),
        )
    };
}

/// Send core's log events at level and above (ETCDLOCK_LOG_ERROR,
/// ETCDLOCK_LOG_WARN, ETCDLOCK_LOG_INFO, ETCDLOCK_LOG_DEBUG) to log, or none
/// (ETCDLOCK_LOG_OFF, or log NULL). Events: a hold acquired or released
/// (debug), a keep-alive renewal failing and a hold lost (warn), an etcd
/// member failing over and the watch stream re-created (info). The callback
/// runs on a thread of its own (never a caller's or the runtime's), one
/// event at a time, in order; a slow callback delays no lock (beyond 4096
/// waiting events, events are dropped). Call again to change the level or the
/// callback; it applies to the whole process.
///
/// Returns ETCDLOCK_OK, or ETCDLOCK_INVALID_ARGUMENT for an unknown level.
///
/// Safety: log is NULL or a function callable from any thread with
/// user_data until the next etcdlock_set_logger call replaces it.
///
/// Example:
///
///     static void on_log(void *ud, int level, const char *target, const char *msg, const char *fields) {
///         syslog(level <= ETCDLOCK_LOG_WARN ? LOG_WARNING : LOG_INFO, "%s: %s %s", target, msg, fields);
///     }
///     etcdlock_set_logger(ETCDLOCK_LOG_INFO, on_log, NULL);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_set_logger(
    level: c_int,
    log: etcdlock_log_fn,
    user_data: *mut c_void,
) -> c_int {
    ffi(|| {
        let min = match level {
            ETCDLOCK_LOG_OFF => None,
            ETCDLOCK_LOG_ERROR => Some(tracing::Level::ERROR),
            ETCDLOCK_LOG_WARN => Some(tracing::Level::WARN),
            ETCDLOCK_LOG_INFO => Some(tracing::Level::INFO),
            ETCDLOCK_LOG_DEBUG => Some(tracing::Level::DEBUG),
            other => {
                return Err(invalid(format!(
                    "level must be ETCDLOCK_LOG_OFF (0) .. ETCDLOCK_LOG_DEBUG (4), got {other}"
                )))
            }
        };
        *SINK.lock().unwrap_or_else(|p| p.into_inner()) = log.map(|f| Sink(f, UserData(user_data)));
        // Installed once per process; later calls only change the sink and level.
        logs::forward(deliver);
        logs::set_level(if log.is_some() { min } else { None });
        Ok(())
    })
}
