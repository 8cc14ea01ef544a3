//! `NativeLatch` and `NativeBarrier`: core's count-down latch and barrier
//! (the pure-Python `Latch` / `Barrier` wrap them), and the `NativeClient`
//! methods that open them.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::args::*;
use crate::client::NativeClient;
use crate::errors::*;
use crate::wait::*;

/// A count or party number: 1 and up; anything else InvalidArgumentError
/// (core's own check, with core's message, for what fits a u64).
pub(crate) fn count_arg(py: Python<'_>, what: &str, n: i64) -> PyResult<u64> {
    u64::try_from(n).map_err(|_| {
        to_pyerr(
            py,
            &invalid(format!(
                "{what} must be between 1 and {}, got {n}",
                etcdlock::MAX_SYNC_COUNT
            )),
        )
    })
}

/// A count-down latch (core's `Latch`).
#[pyclass(module = "etcdlock._etcdlock", frozen)]
pub(crate) struct NativeLatch {
    l: Arc<etcdlock::Latch>,
}

impl NativeLatch {
    pub(crate) fn new(l: etcdlock::Latch) -> Self {
        NativeLatch { l: Arc::new(l) }
    }
}

#[pymethods]
impl NativeLatch {
    #[getter]
    fn name(&self) -> String {
        self.l.name().to_string()
    }

    #[getter]
    fn initial(&self) -> u64 {
        self.l.initial()
    }

    /// Count down by one (a no-op at zero): the count after.
    fn count_down(&self, py: Python<'_>) -> PyResult<u64> {
        let l = self.l.clone();
        wait(py, async move { l.count_down().await })
    }

    fn count_down_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let l = self.l.clone();
        to_asyncio(py, async move { l.count_down().await }, |py, n| {
            Ok(n.into_pyobject(py)?.into_any().unbind())
        })
    }

    /// The count now.
    fn count(&self, py: Python<'_>) -> PyResult<u64> {
        let l = self.l.clone();
        wait(py, async move { l.count().await })
    }

    fn count_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let l = self.l.clone();
        to_asyncio(py, async move { l.count().await }, |py, n| {
            Ok(n.into_pyobject(py)?.into_any().unbind())
        })
    }

    /// Wait for zero, at most `timeout` seconds (None: no limit).
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let (l, t) = (self.l.clone(), timeout_arg(py, timeout)?);
        wait(py, async move { l.wait(t).await })
    }

    #[pyo3(signature = (timeout=None))]
    fn wait_async(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let (l, t) = (self.l.clone(), timeout_arg(py, timeout)?);
        to_asyncio(py, async move { l.wait(t).await }, |py, ()| Ok(none(py)))
    }

    /// Stop renewing the latch from this handle (idempotent).
    fn close(&self) {
        self.l.close();
    }
}

/// A barrier (core's `Barrier`).
#[pyclass(module = "etcdlock._etcdlock", frozen)]
pub(crate) struct NativeBarrier {
    b: Arc<etcdlock::Barrier>,
}

impl NativeBarrier {
    pub(crate) fn new(b: etcdlock::Barrier) -> Self {
        NativeBarrier { b: Arc::new(b) }
    }
}

#[pymethods]
impl NativeBarrier {
    #[getter]
    fn name(&self) -> String {
        self.b.name().to_string()
    }

    #[getter]
    fn parties(&self) -> u32 {
        self.b.parties()
    }

    /// Arrive and wait for every party, at most `timeout` seconds: this
    /// party's arrival index.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<u32> {
        let (b, t) = (self.b.clone(), timeout_arg(py, timeout)?);
        wait(py, async move { b.wait(t).await })
    }

    #[pyo3(signature = (timeout=None))]
    fn wait_async(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let (b, t) = (self.b.clone(), timeout_arg(py, timeout)?);
        to_asyncio(py, async move { b.wait(t).await }, |py, i| {
            Ok(i.into_pyobject(py)?.into_any().unbind())
        })
    }

    /// Stop renewing the barrier from this handle (idempotent).
    fn close(&self) {
        self.b.close();
    }
}

#[pymethods]
impl NativeClient {
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
