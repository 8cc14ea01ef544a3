//! Core's log records into Python's `logging` (see `etcdlock._common`): the
//! callback runs on core's log thread, through the exit gate.

use etcdlock::logs::{self, Record};
use pyo3::prelude::*;

use crate::wait::attach_gated;

/// Hand core's records to `callback(levelno, target, message, fields)`.
/// False when a subscriber was set already.
#[pyfunction]
pub(crate) fn _forward_logs(callback: Py<PyAny>) -> bool {
    logs::forward(move |r: Record| {
        let levelno = match r.level {
            tracing::Level::ERROR => 40,
            tracing::Level::WARN => 30,
            tracing::Level::INFO => 20,
            _ => 10,
        };
        attach_gated(|py| {
            // A failing callback loses one record, never the thread.
            let _ = callback.call1(py, (levelno, r.target, r.message, r.fields));
        });
    })
}

/// Forward records at Python level `levelno` and above (logging's numbers;
/// above ERROR: none).
#[pyfunction]
pub(crate) fn _set_log_level(levelno: i64) {
    logs::set_level(match levelno {
        i64::MIN..=10 => Some(tracing::Level::DEBUG),
        11..=20 => Some(tracing::Level::INFO),
        21..=30 => Some(tracing::Level::WARN),
        31..=40 => Some(tracing::Level::ERROR),
        _ => None,
    });
}
