//! Multi-lock: several names held together (etcdlock_lock_many) and the
//! handle's calls.

use std::ffi::{c_char, c_int, CString};
use std::sync::Arc;

use etcdlock_core::runtime::current_pid;
use etcdlock_core::{Error, ErrorCode, GuardState, LockOptions};

use crate::*;

/// Several locks held together (etcdlock_lock_many). Thread-safe; freeing it
/// releases every lock still held.
pub struct etcdlock_multi {
    pub(crate) multi: Arc<etcdlock_core::MultiGuard>,
    pub(crate) keys: Vec<CString>,
    pub(crate) pid: u32,
    /// Its client's: etcdlock_client_free waits for the multi-lock's callbacks too.
    pub(crate) callbacks: Arc<Callbacks>,
}

/// Lock `count` names together. All waiter keys are created in one etcd
/// transaction, so every client queues in the same order on every name: no
/// deadlock, no release-and-retry. A timeout removes every key; the loss of
/// any one lock is the loss of the hold (etcdlock_multi_is_held turns 0).
/// On success *multi is a new handle (free with etcdlock_multi_free).
///
/// Returns as etcdlock_lock, and ETCDLOCK_INVALID_ARGUMENT for count 0 or
/// above ETCDLOCK_MAX_MULTI, a bad or repeated name.
///
/// Safety: client is live; names points to count NUL-terminated strings; multi is writable.
///
/// Example:
///
///     const char *names[] = {"account-1", "account-2"};
///     etcdlock_multi *m = NULL;
///     if (etcdlock_lock_many(c, names, 2, 5000, &m) == ETCDLOCK_OK) { transfer(); etcdlock_multi_free(m); }
#[no_mangle]
pub unsafe extern "C" fn etcdlock_lock_many(
    client: *const etcdlock_client,
    names: *const *const c_char,
    count: usize,
    timeout_ms: i64,
    multi: *mut *mut etcdlock_multi,
) -> c_int {
    ffi(|| {
        let out = out_arg(multi, "multi (out)")?;
        *out = std::ptr::null_mut();
        let h = client_arg(client)?;
        let c = h.client.clone();
        if names.is_null() {
            return Err(invalid("names is NULL"));
        }
        if count == 0 || count > ETCDLOCK_MAX_MULTI {
            return Err(invalid(format!(
                "lock_many takes 1 to {ETCDLOCK_MAX_MULTI} names, got {count}"
            )));
        }
        let names: Vec<String> = std::slice::from_raw_parts(names, count)
            .iter()
            .map(|&p| name_arg(p))
            .collect::<Result<_, _>>()?;
        let timeout = timeout_arg(timeout_ms)?;
        let m = block_on(async move {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            c.lock_many(
                &refs,
                LockOptions {
                    timeout,
                    ..LockOptions::default()
                },
            )
            .await
        })?;
        let keys = m
            .guards()
            .iter()
            .map(|g| CString::new(g.key()).unwrap_or_default())
            .collect();
        *out = Box::into_raw(Box::new(etcdlock_multi {
            multi: Arc::new(m),
            keys,
            pid: current_pid(),
            callbacks: h.callbacks.clone(),
        }));
        Ok(())
    })
}

pub(crate) unsafe fn multi_arg<'a>(m: *const etcdlock_multi) -> Result<&'a etcdlock_multi, Error> {
    let m = m.as_ref().ok_or_else(|| invalid("multi is NULL"))?;
    if m.pid != current_pid() {
        return Err(Error::new(
            ErrorCode::Closed,
            "this multi-lock belongs to the parent process (fork)",
        ));
    }
    Ok(m)
}

/// Our key on the index-th name (in the order given to etcdlock_lock_many);
/// *key stays valid until etcdlock_multi_free. ETCDLOCK_INVALID_ARGUMENT if
/// index is out of range.
///
/// Safety: multi is a live handle; key is writable.
///
/// Example: const char *k; etcdlock_multi_key(m, 0, &k);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_key(
    multi: *const etcdlock_multi,
    index: usize,
    key: *mut *const c_char,
) -> c_int {
    ffi(|| {
        let out = out_arg(key, "key (out)")?;
        let m = multi_arg(multi)?;
        *out = m
            .keys
            .get(index)
            .ok_or_else(|| invalid(format!("index {index} out of range (0..{})", m.keys.len())))?
            .as_ptr();
        Ok(())
    })
}

