//! A lock's history (etcdlock_history): every key queued on a name that
//! etcd's MVCC history still holds, with its wait, hold and end (core's
//! `Client::history`), as a handle of plain C records.

use std::ffi::{c_char, c_int, CString};
use std::time::Duration;

use crate::*;

/// One key queued on a name: a wait, and the hold it became. Strings point
/// into the etcdlock_history_entries and live until
/// etcdlock_history_entries_free. Times are wall-clock estimates in
/// milliseconds since the epoch (etcd keeps revisions, not times; each
/// etcdlock key carries the time it was written); -1 means "none".
#[repr(C)]
pub struct etcdlock_history_entry {
    /// The key (with the namespace).
    pub key: *const c_char,
    /// ETCDLOCK_KIND_EXCLUSIVE, ETCDLOCK_KIND_READER or ETCDLOCK_KIND_PERMIT.
    pub kind: c_int,
    /// The semaphore's permit count for ETCDLOCK_KIND_PERMIT, else 1.
    pub permits: u32,
    /// Its lease: the client.
    pub lease_id: i64,
    /// Its create_revision: its fencing token if it held.
    pub fencing_token: i64,
    /// "host:pid" for etcdlock keys, NULL for etcdctl and Go keys.
    pub owner: *const c_char,
    /// The client's host (etcdlock keys), NULL if unknown.
    pub host: *const c_char,
    /// The client's process id (etcdlock keys), -1 if unknown.
    pub pid: i64,
    /// The language of the client ("c", "python", ...), NULL if unknown.
    pub language: *const c_char,
    /// When the key was queued.
    pub queued_ms: i64,
    /// The revision at which it came to hold, -1 if it never held.
    pub granted_revision: i64,
    /// When it came to hold, -1 if it never held.
    pub granted_ms: i64,
    /// The revision of its delete, -1 while the key is there.
    pub ended_revision: i64,
    /// When it was deleted, -1 while the key is there.
    pub ended_ms: i64,
    /// How it ended: "holding" or "waiting" (still there),
    /// "released" (deleted while its lease lived on), "lease_ended" (gone
    /// with its lease: expired or revoked), "abandoned" (deleted before it
    /// held: a timeout, cancel or try).
    pub ended: *const c_char,
    /// How long it waited (to its grant, its end, or now), milliseconds.
    pub wait_ms: i64,
    /// How long it held (to its end, or now), milliseconds; -1 if it never held.
    pub hold_ms: i64,
}

/// The history of one name (etcdlock_history): its entries, oldest first.
/// Free with etcdlock_history_entries_free.
pub struct etcdlock_history_entries {
    entries: Vec<etcdlock_history_entry>,
    revision: i64,
    from_revision: i64,
    read_ms: i64,
    _strings: Vec<CString>,
    _ended: Vec<CString>,
}

fn ms(v: Option<u64>) -> i64 {
    v.map_or(-1, |t| i64::try_from(t).unwrap_or(i64::MAX))
}

fn entries_of(h: etcdlock_core::records::History) -> etcdlock_history_entries {
    let mut strings: Vec<CString> = Vec::new();
    let mut ended: Vec<CString> = Vec::new();
    let mut entries = Vec::new();
    let text = |s: String| CString::new(s.replace('\0', "\\0")).unwrap_or_default();
    for e in h.entries {
        let mut keep = |s: Option<String>| match s.map(text) {
            Some(c) => {
                let ptr = c.as_ptr();
                strings.push(c);
                ptr
            }
            None => std::ptr::null(),
        };
        let (kind, permits) = match e.kind {
            etcdlock_core::ContenderKind::Exclusive => (ETCDLOCK_KIND_EXCLUSIVE, 1),
            etcdlock_core::ContenderKind::Reader => (ETCDLOCK_KIND_READER, 1),
            etcdlock_core::ContenderKind::Permit(n) => (ETCDLOCK_KIND_PERMIT, n),
        };
        let how = text(e.ended.to_string());
        entries.push(etcdlock_history_entry {
            key: keep(Some(e.key)),
            kind,
            permits,
            lease_id: e.lease_id,
            fencing_token: e.fencing_token,
            owner: keep(e.owner),
            host: keep(e.host),
            pid: e.pid.map_or(-1, i64::from),
            language: keep(e.language),
            queued_ms: ms(Some(e.queued_ms)),
            granted_revision: e.granted_revision.unwrap_or(-1),
            granted_ms: ms(e.granted_ms),
            ended_revision: e.ended_revision.unwrap_or(-1),
            ended_ms: ms(e.ended_ms),
            ended: how.as_ptr(),
            wait_ms: ms(Some(e.wait_ms)),
            hold_ms: ms(e.hold_ms),
        });
        ended.push(how);
    }
    etcdlock_history_entries {
        entries,
        revision: h.revision,
        from_revision: h.from_revision,
        read_ms: ms(Some(h.read_ms)),
        _strings: strings,
        _ended: ended,
    }
}

