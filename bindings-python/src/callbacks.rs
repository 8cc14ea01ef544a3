//! User callbacks (`on_lost`, `on_renewal`): checked when registered, each
//! run on a fresh thread that enters Python through the exit gate.

use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::wait::attach_gated;

/// TypeError unless `callback` is callable (`what` names the method).
pub(crate) fn check_callable(callback: &Py<PyAny>, what: &str) -> PyResult<()> {
    Python::attach(|py| -> PyResult<()> {
        let cb = callback.bind(py);
        if !cb.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "{what}() needs a callable, not {}",
                cb.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            )));
        }
        Ok(())
    })
}

/// Run `call` on a fresh thread (not the caller's, not a runtime thread), so
/// a user callback may make blocking etcdlock calls.
pub(crate) fn call_on_fresh_thread<F>(call: F)
where
    F: for<'py> FnOnce(Python<'py>) -> PyResult<Py<PyAny>> + Send + 'static,
{
    std::thread::spawn(move || call_into_python(call));
}

/// On a thread Python does not know: run `call` with the GIL, reporting an
/// exception it raises as unraisable. Skipped once Python is finalizing.
fn call_into_python<F>(call: F)
where
    F: for<'py> FnOnce(Python<'py>) -> PyResult<Py<PyAny>>,
{
    attach_gated(|py| {
        if let Err(e) = call(py) {
            e.write_unraisable(py, None);
        }
    });
}

/// The renewal-change handler of `on_renewal`: each change calls
/// `callback(failing, seconds_left)` on a fresh thread that first waits for
/// the previous call, so callbacks see changes in order.
pub(crate) fn renewal_caller(callback: Py<PyAny>) -> impl FnMut(Option<Duration>) + Send + 'static {
    let callback = Arc::new(callback);
    let mut prev: Option<std::thread::JoinHandle<()>> = None;
    move |left: Option<Duration>| {
        let arg = (left.is_some(), left.map(|d| d.as_secs_f64()));
        let (cb, before) = (callback.clone(), prev.take());
        prev = Some(std::thread::spawn(move || {
            if let Some(b) = before {
                let _ = b.join();
            }
            call_into_python(move |py| cb.call1(py, arg));
        }));
    }
}
