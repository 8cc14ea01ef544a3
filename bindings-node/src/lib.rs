//! Native half of the `etcdlock` npm package (napi-rs v3).
//!
//! This layer only converts arguments and maps errors; the lock itself lives in
//! the `etcdlock` core crate. Every asynchronous call returns a Promise
//! settled from a task on etcdlock's shared runtime (`etcdlock::runtime`),
//! never from a runtime of napi's own, through one threadsafe function per
//! JavaScript environment (`wait::promise`), referenced while any Promise is
//! pending: a pending `lock()` keeps the Node process alive; nothing else here
//! holds the event loop.
//!
//! Errors reach JavaScript as `Error` objects whose message is core's wire
//! form (`bridge::WireError::encode`); the JS layer (`index.js`) turns that
//! into a `LockError` with `code`, `reason` and `retryable`. Every entry
//! point runs under `catch_unwind`: a Rust panic becomes an `Internal` error,
//! never an abort.

#![deny(clippy::all)]

// `pub` as `logs` is: a free `#[napi]` function in a private module is dead
// code in the lib's test build (no napi registration there), which the bench
// lint (`cargo clippy --workspace --all-targets --features .../bench`) checks.
#[cfg(feature = "bench")]
pub mod bench;
mod client;
mod election;
mod errors;
mod guard;
mod leader;
pub mod logs;
mod mem;
mod multi;
mod once;
mod options;
mod recipes;
mod sync;
mod wait;

use etcdlock::{ErrorCode, LossReason};
use napi_derive::napi;

/// The most permits one semaphore may have, and the most names one `lockMany` takes.
#[napi]
pub fn recipe_limits() -> Vec<u32> {
    vec![etcdlock::MAX_PERMITS, etcdlock::MAX_MULTI as u32]
}

/// The core's error names, in numeric order (index + 1 = C status code).
#[napi]
pub fn error_codes() -> Vec<String> {
    ErrorCode::ALL
        .iter()
        .map(|c| c.name().to_string())
        .collect()
}

/// The core's loss reasons, in order.
#[napi]
pub fn loss_reasons() -> Vec<String> {
    LossReason::ALL
        .iter()
        .map(|r| r.name().to_string())
        .collect()
}
