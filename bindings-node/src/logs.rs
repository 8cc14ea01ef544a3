//! Core's log events (`etcdlock::logs`) for JavaScript: one process-wide
//! sink hands each record to a JS function through a threadsafe function
//! that does not keep the event loop alive (lib/logging.js routes it to the
//! loggers of open clients and to `DEBUG=etcdlock` on stderr).

use etcdlock::logs::{self, Record};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use crate::errors::*;

/// One core log event as JavaScript receives it.
#[napi(object)]
pub struct NativeLogRecord {
    /// `"error"`, `"warn"`, `"info"` or `"debug"`.
    pub level: String,
    /// The core module that emitted it (`etcdlock::guard::loss`, ...).
    pub target: String,
    pub message: String,
    /// The event's fields in order, `[name, value]` pairs of text.
    pub fields: Vec<Vec<String>>,
}

fn level_name(l: &tracing::Level) -> &'static str {
    match *l {
        tracing::Level::ERROR => "error",
        tracing::Level::WARN => "warn",
        tracing::Level::INFO => "info",
        _ => "debug",
    }
}

/// Hand core's log records (of its own modules, `etcdlock::*`) to
/// `cb(null, record)` on this environment's JS
/// thread, from now on (once per process: false when a sink was installed
/// already, by this or another JS environment). The callback is held weakly:
/// it never keeps the process alive. Nothing is forwarded until
/// `setLogLevel` asks for a level.
#[napi(ts_args_type = "cb: (err: null | Error, record: NativeLogRecord) => void")]
pub fn forward_logs(
    cb: ThreadsafeFunction<NativeLogRecord, (), NativeLogRecord, Status, true, true>,
) -> napi::Result<bool> {
    guard_sync(|| {
        Ok(logs::forward(move |r: Record| {
            // Core's own events only (not those of the crates under it: h2, ...).
            if !r.target.starts_with("etcdlock") {
                return;
            }
            let rec = NativeLogRecord {
                level: level_name(&r.level).to_string(),
                target: r.target,
                message: r.message,
                fields: r.fields.into_iter().map(|(k, v)| vec![k, v]).collect(),
            };
            // A closed environment drops the record; the log thread goes on.
            let _ = cb.call(Ok(rec), ThreadsafeFunctionCallMode::NonBlocking);
        }))
    })
}

/// Forward records at `rank` and above: 0 none, 1 error, 2 warn, 3 info,
/// 4 debug (anything above 4 is debug).
#[napi]
pub fn set_log_level(rank: u32) {
    logs::set_level(match rank {
        0 => None,
        1 => Some(tracing::Level::ERROR),
        2 => Some(tracing::Level::WARN),
        3 => Some(tracing::Level::INFO),
        _ => Some(tracing::Level::DEBUG),
    });
}

/// Records dropped because the JS side fell behind core's queue.
#[napi]
pub fn dropped_logs() -> f64 {
    logs::dropped() as f64
}
