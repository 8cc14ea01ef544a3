//! Queue views: the holders and waiters of one name (etcdlock_status), every
//! lock under a prefix (etcdlock_list), and release by fencing token.

use std::ffi::{c_char, c_int, CStr, CString};

use crate::*;

/// One key in the queue of a name, as etcdlock_status read it. Strings and
/// bytes point into the etcdlock_queue and live until etcdlock_queue_free.
#[repr(C)]
pub struct etcdlock_contender {
    /// The key (with the namespace).
    pub key: *const c_char,
    /// ETCDLOCK_KIND_EXCLUSIVE, ETCDLOCK_KIND_READER or ETCDLOCK_KIND_PERMIT.
    pub kind: c_int,
    /// The semaphore's permit count for ETCDLOCK_KIND_PERMIT, else 1.
    pub permits: u32,
    /// 1 if it holds now (by its kind's rule), 0 if it waits.
    pub holds: c_int,
    /// Its lease.
    pub lease_id: i64,
    /// Seconds left on its lease, -1 if etcd did not say.
    pub ttl_remaining: i64,
    /// The key's create_revision (a holder's fencing token).
    pub fencing_token: i64,
    /// "host:pid" for etcdlock keys, NULL for etcdctl and Go keys.
    pub owner: *const c_char,
    /// Milliseconds since the key was created (etcdlock keys), -1 if unknown.
    pub age_ms: i64,
    /// The key's value (an election's proclamation), value_len bytes.
    pub value: *const u8,
    /// Length of value.
    pub value_len: usize,
    /// The holder's host (etcdlock keys), NULL if unknown.
    pub host: *const c_char,
    /// The holder's process id (etcdlock keys), -1 if unknown.
    pub pid: i64,
    /// The language its client uses etcdlock from ("c", "python", ...), once
    /// its meta record is written (keys older than ~100 ms); NULL if unknown.
    pub language: *const c_char,
    /// Acquisitions of this name in progress in its client: its local queue
    /// (a client keeps at most two keys per name in etcd); -1 if unknown.
    pub local_waiters: i64,
    /// 1 for a key without etcdlock's owner info: etcdctl, Go's Mutex or Election.
    pub foreign: c_int,
    /// The holder's metadata (etcdlock_acquire_options.metadata), as it was
    /// given: key, value, key, value, ..., NULL. Never NULL (an empty list is
    /// a lone NULL); known once its meta record is written (~100 ms).
    pub metadata: *const *const c_char,
    /// Number of key/value pairs in metadata.
    pub metadata_len: usize,
}

/// The holders and waiters of one name (etcdlock_status): contenders in
/// queue order, holders first. Free with etcdlock_queue_free.
pub struct etcdlock_queue {
    pub(crate) items: Vec<etcdlock_contender>,
    pub(crate) name: CString,
    pub(crate) kind: c_int,
    pub(crate) _strings: Vec<CString>,
    pub(crate) _values: Vec<Vec<u8>>,
    pub(crate) _lists: Vec<Vec<*const c_char>>,
}

/// Every lock under a prefix (etcdlock_list), sorted by name. Free with etcdlock_locks_free.
pub struct etcdlock_locks {
    pub(crate) queues: Vec<etcdlock_queue>,
}

