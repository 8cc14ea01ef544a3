//! A leader loop's term for C (etcdlock_leader_next's ELECTED event):
//! whether it is cancelled, waiting for that, ending it, its leadership as a
//! guard (see leader.rs).

use std::ffi::c_int;

use etcdlock_core::runtime::current_pid;
use etcdlock_core::{Error, ErrorCode, Term};

use crate::*;

/// One term of leadership (ETCDLOCK_LEADER_ELECTED). Thread-safe.
pub struct etcdlock_term {
    pub(crate) term: Term,
    pub(crate) guard: Box<etcdlock_guard>,
    pub(crate) pid: u32,
}

unsafe fn term_arg<'a>(t: *const etcdlock_term) -> Result<&'a etcdlock_term, Error> {
    let h = t.as_ref().ok_or_else(|| invalid("term is NULL"))?;
    if h.pid != current_pid() {
        return Err(Error::new(
            ErrorCode::Closed,
            "this term was created in the parent process before fork(); it cannot be used in the child",
        ));
    }
    Ok(h)
}

/// Whether the term is over for its task (*cancelled 1) or not (0): its
/// leadership was lost, the loop was stopped, or etcdlock_term_end was called.
/// The task should then end soon and call etcdlock_term_end.
///
/// Safety: term is live; cancelled is writable.
///
/// Example: int over = 0; while (etcdlock_term_cancelled(t, &over) == ETCDLOCK_OK && !over) do_work();
#[no_mangle]
pub unsafe extern "C" fn etcdlock_term_cancelled(
    term: *const etcdlock_term,
    cancelled: *mut c_int,
) -> c_int {
    ffi(|| {
        let out = out_arg(cancelled, "cancelled (out)")?;
        *out = term_arg(term)?.term.cancelled().is_cancelled() as c_int;
        Ok(())
    })
}

/// Wait at most timeout_ms (negative: without limit) for the term to be
/// cancelled (see etcdlock_term_cancelled). Returns ETCDLOCK_OK once it is,
/// ETCDLOCK_TIMEOUT if it was not in time.
///
/// Safety: term is live.
///
/// Example: etcdlock_term_wait(t, ETCDLOCK_WAIT_FOREVER); etcdlock_term_end(t);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_term_wait(term: *const etcdlock_term, timeout_ms: i64) -> c_int {
    ffi(|| {
        let token = term_arg(term)?.term.cancelled();
        let timeout = timeout_arg(timeout_ms)?;
        block_on(async move {
            match timeout {
                None => {
                    token.cancelled().await;
                    Ok(())
                }
                Some(d) => tokio::time::timeout(d, token.cancelled())
                    .await
                    .map_err(|_| {
                        Error::new(ErrorCode::Timeout, "the term was not cancelled in time")
                    }),
            }
        })
    })
}

/// The term's task has ended: the loop resigns if still leader and campaigns
/// again (or stops). Idempotent. The term must still be freed.
///
/// Safety: term is live.
///
/// Example: etcdlock_term_end(t); etcdlock_term_free(t);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_term_end(term: *const etcdlock_term) -> c_int {
    ffi(|| {
        term_arg(term)?.term.end();
        Ok(())
    })
}

/// The term's leadership as a guard (fencing token, guarded put/get/delete,
/// etcdlock_proclaim, loss reason), owned by the term: valid until
/// etcdlock_term_free, never freed with etcdlock_guard_free. NULL when term
/// is NULL or from another process.
///
/// Safety: term is NULL or live.
///
/// Example: etcdlock_guard_put(etcdlock_term_guard(t), (const uint8_t *)"k", 1, (const uint8_t *)"v", 1);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_term_guard(term: *const etcdlock_term) -> *const etcdlock_guard {
    match term_arg(term) {
        Ok(t) => &*t.guard,
        Err(_) => std::ptr::null(),
    }
}

/// Free a term, ending it first (etcdlock_term_end) if it has not ended.
/// NULL is a no-op.
///
/// Safety: term is NULL or live, no other thread uses it (or its guard) any more.
///
/// Example: etcdlock_term_free(t); t = NULL;
#[no_mangle]
pub unsafe extern "C" fn etcdlock_term_free(term: *mut etcdlock_term) {
    if term.is_null() {
        return;
    }
    ffi_void(|| {
        let h = Box::from_raw(term);
        if h.pid != current_pid() {
            etcdlock_core::runtime::keep_inherited(h);
            return;
        }
        h.term.end();
    })
}
