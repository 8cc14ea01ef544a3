//! The header's constants: version, status codes (the core's ErrorCode
//! values), loss reasons, kinds and limits.

use etcdlock_core::{ErrorCode, LossReason, MAX_NAME_LEN};

/// Major version of the library this header came with.
pub const ETCDLOCK_VERSION_MAJOR: i32 = 0;
/// Minor version of the library this header came with.
pub const ETCDLOCK_VERSION_MINOR: i32 = 1;
/// Patch version of the library this header came with.
pub const ETCDLOCK_VERSION_PATCH: i32 = 0;
/// MAJOR*10000 + MINOR*100 + PATCH of this header; compare with etcdlock_version_number().
pub const ETCDLOCK_VERSION_NUMBER: i32 =
    ETCDLOCK_VERSION_MAJOR * 10000 + ETCDLOCK_VERSION_MINOR * 100 + ETCDLOCK_VERSION_PATCH;

/// Status: success.
pub const ETCDLOCK_OK: i32 = 0;
/// Status: NULL pointer, empty/oversized/non-UTF-8 name, out-of-range number, bad
/// endpoint or TLS file, or a blocking call made from a callback.
pub const ETCDLOCK_INVALID_ARGUMENT: i32 = 1;
/// Status: the lock was not acquired within timeout_ms.
pub const ETCDLOCK_TIMEOUT: i32 = 2;
/// Status: etcdlock_try_lock found the lock held (or waited for) by someone else.
pub const ETCDLOCK_WOULD_BLOCK: i32 = 3;
/// Status: the hold ended without unlock (see etcdlock_guard_loss_reason), or the
/// waiter's session died.
pub const ETCDLOCK_LOCK_LOST: i32 = 4;
/// Status: guarded operation on a guard that was already unlocked.
pub const ETCDLOCK_NOT_HELD: i32 = 5;
/// Status: the wait was cancelled with etcdlock_cancel.
pub const ETCDLOCK_CANCELLED: i32 = 6;
/// Status: etcd unreachable after retries (the message names the endpoints).
pub const ETCDLOCK_UNAVAILABLE: i32 = 7;
/// Status: etcd rejected the credentials.
pub const ETCDLOCK_AUTH_FAILED: i32 = 8;
/// Status: etcd RBAC denies access to the key range.
pub const ETCDLOCK_PERMISSION_DENIED: i32 = 9;
/// Status: the client was closed (or the handle belongs to the parent of a forked process).
pub const ETCDLOCK_CLOSED: i32 = 10;
/// Status: a bug in etcdlock (never a crash).
pub const ETCDLOCK_INTERNAL: i32 = 11;
/// Status: the wait would close a cycle of clients waiting on each other's
/// holds (only with `detect_deadlock` set in the acquire options); the last
/// error's message names the cycle.
pub const ETCDLOCK_DEADLOCK: i32 = 12;

/// Loss callback reason: the hold ended normally (etcdlock_unlock or etcdlock_guard_free).
pub const ETCDLOCK_LOSS_NONE: i32 = 0;
/// Loss reason: etcd reported the session's lease gone (expired or revoked).
pub const ETCDLOCK_LOSS_LEASE_EXPIRED: i32 = 1;
/// Loss reason: our lock key was deleted by someone else.
pub const ETCDLOCK_LOSS_KEY_DELETED: i32 = 2;
/// Loss reason: no keep-alive was acknowledged in time (local validity window ran out).
pub const ETCDLOCK_LOSS_CONNECTION_LOST: i32 = 3;
/// Loss reason: the client was freed/closed while the lock was held.
pub const ETCDLOCK_LOSS_CLIENT_CLOSED: i32 = 4;
/// etcdlock_set_logger level: no events.
pub const ETCDLOCK_LOG_OFF: i32 = 0;
/// Log level: errors.
pub const ETCDLOCK_LOG_ERROR: i32 = 1;
/// Log level: warnings (a keep-alive renewal failing, a hold lost) and above.
pub const ETCDLOCK_LOG_WARN: i32 = 2;
/// Log level: information (an etcd member failing over, the watch stream re-created) and above.
pub const ETCDLOCK_LOG_INFO: i32 = 3;
/// Log level: debug (a hold acquired or released) and above.
pub const ETCDLOCK_LOG_DEBUG: i32 = 4;
/// Index of etcdlock_metrics.acquisitions / wait_ns: the lock was taken.
pub const ETCDLOCK_RESULT_ACQUIRED: i32 = 0;
/// Index: not taken within the timeout (or held, for a zero timeout).
pub const ETCDLOCK_RESULT_TIMEOUT: i32 = 1;
/// Index: a try found the lock held.
pub const ETCDLOCK_RESULT_WOULD_BLOCK: i32 = 2;
/// Index: cancelled while waiting.
pub const ETCDLOCK_RESULT_CANCELLED: i32 = 3;
/// Index: any other error.
pub const ETCDLOCK_RESULT_ERROR: i32 = 4;

