//! The C ABI of etcdlock: `libetcdlock.so` / `libetcdlock.a` and `include/etcdlock.h`
//! (generated from these files by cbindgen; the `///` comments are the header's
//! documentation).
//!
//! This layer only converts arguments, maps errors to status codes and manages
//! handles; every lock semantic lives in the core crate. Modules by concern:
//! constants, errors (the one error mapper), options, client, guard (blocking
//! locks and guarded operations), wait (what runs on runtime threads:
//! lock_async, callbacks, observers), recipes (semaphore, read-write
//! lock), multi (multi-lock), election, status (queue views), deadlocks
//! and history (what etcd's state and history say about many clients), sync
//! (latches and barriers), multi_wait (the multi-lock's loss and renewal
//! callbacks), mem (the test controls of `mem://` stores).
#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

// In this order in the header (cbindgen follows the declarations; rustfmt
// sorts each run of declarations, so the comments keep this order).
mod client;
mod constants;
mod errors;
mod guard;
mod guarded;
mod options;
mod recipes;
// After the recipes: the multi-lock,
mod multi;
// then the election and the leader loop,
mod election;
mod leader;
// then queue views,
mod status;
// then deadlocks and history, latches and barriers, what runs on runtime threads.
mod deadlocks;
mod history;
mod sync;
mod wait;
// then the multi-lock's callbacks.
mod logs;
mod multi_wait;
mod once;
mod term;
// Last, the test controls of the in-process stores (etcdlock_mem_*).
mod mem;

use std::ffi::{c_char, c_int, c_void, CStr};
use std::time::Duration;

use etcdlock_core::{Error, ErrorCode, MAX_NAME_LEN};

// Every C item at the crate root: reachable (no dead-code warning for the
// header-only constants), and one `use crate::*` in each module finds the others.
pub use client::*;
pub use constants::*;
pub use deadlocks::*;
pub use election::*;
pub use errors::*;
pub use guard::*;
pub use guarded::*;
pub use history::*;
pub use leader::*;
pub use logs::*;
pub use mem::*;
pub use multi::*;
pub use multi_wait::*;
pub use once::*;
pub use options::*;
pub use recipes::*;
pub use status::*;
pub use sync::*;
pub use term::*;
pub use wait::*;

/// The library version as a static string, e.g. "0.1.0".
///
/// Safety: none required; callable from any thread at any time.
///
/// Example: printf("etcdlock %s\n", etcdlock_version());
#[no_mangle]
pub extern "C" fn etcdlock_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The library version as MAJOR*10000 + MINOR*100 + PATCH. Compare with the
/// header's ETCDLOCK_VERSION_NUMBER to detect a header/library mismatch.
///
/// Safety: none required; callable from any thread at any time.
///
/// Example: if (etcdlock_version_number() / 10000 != ETCDLOCK_VERSION_MAJOR) abort();
#[no_mangle]
pub extern "C" fn etcdlock_version_number() -> c_int {
    let mut parts = env!("CARGO_PKG_VERSION")
        .split('.')
        .map(|p| p.parse::<i32>().unwrap_or(0));
    let (a, b, c) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    a * 10000 + b * 100 + c
}

/// Optional: stops the library's background threads (the shared runtime's
/// workers), waiting at most 5 s for them, so a leak checker such as valgrind
/// reports none of them at exit. A program that just exits need not call it.
/// Free every client first: a client still open stops working (its lease
/// keep-alive ran on those threads). Any later etcdlock call starts the
/// runtime again.
///
/// Safety: do not call it from an etcdlock callback (it runs on a runtime
/// thread); that is refused with ETCDLOCK_INVALID_ARGUMENT.
///
/// Example: etcdlock_client_free(c); etcdlock_shutdown(); return 0;
#[no_mangle]
pub extern "C" fn etcdlock_shutdown() -> c_int {
    ffi(|| {
        if etcdlock_core::runtime::shutdown(std::time::Duration::from_secs(5)) {
            Ok(())
        } else {
            Err(invalid(
                "etcdlock_shutdown was called from an etcdlock callback (a runtime thread)",
            ))
        }
    })
}

pub(crate) fn on_runtime_thread() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}

/// Run a blocking call on the shared runtime (`etcdlock::runtime::block_on`,
/// which polls the future on the calling thread). Refused with a C-specific
/// message on a runtime thread (inside a callback), where blocking would stall
/// the runtime.
pub(crate) fn block_on<F, T>(fut: F) -> Result<T, Error>
where
    F: std::future::Future<Output = Result<T, Error>>,
{
    if on_runtime_thread() {
        return Err(invalid(
            "a blocking etcdlock call was made on a runtime thread (inside a callback); \
             hand the work to another thread",
        ));
    }
    etcdlock_core::runtime::block_on(fut)
}

