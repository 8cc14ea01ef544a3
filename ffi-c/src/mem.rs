//! Test controls of the in-process stores (`mem://NAME`): core's
//! `MemStore`, for a C test to make a hold be lost the ways production
//! loses it. Only argument conversion here; what each control does, and
//! what a holder sees, is core's (core/src/mem.rs, core/tests/mem_faults.rs).

use std::ffi::{c_char, c_int, CString};
use std::time::Duration;

use etcdlock_core::runtime::current_pid;
use etcdlock_core::{Error, ErrorCode, MemStore};

use crate::*;

/// A handle on the in-process store that the endpoint `mem://NAME` reaches,
/// for tests: what a test does to it, as a fault or another party would
/// (etcdlock_mem_open). Clients that connect to its endpoint see each
/// control as they would see the same thing happen on etcd, with the same
/// loss reasons, in the same order, within the same bounds:
///
/// | control                    | what the store does                                  | what a holder sees |
/// |----------------------------|------------------------------------------------------|--------------------|
/// | etcdlock_mem_expire_lease  | ends a lease now, as its TTL would; its keys go      | the loss callback with ETCDLOCK_LOSS_LEASE_EXPIRED; waiters are granted |
/// | etcdlock_mem_delete_key    | deletes a lock's key, as an operator would           | ETCDLOCK_LOSS_KEY_DELETED; the next waiter is granted |
/// | etcdlock_mem_silence       | answers nothing for a while (an etcd that hangs)     | the renewal callback with the ms left (at risk), then ETCDLOCK_LOSS_CONNECTION_LOST at the local deadline; calls end at their bounds |
/// | etcdlock_mem_stall         | answers nothing to one client (its lease) only       | that client as under silence; other clients go on, and are granted its locks once its lease expires |
///
/// A client connected to etcd has no such handle; the store is named, never
/// reached through a client. Thread-safe. No call on it blocks or waits for
/// the store, so every one may be made from a callback too. Free with
/// etcdlock_mem_free (the store itself lives as long as the process).
pub struct etcdlock_mem {
    store: MemStore,
    endpoint: CString,
    pid: u32,
}

/// One key of an in-process store, as etcdlock_mem_keys read it. The
/// pointers point into the etcdlock_mem_key_list and live until
/// etcdlock_mem_key_list_free.
#[repr(C)]
pub struct etcdlock_mem_key {
    /// The key: key_len bytes, followed by a NUL (so a text key, such as a
    /// lock's key from etcdlock_guard_key, prints with %s).
    pub key: *const c_char,
    /// Length of key, without the NUL.
    pub key_len: usize,
    /// The key's value, value_len bytes (never NULL).
    pub value: *const u8,
    /// Length of value.
    pub value_len: usize,
    /// The lease the key lives on (0: none): a lock key's is its holder's
    /// etcdlock_guard_lease_id.
    pub lease_id: i64,
    /// The revision that created the key (a lock key's fencing token).
    pub create_revision: i64,
    /// The revision of its last write.
    pub mod_revision: i64,
}

/// The keys of an in-process store under a prefix, in key order
/// (etcdlock_mem_keys). Free with etcdlock_mem_key_list_free.
pub struct etcdlock_mem_key_list {
    items: Vec<etcdlock_mem_key>,
    /// The keys (each with its NUL) and values the items point into; the
    /// heap buffers do not move when the vectors grow.
    _bufs: Vec<Vec<u8>>,
}

unsafe fn mem_arg<'a>(store: *const etcdlock_mem) -> Result<&'a etcdlock_mem, Error> {
    let s = store.as_ref().ok_or_else(|| invalid("store is NULL"))?;
    if s.pid != current_pid() {
        return Err(Error::new(
            ErrorCode::Closed,
            "this store handle was opened in the parent process before fork(); \
             the in-process store does not run in the child",
        ));
    }
    Ok(s)
}

/// A span of a control in milliseconds: 0 ends it, a negative one or one
/// over ETCDLOCK_MAX_TIMEOUT_MS is the caller's mistake.
fn span_arg(ms: i64, what: &str) -> Result<Duration, Error> {
    if ms < 0 {
        return Err(invalid(format!(
            "{what} is {ms} ms; give 0 to end it, or a positive span"
        )));
    }
    if ms > ETCDLOCK_MAX_TIMEOUT_MS {
        return Err(invalid(format!(
            "{what} is {ms} ms; the limit is {ETCDLOCK_MAX_TIMEOUT_MS}"
        )));
    }
    Ok(Duration::from_millis(ms as u64))
}

