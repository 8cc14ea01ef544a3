//! Semaphore and read-write lock (each returns a guard); the multi-lock is in
//! `multi`, the election in `election`.

use std::ffi::{c_char, c_int};

use etcdlock_core::LockOptions;

use crate::*;

/// Take one of `permits` permits of the semaphore `name`: at most `permits`
/// holders at once, served in arrival order. The permit is a guard like any
/// other (fencing token, loss callback, guarded operations, etcdlock_unlock,
/// etcdlock_guard_free). Every contender must use the same `permits`: one
/// that finds an older key with another count gets ETCDLOCK_INVALID_ARGUMENT.
/// timeout_ms as etcdlock_lock; 0 is one try (ETCDLOCK_TIMEOUT if no permit is
/// free, leaving no key).
///
/// Returns as etcdlock_lock, and ETCDLOCK_INVALID_ARGUMENT for permits 0 or
/// above ETCDLOCK_MAX_PERMITS.
///
/// Safety: as etcdlock_lock.
///
/// Example: etcdlock_acquire_permit(c, "transcoders", 3, ETCDLOCK_WAIT_FOREVER, &g);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_acquire_permit(
    client: *const etcdlock_client,
    name: *const c_char,
    permits: u32,
    timeout_ms: i64,
    guard: *mut *mut etcdlock_guard,
) -> c_int {
    take_hold(client, name, guard, |c, name| {
        let timeout = timeout_arg(timeout_ms)?;
        Ok(async move {
            c.acquire_permit(
                &name,
                permits,
                LockOptions {
                    timeout,
                    ..LockOptions::default()
                },
            )
            .await
        })
    })
}

/// etcdlock_acquire_permit with acquisition options (options->timeout_ms as
/// timeout_ms; the lease time and holder metadata of etcdlock_acquire_options;
/// a lock-delay is ETCDLOCK_INVALID_ARGUMENT: permits have none). options NULL
/// is the defaults. Returns as etcdlock_acquire_permit and etcdlock_lock_ex.
///
/// Safety: as etcdlock_lock_ex.
///
/// Example:
///
///     etcdlock_acquire_options ao;
///     etcdlock_acquire_options_init(&ao, sizeof ao);
///     ao.lease_time_ms = 60000; // freed after a minute whatever happens
///     etcdlock_acquire_permit_ex(c, "transcoders", 3, &ao, &g);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_acquire_permit_ex(
    client: *const etcdlock_client,
    name: *const c_char,
    permits: u32,
    options: *const etcdlock_acquire_options,
    guard: *mut *mut etcdlock_guard,
) -> c_int {
    take_hold(client, name, guard, |c, name| {
        let opts = convert_acquire_options(options)?;
        Ok(async move { c.acquire_permit(&name, permits, opts).await })
    })
}

/// etcdlock_read_lock with acquisition options (options->timeout_ms as
/// timeout_ms; the lease time and holder metadata of etcdlock_acquire_options;
/// a lock-delay is ETCDLOCK_INVALID_ARGUMENT: read locks have none). options
/// NULL is the defaults. Returns as etcdlock_read_lock and etcdlock_lock_ex.
///
/// Safety: as etcdlock_lock_ex.
///
/// Example: etcdlock_read_lock_ex(c, "config", &ao, &g);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_read_lock_ex(
    client: *const etcdlock_client,
    name: *const c_char,
    options: *const etcdlock_acquire_options,
    guard: *mut *mut etcdlock_guard,
) -> c_int {
    take_hold(client, name, guard, |c, name| {
        let opts = convert_acquire_options(options)?;
        Ok(async move { c.read_lock(&name, opts).await })
    })
}

/// Take the read side of the read-write lock `name`: shared with other
/// readers, excluded by writers. The write side is etcdlock_lock on the same
/// name (so `etcdctl lock` and Go's Mutex exclude readers too). Served in
/// arrival order: a reader behind a waiting writer waits for it. Returns and
/// timeout_ms as etcdlock_lock (0: one try that writes nothing while a writer
/// holds or waits).
///
/// Safety: as etcdlock_lock.
///
/// Example: etcdlock_read_lock(c, "config", 5000, &g);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_read_lock(
    client: *const etcdlock_client,
    name: *const c_char,
    timeout_ms: i64,
    guard: *mut *mut etcdlock_guard,
) -> c_int {
    take_hold(client, name, guard, |c, name| {
        let timeout = timeout_arg(timeout_ms)?;
        Ok(async move {
            c.read_lock(
                &name,
                LockOptions {
                    timeout,
                    ..LockOptions::default()
                },
            )
            .await
        })
    })
}
