//! Core errors as Python exceptions: one class per core error code, each
//! with `.code`, `.message`, `.reason` (the loss reason) and `.retryable`.

use etcdlock::bridge::WireError;
use etcdlock::ErrorCode;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

create_exception!(
    etcdlock,
    LockError,
    PyException,
    "Base class of every etcdlock error. `.code` is the core error code name, `.message` the message, `.reason` the loss reason (LockLostError) or None."
);
create_exception!(etcdlock, InvalidArgumentError, LockError, "Bad argument: empty or oversized name, TTL out of range, bad endpoint, bad TLS file, misuse (code InvalidArgument).");
create_exception!(
    etcdlock,
    WouldBlockError,
    LockError,
    "try-lock found the lock held (code WouldBlock); `try_lock` returns None instead."
);
create_exception!(
    etcdlock,
    LockLostError,
    LockError,
    "The hold ended without unlock; `.reason` says why (code LockLost)."
);
create_exception!(
    etcdlock,
    CancelledError,
    LockError,
    "The wait was cancelled (code Cancelled)."
);
create_exception!(
    etcdlock,
    UnavailableError,
    LockError,
    "etcd unreachable after retries; the message names the endpoints (code Unavailable)."
);
create_exception!(
    etcdlock,
    AuthFailedError,
    LockError,
    "etcd rejected the credentials (code AuthFailed)."
);
create_exception!(
    etcdlock,
    PermissionDeniedError,
    LockError,
    "etcd RBAC denies access to the key range (code PermissionDenied)."
);
create_exception!(
    etcdlock,
    ClosedError,
    LockError,
    "The client was closed, or was created before fork() in a parent process (code Closed)."
);
create_exception!(
    etcdlock,
    InternalError,
    LockError,
    "A bug in etcdlock, reported instead of crashing (code Internal)."
);
create_exception!(
    etcdlock,
    DeadlockError,
    LockError,
    "The wait would close a cycle of clients waiting on each other's holds; the message names the cycle (code Deadlock, only with detect_deadlock=True)."
);

/// `etcdlock.TimeoutError` and `etcdlock.NotHeldError` also subclass the
/// builtin they are named after or mean (`TimeoutError`, `RuntimeError`), so
/// `except TimeoutError:` catches a lock timeout as it does a socket one and
/// the name shadows no builtin it does not extend. Built once with `type()`
/// (two bases; `create_exception!` takes one).
pub(crate) static TIMEOUT_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
pub(crate) static NOT_HELD_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

pub(crate) fn two_base_exception<'py>(
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
            Ok(builtins
                .getattr("type")?
                .call1((name, bases, dict))?
                .cast_into::<PyType>()?
                .unbind())
        };
        make().expect("creating an etcdlock exception class")
    })
    .bind(py)
    .clone()
}

pub(crate) fn timeout_error(py: Python<'_>) -> Bound<'_, PyType> {
    two_base_exception(
        py,
        &TIMEOUT_ERROR,
        "TimeoutError",
        "TimeoutError",
        "The lock was not acquired within the deadline (code Timeout). Also a builtin TimeoutError.",
    )
}

pub(crate) fn not_held_error(py: Python<'_>) -> Bound<'_, PyType> {
    two_base_exception(
        py,
        &NOT_HELD_ERROR,
        "NotHeldError",
        "RuntimeError",
        "Operation on a lock this handle does not hold, e.g. after unlock (code NotHeld). Also a RuntimeError, like releasing an unlocked threading.Lock.",
    )
}

pub(crate) type CoreError = etcdlock::Error;

pub(crate) fn exc_type(py: Python<'_>, code: ErrorCode) -> Bound<'_, PyType> {
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
        ErrorCode::Deadlock => py.get_type::<DeadlockError>(),
    }
}

/// A core error as the matching Python exception, with `.code`, `.message`,
/// `.reason` and `.retryable` from its wire form (the one mapping).
pub(crate) fn to_pyerr(py: Python<'_>, e: &CoreError) -> PyErr {
    let w = WireError::from(e);
    let err = PyErr::from_type(exc_type(py, w.code), e.to_string());
    let v = err.value(py);
    let _ = v.setattr("code", w.code.name());
    let _ = v.setattr("message", w.message);
    let _ = v.setattr("reason", w.reason.map(|r| r.name()));
    let _ = v.setattr("retryable", w.retryable);
    err
}

/// `r` with a core error raised as its Python exception.
pub(crate) fn py_result<T>(py: Python<'_>, r: etcdlock::Result<T>) -> PyResult<T> {
    r.map_err(|e| to_pyerr(py, &e))
}
