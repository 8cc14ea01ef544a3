//! The leader loop (core `LeaderLoop`): its events, read one at a time as
//! Promises (`NativeLeaderLoop::next`), and each term's handle. index.js
//! (lib/leader.js) runs the task and turns the events into an EventEmitter.

use std::sync::Arc;

use etcdlock::bridge::WireError;
use etcdlock::LeaderEvent;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use crate::client::{acquire_opts, NativeAcquire, NativeClient};
use crate::election::{leader_info, NativeLeader};
use crate::errors::*;
use crate::guard::NativeLock;
use crate::wait::*;

/// A running leader loop (core `LeaderLoop`).
#[napi]
pub struct NativeLeaderLoop {
    lp: Arc<etcdlock::LeaderLoop>,
}

/// One term of leadership (core `Term`).
#[napi]
pub struct NativeTerm {
    term: etcdlock::Term,
}

/// One leader-loop event. `kind`: `elected` (with `term`), `renewalFailing`,
/// `renewalRecovered`, `lost` (with `reason`), `resigned`, `error` (a failed
/// campaign: `error`, core's wire form), `leader` (with `leader`, absent
/// when nobody leads), `stopped`.
#[napi(object, object_from_js = false)]
pub struct NativeLeaderEvent {
    pub kind: String,
    pub term: Option<NativeTerm>,
    pub reason: Option<String>,
    pub leader: Option<NativeLeader>,
    pub error: Option<String>,
}

fn event(kind: &str) -> NativeLeaderEvent {
    NativeLeaderEvent {
        kind: kind.to_string(),
        term: None,
        reason: None,
        leader: None,
        error: None,
    }
}

fn native_event(ev: LeaderEvent) -> NativeLeaderEvent {
    match ev {
        LeaderEvent::Elected(term) => NativeLeaderEvent {
            term: Some(NativeTerm { term }),
            ..event("elected")
        },
        LeaderEvent::RenewalFailing => event("renewalFailing"),
        LeaderEvent::RenewalRecovered => event("renewalRecovered"),
        LeaderEvent::Lost(loss) => NativeLeaderEvent {
            reason: Some(loss.reason.name().to_string()),
            ..event("lost")
        },
        LeaderEvent::Resigned => event("resigned"),
        LeaderEvent::CampaignFailed(e) => NativeLeaderEvent {
            error: Some(WireError::from(&e).encode()),
            ..event("error")
        },
        LeaderEvent::Leader(l) => NativeLeaderEvent {
            leader: l.map(leader_info),
            ..event("leader")
        },
        LeaderEvent::Stopped => event("stopped"),
    }
}

#[napi]
impl NativeClient {
    /// Start a leader loop for `name` proclaiming `value`: `again` (default
    /// true) campaigns again after each term, `retry_ms` (default 1000) is
    /// the pause after a failed campaign, `extras` the campaign's lock-delay,
    /// lease time and metadata. `stopped`: the caller's `AbortSignal` has
    /// aborted already, so the loop never campaigns (its only event is
    /// `stopped`).
    #[napi]
    pub fn leader_loop(
        &self,
        name: String,
        value: Either<String, Buffer>,
        again: Option<bool>,
        retry_ms: Option<f64>,
        extras: Option<NativeAcquire>,
        stopped: Option<bool>,
    ) -> napi::Result<NativeLeaderLoop> {
        guard_sync(|| {
            let mut opts = etcdlock::LeadOptions::default();
            if let Some(a) = again {
                opts.again = a;
            }
            if let Some(ms) = retry_ms {
                opts.retry = js(etcdlock::bridge::span(
                    "retry",
                    ms,
                    etcdlock::bridge::Unit::Millis,
                ))?;
            }
            opts.campaign = acquire_opts(None, None, extras)?;
            if stopped == Some(true) {
                let stop = etcdlock::CancellationToken::new();
                stop.cancel();
                opts.stop = Some(stop);
            }
            let v = crate::guard::bytes(&value);
            let lp = js(self.inner.leader_loop(&name, v, opts))?;
            Ok(NativeLeaderLoop { lp: Arc::new(lp) })
        })
    }
}

#[napi]
impl NativeLeaderLoop {
    /// The next event; null after `stopped`. A pending call is a pending
    /// Promise: it keeps the process alive, as a pending `lock()` does.
    #[napi(ts_return_type = "Promise<NativeLeaderEvent | null>")]
    pub fn next<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        guard_sync(|| {
            let lp = self.lp.clone();
            promise(env, async move { Ok(lp.next().await.map(native_event)) })
        })
    }

    /// Stop: cancel the campaign or the current term, resign once the
    /// term's task ended; the events end with `stopped`. Idempotent.
    #[napi]
    pub fn stop(&self) {
        self.lp.stop();
    }
}

#[napi]
impl NativeTerm {
    /// This term's leadership (guarded operations, fencing token, proclaim).
    #[napi]
    pub fn leadership(&self) -> NativeLock {
        NativeLock::of_term(self.term.clone())
    }

    /// Whether the term is over for its task (lost, stopped, or ended).
    #[napi(getter)]
    pub fn cancelled(&self) -> bool {
        self.term.cancelled().is_cancelled()
    }

    /// The term's task has ended: resign if still leader, campaign again (or
    /// stop). Idempotent.
    #[napi]
    pub fn end(&self) {
        self.term.end();
    }

    /// Call `cb(reasonOrNull)` once when the term is cancelled: the loss
    /// reason name when leadership was lost, `null` when the loop stopped or
    /// the term ended. Held weakly, like `NativeLock::on_end`: it does not
    /// keep the event loop alive.
    #[napi(ts_args_type = "cb: (err: null | Error, reason: string | null) => void")]
    pub fn on_cancelled(
        &self,
        cb: ThreadsafeFunction<Option<String>, (), Option<String>, Status, true, true>,
    ) -> napi::Result<()> {
        guard_sync(|| {
            let rt = etcdlock::runtime::runtime().map_err(|e| to_js_err(&e))?;
            let term = self.term.clone();
            rt.spawn(async move {
                term.cancelled().cancelled().await;
                let reason = term
                    .leadership()
                    .loss()
                    .map(|l| l.reason.name().to_string());
                cb.call(Ok(reason), ThreadsafeFunctionCallMode::NonBlocking);
            });
            Ok(())
        })
    }
}
