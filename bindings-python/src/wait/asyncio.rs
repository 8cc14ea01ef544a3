//! asyncio: core futures settle asyncio futures on their loop's thread from
//! completions the core runtime queues without the GIL (`to_asyncio`).

use etcdlock::poison::Locked;
use std::future::Future;
#[cfg(unix)]
use std::io::{Read, Write};
#[cfg(unix)]
use std::os::fd::AsRawFd;
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use etcdlock::bridge;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use super::attach_gated;
use crate::errors::*;

// ===== asyncio: completions handed to the loop without the GIL =====
//
// A core future settles its asyncio future on a runtime worker. That worker
// never takes the GIL: it queues the outcome on the loop's `_Completions`
// and, if the queue was not already signalled, wakes the loop once. The loop
// thread then converts each outcome and settles its future, with the GIL it
// already holds. (Settling through `loop.call_soon_threadsafe` on the worker
// made it wait for the GIL, which the loop thread or any busy Python thread
// holds for up to the switch interval, stalling every other client's I/O on
// that worker, and then run Python code there; bench/languages.sh measures
// asyncio's lock+unlock against the core's.)
//
// The wake-up takes one of two forms, chosen per loop:
// - `reader` (Unix, a loop with `add_reader`): the worker writes one byte to
//   a socket pair whose read end the loop watches. No thread but the worker
//   and the loop's own is involved.
// - `threadsafe` (Windows, and any loop whose `add_reader` is missing or
//   raises NotImplementedError, such as the Proactor loop): the worker hands
//   the inbox to one process-wide waker thread, which takes the GIL and calls
//   `loop.call_soon_threadsafe(drain)`. Workers still never wait for the GIL;
//   the waker does, once per signalled batch, for all loops. It uses only the
//   public loop API every loop has, and no task of ours lives on the loop
//   (`asyncio.run` cancels the remaining tasks at exit while user cleanup
//   code may still await our futures, so a reader task would strand them).
//   `ETCDLOCK_PY_ASYNCIO_WAKEUP=threadsafe` selects it on every loop (tests).

/// An outcome waiting to be applied on its loop's thread.
type Settle = Box<dyn for<'py> FnOnce(Python<'py>) + Send>;

/// How the runtime's workers wake one loop.
enum Wake {
    /// A byte on a socket pair the loop watches with `add_reader`.
    #[cfg(unix)]
    Reader {
        tx: UnixStream,
        /// The read end lives as long as the write end: a write never meets
        /// a closed peer (EPIPE, SIGPIPE), even after the loop is gone.
        rx: UnixStream,
    },
    /// `loop.call_soon_threadsafe` from the waker thread; a weak reference
    /// to the loop (the inbox must not keep its loop alive).
    Threadsafe { ev_loop: Py<PyAny> },
}

/// What the runtime's workers share with one loop.
struct Inbox {
    queue: Mutex<Vec<Settle>>,
    /// A wake-up was sent and the loop has not drained since: no more
    /// wake-ups needed until it does.
    signalled: AtomicBool,
    wake: Wake,
}

impl Inbox {
    /// On a runtime worker: queue `s` and wake the loop. No GIL.
    fn push(self: &Arc<Self>, s: Settle) {
        self.queue.locked().push(s);
        if !self.signalled.swap(true, Ordering::SeqCst) {
            match &self.wake {
                // WouldBlock means the buffer is full of wake-ups not yet
                // read: the loop will drain anyway.
                #[cfg(unix)]
                Wake::Reader { tx, .. } => {
                    let _ = (&*tx).write(&[1]);
                }
                Wake::Threadsafe { .. } => waker().send(self.clone()),
            }
        }
    }
}

/// The process-wide thread that wakes `threadsafe` loops.
struct Waker {
    pending: Mutex<Vec<Arc<Inbox>>>,
    ready: Condvar,
}

impl Waker {
    fn send(&self, inbox: Arc<Inbox>) {
        self.pending.locked().push(inbox);
        self.ready.notify_one();
    }

