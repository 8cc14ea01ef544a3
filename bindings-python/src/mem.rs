//! `NativeMemStore`: core's fault controls on an in-process store
//! (`etcdlock::MemStore`), under `etcdlock.MemStore` (`_mem.py`). Only the
//! arguments are converted here: the name and the spans are checked by core.

use etcdlock::bridge::{self, Unit};
use etcdlock::MemStore;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::args::*;
use crate::errors::*;

/// One key as the store holds it: (key, value, lease, create_revision,
/// mod_revision), `etcdlock.MemKey`'s fields.
type KeyTuple = (Py<PyBytes>, Py<PyBytes>, i64, i64, i64);

/// The store `mem://NAME` (see `etcdlock.MemStore` for the user docs).
#[pyclass(module = "etcdlock._etcdlock", name = "NativeMemStore", frozen)]
pub(crate) struct NativeMemStore {
    store: MemStore,
}

/// A span of a control in seconds, by core's rule for spans: finite and
/// non-negative (a negative, NaN or infinite one is InvalidArgumentError).
fn span(py: Python<'_>, seconds: &Bound<'_, PyAny>) -> PyResult<std::time::Duration> {
    let v = seconds_number(seconds, "seconds")?;
    py_result(py, bridge::span("seconds", v, Unit::Seconds))
}

#[pymethods]
impl NativeMemStore {
    /// The store `mem://NAME` ("" the process-wide `mem://`), started if no
    /// client started it yet.
    #[staticmethod]
    fn open(py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<NativeMemStore> {
        let name = name.cast::<PyString>().map_err(|_| {
            PyTypeError::new_err(format!("store name must be a str, not {}", type_name(name)))
        })?;
        let name = utf8(name, "store name")?;
        // Starting a store binds its socket and spawns its tasks.
        let store = py.detach(|| MemStore::open(&name));
        Ok(NativeMemStore {
            store: py_result(py, store)?,
        })
    }

    #[getter]
    fn endpoint(&self) -> String {
        self.store.endpoint()
    }

    #[getter]
    fn name(&self) -> String {
        self.store.name().to_string()
    }

    fn expire_lease(&self, py: Python<'_>, lease_id: i64) -> bool {
        py.detach(|| self.store.expire_lease(lease_id))
    }

    fn delete_key(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = key_bytes(key, "key")?;
        Ok(py.detach(|| self.store.delete_key(key)))
    }

    fn silence(&self, py: Python<'_>, seconds: &Bound<'_, PyAny>) -> PyResult<()> {
        let d = span(py, seconds)?;
        py.detach(|| self.store.silence(d));
        Ok(())
    }

    fn stall(&self, py: Python<'_>, lease_id: i64, seconds: &Bound<'_, PyAny>) -> PyResult<()> {
        let d = span(py, seconds)?;
        py.detach(|| self.store.stall(lease_id, d));
        Ok(())
    }

    fn resume(&self, py: Python<'_>) {
        py.detach(|| self.store.resume())
    }

    fn keys(&self, py: Python<'_>, prefix: &Bound<'_, PyAny>) -> PyResult<Vec<KeyTuple>> {
        let prefix = key_bytes(prefix, "prefix")?;
        let keys = py.detach(|| self.store.keys(prefix));
        Ok(keys
            .into_iter()
            .map(|k| {
                (
                    PyBytes::new(py, &k.key).unbind(),
                    PyBytes::new(py, &k.value).unbind(),
                    k.lease,
                    k.create_revision,
                    k.mod_revision,
                )
            })
            .collect())
    }
}