/// Open the in-process store `mem://NAME` (name "" is the process-wide
/// `mem://`), starting it if no client started it yet, for a test to act on
/// it with the etcdlock_mem_* controls. Clients reach the same store by
/// giving its endpoint (etcdlock_mem_endpoint) as etcdlock_options.endpoints;
/// open it with the name the clients use. On success *store is a new handle
/// (free with etcdlock_mem_free); otherwise *store is NULL.
///
/// Returns ETCDLOCK_INVALID_ARGUMENT (NULL, a name that is not up to 64 of
/// A-Z a-z 0-9 . _ -, such as "a/b" or "mem://x"), ETCDLOCK_UNAVAILABLE (the
/// store could not listen on 127.0.0.1).
///
/// Safety: name is a NUL-terminated string; store is writable. Never
/// blocks; callable from any thread, callbacks included.
///
/// Example:
///
///     etcdlock_mem *store = NULL;
///     etcdlock_mem_open("orders-test", &store);
///     const char *ep; etcdlock_mem_endpoint(store, &ep);
///     o.endpoints = ep; // "mem://orders-test"
#[no_mangle]
pub unsafe extern "C" fn etcdlock_mem_open(
    name: *const c_char,
    store: *mut *mut etcdlock_mem,
) -> c_int {
    ffi(|| {
        let out = out_arg(store, "store (out)")?;
        *out = std::ptr::null_mut();
        let name = str_arg(name, "store name")?.ok_or_else(|| invalid("store name is NULL"))?;
        let s = MemStore::open(&name)?;
        let endpoint = CString::new(s.endpoint()).unwrap_or_default();
        *out = Box::into_raw(Box::new(etcdlock_mem {
            store: s,
            endpoint,
            pid: current_pid(),
        }));
        Ok(())
    })
}

/// The endpoint clients give to reach this store: "mem://NAME". *endpoint
/// points into the handle and stays valid until etcdlock_mem_free.
///
/// Safety: store is a live handle; endpoint is writable.
///
/// Example: const char *ep; etcdlock_mem_endpoint(store, &ep); o.endpoints = ep;
#[no_mangle]
pub unsafe extern "C" fn etcdlock_mem_endpoint(
    store: *const etcdlock_mem,
    endpoint: *mut *const c_char,
) -> c_int {
    ffi(|| {
        let out = out_arg(endpoint, "endpoint (out)")?;
        *out = mem_arg(store)?.endpoint.as_ptr();
        Ok(())
    })
}

/// End lease lease_id now, as its time-to-live would: every key on it is
/// deleted at one revision, its holders lose their holds (their loss
/// callbacks run with ETCDLOCK_LOSS_LEASE_EXPIRED, and their unlock returns
/// ETCDLOCK_LOCK_LOST), and the waiters behind them are granted. A hold's
/// lease is etcdlock_guard_lease_id. If existed is not NULL, *existed = 1 if
/// the store had that lease, else 0 (no error: the lease may have expired
/// already).
///
/// Returns ETCDLOCK_INVALID_ARGUMENT for a NULL store.
///
/// Safety: store is a live handle; existed is NULL or writable.
///
/// Example:
///
///     int64_t lease; etcdlock_guard_lease_id(g, &lease);
///     int existed; etcdlock_mem_expire_lease(store, lease, &existed);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_mem_expire_lease(
    store: *const etcdlock_mem,
    lease_id: i64,
    existed: *mut c_int,
) -> c_int {
    ffi(|| {
        if let Some(e) = existed.as_mut() {
            *e = 0;
        }
        let done = mem_arg(store)?.store.expire_lease(lease_id);
        if let Some(e) = existed.as_mut() {
            *e = done as c_int;
        }
        Ok(())
    })
}

