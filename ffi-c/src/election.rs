//! Election: campaign, proclaim and the current leader (etcdlock_observe,
//! which follows the leadership, runs on runtime threads: see `wait`).

use std::ffi::{c_char, c_int};

use etcdlock_core::LockOptions;

use crate::*;

/// Campaign for leadership of the election `name`, announcing `value`
/// (value_len bytes; NULL when 0): wait (in arrival order among candidates)
/// until elected. The keys are those of Go's concurrency.Election and
/// `etcdctl elect`, so they take part in the same election. On success *guard
/// is the leadership: a guard (fencing token, loss callback, guarded
/// operations); etcdlock_proclaim changes the value, etcdlock_unlock resigns.
/// Returns as etcdlock_lock.
///
/// Safety: as etcdlock_lock; value points to value_len bytes.
///
/// Example: etcdlock_campaign(c, "scheduler", (const uint8_t *)"node-1", 6, ETCDLOCK_WAIT_FOREVER, &g);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_campaign(
    client: *const etcdlock_client,
    name: *const c_char,
    value: *const u8,
    value_len: usize,
    timeout_ms: i64,
    guard: *mut *mut etcdlock_guard,
) -> c_int {
    take_hold(client, name, guard, |c, name| {
        let v = bytes_arg(value, value_len, "value", true)?.to_vec();
        let timeout = timeout_arg(timeout_ms)?;
        let opts = LockOptions {
            timeout,
            ..LockOptions::default()
        };
        Ok(async move {
            c.campaign(&name, v, opts)
                .await
                .map(etcdlock_core::Leadership::into_guard)
        })
    })
}

/// etcdlock_campaign with acquisition options (options->timeout_ms as
/// timeout_ms; the lock-delay, lease time and holder metadata of
/// etcdlock_acquire_options). options NULL is the defaults. Returns as
/// etcdlock_campaign and etcdlock_lock_ex.
///
/// Safety: as etcdlock_campaign and etcdlock_lock_ex.
///
/// Example: etcdlock_campaign_ex(c, "scheduler", (const uint8_t *)"node-1", 6, &ao, &g);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_campaign_ex(
    client: *const etcdlock_client,
    name: *const c_char,
    value: *const u8,
    value_len: usize,
    options: *const etcdlock_acquire_options,
    guard: *mut *mut etcdlock_guard,
) -> c_int {
    take_hold(client, name, guard, |c, name| {
        let v = bytes_arg(value, value_len, "value", true)?.to_vec();
        let opts = convert_acquire_options(options)?;
        Ok(async move {
            c.campaign(&name, v, opts)
                .await
                .map(etcdlock_core::Leadership::into_guard)
        })
    })
}

/// Announce a new value as leader (value_len bytes; NULL when 0): replaces the
/// value of our own key, guarded by its create_revision, so a deposed leader
/// gets ETCDLOCK_LOCK_LOST from etcd. On a mutex guard it replaces the owner
/// info etcdlock status shows.
///
/// Safety: guard is live; value points to value_len bytes.
///
/// Example: etcdlock_proclaim(g, (const uint8_t *)"node-1 v2", 9);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_proclaim(
    guard: *const etcdlock_guard,
    value: *const u8,
    value_len: usize,
) -> c_int {
    ffi(|| {
        let g = guard_arg(guard)?.guard.clone();
        let v = bytes_arg(value, value_len, "value", true)?.to_vec();
        block_on(async move { g.set_value(v).await })
    })
}

/// The current leader of the election `name`. If somebody leads: *key is a
/// new NUL-terminated string (the leader's key), *value a new buffer of
/// *value_len bytes (its proclamation), both freed with etcdlock_buffer_free,
/// and *revision its key's create_revision (the leadership's fencing token).
/// If nobody leads: ETCDLOCK_OK with *key and *value NULL, *value_len and
/// *revision 0. value, value_len and revision may be NULL if not wanted.
///
/// Safety: client is live; name is NUL-terminated; key is writable; the others NULL or writable.
///
/// Example:
///
///     char *k = NULL; uint8_t *v = NULL; size_t n = 0;
///     if (etcdlock_leader(c, "scheduler", &k, &v, &n, NULL) == ETCDLOCK_OK && k) printf("%s: %.*s\n", k, (int)n, (char *)v);
///     etcdlock_buffer_free((uint8_t *)k); etcdlock_buffer_free(v);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_leader(
    client: *const etcdlock_client,
    name: *const c_char,
    key: *mut *mut c_char,
    value: *mut *mut u8,
    value_len: *mut usize,
    revision: *mut i64,
) -> c_int {
    ffi(|| {
        let k_out = out_arg(key, "key (out)")?;
        *k_out = std::ptr::null_mut();
        if let Some(v) = value.as_mut() {
            *v = std::ptr::null_mut();
        }
        if let Some(n) = value_len.as_mut() {
            *n = 0;
        }
        if let Some(r) = revision.as_mut() {
            *r = 0;
        }
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let Some(l) = block_on(async move { c.leader(&name).await })? else {
            return Ok(());
        };
        let kb = malloc_copy(&l.key, true)?;
        if let Some(v) = value.as_mut() {
            match malloc_copy(&l.value, false) {
                Ok(b) => *v = b,
                Err(e) => {
                    libc::free(kb.cast());
                    return Err(e);
                }
            }
        }
        *k_out = kb.cast();
        if let Some(n) = value_len.as_mut() {
            *n = l.value.len();
        }
        if let Some(r) = revision.as_mut() {
            *r = l.revision;
        }
        Ok(())
    })
}
