//! `etcdlock._etcdlock`: the native half of the Python binding.
//!
//! Thin by design: argument conversion, error mapping and the two ways Python
//! waits (a thread parked with the GIL released, or an asyncio future). All lock
//! logic is in the `etcdlock` core crate, and everything runs on the core's one
//! PID-aware runtime (`etcdlock::runtime`), never on a second one.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcdlock::{Client, ClientOptions, ErrorCode, Guard, GuardState, LockOptions, TlsOptions};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyString, PyType};

create_exception!(
    etcdlock,
    LockError,
    PyException,
    "Base class of every etcdlock error. `.code` is the core error code name, `.message` the message, `.reason` the loss reason (LockLostError) or None."
);
create_exception!(etcdlock, InvalidArgumentError, LockError, "Bad argument: empty or oversized name, TTL out of range, bad endpoint, bad TLS file, misuse (code InvalidArgument).");
create_exception!(etcdlock, WouldBlockError, LockError, "try-lock found the lock held (code WouldBlock); `try_lock` returns None instead.");
create_exception!(etcdlock, LockLostError, LockError, "The hold ended without unlock; `.reason` says why (code LockLost).");
create_exception!(etcdlock, CancelledError, LockError, "The wait was cancelled (code Cancelled).");
create_exception!(etcdlock, UnavailableError, LockError, "etcd unreachable after retries; the message names the endpoints (code Unavailable).");
create_exception!(etcdlock, AuthFailedError, LockError, "etcd rejected the credentials (code AuthFailed).");
create_exception!(etcdlock, PermissionDeniedError, LockError, "etcd RBAC denies access to the key range (code PermissionDenied).");
create_exception!(etcdlock, ClosedError, LockError, "The client was closed, or was created before fork() in a parent process (code Closed).");
create_exception!(etcdlock, InternalError, LockError, "A bug in etcdlock, reported instead of crashing (code Internal).");

/// `etcdlock.TimeoutError` and `etcdlock.NotHeldError` also subclass the
/// builtin they are named after or mean (`TimeoutError`, `RuntimeError`), so
/// `except TimeoutError:` catches a lock timeout as it does a socket one and
/// the name shadows no builtin it does not extend. Built once with `type()`
/// (two bases; `create_exception!` takes one).
static TIMEOUT_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static NOT_HELD_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn two_base_exception<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyType>>,
    name: &str,
    builtin: &str,
    doc: &str,
) -> Bound<'py, PyType> {
    cell.get_or_init(py, || {
        let make = || -> PyResult<Py<PyType>> {
            let builtins = py.import("builtins")?;
            let bases = (py.get_type::<LockError>(), builtins.getattr(builtin)?);
            let dict = pyo3::types::PyDict::new(py);
            dict.set_item("__module__", "etcdlock")?;
            dict.set_item("__doc__", doc)?;
            Ok(builtins.getattr("type")?.call1((name, bases, dict))?.cast_into::<PyType>()?.unbind())
        };
        make().expect("creating an etcdlock exception class")
    })
    .bind(py)
    .clone()
}

fn timeout_error(py: Python<'_>) -> Bound<'_, PyType> {
    two_base_exception(
        py,
        &TIMEOUT_ERROR,
        "TimeoutError",
        "TimeoutError",
        "The lock was not acquired within the deadline (code Timeout). Also a builtin TimeoutError.",
    )
}

fn not_held_error(py: Python<'_>) -> Bound<'_, PyType> {
    two_base_exception(
        py,
        &NOT_HELD_ERROR,
        "NotHeldError",
        "RuntimeError",
        "Operation on a lock this handle does not hold, e.g. after unlock (code NotHeld). Also a RuntimeError, like releasing an unlocked threading.Lock.",
    )
}

type CoreError = etcdlock::Error;

fn exc_type(py: Python<'_>, code: ErrorCode) -> Bound<'_, PyType> {
    match code {
        ErrorCode::InvalidArgument => py.get_type::<InvalidArgumentError>(),
        ErrorCode::Timeout => timeout_error(py),
        ErrorCode::WouldBlock => py.get_type::<WouldBlockError>(),
        ErrorCode::LockLost => py.get_type::<LockLostError>(),
        ErrorCode::NotHeld => not_held_error(py),
        ErrorCode::Cancelled => py.get_type::<CancelledError>(),
        ErrorCode::Unavailable => py.get_type::<UnavailableError>(),
        ErrorCode::AuthFailed => py.get_type::<AuthFailedError>(),
        ErrorCode::PermissionDenied => py.get_type::<PermissionDeniedError>(),
        ErrorCode::Closed => py.get_type::<ClosedError>(),
        ErrorCode::Internal => py.get_type::<InternalError>(),
    }
}

/// A core error as the matching Python exception, with `.code`, `.message`, `.reason`.
fn to_pyerr(py: Python<'_>, e: &CoreError) -> PyErr {
    let err = PyErr::from_type(exc_type(py, e.code()), e.to_string());
    let v = err.value(py);
    let _ = v.setattr("code", e.code().name());
    let _ = v.setattr("message", e.message());
    let _ = v.setattr("reason", e.loss_reason().map(|r| r.name()));
    err
}

fn invalid(msg: impl Into<String>) -> CoreError {
    CoreError::new(ErrorCode::InvalidArgument, msg)
}

/// Seconds (float) to a Duration. `None` and +inf mean "no bound".
fn opt_secs(what: &str, v: Option<f64>) -> Result<Option<Duration>, CoreError> {
    match v {
        None => Ok(None),
        Some(s) if s.is_nan() || s < 0.0 => Err(invalid(format!("{what} must be a non-negative number of seconds, got {s}"))),
        Some(s) if s > 1e10 => Ok(None),
        Some(s) => Ok(Some(Duration::from_secs_f64(s))),
    }
}

fn pos_secs(what: &str, s: f64) -> Result<Duration, CoreError> {
    if s.is_nan() || s <= 0.0 || s > 1e10 {
        return Err(invalid(format!("{what} must be a positive number of seconds (at most 1e10), got {s}")));
    }
    Ok(Duration::from_secs_f64(s))
}

/// A `str` as UTF-8. A str UTF-8 cannot encode (a lone surrogate, e.g. from
/// `surrogateescape` or a JS/Java-style UTF-16 string) is InvalidArgumentError,
/// never a bare UnicodeEncodeError and never a lossy conversion (which would
/// silently lock or write another name).
fn utf8(s: &Bound<'_, PyString>, what: &str) -> PyResult<String> {
    let py = s.py();
    s.extract::<String>().map_err(|cause| {
        let e = to_pyerr(py, &invalid(format!("{what} is not valid Unicode text (it contains a lone surrogate): {cause}")));
        e.set_cause(py, Some(cause));
        e
    })
}

fn opt_utf8(s: Option<Bound<'_, PyString>>, what: &str) -> PyResult<Option<String>> {
    s.map(|s| utf8(&s, what)).transpose()
}

/// Endpoints (if given) and the other text arguments, in order.
type TextArgs = (Option<Vec<String>>, Vec<Option<String>>);

/// The connect arguments that are text, checked by [`utf8`].
fn text_args(endpoints: Option<Vec<Bound<'_, PyString>>>, strs: [(Option<Bound<'_, PyString>>, &str); 7]) -> PyResult<TextArgs> {
    let endpoints = endpoints.map(|v| v.iter().map(|e| utf8(e, "endpoint")).collect::<PyResult<Vec<_>>>()).transpose()?;
    let strs = strs.into_iter().map(|(s, what)| opt_utf8(s, what)).collect::<PyResult<Vec<_>>>()?;
    Ok((endpoints, strs))
}

/// `str` or `bytes` as bytes; anything else is a TypeError.
fn key_bytes(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(utf8(s, what)?.into_bytes());
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be str or bytes, not {}",
        obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
    )))
}

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
static GATE_CLOSED: AtomicBool = AtomicBool::new(false);
/// Passes taken and not yet returned (calls into Python in progress).
static IN_PYTHON: AtomicUsize = AtomicUsize::new(0);

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
struct Pass;

