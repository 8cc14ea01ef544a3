//! How errors reach C: one mapper ([`fail`]) from core's wire form of an
//! error to the status returned and the calling thread's last error, and the
//! entry-point wrappers that send every error and panic through it.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};

use etcdlock_core::{bridge, Error, ErrorCode, LossReason};

use crate::*;

/// The last failed call's error on this thread, as C reads it.
struct LastError {
    status: c_int,
    reason: c_int,
    message: CString,
}

thread_local! {
    static LAST_ERROR: RefCell<LastError> =
        RefCell::new(LastError { status: ETCDLOCK_OK, reason: ETCDLOCK_LOSS_NONE, message: CString::default() });
}

pub(crate) fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorCode::InvalidArgument, msg)
}

/// The one way an error reaches C: its wire form (code, loss reason, message)
/// becomes the calling thread's last error, and its code the status returned.
pub(crate) fn fail(e: &Error) -> c_int {
    let w = bridge::WireError::from(e);
    let status = w.code as c_int;
    let reason = w.reason.map_or(ETCDLOCK_LOSS_NONE, |r| r as c_int);
    let message = CString::new(w.message.replace('\0', "\\0")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|l| {
        *l.borrow_mut() = LastError {
            status,
            reason,
            message,
        }
    });
    status
}

/// Run one entry point: its error, or a panic as core's Internal error, goes
/// through [`fail`]; no panic unwinds into C.
pub(crate) fn ffi(f: impl FnOnce() -> Result<(), Error>) -> c_int {
    match bridge::catch(f) {
        Ok(()) => ETCDLOCK_OK,
        Err(e) => fail(&e),
    }
}

/// Like [`ffi`] for functions that return nothing (the *_free family).
pub(crate) fn ffi_void(f: impl FnOnce()) {
    let _ = bridge::catch(|| {
        f();
        Ok(())
    });
}

/// The message of the last failed etcdlock call on the calling thread ("" if
/// none). Never NULL. The pointer stays valid until the next failing etcdlock
/// call on this thread; copy it to keep it. Inside an etcdlock_lock_async
/// callback it describes that callback's status. Messages name the lock and the
/// endpoints but never passwords, tokens or key material.
///
/// Safety: do not free or write through the returned pointer.
///
/// Example: if (rc) fprintf(stderr, "%s: %s\n", etcdlock_status_name(rc), etcdlock_last_error_message());
#[no_mangle]
pub extern "C" fn etcdlock_last_error_message() -> *const c_char {
    LAST_ERROR
        .try_with(|l| l.borrow().message.as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// The status of the last failed etcdlock call on the calling thread
/// (ETCDLOCK_OK if none): the code etcdlock_last_error_message() goes with.
///
/// Safety: none required.
///
/// Example: if (etcdlock_last_error_status() == ETCDLOCK_UNAVAILABLE) retry_later();
#[no_mangle]
pub extern "C" fn etcdlock_last_error_status() -> c_int {
    LAST_ERROR
        .try_with(|l| l.borrow().status)
        .unwrap_or(ETCDLOCK_OK)
}

/// Why the hold ended, for a last failed call on the calling thread that
/// returned ETCDLOCK_LOCK_LOST (an ETCDLOCK_LOSS_* reason); ETCDLOCK_LOSS_NONE
/// for any other status or when core did not say.
///
/// Safety: none required.
///
/// Example: if (rc == ETCDLOCK_LOCK_LOST) puts(etcdlock_loss_reason_name(etcdlock_last_error_loss_reason()));
#[no_mangle]
pub extern "C" fn etcdlock_last_error_loss_reason() -> c_int {
    LAST_ERROR
        .try_with(|l| l.borrow().reason)
        .unwrap_or(ETCDLOCK_LOSS_NONE)
}

/// The name of a status code: "OK", "InvalidArgument", "Timeout", "WouldBlock",
/// "LockLost", "NotHeld", "Cancelled", "Unavailable", "AuthFailed",
/// "PermissionDenied", "Closed", "Internal", "Deadlock"; "Unknown" for any other value.
/// These are the names every etcdlock binding uses. Static string, never NULL.
///
/// Safety: none required; any int is accepted.
///
/// Example: puts(etcdlock_status_name(ETCDLOCK_WOULD_BLOCK)); // WouldBlock
#[no_mangle]
pub extern "C" fn etcdlock_status_name(status: c_int) -> *const c_char {
    let s: &'static CStr = match ErrorCode::from_i32(status) {
        None if status == 0 => c"OK",
        None => c"Unknown",
        Some(ErrorCode::InvalidArgument) => c"InvalidArgument",
        Some(ErrorCode::Timeout) => c"Timeout",
        Some(ErrorCode::WouldBlock) => c"WouldBlock",
        Some(ErrorCode::LockLost) => c"LockLost",
        Some(ErrorCode::NotHeld) => c"NotHeld",
        Some(ErrorCode::Cancelled) => c"Cancelled",
        Some(ErrorCode::Unavailable) => c"Unavailable",
        Some(ErrorCode::AuthFailed) => c"AuthFailed",
        Some(ErrorCode::PermissionDenied) => c"PermissionDenied",
        Some(ErrorCode::Closed) => c"Closed",
        Some(ErrorCode::Internal) => c"Internal",
        Some(ErrorCode::Deadlock) => c"Deadlock",
    };
    s.as_ptr()
}

/// The name of a loss reason: "Released" (ETCDLOCK_LOSS_NONE), "LeaseExpired",
/// "KeyDeleted", "ConnectionLost", "ClientClosed"; "Unknown" otherwise. Static, never NULL.
///
/// Safety: none required; any int is accepted.
///
/// Example: printf("lost: %s\n", etcdlock_loss_reason_name(reason));
#[no_mangle]
pub extern "C" fn etcdlock_loss_reason_name(reason: c_int) -> *const c_char {
    let s: &'static CStr = match LossReason::from_i32(reason) {
        None if reason == 0 => c"Released",
        None => c"Unknown",
        Some(LossReason::LeaseExpired) => c"LeaseExpired",
        Some(LossReason::KeyDeleted) => c"KeyDeleted",
        Some(LossReason::ConnectionLost) => c"ConnectionLost",
        Some(LossReason::ClientClosed) => c"ClientClosed",
    };
    s.as_ptr()
}
