//! The two ways Python waits for core: a thread parked with the GIL
//! released (`wait`), or an asyncio future settled from the core runtime
//! (`to_asyncio`); and the exit gate both pass through.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use etcdlock::bridge;
use etcdlock::ErrorCode;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::errors::*;

// ===== The exit gate =====
//
// Threads Python does not know (the runtime's workers settling asyncio
// futures, the threads that run `on_lost` callbacks) call into Python, and a
// blocking wait returns to Python, only through this gate. At exit,
// `_close_gate` (atexit, after `_close_at_exit`) closes it and waits until
// no such call is in progress. Without it, a worker settling a future of an
// `asyncio.run` that had just returned was still inside
// `call_soon_threadsafe` (which releases the GIL to write the loop's
// self-pipe) when the interpreter began to finalize; CPython 3.11 to 3.13 end
// a thread that takes the GIL back then with pthread_exit, which unwinds
// through Rust frames: 1 asyncio program in 10 died at exit with SIGSEGV or
// SIGABRT ("PyGILState_Release: thread state must be current").

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
                Err(CoreError::new(ErrorCode::Cancelled, "interrupted by a signal"))
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

pub(crate) static BRIDGE: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

pub(crate) fn bridge(py: Python<'_>) -> PyResult<&(Py<PyAny>, Py<PyAny>)> {
    BRIDGE.get_or_try_init(py, || {
        let m = py.import("etcdlock._bridge")?;
        Ok((m.getattr("resolve")?.unbind(), m.getattr("reject")?.unbind()))
    })
}

/// Cancels the core task when its asyncio future is cancelled (dropping a lock
/// future removes the waiter key; a guard acquired too late is released).
#[pyclass(module = "etcdlock._etcdlock", frozen)]
pub(crate) struct _Canceller {
    pub(crate) abort: tokio::task::AbortHandle,
}

#[pymethods]
impl _Canceller {
    fn __call__(&self, fut: &Bound<'_, PyAny>) -> PyResult<()> {
        if fut.call_method0("cancelled")?.is_truthy()? {
            self.abort.abort();
        }
        Ok(())
    }
}

/// Run a core future on the shared runtime and return an asyncio future of the
/// running loop that completes with `convert(value)` or the mapped exception.
pub(crate) fn to_asyncio<T, F, C>(py: Python<'_>, fut: F, convert: C) -> PyResult<Py<PyAny>>
where
    F: Future<Output = etcdlock::Result<T>> + Send + 'static,
    T: Send + 'static,
    C: for<'py> FnOnce(Python<'py>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    let (resolve, reject) = bridge(py)?;
    let (resolve, reject) = (resolve.clone_ref(py), reject.clone_ref(py));
    let ev_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let pyfut = ev_loop.call_method0("create_future")?;
    let (loop_ref, fut_ref) = (ev_loop.unbind(), pyfut.clone().unbind());
    let settle = move |res: etcdlock::Result<T>| {
        attach_gated(move |py| {
            let (cb, arg) = match res {
                Ok(v) => match convert(py, v) {
                    Ok(o) => (resolve, o),
                    Err(e) => (reject, e.into_value(py).into_any()),
                },
                Err(e) => (reject, to_pyerr(py, &e).into_value(py).into_any()),
            };
            // Fails only when the loop is closed; nobody is waiting then.
            let _ = loop_ref.call_method1(py, "call_soon_threadsafe", (cb, fut_ref, arg));
        });
    };
    let abort = bridge::spawn_complete(fut, settle).map_err(|e| to_pyerr(py, &e))?;
    pyfut.call_method1("add_done_callback", (_Canceller { abort },))?;
    Ok(pyfut.unbind())
}

pub(crate) fn none(py: Python<'_>) -> Py<PyAny> {
    py.None()
}