impl Drop for Pass {
    fn drop(&mut self) {
        HELD.with(|h| h.set(h.get() - 1));
        IN_PYTHON.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A pass, or `None` once the gate is closed. (Counted before the flag is
/// read, and the closer sets the flag before it reads the count: either the
/// closer waits for this pass, or this call sees the gate closed.)
fn pass_gate() -> Option<Pass> {
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
fn attach_gated<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    let _pass = pass_gate()?;
    Python::try_attach(f)
}

/// Close the gate and wait (at most 10 s, with the GIL released) for the
/// calls into Python already past it. Registered with atexit by the package.
#[pyfunction]
fn _close_gate(py: Python<'_>) {
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
fn _gate_after_fork() {
    IN_PYTHON.store(HELD.with(Cell::get), Ordering::SeqCst);
}

const TICK: Duration = Duration::from_millis(100);

/// Park this thread on a core future with the GIL released, waking every
/// 100 ms to let Python run its signal handlers. If one raises (Ctrl-C), the
/// future is dropped — which cancels a lock wait and removes its waiter key —
/// and that exception is raised here.
fn wait<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
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
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| etcdlock::runtime::block_on_interruptible(fut, TICK, check)))
            .unwrap_or_else(|_| Err(CoreError::new(ErrorCode::Internal, "an etcdlock call panicked (a bug); the process is fine")));
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

static BRIDGE: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

fn bridge(py: Python<'_>) -> PyResult<&(Py<PyAny>, Py<PyAny>)> {
    BRIDGE.get_or_try_init(py, || {
        let m = py.import("etcdlock._bridge")?;
        Ok((m.getattr("resolve")?.unbind(), m.getattr("reject")?.unbind()))
    })
}

/// Cancels the core task when its asyncio future is cancelled (dropping a lock
/// future removes the waiter key; a guard acquired too late is released).
#[pyclass(module = "etcdlock._etcdlock", frozen)]
struct _Canceller {
    abort: tokio::task::AbortHandle,
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
fn to_asyncio<T, F, C>(py: Python<'_>, fut: F, convert: C) -> PyResult<Py<PyAny>>
where
    F: Future<Output = etcdlock::Result<T>> + Send + 'static,
    T: Send + 'static,
    C: for<'py> FnOnce(Python<'py>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    let (resolve, reject) = bridge(py)?;
    let (resolve, reject) = (resolve.clone_ref(py), reject.clone_ref(py));
    let ev_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let pyfut = ev_loop.call_method0("create_future")?;
    let rt = etcdlock::runtime::runtime().map_err(|e| to_pyerr(py, &e))?;
    let inner = rt.spawn(fut);
    let abort = inner.abort_handle();
    let (loop_ref, fut_ref) = (ev_loop.unbind(), pyfut.clone().unbind());
    rt.spawn(async move {
        let res = match inner.await {
            Ok(r) => r,
            Err(je) if je.is_cancelled() => return,
            Err(_) => Err(CoreError::new(ErrorCode::Internal, "the etcdlock task panicked")),
        };
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
    });
    pyfut.call_method1("add_done_callback", (_Canceller { abort },))?;
    Ok(pyfut.unbind())
}

fn none(py: Python<'_>) -> Py<PyAny> {
    py.None()
}

/// Options as given from Python, over the `ETCDLOCK_*` environment defaults.
#[allow(clippy::too_many_arguments)]
fn build_options(
    endpoints: Option<Vec<Bound<'_, PyString>>>,
    ttl: Option<&Bound<'_, PyAny>>,
    namespace: Option<Bound<'_, PyString>>,
    username: Option<Bound<'_, PyString>>,
    password: Option<Bound<'_, PyString>>,
    ca: Option<Bound<'_, PyString>>,
    cert: Option<Bound<'_, PyString>>,
    key: Option<Bound<'_, PyString>>,
    domain: Option<Bound<'_, PyString>>,
    connect_timeout: Option<f64>,
    request_timeout: Option<f64>,
    margin: Option<f64>,
    watch_held_keys: Option<bool>,
) -> PyResult<Result<ClientOptions, CoreError>> {
    let (endpoints, strs) = text_args(
        endpoints,
        [
            (namespace, "namespace"),
            (username, "username"),
            (password, "password"),
            (ca, "ca"),
            (cert, "cert"),
            (key, "key"),
            (domain, "domain"),
        ],
    )?;
    let [namespace, username, password, ca, cert, key, domain]: [Option<String>; 7] =
        strs.try_into().expect("seven text arguments");
    let ttl = match ttl {
        None => None,
        Some(t) if t.is_none() => None,
        Some(t) => {
            if t.is_instance_of::<pyo3::types::PyBool>() || !t.is_instance_of::<pyo3::types::PyInt>() {
                return Err(PyTypeError::new_err(format!(
                    "ttl must be an int (seconds), not {}",
                    t.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                )));
            }
            // Out of i64 range: let the core reject it with its usual message.
            Some(t.extract::<i64>().unwrap_or(i64::MAX))
        }
    };
    let build = || -> Result<ClientOptions, CoreError> {
        // The environment gives defaults for the keys not given here (one rule,
        // in core): a malformed ETCDLOCK_TTL no longer breaks Client(ttl=10).
        let mut given: Vec<&str> = Vec::new();
        for (k, is) in [
            ("connect_timeout", connect_timeout.is_some()),
            ("request_timeout", request_timeout.is_some()),
            ("watch_held_keys", watch_held_keys.is_some()),
            ("endpoints", endpoints.is_some()),
            ("ttl", ttl.is_some()),
            ("namespace", namespace.is_some()),
            ("username", username.is_some()),
            ("password", password.is_some()),
            ("tls_ca", ca.is_some()),
            ("tls_cert", cert.is_some()),
            ("tls_key", key.is_some()),
            ("tls_domain", domain.is_some()),
            ("margin", margin.is_some()),
        ] {
            if is {
                given.push(k);
            }
        }
        let mut o = ClientOptions::from_env_except(&given)?;
        if let Some(e) = endpoints {
            o.endpoints = e;
        }
        if let Some(t) = ttl {
            o.ttl_secs = t;
        }
        if namespace.is_some() {
            o.namespace = namespace;
        }
        if username.is_some() || password.is_some() {
            o.username = username;
            o.password = password;
        }
        if ca.is_some() || cert.is_some() || key.is_some() || domain.is_some() {
            let mut tls = o.tls.take().unwrap_or_default();
            if ca.is_some() {
                tls.ca = ca.map(Into::into);
            }
            if cert.is_some() {
                tls.cert = cert.map(Into::into);
            }
            if key.is_some() {
                tls.key = key.map(Into::into);
            }
            if domain.is_some() {
                tls.domain = domain;
            }
            o.tls = Some(TlsOptions { ..tls });
        }
        if let Some(t) = connect_timeout {
            o.connect_timeout = pos_secs("connect_timeout", t)?;
        }
        if let Some(t) = request_timeout {
            o.request_timeout = pos_secs("request_timeout", t)?;
        }
        if let Some(w) = watch_held_keys {
            o.watch_held_keys = w;
        }
        if let Some(m) = margin {
            // Not clamped: core refuses a margin not below the TTL.
            if m.is_nan() || m < 0.0 {
                return Err(invalid(format!("margin must be a non-negative number of seconds, got {m}")));
            }
            o.margin = Some(
                Duration::try_from_secs_f64(m)
                    .map_err(|_| invalid(format!("margin ({m} s) must be less than the ttl ({} s)", o.ttl_secs)))?,
            );
        }
        Ok(o)
    };
    Ok(build())
}

/// A connection to etcd (the native half of `etcdlock.Client` and
/// `etcdlock.AsyncClient`). Safe to share across threads.
#[pyclass(module = "etcdlock._etcdlock", frozen, weakref)]
struct NativeClient {
    inner: Client,
    pid: u32,
}

#[pymethods]
impl NativeClient {
    /// Connect (blocking, interruptible by Ctrl-C).
    #[staticmethod]
    #[pyo3(signature = (endpoints=None, ttl=None, namespace=None, username=None, password=None, ca=None, cert=None, key=None, domain=None, connect_timeout=None, request_timeout=None, margin=None, watch_held_keys=None))]
    #[allow(clippy::too_many_arguments)]
    fn connect(
        py: Python<'_>,
        endpoints: Option<Vec<Bound<'_, PyString>>>,
        ttl: Option<&Bound<'_, PyAny>>,
        namespace: Option<Bound<'_, PyString>>,
        username: Option<Bound<'_, PyString>>,
        password: Option<Bound<'_, PyString>>,
        ca: Option<Bound<'_, PyString>>,
        cert: Option<Bound<'_, PyString>>,
        key: Option<Bound<'_, PyString>>,
        domain: Option<Bound<'_, PyString>>,
        connect_timeout: Option<f64>,
        request_timeout: Option<f64>,
        margin: Option<f64>,
        watch_held_keys: Option<bool>,
    ) -> PyResult<NativeClient> {
        let opts = build_options(endpoints, ttl, namespace, username, password, ca, cert, key, domain, connect_timeout, request_timeout, margin, watch_held_keys)?
            .map_err(|e| to_pyerr(py, &e))?;
        let inner = wait(py, async move { Client::connect(opts).await })?;
        Ok(NativeClient { inner, pid: std::process::id() })
    }

    /// Connect, as an awaitable of the running asyncio loop.
    #[staticmethod]
    #[pyo3(signature = (endpoints=None, ttl=None, namespace=None, username=None, password=None, ca=None, cert=None, key=None, domain=None, connect_timeout=None, request_timeout=None, margin=None, watch_held_keys=None))]
    #[allow(clippy::too_many_arguments)]
    fn connect_async(
        py: Python<'_>,
        endpoints: Option<Vec<Bound<'_, PyString>>>,
        ttl: Option<&Bound<'_, PyAny>>,
        namespace: Option<Bound<'_, PyString>>,
        username: Option<Bound<'_, PyString>>,
        password: Option<Bound<'_, PyString>>,
        ca: Option<Bound<'_, PyString>>,
        cert: Option<Bound<'_, PyString>>,
        key: Option<Bound<'_, PyString>>,
        domain: Option<Bound<'_, PyString>>,
        connect_timeout: Option<f64>,
        request_timeout: Option<f64>,
        margin: Option<f64>,
        watch_held_keys: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let opts = build_options(endpoints, ttl, namespace, username, password, ca, cert, key, domain, connect_timeout, request_timeout, margin, watch_held_keys)?
            .map_err(|e| to_pyerr(py, &e))?;
        to_asyncio(py, async move { Client::connect(opts).await }, |py, c| {
            Ok(Py::new(py, NativeClient { inner: c, pid: std::process::id() })?.into_any())
        })
    }

    /// Wait for the lock `name`, at most `timeout` seconds if given.
    #[pyo3(signature = (name, timeout=None))]
    fn lock(slf: &Bound<'_, Self>, py: Python<'_>, name: &Bound<'_, PyString>, timeout: Option<f64>) -> PyResult<NativeGuard> {
        let this = slf.get();
        let name = utf8(name, "lock name")?;
        let timeout = opt_secs("timeout", timeout).map_err(|e| to_pyerr(py, &e))?;
        let c = this.inner.clone();
        let g = wait(py, async move { c.lock_with(&name, LockOptions { timeout, cancel: None }).await })?;
        Ok(NativeGuard::new(g, slf.clone().unbind()))
    }

    /// Take the lock if free; None if held.
    fn try_lock(slf: &Bound<'_, Self>, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<Option<NativeGuard>> {
        let (c, name) = (slf.get().inner.clone(), utf8(name, "lock name")?);
        let r = wait(py, async move {
            match c.try_lock(&name).await {
                Ok(g) => Ok(Some(g)),
                Err(e) if e.code() == ErrorCode::WouldBlock => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        Ok(r.map(|g| NativeGuard::new(g, slf.clone().unbind())))
    }

    /// `lock` as an awaitable.
    #[pyo3(signature = (name, timeout=None))]
    fn lock_async(slf: &Bound<'_, Self>, py: Python<'_>, name: &Bound<'_, PyString>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let name = utf8(name, "lock name")?;
        let timeout = opt_secs("timeout", timeout).map_err(|e| to_pyerr(py, &e))?;
        let c = slf.get().inner.clone();
        let me = slf.clone().unbind();
        to_asyncio(py, async move { c.lock_with(&name, LockOptions { timeout, cancel: None }).await }, |py, g| {
            Ok(Py::new(py, NativeGuard::new(g, me))?.into_any())
        })
    }

    /// `try_lock` as an awaitable.
    fn try_lock_async(slf: &Bound<'_, Self>, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<Py<PyAny>> {
        let (c, name) = (slf.get().inner.clone(), utf8(name, "lock name")?);
        let me = slf.clone().unbind();
        to_asyncio(
            py,
            async move {
                match c.try_lock(&name).await {
                    Ok(g) => Ok(Some(g)),
                    Err(e) if e.code() == ErrorCode::WouldBlock => Ok(None),
                    Err(e) => Err(e),
                }
            },
            |py, g| match g {
                Some(g) => Ok(Py::new(py, NativeGuard::new(g, me))?.into_any()),
                None => Ok(none(py)),
            },
        )
    }

    /// Close: revoke the lease (releasing every lock of this client). Idempotent.
    /// In a forked child it only marks the parent's client unusable here.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if self.pid != std::process::id() {
            return Ok(());
        }
        let c = self.inner.clone();
        wait(py, async move {
            c.close().await;
            Ok(())
        })
    }

    /// `close` as an awaitable.
    fn close_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let c = self.inner.clone();
        let same = self.pid == std::process::id();
        to_asyncio(
            py,
            async move {
                if same {
                    c.close().await;
                }
                Ok(())
            },
            |py, ()| Ok(none(py)),
        )
    }

    /// The effective lease TTL in seconds.
    #[getter]
    fn ttl(&self) -> i64 {
        self.inner.ttl()
    }

    /// True after close().
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// The endpoints, comma separated.
    #[getter]
    fn endpoints(&self) -> String {
        self.inner.endpoints().to_string()
    }

    /// The key namespace (prefix), as str.
    #[getter]
    fn namespace(&self) -> String {
        String::from_utf8_lossy(self.inner.namespace()).into_owned()
    }

    /// Core's metrics snapshot as a dict (see `etcdlock.Client.metrics`).
    /// The metrics in Prometheus' text format, with core's one list of names
    /// and `labels` on every series.
    #[pyo3(signature = (labels=Vec::new()))]
    fn prometheus(&self, labels: Vec<(String, String)>) -> String {
        let l: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.inner.metrics().to_prometheus(&l)
    }

    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.inner.metrics();
        let acq = PyDict::new(py);
        for a in m.acquisitions {
            let d = PyDict::new(py);
            d.set_item("count", a.count)?;
            d.set_item("wait_seconds", a.wait_total.as_secs_f64())?;
            acq.set_item(a.result.name(), d)?;
        }
        let lost = PyDict::new(py);
        for (r, n) in m.lost {
            lost.set_item(r.name(), n)?;
        }
        let out = PyDict::new(py);
        out.set_item("acquisitions", acq)?;
        out.set_item("waiting", m.waiting)?;
        out.set_item("held", m.held)?;
        out.set_item("held_seconds", m.held_duration.as_secs_f64())?;
        out.set_item("holds_ended", m.holds_ended)?;
        out.set_item("hold_seconds", m.hold_total.as_secs_f64())?;
        out.set_item("lost", lost)?;
        out.set_item("keepalives", m.keepalives)?;
        out.set_item("keepalive_rtt", m.keepalive_rtt.map(|d| d.as_secs_f64()))?;
        Ok(out)
    }

    // ---- recipes: semaphore, read-write lock, multi-lock, election, status ----

    /// Take one of `permits` permits of the semaphore `name` (a Guard).
    #[pyo3(signature = (name, permits, timeout=None))]
    fn acquire_permit(slf: &Bound<'_, Self>, py: Python<'_>, name: &Bound<'_, PyString>, permits: i64, timeout: Option<f64>) -> PyResult<NativeGuard> {
        let (c, name, opts, permits) = (slf.get().inner.clone(), utf8(name, "semaphore name")?, lock_opts(py, timeout)?, permit_count(py, permits)?);
        let g = wait(py, async move { c.acquire_permit(&name, permits, opts).await })?;
        Ok(NativeGuard::new(g, slf.clone().unbind()))
    }

    /// `acquire_permit` as an awaitable.
    #[pyo3(signature = (name, permits, timeout=None))]
    fn acquire_permit_async(slf: &Bound<'_, Self>, py: Python<'_>, name: &Bound<'_, PyString>, permits: i64, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let (c, name, opts, permits) = (slf.get().inner.clone(), utf8(name, "semaphore name")?, lock_opts(py, timeout)?, permit_count(py, permits)?);
        let me = slf.clone().unbind();
        to_asyncio(py, async move { c.acquire_permit(&name, permits, opts).await }, |py, g| Ok(Py::new(py, NativeGuard::new(g, me))?.into_any()))
    }

    /// Take the read side of the read-write lock `name` (a Guard); `lock` is the write side.
    #[pyo3(signature = (name, timeout=None))]
    fn read_lock(slf: &Bound<'_, Self>, py: Python<'_>, name: &Bound<'_, PyString>, timeout: Option<f64>) -> PyResult<NativeGuard> {
        let (c, name, opts) = (slf.get().inner.clone(), utf8(name, "lock name")?, lock_opts(py, timeout)?);
        let g = wait(py, async move { c.read_lock(&name, opts).await })?;
        Ok(NativeGuard::new(g, slf.clone().unbind()))
    }

    /// `read_lock` as an awaitable.
    #[pyo3(signature = (name, timeout=None))]
    fn read_lock_async(slf: &Bound<'_, Self>, py: Python<'_>, name: &Bound<'_, PyString>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let (c, name, opts) = (slf.get().inner.clone(), utf8(name, "lock name")?, lock_opts(py, timeout)?);
        let me = slf.clone().unbind();
        to_asyncio(py, async move { c.read_lock(&name, opts).await }, |py, g| Ok(Py::new(py, NativeGuard::new(g, me))?.into_any()))
    }

    /// Lock every name in `names` together (a MultiGuard).
    #[pyo3(signature = (names, timeout=None))]
    fn lock_many(slf: &Bound<'_, Self>, py: Python<'_>, names: Vec<Bound<'_, PyString>>, timeout: Option<f64>) -> PyResult<NativeMultiGuard> {
        let (c, names, opts) = (slf.get().inner.clone(), utf8_all(&names)?, lock_opts(py, timeout)?);
        let m = wait(py, async move { c.lock_many(&names.iter().map(String::as_str).collect::<Vec<_>>(), opts).await })?;
        Ok(NativeMultiGuard { m: Arc::new(m), client: slf.clone().unbind() })
    }

    /// `lock_many` as an awaitable.
    #[pyo3(signature = (names, timeout=None))]
    fn lock_many_async(slf: &Bound<'_, Self>, py: Python<'_>, names: Vec<Bound<'_, PyString>>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let (c, names, opts) = (slf.get().inner.clone(), utf8_all(&names)?, lock_opts(py, timeout)?);
        let me = slf.clone().unbind();
        to_asyncio(py, async move { c.lock_many(&names.iter().map(String::as_str).collect::<Vec<_>>(), opts).await }, |py, m| {
            Ok(Py::new(py, NativeMultiGuard { m: Arc::new(m), client: me })?.into_any())
        })
    }

    /// Campaign for leadership of `name` with `value` (a Leadership, which is a Guard).
    #[pyo3(signature = (name, value, timeout=None))]
    fn campaign(slf: &Bound<'_, Self>, py: Python<'_>, name: &Bound<'_, PyString>, value: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<Py<NativeLeadership>> {
        let (c, name, opts, v) = (slf.get().inner.clone(), utf8(name, "election name")?, lock_opts(py, timeout)?, key_bytes(value, "value")?);
        let l = wait(py, async move { c.campaign(&name, v, opts).await })?;
        NativeLeadership::wrap(py, l.into_guard(), slf.clone().unbind())
    }

    /// `campaign` as an awaitable.
    #[pyo3(signature = (name, value, timeout=None))]
    fn campaign_async(slf: &Bound<'_, Self>, py: Python<'_>, name: &Bound<'_, PyString>, value: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let (c, name, opts, v) = (slf.get().inner.clone(), utf8(name, "election name")?, lock_opts(py, timeout)?, key_bytes(value, "value")?);
        let me = slf.clone().unbind();
        to_asyncio(py, async move { c.campaign(&name, v, opts).await }, |py, l| Ok(NativeLeadership::wrap(py, l.into_guard(), me)?.into_any()))
    }

    /// The leader of `name` as (key, value, revision, lease_id), or None.
    fn leader(&self, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<Option<LeaderTuple>> {
        let (c, name) = (self.inner.clone(), utf8(name, "election name")?);
        Ok(wait(py, async move { c.leader(&name).await })?.map(|l| leader_tuple(py, l)))
    }

    /// `leader` as an awaitable.
    fn leader_async(&self, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<Py<PyAny>> {
        let (c, name) = (self.inner.clone(), utf8(name, "election name")?);
        to_asyncio(py, async move { c.leader(&name).await }, |py, l| Ok(l.map(|l| leader_tuple(py, l)).into_pyobject(py)?.into_any().unbind()))
    }

    /// Follow the leadership of `name` (an Observer).
    fn observe(slf: &Bound<'_, Self>, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<NativeObserver> {
        let name = utf8(name, "election name")?;
        let o = slf.get().inner.observe(&name).map_err(|e| to_pyerr(py, &e))?;
        Ok(NativeObserver { o: Arc::new(tokio::sync::Mutex::new(o)), client: slf.clone().unbind() })
    }

    /// Holders and waiters of `name`, whatever kind of lock it is, as a dict.
    fn status<'py>(&self, py: Python<'py>, name: &Bound<'_, PyString>) -> PyResult<Bound<'py, PyDict>> {
        let (c, name) = (self.inner.clone(), utf8(name, "lock name")?);
        let st = wait(py, async move { c.status(&name).await })?;
        status_dict(py, &st)
    }

    /// `status` as an awaitable.
    fn status_async(&self, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<Py<PyAny>> {
        let (c, name) = (self.inner.clone(), utf8(name, "lock name")?);
        to_asyncio(py, async move { c.status(&name).await }, |py, st| Ok(status_dict(py, &st)?.into_any().unbind()))
    }

    /// Every lock under `prefix` (core's `list`), as status dicts.
    fn list<'py>(&self, py: Python<'py>, prefix: &Bound<'_, PyString>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let (c, prefix) = (self.inner.clone(), utf8(prefix, "prefix")?);
        let l = wait(py, async move { c.list(&prefix).await })?;
        l.iter().map(|st| status_dict(py, st)).collect()
    }

    /// `list` as an awaitable.
    fn list_async(&self, py: Python<'_>, prefix: &Bound<'_, PyString>) -> PyResult<Py<PyAny>> {
        let (c, prefix) = (self.inner.clone(), utf8(prefix, "prefix")?);
        to_asyncio(py, async move { c.list(&prefix).await }, |py, l| {
            let out: Vec<Bound<'_, PyDict>> = l.iter().map(|st| status_dict(py, st)).collect::<PyResult<_>>()?;
            Ok(pyo3::types::PyList::new(py, out)?.into_any().unbind())
        })
    }

    /// Release the hold of `name` with fencing token `token`, whoever holds it (core's `release`).
    fn release(&self, py: Python<'_>, name: &Bound<'_, PyString>, token: i64) -> PyResult<bool> {
        let (c, name) = (self.inner.clone(), utf8(name, "lock name")?);
        wait(py, async move { c.release(&name, token).await })
    }

    /// `release` as an awaitable.
    fn release_async(&self, py: Python<'_>, name: &Bound<'_, PyString>, token: i64) -> PyResult<Py<PyAny>> {
        let (c, name) = (self.inner.clone(), utf8(name, "lock name")?);
        to_asyncio(py, async move { c.release(&name, token).await }, |py, b| Ok(pyo3::types::PyBool::new(py, b).to_owned().into_any().unbind()))
    }
}

fn lock_opts(py: Python<'_>, timeout: Option<f64>) -> PyResult<LockOptions> {
    let timeout = opt_secs("timeout", timeout).map_err(|e| to_pyerr(py, &e))?;
    Ok(LockOptions { timeout, cancel: None })
}

fn permit_count(py: Python<'_>, permits: i64) -> PyResult<u32> {
    u32::try_from(permits).map_err(|_| to_pyerr(py, &invalid(format!("permits must be between 1 and {}, got {permits}", etcdlock::MAX_PERMITS))))
}

fn utf8_all(names: &[Bound<'_, PyString>]) -> PyResult<Vec<String>> {
    names.iter().map(|n| utf8(n, "lock name")).collect()
}

/// (key, value, revision, lease_id): `etcdlock.Leader`'s fields.
type LeaderTuple = (String, Py<PyBytes>, i64, i64);

fn leader_tuple(py: Python<'_>, l: etcdlock::Leader) -> LeaderTuple {
    (String::from_utf8_lossy(&l.key).into_owned(), PyBytes::new(py, &l.value).unbind(), l.revision, l.lease_id)
}

fn status_dict<'py>(py: Python<'py>, st: &etcdlock::Status) -> PyResult<Bound<'py, PyDict>> {
    let one = |c: &etcdlock::Contender| -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let (kind, permits) = match c.kind {
            etcdlock::ContenderKind::Exclusive => ("exclusive", None),
            etcdlock::ContenderKind::Reader => ("reader", None),
            etcdlock::ContenderKind::Permit(n) => ("permit", Some(n)),
        };
        d.set_item("key", &c.key)?;
        d.set_item("kind", kind)?;
        d.set_item("permits", permits)?;
        d.set_item("holds", c.holds)?;
        d.set_item("lease_id", c.lease_id)?;
        d.set_item("ttl_remaining", c.ttl_remaining)?;
        d.set_item("fencing_token", c.create_revision)?;
        d.set_item("owner", c.owner.as_deref())?;
        d.set_item("age", c.age_ms.map(|ms| ms as f64 / 1000.0))?;
        d.set_item("value", PyBytes::new(py, &c.value))?;
        d.set_item("host", c.host.as_deref())?;
        d.set_item("pid", c.pid)?;
        d.set_item("language", c.language.as_deref())?;
        d.set_item("local_waiters", c.local_waiters)?;
        d.set_item("foreign", c.foreign)?;
        Ok(d)
    };
    let out = PyDict::new(py);
    out.set_item("name", &st.name)?;
    out.set_item("kind", st.kind.map(|k| k.name()))?;
    out.set_item("revision", st.revision)?;
    out.set_item("holders", st.holders.iter().map(one).collect::<PyResult<Vec<_>>>()?)?;
    out.set_item("waiters", st.waiters.iter().map(one).collect::<PyResult<Vec<_>>>()?)?;
    Ok(out)
}

/// Leadership won by `campaign`: a Guard (fencing token, loss signal, guarded
/// operations, `with`) plus `proclaim` and `resign`.
#[pyclass(module = "etcdlock", name = "Leadership", extends = NativeGuard, frozen)]
struct NativeLeadership {}

impl NativeLeadership {
    fn wrap(py: Python<'_>, g: Guard, client: Py<NativeClient>) -> PyResult<Py<NativeLeadership>> {
        Py::new(py, PyClassInitializer::from(NativeGuard::new(g, client)).add_subclass(NativeLeadership {}))
    }
}

#[pymethods]
impl NativeLeadership {
    /// Announce a new value as leader; LockLostError if we no longer lead.
    fn proclaim(slf: &Bound<'_, Self>, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (g, v) = (slf.as_super().get().g.clone(), key_bytes(value, "value")?);
        wait(py, async move { g.set_value(v).await })
    }

    /// `proclaim` as an awaitable.
    fn proclaim_async(slf: &Bound<'_, Self>, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let (g, v) = (slf.as_super().get().g.clone(), key_bytes(value, "value")?);
        to_asyncio(py, async move { g.set_value(v).await }, |py, ()| Ok(none(py)))
    }

    /// Give up leadership (the next candidate leads); same as `unlock`.
    fn resign(slf: &Bound<'_, Self>, py: Python<'_>) -> PyResult<()> {
        slf.as_super().get().unlock(py)
    }

    /// `resign` as an awaitable.
    fn resign_async(slf: &Bound<'_, Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        slf.as_super().get().unlock_async(py)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> String {
        slf.as_super().get().__repr__().replace("etcdlock.Guard", "etcdlock.Leadership")
    }
}

/// Several locks held together (see `etcdlock.MultiGuard` in the stubs).
#[pyclass(module = "etcdlock", name = "MultiGuard", frozen)]
struct NativeMultiGuard {
    m: Arc<etcdlock::MultiGuard>,
    #[allow(dead_code)]
    client: Py<NativeClient>,
}

async fn multi_lost_for(m: Arc<etcdlock::MultiGuard>, timeout: Option<Duration>) -> etcdlock::Result<Option<(String, &'static str)>> {
    let fut = async { m.wait_lost().await.map(|(n, l)| (n, l.reason.name())) };
    Ok(match timeout {
        Some(t) => tokio::time::timeout(t, fut).await.unwrap_or(None),
        None => fut.await,
    })
}

#[pymethods]
impl NativeMultiGuard {
    /// The lock names, in the order given.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.m.guards().iter().map(|g| g.name().to_string()).collect()
    }

    /// Our key on each lock.
    #[getter]
    fn keys(&self) -> Vec<String> {
        self.m.guards().iter().map(Guard::key).collect()
    }

    /// The fencing token on each lock (all equal: the keys were created in one Txn).
    #[getter]
    fn fencing_tokens(&self) -> Vec<i64> {
        self.m.guards().iter().map(Guard::fencing_token).collect()
    }

    /// True while every lock is held.
    #[getter]
    fn is_held(&self) -> bool {
        self.m.is_held()
    }

    /// (name, reason) of the first lock lost, or None.
    #[getter]
    fn loss(&self) -> Option<(String, &'static str)> {
        self.m.guards().iter().find_map(|g| g.loss().map(|l| (g.name().to_string(), l.reason.name())))
    }

    /// Block until one lock is lost: its (name, reason); None on a normal
    /// release or after `timeout` seconds.
    #[pyo3(signature = (timeout=None))]
    fn wait_lost(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<(String, &'static str)>> {
        let t = opt_secs("timeout", timeout).map_err(|e| to_pyerr(py, &e))?;
        wait(py, multi_lost_for(self.m.clone(), t))
    }

    /// `wait_lost` as an awaitable.
    #[pyo3(signature = (timeout=None))]
    fn wait_lost_async(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let t = opt_secs("timeout", timeout).map_err(|e| to_pyerr(py, &e))?;
        to_asyncio(py, multi_lost_for(self.m.clone(), t), |py, l| Ok(l.into_pyobject(py)?.into_any().unbind()))
    }

    /// Release every lock (all are tried; the first error is raised).
    fn unlock(&self, py: Python<'_>) -> PyResult<()> {
        let m = self.m.clone();
        wait(py, async move { m.unlock().await })
    }

    /// `unlock` as an awaitable.
    fn unlock_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let m = self.m.clone();
        to_asyncio(py, async move { m.unlock().await }, |py, ()| Ok(none(py)))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(&self, py: Python<'_>, exc_type: Option<&Bound<'_, PyAny>>, _exc: Option<&Bound<'_, PyAny>>, _tb: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let r = self.unlock(py);
        match exc_type {
            Some(t) if !t.is_none() => Ok(()),
            _ => r,
        }
    }

    fn __repr__(&self) -> String {
        format!("<etcdlock.MultiGuard names={:?} held={}>", self.names(), self.m.is_held())
    }
}

/// Leadership changes of one election (see `etcdlock.Observer`).
#[pyclass(module = "etcdlock._etcdlock", name = "NativeObserver", frozen)]
struct NativeObserver {
    o: Arc<tokio::sync::Mutex<etcdlock::Observer>>,
    #[allow(dead_code)]
    client: Py<NativeClient>,
}

async fn observe_next(o: Arc<tokio::sync::Mutex<etcdlock::Observer>>, timeout: Option<Duration>) -> etcdlock::Result<Option<etcdlock::Leader>> {
    let fut = async move { o.lock().await.next().await };
    match timeout {
        Some(t) => tokio::time::timeout(t, fut)
            .await
            .unwrap_or_else(|_| Err(CoreError::new(ErrorCode::Timeout, "no leadership change within the timeout"))),
        None => fut.await,
    }
}

#[pymethods]
impl NativeObserver {
    /// The next leadership state (a leader tuple, or None: no leader); the
    /// first call returns the current state. TimeoutError after `timeout`.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<LeaderTuple>> {
        let t = opt_secs("timeout", timeout).map_err(|e| to_pyerr(py, &e))?;
        Ok(wait(py, observe_next(self.o.clone(), t))?.map(|l| leader_tuple(py, l)))
    }

    /// `next` as an awaitable.
    #[pyo3(signature = (timeout=None))]
    fn next_async(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let t = opt_secs("timeout", timeout).map_err(|e| to_pyerr(py, &e))?;
        to_asyncio(py, observe_next(self.o.clone(), t), |py, l| Ok(l.map(|l| leader_tuple(py, l)).into_pyobject(py)?.into_any().unbind()))
    }
}

fn state_name(s: GuardState) -> &'static str {
    match s {
        GuardState::Held => "held",
        GuardState::Released => "released",
        GuardState::Lost(_) => "lost",
    }
}