/// The fencing token of the hold (one transaction created every key, so it
/// is the same on every name).
///
/// Safety: multi is a live handle; token is writable.
///
/// Example: int64_t t; etcdlock_multi_fencing_token(m, &t);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_fencing_token(
    multi: *const etcdlock_multi,
    token: *mut i64,
) -> c_int {
    ffi(|| {
        let out = out_arg(token, "token (out)")?;
        *out = multi_arg(multi)?
            .multi
            .guards()
            .first()
            .map(|g| g.fencing_token())
            .unwrap_or(0);
        Ok(())
    })
}

/// *held = 1 while every lock is held, else 0.
///
/// Safety: multi is a live handle; held is writable.
///
/// Example: int held; etcdlock_multi_is_held(m, &held);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_is_held(
    multi: *const etcdlock_multi,
    held: *mut c_int,
) -> c_int {
    ffi(|| {
        let out = out_arg(held, "held (out)")?;
        *out = multi_arg(multi)?.multi.is_held() as c_int;
        Ok(())
    })
}

/// *reason = the ETCDLOCK_LOSS_* reason of a lock of the multi-lock that was
/// lost, and *index its position in the names given to etcdlock_lock_many
/// (the lowest such position if several were lost); ETCDLOCK_LOSS_NONE and
/// SIZE_MAX when none was (held, or released normally). index may be NULL.
///
/// Safety: multi is a live handle; reason is writable; index is NULL or writable.
///
/// Example: int r; size_t i; etcdlock_multi_loss_reason(m, &r, &i); if (r) printf("%s: %s\n", names[i], etcdlock_loss_reason_name(r));
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_loss_reason(
    multi: *const etcdlock_multi,
    reason: *mut c_int,
    index: *mut usize,
) -> c_int {
    ffi(|| {
        let out = out_arg(reason, "reason (out)")?;
        let lost = multi_arg(multi)?
            .multi
            .guards()
            .iter()
            .enumerate()
            .find_map(|(i, g)| g.loss().map(|l| (i, l)));
        *out = lost.map_or(ETCDLOCK_LOSS_NONE, |(_, l)| l.reason as c_int);
        if let Some(ix) = index.as_mut() {
            *ix = lost.map_or(usize::MAX, |(i, _)| i);
        }
        Ok(())
    })
}

/// Release every lock. Each is tried; the first error is returned
/// (ETCDLOCK_LOCK_LOST if one had been lost). Idempotent. The handle must
/// still be freed.
///
/// Safety: multi is a live handle.
///
/// Example: etcdlock_multi_unlock(m);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_unlock(multi: *const etcdlock_multi) -> c_int {
    ffi(|| {
        let m = multi_arg(multi)?.multi.clone();
        block_on(async move { m.unlock().await })
    })
}

/// Free a multi-lock handle, releasing every lock still held (blocking for
/// that, except on a runtime thread). NULL is a no-op.
///
/// Safety: multi is NULL or a live handle no other thread uses any more.
///
/// Example: etcdlock_multi_free(m);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_free(multi: *mut etcdlock_multi) {
    if multi.is_null() {
        return;
    }
    ffi_void(|| {
        let h = Box::from_raw(multi);
        if h.pid != current_pid() {
            etcdlock_core::runtime::keep_inherited(h);
            return;
        }
        let m = h.multi.clone();
        drop(h);
        if m.guards().iter().all(|g| g.state() != GuardState::Held) {
            return;
        }
        if on_runtime_thread() {
            let _ = etcdlock_core::runtime::spawn(async move {
                let _ = m.unlock().await;
            });
        } else {
            let _ = block_on(async move { m.unlock().await });
        }
    })
}
