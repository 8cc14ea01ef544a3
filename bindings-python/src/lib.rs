//! `etcdlock._etcdlock`: the native half of the Python binding.
//!
//! Thin by design: argument conversion, error mapping and the two ways Python
//! waits (a thread parked with the GIL released, or an asyncio future). All lock
//! logic is in the `etcdlock` core crate, and everything runs on the core's one
//! PID-aware runtime (`etcdlock::runtime`), never on a second one.

mod args;
#[cfg(feature = "bench")]
mod bench;
mod callbacks;
mod client;
mod errors;
mod guard;
mod leader;
mod logs;
mod mem;
mod once;
mod recipes;
mod sync;
mod wait;

use etcdlock::{ErrorCode, LossReason};
use pyo3::prelude::*;

use crate::errors::*;

/// The native module.
#[pymodule]
fn _etcdlock(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    etcdlock::set_language("python");
    m.add("LockError", py.get_type::<LockError>())?;
    py.get_type::<LockError>().setattr("code", py.None())?;
    py.get_type::<LockError>().setattr("message", "")?;
    py.get_type::<LockError>().setattr("reason", py.None())?;
    py.get_type::<LockError>().setattr("retryable", false)?;
    let mut names = Vec::new();
    for code in ErrorCode::ALL {
        let ty = exc_type(py, code);
        ty.setattr("code", code.name())?;
        let cls_name: String = ty.getattr("__name__")?.extract()?;
        m.add(cls_name.as_str(), ty)?;
        names.push((code.name(), code as i32, cls_name));
    }
    m.add("ERROR_CODES", names)?;
    m.add(
        "LOSS_REASONS",
        LossReason::ALL.map(LossReason::name).to_vec(),
    )?;
    m.add("MAX_NAME_LEN", etcdlock::MAX_NAME_LEN)?;
    m.add("MAX_TTL_SECS", etcdlock::MAX_TTL_SECS)?;
    m.add_class::<client::NativeClient>()?;
    m.add_class::<guard::NativeGuard>()?;
    m.add_class::<guard::LostEvent>()?;
    m.add_class::<recipes::NativeLeadership>()?;
    m.add_class::<leader::NativeLeaderLoop>()?;
    m.add_class::<leader::NativeTerm>()?;
    m.add_class::<recipes::NativeMultiGuard>()?;
    m.add_class::<recipes::NativeObserver>()?;
    m.add_class::<sync::NativeLatch>()?;
    m.add_class::<sync::NativeBarrier>()?;
    m.add_class::<mem::NativeMemStore>()?;
    m.add("MAX_PERMITS", etcdlock::MAX_PERMITS)?;
    m.add("MAX_MULTI", etcdlock::MAX_MULTI)?;
    m.add_class::<wait::_Canceller>()?;
    m.add_class::<wait::_Completions>()?;
    m.add_function(wrap_pyfunction!(wait::_close_gate, m)?)?;
    m.add_function(wrap_pyfunction!(wait::_completions_mode, m)?)?;
    m.add_function(wrap_pyfunction!(logs::_forward_logs, m)?)?;
    m.add_function(wrap_pyfunction!(logs::_set_log_level, m)?)?;
    m.add_function(wrap_pyfunction!(wait::_gate_after_fork, m)?)?;
    #[cfg(feature = "bench")]
    {
        m.add_function(wrap_pyfunction!(bench::_raw_floor, m)?)?;
        m.add_function(wrap_pyfunction!(bench::_core_bench, m)?)?;
    }
    Ok(())
}
