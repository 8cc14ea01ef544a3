//! The exit gate: threads Python does not know call into Python only
//! through it, and it closes when Python begins to finalize.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

// ===== The exit gate =====
//
// Threads Python does not know (the threads that run `on_lost` callbacks)
// call into Python, and a blocking wait checks for signals or returns to
// Python, only through this gate. At exit,
// `_close_gate` (atexit, after `_close_at_exit`) closes it and waits until
// no such call is in progress. Without it, a worker still inside a call into
// Python (it used to settle asyncio futures with `call_soon_threadsafe`,
// which releases the GIL to write the loop's self-pipe; workers no longer
// enter Python for asyncio at all, see `to_asyncio`) when the interpreter
// began to finalize was ended by CPython 3.11 to 3.13 with pthread_exit when
// it took the GIL back, which unwinds through Rust frames: 1 asyncio program
// in 10 died at exit with SIGSEGV or SIGABRT ("PyGILState_Release: thread
// state must be current").

/// Set once by `_close_gate`: Python is about to finalize.
pub(crate) static GATE_CLOSED: AtomicBool = AtomicBool::new(false);
/// Passes taken and not yet returned (calls into Python in progress).
pub(crate) static IN_PYTHON: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The thread that closed the gate (the one that finalizes): it keeps
    /// passing, as finalizers may still call us on it.
    static CLOSER: Cell<bool> = const { Cell::new(false) };
    /// Passes this thread holds. A thread already inside (an `on_lost`
    /// callback making a blocking call) keeps passing: the closer waits for
    /// its outer pass anyway.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

/// A call into Python in progress; returned on drop (on the thread that
/// took it).
pub(crate) struct Pass;

impl Drop for Pass {
    fn drop(&mut self) {
        HELD.with(|h| h.set(h.get() - 1));
        IN_PYTHON.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A pass, or `None` once the gate is closed. (Counted before the flag is
/// read, and the closer sets the flag before it reads the count: either the
/// closer waits for this pass, or this call sees the gate closed.)
pub(crate) fn pass_gate() -> Option<Pass> {
    IN_PYTHON.fetch_add(1, Ordering::SeqCst);
    let nested = HELD.with(|h| {
        h.set(h.get() + 1);
        h.get() > 1
    });
    let pass = Pass;
    if GATE_CLOSED.load(Ordering::SeqCst) && !nested && !CLOSER.with(Cell::get) {
        return None;
    }
    Some(pass)
}

/// `Python::try_attach` through the gate, for threads Python does not know:
/// `None` (and `f` not run) once Python is finalizing.
pub(crate) fn attach_gated<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    let _pass = pass_gate()?;
    Python::try_attach(f)
}

/// Close the gate and wait (at most 10 s, with the GIL released) for the
/// calls into Python already past it. Registered with atexit by the package.
#[pyfunction]
pub(crate) fn _close_gate(py: Python<'_>) {
    CLOSER.with(|c| c.set(true));
    GATE_CLOSED.store(true, Ordering::SeqCst);
    py.detach(|| {
        let until = Instant::now() + Duration::from_secs(10);
        while IN_PYTHON.load(Ordering::SeqCst) != 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// In a forked child only the thread that forked exists: the passes in
/// progress are its own.
#[pyfunction]
pub(crate) fn _gate_after_fork() {
    IN_PYTHON.store(HELD.with(Cell::get), Ordering::SeqCst);
}