/// A held lock (see `etcdlock.Guard` in the stubs for the user docs).
#[pyclass(module = "etcdlock", name = "Guard", frozen, subclass)]
struct NativeGuard {
    g: Arc<Guard>,
    /// The client object it came from, kept alive (and reachable for the
    /// exit hook that closes clients) as long as the guard is.
    #[allow(dead_code)]
    client: Py<NativeClient>,
}

impl NativeGuard {
    fn new(g: Guard, client: Py<NativeClient>) -> NativeGuard {
        NativeGuard { g: Arc::new(g), client }
    }
}

#[pymethods]
impl NativeGuard {
    /// The lock name.
    #[getter]
    fn name(&self) -> String {
        self.g.name().to_string()
    }

    /// Our key in etcd (with the namespace), e.g. "orders/694d7a3e4b2c8f05".
    #[getter]
    fn key(&self) -> String {
        self.g.key()
    }

    /// The session's lease id.
    #[getter]
    fn lease_id(&self) -> i64 {
        self.g.lease_id()
    }

    /// The fencing token (our key's create_revision); strictly increases from
    /// one holder of a lock to the next.
    #[getter]
    fn fencing_token(&self) -> i64 {
        self.g.fencing_token()
    }

    /// True while held: not unlocked, not lost, inside the local validity window.
    #[getter]
    fn is_held(&self) -> bool {
        self.g.is_held()
    }

