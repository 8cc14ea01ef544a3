//! Election on `NativeClient` (campaign, leader, observe) and the objects it
//! returns: `Leadership` (a Guard) and `NativeObserver`.

use std::sync::Arc;
use std::time::Duration;

use etcdlock::{ErrorCode, Guard};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use crate::args::*;
use crate::client::NativeClient;
use crate::errors::*;
use crate::guard::NativeGuard;
use crate::wait::*;

#[pymethods]
impl NativeClient {
    /// Campaign for leadership of `name` with `value` (a Leadership, which is a Guard).
    #[pyo3(signature = (name, value, timeout=None, **extras))]
    fn campaign(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        value: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<NativeLeadership>> {
        let (c, name, opts, v) = (
            slf.get().inner.clone(),
            utf8(name, "election name")?,
            acquire_opts(py, timeout, extras)?,
            key_bytes(value, "value")?,
        );
        let l = wait(py, async move { c.campaign(&name, v, opts).await })?;
        NativeLeadership::wrap(py, l.into_guard(), slf.clone().unbind())
    }

    /// `campaign` as an awaitable.
    #[pyo3(signature = (name, value, timeout=None, **extras))]
    fn campaign_async(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        value: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let (c, name, opts, v) = (
            slf.get().inner.clone(),
            utf8(name, "election name")?,
            acquire_opts(py, timeout, extras)?,
            key_bytes(value, "value")?,
        );
        let me = slf.clone().unbind();
        to_asyncio(
            py,
            async move { c.campaign(&name, v, opts).await },
            |py, l| Ok(NativeLeadership::wrap(py, l.into_guard(), me)?.into_any()),
        )
    }

    /// The leader of `name` as (key, value, revision, lease_id), or None.
    fn leader(&self, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<Option<LeaderTuple>> {
        let (c, name) = (self.inner.clone(), utf8(name, "election name")?);
        Ok(wait(py, async move { c.leader(&name).await })?.map(|l| leader_tuple(py, l)))
    }

    /// `leader` as an awaitable.
    fn leader_async(&self, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<Py<PyAny>> {
        let (c, name) = (self.inner.clone(), utf8(name, "election name")?);
        to_asyncio(py, async move { c.leader(&name).await }, |py, l| {
            Ok(l.map(|l| leader_tuple(py, l))
                .into_pyobject(py)?
                .into_any()
                .unbind())
        })
    }

    /// Follow the leadership of `name` (an Observer).
    fn observe(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
    ) -> PyResult<NativeObserver> {
        let name = utf8(name, "election name")?;
        let o = slf
            .get()
            .inner
            .observe(&name)
            .map_err(|e| to_pyerr(py, &e))?;
        Ok(NativeObserver {
            o: Arc::new(tokio::sync::Mutex::new(o)),
            client: slf.clone().unbind(),
        })
    }
}

/// (key, value, revision, lease_id): `etcdlock.Leader`'s fields.
pub(crate) type LeaderTuple = (String, Py<PyBytes>, i64, i64);

pub(crate) fn leader_tuple(py: Python<'_>, l: etcdlock::Leader) -> LeaderTuple {
    (
        String::from_utf8_lossy(&l.key).into_owned(),
        PyBytes::new(py, &l.value).unbind(),
        l.revision,
        l.lease_id,
    )
}

/// Leadership won by `campaign`: a Guard (fencing token, loss signal, guarded
/// operations, `with`) plus `proclaim` and `resign`.
#[pyclass(module = "etcdlock", name = "Leadership", extends = NativeGuard, frozen)]
pub(crate) struct NativeLeadership {}

impl NativeLeadership {
    pub(crate) fn wrap(
        py: Python<'_>,
        g: Guard,
        client: Py<NativeClient>,
    ) -> PyResult<Py<NativeLeadership>> {
        Py::new(
            py,
            PyClassInitializer::from(NativeGuard::new(g, client)).add_subclass(NativeLeadership {}),
        )
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
    fn proclaim_async(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let (g, v) = (slf.as_super().get().g.clone(), key_bytes(value, "value")?);
        to_asyncio(py, async move { g.set_value(v).await }, |py, ()| {
            Ok(none(py))
        })
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
        slf.as_super()
            .get()
            .__repr__()
            .replace("etcdlock.Guard", "etcdlock.Leadership")
    }
}

/// Leadership changes of one election (see `etcdlock.Observer`).
#[pyclass(module = "etcdlock._etcdlock", name = "NativeObserver", frozen)]
pub(crate) struct NativeObserver {
    pub(crate) o: Arc<tokio::sync::Mutex<etcdlock::Observer>>,
    #[allow(dead_code)]
    pub(crate) client: Py<NativeClient>,
}

pub(crate) async fn observe_next(
    o: Arc<tokio::sync::Mutex<etcdlock::Observer>>,
    timeout: Option<Duration>,
) -> etcdlock::Result<Option<etcdlock::Leader>> {
    let fut = async move { o.lock().await.next().await };
    match timeout {
        Some(t) => tokio::time::timeout(t, fut).await.unwrap_or_else(|_| {
            Err(CoreError::new(
                ErrorCode::Timeout,
                "no leadership change within the timeout",
            ))
        }),
        None => fut.await,
    }
}

#[pymethods]
impl NativeObserver {
    /// The next leadership state (a leader tuple, or None: no leader); the
    /// first call returns the current state. TimeoutError after `timeout`.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<LeaderTuple>> {
        let t = timeout_arg(py, timeout)?;
        Ok(wait(py, observe_next(self.o.clone(), t))?.map(|l| leader_tuple(py, l)))
    }

    /// `next` as an awaitable.
    #[pyo3(signature = (timeout=None))]
    fn next_async(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let t = timeout_arg(py, timeout)?;
        to_asyncio(py, observe_next(self.o.clone(), t), |py, l| {
            Ok(l.map(|l| leader_tuple(py, l))
                .into_pyobject(py)?
                .into_any()
                .unbind())
        })
    }
}
