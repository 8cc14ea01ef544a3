//! Inspection on `NativeClient`: `status`, `list`, `deadlocks` and
//! `history`, as core's one JSON encoding of the records
//! (`etcdlock::records`), decoded by field name in `etcdlock._common`.

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::args::*;
use crate::client::NativeClient;
use crate::py_result;
use crate::wait::*;

#[pymethods]
impl NativeClient {
    /// Holders and waiters of `name`, whatever kind of lock it is: the JSON
    /// of core's `Status` record.
    fn status(&self, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<String> {
        let (c, name) = (self.inner.clone(), utf8(name, "lock name")?);
        wait(py, async move {
            Ok(etcdlock::records::to_json(&c.status(&name).await?))
        })
    }

    /// `status` as an awaitable.
    fn status_async(&self, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<Py<PyAny>> {
        let (c, name) = (self.inner.clone(), utf8(name, "lock name")?);
        to_asyncio(
            py,
            async move { Ok(etcdlock::records::to_json(&c.status(&name).await?)) },
            |py, s| Ok(PyString::new(py, &s).into_any().unbind()),
        )
    }

    /// Every lock under `prefix` (core's `list`): the JSON array of their
    /// `Status` records.
    fn list(&self, py: Python<'_>, prefix: &Bound<'_, PyString>) -> PyResult<String> {
        let (c, prefix) = (self.inner.clone(), utf8(prefix, "prefix")?);
        wait(py, async move {
            Ok(etcdlock::records::list_to_json(&c.list(&prefix).await?))
        })
    }

    /// `list` as an awaitable.
    fn list_async(&self, py: Python<'_>, prefix: &Bound<'_, PyString>) -> PyResult<Py<PyAny>> {
        let (c, prefix) = (self.inner.clone(), utf8(prefix, "prefix")?);
        to_asyncio(
            py,
            async move { Ok(etcdlock::records::list_to_json(&c.list(&prefix).await?)) },
            |py, s| Ok(PyString::new(py, &s).into_any().unbind()),
        )
    }

    /// The cycles of clients waiting on each other under `prefix` (core's
    /// `deadlocks`): the JSON of its `Deadlocks` record.
    fn deadlocks(&self, py: Python<'_>, prefix: &Bound<'_, PyString>) -> PyResult<String> {
        let (c, prefix) = (self.inner.clone(), utf8(prefix, "prefix")?);
        wait(py, async move {
            Ok(etcdlock::records::to_json(&c.deadlocks(&prefix).await?))
        })
    }

    /// `deadlocks` as an awaitable.
    fn deadlocks_async(&self, py: Python<'_>, prefix: &Bound<'_, PyString>) -> PyResult<Py<PyAny>> {
        let (c, prefix) = (self.inner.clone(), utf8(prefix, "prefix")?);
        to_asyncio(
            py,
            async move { Ok(etcdlock::records::to_json(&c.deadlocks(&prefix).await?)) },
            |py, s| Ok(PyString::new(py, &s).into_any().unbind()),
        )
    }

    /// The history of `name` (core's `history`), `since` seconds back (None:
    /// as far as etcd keeps): the JSON of its `History` record.
    #[pyo3(signature = (name, since=None))]
    fn history(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        since: Option<f64>,
    ) -> PyResult<String> {
        let (c, name) = (self.inner.clone(), utf8(name, "lock name")?);
        let since = since_arg(py, since)?;
        wait(py, async move {
            Ok(etcdlock::records::to_json(&c.history(&name, since).await?))
        })
    }

    /// `history` as an awaitable.
    #[pyo3(signature = (name, since=None))]
    fn history_async(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        since: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        let (c, name) = (self.inner.clone(), utf8(name, "lock name")?);
        let since = since_arg(py, since)?;
        to_asyncio(
            py,
            async move { Ok(etcdlock::records::to_json(&c.history(&name, since).await?)) },
            |py, s| Ok(PyString::new(py, &s).into_any().unbind()),
        )
    }
}

/// How far back a history reaches, in seconds, by core's rule for spans
/// (negative or NaN: InvalidArgumentError; infinite: as far as etcd keeps).
fn since_arg(py: Python<'_>, since: Option<f64>) -> PyResult<Option<std::time::Duration>> {
    py_result(
        py,
        etcdlock::bridge::opt_timeout("since", since, etcdlock::bridge::Unit::Seconds),
    )
}
