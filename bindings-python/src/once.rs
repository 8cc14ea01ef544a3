//! Run-once records on `NativeClient` (core's `once_*`). A hold crosses to
//! Python as `(revision, locked_at_ms, lock_until_ms)`: plain values the
//! Python layer keeps and hands back.

use etcdlock::bridge::{self, Unit};
use etcdlock::OnceHold;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::args::*;
use crate::client::NativeClient;
use crate::errors::*;
use crate::wait::*;

/// `(revision, locked_at_ms, lock_until_ms)`.
pub(crate) type HoldTuple = (i64, i64, i64);

fn tuple(h: &OnceHold) -> HoldTuple {
    (
        h.record.revision,
        h.record.locked_at_ms,
        h.record.lock_until_ms,
    )
}

fn span(py: Python<'_>, what: &str, v: f64) -> PyResult<std::time::Duration> {
    py_result(py, bridge::span(what, v, Unit::Seconds))
}

fn spans(
    py: Python<'_>,
    at_most: f64,
    at_least: f64,
) -> PyResult<(std::time::Duration, std::time::Duration)> {
    py_result(py, bridge::once_spans(at_most, at_least, Unit::Seconds))
}

fn to_py(py: Python<'_>, h: Option<HoldTuple>) -> PyResult<Py<PyAny>> {
    Ok(h.into_pyobject(py)?.unbind())
}

#[pymethods]
impl NativeClient {
    /// Take job `name`'s run-once record for `at_most` seconds if it is free: the hold, or None.
    /// `at_least` (used at finish) is checked with it, before anything is taken.
    #[pyo3(signature = (name, at_most, at_least=0.0))]
    fn once_take(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        at_most: f64,
        at_least: f64,
    ) -> PyResult<Option<HoldTuple>> {
        let (c, name, (at_most, _)) = (
            self.inner.clone(),
            utf8(name, "job name")?,
            spans(py, at_most, at_least)?,
        );
        Ok(wait(py, async move { c.once_take(&name, at_most).await })?
            .as_ref()
            .map(tuple))
    }

    /// `once_take` as an awaitable.
    #[pyo3(signature = (name, at_most, at_least=0.0))]
    fn once_take_async(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        at_most: f64,
        at_least: f64,
    ) -> PyResult<Py<PyAny>> {
        let (c, name, (at_most, _)) = (
            self.inner.clone(),
            utf8(name, "job name")?,
            spans(py, at_most, at_least)?,
        );
        to_asyncio(
            py,
            async move { c.once_take(&name, at_most).await },
            |py, h| to_py(py, h.as_ref().map(tuple)),
        )
    }

    /// Finish a hold: keep the job taken until locked_at + `at_least` seconds, or delete the record.
    fn once_finish(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        hold: HoldTuple,
        at_least: f64,
    ) -> PyResult<bool> {
        let (c, h, at_least) = (
            self.inner.clone(),
            OnceHold::mine(&utf8(name, "job name")?, hold.0, hold.1, hold.2),
            span(py, "at_least", at_least)?,
        );
        wait(py, async move { c.once_finish(&h, at_least).await })
    }

    /// `once_finish` as an awaitable.
    fn once_finish_async(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        hold: HoldTuple,
        at_least: f64,
    ) -> PyResult<Py<PyAny>> {
        let (c, h, at_least) = (
            self.inner.clone(),
            OnceHold::mine(&utf8(name, "job name")?, hold.0, hold.1, hold.2),
            span(py, "at_least", at_least)?,
        );
        to_asyncio(
            py,
            async move { c.once_finish(&h, at_least).await },
            |py, b| {
                Ok(pyo3::types::PyBool::new(py, b)
                    .to_owned()
                    .into_any()
                    .unbind())
            },
        )
    }

    /// Extend a hold to now + `at_most` seconds: the new hold, or None if it is no longer ours.
    fn once_extend(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        hold: HoldTuple,
        at_most: f64,
    ) -> PyResult<Option<HoldTuple>> {
        let (c, h, at_most) = (
            self.inner.clone(),
            OnceHold::mine(&utf8(name, "job name")?, hold.0, hold.1, hold.2),
            span(py, "at_most", at_most)?,
        );
        Ok(wait(py, async move { c.once_extend(&h, at_most).await })?
            .as_ref()
            .map(tuple))
    }

    /// `once_extend` as an awaitable.
    fn once_extend_async(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        hold: HoldTuple,
        at_most: f64,
    ) -> PyResult<Py<PyAny>> {
        let (c, h, at_most) = (
            self.inner.clone(),
            OnceHold::mine(&utf8(name, "job name")?, hold.0, hold.1, hold.2),
            span(py, "at_most", at_most)?,
        );
        to_asyncio(
            py,
            async move { c.once_extend(&h, at_most).await },
            |py, h| to_py(py, h.as_ref().map(tuple)),
        )
    }
}
