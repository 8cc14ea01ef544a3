//! Multi-lock: `NativeClient.lock_many` and the `MultiGuard` it returns.
//!
//! A multi guard has the loss and renewal surface of a guard: it is lost
//! when any of its locks is lost, and its renewal is that of the one
//! session that holds every lock.

use std::sync::Arc;
use std::time::Duration;

use etcdlock::Guard;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::args::*;
use crate::callbacks::{call_on_fresh_thread, check_callable, renewal_caller};
use crate::client::NativeClient;
use crate::errors::*;
use crate::guard::{seconds_left, validity_left, Hold, LostEvent};
use crate::wait::*;

#[pymethods]
impl NativeClient {
    /// Lock every name in `names` together (a MultiGuard).
    #[pyo3(signature = (names, timeout=None))]
    fn lock_many(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        names: Vec<Bound<'_, PyString>>,
        timeout: Option<f64>,
    ) -> PyResult<NativeMultiGuard> {
        let (c, names, opts) = (
            slf.get().inner.clone(),
            utf8_all(&names)?,
            lock_opts(py, timeout)?,
        );
        let m = wait(py, async move {
            c.lock_many(&names.iter().map(String::as_str).collect::<Vec<_>>(), opts)
                .await
        })?;
        Ok(NativeMultiGuard {
            m: Arc::new(m),
            client: slf.clone().unbind(),
        })
    }

    /// `lock_many` as an awaitable.
    #[pyo3(signature = (names, timeout=None))]
    fn lock_many_async(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        names: Vec<Bound<'_, PyString>>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        let (c, names, opts) = (
            slf.get().inner.clone(),
            utf8_all(&names)?,
            lock_opts(py, timeout)?,
        );
        let me = slf.clone().unbind();
        to_asyncio(
            py,
            async move {
                c.lock_many(&names.iter().map(String::as_str).collect::<Vec<_>>(), opts)
                    .await
            },
            |py, m| {
                Ok(Py::new(
                    py,
                    NativeMultiGuard {
                        m: Arc::new(m),
                        client: me,
                    },
                )?
                .into_any())
            },
        )
    }
}