    /// "held", "released" or "lost".
    #[getter]
    fn state(&self) -> &'static str {
        state_name(self.g.state())
    }

    /// Why the hold was lost ("LeaseExpired", "KeyDeleted", "ConnectionLost",
    /// "ClientClosed"), or None.
    #[getter]
    fn loss_reason(&self) -> Option<&'static str> {
        self.g.loss().map(|l| l.reason.name())
    }

    /// An Event-like view of the loss: `.is_set()`, `.wait(timeout)`, `.reason`.
    #[getter]
    fn lost(&self) -> LostEvent {
        LostEvent { g: self.g.clone() }
    }

    /// Release the lock. Idempotent; raises LockLostError if the hold had been
    /// lost before (the critical section may not have been protected to its end).
    fn unlock(&self, py: Python<'_>) -> PyResult<()> {
        let g = self.g.clone();
        wait(py, async move { g.unlock().await })
    }

    /// Guarded put: applied by etcd only while we hold the lock.
    fn put(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (k, v) = (key_bytes(key, "key")?, key_bytes(value, "value")?);
        let g = self.g.clone();
        wait(py, async move { g.put(k, v).await })
    }

    /// Guarded get: the value as bytes, or None if the key does not exist.
    fn get(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyBytes>>> {
        let k = key_bytes(key, "key")?;
        let g = self.g.clone();
        let v = wait(py, async move { g.get(k).await })?;
        Ok(v.map(|v| PyBytes::new(py, &v).unbind()))
    }

    /// Guarded delete: True if the key existed.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = key_bytes(key, "key")?;
        let g = self.g.clone();
        wait(py, async move { g.delete(k).await })
    }

    /// `unlock` as an awaitable.
    fn unlock_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let g = self.g.clone();
        to_asyncio(py, async move { g.unlock().await }, |py, ()| Ok(none(py)))
    }

    /// `put` as an awaitable.
    fn put_async(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let (k, v) = (key_bytes(key, "key")?, key_bytes(value, "value")?);
        let g = self.g.clone();
        to_asyncio(py, async move { g.put(k, v).await }, |py, ()| Ok(none(py)))
    }

    /// `get` as an awaitable.
    fn get_async(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let k = key_bytes(key, "key")?;
        let g = self.g.clone();
        to_asyncio(py, async move { g.get(k).await }, |py, v| {
            Ok(match v {
                Some(v) => PyBytes::new(py, &v).into_any().unbind(),
                None => none(py),
            })
        })
    }

    /// `delete` as an awaitable.
    fn delete_async(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let k = key_bytes(key, "key")?;
        let g = self.g.clone();
        to_asyncio(py, async move { g.delete(k).await }, |py, d| Ok(pyo3::types::PyBool::new(py, d).to_owned().into_any().unbind()))
    }

    /// Call `callback(reason)` once if the hold is lost (not on a normal
    /// release). It runs on a fresh thread (not the caller's, not a runtime
    /// thread), so it may call blocking etcdlock methods. If the hold is
    /// already lost, it is called soon after registration. At interpreter
    /// exit a callback still running delays the exit until it returns (at
    /// most 10 s); one not yet started then is skipped.
    fn on_lost(&self, callback: Py<PyAny>) -> PyResult<()> {
        // Refuse a non-callable now, not as an unraisable error on a thread
        // at the moment the hold is lost (or never, if it is not).
        Python::attach(|py| -> PyResult<()> {
            let cb = callback.bind(py);
            if !cb.is_callable() {
                return Err(PyTypeError::new_err(format!(
                    "on_lost() needs a callable, not {}",
                    cb.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                )));
            }
            Ok(())
        })?;
        // Core's owned loss signal: it does not keep the guard alive, and it
        // sees a loss already past its deadline that no task has marked yet.
        let mut signal = self.g.lost_signal();
        let fire = move |reason: &'static str| {
            std::thread::spawn(move || {
                attach_gated(|py| {
                    if let Err(e) = callback.call1(py, (reason,)) {
                        e.write_unraisable(py, None);
                    }
                });
            });
        };
        let rt = Python::attach(|py| etcdlock::runtime::runtime().map_err(|e| to_pyerr(py, &e)))?;
        rt.spawn(async move {
            if let Some(l) = signal.wait().await {
                fire(l.reason.name());
            }
        });
        Ok(())
    }

    /// Seconds of validity left while the keep-alive renewal is failing (no
    /// acknowledgement for an interval past when one was due), else None. A
    /// failing hold is still held: pause guarded work, do not assume it lost.
    #[getter]
    fn renewal_failing(&self) -> Option<f64> {
        match self.g.renewal() {
            etcdlock::Renewal::Failing { valid_until } if self.g.is_held() => {
                Some(valid_until.saturating_duration_since(Instant::now()).as_secs_f64())
            }
            _ => None,
        }
    }

    /// Call `callback(failing, seconds_left)` at each change of the renewal:
    /// `(True, s)` when it starts failing with `s` seconds of validity left,
    /// `(False, None)` when a keep-alive gets through again; until the hold
    /// ends (released or lost). Calls run in order, each on a fresh thread
    /// (as `on_lost`'s), so they may call blocking etcdlock methods.
    fn on_renewal(&self, callback: Py<PyAny>) -> PyResult<()> {
        Python::attach(|py| -> PyResult<()> {
            let cb = callback.bind(py);
            if !cb.is_callable() {
                return Err(PyTypeError::new_err(format!(
                    "on_renewal() needs a callable, not {}",
                    cb.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                )));
            }
            Ok(())
        })?;
        let callback = Arc::new(callback);
        let mut changes = self.g.renewal_changes();
        let mut ended = self.g.lost_signal();
        let rt = Python::attach(|py| etcdlock::runtime::runtime().map_err(|e| to_pyerr(py, &e)))?;
        rt.spawn(async move {
            // Each call waits for the one before it: callbacks see changes in order.
            let mut prev: Option<std::thread::JoinHandle<()>> = None;
            loop {
                tokio::select! {
                    _ = ended.wait() => break,
                    r = changes.changed() => {
                        if r.is_err() {
                            break;
                        }
                        let arg = match *changes.borrow_and_update() {
                            etcdlock::Renewal::Ok => (false, None),
                            etcdlock::Renewal::Failing { valid_until } => {
                                (true, Some(valid_until.saturating_duration_since(Instant::now()).as_secs_f64()))
                            }
                        };
                        let (cb, before) = (callback.clone(), prev.take());
                        prev = Some(std::thread::spawn(move || {
                            if let Some(b) = before {
                                let _ = b.join();
                            }
                            attach_gated(|py| {
                                if let Err(e) = cb.call1(py, arg) {
                                    e.write_unraisable(py, None);
                                }
                            });
                        }));
                    }
                }
            }
        });
        Ok(())
    }

    /// `with guard:` unlocks at the end of the block. An unlock error
    /// (LockLostError) is raised only if the block itself raised nothing.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        // Returns None (never suppresses the block's exception).
        let r = self.unlock(py);
        match exc_type {
            Some(t) if !t.is_none() => Ok(()),
            _ => r,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "<etcdlock.Guard name={:?} key={:?} fencing_token={} state={}>",
            self.g.name(),
            self.g.key(),
            self.g.fencing_token(),
            state_name(self.g.state())
        )
    }
}

