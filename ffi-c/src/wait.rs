//! What runs on the library's runtime threads: lock_async and its cancel
//! handle, loss and renewal callbacks, election observers.

use std::ffi::{c_char, c_int, c_void, CString};

use etcdlock_core::{bridge, CancellationToken, Error, ErrorCode, LockOptions};

use crate::*;

/// Leadership changes (etcdlock_observe): called with ETCDLOCK_OK for each
/// state, the current one first. key is NULL when nobody leads; otherwise key
/// (NUL-terminated), value (value_len bytes) and revision (the leader key's
/// create_revision, its fencing token) describe the leader and are valid only
/// during the call. Called once with another status (ETCDLOCK_CANCELLED after
/// etcdlock_cancel, ETCDLOCK_CLOSED, ...) as the last call.
pub type etcdlock_observe_cb = Option<
    unsafe extern "C" fn(
        status: c_int,
        key: *const c_char,
        value: *const u8,
        value_len: usize,
        revision: i64,
        user_data: *mut c_void,
    ),
>;

/// Cancels one etcdlock_lock_async wait or etcdlock_observe.
pub struct etcdlock_cancel_handle {
    pub(crate) token: CancellationToken,
}

/// Completion callback of etcdlock_lock_async. status is ETCDLOCK_OK and guard a
/// new guard owned by the callee (free it with etcdlock_guard_free, from any
/// thread), or status is an error code and guard is NULL; during the callback
/// etcdlock_last_error_message() returns the error's message.
pub type etcdlock_lock_cb =
    Option<unsafe extern "C" fn(status: c_int, guard: *mut etcdlock_guard, user_data: *mut c_void)>;

/// Loss callback of etcdlock_guard_on_loss: reason is one of ETCDLOCK_LOSS_*
/// (ETCDLOCK_LOSS_NONE when the guard was released normally).
pub type etcdlock_loss_cb = Option<unsafe extern "C" fn(reason: c_int, user_data: *mut c_void)>;

/// Renewal callback of etcdlock_guard_on_renewal: valid_for_ms >= 0 when the
/// keep-alive renewal starts failing (the ms the hold still has), -1 when it
/// is renewed again, ETCDLOCK_RENEWAL_ENDED (-2) once, last, when the hold
/// ended (released or lost): user_data may be freed after that call.
pub type etcdlock_renewal_cb =
    Option<unsafe extern "C" fn(valid_for_ms: i64, user_data: *mut c_void)>;

/// The last call of an etcdlock_renewal_cb: the hold ended.
pub const ETCDLOCK_RENEWAL_ENDED: i64 = -2;

/// Start waiting for the lock `name` without blocking the caller.
///
/// If this returns ETCDLOCK_OK, `callback(status, guard, user_data)` is called
/// exactly once, on one of the library's runtime threads (never on the calling
/// thread, never concurrently with itself for this request): with ETCDLOCK_OK
/// and a new guard that the callback owns, or with ETCDLOCK_TIMEOUT,
/// ETCDLOCK_CANCELLED, ETCDLOCK_CLOSED, ... and guard NULL. If this returns an
/// error (ETCDLOCK_INVALID_ARGUMENT for a NULL client or callback, a bad name
/// or timeout; ETCDLOCK_CLOSED once etcdlock_client_free was called on the
/// client), the callback is never called. etcdlock_client_free returns only
/// after the callback has returned (unless it is called from a callback).
/// The callback must not block for long; blocking etcdlock calls
/// (etcdlock_lock, etcdlock_unlock, guarded operations) made inside it return
/// ETCDLOCK_INVALID_ARGUMENT, so hand the guard to another thread for those.
///
/// If cancel is not NULL, *cancel receives a handle: etcdlock_cancel() makes a
/// wait still pending complete with ETCDLOCK_CANCELLED; free the handle with
/// etcdlock_cancel_free (freeing does not cancel).
///
/// Safety: client is a live handle; name is NUL-terminated; user_data must stay
/// valid until the callback has run; cancel is NULL or writable.
///
/// Example:
///
///     static void done(int st, etcdlock_guard *g, void *ud) {
///         if (st == ETCDLOCK_OK) hand_over(g, ud); else fprintf(stderr, "%s\n", etcdlock_last_error_message());
///     }
///     etcdlock_cancel_handle *h = NULL;
///     etcdlock_lock_async(c, "orders", ETCDLOCK_WAIT_FOREVER, done, ctx, &h);
///     ... etcdlock_cancel(h); etcdlock_cancel_free(h);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_lock_async(
    client: *const etcdlock_client,
    name: *const c_char,
    timeout_ms: i64,
    callback: etcdlock_lock_cb,
    user_data: *mut c_void,
    cancel: *mut *mut etcdlock_cancel_handle,
) -> c_int {
    ffi(|| {
        if let Some(out) = cancel.as_mut() {
            *out = std::ptr::null_mut();
        }
        let h = client_arg(client)?;
        let c = h.client.clone();
        let name = name_arg(name)?;
        let timeout = timeout_arg(timeout_ms)?;
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        let callbacks = h.callbacks.clone();
        // Counted until the callback returned (or the wait was dropped unrun).
        let pending = callbacks.begin()?;
        let token = CancellationToken::new();
        let ud = UserData(user_data);
        let opts = LockOptions {
            timeout,
            cancel: Some(token.clone()),
            ..LockOptions::default()
        };
        let done = move |r: Result<etcdlock_core::Guard, Error>| {
            let (ud, pending) = (ud, pending);
            let (status, g) = match r {
                Ok(g) => (ETCDLOCK_OK, new_guard(g, &callbacks)),
                Err(e) => (fail(&e), std::ptr::null_mut()),
            };
            cb(status, g, ud.0);
            drop(pending);
        };
        bridge::spawn_complete(async move { c.lock_with(&name, opts).await }, done)?;
        if let Some(out) = cancel.as_mut() {
            *out = Box::into_raw(Box::new(etcdlock_cancel_handle { token }));
        }
        Ok(())
    })
}