pub(crate) fn utf8_all(names: &[Bound<'_, PyString>]) -> PyResult<Vec<String>> {
    names.iter().map(|n| utf8(n, "lock name")).collect()
}

/// Several locks held together (see `etcdlock.MultiGuard` in the stubs).
#[pyclass(module = "etcdlock", name = "MultiGuard", frozen)]
pub(crate) struct NativeMultiGuard {
    pub(crate) m: Arc<etcdlock::MultiGuard>,
    #[allow(dead_code)]
    pub(crate) client: Py<NativeClient>,
}

pub(crate) async fn multi_lost_for(
    m: Arc<etcdlock::MultiGuard>,
    timeout: Option<Duration>,
) -> etcdlock::Result<Option<(String, &'static str)>> {
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
        self.m
            .guards()
            .iter()
            .map(|g| g.name().to_string())
            .collect()
    }

    /// Our key on each lock.
    #[getter]
    fn keys(&self) -> Vec<String> {
        self.m.guards().iter().map(Guard::key).collect()
    }

    /// The lease every lock is held on (one session holds them all).
    #[getter]
    fn lease_id(&self) -> i64 {
        self.m.guards().first().map_or(0, Guard::lease_id)
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
        self.m
            .guards()
            .iter()
            .find_map(|g| g.loss().map(|l| (g.name().to_string(), l.reason.name())))
    }

    /// The reason of the first lock lost (in name order), or None.
    #[getter]
    fn loss_reason(&self) -> Option<&'static str> {
        self.loss().map(|(_, reason)| reason)
    }

    /// An Event-like view of the loss: set once any lock is lost.
    #[getter]
    fn lost(&self) -> LostEvent {
        LostEvent {
            of: Hold::Many(self.m.clone()),
        }
    }

    /// Call `callback(name, reason)` once if any lock is lost (not on a
    /// normal release), with the name and reason of the first loss seen; on
    /// a fresh thread, as `Guard.on_lost`.
    fn on_lost(&self, callback: Py<PyAny>) -> PyResult<()> {
        check_callable(&callback, "on_lost")?;
        let mut signal = self.m.lost_signal();
        let rt = Python::attach(|py| etcdlock::runtime::runtime().map_err(|e| to_pyerr(py, &e)))?;
        rt.spawn(async move {
            if let Some((name, l)) = signal.wait().await {
                let reason = l.reason.name();
                call_on_fresh_thread(move |py| callback.call1(py, (name, reason)));
            }
        });
        Ok(())
    }

    /// Seconds of validity left while the keep-alive renewal of the locks'
    /// session is failing and every lock is held, else None.
    #[getter]
    fn renewal_failing(&self) -> Option<f64> {
        seconds_left(self.m.renewal(), self.m.is_held())
    }

    /// Call `callback(failing, seconds_left)` at each change of the renewal
    /// of the locks' session (one session holds every lock), in order, each
    /// on a fresh thread, as `Guard.on_renewal`; until the hold ends (every
    /// lock released, or any lost).
    fn on_renewal(&self, callback: Py<PyAny>) -> PyResult<()> {
        check_callable(&callback, "on_renewal")?;
        let mut changed = renewal_caller(callback);
        let (Some(mut changes), mut signal) = (self.m.renewal_changes(), self.m.lost_signal())
        else {
            return Ok(());
        };
        let rt = Python::attach(|py| etcdlock::runtime::runtime().map_err(|e| to_pyerr(py, &e)))?;
        rt.spawn(async move {
            // One wait for the whole watch: it follows every lock of the hold.
            let end = signal.wait();
            tokio::pin!(end);
            loop {
                tokio::select! {
                    _ = &mut end => break,
                    r = changes.changed() => {
                        if r.is_err() {
                            break;
                        }
                        let now = *changes.borrow_and_update();
                        changed(validity_left(now));
                    }
                }
            }
        });
        Ok(())
    }

    /// Block until one lock is lost: its (name, reason); None on a normal
    /// release or after `timeout` seconds.
    #[pyo3(signature = (timeout=None))]
    fn wait_lost(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
    ) -> PyResult<Option<(String, &'static str)>> {
        let t = timeout_arg(py, timeout)?;
        wait(py, multi_lost_for(self.m.clone(), t))
    }

    /// `wait_lost` as an awaitable.
    #[pyo3(signature = (timeout=None))]
    fn wait_lost_async(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let t = timeout_arg(py, timeout)?;
        to_asyncio(py, multi_lost_for(self.m.clone(), t), |py, l| {
            Ok(l.into_pyobject(py)?.into_any().unbind())
        })
    }

    /// Guarded put: applied by etcd only while every lock is held.
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (m, k, v) = (
            self.m.clone(),
            key_bytes(key, "key")?,
            key_bytes(value, "value")?,
        );
        wait(py, async move { m.put(k, v).await })
    }

    /// Guarded get: the value as bytes, or None.
    fn get(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyBytes>>> {
        let (m, k) = (self.m.clone(), key_bytes(key, "key")?);
        Ok(wait(py, async move { m.get(k).await })?.map(|v| PyBytes::new(py, &v).unbind()))
    }

    /// Guarded delete: True if the key existed.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let (m, k) = (self.m.clone(), key_bytes(key, "key")?);
        wait(py, async move { m.delete(k).await })
    }

    /// `put` as an awaitable.
    fn put_async(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let (m, k, v) = (
            self.m.clone(),
            key_bytes(key, "key")?,
            key_bytes(value, "value")?,
        );
        to_asyncio(py, async move { m.put(k, v).await }, |py, ()| Ok(none(py)))
    }

    /// `get` as an awaitable.
    fn get_async(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let (m, k) = (self.m.clone(), key_bytes(key, "key")?);
        to_asyncio(py, async move { m.get(k).await }, |py, v| {
            Ok(v.map_or_else(|| none(py), |v| PyBytes::new(py, &v).into_any().unbind()))
        })
    }

    /// `delete` as an awaitable.
    fn delete_async(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let (m, k) = (self.m.clone(), key_bytes(key, "key")?);
        to_asyncio(py, async move { m.delete(k).await }, |py, b| {
            Ok(pyo3::types::PyBool::new(py, b)
                .to_owned()
                .into_any()
                .unbind())
        })
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
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let r = self.unlock(py);
        match exc_type {
            Some(t) if !t.is_none() => Ok(()),
            _ => r,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "<etcdlock.MultiGuard names={:?} held={}>",
            self.names(),
            self.m.is_held()
        )
    }
}
