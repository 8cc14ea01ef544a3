//! Recipes on `NativeClient` (semaphore, read-write lock, multi-lock,
//! election, status) and the objects they return.

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
    /// Take one of `permits` permits of the semaphore `name` (a Guard).
    #[pyo3(signature = (name, permits, timeout=None, **extras))]
    fn acquire_permit(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        permits: i64,
        timeout: Option<f64>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<NativeGuard> {
        let (c, name, opts, permits) = (
            slf.get().inner.clone(),
            utf8(name, "semaphore name")?,
            acquire_opts(py, timeout, extras)?,
            permit_count(py, permits)?,
        );
        let g = wait(
            py,
            async move { c.acquire_permit(&name, permits, opts).await },
        )?;
        Ok(NativeGuard::new(g, slf.clone().unbind()))
    }

    /// `acquire_permit` as an awaitable.
    #[pyo3(signature = (name, permits, timeout=None, **extras))]
    fn acquire_permit_async(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        permits: i64,
        timeout: Option<f64>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let (c, name, opts, permits) = (
            slf.get().inner.clone(),
            utf8(name, "semaphore name")?,
            acquire_opts(py, timeout, extras)?,
            permit_count(py, permits)?,
        );
        let me = slf.clone().unbind();
        to_asyncio(
            py,
            async move { c.acquire_permit(&name, permits, opts).await },
            |py, g| Ok(Py::new(py, NativeGuard::new(g, me))?.into_any()),
        )
    }

    /// Take the read side of the read-write lock `name` (a Guard); `lock` is the write side.
    #[pyo3(signature = (name, timeout=None, **extras))]
    fn read_lock(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        timeout: Option<f64>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<NativeGuard> {
        let (c, name, opts) = (
            slf.get().inner.clone(),
            utf8(name, "lock name")?,
            acquire_opts(py, timeout, extras)?,
        );
        let g = wait(py, async move { c.read_lock(&name, opts).await })?;
        Ok(NativeGuard::new(g, slf.clone().unbind()))
    }

    /// `read_lock` as an awaitable.
    #[pyo3(signature = (name, timeout=None, **extras))]
    fn read_lock_async(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        timeout: Option<f64>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let (c, name, opts) = (
            slf.get().inner.clone(),
            utf8(name, "lock name")?,
            acquire_opts(py, timeout, extras)?,
        );
        let me = slf.clone().unbind();
        to_asyncio(
            py,
            async move { c.read_lock(&name, opts).await },
            |py, g| Ok(Py::new(py, NativeGuard::new(g, me))?.into_any()),
        )
    }

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

    /// Holders and waiters of `name`, whatever kind of lock it is, as a dict.
    fn status<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'_, PyString>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (c, name) = (self.inner.clone(), utf8(name, "lock name")?);
        let st = wait(py, async move { c.status(&name).await })?;
        status_dict(py, &st)
    }

    /// `status` as an awaitable.
    fn status_async(&self, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<Py<PyAny>> {
        let (c, name) = (self.inner.clone(), utf8(name, "lock name")?);
        to_asyncio(py, async move { c.status(&name).await }, |py, st| {
            Ok(status_dict(py, &st)?.into_any().unbind())
        })
    }

    /// Every lock under `prefix` (core's `list`), as status dicts.
    fn list<'py>(
        &self,
        py: Python<'py>,
        prefix: &Bound<'_, PyString>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let (c, prefix) = (self.inner.clone(), utf8(prefix, "prefix")?);
        let l = wait(py, async move { c.list(&prefix).await })?;
        l.iter().map(|st| status_dict(py, st)).collect()
    }

    /// `list` as an awaitable.
    fn list_async(&self, py: Python<'_>, prefix: &Bound<'_, PyString>) -> PyResult<Py<PyAny>> {
        let (c, prefix) = (self.inner.clone(), utf8(prefix, "prefix")?);
        to_asyncio(py, async move { c.list(&prefix).await }, |py, l| {
            let out: Vec<Bound<'_, PyDict>> = l
                .iter()
                .map(|st| status_dict(py, st))
                .collect::<PyResult<_>>()?;
            Ok(pyo3::types::PyList::new(py, out)?.into_any().unbind())
        })
    }

    /// Release the hold of `name` with fencing token `token`, whoever holds it (core's `release`).
    fn release(&self, py: Python<'_>, name: &Bound<'_, PyString>, token: i64) -> PyResult<bool> {
        let (c, name) = (self.inner.clone(), utf8(name, "lock name")?);
        wait(py, async move { c.release(&name, token).await })
    }

    /// `release` as an awaitable.
    fn release_async(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        token: i64,
    ) -> PyResult<Py<PyAny>> {
        let (c, name) = (self.inner.clone(), utf8(name, "lock name")?);
        to_asyncio(py, async move { c.release(&name, token).await }, |py, b| {
            Ok(pyo3::types::PyBool::new(py, b)
                .to_owned()
                .into_any()
                .unbind())
        })
    }

    /// Release the permit of semaphore `name` whose id (fencing token) is `id`, from any client.
    fn release_permit(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        id: i64,
    ) -> PyResult<bool> {
        let (c, name) = (self.inner.clone(), utf8(name, "semaphore name")?);
        wait(py, async move { c.release_permit(&name, id).await })
    }

    /// `release_permit` as an awaitable.
    fn release_permit_async(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        id: i64,
    ) -> PyResult<Py<PyAny>> {
        let (c, name) = (self.inner.clone(), utf8(name, "semaphore name")?);
        to_asyncio(
            py,
            async move { c.release_permit(&name, id).await },
            |py, b| {
                Ok(pyo3::types::PyBool::new(py, b)
                    .to_owned()
                    .into_any()
                    .unbind())
            },
        )
    }

    /// Open the count-down latch `name` with `count` (a NativeLatch).
    fn latch(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        count: i64,
    ) -> PyResult<crate::sync::NativeLatch> {
        let (c, name, count) = (
            self.inner.clone(),
            utf8(name, "latch name")?,
            crate::sync::count_arg(py, "count", count)?,
        );
        let l = wait(py, async move { c.latch(&name, count).await })?;
        Ok(crate::sync::NativeLatch::new(l))
    }

    /// `latch` as an awaitable.
    fn latch_async(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        count: i64,
    ) -> PyResult<Py<PyAny>> {
        let (c, name, count) = (
            self.inner.clone(),
            utf8(name, "latch name")?,
            crate::sync::count_arg(py, "count", count)?,
        );
        to_asyncio(py, async move { c.latch(&name, count).await }, |py, l| {
            Ok(Py::new(py, crate::sync::NativeLatch::new(l))?.into_any())
        })
    }

    /// Open the barrier `name` for `parties` parties (a NativeBarrier).
    fn barrier(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        parties: i64,
    ) -> PyResult<crate::sync::NativeBarrier> {
        let (c, name, parties) = (
            self.inner.clone(),
            utf8(name, "barrier name")?,
            crate::sync::count_arg(py, "parties", parties)?,
        );
        let parties = u32::try_from(parties).unwrap_or(u32::MAX);
        let b = wait(py, async move { c.barrier(&name, parties).await })?;
        Ok(crate::sync::NativeBarrier::new(b))
    }

    /// `barrier` as an awaitable.
    fn barrier_async(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        parties: i64,
    ) -> PyResult<Py<PyAny>> {
        let (c, name, parties) = (
            self.inner.clone(),
            utf8(name, "barrier name")?,
            crate::sync::count_arg(py, "parties", parties)?,
        );
        let parties = u32::try_from(parties).unwrap_or(u32::MAX);
        to_asyncio(
            py,
            async move { c.barrier(&name, parties).await },
            |py, b| Ok(Py::new(py, crate::sync::NativeBarrier::new(b))?.into_any()),
        )
    }
}