/// etcdlock_contender.kind: a mutex or election key, or a read-write lock's writer.
pub const ETCDLOCK_KIND_EXCLUSIVE: i32 = 0;
/// etcdlock_contender.kind: a read-write lock's reader.
pub const ETCDLOCK_KIND_READER: i32 = 1;
/// etcdlock_contender.kind: a semaphore permit (see etcdlock_contender.permits).
pub const ETCDLOCK_KIND_PERMIT: i32 = 2;
/// etcdlock_queue_kind: neither the contenders' records nor their keys tell.
pub const ETCDLOCK_LOCK_UNKNOWN: i32 = -1;
/// etcdlock_queue_kind: a mutex (etcdlock_lock and friends).
pub const ETCDLOCK_LOCK_MUTEX: i32 = 0;
/// etcdlock_queue_kind: an election (etcdlock_campaign).
pub const ETCDLOCK_LOCK_ELECTION: i32 = 1;
/// etcdlock_queue_kind: a semaphore (etcdlock_acquire_permit).
pub const ETCDLOCK_LOCK_SEMAPHORE: i32 = 2;
/// etcdlock_queue_kind: a read-write lock (etcdlock_read_lock).
pub const ETCDLOCK_LOCK_RWLOCK: i32 = 3;
/// Most permits one semaphore may have.
pub const ETCDLOCK_MAX_PERMITS: u32 = 1024;
/// Most names one etcdlock_lock_many takes (etcd's default --max-txn-ops).
pub const ETCDLOCK_MAX_MULTI: usize = 128;

/// Pass as timeout_ms to wait as long as it takes (any negative value does).
pub const ETCDLOCK_WAIT_FOREVER: i64 = -1;
/// Largest accepted timeout in milliseconds (10 years); larger values are INVALID_ARGUMENT.
pub const ETCDLOCK_MAX_TIMEOUT_MS: i64 = 315_360_000_000;
/// An etcdlock_options number left "not set" (etcdlock_options_init's
/// value): the ETCDLOCK_* environment variable or the default applies.
pub const ETCDLOCK_UNSET: i64 = i64::MIN;
/// Longest accepted lock name in bytes (without the terminating NUL).
pub const ETCDLOCK_MAX_NAME_LEN: usize = 32 * 1024;
/// Largest accepted guarded key or value, in bytes (etcd's own request limit is lower,
/// 1.5 MiB by default; etcd's refusal is reported as INVALID_ARGUMENT too).
pub const ETCDLOCK_MAX_BUFFER_LEN: usize = 64 * 1024 * 1024;

// The C status codes are the core's ErrorCode values, one-to-one.
const _: () = {
    assert!(ETCDLOCK_INVALID_ARGUMENT == ErrorCode::InvalidArgument as i32);
    assert!(ETCDLOCK_TIMEOUT == ErrorCode::Timeout as i32);
    assert!(ETCDLOCK_WOULD_BLOCK == ErrorCode::WouldBlock as i32);
    assert!(ETCDLOCK_LOCK_LOST == ErrorCode::LockLost as i32);
    assert!(ETCDLOCK_NOT_HELD == ErrorCode::NotHeld as i32);
    assert!(ETCDLOCK_CANCELLED == ErrorCode::Cancelled as i32);
    assert!(ETCDLOCK_UNAVAILABLE == ErrorCode::Unavailable as i32);
    assert!(ETCDLOCK_AUTH_FAILED == ErrorCode::AuthFailed as i32);
    assert!(ETCDLOCK_PERMISSION_DENIED == ErrorCode::PermissionDenied as i32);
    assert!(ETCDLOCK_CLOSED == ErrorCode::Closed as i32);
    assert!(ETCDLOCK_INTERNAL == ErrorCode::Internal as i32);
    assert!(ETCDLOCK_DEADLOCK == ErrorCode::Deadlock as i32);
    assert!(ETCDLOCK_LOSS_LEASE_EXPIRED == LossReason::LeaseExpired as i32);
    assert!(ETCDLOCK_LOSS_KEY_DELETED == LossReason::KeyDeleted as i32);
    assert!(ETCDLOCK_LOSS_CONNECTION_LOST == LossReason::ConnectionLost as i32);
    assert!(ETCDLOCK_LOSS_CLIENT_CLOSED == LossReason::ClientClosed as i32);
    assert!(ETCDLOCK_MAX_NAME_LEN == MAX_NAME_LEN);
    assert!(ETCDLOCK_MAX_PERMITS == etcdlock_core::MAX_PERMITS);
    assert!(ETCDLOCK_MAX_MULTI == etcdlock_core::MAX_MULTI);
};
