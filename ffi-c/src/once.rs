//! Run-once for C (ShedLock's model: a scheduled job runs on one node per
//! tick): core's run-once record, the one Java's `@SchedulerLock` provider,
//! Python's and Node's `once` and `etcdlock once` take, so they exclude each
//! other on the same name.

use std::ffi::{c_char, c_int};
use std::time::Duration;

use etcdlock_core::bridge::{once_spans, Unit};
use etcdlock_core::runtime::current_pid;
use etcdlock_core::{Error, ErrorCode, OnceHold};

use crate::*;

/// This node's hold of a job's run-once record (etcdlock_once_take). Finish
/// it with etcdlock_once_finish when the job is done (that frees it too).
pub struct etcdlock_once {
    client: etcdlock_core::Client,
    hold: OnceHold,
    at_least: Duration,
    pid: u32,
}

/// Take job name's run-once record for at_most_ms milliseconds if no node
/// holds it now; never waits. ETCDLOCK_OK: this node runs the job, *hold is
/// set (finish it with etcdlock_once_finish). ETCDLOCK_WOULD_BLOCK: another
/// node has the job (it runs, or ran less than its at_least ago); *hold is
/// NULL and nothing was written. at_most_ms is the longest the job may run:
/// after it the record expires and another node may take the job, even if
/// this one still runs (choose it above the job's longest run). at_least_ms
/// (at most at_most_ms) keeps the job taken that long after the start even
/// if it finishes sooner (choose it above the nodes' clock skew). Expiry
/// compares wall clocks: keep the nodes' clocks in sync (NTP).
///
/// Returns ETCDLOCK_INVALID_ARGUMENT (at_most_ms not positive, at_least_ms
/// negative or above at_most_ms, a bad name), ETCDLOCK_CLOSED,
/// ETCDLOCK_UNAVAILABLE.
///
/// Safety: client is a live handle; name is NUL-terminated; hold is writable.
///
/// Example:
///
///     etcdlock_once *job = NULL;
///     int rc = etcdlock_once_take(c, "nightly-report", 600000, 30000, &job);
///     if (rc == ETCDLOCK_WOULD_BLOCK) return 0;   // another node runs it
///     if (rc != ETCDLOCK_OK) return rc;
///     run_report(etcdlock_once_revision(job));    // a fencing token
///     etcdlock_once_finish(job);                  // taken until start + 30 s
#[no_mangle]
pub unsafe extern "C" fn etcdlock_once_take(
    client: *const etcdlock_client,
    name: *const c_char,
    at_most_ms: i64,
    at_least_ms: i64,
    hold: *mut *mut etcdlock_once,
) -> c_int {
    ffi(|| {
        let out = out_arg(hold, "hold (out)")?;
        *out = std::ptr::null_mut();
        let h = client_arg(client)?;
        let name = name_arg(name)?;
        let (at_most, at_least) = once_spans(at_most_ms as f64, at_least_ms as f64, Unit::Millis)?;
        let c = h.client.clone();
        let n = name.clone();
        let taken = block_on(async move { c.once_take(&n, at_most).await })?;
        let Some(taken) = taken else {
            return Err(Error::new(
                ErrorCode::WouldBlock,
                format!("job {name:?} is taken by another node"),
            ));
        };
        *out = Box::into_raw(Box::new(etcdlock_once {
            client: h.client.clone(),
            hold: taken,
            at_least,
            pid: current_pid(),
        }));
        Ok(())
    })
}

/// The revision of this hold's record: higher for every take of the job (a
/// fencing token for what the job writes). 0 for NULL.
///
/// Safety: hold is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn etcdlock_once_revision(hold: *const etcdlock_once) -> i64 {
    hold.as_ref().map_or(0, |h| h.hold.revision())
}

/// The job is done: keep its record taken until at_least_ms (given to
/// etcdlock_once_take) after the start, or free it now if that has passed;
/// then free the handle, whatever the outcome. ETCDLOCK_NOT_HELD: the record
/// was no longer this hold's (it expired after at_most_ms and another node
/// took the job), and nothing was changed. NULL: nothing to do (ETCDLOCK_OK).
///
/// Returns also ETCDLOCK_CLOSED, ETCDLOCK_UNAVAILABLE (the record then
/// expires at_most_ms after the start).
///
/// Safety: hold is NULL or a live handle, not used after this call.
#[no_mangle]
pub unsafe extern "C" fn etcdlock_once_finish(hold: *mut etcdlock_once) -> c_int {
    if hold.is_null() {
        return ffi(|| Ok(()));
    }
    let h = Box::from_raw(hold);
    if h.pid != current_pid() {
        let name = h.hold.name.clone();
        etcdlock_core::runtime::keep_inherited(h);
        return ffi(|| {
            Err(Error::new(
                ErrorCode::Closed,
                format!(
                    "job {name:?} was taken in the parent process before fork(); finish it there"
                ),
            ))
        });
    }
    ffi(move || {
        let name = h.hold.name.clone();
        let done = block_on(async move { h.client.once_finish(&h.hold, h.at_least).await })?;
        if done {
            Ok(())
        } else {
            Err(Error::new(
                ErrorCode::NotHeld,
                format!("job {name:?}: the record expired and another node took the job"),
            ))
        }
    })
}
