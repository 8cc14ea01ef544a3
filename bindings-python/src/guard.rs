//! `NativeGuard` (etcdlock.Guard) and its loss event.

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcdlock::Guard;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args::*;
use crate::callbacks::{call_on_fresh_thread, check_callable, renewal_caller};
use crate::client::NativeClient;
use crate::errors::*;
use crate::wait::*;

/// A held lock (see `etcdlock.Guard` in the stubs for the user docs).
#[pyclass(module = "etcdlock", name = "Guard", frozen, subclass)]
pub(crate) struct NativeGuard {
    pub(crate) g: SharedGuard,
    /// The client object it came from, kept alive (and reachable for the
    /// exit hook that closes clients) as long as the guard is.
    #[allow(dead_code)]
    pub(crate) client: Py<NativeClient>,
}

impl NativeGuard {
    pub(crate) fn new(g: Guard, client: Py<NativeClient>) -> NativeGuard {
        NativeGuard {
            g: SharedGuard::Own(Arc::new(g)),
            client,
        }
    }
}

/// The guard a `NativeGuard` views: its own, or the leadership of a leader
/// loop's term (shared with the loop, which resigns it when the term ends).
#[derive(Clone)]
pub(crate) enum SharedGuard {
    Own(Arc<Guard>),
    Term(etcdlock::Term),
}

impl std::ops::Deref for SharedGuard {
    type Target = Guard;
    fn deref(&self) -> &Guard {
        match self {
            SharedGuard::Own(g) => g,
            SharedGuard::Term(t) => t.leadership(),
        }
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
        self.g.state().name()
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
        LostEvent {
            of: Hold::One(self.g.clone()),
        }
    }

    /// Release the lock. Idempotent; raises LockLostError if the hold had been
    /// lost before (the critical section may not have been protected to its end).
    pub(crate) fn unlock(&self, py: Python<'_>) -> PyResult<()> {
        let g = self.g.clone();
        wait(py, async move { g.unlock().await })
    }

    /// Guarded put: applied by etcd only while we hold the lock.
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
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
    pub(crate) fn unlock_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let g = self.g.clone();
        to_asyncio(py, async move { g.unlock().await }, |py, ()| Ok(none(py)))
    }

    /// `put` as an awaitable.
    fn put_async(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
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
        to_asyncio(py, async move { g.delete(k).await }, |py, d| {
            Ok(pyo3::types::PyBool::new(py, d)
                .to_owned()
                .into_any()
                .unbind())
        })
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
        check_callable(&callback, "on_lost")?;
        // Core's owned loss signal: it does not keep the guard alive, and it
        // sees a loss already past its deadline that no task has marked yet.
        let mut signal = self.g.lost_signal();
        let rt = Python::attach(|py| etcdlock::runtime::runtime().map_err(|e| to_pyerr(py, &e)))?;
        rt.spawn(async move {
            if let Some(l) = signal.wait().await {
                let reason = l.reason.name();
                call_on_fresh_thread(move |py| callback.call1(py, (reason,)));
            }
        });
        Ok(())
    }

    /// Call `callback(reason)` once when the hold ends: `reason` is the loss
    /// reason's name if it was lost, None if it was released (its last
    /// handle unlocked or dropped). On a fresh thread, as `on_lost`'s. For
    /// the binding's own use (the OpenTelemetry hold span).
    fn _on_end(&self, callback: Py<PyAny>) -> PyResult<()> {
        check_callable(&callback, "_on_end")?;
        let mut signal = self.g.lost_signal();
        let rt = Python::attach(|py| etcdlock::runtime::runtime().map_err(|e| to_pyerr(py, &e)))?;
        rt.spawn(async move {
            let reason = signal.wait().await.map(|l| l.reason.name());
            call_on_fresh_thread(move |py| callback.call1(py, (reason,)));
        });
        Ok(())
    }

    /// Seconds of validity left while the keep-alive renewal is failing (no
    /// acknowledgement for an interval past when one was due), else None. A
    /// failing hold is still held: pause guarded work, do not assume it lost.
    #[getter]
    fn renewal_failing(&self) -> Option<f64> {
        seconds_left(self.g.renewal(), self.g.is_held())
    }

    /// Call `callback(failing, seconds_left)` at each change of the renewal:
    /// `(True, s)` when it starts failing with `s` seconds of validity left,
    /// `(False, None)` when a keep-alive gets through again; until the hold
    /// ends (released or lost). Calls run in order, each on a fresh thread
    /// (as `on_lost`'s), so they may call blocking etcdlock methods.
    fn on_renewal(&self, callback: Py<PyAny>) -> PyResult<()> {
        check_callable(&callback, "on_renewal")?;
        etcdlock::bridge::follow_renewal(&self.g, renewal_caller(callback), || {})
            .map_err(|e| Python::attach(|py| to_pyerr(py, &e)))?;
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

    pub(crate) fn __repr__(&self) -> String {
        format!(
            "<etcdlock.Guard name={:?} key={:?} fencing_token={} state={}>",
            self.g.name(),
            self.g.key(),
            self.g.fencing_token(),
            self.g.state().name()
        )
    }
}