/// Event-like view of a guard's loss, in the shape of `threading.Event`.
#[pyclass(module = "etcdlock", name = "LostEvent", frozen)]
struct LostEvent {
    g: Arc<Guard>,
}

async fn wait_lost_for(g: Arc<Guard>, timeout: Option<Duration>) -> etcdlock::Result<bool> {
    let fut = async { g.wait_lost().await.is_some() };
    Ok(match timeout {
        Some(t) => tokio::time::timeout(t, fut).await.unwrap_or(false),
        None => fut.await,
    })
}

#[pymethods]
impl LostEvent {
    /// True once the hold is lost.
    fn is_set(&self) -> bool {
        self.g.loss().is_some()
    }

    /// The loss reason name, or None.
    #[getter]
    fn reason(&self) -> Option<&'static str> {
        self.g.loss().map(|l| l.reason.name())
    }

    /// Block until the hold is lost (True) or `timeout` seconds pass (False).
    /// Returns False at once when the lock was released normally.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let t = opt_secs("timeout", timeout).map_err(|e| to_pyerr(py, &e))?;
        let g = self.g.clone();
        wait(py, wait_lost_for(g, t))
    }

    /// `wait` as an awaitable.
    #[pyo3(signature = (timeout=None))]
    fn wait_async(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let t = opt_secs("timeout", timeout).map_err(|e| to_pyerr(py, &e))?;
        let g = self.g.clone();
        to_asyncio(py, wait_lost_for(g, t), |py, b| Ok(pyo3::types::PyBool::new(py, b).to_owned().into_any().unbind()))
    }

    fn __repr__(&self) -> String {
        match self.g.loss() {
            Some(l) => format!("<etcdlock.LostEvent set reason={}>", l.reason.name()),
            None => "<etcdlock.LostEvent unset>".to_string(),
        }
    }
}

