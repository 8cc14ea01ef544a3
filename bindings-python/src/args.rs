//! Python arguments as core values: text as UTF-8 (never lossy), keys and
//! values as bytes, timeouts in seconds by core's one rule, and client
//! options by kind into core's option pairs.

use etcdlock::bridge::{self, OptionKind, Unit};
use etcdlock::{ClientOptions, LockOptions};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString};

use crate::errors::*;

pub(crate) fn invalid(msg: impl Into<String>) -> CoreError {
    CoreError::new(etcdlock::ErrorCode::InvalidArgument, msg)
}

/// A timeout in seconds (None: no limit) by core's one rule.
pub(crate) fn timeout_arg(py: Python<'_>, v: Option<f64>) -> PyResult<Option<std::time::Duration>> {
    py_result(py, bridge::opt_timeout("timeout", v, Unit::Seconds))
}

/// Options of one acquisition from a timeout in seconds.
pub(crate) fn lock_opts(py: Python<'_>, timeout: Option<f64>) -> PyResult<LockOptions> {
    py_result(py, bridge::lock_options(timeout, Unit::Seconds))
}

/// Options of one acquisition from a timeout and the keyword arguments
/// `lock_delay` and `lease_time` (seconds), `metadata` (a dict of str to
/// str) and `detect_deadlock` (a bool), by core's one rule (`bridge::acquire_options`). None is "not given";
/// another keyword is a TypeError, as Python's own calls say.
pub(crate) fn acquire_opts(
    py: Python<'_>,
    timeout: Option<f64>,
    extras: Option<&Bound<'_, PyDict>>,
) -> PyResult<LockOptions> {
    let mut x = bridge::Extras::default();
    for (k, v) in extras.into_iter().flat_map(|d| d.iter()) {
        let key: String = k.extract()?;
        if v.is_none() {
            continue;
        }
        match key.as_str() {
            "lock_delay" => x.lock_delay = Some(seconds_number(&v, "lock_delay")?),
            "lease_time" => x.lease_time = Some(seconds_number(&v, "lease_time")?),
            "detect_deadlock" => {
                x.detect_deadlock = v.cast::<PyBool>().map_err(|_| PyTypeError::new_err(format!("detect_deadlock must be a bool, not {}", type_name(&v))))?.is_true()
            }
            "metadata" => {
                let d = v.cast::<PyDict>().map_err(|_| PyTypeError::new_err(format!("metadata must be a dict of str to str, not {}", type_name(&v))))?;
                for (mk, mv) in d.iter() {
                    let (Ok(mk), Ok(mv)) = (mk.cast::<PyString>(), mv.cast::<PyString>()) else {
                        return Err(PyTypeError::new_err("metadata must be a dict of str to str"));
                    };
                    x.metadata.push((utf8(mk, "metadata key")?, utf8(mv, "metadata value")?));
                }
            }
            other => return Err(PyTypeError::new_err(format!("unexpected keyword argument {other:?} (the acquisition options are lock_delay, lease_time, metadata, detect_deadlock)"))),
        }
    }
    py_result(py, bridge::acquire_options(timeout, x, Unit::Seconds))
}

/// A span in seconds as given: an int or a float (not a bool, not a str);
/// anything else is a TypeError naming `what`. Its value is core's to check
/// (negative, NaN, infinite: InvalidArgumentError by the rule of the call).
pub(crate) fn seconds_number(v: &Bound<'_, PyAny>, what: &str) -> PyResult<f64> {
    if v.is_instance_of::<PyBool>()
        || !(v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>())
    {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a number of seconds, not {}",
            type_name(v)
        )));
    }
    v.extract::<f64>()
}

/// A `str` as UTF-8. A str UTF-8 cannot encode (a lone surrogate, e.g. from
/// `surrogateescape` or a JS/Java-style UTF-16 string) is InvalidArgumentError,
/// never a bare UnicodeEncodeError and never a lossy conversion (which would
/// silently lock or write another name).
pub(crate) fn utf8(s: &Bound<'_, PyString>, what: &str) -> PyResult<String> {
    let py = s.py();
    s.extract::<String>().map_err(|cause| {
        let e = to_pyerr(
            py,
            &invalid(format!(
                "{what} is not valid Unicode text (it contains a lone surrogate): {cause}"
            )),
        );
        e.set_cause(py, Some(cause));
        e
    })
}

/// `str` or `bytes` as bytes; anything else is a TypeError.
pub(crate) fn key_bytes(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(utf8(s, what)?.into_bytes());
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be str or bytes, not {}",
        obj.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    )))
}

pub(crate) fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// Client options from `Client(...)`'s keyword arguments (None: not given,
/// so the `ETCDLOCK_*` variable or the default applies). Each name is found
/// by core (`bridge::option_key`) and its value converted by the option's
/// kind: a value of the wrong type is a TypeError, any other bad value core's
/// InvalidArgumentError. Nothing here knows a particular option.
pub(crate) fn client_options(
    py: Python<'_>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<ClientOptions> {
    let mut pairs: Vec<(&'static str, String)> = Vec::new();
    for (k, v) in kwargs.into_iter().flat_map(|d| d.iter()) {
        if v.is_none() {
            continue;
        }
        let name: String = k.extract()?;
        let key = bridge::option_key(&name)
            .ok_or_else(|| to_pyerr(py, &bridge::unknown_option(&name)))?;
        pairs.push((key, option_text(py, key, &v)?));
    }
    py_result(py, bridge::client_options(pairs))
}

pub(crate) fn option_text(py: Python<'_>, key: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    let wrong =
        |want: &str| PyTypeError::new_err(format!("{key} must be {want}, not {}", type_name(v)));
    let is_bool = v.is_instance_of::<PyBool>();
    match bridge::option_kind(key).expect("option_key returns known keys") {
        OptionKind::List => {
            let items: Vec<Bound<'_, PyString>> =
                v.extract().map_err(|_| wrong("a list of str"))?;
            let items = items
                .iter()
                .map(|s| utf8(s, key))
                .collect::<PyResult<Vec<_>>>()?;
            py_result(py, bridge::list_value(key, &items))
        }
        OptionKind::WholeSeconds if !is_bool && v.is_instance_of::<PyInt>() => {
            // Beyond i64: core refuses it with its usual message.
            Ok(v.extract::<i64>().unwrap_or(i64::MAX).to_string())
        }
        OptionKind::WholeSeconds => Err(wrong("an int (seconds)")),
        OptionKind::Duration
            if !is_bool && (v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>()) =>
        {
            Ok(bridge::duration_value(v.extract::<f64>()?, Unit::Seconds))
        }
        OptionKind::Duration => Err(wrong("a number of seconds")),
        OptionKind::Bool if is_bool => Ok(v.extract::<bool>()?.to_string()),
        OptionKind::Bool => Err(wrong("a bool")),
        OptionKind::Text => utf8(v.cast::<PyString>().map_err(|_| wrong("str"))?, key),
    }
}