/// Event-like view of a guard's loss, in the shape of `threading.Event`.
///
/// It views one guard, or a multi guard: then it is set once any of its locks
/// is lost, and `reason` is the reason of the first lock lost in name order.
#[pyclass(module = "etcdlock", name = "LostEvent", frozen)]
pub(crate) struct LostEvent {
    pub(crate) of: Hold,
}

/// What a `LostEvent` views.
#[derive(Clone)]
pub(crate) enum Hold {
    One(SharedGuard),
    Many(Arc<etcdlock::MultiGuard>),
}

pub(crate) async fn wait_lost_for(
    g: SharedGuard,
    timeout: Option<Duration>,
) -> etcdlock::Result<bool> {
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
        self.loss().is_some()
    }

    /// The loss reason name, or None.
    #[getter]
    fn reason(&self) -> Option<&'static str> {
        self.loss().map(|l| l.reason.name())
    }

    /// Block until the hold is lost (True) or `timeout` seconds pass (False).
    /// Returns False at once when the lock was released normally.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let t = timeout_arg(py, timeout)?;
        wait(py, self.lost_for(t))
    }

    /// `wait` as an awaitable.
    #[pyo3(signature = (timeout=None))]
    fn wait_async(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let t = timeout_arg(py, timeout)?;
        to_asyncio(py, self.lost_for(t), |py, b| {
            Ok(pyo3::types::PyBool::new(py, b)
                .to_owned()
                .into_any()
                .unbind())
        })
    }

    pub(crate) fn __repr__(&self) -> String {
        match self.loss() {
            Some(l) => format!("<etcdlock.LostEvent set reason={}>", l.reason.name()),
            None => "<etcdlock.LostEvent unset>".to_string(),
        }
    }
}

impl LostEvent {
    /// The loss of the guard, or of the first lock lost (in name order) of a
    /// multi guard.
    fn loss(&self) -> Option<etcdlock::Loss> {
        match &self.of {
            Hold::One(g) => g.loss(),
            Hold::Many(m) => m.guards().iter().find_map(Guard::loss),
        }
    }

    /// Resolves true once the hold is lost, false on a normal release or
    /// after `timeout`.
    fn lost_for(
        &self,
        timeout: Option<Duration>,
    ) -> impl std::future::Future<Output = etcdlock::Result<bool>> + Send + 'static {
        let of = self.of.clone();
        async move {
            match of {
                Hold::One(g) => wait_lost_for(g, timeout).await,
                Hold::Many(m) => Ok(crate::recipes::multi_lost_for(m, timeout).await?.is_some()),
            }
        }
    }
}

/// Seconds of validity left while `renewal` is failing and the hold is
/// `held`, else None.
pub(crate) fn seconds_left(renewal: etcdlock::Renewal, held: bool) -> Option<f64> {
    validity_left(renewal)
        .filter(|_| held)
        .map(|d| d.as_secs_f64())
}

/// How long a hold stays valid without a renewal while `renewal` is
/// failing, else None.
pub(crate) fn validity_left(renewal: etcdlock::Renewal) -> Option<Duration> {
    match renewal {
        etcdlock::Renewal::Failing { valid_until } => {
            Some(valid_until.saturating_duration_since(Instant::now()))
        }
        etcdlock::Renewal::Ok => None,
    }
}
