//! Count-down latches and barriers shared by processes: opaque handles and
//! blocking calls (core `Latch`, `Barrier`).

use std::ffi::{c_char, c_int};

use etcdlock_core::runtime::current_pid;
use etcdlock_core::{Error, ErrorCode, MAX_SYNC_COUNT};

use crate::*;

/// An open count-down latch (etcdlock_latch_open). Thread-safe; free it with
/// etcdlock_latch_free when done (the latch lives while some client has it
/// open).
pub struct etcdlock_latch {
    pub(crate) latch: etcdlock_core::Latch,
    pub(crate) pid: u32,
}

/// An open barrier (etcdlock_barrier_open). Thread-safe; free it with
/// etcdlock_barrier_free when done.
pub struct etcdlock_barrier {
    pub(crate) barrier: etcdlock_core::Barrier,
    pub(crate) pid: u32,
}

fn forked(what: &str) -> Error {
    Error::new(
        ErrorCode::Closed,
        format!("this {what} was opened in the parent process before fork(); open it again in the child"),
    )
}

unsafe fn latch_arg<'a>(l: *const etcdlock_latch) -> Result<&'a etcdlock_latch, Error> {
    let l = l.as_ref().ok_or_else(|| invalid("latch is NULL"))?;
    if l.pid != current_pid() {
        return Err(forked("latch"));
    }
    Ok(l)
}

unsafe fn barrier_arg<'a>(b: *const etcdlock_barrier) -> Result<&'a etcdlock_barrier, Error> {
    let b = b.as_ref().ok_or_else(|| invalid("barrier is NULL"))?;
    if b.pid != current_pid() {
        return Err(forked("barrier"));
    }
    Ok(b)
}

/// A count from C for core: a negative one is refused here with core's
/// message (a u64 cannot hold it); core checks the rest of the range.
fn count_arg(what: &str, n: i64) -> Result<u64, Error> {
    u64::try_from(n).map_err(|_| {
        invalid(format!(
            "{what} must be between 1 and {MAX_SYNC_COUNT}, got {n}"
        ))
    })
}

/// Open the count-down latch name with count (created with it if it does not
/// exist; every process must open it with the same count, else
/// ETCDLOCK_INVALID_ARGUMENT). etcdlock_latch_count_down lowers the count,
/// etcdlock_latch_wait waits for zero, in every process at once. The latch
/// lives while some client has it open: once every handle is freed (or its
/// client's session ended) its keys expire within the TTL and the name starts
/// afresh. On success *latch is a new handle (free with etcdlock_latch_free);
/// otherwise NULL.
///
/// Returns ETCDLOCK_INVALID_ARGUMENT (count below 1 or above 2^31, a count
/// that differs from the latch's, a bad name), ETCDLOCK_CLOSED,
/// ETCDLOCK_UNAVAILABLE.
///
/// Safety: client is a live handle; name is NUL-terminated; latch is writable.
///
/// Example:
///
///     etcdlock_latch *l = NULL;
///     if (etcdlock_latch_open(c, "nightly-shards", 3, &l) == ETCDLOCK_OK) {
///         etcdlock_latch_count_down(l, NULL); // each worker, when its shard is done
///         etcdlock_latch_wait(l, 60000);      // the reducer
///     }
///     etcdlock_latch_free(l);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_latch_open(
    client: *const etcdlock_client,
    name: *const c_char,
    count: i64,
    latch: *mut *mut etcdlock_latch,
) -> c_int {
    ffi(|| {
        let out = out_arg(latch, "latch (out)")?;
        *out = std::ptr::null_mut();
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let n = count_arg("count", count)?;
        let l = block_on(async move { c.latch(&name, n).await })?;
        *out = Box::into_raw(Box::new(etcdlock_latch {
            latch: l,
            pid: current_pid(),
        }));
        Ok(())
    })
}

/// Lower the latch's count by one; at zero every waiter (in every process) is
/// released. At zero already it does nothing. *after (may be NULL) is the
/// count after.
///
/// Returns ETCDLOCK_CLOSED (the client was closed), ETCDLOCK_LOCK_LOST
/// (ETCDLOCK_LOSS_LEASE_EXPIRED: the latch is gone, every client that had it
/// open freed it or lost its session), ETCDLOCK_UNAVAILABLE.
///
/// Safety: latch is a live handle; after is NULL or writable.
///
/// Example: int64_t left; etcdlock_latch_count_down(l, &left);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_latch_count_down(
    latch: *const etcdlock_latch,
    after: *mut i64,
) -> c_int {
    ffi(|| {
        let l = latch_arg(latch)?;
        let n = block_on(async { l.latch.count_down().await })?;
        if let Some(out) = after.as_mut() {
            *out = n as i64;
        }
        Ok(())
    })
}

/// The latch's count now (one read). Returns as etcdlock_latch_count_down.
///
/// Safety: latch is a live handle; count is writable.
///
/// Example: int64_t n; etcdlock_latch_count(l, &n);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_latch_count(
    latch: *const etcdlock_latch,
    count: *mut i64,
) -> c_int {
    ffi(|| {
        let out = out_arg(count, "count (out)")?;
        let l = latch_arg(latch)?;
        *out = block_on(async { l.latch.count().await })? as i64;
        Ok(())
    })
}

