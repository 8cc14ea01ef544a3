//! Semaphore and read-write lock on `NativeClient` (each a `Guard`), and
//! releasing another holder's lock or permit by its fencing token.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

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