/// Delete key (key_len bytes) as another party would (an operator, a
/// script): a lock's key is etcdlock_guard_key, and its holder loses the
/// hold with ETCDLOCK_LOSS_KEY_DELETED; the next waiter is granted. If
/// existed is not NULL, *existed = 1 if the key was there, else 0.
///
/// Returns ETCDLOCK_INVALID_ARGUMENT (NULL store, an empty key, key NULL
/// with key_len > 0, key_len over ETCDLOCK_MAX_BUFFER_LEN).
///
/// Safety: store is a live handle; key points to key_len bytes; existed is
/// NULL or writable.
///
/// Example:
///
///     const char *k; etcdlock_guard_key(g, &k);
///     etcdlock_mem_delete_key(store, (const uint8_t *)k, strlen(k), NULL);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_mem_delete_key(
    store: *const etcdlock_mem,
    key: *const u8,
    key_len: usize,
    existed: *mut c_int,
) -> c_int {
    ffi(|| {
        if let Some(e) = existed.as_mut() {
            *e = 0;
        }
        let s = &mem_arg(store)?.store;
        let k = bytes_arg(key, key_len, "key", false)?;
        let done = s.delete_key(k);
        if let Some(e) = existed.as_mut() {
            *e = done as c_int;
        }
        Ok(())
    })
}

/// Make the store answer nothing for ms milliseconds, as an etcd that hangs:
/// every request, keep-alive and watch event of every client waits, and is
/// answered when the silence ends if its caller still waits. Time goes on:
/// leases whose time-to-live runs out meanwhile expire. A hold turns at risk
/// a keep-alive interval after its last renewal (etcdlock_guard_on_renewal's
/// callback gets the ms it still has; etcdlock_guard_renewal says so too)
/// and is lost at its local deadline (ETCDLOCK_LOSS_CONNECTION_LOST), before
/// the store could grant it to anyone else. Lock calls end at their timeout
/// (ETCDLOCK_TIMEOUT), other calls at the client's request timeout
/// (ETCDLOCK_UNAVAILABLE). A later call replaces the end; ms 0 ends the
/// silence now (as etcdlock_mem_resume does).
///
/// Returns ETCDLOCK_INVALID_ARGUMENT (NULL store, ms negative or over
/// ETCDLOCK_MAX_TIMEOUT_MS).
///
/// Safety: store is a live handle.
///
/// Example: etcdlock_mem_silence(store, 60000); ... etcdlock_mem_resume(store);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_mem_silence(store: *const etcdlock_mem, ms: i64) -> c_int {
    ffi(|| {
        let s = &mem_arg(store)?.store;
        s.silence(span_arg(ms, "the silence")?);
        Ok(())
    })
}

/// Make the store answer nothing to the client of lease lease_id for ms
/// milliseconds, while every other client goes on: as a client cut off from
/// etcd. That client's holds turn at risk and are lost as under
/// etcdlock_mem_silence (ETCDLOCK_LOSS_CONNECTION_LOST), and its calls end
/// at their bounds; once its lease expires in the store, other clients are
/// granted its locks (with larger fencing tokens). The lease is a hold's
/// etcdlock_guard_lease_id. ms 0 ends the stall now. A lease the store does
/// not have is no error (nothing is stalled).
///
/// Returns ETCDLOCK_INVALID_ARGUMENT (NULL store, ms negative or over
/// ETCDLOCK_MAX_TIMEOUT_MS).
///
/// Safety: store is a live handle.
///
/// Example:
///
///     int64_t lease; etcdlock_guard_lease_id(g, &lease);
///     etcdlock_mem_stall(store, lease, 60000); // this client only
#[no_mangle]
pub unsafe extern "C" fn etcdlock_mem_stall(
    store: *const etcdlock_mem,
    lease_id: i64,
    ms: i64,
) -> c_int {
    ffi(|| {
        let s = &mem_arg(store)?.store;
        s.stall(lease_id, span_arg(ms, "the stall")?);
        Ok(())
    })
}

/// End every silence and stall of the store now: requests that waited are
/// answered. A test calls it on its way out, so a failed check does not
/// leave the store silent for the next test.
///
/// Returns ETCDLOCK_INVALID_ARGUMENT for a NULL store.
///
/// Safety: store is a live handle.
///
/// Example: etcdlock_mem_resume(store);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_mem_resume(store: *const etcdlock_mem) -> c_int {
    ffi(|| {
        mem_arg(store)?.store.resume();
        Ok(())
    })
}