/// Wait until the latch's count is zero (returns at once if it is).
/// timeout_ms: negative (ETCDLOCK_WAIT_FOREVER) waits as long as it takes, 0
/// looks once, at most ETCDLOCK_MAX_TIMEOUT_MS.
///
/// Returns ETCDLOCK_TIMEOUT, and as etcdlock_latch_count_down.
///
/// Safety: latch is a live handle.
///
/// Example: if (etcdlock_latch_wait(l, 60000) == ETCDLOCK_TIMEOUT) puts("a shard is late");
#[no_mangle]
pub unsafe extern "C" fn etcdlock_latch_wait(
    latch: *const etcdlock_latch,
    timeout_ms: i64,
) -> c_int {
    ffi(|| {
        let l = latch_arg(latch)?;
        let timeout = timeout_arg(timeout_ms)?;
        block_on(async { l.latch.wait(timeout).await })
    })
}

/// Close the latch handle (this process stops keeping the latch alive) and
/// free it. NULL is a no-op. Another thread must not be in a call on it.
///
/// Safety: latch is NULL or a live handle not yet freed.
///
/// Example: etcdlock_latch_free(l);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_latch_free(latch: *mut etcdlock_latch) {
    if !latch.is_null() {
        ffi_void(|| {
            let l = Box::from_raw(latch);
            if l.pid != current_pid() {
                // The parent's runtime threads do not exist in a forked child:
                // leave the inherited handle (and the parent's lease) alone.
                etcdlock_core::runtime::keep_inherited(l);
                return;
            }
            l.latch.close();
        });
    }
}

/// Open the barrier name for parties parties: etcdlock_barrier_wait returns in
/// every party at once when the parties-th has arrived. Every process must
/// open it with the same number (else ETCDLOCK_INVALID_ARGUMENT). One-shot:
/// once released, a party that arrives is refused (ETCDLOCK_INVALID_ARGUMENT)
/// until every handle is freed and its keys have expired; use a new name per
/// round. On success *barrier is a new handle (free with
/// etcdlock_barrier_free); otherwise NULL.
///
/// Returns ETCDLOCK_INVALID_ARGUMENT (parties below 1 or above 2^31, a number
/// that differs from the barrier's, a bad name), ETCDLOCK_CLOSED,
/// ETCDLOCK_UNAVAILABLE.
///
/// Safety: client is a live handle; name is NUL-terminated; barrier is writable.
///
/// Example:
///
///     etcdlock_barrier *b = NULL;
///     int32_t index;
///     if (etcdlock_barrier_open(c, "start-2024-06-01", 3, &b) == ETCDLOCK_OK)
///         etcdlock_barrier_wait(b, 30000, &index);
///     etcdlock_barrier_free(b);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_barrier_open(
    client: *const etcdlock_client,
    name: *const c_char,
    parties: i64,
    barrier: *mut *mut etcdlock_barrier,
) -> c_int {
    ffi(|| {
        let out = out_arg(barrier, "barrier (out)")?;
        *out = std::ptr::null_mut();
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let n = count_arg("parties", parties)?;
        let n = u32::try_from(n).map_err(|_| {
            invalid(format!(
                "parties must be between 1 and {MAX_SYNC_COUNT}, got {parties}"
            ))
        })?;
        let b = block_on(async move { c.barrier(&name, n).await })?;
        *out = Box::into_raw(Box::new(etcdlock_barrier {
            barrier: b,
            pid: current_pid(),
        }));
        Ok(())
    })
}

/// Arrive at the barrier and wait for the other parties. *index (may be NULL)
/// is this party's arrival index: 0 for the first, parties - 1 for the one
/// that released everyone. timeout_ms as etcdlock_latch_wait; on
/// ETCDLOCK_TIMEOUT this party leaves (its place is free again).
///
/// Returns ETCDLOCK_TIMEOUT, ETCDLOCK_INVALID_ARGUMENT (the barrier already
/// released, or already has its parties waiting), ETCDLOCK_LOCK_LOST
/// (ETCDLOCK_LOSS_LEASE_EXPIRED: the barrier is gone), ETCDLOCK_CLOSED,
/// ETCDLOCK_UNAVAILABLE.
///
/// Safety: barrier is a live handle; index is NULL or writable.
///
/// Example: int32_t i; if (etcdlock_barrier_wait(b, 30000, &i) == ETCDLOCK_OK && i == 0) puts("first");
#[no_mangle]
pub unsafe extern "C" fn etcdlock_barrier_wait(
    barrier: *const etcdlock_barrier,
    timeout_ms: i64,
    index: *mut i32,
) -> c_int {
    ffi(|| {
        let b = barrier_arg(barrier)?;
        let timeout = timeout_arg(timeout_ms)?;
        let i = block_on(async { b.barrier.wait(timeout).await })?;
        if let Some(out) = index.as_mut() {
            *out = i as i32;
        }
        Ok(())
    })
}

/// Close the barrier handle and free it. NULL is a no-op. Another thread must
/// not be in a call on it.
///
/// Safety: barrier is NULL or a live handle not yet freed.
///
/// Example: etcdlock_barrier_free(b);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_barrier_free(barrier: *mut etcdlock_barrier) {
    if !barrier.is_null() {
        ffi_void(|| {
            let b = Box::from_raw(barrier);
            if b.pid != current_pid() {
                etcdlock_core::runtime::keep_inherited(b);
                return;
            }
            b.barrier.close();
        });
    }
}