fn url(e: &str) -> String {
    if e.contains("://") {
        e.to_string()
    } else {
        format!("http://{e}")
    }
}

/// Benchmark floor (`etcdlock::bench_floor::txn_delete`): `n` rounds of the
/// raw etcd round trips an uncontended lock + unlock costs (one Txn that puts
/// a key with a lease and reads the prefix's first key, then one Delete), with
/// a plain etcd client on the same runtime. Returns the per-round times in nanoseconds.
#[pyfunction]
fn _raw_floor(py: Python<'_>, endpoints: Vec<String>, n: usize) -> PyResult<Vec<u64>> {
    let urls: Vec<String> = endpoints.iter().map(|e| url(e)).collect();
    wait(py, async move {
        let v = etcdlock::bench_floor::txn_delete(&urls, n).await?;
        Ok(v.iter().map(|d| d.as_nanos() as u64).collect())
    })
}

/// Benchmark reference (`etcdlock::bench_floor::lock_unlock`): `n` uncontended
/// lock + unlock rounds of the Rust core itself (no Python in the loop), in nanoseconds.
#[pyfunction]
fn _core_bench(py: Python<'_>, endpoints: Vec<String>, n: usize) -> PyResult<Vec<u64>> {
    wait(py, async move {
        let c = Client::connect(ClientOptions::new(endpoints)).await?;
        let name = format!("bench-core-{}", std::process::id());
        let out = etcdlock::bench_floor::lock_unlock(&c, &name, n).await;
        c.close().await;
        Ok(out?.iter().map(|d| d.as_nanos() as u64).collect())
    })
}