    fn run(&self) {
        loop {
            let batch = {
                let mut pending = self.pending.locked();
                while pending.is_empty() {
                    pending = self.ready.wait(pending).unwrap_or_else(|p| p.into_inner());
                }
                std::mem::take(&mut *pending)
            };
            // Once Python is finalizing there is no loop left to wake.
            let woke = attach_gated(|py| {
                for inbox in batch {
                    let ev_loop = match &inbox.wake {
                        Wake::Threadsafe { ev_loop } => ev_loop,
                        #[cfg(unix)]
                        Wake::Reader { .. } => continue,
                    };
                    // A loop that is gone or closed has nobody awaiting its
                    // futures: its completions are dropped with the inbox.
                    let Ok(ev_loop) = ev_loop.bind(py).call0() else {
                        continue;
                    };
                    if ev_loop.is_none() {
                        continue;
                    }
                    let Ok(drain) =
                        Bound::new(py, _Completions { inbox }).and_then(|c| c.getattr("_drain"))
                    else {
                        continue;
                    };
                    let _ = ev_loop.call_method1("call_soon_threadsafe", (drain,));
                }
            });
            if woke.is_none() {
                return;
            }
        }
    }
}

/// This process's waker thread, started on first use (again in a forked
/// child, which has no copy of its parent's thread).
fn waker() -> &'static Waker {
    static WAKER: Mutex<Option<(u32, &'static Waker)>> = Mutex::new(None);
    let mut slot = WAKER.locked();
    let pid = std::process::id();
    match *slot {
        Some((p, w)) if p == pid => w,
        _ => {
            let w: &'static Waker = Box::leak(Box::new(Waker {
                pending: Mutex::new(Vec::new()),
                ready: Condvar::new(),
            }));
            std::thread::Builder::new()
                .name("etcdlock-wake".into())
                .spawn(move || w.run())
                .expect("spawn the asyncio waker thread");
            *slot = Some((pid, w));
            w
        }
    }
}

/// One event loop's inbox of completions (made by `completions_for`, one
/// per loop, kept as long as the loop lives).
#[pyclass(module = "etcdlock._etcdlock", frozen)]
pub(crate) struct _Completions {
    inbox: Arc<Inbox>,
}

#[pymethods]
impl _Completions {
    /// How this loop is woken: `"reader"` or `"threadsafe"`.
    #[getter]
    fn mode(&self) -> &'static str {
        match self.inbox.wake {
            #[cfg(unix)]
            Wake::Reader { .. } => "reader",
            Wake::Threadsafe { .. } => "threadsafe",
        }
    }

    /// Settle every queued future (on the loop's thread).
    fn _drain(&self, py: Python<'_>) {
        #[cfg(unix)]
        if let Wake::Reader { rx, .. } = &self.inbox.wake {
            let mut buf = [0u8; 64];
            while matches!((&*rx).read(&mut buf), Ok(n) if n == buf.len()) {}
        }
        // Cleared before taking the queue: a push after this point wakes
        // again, so none is left unseen.
        self.inbox.signalled.store(false, Ordering::SeqCst);
        let ready = std::mem::take(&mut *self.inbox.queue.locked());
        for settle in ready {
            settle(py);
        }
    }
}

static INBOXES: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `ETCDLOCK_PY_ASYNCIO_WAKEUP=threadsafe`: every loop woken through
/// `call_soon_threadsafe`, as on Windows.
#[cfg(unix)]
fn threadsafe_forced() -> bool {
    std::env::var_os("ETCDLOCK_PY_ASYNCIO_WAKEUP").is_some_and(|v| v == "threadsafe")
}