/// The keys of the store under prefix (prefix_len bytes; 0 for every key),
/// in key order, read from the store itself (not through a client, so a
/// silence does not hold it up): what a test asserts on. *keys is a new list
/// (free with etcdlock_mem_key_list_free); etcdlock_mem_key_list_at gives
/// each key. A lock's keys are under the client's namespace + name + "/".
///
/// Returns ETCDLOCK_INVALID_ARGUMENT (NULL store or keys, prefix NULL with
/// prefix_len > 0, prefix_len over ETCDLOCK_MAX_BUFFER_LEN).
///
/// Safety: store is a live handle; prefix points to prefix_len bytes (or is
/// NULL with prefix_len 0); keys is writable.
///
/// Example:
///
///     etcdlock_mem_key_list *l = NULL;
///     etcdlock_mem_keys(store, (const uint8_t *)"jobs/", 5, &l);
///     for (size_t i = 0; i < etcdlock_mem_key_list_len(l); i++) {
///         const etcdlock_mem_key *k = etcdlock_mem_key_list_at(l, i);
///         printf("%s lease %lld token %lld\n", k->key, (long long)k->lease_id, (long long)k->create_revision);
///     }
///     etcdlock_mem_key_list_free(l);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_mem_keys(
    store: *const etcdlock_mem,
    prefix: *const u8,
    prefix_len: usize,
    keys: *mut *mut etcdlock_mem_key_list,
) -> c_int {
    ffi(|| {
        let out = out_arg(keys, "keys (out)")?;
        *out = std::ptr::null_mut();
        let s = &mem_arg(store)?.store;
        let prefix = bytes_arg(prefix, prefix_len, "prefix", true)?;
        let mut list = etcdlock_mem_key_list {
            items: Vec::new(),
            _bufs: Vec::new(),
        };
        for k in s.keys(prefix) {
            let mut key = k.key;
            let key_len = key.len();
            key.push(0);
            list.items.push(etcdlock_mem_key {
                key: key.as_ptr().cast(),
                key_len,
                value: k.value.as_ptr(),
                value_len: k.value.len(),
                lease_id: k.lease,
                create_revision: k.create_revision,
                mod_revision: k.mod_revision,
            });
            list._bufs.push(key);
            list._bufs.push(k.value);
        }
        *out = Box::into_raw(Box::new(list));
        Ok(())
    })
}

/// Number of keys in the list (0 for NULL).
///
/// Safety: keys is NULL or a live list.
///
/// Example: size_t n = etcdlock_mem_key_list_len(l);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_mem_key_list_len(keys: *const etcdlock_mem_key_list) -> usize {
    keys.as_ref().map_or(0, |l| l.items.len())
}

/// The index-th key (key order), or NULL when index is out of range or keys
/// is NULL. Valid until etcdlock_mem_key_list_free.
///
/// Safety: keys is NULL or a live list.
///
/// Example: const etcdlock_mem_key *k = etcdlock_mem_key_list_at(l, 0);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_mem_key_list_at(
    keys: *const etcdlock_mem_key_list,
    index: usize,
) -> *const etcdlock_mem_key {
    keys.as_ref()
        .and_then(|l| l.items.get(index))
        .map_or(std::ptr::null(), |k| k as *const _)
}

/// Free a list from etcdlock_mem_keys. NULL is a no-op.
///
/// Safety: keys is NULL or a live list not yet freed.
///
/// Example: etcdlock_mem_key_list_free(l);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_mem_key_list_free(keys: *mut etcdlock_mem_key_list) {
    if !keys.is_null() {
        ffi_void(|| drop(Box::from_raw(keys)));
    }
}

/// Free a store handle. The store goes on (it lives as long as the process,
/// and its clients keep using it); its silences and stalls go on too, so
/// call etcdlock_mem_resume first if the test made any. NULL is a no-op.
///
/// Safety: store is NULL or a handle from etcdlock_mem_open not yet freed,
/// and no other thread uses it any more.
///
/// Example: etcdlock_mem_resume(store); etcdlock_mem_free(store);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_mem_free(store: *mut etcdlock_mem) {
    if !store.is_null() {
        ffi_void(|| drop(Box::from_raw(store)));
    }
}
