//! Semaphore, read-write lock, multi-lock and election.

use std::ffi::{c_char, c_int, CString};
use std::sync::Arc;

use etcdlock_core::runtime::current_pid;
use etcdlock_core::{Error, ErrorCode, GuardState, LockOptions};

use crate::*;

/// Several locks held together (etcdlock_lock_many). Thread-safe; freeing it
/// releases every lock still held.
pub struct etcdlock_multi {
    pub(crate) multi: Arc<etcdlock_core::MultiGuard>,
    pub(crate) keys: Vec<CString>,
    pub(crate) pid: u32,
}

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
    ffi(|| {
        let out = out_arg(guard, "guard (out)")?;
        *out = std::ptr::null_mut();
        let h = client_arg(client)?;
        let c = h.client.clone();
        let name = name_arg(name)?;
        let timeout = timeout_arg(timeout_ms)?;
        let g = block_on(async move {
            c.acquire_permit(
                &name,
                permits,
                LockOptions {
                    timeout,
                    ..LockOptions::default()
                },
            )
            .await
        })?;
        *out = new_guard(g, &h.callbacks);
        Ok(())
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
    ffi(|| {
        let out = out_arg(guard, "guard (out)")?;
        *out = std::ptr::null_mut();
        let h = client_arg(client)?;
        let c = h.client.clone();
        let name = name_arg(name)?;
        let opts = convert_acquire_options(options)?;
        let g = block_on(async move { c.acquire_permit(&name, permits, opts).await })?;
        *out = new_guard(g, &h.callbacks);
        Ok(())
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
    ffi(|| {
        let out = out_arg(guard, "guard (out)")?;
        *out = std::ptr::null_mut();
        let h = client_arg(client)?;
        let c = h.client.clone();
        let name = name_arg(name)?;
        let opts = convert_acquire_options(options)?;
        let g = block_on(async move { c.read_lock(&name, opts).await })?;
        *out = new_guard(g, &h.callbacks);
        Ok(())
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
    ffi(|| {
        let out = out_arg(guard, "guard (out)")?;
        *out = std::ptr::null_mut();
        let h = client_arg(client)?;
        let c = h.client.clone();
        let name = name_arg(name)?;
        let timeout = timeout_arg(timeout_ms)?;
        let g = block_on(async move {
            c.read_lock(
                &name,
                LockOptions {
                    timeout,
                    ..LockOptions::default()
                },
            )
            .await
        })?;
        *out = new_guard(g, &h.callbacks);
        Ok(())
    })
}

/// Lock `count` names together. All waiter keys are created in one etcd
/// transaction, so every client queues in the same order on every name: no
/// deadlock, no release-and-retry. A timeout removes every key; the loss of
/// any one lock is the loss of the hold (etcdlock_multi_is_held turns 0).
/// On success *multi is a new handle (free with etcdlock_multi_free).
///
/// Returns as etcdlock_lock, and ETCDLOCK_INVALID_ARGUMENT for count 0 or
/// above ETCDLOCK_MAX_MULTI, a bad or repeated name.
///
/// Safety: client is live; names points to count NUL-terminated strings; multi is writable.
///
/// Example:
///     const char *names[] = {"account-1", "account-2"};
///     etcdlock_multi *m = NULL;
///     if (etcdlock_lock_many(c, names, 2, 5000, &m) == ETCDLOCK_OK) { transfer(); etcdlock_multi_free(m); }
#[no_mangle]
pub unsafe extern "C" fn etcdlock_lock_many(
    client: *const etcdlock_client,
    names: *const *const c_char,
    count: usize,
    timeout_ms: i64,
    multi: *mut *mut etcdlock_multi,
) -> c_int {
    ffi(|| {
        let out = out_arg(multi, "multi (out)")?;
        *out = std::ptr::null_mut();
        let c = client_arg(client)?.client.clone();
        if names.is_null() {
            return Err(invalid("names is NULL"));
        }
        if count == 0 || count > ETCDLOCK_MAX_MULTI {
            return Err(invalid(format!(
                "lock_many takes 1 to {ETCDLOCK_MAX_MULTI} names, got {count}"
            )));
        }
        let names: Vec<String> = std::slice::from_raw_parts(names, count)
            .iter()
            .map(|&p| name_arg(p))
            .collect::<Result<_, _>>()?;
        let timeout = timeout_arg(timeout_ms)?;
        let m = block_on(async move {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            c.lock_many(
                &refs,
                LockOptions {
                    timeout,
                    ..LockOptions::default()
                },
            )
            .await
        })?;
        let keys = m
            .guards()
            .iter()
            .map(|g| CString::new(g.key()).unwrap_or_default())
            .collect();
        *out = Box::into_raw(Box::new(etcdlock_multi {
            multi: Arc::new(m),
            keys,
            pid: current_pid(),
        }));
        Ok(())
    })
}

pub(crate) unsafe fn multi_arg<'a>(m: *const etcdlock_multi) -> Result<&'a etcdlock_multi, Error> {
    let m = m.as_ref().ok_or_else(|| invalid("multi is NULL"))?;
    if m.pid != current_pid() {
        return Err(Error::new(
            ErrorCode::Closed,
            "this multi-lock belongs to the parent process (fork)",
        ));
    }
    Ok(m)
}

/// Our key on the index-th name (in the order given to etcdlock_lock_many);
/// *key stays valid until etcdlock_multi_free. ETCDLOCK_INVALID_ARGUMENT if
/// index is out of range.
///
/// Safety: multi is a live handle; key is writable.
///
/// Example: const char *k; etcdlock_multi_key(m, 0, &k);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_key(
    multi: *const etcdlock_multi,
    index: usize,
    key: *mut *const c_char,
) -> c_int {
    ffi(|| {
        let out = out_arg(key, "key (out)")?;
        let m = multi_arg(multi)?;
        *out = m
            .keys
            .get(index)
            .ok_or_else(|| invalid(format!("index {index} out of range (0..{})", m.keys.len())))?
            .as_ptr();
        Ok(())
    })
}

/// The fencing token of the hold (one transaction created every key, so it
/// is the same on every name).
///
/// Safety: multi is a live handle; token is writable.
///
/// Example: int64_t t; etcdlock_multi_fencing_token(m, &t);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_fencing_token(
    multi: *const etcdlock_multi,
    token: *mut i64,
) -> c_int {
    ffi(|| {
        let out = out_arg(token, "token (out)")?;
        *out = multi_arg(multi)?
            .multi
            .guards()
            .first()
            .map(|g| g.fencing_token())
            .unwrap_or(0);
        Ok(())
    })
}

/// *held = 1 while every lock is held, else 0.
///
/// Safety: multi is a live handle; held is writable.
///
/// Example: int held; etcdlock_multi_is_held(m, &held);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_is_held(
    multi: *const etcdlock_multi,
    held: *mut c_int,
) -> c_int {
    ffi(|| {
        let out = out_arg(held, "held (out)")?;
        *out = multi_arg(multi)?.multi.is_held() as c_int;
        Ok(())
    })
}

/// Release every lock. Each is tried; the first error is returned
/// (ETCDLOCK_LOCK_LOST if one had been lost). Idempotent. The handle must
/// still be freed.
///
/// Safety: multi is a live handle.
///
/// Example: etcdlock_multi_unlock(m);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_unlock(multi: *const etcdlock_multi) -> c_int {
    ffi(|| {
        let m = multi_arg(multi)?.multi.clone();
        block_on(async move { m.unlock().await })
    })
}

/// Free a multi-lock handle, releasing every lock still held (blocking for
/// that, except on a runtime thread). NULL is a no-op.
///
/// Safety: multi is NULL or a live handle no other thread uses any more.
///
/// Example: etcdlock_multi_free(m);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_free(multi: *mut etcdlock_multi) {
    if multi.is_null() {
        return;
    }
    ffi_void(|| {
        let h = Box::from_raw(multi);
        if h.pid != current_pid() {
            etcdlock_core::runtime::keep_inherited(h);
            return;
        }
        let m = h.multi.clone();
        drop(h);
        if m.guards().iter().all(|g| g.state() != GuardState::Held) {
            return;
        }
        if on_runtime_thread() {
            let _ = etcdlock_core::runtime::spawn(async move {
                let _ = m.unlock().await;
            });
        } else {
            let _ = block_on(async move { m.unlock().await });
        }
    })
}

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
    ffi(|| {
        let out = out_arg(guard, "guard (out)")?;
        *out = std::ptr::null_mut();
        let h = client_arg(client)?;
        let c = h.client.clone();
        let name = name_arg(name)?;
        let v = bytes_arg(value, value_len, "value", true)?.to_vec();
        let timeout = timeout_arg(timeout_ms)?;
        let l = block_on(async move {
            c.campaign(
                &name,
                v,
                LockOptions {
                    timeout,
                    ..LockOptions::default()
                },
            )
            .await
        })?;
        *out = new_guard(l.into_guard(), &h.callbacks);
        Ok(())
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
    ffi(|| {
        let out = out_arg(guard, "guard (out)")?;
        *out = std::ptr::null_mut();
        let h = client_arg(client)?;
        let c = h.client.clone();
        let name = name_arg(name)?;
        let v = bytes_arg(value, value_len, "value", true)?.to_vec();
        let opts = convert_acquire_options(options)?;
        let l = block_on(async move { c.campaign(&name, v, opts).await })?;
        *out = new_guard(l.into_guard(), &h.callbacks);
        Ok(())
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
