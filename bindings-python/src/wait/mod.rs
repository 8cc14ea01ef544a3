//! The two ways Python waits for core: a thread parked with the GIL
//! released (`wait`), or an asyncio future settled on its loop's thread from
//! completions the core runtime queues without the GIL (`to_asyncio`); and
//! the exit gate that threads Python does not know pass through.

mod asyncio;
mod gate;

use std::future::Future;
use std::time::Duration;

use etcdlock::bridge;
use etcdlock::ErrorCode;
use pyo3::prelude::*;

use crate::errors::*;

pub(crate) use asyncio::{_Canceller, _Completions, _completions_mode, to_asyncio};
pub(crate) use gate::{_close_gate, _gate_after_fork, attach_gated, pass_gate};

pub(crate) const TICK: Duration = Duration::from_millis(100);

/// Park this thread on a core future with the GIL released, waking every
/// 100 ms to let Python run its signal handlers. If one raises (Ctrl-C), the
/// future is dropped — which cancels a lock wait and removes its waiter key —
/// and that exception is raised here.
pub(crate) fn wait<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = etcdlock::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let mut interrupted: Option<PyErr> = None;
    let slot = &mut interrupted;
    let (r, _pass) = py.detach(move || {
        // While the interpreter is finalizing (a daemon thread at exit) there is
        // no Python to ask; keep waiting and let the process end.
        // The core polls the future on this thread (no hand-off to a worker).
        let check = || match attach_gated(|py| py.check_signals()).unwrap_or(Ok(())) {
            Ok(()) => Ok(()),
            Err(e) => {
                *slot = Some(e);
                Err(CoreError::new(
                    ErrorCode::Cancelled,
                    "interrupted by a signal",
                ))
            }
        };
        let r = bridge::catch(|| bridge::block_on_interruptible(fut, TICK, check));
        // Back into Python only through the gate (held until re-attached). A
        // daemon thread that finds Python finalizing stays here until the
        // process ends, as CPython 3.14 itself parks such threads.
        match pass_gate() {
            Some(pass) => (r, pass),
            None => loop {
                std::thread::park();
            },
        }
    });
    if let Some(e) = interrupted {
        return Err(e);
    }
    r.map_err(|e| to_pyerr(py, &e))
}

pub(crate) fn none(py: Python<'_>) -> Py<PyAny> {
    py.None()
}
