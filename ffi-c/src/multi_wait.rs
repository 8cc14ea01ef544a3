//! The multi-lock's loss and renewal callbacks and its renewal state (as
//! `wait` has the guard's), from core's `MultiGuard::lost_signal`,
//! `renewal` and `renewal_changes`: they run on the library's runtime threads.

use std::ffi::{c_int, c_void};

use etcdlock_core::{Error, ErrorCode, Renewal};

use crate::*;

/// Loss callback of etcdlock_multi_on_loss: reason is one of ETCDLOCK_LOSS_*
/// and index the position of the lost lock in the names given to
/// etcdlock_lock_many; reason ETCDLOCK_LOSS_NONE and index SIZE_MAX when the
/// multi-lock was released normally.
pub type etcdlock_multi_loss_cb =
    Option<unsafe extern "C" fn(reason: c_int, index: usize, user_data: *mut c_void)>;

/// Register a callback for the end of the multi-lock's hold (the loss of any
/// one lock is the loss of the hold). `callback(reason, index, user_data)`
/// runs exactly once, on a runtime thread: with the ETCDLOCK_LOSS_* reason
/// of the first lock lost and its position in the names given to
/// etcdlock_lock_many, or with ETCDLOCK_LOSS_NONE and SIZE_MAX once every
/// lock was released (etcdlock_multi_unlock, etcdlock_multi_free). Otherwise
/// as etcdlock_guard_on_loss: if the hold already ended it runs at once;
/// several callbacks may be registered, each runs once; etcdlock_client_free
/// on the multi-lock's client returns only after the callback has returned
/// (unless it is called from a callback).
///
/// Safety: multi is a live handle; user_data must stay valid until the callback ran.
///
/// Example:
///
///     static void lost(int reason, size_t index, void *flag) { if (reason) atomic_store((atomic_int *)flag, 1); }
///     etcdlock_multi_on_loss(m, lost, &stop_flag);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_on_loss(
    multi: *const etcdlock_multi,
    callback: etcdlock_multi_loss_cb,
    user_data: *mut c_void,
) -> c_int {
    ffi(|| {
        let h = multi_arg(multi)?;
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        let names: Vec<String> = h
            .multi
            .guards()
            .iter()
            .map(|g| g.name().to_string())
            .collect();
        let mut signal = h.multi.lost_signal();
        let ud = UserData(user_data);
        let pending = h.callbacks.begin_guard();
        etcdlock_core::runtime::spawn(async move {
            let (ud, pending) = (ud, pending);
            let (reason, index) = match signal.wait().await {
                Some((name, loss)) => (
                    loss.reason as c_int,
                    names.iter().position(|n| *n == name).unwrap_or(usize::MAX),
                ),
                None => (ETCDLOCK_LOSS_NONE, usize::MAX),
            };
            cb(reason, index, ud.0);
            drop(pending);
        })?;
        Ok(())
    })
}

/// As etcdlock_guard_renewal, for the multi-lock: every lock of it is on one
/// session (one lease), so they are renewed together. *valid_for_ms is the
/// milliseconds the hold still has while renewal is failing, -1 when
/// renewals are acknowledged or the hold ended (a lock lost, or released).
///
/// Safety: multi is a live handle; valid_for_ms is writable.
///
/// Example: int64_t left; etcdlock_multi_renewal(m, &left); if (left >= 0) pause_writes(left);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_renewal(
    multi: *const etcdlock_multi,
    valid_for_ms: *mut i64,
) -> c_int {
    ffi(|| {
        let out = out_arg(valid_for_ms, "valid_for_ms (out)")?;
        let m = &multi_arg(multi)?.multi;
        *out = match m.renewal() {
            Renewal::Failing { valid_until } if m.is_held() => valid_until
                .saturating_duration_since(std::time::Instant::now())
                .as_millis() as i64,
            _ => -1,
        };
        Ok(())
    })
}

/// As etcdlock_guard_on_renewal, for the multi-lock: `callback(ms,
/// user_data)` runs on a runtime thread, one call at a time, in order: with
/// the milliseconds the hold still has when renewal starts failing, -1 when
/// it is renewed again, and a last time with ETCDLOCK_RENEWAL_ENDED (-2)
/// when the hold ends (a lock lost, or released), after which it is never
/// called again. etcdlock_client_free on the multi-lock's client returns
/// only after the ETCDLOCK_RENEWAL_ENDED call has returned (unless it is
/// called from a callback).
///
/// Safety: multi is a live handle; user_data must stay valid until the
/// ETCDLOCK_RENEWAL_ENDED call.
///
/// Example:
///
///     static void renewal(int64_t ms, void *flag) { atomic_store((atomic_int *)flag, ms >= 0); }
///     etcdlock_multi_on_renewal(m, renewal, &paused);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_on_renewal(
    multi: *const etcdlock_multi,
    callback: etcdlock_renewal_cb,
    user_data: *mut c_void,
) -> c_int {
    ffi(|| {
        let h = multi_arg(multi)?;
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        let mut changes = h
            .multi
            .renewal_changes()
            .ok_or_else(|| Error::new(ErrorCode::Internal, "a multi-lock without locks"))?;
        let mut ended = h.multi.lost_signal();
        let ud = UserData(user_data);
        // Counted until the ENDED call returned, as for a guard.
        let pending = h.callbacks.begin_guard();
        etcdlock_core::runtime::spawn(async move {
            let (ud, pending) = (ud, pending);
            let end = ended.wait();
            tokio::pin!(end);
            loop {
                tokio::select! {
                    _ = &mut end => break,
                    r = changes.changed() => {
                        if r.is_err() {
                            break;
                        }
                        let left = match *changes.borrow_and_update() {
                            Renewal::Failing { valid_until } => valid_until
                                .saturating_duration_since(std::time::Instant::now())
                                .as_millis() as i64,
                            Renewal::Ok => -1,
                        };
                        cb(left, ud.0);
                    }
                }
            }
            cb(ETCDLOCK_RENEWAL_ENDED, ud.0);
            drop(pending);
        })?;
        Ok(())
    })
}
