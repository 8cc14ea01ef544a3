//! Guarded operations of a guard and of a multi-lock: reads and writes etcd
//! applies only while the lock (every lock) is still held, and the buffer
//! they hand out.

use std::ffi::c_int;

use etcdlock_core::{Error, ErrorCode};

use crate::*;

/// Guarded put: set `key` (namespaced like the lock) to `value` only while we
/// hold the lock. etcd applies it in a transaction that compares our lock key's
/// create_revision, so a stale holder's write is rejected by etcd itself.
/// value may be NULL when value_len is 0.
///
/// Returns ETCDLOCK_LOCK_LOST (lost; also when etcd rejected the write),
/// ETCDLOCK_NOT_HELD (after unlock), ETCDLOCK_INVALID_ARGUMENT (NULL or empty
/// key, NULL value with value_len > 0, lengths > ETCDLOCK_MAX_BUFFER_LEN).
///
/// Safety: guard is live; key points to key_len bytes, value to value_len bytes.
///
/// Example: etcdlock_guard_put(g, (const uint8_t *)"stock", 5, (const uint8_t *)"299", 3);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_put(
    guard: *const etcdlock_guard,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
) -> c_int {
    ffi(|| {
        let g = guard_arg(guard)?.guard.clone();
        let k = bytes_arg(key, key_len, "key", false)?.to_vec();
        let v = bytes_arg(value, value_len, "value", true)?.to_vec();
        block_on(async move { g.put(k, v).await })
    })
}

/// Guarded get: read `key` only while we hold the lock. If the key exists,
/// *value is a new buffer of *value_len bytes (not NUL-terminated; non-NULL even
/// for an empty value) that the caller frees with etcdlock_buffer_free; if it
/// does not exist, *value is NULL and *value_len 0. Errors as etcdlock_guard_put.
///
/// Safety: guard is live; key points to key_len bytes; value and value_len are writable.
///
/// Example:
///
///     uint8_t *v = NULL; size_t n = 0;
///     if (etcdlock_guard_get(g, (const uint8_t *)"stock", 5, &v, &n) == ETCDLOCK_OK && v) {
///         printf("%.*s\n", (int)n, (const char *)v);
///         etcdlock_buffer_free(v);
///     }
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_get(
    guard: *const etcdlock_guard,
    key: *const u8,
    key_len: usize,
    value: *mut *mut u8,
    value_len: *mut usize,
) -> c_int {
    ffi(|| {
        let out = out_arg(value, "value (out)")?;
        *out = std::ptr::null_mut();
        let out_len = out_arg(value_len, "value_len (out)")?;
        *out_len = 0;
        let g = guard_arg(guard)?.guard.clone();
        let k = bytes_arg(key, key_len, "key", false)?.to_vec();
        let v = block_on(async move { g.get(k).await })?;
        write_value(out, out_len, v)
    })
}

/// Guarded delete: delete `key` only while we hold the lock. If deleted is not
/// NULL, *deleted = 1 if the key existed, else 0. Errors as etcdlock_guard_put.
///
/// Safety: guard is live; key points to key_len bytes; deleted is NULL or writable.
///
/// Example: int existed; etcdlock_guard_delete(g, (const uint8_t *)"stock", 5, &existed);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_delete(
    guard: *const etcdlock_guard,
    key: *const u8,
    key_len: usize,
    deleted: *mut c_int,
) -> c_int {
    ffi(|| {
        if let Some(d) = deleted.as_mut() {
            *d = 0;
        }
        let g = guard_arg(guard)?.guard.clone();
        let k = bytes_arg(key, key_len, "key", false)?.to_vec();
        let existed = block_on(async move { g.delete(k).await })?;
        if let Some(d) = deleted.as_mut() {
            *d = existed as c_int;
        }
        Ok(())
    })
}

/// Free a buffer returned by etcdlock_guard_get or etcdlock_leader. NULL is a no-op.
///
/// Safety: buffer is NULL or a buffer from etcdlock_guard_get not yet freed.
///
/// Example: etcdlock_buffer_free(v);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_buffer_free(buffer: *mut u8) {
    if !buffer.is_null() {
        libc::free(buffer.cast());
    }
}

/// Guarded put under every lock of a multi-lock: etcd applies it in one
/// transaction that compares every key's create_revision, so a multi-lock
/// that lost any of its locks is refused (ETCDLOCK_LOCK_LOST; the lock found
/// lost reports it). `key` may not be under any of the locks' prefixes
/// (ETCDLOCK_INVALID_ARGUMENT). Otherwise as etcdlock_guard_put.
///
/// Safety: multi is live; key points to key_len bytes, value to value_len bytes.
///
/// Example: etcdlock_multi_put(m, (const uint8_t *)"ledger", 6, (const uint8_t *)"100", 3);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_put(
    multi: *const etcdlock_multi,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
) -> c_int {
    ffi(|| {
        let m = multi_arg(multi)?.multi.clone();
        let k = bytes_arg(key, key_len, "key", false)?.to_vec();
        let v = bytes_arg(value, value_len, "value", true)?.to_vec();
        block_on(async move { m.put(k, v).await })
    })
}

/// Guarded get under every lock of a multi-lock; the value as
/// etcdlock_guard_get gives it (free with etcdlock_buffer_free).
///
/// Safety: multi is live; key points to key_len bytes; value and value_len are writable.
///
/// Example: uint8_t *v = NULL; size_t n = 0; etcdlock_multi_get(m, (const uint8_t *)"ledger", 6, &v, &n);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_get(
    multi: *const etcdlock_multi,
    key: *const u8,
    key_len: usize,
    value: *mut *mut u8,
    value_len: *mut usize,
) -> c_int {
    ffi(|| {
        let out = out_arg(value, "value (out)")?;
        *out = std::ptr::null_mut();
        let out_len = out_arg(value_len, "value_len (out)")?;
        *out_len = 0;
        let m = multi_arg(multi)?.multi.clone();
        let k = bytes_arg(key, key_len, "key", false)?.to_vec();
        let v = block_on(async move { m.get(k).await })?;
        write_value(out, out_len, v)
    })
}

/// Guarded delete under every lock of a multi-lock; *deleted (if not NULL)
/// as etcdlock_guard_delete.
///
/// Safety: multi is live; key points to key_len bytes; deleted is NULL or writable.
///
/// Example: int existed; etcdlock_multi_delete(m, (const uint8_t *)"ledger", 6, &existed);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_delete(
    multi: *const etcdlock_multi,
    key: *const u8,
    key_len: usize,
    deleted: *mut c_int,
) -> c_int {
    ffi(|| {
        if let Some(d) = deleted.as_mut() {
            *d = 0;
        }
        let m = multi_arg(multi)?.multi.clone();
        let k = bytes_arg(key, key_len, "key", false)?.to_vec();
        let existed = block_on(async move { m.delete(k).await })?;
        if let Some(d) = deleted.as_mut() {
            *d = existed as c_int;
        }
        Ok(())
    })
}

/// A value read by a guarded get into a new malloc'd buffer (non-NULL even
/// when empty; NULL and 0 when the key does not exist).
unsafe fn write_value(
    out: &mut *mut u8,
    out_len: &mut usize,
    v: Option<Vec<u8>>,
) -> Result<(), Error> {
    if let Some(v) = v {
        let buf = libc::malloc(v.len().max(1)).cast::<u8>();
        if buf.is_null() {
            return Err(Error::new(ErrorCode::Internal, "out of memory"));
        }
        std::ptr::copy_nonoverlapping(v.as_ptr(), buf, v.len());
        *out = buf;
        *out_len = v.len();
    }
    Ok(())
}