/// The `reader` wake-up, registered with the loop; `None` when the loop has
/// no working `add_reader` (or on Windows).
#[cfg(unix)]
fn reader_wake(py: Python<'_>, ev_loop: &Bound<'_, PyAny>) -> PyResult<Option<Arc<Inbox>>> {
    if threadsafe_forced() {
        return Ok(None);
    }
    let (rx, tx) = UnixStream::pair()?;
    rx.set_nonblocking(true)?;
    tx.set_nonblocking(true)?;
    let fd = rx.as_raw_fd();
    let inbox = Arc::new(Inbox {
        queue: Mutex::new(Vec::new()),
        signalled: AtomicBool::new(false),
        wake: Wake::Reader { tx, rx },
    });
    let c = Bound::new(
        py,
        _Completions {
            inbox: inbox.clone(),
        },
    )?;
    match ev_loop.call_method1("add_reader", (fd, c.getattr("_drain")?)) {
        Ok(_) => Ok(Some(inbox)),
        Err(e)
            if e.is_instance_of::<pyo3::exceptions::PyNotImplementedError>(py)
                || e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
fn reader_wake(_py: Python<'_>, _ev_loop: &Bound<'_, PyAny>) -> PyResult<Option<Arc<Inbox>>> {
    Ok(None)
}

/// The running loop's inbox, made and registered with the loop on first use.
fn completions_for(py: Python<'_>, ev_loop: &Bound<'_, PyAny>) -> PyResult<Arc<Inbox>> {
    let inboxes = INBOXES
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(
                py.import("weakref")?
                    .getattr("WeakKeyDictionary")?
                    .call0()?
                    .unbind(),
            )
        })?
        .bind(py);
    if let Ok(c) = inboxes
        .call_method1("get", (ev_loop,))?
        .cast_into::<_Completions>()
    {
        return Ok(c.get().inbox.clone());
    }
    let inbox = match reader_wake(py, ev_loop)? {
        Some(inbox) => inbox,
        None => {
            let weak = py
                .import("weakref")?
                .getattr("ref")?
                .call1((ev_loop,))?
                .unbind();
            Arc::new(Inbox {
                queue: Mutex::new(Vec::new()),
                signalled: AtomicBool::new(false),
                wake: Wake::Threadsafe { ev_loop: weak },
            })
        }
    };
    inboxes.set_item(
        ev_loop,
        _Completions {
            inbox: inbox.clone(),
        },
    )?;
    Ok(inbox)
}

/// How the running loop is woken by completions (`"reader"` or
/// `"threadsafe"`), registering it first if needed. For tests.
#[pyfunction]
pub(crate) fn _completions_mode(py: Python<'_>) -> PyResult<&'static str> {
    let ev_loop = py.import("asyncio")?.getattr("get_running_loop")?.call0()?;
    let inbox = completions_for(py, &ev_loop)?;
    Ok(_Completions { inbox }.mode())
}

/// Cancels the core task when its asyncio future is cancelled (dropping a lock
/// future removes the waiter key; a guard acquired too late is released).
#[pyclass(module = "etcdlock._etcdlock", frozen)]
pub(crate) struct _Canceller {
    pub(crate) abort: etcdlock::runtime::Started,
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
/// `convert` runs on the loop's thread.
pub(crate) fn to_asyncio<T, F, C>(py: Python<'_>, fut: F, convert: C) -> PyResult<Py<PyAny>>
where
    F: Future<Output = etcdlock::Result<T>> + Send + 'static,
    T: Send + 'static,
    C: for<'py> FnOnce(Python<'py>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    let get_loop = GET_RUNNING_LOOP
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("asyncio")?.getattr("get_running_loop")?.unbind())
        })?
        .bind(py);
    let ev_loop = get_loop.call0()?;
    let inbox = completions_for(py, &ev_loop)?;
    let pyfut = ev_loop.call_method0("create_future")?;
    let fut_ref = pyfut.clone().unbind();
    let settle = move |res: etcdlock::Result<T>| {
        inbox.push(Box::new(move |py: Python<'_>| {
            let fut = fut_ref.bind(py);
            // A cancelled future is done: nobody waits for the outcome.
            if fut
                .call_method0("done")
                .and_then(|d| d.is_truthy())
                .unwrap_or(true)
            {
                return;
            }
            // A panic in `convert` fails this future (Internal), never the
            // loop's other completions.
            let value = res.map_err(|e| to_pyerr(py, &e)).and_then(|v| {
                catch_unwind(AssertUnwindSafe(|| convert(py, v)))
                    .unwrap_or_else(|p| Err(to_pyerr(py, &bridge::panic_error(p))))
            });
            let r = match value {
                Ok(v) => fut.call_method1("set_result", (v,)),
                Err(e) => fut.call_method1("set_exception", (e.into_value(py),)),
            };
            if let Err(e) = r {
                e.write_unraisable(py, Some(fut));
            }
        }));
    };
    let abort = bridge::spawn_complete(fut, settle).map_err(|e| to_pyerr(py, &e))?;
    pyfut.call_method1("add_done_callback", (_Canceller { abort },))?;
    Ok(pyfut.unbind())
}
