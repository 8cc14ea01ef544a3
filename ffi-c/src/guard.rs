//! The guard handle: blocking lock and try-lock, what a guard tells, unlock,
//! free, and guarded operations.

use std::ffi::{c_char, c_int, CString};
use std::sync::Arc;

use etcdlock_core::runtime::current_pid;
use etcdlock_core::{Error, ErrorCode, GuardState, LockOptions};

use crate::*;

/// A held lock. Thread-safe; freeing it releases the lock if still held.
pub struct etcdlock_guard {
    pub(crate) guard: Held,
    pub(crate) key: CString,
    pub(crate) pid: u32,
    /// Its client's: etcdlock_client_free waits for the guard's callbacks too.
    pub(crate) callbacks: Arc<Callbacks>,
}

/// What a guard handle holds: its own guard, or a leader-loop term's
/// leadership (etcdlock_term_guard), which the term owns.
#[derive(Clone)]
pub(crate) enum Held {
    Own(Arc<etcdlock_core::Guard>),
    Term(etcdlock_core::Term),
}

impl std::ops::Deref for Held {
    type Target = etcdlock_core::Guard;
    fn deref(&self) -> &etcdlock_core::Guard {
        match self {
            Held::Own(g) => g,
            Held::Term(t) => t.leadership(),
        }
    }
}

pub(crate) unsafe fn guard_arg<'a>(g: *const etcdlock_guard) -> Result<&'a etcdlock_guard, Error> {
    let g = g.as_ref().ok_or_else(|| invalid("guard is NULL"))?;
    if g.pid != current_pid() {
        return Err(Error::new(
            ErrorCode::Closed,
            "this guard was created in the parent process before fork(); it cannot be used in the child",
        ));
    }
    Ok(g)
}

pub(crate) fn new_guard(
    g: etcdlock_core::Guard,
    callbacks: &Arc<Callbacks>,
) -> *mut etcdlock_guard {
    let key = CString::new(g.key().replace('\0', "\\0")).unwrap_or_default();
    Box::into_raw(Box::new(etcdlock_guard {
        guard: Held::Own(Arc::new(g)),
        key,
        pid: current_pid(),
        callbacks: callbacks.clone(),
    }))
}

/// What every call that takes a hold does around its own part: clear
/// `*guard`, check the client and the lock name, run the acquisition `take`
/// builds from them (checking its own arguments first, after these), and
/// hand out the new guard.
pub(crate) unsafe fn take_hold<F, Fut>(
    client: *const etcdlock_client,
    name: *const c_char,
    guard: *mut *mut etcdlock_guard,
    take: F,
) -> c_int
where
    F: FnOnce(etcdlock_core::Client, String) -> Result<Fut, Error>,
    Fut: std::future::Future<Output = Result<etcdlock_core::Guard, Error>>,
{
    ffi(|| {
        let out = out_arg(guard, "guard (out)")?;
        *out = std::ptr::null_mut();
        let h = client_arg(client)?;
        let acquisition = take(h.client.clone(), name_arg(name)?)?;
        *out = new_guard(block_on(acquisition)?, &h.callbacks);
        Ok(())
    })
}