pub(crate) unsafe fn out_arg<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Error> {
    p.as_mut().ok_or_else(|| invalid(format!("{what} is NULL")))
}

pub(crate) unsafe fn str_arg(p: *const c_char, what: &str) -> Result<Option<String>, Error> {
    if p.is_null() {
        return Ok(None);
    }
    CStr::from_ptr(p)
        .to_str()
        .map(|s| Some(s.to_string()))
        .map_err(|_| invalid(format!("{what} is not valid UTF-8")))
}

pub(crate) unsafe fn name_arg(p: *const c_char) -> Result<String, Error> {
    let name = str_arg(p, "lock name")?.ok_or_else(|| invalid("lock name is NULL"))?;
    if name.is_empty() {
        return Err(invalid("lock name is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(invalid(format!(
            "lock name is {} bytes; the limit is {MAX_NAME_LEN}",
            name.len()
        )));
    }
    Ok(name)
}

pub(crate) fn timeout_arg(ms: i64) -> Result<Option<Duration>, Error> {
    if ms < 0 {
        Ok(None)
    } else if ms > ETCDLOCK_MAX_TIMEOUT_MS {
        Err(invalid(format!(
            "timeout_ms {ms} is larger than {ETCDLOCK_MAX_TIMEOUT_MS}"
        )))
    } else {
        Ok(Some(Duration::from_millis(ms as u64)))
    }
}

pub(crate) unsafe fn bytes_arg<'a>(
    p: *const u8,
    len: usize,
    what: &str,
    allow_empty: bool,
) -> Result<&'a [u8], Error> {
    if len > ETCDLOCK_MAX_BUFFER_LEN {
        return Err(invalid(format!(
            "{what} is {len} bytes; the limit is {ETCDLOCK_MAX_BUFFER_LEN}"
        )));
    }
    if len == 0 && !allow_empty {
        return Err(invalid(format!("{what} is empty")));
    }
    if p.is_null() {
        if len == 0 {
            return Ok(&[]);
        }
        return Err(invalid(format!("{what} is NULL")));
    }
    Ok(std::slice::from_raw_parts(p, len))
}

pub(crate) fn malloc_copy(b: &[u8], nul: bool) -> Result<*mut u8, Error> {
    let n = b.len() + nul as usize;
    let buf = unsafe { libc::malloc(n.max(1)) }.cast::<u8>();
    if buf.is_null() {
        return Err(Error::new(ErrorCode::Internal, "out of memory"));
    }
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr(), buf, b.len());
        if nul {
            *buf.add(b.len()) = 0;
        }
    }
    Ok(buf)
}

// Handles are shared between C threads: the compiler checks that they may be.
const _: fn() = || {
    fn thread_safe<T: Send + Sync>() {}
    thread_safe::<etcdlock_client>();
    thread_safe::<etcdlock_guard>();
    thread_safe::<etcdlock_cancel_handle>();
    thread_safe::<etcdlock_latch>();
    thread_safe::<etcdlock_barrier>();
    thread_safe::<etcdlock_leader_loop>();
    thread_safe::<etcdlock_term>();
    thread_safe::<etcdlock_mem>();
};

/// A raw pointer handed back to C on a runtime thread.
pub(crate) struct UserData(pub(crate) *mut c_void);
// SAFETY: the pointer is only passed back to the caller's callback, which by the
// documented contract may run on another thread.
unsafe impl Send for UserData {}

#[cfg(test)]
mod tests {
    use super::*;
    use etcdlock_core::LossReason;

    #[test]
    fn status_names_mirror_the_core() {
        for code in ErrorCode::ALL {
            let n = unsafe { CStr::from_ptr(etcdlock_status_name(code as c_int)) };
            assert_eq!(n.to_str().unwrap(), code.name());
        }
        for r in 1..=4 {
            let reason = LossReason::from_i32(r).unwrap();
            let n = unsafe { CStr::from_ptr(etcdlock_loss_reason_name(r)) };
            assert_eq!(n.to_str().unwrap(), reason.name());
        }
    }

    #[test]
    fn version_matches_header_constants() {
        assert_eq!(etcdlock_version_number(), ETCDLOCK_VERSION_NUMBER);
    }
}
