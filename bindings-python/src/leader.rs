//! `NativeLeaderLoop` and `NativeTerm`: core's leader loop
//! (`Client::leader_loop`) as a stream of events. The pure-Python
//! `LeaderLoop` / `AsyncLeaderLoop` read them and run the user's task of each
//! term in a thread or an asyncio task; the loop's logic stays in core.

use std::sync::Arc;
use std::time::Duration;

use etcdlock::{ErrorCode, LeadOptions, LeaderEvent, LeaderLoop, Term};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::args::*;
use crate::client::NativeClient;
use crate::errors::*;
use crate::guard::{NativeGuard, SharedGuard};
use crate::recipes::NativeLeadership;
use crate::recipes::{leader_tuple, LeaderTuple};
use crate::wait::*;

/// A running leader loop. Safe to share across threads; in a forked child it
/// is not running (`next` raises ClosedError, `stop` does nothing).
#[pyclass(module = "etcdlock._etcdlock", frozen)]
pub(crate) struct NativeLeaderLoop {
    lp: Arc<LeaderLoop>,
    client: Py<NativeClient>,
    pid: u32,
}

/// One term of leadership: its `Leadership` and the end of its task.
#[pyclass(module = "etcdlock._etcdlock", frozen)]
pub(crate) struct NativeTerm {
    t: Term,
    leadership: Py<NativeLeadership>,
}

/// One event as Python sees it: (kind, payload).
type EventTuple = (&'static str, Py<PyAny>);

fn event_tuple(py: Python<'_>, ev: LeaderEvent, client: &Py<NativeClient>) -> PyResult<EventTuple> {
    Ok(match ev {
        LeaderEvent::Elected(t) => {
            let g = NativeGuard {
                g: SharedGuard::Term(t.clone()),
                client: client.clone_ref(py),
            };
            let leadership = Py::new(
                py,
                PyClassInitializer::from(g).add_subclass(NativeLeadership {}),
            )?;
            let term = Py::new(py, NativeTerm { t, leadership })?;
            ("elected", term.into_any())
        }
        LeaderEvent::RenewalFailing => ("renewal_failing", py.None()),
        LeaderEvent::RenewalRecovered => ("renewal_recovered", py.None()),
        LeaderEvent::Lost(loss) => (
            "lost",
            PyString::new(py, loss.reason.name()).into_any().unbind(),
        ),
        LeaderEvent::Resigned => ("resigned", py.None()),
        LeaderEvent::CampaignFailed(e) => (
            "campaign_failed",
            to_pyerr(py, &e).into_value(py).into_any(),
        ),
        LeaderEvent::Leader(l) => {
            let t: Option<LeaderTuple> = l.map(|l| leader_tuple(py, l));
            ("leader", t.into_pyobject(py)?.into_any().unbind())
        }
        LeaderEvent::Stopped => ("stopped", py.None()),
    })
}

fn not_here(py: Python<'_>) -> PyErr {
    to_pyerr(
        py,
        &CoreError::new(
            ErrorCode::Closed,
            "this leader loop was started in the parent process; it does not run in a forked child",
        ),
    )
}

#[pymethods]
impl NativeLeaderLoop {
    /// The next event as (kind, payload), waiting with the GIL released;
    /// None after ("stopped", None).
    fn next(&self, py: Python<'_>) -> PyResult<Option<EventTuple>> {
        if self.pid != std::process::id() {
            return Err(not_here(py));
        }
        let lp = self.lp.clone();
        let ev = wait(py, async move { Ok(lp.next().await) })?;
        ev.map(|ev| event_tuple(py, ev, &self.client)).transpose()
    }

    /// `next` as an awaitable.
    fn next_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if self.pid != std::process::id() {
            return Err(not_here(py));
        }
        let lp = self.lp.clone();
        let client = self.client.clone_ref(py);
        to_asyncio(py, async move { Ok(lp.next().await) }, move |py, ev| {
            Ok(match ev {
                Some(ev) => event_tuple(py, ev, &client)?
                    .into_pyobject(py)?
                    .into_any()
                    .unbind(),
                None => none(py),
            })
        })
    }

    /// Stop: cancel the campaign or the current term (whose task must then
    /// end), resign, then ("stopped", None). Idempotent.
    fn stop(&self) {
        if self.pid == std::process::id() {
            self.lp.stop();
        }
    }
}

#[pymethods]
impl NativeTerm {
    /// The term's Leadership (fencing token, guarded operations, proclaim).
    #[getter]
    fn leadership(&self, py: Python<'_>) -> Py<NativeLeadership> {
        self.leadership.clone_ref(py)
    }

    /// True once the term is over for its task (lost, stopped, or ended).
    #[getter]
    fn cancelled(&self) -> bool {
        self.t.cancelled().is_cancelled()
    }

    /// The task of this term has ended: the loop resigns (if still leader)
    /// and campaigns again or stops. Idempotent.
    fn end(&self) {
        self.t.end();
    }
}

#[pymethods]
impl NativeClient {
    /// Start a leader loop for the election `name`, proclaiming `value`:
    /// campaign again after each term when `again`, pausing `retry` seconds
    /// after a failed campaign; `lock_delay` and `metadata` as `campaign`.
    #[pyo3(signature = (name, value, again=true, retry=1.0, **extras))]
    fn lead(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        value: &Bound<'_, PyAny>,
        again: bool,
        retry: f64,
        extras: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<NativeLeaderLoop> {
        let this = slf.get();
        if !this.same_process() {
            return Err(not_here(py));
        }
        let name = utf8(name, "election name")?;
        let value = key_bytes(value, "value")?;
        let retry: Duration = match timeout_arg(py, Some(retry)) {
            Ok(Some(d)) => d,
            _ => {
                return Err(to_pyerr(
                    py,
                    &invalid(format!(
                        "retry must be a number of seconds >= 0, got {retry}"
                    )),
                ))
            }
        };
        let opts = LeadOptions {
            again,
            retry,
            campaign: acquire_opts(py, None, extras)?,
            stop: None,
        };
        let lp = this
            .inner
            .leader_loop(&name, value, opts)
            .map_err(|e| to_pyerr(py, &e))?;
        Ok(NativeLeaderLoop {
            lp: Arc::new(lp),
            client: slf.clone().unbind(),
            pid: std::process::id(),
        })
    }
}