/// The native module.
#[pymodule]
fn _etcdlock(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    etcdlock::set_language("python");
    m.add("LockError", py.get_type::<LockError>())?;
    py.get_type::<LockError>().setattr("code", py.None())?;
    py.get_type::<LockError>().setattr("message", "")?;
    py.get_type::<LockError>().setattr("reason", py.None())?;
    let mut names = Vec::new();
    for code in ErrorCode::ALL {
        let ty = exc_type(py, code);
        ty.setattr("code", code.name())?;
        let cls_name: String = ty.getattr("__name__")?.extract()?;
        m.add(cls_name.as_str(), ty)?;
        names.push((code.name(), code as i32, cls_name));
    }
    m.add("ERROR_CODES", names)?;
    m.add("LOSS_REASONS", vec!["LeaseExpired", "KeyDeleted", "ConnectionLost", "ClientClosed"])?;
    m.add("MAX_NAME_LEN", etcdlock::MAX_NAME_LEN)?;
    m.add("MAX_TTL_SECS", etcdlock::MAX_TTL_SECS)?;
    m.add_class::<NativeClient>()?;
    m.add_class::<NativeGuard>()?;
    m.add_class::<LostEvent>()?;
    m.add_class::<NativeLeadership>()?;
    m.add_class::<NativeMultiGuard>()?;
    m.add_class::<NativeObserver>()?;
    m.add("MAX_PERMITS", etcdlock::MAX_PERMITS)?;
    m.add("MAX_MULTI", etcdlock::MAX_MULTI)?;
    m.add_class::<_Canceller>()?;
    m.add_function(wrap_pyfunction!(_close_gate, m)?)?;
    m.add_function(wrap_pyfunction!(_gate_after_fork, m)?)?;
    m.add_function(wrap_pyfunction!(_raw_floor, m)?)?;
    m.add_function(wrap_pyfunction!(_core_bench, m)?)?;
    Ok(())
}