/// The queue of a core status (its strings and bytes owned by the queue).
fn queue_of(st: etcdlock_core::Status) -> etcdlock_queue {
    let kind = match st.kind {
        None => ETCDLOCK_LOCK_UNKNOWN,
        Some(etcdlock_core::LockKind::Mutex) => ETCDLOCK_LOCK_MUTEX,
        Some(etcdlock_core::LockKind::Election) => ETCDLOCK_LOCK_ELECTION,
        Some(etcdlock_core::LockKind::Semaphore) => ETCDLOCK_LOCK_SEMAPHORE,
        Some(etcdlock_core::LockKind::RwLock) => ETCDLOCK_LOCK_RWLOCK,
    };
    let name = CString::new(st.name).unwrap_or_default();
    let mut q = etcdlock_queue {
        items: Vec::new(),
        name,
        kind,
        _strings: Vec::new(),
        _values: Vec::new(),
        _lists: Vec::new(),
    };
    let cstr = |s: Option<String>| s.map(|o| CString::new(o).unwrap_or_default());
    let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |o| o.as_ptr());
    for x in st.holders.into_iter().chain(st.waiters) {
        let key = CString::new(x.key).unwrap_or_default();
        let (owner, host, language) = (cstr(x.owner), cstr(x.host), cstr(x.language));
        let meta: Vec<CString> = x
            .metadata
            .into_iter()
            .flat_map(|(k, v)| [k, v])
            .map(|s| CString::new(s.replace('\0', "\\0")).unwrap_or_default())
            .collect();
        let mut list: Vec<*const c_char> = meta.iter().map(|s| s.as_ptr()).collect();
        list.push(std::ptr::null());
        let (kind, permits) = match x.kind {
            etcdlock_core::ContenderKind::Exclusive => (ETCDLOCK_KIND_EXCLUSIVE, 1),
            etcdlock_core::ContenderKind::Reader => (ETCDLOCK_KIND_READER, 1),
            etcdlock_core::ContenderKind::Permit(n) => (ETCDLOCK_KIND_PERMIT, n),
        };
        q.items.push(etcdlock_contender {
            key: key.as_ptr(),
            kind,
            permits,
            holds: x.holds as c_int,
            lease_id: x.lease_id,
            ttl_remaining: x.ttl_remaining.unwrap_or(-1),
            fencing_token: x.create_revision,
            owner: ptr(&owner),
            age_ms: x.age_ms.map_or(-1, |a| a as i64),
            value: x.value.as_ptr(),
            value_len: x.value.len(),
            host: ptr(&host),
            pid: x.pid.map_or(-1, i64::from),
            language: ptr(&language),
            local_waiters: x.local_waiters.map_or(-1, i64::from),
            foreign: x.foreign as c_int,
            metadata: list.as_ptr(),
            metadata_len: meta.len() / 2,
        });
        // The heap buffers do not move when their owners move into the vectors.
        q._strings.push(key);
        q._strings.extend(owner);
        q._strings.extend(host);
        q._strings.extend(language);
        q._values.push(x.value);
        q._strings.extend(meta);
        q._lists.push(list);
    }
    q
}

/// Read the queue of `name` for any kind of lock (mutex, semaphore,
/// read-write lock, election; etcdctl and Go keys too): *queue is a new handle
/// (free with etcdlock_queue_free) holding every contender in queue order,
/// holders first. This is what `etcdlock status` shows.
///
/// Safety: client is live; name is NUL-terminated; queue is writable.
///
/// Example:
///
///     etcdlock_queue *q = NULL;
///     etcdlock_status(c, "orders", &q);
///     for (size_t i = 0; i < etcdlock_queue_len(q); i++) {
///         const etcdlock_contender *x = etcdlock_queue_at(q, i);
///         printf("%s %s\n", x->holds ? "holds" : "waits", x->key);
///     }
///     etcdlock_queue_free(q);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_status(
    client: *const etcdlock_client,
    name: *const c_char,
    queue: *mut *mut etcdlock_queue,
) -> c_int {
    ffi(|| {
        let out = out_arg(queue, "queue (out)")?;
        *out = std::ptr::null_mut();
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let st = block_on(async move { c.status(&name).await })?;
        *out = Box::into_raw(Box::new(queue_of(st)));
        Ok(())
    })
}

/// What the queue's name is used as: ETCDLOCK_LOCK_MUTEX, _ELECTION,
/// _SEMAPHORE or _RWLOCK, from the contenders' meta records or keys;
/// ETCDLOCK_LOCK_UNKNOWN when they do not tell (or queue is NULL).
///
/// Safety: queue is NULL or a live handle.
///
/// Example: if (etcdlock_queue_kind(q) == ETCDLOCK_LOCK_ELECTION) puts("an election");
#[no_mangle]
pub unsafe extern "C" fn etcdlock_queue_kind(queue: *const etcdlock_queue) -> c_int {
    queue.as_ref().map_or(ETCDLOCK_LOCK_UNKNOWN, |q| q.kind)
}

/// The lock name of the queue (NUL-terminated, valid until the queue or its
/// list is freed), or NULL for NULL.
///
/// Safety: queue is NULL or a live handle.
///
/// Example: printf("%s\n", etcdlock_queue_name(q));
#[no_mangle]
pub unsafe extern "C" fn etcdlock_queue_name(queue: *const etcdlock_queue) -> *const c_char {
    queue.as_ref().map_or(std::ptr::null(), |q| q.name.as_ptr())
}

/// Every lock, election, semaphore and read-write lock whose name starts
/// with prefix ("" for all of the client's namespace), sorted by name, from
/// one read: what `etcdlock list` shows. *locks is a new handle (free with
/// etcdlock_locks_free); etcdlock_locks_at gives each name's queue.
///
/// Safety: client is live; prefix is NUL-terminated; list is writable.
///
/// Example:
///
///     etcdlock_locks *l = NULL;
///     etcdlock_list(c, "jobs/", &l);
///     for (size_t i = 0; i < etcdlock_locks_len(l); i++)
///         printf("%s: %zu\n", etcdlock_queue_name(etcdlock_locks_at(l, i)), etcdlock_queue_len(etcdlock_locks_at(l, i)));
///     etcdlock_locks_free(l);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_list(
    client: *const etcdlock_client,
    prefix: *const c_char,
    list: *mut *mut etcdlock_locks,
) -> c_int {
    ffi(|| {
        let out = out_arg(list, "list (out)")?;
        *out = std::ptr::null_mut();
        let c = client_arg(client)?.client.clone();
        if prefix.is_null() {
            return Err(invalid("prefix is NULL"));
        }
        let prefix = CStr::from_ptr(prefix)
            .to_str()
            .map_err(|_| invalid("prefix is not UTF-8"))?
            .to_string();
        let l = block_on(async move { c.list(&prefix).await })?;
        *out = Box::into_raw(Box::new(etcdlock_locks {
            queues: l.into_iter().map(queue_of).collect(),
        }));
        Ok(())
    })
}

