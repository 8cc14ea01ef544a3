//! Core errors for JavaScript: napi errors carry only a message, so each
//! carries core's wire form (`bridge::WireError::encode`), which index.js
//! decodes into a `LockError` with `code`, `reason` and `retryable`. Every
//! entry point runs under `guard_sync` (a panic is an `Internal` error).

use etcdlock::bridge::{self, WireError};
use etcdlock::ErrorCode;
use napi::bindgen_prelude::*;

pub(crate) fn to_js_err(e: &etcdlock::Error) -> napi::Error {
    napi::Error::new(Status::GenericFailure, WireError::from(e).encode())
}

pub(crate) fn invalid(msg: impl AsRef<str>) -> napi::Error {
    to_js_err(&etcdlock::Error::new(
        ErrorCode::InvalidArgument,
        msg.as_ref(),
    ))
}

pub(crate) fn internal(msg: impl AsRef<str>) -> napi::Error {
    to_js_err(&etcdlock::Error::new(ErrorCode::Internal, msg.as_ref()))
}

/// A core result as a napi result.
pub(crate) fn js<T>(r: etcdlock::Result<T>) -> napi::Result<T> {
    r.map_err(|e| to_js_err(&e))
}

/// Run a synchronous entry point, turning a panic into an `Internal` error.
pub(crate) fn guard_sync<T>(f: impl FnOnce() -> napi::Result<T>) -> napi::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(to_js_err(&bridge::panic_error(p))))
}