/// Cancel the etcdlock_lock_async wait behind this handle: if the callback has
/// not run yet, it runs (once) with ETCDLOCK_CANCELLED and the waiter's key is
/// removed from etcd. Idempotent; a no-op after the callback ran. Never blocks;
/// callable from any thread, including callbacks.
///
/// Safety: cancel is a live handle from etcdlock_lock_async.
///
/// Example: etcdlock_cancel(h);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_cancel(cancel: *const etcdlock_cancel_handle) -> c_int {
    ffi(|| {
        let h = cancel
            .as_ref()
            .ok_or_else(|| invalid("cancel handle is NULL"))?;
        h.token.cancel();
        Ok(())
    })
}

/// Free a cancel handle. Does not cancel: the callback still runs exactly once.
/// NULL is a no-op.
///
/// Safety: cancel is NULL or a handle not yet freed.
///
/// Example: etcdlock_cancel_free(h);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_cancel_free(cancel: *mut etcdlock_cancel_handle) {
    if cancel.is_null() {
        return;
    }
    ffi_void(|| drop(Box::from_raw(cancel)));
}

/// Register a callback for the end of the hold. `callback(reason, user_data)`
/// runs exactly once, on a runtime thread, when the hold ends: with an
/// ETCDLOCK_LOSS_* reason if the lock was lost (lease expired, key deleted,
/// connection lost past the safety margin, client closed), or with
/// ETCDLOCK_LOSS_NONE when it was released by etcdlock_unlock /
/// etcdlock_guard_free. It never runs if the process exits while the lock is
/// still held. If the hold already ended, it runs at once (on a runtime
/// thread). Several callbacks may be registered; each runs once. Loss is
/// reported locally before etcd can grant the lock to anyone else (as long as
/// the process is running): stop touching the protected resource.
/// etcdlock_client_free on the guard's client returns only after the
/// callback has returned (unless it is called from a callback).
///
/// Safety: guard is a live handle; user_data must stay valid until the callback ran.
///
/// Example:
///
///     static void lost(int reason, void *flag) { if (reason) atomic_store((atomic_int *)flag, 1); }
///     etcdlock_guard_on_loss(g, lost, &stop_flag);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_on_loss(
    guard: *const etcdlock_guard,
    callback: etcdlock_loss_cb,
    user_data: *mut c_void,
) -> c_int {
    ffi(|| {
        // Core's owned loss signal: the watcher does not keep the guard alive
        // (freeing it still releases the lock, and the callback then gets NONE).
        let g = guard_arg(guard)?;
        let mut signal = g.guard.lost_signal();
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        let ud = UserData(user_data);
        let pending = g.callbacks.begin_guard();
        etcdlock_core::runtime::spawn(async move {
            let (ud, pending) = (ud, pending);
            let reason = signal
                .wait()
                .await
                .map(|l| l.reason as c_int)
                .unwrap_or(ETCDLOCK_LOSS_NONE);
            cb(reason, ud.0);
            drop(pending);
        })?;
        Ok(())
    })
}

/// Whether the hold's keep-alive renewal is failing now: sets *valid_for_ms to
/// the milliseconds the hold still has (no keep-alive acknowledged for an
/// interval past when one was due), or to -1 when renewals are acknowledged
/// (or the hold ended). A failing hold is still held: pause work on the
/// protected resource, do not assume the lock is gone.
///
/// Safety: guard is a live handle; valid_for_ms is writable.
///
/// Example: int64_t left; etcdlock_guard_renewal(g, &left); if (left >= 0) pause_writes(left);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_renewal(
    guard: *const etcdlock_guard,
    valid_for_ms: *mut i64,
) -> c_int {
    ffi(|| {
        let out = out_arg(valid_for_ms, "valid_for_ms (out)")?;
        let g = &guard_arg(guard)?.guard;
        *out = match g.renewal() {
            etcdlock_core::Renewal::Failing { valid_until } if g.is_held() => valid_until
                .saturating_duration_since(std::time::Instant::now())
                .as_millis()
                as i64,
            _ => -1,
        };
        Ok(())
    })
}