/// Wait for the lock `name` and hold it. Waiters are served in arrival order.
/// timeout_ms: maximum wait in milliseconds; negative (ETCDLOCK_WAIT_FOREVER)
/// waits as long as it takes. Acquiring costs at least one etcd round trip, so
/// 0 or a few milliseconds may time out even on a free lock: use
/// etcdlock_try_lock to take a lock only if it is free.
/// On success *guard is a new guard (free with etcdlock_guard_free); otherwise
/// *guard is NULL.
///
/// Returns ETCDLOCK_TIMEOUT, ETCDLOCK_LOCK_LOST (our session died while
/// waiting), ETCDLOCK_CLOSED, ETCDLOCK_UNAVAILABLE, ETCDLOCK_INVALID_ARGUMENT
/// (NULL, name empty/longer than ETCDLOCK_MAX_NAME_LEN/not UTF-8, timeout_ms >
/// ETCDLOCK_MAX_TIMEOUT_MS, or called from a callback).
///
/// Safety: client is a live handle; name is a NUL-terminated string; guard is writable.
///
/// Example:
///
///     etcdlock_guard *g = NULL;
///     int rc = etcdlock_lock(c, "orders", 5000, &g);
///     if (rc == ETCDLOCK_TIMEOUT) puts("busy");
#[no_mangle]
pub unsafe extern "C" fn etcdlock_lock(
    client: *const etcdlock_client,
    name: *const c_char,
    timeout_ms: i64,
    guard: *mut *mut etcdlock_guard,
) -> c_int {
    take_hold(client, name, guard, |c, name| {
        let timeout = timeout_arg(timeout_ms)?;
        Ok(async move {
            c.lock_with(
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

/// Take the lock `name` if it is free right now. If someone holds it or waits
/// for it, returns ETCDLOCK_WOULD_BLOCK (a status, not an error to parse) and
/// leaves no key behind. Otherwise as etcdlock_lock.
///
/// Safety: as etcdlock_lock.
///
/// Example:
///
///     int rc = etcdlock_try_lock(c, "cron", &g);
///     if (rc == ETCDLOCK_WOULD_BLOCK) return 0; // another node runs it
#[no_mangle]
pub unsafe extern "C" fn etcdlock_try_lock(
    client: *const etcdlock_client,
    name: *const c_char,
    guard: *mut *mut etcdlock_guard,
) -> c_int {
    take_hold(client, name, guard, |c, name| {
        Ok(async move { c.try_lock(&name).await })
    })
}

/// etcdlock_lock with acquisition options: options->timeout_ms as
/// etcdlock_lock's timeout_ms (0: one try, ETCDLOCK_TIMEOUT when taken), and
/// the lock-delay, lease time and holder metadata of etcdlock_acquire_options.
/// options NULL is the defaults (wait forever, nothing else). On success
/// *guard is a new guard (free with etcdlock_guard_free); otherwise NULL.
///
/// Returns as etcdlock_lock, and ETCDLOCK_INVALID_ARGUMENT for options the
/// core refuses (a negative or too long lock-delay, a lease time of 0,
/// metadata over 1 KB, a struct_size etcdlock_acquire_options_init did not
/// set); the message names the field.
///
/// Safety: as etcdlock_lock; options is NULL or an etcdlock_acquire_options
/// initialised with etcdlock_acquire_options_init whose metadata strings are
/// valid for the duration of the call.
///
/// Example:
///
///     const char *meta[] = {"app", "billing", NULL};
///     etcdlock_acquire_options ao;
///     etcdlock_acquire_options_init(&ao, sizeof ao);
///     ao.timeout_ms = 5000;
///     ao.lock_delay_ms = 3000;
///     ao.metadata = meta;
///     int rc = etcdlock_lock_ex(c, "orders", &ao, &g);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_lock_ex(
    client: *const etcdlock_client,
    name: *const c_char,
    options: *const etcdlock_acquire_options,
    guard: *mut *mut etcdlock_guard,
) -> c_int {
    take_hold(client, name, guard, |c, name| {
        let opts = convert_acquire_options(options)?;
        Ok(async move { c.lock_with(&name, opts).await })
    })
}

/// etcdlock_lock_ex, reentrant for `owner` (Java's ReentrantLock per
/// thread, Redisson's RLock): if `owner` holds `name` (taken with this
/// function on this client), *guard is at once another handle of that hold,
/// with no request to etcd (same key, same fencing token); the lock is
/// released when every handle is unlocked or freed. Other owners, and plain
/// etcdlock_lock calls, wait as for etcdlock_lock_ex. The owner is whatever
/// the caller says it is: a thread id (`(uint64_t)pthread_self()`), a
/// request id, a coroutine.
///
/// A lost hold is never re-entered: ETCDLOCK_LOCK_LOST until the owner has
/// unlocked or freed every handle of it. options NULL is the defaults (wait
/// forever); options->timeout_ms 0 is one try (ETCDLOCK_TIMEOUT when another
/// owner holds the lock). Returns as etcdlock_lock_ex.
///
/// Safety: as etcdlock_lock_ex.
///
/// Example:
///
///     uint64_t me = (uint64_t)pthread_self();
///     etcdlock_guard *outer = NULL, *inner = NULL;
///     etcdlock_lock_reentrant(c, "orders", me, NULL, &outer);
///     etcdlock_lock_reentrant(c, "orders", me, NULL, &inner); // at once
///     etcdlock_guard_free(inner); // still held
///     etcdlock_guard_free(outer); // released
#[no_mangle]
pub unsafe extern "C" fn etcdlock_lock_reentrant(
    client: *const etcdlock_client,
    name: *const c_char,
    owner: u64,
    options: *const etcdlock_acquire_options,
    guard: *mut *mut etcdlock_guard,
) -> c_int {
    take_hold(client, name, guard, |c, name| {
        let opts = convert_acquire_options(options)?;
        Ok(async move { c.lock_reentrant(&name, owner, opts).await })
    })
}

/// Our lock key in etcd (namespace + name + "/" + lease id in hex...). *key
/// points into the guard and stays valid until etcdlock_guard_free.
///
/// Safety: guard is a live handle; key is writable.
///
/// Example: const char *k; etcdlock_guard_key(g, &k); printf("%s\n", k);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_key(
    guard: *const etcdlock_guard,
    key: *mut *const c_char,
) -> c_int {
    ffi(|| {
        let out = out_arg(key, "key (out)")?;
        *out = guard_arg(guard)?.key.as_ptr();
        Ok(())
    })
}

/// The lease id of the session that holds the lock.
///
/// Safety: guard is a live handle; lease_id is writable.
///
/// Example: int64_t lease; etcdlock_guard_lease_id(g, &lease);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_lease_id(
    guard: *const etcdlock_guard,
    lease_id: *mut i64,
) -> c_int {
    ffi(|| {
        let out = out_arg(lease_id, "lease_id (out)")?;
        *out = guard_arg(guard)?.guard.lease_id();
        Ok(())
    })
}

/// The fencing token: our key's create_revision. It strictly increases from one
/// holder of a lock to the next; hand it to resources that can reject writes
/// from a stale holder.
///
/// Safety: guard is a live handle; token is writable.
///
/// Example: int64_t t; etcdlock_guard_fencing_token(g, &t); printf("token %lld\n", (long long)t);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_fencing_token(
    guard: *const etcdlock_guard,
    token: *mut i64,
) -> c_int {
    ffi(|| {
        let out = out_arg(token, "token (out)")?;
        *out = guard_arg(guard)?.guard.fencing_token();
        Ok(())
    })
}

/// *held = 1 while the lock is held (not unlocked, not lost, and inside the
/// local validity window, checked against the monotonic clock now), else 0.
///
/// Safety: guard is a live handle; held is writable.
///
/// Example: int held; etcdlock_guard_is_held(g, &held); if (!held) abort_work();
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_is_held(
    guard: *const etcdlock_guard,
    held: *mut c_int,
) -> c_int {
    ffi(|| {
        let out = out_arg(held, "held (out)")?;
        *out = guard_arg(guard)?.guard.is_held() as c_int;
        Ok(())
    })
}

/// *reason = the ETCDLOCK_LOSS_* reason if the hold was lost, else
/// ETCDLOCK_LOSS_NONE (held, or released normally).
///
/// Safety: guard is a live handle; reason is writable.
///
/// Example: int r; etcdlock_guard_loss_reason(g, &r); puts(etcdlock_loss_reason_name(r));
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_loss_reason(
    guard: *const etcdlock_guard,
    reason: *mut c_int,
) -> c_int {
    ffi(|| {
        let out = out_arg(reason, "reason (out)")?;
        *out = guard_arg(guard)?
            .guard
            .loss()
            .map(|l| l.reason as c_int)
            .unwrap_or(ETCDLOCK_LOSS_NONE);
        Ok(())
    })
}

/// Release the lock (delete our key). Idempotent: after a successful unlock,
/// further calls return ETCDLOCK_OK. Returns ETCDLOCK_LOCK_LOST (on every call)
/// if the hold had been lost before, so the caller learns its critical section
/// may not have been protected to the end. If etcd is unreachable the delete
/// is retried in the background and ETCDLOCK_OK is returned. Any thread may
/// unlock (not only the locking one). The guard must still be freed.
///
/// Safety: guard is a live handle.
///
/// Example: if (etcdlock_unlock(g) == ETCDLOCK_LOCK_LOST) log_warning("lost before unlock");
#[no_mangle]
pub unsafe extern "C" fn etcdlock_unlock(guard: *const etcdlock_guard) -> c_int {
    ffi(|| {
        let g = guard_arg(guard)?.guard.clone();
        block_on(async move { g.unlock().await })
    })
}

/// Free a guard, releasing the lock first if it is still held (blocking for
/// that, except on a runtime thread where the release runs in the background).
/// NULL is a no-op.
///
/// Safety: guard is NULL or a live handle, and no other thread uses it any more.
///
/// Example: etcdlock_guard_free(g); g = NULL;
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_free(guard: *mut etcdlock_guard) {
    if guard.is_null() {
        return;
    }
    ffi_void(|| {
        let h = Box::from_raw(guard);
        if h.pid != current_pid() {
            etcdlock_core::runtime::keep_inherited(h);
            return;
        }
        if h.guard.state() != GuardState::Held {
            return;
        }
        let g = h.guard.clone();
        drop(h);
        if on_runtime_thread() {
            let _ = etcdlock_core::runtime::spawn(async move {
                let _ = g.unlock().await;
            });
        } else {
            let _ = block_on(async move { g.unlock().await });
        }
    })
}
