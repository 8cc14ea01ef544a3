//! Inspection on `NativeClient`: `status` and `list`, as dicts.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use crate::args::*;
use crate::client::NativeClient;
use crate::wait::*;

#[pymethods]
impl NativeClient {
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