/// The history of name from etcd's MVCC history: every key queued on it
/// (holds and waits, from any language, etcdctl and Go too) with its client,
/// fencing token, when it was queued, granted and ended, and how it ended.
/// since_ms >= 0 keeps the entries that ended within the last since_ms
/// milliseconds or are still there; a negative since_ms (-1 or
/// ETCDLOCK_UNSET) keeps everything. How far back it reaches is set by
/// etcd's compaction (--auto-compaction-retention):
/// etcdlock_history_entries_from_revision says where the replay began.
/// *history is a new handle (free with etcdlock_history_entries_free): what
/// `etcdlock history` shows. Waits inside a client beyond its queued keys
/// (it queues at most two per name) are not keys and are not listed. Costs
/// etcd a put and a delete of a marker key beside the name and one watch of
/// the name's keys from the oldest revision it keeps.
///
/// Safety: client is live; name is NUL-terminated; history is writable.
///
/// Example:
///
///     etcdlock_history_entries *h = NULL;
///     if (etcdlock_history(c, "nightly-job", 3600 * 1000, &h) == ETCDLOCK_OK)
///         for (size_t i = 0; i < etcdlock_history_entries_len(h); i++) {
///             const etcdlock_history_entry *e = etcdlock_history_entries_at(h, i);
///             printf("%s token %lld waited %lld ms, %s\n", e->owner ? e->owner : e->key,
///                    (long long)e->fencing_token, (long long)e->wait_ms, e->ended);
///         }
///     etcdlock_history_entries_free(h);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_history(
    client: *const etcdlock_client,
    name: *const c_char,
    since_ms: i64,
    history: *mut *mut etcdlock_history_entries,
) -> c_int {
    ffi(|| {
        let out = out_arg(history, "history (out)")?;
        *out = std::ptr::null_mut();
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let since = u64::try_from(since_ms).ok().map(Duration::from_millis);
        let h = block_on(async move { c.history(&name, since).await })?;
        *out = Box::into_raw(Box::new(entries_of(h)));
        Ok(())
    })
}

/// Number of entries (0 for NULL).
///
/// Safety: history is NULL or a live handle.
///
/// Example: size_t n = etcdlock_history_entries_len(h);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_history_entries_len(
    history: *const etcdlock_history_entries,
) -> usize {
    history.as_ref().map_or(0, |h| h.entries.len())
}

/// The index-th entry, oldest first (by when its key was queued), or NULL
/// when index is out of range. Valid until etcdlock_history_entries_free.
///
/// Safety: history is NULL or a live handle.
///
/// Example: const etcdlock_history_entry *e = etcdlock_history_entries_at(h, 0);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_history_entries_at(
    history: *const etcdlock_history_entries,
    index: usize,
) -> *const etcdlock_history_entry {
    history
        .as_ref()
        .and_then(|h| h.entries.get(index))
        .map_or(std::ptr::null(), |e| e as *const _)
}

/// The store revision the history ends at (0 for NULL).
///
/// Safety: history is NULL or a live handle.
///
/// Example: int64_t upto = etcdlock_history_entries_revision(h);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_history_entries_revision(
    history: *const etcdlock_history_entries,
) -> i64 {
    history.as_ref().map_or(0, |h| h.revision)
}

/// The first revision replayed: etcd's compaction revision (1 if etcd never
/// compacted); nothing older is known (0 for NULL).
///
/// Safety: history is NULL or a live handle.
///
/// Example: printf("since revision %lld\n", (long long)etcdlock_history_entries_from_revision(h));
#[no_mangle]
pub unsafe extern "C" fn etcdlock_history_entries_from_revision(
    history: *const etcdlock_history_entries,
) -> i64 {
    history.as_ref().map_or(0, |h| h.from_revision)
}

/// When the history was read: wall clock, milliseconds since the epoch (0
/// for NULL).
///
/// Safety: history is NULL or a live handle.
///
/// Example: int64_t at = etcdlock_history_entries_read_ms(h);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_history_entries_read_ms(
    history: *const etcdlock_history_entries,
) -> i64 {
    history.as_ref().map_or(0, |h| h.read_ms)
}

/// Free a handle from etcdlock_history. NULL is a no-op.
///
/// Safety: history is NULL or a live handle not yet freed.
///
/// Example: etcdlock_history_entries_free(h);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_history_entries_free(history: *mut etcdlock_history_entries) {
    if !history.is_null() {
        ffi_void(|| drop(Box::from_raw(history)));
    }
}