/// Register a callback for changes of the keep-alive renewal. `callback(ms,
/// user_data)` runs on a runtime thread, one call at a time, in order: with
/// the milliseconds the hold still has when renewal starts failing, -1 when it
/// is renewed again, and a last time with ETCDLOCK_RENEWAL_ENDED (-2) when the
/// hold ends (released or lost), after which it is never called again.
/// etcdlock_client_free on the guard's client returns only after the
/// ETCDLOCK_RENEWAL_ENDED call has returned (unless it is called from a
/// callback).
///
/// Safety: guard is a live handle; user_data must stay valid until the
/// ETCDLOCK_RENEWAL_ENDED call.
///
/// Example:
///
///     static void renewal(int64_t ms, void *flag) { atomic_store((atomic_int *)flag, ms >= 0); }
///     etcdlock_guard_on_renewal(g, renewal, &paused);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_on_renewal(
    guard: *const etcdlock_guard,
    callback: etcdlock_renewal_cb,
    user_data: *mut c_void,
) -> c_int {
    ffi(|| {
        let h = guard_arg(guard)?;
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        let ud = UserData(user_data);
        let end = UserData(user_data);
        // Counted until the ENDED call returned: the task holds `changed`
        // and `ended` together, and `changed` is never called after `ended`.
        let pending = h.callbacks.begin_guard();
        etcdlock_core::bridge::follow_renewal(
            &h.guard,
            move |left| {
                let ud = &ud;
                cb(left.map_or(-1, |d| d.as_millis() as i64), ud.0)
            },
            move || {
                let (end, pending) = (end, pending);
                cb(ETCDLOCK_RENEWAL_ENDED, end.0);
                drop(pending);
            },
        )?;
        Ok(())
    })
}

/// Follow the election `name`: `callback` runs on a runtime thread with the
/// current state first, then each change (a new proclamation is a change;
/// "no leader" is reported as key NULL), until etcdlock_cancel on the handle
/// stored in *cancel (then a last call with ETCDLOCK_CANCELLED) or an error
/// (a last call with that status). Calls are never concurrent for one
/// observer; the callback must not block (see etcdlock_lock_async).
///
/// Returns ETCDLOCK_INVALID_ARGUMENT (NULL, bad name), or ETCDLOCK_CLOSED
/// once etcdlock_client_free was called on the client; then the callback is
/// never called. etcdlock_client_free ends the observer (last call
/// ETCDLOCK_CLOSED) and returns only after that call has returned (unless it
/// is called from a callback).
///
/// Safety: client is live; name NUL-terminated; user_data valid until the
/// last call; cancel is writable (required: it is the only way to stop).
///
/// Example:
///
///     static void on_leader(int st, const char *k, const uint8_t *v, size_t n, int64_t rev, void *ud) {
///         if (st == ETCDLOCK_OK) printf("leader: %s\n", k ? k : "(none)");
///     }
///     etcdlock_cancel_handle *h; etcdlock_observe(c, "scheduler", on_leader, NULL, &h);
///     ... etcdlock_cancel(h); etcdlock_cancel_free(h);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_observe(
    client: *const etcdlock_client,
    name: *const c_char,
    callback: etcdlock_observe_cb,
    user_data: *mut c_void,
    cancel: *mut *mut etcdlock_cancel_handle,
) -> c_int {
    ffi(|| {
        let out = out_arg(cancel, "cancel (out)")?;
        *out = std::ptr::null_mut();
        let h = client_arg(client)?;
        let name = name_arg(name)?;
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        let mut obs = h.client.observe(&name)?;
        // Counted until the last call returned (or the observer was dropped).
        let pending = h.callbacks.begin()?;
        let token = CancellationToken::new();
        let t = token.clone();
        let ud = UserData(user_data);
        etcdlock_core::runtime::spawn(async move {
            let (ud, _pending) = (ud, pending);
            loop {
                let next = tokio::select! {
                    biased;
                    _ = t.cancelled() => Err(Error::new(ErrorCode::Cancelled, "observe: cancelled")),
                    r = obs.next() => r,
                };
                // A panic ends the observer (no further call).
                let done = bridge::catch(|| {
                    Ok(match next {
                        Ok(Some(l)) => {
                            let key = CString::new(l.key).unwrap_or_default();
                            cb(
                                ETCDLOCK_OK,
                                key.as_ptr(),
                                l.value.as_ptr(),
                                l.value.len(),
                                l.revision,
                                ud.0,
                            );
                            false
                        }
                        Ok(None) => {
                            cb(ETCDLOCK_OK, std::ptr::null(), std::ptr::null(), 0, 0, ud.0);
                            false
                        }
                        Err(e) => {
                            cb(fail(&e), std::ptr::null(), std::ptr::null(), 0, 0, ud.0);
                            true
                        }
                    })
                })
                .unwrap_or(true);
                if done {
                    break;
                }
            }
        })?;
        *out = Box::into_raw(Box::new(etcdlock_cancel_handle { token }));
        Ok(())
    })
}
