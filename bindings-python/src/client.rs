//! `NativeClient`: connect, lock, try-lock, close, metrics, status (the
//! recipes are in recipes.rs).

use etcdlock::{Client, ErrorCode, Guard, LockOptions};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::args::*;
use crate::guard::NativeGuard;
use crate::wait::*;

/// A connection to etcd (the native half of `etcdlock.Client` and
/// `etcdlock.AsyncClient`). Safe to share across threads.
#[pyclass(module = "etcdlock._etcdlock", frozen, weakref)]
pub(crate) struct NativeClient {
    pub(crate) inner: Client,
    pid: u32,
}

impl NativeClient {
    /// False in a forked child of the process that connected.
    pub(crate) fn same_process(&self) -> bool {
        self.pid == std::process::id()
    }
}

/// `lock_with`, or `lock_reentrant` for `owner` when one is given.
async fn lock_as(
    c: &Client,
    name: &str,
    owner: Option<u64>,
    opts: LockOptions,
) -> etcdlock::Result<Guard> {
    match owner {
        Some(o) => c.lock_reentrant(name, o, opts).await,
        None => c.lock_with(name, opts).await,
    }
}

/// `try_lock_with` (or `try_lock_reentrant` for `owner`), with `WouldBlock`
/// as `None`.
async fn try_lock_as(
    c: &Client,
    name: &str,
    owner: Option<u64>,
    opts: LockOptions,
) -> etcdlock::Result<Option<Guard>> {
    let r = match owner {
        Some(o) => c.try_lock_reentrant(name, o, opts).await,
        None => c.try_lock_with(name, opts).await,
    };
    match r {
        Ok(g) => Ok(Some(g)),
        Err(e) if e.code() == ErrorCode::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

#[pymethods]
impl NativeClient {
    /// Connect (blocking, interruptible by Ctrl-C) with `Client(...)`'s
    /// keyword arguments (see `args::client_options`).
    #[staticmethod]
    #[pyo3(signature = (**options))]
    fn connect(py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<NativeClient> {
        let opts = client_options(py, options)?;
        let inner = wait(py, async move { Client::connect(opts).await })?;
        Ok(NativeClient {
            inner,
            pid: std::process::id(),
        })
    }

    /// Connect, as an awaitable of the running asyncio loop.
    #[staticmethod]
    #[pyo3(signature = (**options))]
    fn connect_async(py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
        let opts = client_options(py, options)?;
        to_asyncio(py, async move { Client::connect(opts).await }, |py, c| {
            Ok(Py::new(
                py,
                NativeClient {
                    inner: c,
                    pid: std::process::id(),
                },
            )?
            .into_any())
        })
    }

    /// Wait for the lock `name`, at most `timeout` seconds if given. With
    /// `owner`, reentrant for that owner (core's `lock_reentrant`): the
    /// owner's hold of `name` is re-entered at once as another handle.
    #[pyo3(signature = (name, timeout=None, owner=None, **extras))]
    fn lock(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        timeout: Option<f64>,
        owner: Option<u64>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<NativeGuard> {
        let this = slf.get();
        let name = utf8(name, "lock name")?;
        let opts = acquire_opts(py, timeout, extras)?;
        let c = this.inner.clone();
        let g = wait(py, async move { lock_as(&c, &name, owner, opts).await })?;
        Ok(NativeGuard::new(g, slf.clone().unbind()))
    }

    /// Take the lock if free; None if held. With `owner`, reentrant for
    /// that owner (core's `try_lock_reentrant`).
    #[pyo3(signature = (name, owner=None, **extras))]
    fn try_lock(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        owner: Option<u64>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Option<NativeGuard>> {
        let (c, name, opts) = (
            slf.get().inner.clone(),
            utf8(name, "lock name")?,
            acquire_opts(py, None, extras)?,
        );
        let r = wait(py, async move { try_lock_as(&c, &name, owner, opts).await })?;
        Ok(r.map(|g| NativeGuard::new(g, slf.clone().unbind())))
    }

    /// `lock` as an awaitable.
    #[pyo3(signature = (name, timeout=None, owner=None, **extras))]
    fn lock_async(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        timeout: Option<f64>,
        owner: Option<u64>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let name = utf8(name, "lock name")?;
        let opts = acquire_opts(py, timeout, extras)?;
        let c = slf.get().inner.clone();
        let me = slf.clone().unbind();
        to_asyncio(
            py,
            async move { lock_as(&c, &name, owner, opts).await },
            |py, g| Ok(Py::new(py, NativeGuard::new(g, me))?.into_any()),
        )
    }

    /// `try_lock` as an awaitable.
    #[pyo3(signature = (name, owner=None, **extras))]
    fn try_lock_async(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        owner: Option<u64>,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let (c, name, opts) = (
            slf.get().inner.clone(),
            utf8(name, "lock name")?,
            acquire_opts(py, None, extras)?,
        );
        let me = slf.clone().unbind();
        to_asyncio(
            py,
            async move { try_lock_as(&c, &name, owner, opts).await },
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

    /// One read from etcd through the session, bounded by request_timeout:
    /// the round trip in seconds.
    fn ping(&self, py: Python<'_>) -> PyResult<f64> {
        let c = self.inner.clone();
        Ok(wait(py, async move { c.ping().await })?.as_secs_f64())
    }

    /// `ping` as an awaitable.
    fn ping_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let c = self.inner.clone();
        to_asyncio(py, async move { c.ping().await }, |py, d| {
            Ok(d.as_secs_f64().into_pyobject(py)?.into_any().unbind())
        })
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

    /// The metrics in Prometheus' text format, with core's one list of names
    /// and `labels` on every series.
    #[pyo3(signature = (labels=Vec::new()))]
    fn prometheus(&self, labels: Vec<(String, String)>) -> String {
        let l: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.inner.metrics().to_prometheus(&l)
    }

    /// Core's metrics snapshot: the JSON of its `Metrics` record (see
    /// `etcdlock.Client.metrics`). No etcd request.
    fn metrics(&self) -> String {
        etcdlock::records::to_json(&self.inner.metrics())
    }
}