pub(crate) fn permit_count(py: Python<'_>, permits: i64) -> PyResult<u32> {
    u32::try_from(permits).map_err(|_| {
        to_pyerr(
            py,
            &invalid(format!(
                "permits must be between 1 and {}, got {permits}",
                etcdlock::MAX_PERMITS
            )),
        )
    })
}

pub(crate) fn utf8_all(names: &[Bound<'_, PyString>]) -> PyResult<Vec<String>> {
    names.iter().map(|n| utf8(n, "lock name")).collect()
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

pub(crate) fn status_dict<'py>(
    py: Python<'py>,
    st: &etcdlock::Status,
) -> PyResult<Bound<'py, PyDict>> {
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
        let md = PyDict::new(py);
        for (k, v) in &c.metadata {
            md.set_item(k, v)?;
        }
        d.set_item("metadata", md)?;
        d.set_item("foreign", c.foreign)?;
        Ok(d)
    };
    let out = PyDict::new(py);
    out.set_item("name", &st.name)?;
    out.set_item("kind", st.kind.map(|k| k.name()))?;
    out.set_item("revision", st.revision)?;
    out.set_item(
        "holders",
        st.holders.iter().map(one).collect::<PyResult<Vec<_>>>()?,
    )?;
    out.set_item(
        "waiters",
        st.waiters.iter().map(one).collect::<PyResult<Vec<_>>>()?,
    )?;
    Ok(out)
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