/// Number of names in the list (0 for NULL).
///
/// Safety: list is NULL or a live handle.
///
/// Example: size_t n = etcdlock_locks_len(l);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_locks_len(list: *const etcdlock_locks) -> usize {
    list.as_ref().map_or(0, |l| l.queues.len())
}

/// The index-th name's queue (by name), or NULL when index is out of range.
/// Valid until etcdlock_locks_free; do not pass it to etcdlock_queue_free.
///
/// Safety: list is NULL or a live handle.
///
/// Example: const etcdlock_queue *q = etcdlock_locks_at(l, 0);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_locks_at(
    list: *const etcdlock_locks,
    index: usize,
) -> *const etcdlock_queue {
    list.as_ref()
        .and_then(|l| l.queues.get(index))
        .map_or(std::ptr::null(), |q| q as *const _)
}

/// Free a list from etcdlock_list (and every queue in it). NULL is a no-op.
///
/// Safety: list is NULL or a live handle not yet freed.
///
/// Example: etcdlock_locks_free(l);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_locks_free(list: *mut etcdlock_locks) {
    if !list.is_null() {
        ffi_void(|| drop(Box::from_raw(list)));
    }
}

/// Free a lock whose holder is wedged: delete the hold of name whose
/// fencing token is token, whoever holds it (a later holder is never
/// touched). *released is 1 if it was released, 0 if no hold has that token.
/// The former holder's loss callback and etcdlock_guard_loss_reason report
/// ETCDLOCK_LOSS_KEY_DELETED.
///
/// Safety: client is live; name is NUL-terminated; released is writable.
///
/// Example: int done; etcdlock_release(c, "nightly-job", token, &done);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_release(
    client: *const etcdlock_client,
    name: *const c_char,
    token: i64,
    released: *mut c_int,
) -> c_int {
    ffi(|| {
        let out = out_arg(released, "released (out)")?;
        *out = 0;
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let done = block_on(async move { c.release(&name, token).await })?;
        *out = done as c_int;
        Ok(())
    })
}

/// Free a permit of the semaphore name whose holder is wedged: id is the
/// permit's id, its fencing token (etcdlock_guard_fencing_token). As
/// etcdlock_release: *released is 1 if it was released, 0 if no permit has
/// that id; the former holder's loss reason is ETCDLOCK_LOSS_KEY_DELETED.
///
/// Safety: client is live; name is NUL-terminated; released is writable.
///
/// Example: int done; etcdlock_release_permit(c, "transcoders", id, &done);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_release_permit(
    client: *const etcdlock_client,
    name: *const c_char,
    id: i64,
    released: *mut c_int,
) -> c_int {
    ffi(|| {
        let out = out_arg(released, "released (out)")?;
        *out = 0;
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let done = block_on(async move { c.release_permit(&name, id).await })?;
        *out = done as c_int;
        Ok(())
    })
}

/// Number of contenders in the queue (0 for NULL).
///
/// Safety: queue is NULL or a live handle.
///
/// Example: size_t n = etcdlock_queue_len(q);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_queue_len(queue: *const etcdlock_queue) -> usize {
    queue.as_ref().map_or(0, |q| q.items.len())
}

/// The index-th contender (queue order, holders first), or NULL when index is
/// out of range. Valid until etcdlock_queue_free.
///
/// Safety: queue is NULL or a live handle.
///
/// Example: const etcdlock_contender *x = etcdlock_queue_at(q, 0);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_queue_at(
    queue: *const etcdlock_queue,
    index: usize,
) -> *const etcdlock_contender {
    queue
        .as_ref()
        .and_then(|q| q.items.get(index))
        .map_or(std::ptr::null(), |x| x as *const _)
}

/// Free a queue from etcdlock_status. NULL is a no-op.
///
/// Safety: queue is NULL or a live handle not yet freed.
///
/// Example: etcdlock_queue_free(q);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_queue_free(queue: *mut etcdlock_queue) {
    if !queue.is_null() {
        ffi_void(|| drop(Box::from_raw(queue)));
    }
}
