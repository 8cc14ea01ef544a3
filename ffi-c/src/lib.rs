//! The C ABI of etcdlock: `libetcdlock.so` / `libetcdlock.a` and `include/etcdlock.h`
//! (generated from this file by cbindgen; the `///` comments below are the header's
//! documentation).
//!
//! This layer only converts arguments, maps errors to status codes and manages
//! handles; every lock semantic lives in the core crate.
#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Arc;
use std::time::Duration;

use etcdlock_core::bridge::{self, Unit};
use etcdlock_core::runtime::current_pid;
use etcdlock_core::{
    CancellationToken, Client, ClientOptions, Error, ErrorCode, GuardState, LockOptions, LossReason, MAX_NAME_LEN,
};

// ---------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------

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
    assert!(ETCDLOCK_LOSS_LEASE_EXPIRED == LossReason::LeaseExpired as i32);
    assert!(ETCDLOCK_LOSS_KEY_DELETED == LossReason::KeyDeleted as i32);
    assert!(ETCDLOCK_LOSS_CONNECTION_LOST == LossReason::ConnectionLost as i32);
    assert!(ETCDLOCK_LOSS_CLIENT_CLOSED == LossReason::ClientClosed as i32);
    assert!(ETCDLOCK_MAX_NAME_LEN == MAX_NAME_LEN);
    assert!(ETCDLOCK_MAX_PERMITS == etcdlock_core::MAX_PERMITS);
    assert!(ETCDLOCK_MAX_MULTI == etcdlock_core::MAX_MULTI);
};

// ---------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------

/// Connection options. Always fill with etcdlock_options_init(&o, sizeof o) first,
/// then set the fields you need; the library reads only the first struct_size
/// bytes, so programs built against an older header keep working with a newer
/// library (fields they do not know take their defaults).
///
/// Strings are borrowed for the duration of etcdlock_client_connect only; NULL
/// means "not set". They must be NUL-terminated UTF-8. An empty string is "not
/// set" too, except endpoints, where it names no endpoint (refused).
///
/// A field left "not set" (NULL, ETCDLOCK_UNSET, or -1 for margin_ms and
/// watch_held_keys, as etcdlock_options_init leaves them) takes its ETCDLOCK_*
/// environment variable (ETCDLOCK_ENDPOINTS, ETCDLOCK_TTL, ETCDLOCK_TLS_CA,
/// ...) if set, else the default: the rule every etcdlock language follows. A
/// field you set wins over the environment, and a malformed variable for it is
/// ignored. The values are checked by the core, with the same messages as in
/// every etcdlock language (ETCDLOCK_INVALID_ARGUMENT at connect).
#[repr(C)]
pub struct etcdlock_options {
    /// sizeof(etcdlock_options) as seen by the caller; set by etcdlock_options_init.
    pub struct_size: u32,
    /// Set to 0 to disable watching each held key (an outside delete of the key
    /// is then noticed only by a guarded operation), 1 to watch. -1 = not set
    /// (ETCDLOCK_WATCH_HELD_KEYS, default 1).
    pub watch_held_keys: i32,
    /// Comma-separated etcd endpoints: "http://127.0.0.1:2379,127.0.0.1:22379".
    /// NULL = not set (ETCDLOCK_ENDPOINTS, default http://127.0.0.1:2379).
    pub endpoints: *const c_char,
    /// Lease TTL in seconds, 1 .. 9000000000; ETCDLOCK_UNSET = not set
    /// (ETCDLOCK_TTL, default 15). A lock is lost at most
    /// about this long after its holder stops (crash, pause, partition).
    pub ttl_secs: i64,
    /// Prefix prepended to every key this client touches (locks and guarded
    /// keys). Default none.
    pub namespace_prefix: *const c_char,
    /// etcd user name; requires password.
    pub username: *const c_char,
    /// etcd password; never copied into any message.
    pub password: *const c_char,
    /// PEM CA bundle for https endpoints. Setting any tls_* field enables TLS.
    pub tls_ca: *const c_char,
    /// PEM client certificate for mutual TLS (with tls_key).
    pub tls_cert: *const c_char,
    /// PEM client private key for mutual TLS (with tls_cert).
    pub tls_key: *const c_char,
    /// Server name to verify instead of the endpoint's host.
    pub tls_domain: *const c_char,
    /// Bound on reaching etcd in etcdlock_client_connect, milliseconds, > 0;
    /// ETCDLOCK_UNSET = not set (ETCDLOCK_CONNECT_TIMEOUT, default 5000).
    pub connect_timeout_ms: i64,
    /// Bound on every call that does not wait for a lock (try_lock, unlock,
    /// guarded operations, status), retries and failover included,
    /// milliseconds, > 0: ETCDLOCK_E_UNAVAILABLE after it. ETCDLOCK_UNSET =
    /// not set (ETCDLOCK_REQUEST_TIMEOUT, default 2000). Lock calls are
    /// bounded by their own timeout.
    pub request_timeout_ms: i64,
    /// Safety margin subtracted from the TTL for local loss detection,
    /// milliseconds, at most half the TTL; negative = not set (ETCDLOCK_MARGIN,
    /// default TTL/5, at most 2000).
    pub margin_ms: i64,
    /// Interval between lease keep-alives, milliseconds, > 0 (at least 50, at
    /// most half of TTL - margin); ETCDLOCK_UNSET = not set
    /// (ETCDLOCK_KEEPALIVE_INTERVAL, default TTL/3, at most (TTL - margin)/4).
    pub keepalive_interval_ms: i64,
}

/// What a client has done so far (etcdlock_client_metrics): the core's metrics,
/// the same figures as in every etcdlock language. Counters only grow;
/// waiting and held are "now". Durations in nanoseconds.
#[repr(C)]
pub struct etcdlock_metrics {
    /// sizeof(etcdlock_metrics) as the caller compiled it; set by etcdlock_client_metrics.
    pub struct_size: u32,
    /// Reserved, 0.
    pub reserved: u32,
    /// Acquisition calls by outcome, indexed by ETCDLOCK_RESULT_*.
    pub acquisitions: [u64; 5],
    /// The time those calls took, summed, indexed by ETCDLOCK_RESULT_*.
    pub wait_ns: [u64; 5],
    /// Acquisition calls in progress.
    pub waiting: i64,
    /// Locks held now.
    pub held: i64,
    /// How long the locks held now have been held, summed.
    pub held_ns: u64,
    /// Holds that ended (released or lost).
    pub holds_ended: u64,
    /// How long the ended holds lasted, summed.
    pub hold_ns: u64,
    /// Holds lost, indexed by ETCDLOCK_LOSS_* - 1 (lease expired, key deleted,
    /// connection lost, client closed).
    pub lost: [u64; 4],
    /// Keep-alive round trips acknowledged.
    pub keepalives: u64,
    /// The last keep-alive round trip, -1 before the first.
    pub keepalive_rtt_ns: i64,
}

/// A connection to etcd (one lease shared by all its locks). Thread-safe.
pub struct etcdlock_client {
    client: Client,
    pid: u32,
}

/// A held lock. Thread-safe; freeing it releases the lock if still held.
pub struct etcdlock_guard {
    guard: Arc<etcdlock_core::Guard>,
    key: CString,
    pid: u32,
}

/// Several locks held together (etcdlock_lock_many). Thread-safe; freeing it
/// releases every lock still held.
pub struct etcdlock_multi {
    multi: Arc<etcdlock_core::MultiGuard>,
    keys: Vec<CString>,
    pid: u32,
}

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
}

/// The holders and waiters of one name (etcdlock_status): contenders in
/// queue order, holders first. Free with etcdlock_queue_free.
pub struct etcdlock_queue {
    items: Vec<etcdlock_contender>,
    name: CString,
    kind: c_int,
    _strings: Vec<CString>,
    _values: Vec<Vec<u8>>,
}

/// Every lock under a prefix (etcdlock_list), sorted by name. Free with etcdlock_locks_free.
pub struct etcdlock_locks {
    queues: Vec<etcdlock_queue>,
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
    let mut q = etcdlock_queue { items: Vec::new(), name, kind, _strings: Vec::new(), _values: Vec::new() };
    let cstr = |s: Option<String>| s.map(|o| CString::new(o).unwrap_or_default());
    let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |o| o.as_ptr());
    for x in st.holders.into_iter().chain(st.waiters) {
        let key = CString::new(x.key).unwrap_or_default();
        let (owner, host, language) = (cstr(x.owner), cstr(x.host), cstr(x.language));
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
        });
        // The heap buffers do not move when their owners move into the vectors.
        q._strings.push(key);
        q._strings.extend(owner);
        q._strings.extend(host);
        q._strings.extend(language);
        q._values.push(x.value);
    }
    q
}

/// Leadership changes (etcdlock_observe): called with ETCDLOCK_OK for each
/// state, the current one first. key is NULL when nobody leads; otherwise key
/// (NUL-terminated), value (value_len bytes) and revision (the leader key's
/// create_revision, its fencing token) describe the leader and are valid only
/// during the call. Called once with another status (ETCDLOCK_CANCELLED after
/// etcdlock_cancel, ETCDLOCK_CLOSED, ...) as the last call.
pub type etcdlock_observe_cb = Option<
    unsafe extern "C" fn(
        status: c_int,
        key: *const c_char,
        value: *const u8,
        value_len: usize,
        revision: i64,
        user_data: *mut c_void,
    ),
>;

/// Cancels one etcdlock_lock_async wait or etcdlock_observe.
pub struct etcdlock_cancel_handle {
    token: CancellationToken,
}

/// Completion callback of etcdlock_lock_async. status is ETCDLOCK_OK and guard a
/// new guard owned by the callee (free it with etcdlock_guard_free, from any
/// thread), or status is an error code and guard is NULL; during the callback
/// etcdlock_last_error_message() returns the error's message.
pub type etcdlock_lock_cb =
    Option<unsafe extern "C" fn(status: c_int, guard: *mut etcdlock_guard, user_data: *mut c_void)>;

/// Loss callback of etcdlock_guard_on_loss: reason is one of ETCDLOCK_LOSS_*
/// (ETCDLOCK_LOSS_NONE when the guard was released normally).
pub type etcdlock_loss_cb = Option<unsafe extern "C" fn(reason: c_int, user_data: *mut c_void)>;

/// Renewal callback of etcdlock_guard_on_renewal: valid_for_ms >= 0 when the
/// keep-alive renewal starts failing (the ms the hold still has), -1 when it
/// is renewed again, ETCDLOCK_RENEWAL_ENDED (-2) once, last, when the hold
/// ended (released or lost): user_data may be freed after that call.
pub type etcdlock_renewal_cb = Option<unsafe extern "C" fn(valid_for_ms: i64, user_data: *mut c_void)>;

/// The last call of an etcdlock_renewal_cb: the hold ended.
pub const ETCDLOCK_RENEWAL_ENDED: i64 = -2;

// ---------------------------------------------------------------------------
// Error plumbing
// ---------------------------------------------------------------------------

/// The last failed call's error on this thread, as C reads it.
struct LastError {
    status: c_int,
    reason: c_int,
    message: CString,
}

thread_local! {
    static LAST_ERROR: RefCell<LastError> =
        RefCell::new(LastError { status: ETCDLOCK_OK, reason: ETCDLOCK_LOSS_NONE, message: CString::default() });
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorCode::InvalidArgument, msg)
}

/// The one way an error reaches C: its wire form (code, loss reason, message)
/// becomes the calling thread's last error, and its code the status returned.
fn fail(e: &Error) -> c_int {
    let w = bridge::WireError::from(e);
    let status = w.code as c_int;
    let reason = w.reason.map_or(ETCDLOCK_LOSS_NONE, |r| r as c_int);
    let message = CString::new(w.message.replace('\0', "\\0")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|l| *l.borrow_mut() = LastError { status, reason, message });
    status
}

/// Run one entry point: its error, or a panic as core's Internal error, goes
/// through [`fail`]; no panic unwinds into C.
fn ffi(f: impl FnOnce() -> Result<(), Error>) -> c_int {
    match bridge::catch(f) {
        Ok(()) => ETCDLOCK_OK,
        Err(e) => fail(&e),
    }
}

/// Like [`ffi`] for functions that return nothing (the *_free family).
fn ffi_void(f: impl FnOnce()) {
    let _ = bridge::catch(|| {
        f();
        Ok(())
    });
}

fn on_runtime_thread() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}

/// Run a blocking call on the shared runtime (`etcdlock::runtime::block_on`,
/// which polls the future on the calling thread). Refused with a C-specific
/// message on a runtime thread (inside a callback), where blocking would stall
/// the runtime.
fn block_on<F, T>(fut: F) -> Result<T, Error>
where
    F: std::future::Future<Output = Result<T, Error>>,
{
    if on_runtime_thread() {
        return Err(invalid(
            "a blocking etcdlock call was made on a runtime thread (inside a callback); \
             hand the work to another thread",
        ));
    }
    etcdlock_core::runtime::block_on(fut)
}

unsafe fn out_arg<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Error> {
    p.as_mut().ok_or_else(|| invalid(format!("{what} is NULL")))
}

unsafe fn str_arg(p: *const c_char, what: &str) -> Result<Option<String>, Error> {
    if p.is_null() {
        return Ok(None);
    }
    CStr::from_ptr(p)
        .to_str()
        .map(|s| Some(s.to_string()))
        .map_err(|_| invalid(format!("{what} is not valid UTF-8")))
}

unsafe fn name_arg(p: *const c_char) -> Result<String, Error> {
    let name = str_arg(p, "lock name")?.ok_or_else(|| invalid("lock name is NULL"))?;
    if name.is_empty() {
        return Err(invalid("lock name is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(invalid(format!("lock name is {} bytes; the limit is {MAX_NAME_LEN}", name.len())));
    }
    Ok(name)
}

fn timeout_arg(ms: i64) -> Result<Option<Duration>, Error> {
    if ms < 0 {
        Ok(None)
    } else if ms > ETCDLOCK_MAX_TIMEOUT_MS {
        Err(invalid(format!("timeout_ms {ms} is larger than {ETCDLOCK_MAX_TIMEOUT_MS}")))
    } else {
        Ok(Some(Duration::from_millis(ms as u64)))
    }
}

unsafe fn bytes_arg<'a>(p: *const u8, len: usize, what: &str, allow_empty: bool) -> Result<&'a [u8], Error> {
    if len > ETCDLOCK_MAX_BUFFER_LEN {
        return Err(invalid(format!("{what} is {len} bytes; the limit is {ETCDLOCK_MAX_BUFFER_LEN}")));
    }
    if len == 0 && !allow_empty {
        return Err(invalid(format!("{what} is empty")));
    }
    if p.is_null() {
        if len == 0 {
            return Ok(&[]);
        }
        return Err(invalid(format!("{what} is NULL")));
    }
    Ok(std::slice::from_raw_parts(p, len))
}

unsafe fn client_arg<'a>(c: *const etcdlock_client) -> Result<&'a etcdlock_client, Error> {
    let c = c.as_ref().ok_or_else(|| invalid("client is NULL"))?;
    if c.pid != current_pid() {
        return Err(Error::new(
            ErrorCode::Closed,
            "this client was created in the parent process before fork(); create a new client in the child",
        ));
    }
    Ok(c)
}

unsafe fn guard_arg<'a>(g: *const etcdlock_guard) -> Result<&'a etcdlock_guard, Error> {
    let g = g.as_ref().ok_or_else(|| invalid("guard is NULL"))?;
    if g.pid != current_pid() {
        return Err(Error::new(
            ErrorCode::Closed,
            "this guard was created in the parent process before fork(); it cannot be used in the child",
        ));
    }
    Ok(g)
}

fn new_guard(g: etcdlock_core::Guard) -> *mut etcdlock_guard {
    let key = CString::new(g.key().replace('\0', "\\0")).unwrap_or_default();
    Box::into_raw(Box::new(etcdlock_guard { guard: Arc::new(g), key, pid: current_pid() }))
}

// Handles are shared between C threads: the compiler checks that they may be.
const _: fn() = || {
    fn thread_safe<T: Send + Sync>() {}
    thread_safe::<etcdlock_client>();
    thread_safe::<etcdlock_guard>();
    thread_safe::<etcdlock_cancel_handle>();
};

/// A raw pointer handed back to C on a runtime thread.
struct UserData(*mut c_void);
// SAFETY: the pointer is only passed back to the caller's callback, which by the
// documented contract may run on another thread.
unsafe impl Send for UserData {}

// ---------------------------------------------------------------------------
// Version, errors
// ---------------------------------------------------------------------------

/// The library version as a static string, e.g. "0.1.0".
///
/// Safety: none required; callable from any thread at any time.
///
/// Example: printf("etcdlock %s\n", etcdlock_version());
#[no_mangle]
pub extern "C" fn etcdlock_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The library version as MAJOR*10000 + MINOR*100 + PATCH. Compare with the
/// header's ETCDLOCK_VERSION_NUMBER to detect a header/library mismatch.
///
/// Safety: none required; callable from any thread at any time.
///
/// Example: if (etcdlock_version_number() / 10000 != ETCDLOCK_VERSION_MAJOR) abort();
#[no_mangle]
pub extern "C" fn etcdlock_version_number() -> c_int {
    let mut parts = env!("CARGO_PKG_VERSION").split('.').map(|p| p.parse::<i32>().unwrap_or(0));
    let (a, b, c) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    a * 10000 + b * 100 + c
}

/// Optional: stops the library's background threads (the shared runtime's
/// workers), waiting at most 5 s for them, so a leak checker such as valgrind
/// reports none of them at exit. A program that just exits need not call it.
/// Free every client first: a client still open stops working (its lease
/// keep-alive ran on those threads). Any later etcdlock call starts the
/// runtime again.
///
/// Safety: do not call it from an etcdlock callback (it runs on a runtime
/// thread); that is refused with ETCDLOCK_INVALID_ARGUMENT.
///
/// Example: etcdlock_client_free(c); etcdlock_shutdown(); return 0;
#[no_mangle]
pub extern "C" fn etcdlock_shutdown() -> c_int {
    ffi(|| {
        if etcdlock_core::runtime::shutdown(std::time::Duration::from_secs(5)) {
            Ok(())
        } else {
            Err(invalid("etcdlock_shutdown was called from an etcdlock callback (a runtime thread)"))
        }
    })
}

/// The message of the last failed etcdlock call on the calling thread ("" if
/// none). Never NULL. The pointer stays valid until the next failing etcdlock
/// call on this thread; copy it to keep it. Inside an etcdlock_lock_async
/// callback it describes that callback's status. Messages name the lock and the
/// endpoints but never passwords, tokens or key material.
///
/// Safety: do not free or write through the returned pointer.
///
/// Example: if (rc) fprintf(stderr, "%s: %s\n", etcdlock_status_name(rc), etcdlock_last_error_message());
#[no_mangle]
pub extern "C" fn etcdlock_last_error_message() -> *const c_char {
    LAST_ERROR.try_with(|l| l.borrow().message.as_ptr()).unwrap_or(c"".as_ptr())
}

/// The status of the last failed etcdlock call on the calling thread
/// (ETCDLOCK_OK if none): the code etcdlock_last_error_message() goes with.
///
/// Safety: none required.
///
/// Example: if (etcdlock_last_error_status() == ETCDLOCK_UNAVAILABLE) retry_later();
#[no_mangle]
pub extern "C" fn etcdlock_last_error_status() -> c_int {
    LAST_ERROR.try_with(|l| l.borrow().status).unwrap_or(ETCDLOCK_OK)
}

/// Why the hold ended, for a last failed call on the calling thread that
/// returned ETCDLOCK_LOCK_LOST (an ETCDLOCK_LOSS_* reason); ETCDLOCK_LOSS_NONE
/// for any other status or when core did not say.
///
/// Safety: none required.
///
/// Example: if (rc == ETCDLOCK_LOCK_LOST) puts(etcdlock_loss_reason_name(etcdlock_last_error_loss_reason()));
#[no_mangle]
pub extern "C" fn etcdlock_last_error_loss_reason() -> c_int {
    LAST_ERROR.try_with(|l| l.borrow().reason).unwrap_or(ETCDLOCK_LOSS_NONE)
}

/// The name of a status code: "OK", "InvalidArgument", "Timeout", "WouldBlock",
/// "LockLost", "NotHeld", "Cancelled", "Unavailable", "AuthFailed",
/// "PermissionDenied", "Closed", "Internal"; "Unknown" for any other value.
/// These are the names every etcdlock binding uses. Static string, never NULL.
///
/// Safety: none required; any int is accepted.
///
/// Example: puts(etcdlock_status_name(ETCDLOCK_WOULD_BLOCK)); // WouldBlock
#[no_mangle]
pub extern "C" fn etcdlock_status_name(status: c_int) -> *const c_char {
    let s: &'static CStr = match ErrorCode::from_i32(status) {
        None if status == 0 => c"OK",
        None => c"Unknown",
        Some(ErrorCode::InvalidArgument) => c"InvalidArgument",
        Some(ErrorCode::Timeout) => c"Timeout",
        Some(ErrorCode::WouldBlock) => c"WouldBlock",
        Some(ErrorCode::LockLost) => c"LockLost",
        Some(ErrorCode::NotHeld) => c"NotHeld",
        Some(ErrorCode::Cancelled) => c"Cancelled",
        Some(ErrorCode::Unavailable) => c"Unavailable",
        Some(ErrorCode::AuthFailed) => c"AuthFailed",
        Some(ErrorCode::PermissionDenied) => c"PermissionDenied",
        Some(ErrorCode::Closed) => c"Closed",
        Some(ErrorCode::Internal) => c"Internal",
    };
    s.as_ptr()
}

/// The name of a loss reason: "Released" (ETCDLOCK_LOSS_NONE), "LeaseExpired",
/// "KeyDeleted", "ConnectionLost", "ClientClosed"; "Unknown" otherwise. Static, never NULL.
///
/// Safety: none required; any int is accepted.
///
/// Example: printf("lost: %s\n", etcdlock_loss_reason_name(reason));
#[no_mangle]
pub extern "C" fn etcdlock_loss_reason_name(reason: c_int) -> *const c_char {
    let s: &'static CStr = match LossReason::from_i32(reason) {
        None if reason == 0 => c"Released",
        None => c"Unknown",
        Some(LossReason::LeaseExpired) => c"LeaseExpired",
        Some(LossReason::KeyDeleted) => c"KeyDeleted",
        Some(LossReason::ConnectionLost) => c"ConnectionLost",
        Some(LossReason::ClientClosed) => c"ClientClosed",
    };
    s.as_ptr()
}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

fn default_options() -> etcdlock_options {
    etcdlock_options {
        struct_size: std::mem::size_of::<etcdlock_options>() as u32,
        watch_held_keys: -1,
        endpoints: std::ptr::null(),
        ttl_secs: ETCDLOCK_UNSET,
        namespace_prefix: std::ptr::null(),
        username: std::ptr::null(),
        password: std::ptr::null(),
        tls_ca: std::ptr::null(),
        tls_cert: std::ptr::null(),
        tls_key: std::ptr::null(),
        tls_domain: std::ptr::null(),
        connect_timeout_ms: ETCDLOCK_UNSET,
        request_timeout_ms: ETCDLOCK_UNSET,
        margin_ms: -1,
        keepalive_interval_ms: ETCDLOCK_UNSET,
    }
}

/// Size of the first published etcdlock_options (up to margin_ms); anything
/// smaller is not an etcdlock_options.
const OPTIONS_V1_SIZE: usize = std::mem::offset_of!(etcdlock_options, keepalive_interval_ms);

/// Fill *options with "not set" in every field (NULL strings, ETCDLOCK_UNSET
/// numbers, margin_ms and watch_held_keys -1) and set options->struct_size.
/// At connect, a field still not set takes its ETCDLOCK_* environment
/// variable or the default (TTL 15 s, 5 s timeouts, http://127.0.0.1:2379).
/// struct_size must be sizeof(etcdlock_options) as the caller compiled it; only
/// that many bytes are written.
///
/// Safety: options points to at least struct_size writable bytes.
/// Returns ETCDLOCK_INVALID_ARGUMENT for NULL or a struct_size no etcdlock
/// version ever had.
///
/// Example:
///     etcdlock_options o;
///     etcdlock_options_init(&o, sizeof o);
///     o.endpoints = "http://127.0.0.1:2379";
///     o.ttl_secs = 10;
#[no_mangle]
pub unsafe extern "C" fn etcdlock_options_init(options: *mut etcdlock_options, struct_size: usize) -> c_int {
    ffi(|| {
        if options.is_null() {
            return Err(invalid("options is NULL"));
        }
        if struct_size < OPTIONS_V1_SIZE {
            return Err(invalid(format!("struct_size {struct_size} is smaller than any etcdlock_options")));
        }
        let mut d = default_options();
        let n = struct_size.min(std::mem::size_of::<etcdlock_options>());
        d.struct_size = n as u32;
        std::ptr::copy_nonoverlapping((&d as *const etcdlock_options).cast::<u8>(), options.cast::<u8>(), n);
        Ok(())
    })
}

/// The caller's options, fields past its struct_size "not set" (a program
/// built against an older header does not know them).
unsafe fn read_options(o: *const etcdlock_options) -> Result<etcdlock_options, Error> {
    if o.is_null() {
        return Err(invalid("options is NULL"));
    }
    let size = std::ptr::read_unaligned(o.cast::<u32>()) as usize;
    if size < OPTIONS_V1_SIZE {
        return Err(invalid(format!(
            "options->struct_size is {size}; call etcdlock_options_init(&o, sizeof o) first"
        )));
    }
    if size > std::mem::size_of::<etcdlock_options>() {
        return Err(invalid(format!(
            "options->struct_size is {size}, from a newer etcdlock.h than this library ({}); link a newer libetcdlock",
            std::mem::size_of::<etcdlock_options>()
        )));
    }
    let mut d = default_options();
    std::ptr::copy_nonoverlapping(o.cast::<u8>(), (&mut d as *mut etcdlock_options).cast::<u8>(), size);
    Ok(d)
}

/// The options as core's option pairs, one line per field: its core key and
/// its value as text, or None when the field is not set. Core parses and
/// checks the values; this only converts C's types (and refuses text that is
/// not UTF-8).
unsafe fn option_pairs(o: &etcdlock_options) -> Result<Vec<(&'static str, String)>, Error> {
    let text = |p: *const c_char, what: &str| str_arg(p, what);
    let ms = |v: i64| (v != ETCDLOCK_UNSET).then(|| bridge::duration_value(v as f64, Unit::Millis));
    // For core an empty value is "not given"; an empty endpoints string is an
    // empty list, which core refuses.
    let list = |v: Option<String>| v.map(|v| if v.is_empty() { ",".to_string() } else { v });
    // 0 and 1 are C's booleans; any other number goes as is, for core to refuse.
    let flag = |v: i32| match v {
        -1 => None,
        0 => Some("false".to_string()),
        1 => Some("true".to_string()),
        v => Some(v.to_string()),
    };
    let fields: [(&'static str, Option<String>); 14] = [
        ("endpoints", list(text(o.endpoints, "options->endpoints")?)),
        ("ttl", (o.ttl_secs != ETCDLOCK_UNSET).then(|| o.ttl_secs.to_string())),
        ("namespace", text(o.namespace_prefix, "options->namespace_prefix")?),
        ("username", text(o.username, "options->username")?),
        ("password", text(o.password, "options->password")?),
        ("tls_ca", text(o.tls_ca, "options->tls_ca")?),
        ("tls_cert", text(o.tls_cert, "options->tls_cert")?),
        ("tls_key", text(o.tls_key, "options->tls_key")?),
        ("tls_domain", text(o.tls_domain, "options->tls_domain")?),
        ("connect_timeout", ms(o.connect_timeout_ms)),
        ("request_timeout", ms(o.request_timeout_ms)),
        ("margin", (o.margin_ms >= 0).then(|| bridge::duration_value(o.margin_ms as f64, Unit::Millis))),
        ("watch_held_keys", flag(o.watch_held_keys)),
        ("keepalive_interval", ms(o.keepalive_interval_ms)),
    ];
    Ok(fields.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect())
}

/// Client options from the caller's struct and the ETCDLOCK_* environment (core's one rule).
unsafe fn convert_options(o: *const etcdlock_options) -> Result<ClientOptions, Error> {
    let o = read_options(o)?;
    bridge::client_options(option_pairs(&o)?)
}

/// Connect to etcd and open the client's session (grant its lease). Blocks up
/// to options->connect_timeout_ms. On success *client is a new handle to free
/// with etcdlock_client_free; on failure *client is NULL.
///
/// Returns ETCDLOCK_INVALID_ARGUMENT (NULL, bad endpoint, TTL outside
/// 1..9000000000, bad TLS file, ...), ETCDLOCK_UNAVAILABLE (no endpoint
/// answered), ETCDLOCK_AUTH_FAILED.
///
/// Safety: options points to an etcdlock_options initialised with
/// etcdlock_options_init whose strings are valid for the duration of the call;
/// client is a writable etcdlock_client*.
///
/// Example:
///     etcdlock_client *c = NULL;
///     int rc = etcdlock_client_connect(&o, &c);
///     if (rc) fprintf(stderr, "connect: %s\n", etcdlock_last_error_message());
#[no_mangle]
pub unsafe extern "C" fn etcdlock_client_connect(
    options: *const etcdlock_options,
    client: *mut *mut etcdlock_client,
) -> c_int {
    ffi(|| {
        let out = out_arg(client, "client (out)")?;
        *out = std::ptr::null_mut();
        let opts = convert_options(options)?;
        etcdlock_core::set_language("c");
        let c = block_on(async move { Client::connect(opts).await })?;
        *out = Box::into_raw(Box::new(etcdlock_client { client: c, pid: current_pid() }));
        Ok(())
    })
}

/// The effective lease TTL in seconds (etcd raises TTLs below its minimum).
///
/// Safety: client is a live handle; ttl_secs is writable.
///
/// Example: int64_t ttl; etcdlock_client_ttl(c, &ttl);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_client_ttl(client: *const etcdlock_client, ttl_secs: *mut i64) -> c_int {
    ffi(|| {
        let out = out_arg(ttl_secs, "ttl_secs (out)")?;
        *out = client_arg(client)?.client.ttl();
        Ok(())
    })
}

/// Fill *metrics with what client has done so far (no etcd request; a few
/// atomic loads). struct_size must be sizeof(etcdlock_metrics) as the caller
/// compiled it; only that many bytes are written, so a program built against
/// an older header keeps working.
///
/// Safety: client is a live handle; metrics points to struct_size writable bytes.
///
/// Example:
///     etcdlock_metrics m;
///     etcdlock_client_metrics(c, &m, sizeof m);
///     printf("held %lld, lost to deletes %llu\n", (long long)m.held,
///            (unsigned long long)m.lost[ETCDLOCK_LOSS_KEY_DELETED - 1]);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_client_metrics(
    client: *const etcdlock_client,
    metrics: *mut etcdlock_metrics,
    struct_size: usize,
) -> c_int {
    ffi(|| {
        if metrics.is_null() {
            return Err(invalid("metrics is NULL"));
        }
        if struct_size < 8 {
            return Err(invalid(format!("struct_size {struct_size} is smaller than any etcdlock_metrics")));
        }
        let m = client_arg(client)?.client.metrics();
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let full = etcdlock_metrics {
            struct_size: std::mem::size_of::<etcdlock_metrics>().min(struct_size) as u32,
            reserved: 0,
            acquisitions: m.acquisitions.map(|a| a.count),
            wait_ns: m.acquisitions.map(|a| ns(a.wait_total)),
            waiting: m.waiting,
            held: m.held,
            held_ns: ns(m.held_duration),
            holds_ended: m.holds_ended,
            hold_ns: ns(m.hold_total),
            lost: m.lost.map(|(_, n)| n),
            keepalives: m.keepalives,
            keepalive_rtt_ns: m.keepalive_rtt.map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)).unwrap_or(-1),
        };
        let n = struct_size.min(std::mem::size_of::<etcdlock_metrics>());
        std::ptr::copy_nonoverlapping((&full as *const etcdlock_metrics).cast::<u8>(), metrics.cast::<u8>(), n);
        Ok(())
    })
}

/// Close and free a client: revokes its lease, which releases every lock it
/// holds at once; their guards report ETCDLOCK_LOSS_CLIENT_CLOSED and pending
/// etcdlock_lock_async waits complete with ETCDLOCK_CLOSED. Guards stay valid
/// objects and must still be freed. Blocks for at most one request timeout,
/// except on a runtime thread (inside a callback), where the close runs in the
/// background. NULL is a no-op. In a child created by fork() without exec, a
/// client inherited from the parent is not closed (the parent still owns the
/// lease and its connection) and its memory is deliberately left to the child
/// process; the same holds for inherited guards in etcdlock_guard_free.
///
/// Safety: client is NULL or a handle from etcdlock_client_connect not yet
/// freed, and no other thread uses it any more.
///
/// Example: etcdlock_client_free(c); c = NULL;
#[no_mangle]
pub unsafe extern "C" fn etcdlock_client_free(client: *mut etcdlock_client) {
    if client.is_null() {
        return;
    }
    ffi_void(|| {
        let c = Box::from_raw(client);
        if c.pid != current_pid() {
            // The parent's runtime threads do not exist in a forked child; touching
            // the connection could hang. The memory is left to the process.
            std::mem::forget(c);
            return;
        }
        let client = c.client.clone();
        drop(c);
        if on_runtime_thread() {
            let _ = etcdlock_core::runtime::spawn(async move { client.close().await });
        } else {
            let _ = block_on(async move {
                client.close().await;
                Ok(())
            });
        }
    })
}

// ---------------------------------------------------------------------------
// Locking
// ---------------------------------------------------------------------------

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
    ffi(|| {
        let out = out_arg(guard, "guard (out)")?;
        *out = std::ptr::null_mut();
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let timeout = timeout_arg(timeout_ms)?;
        let g = block_on(async move { c.lock_with(&name, LockOptions { timeout, cancel: None }).await })?;
        *out = new_guard(g);
        Ok(())
    })
}

/// Take the lock `name` if it is free right now. If someone holds it or waits
/// for it, returns ETCDLOCK_WOULD_BLOCK (a status, not an error to parse) and
/// leaves no key behind. Otherwise as etcdlock_lock.
///
/// Safety: as etcdlock_lock.
///
/// Example:
///     int rc = etcdlock_try_lock(c, "cron", &g);
///     if (rc == ETCDLOCK_WOULD_BLOCK) return 0; // another node runs it
#[no_mangle]
pub unsafe extern "C" fn etcdlock_try_lock(
    client: *const etcdlock_client,
    name: *const c_char,
    guard: *mut *mut etcdlock_guard,
) -> c_int {
    ffi(|| {
        let out = out_arg(guard, "guard (out)")?;
        *out = std::ptr::null_mut();
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let g = block_on(async move { c.try_lock(&name).await })?;
        *out = new_guard(g);
        Ok(())
    })
}

/// Start waiting for the lock `name` without blocking the caller.
///
/// If this returns ETCDLOCK_OK, `callback(status, guard, user_data)` is called
/// exactly once, on one of the library's runtime threads (never on the calling
/// thread, never concurrently with itself for this request): with ETCDLOCK_OK
/// and a new guard that the callback owns, or with ETCDLOCK_TIMEOUT,
/// ETCDLOCK_CANCELLED, ETCDLOCK_CLOSED, ... and guard NULL. If this returns an
/// error (NULL client/callback, bad name or timeout), the callback is never
/// called. The callback must not block for long; blocking etcdlock calls
/// (etcdlock_lock, etcdlock_unlock, guarded operations) made inside it return
/// ETCDLOCK_INVALID_ARGUMENT, so hand the guard to another thread for those.
///
/// If cancel is not NULL, *cancel receives a handle: etcdlock_cancel() makes a
/// wait still pending complete with ETCDLOCK_CANCELLED; free the handle with
/// etcdlock_cancel_free (freeing does not cancel).
///
/// Safety: client is a live handle; name is NUL-terminated; user_data must stay
/// valid until the callback has run; cancel is NULL or writable.
///
/// Example:
///     static void done(int st, etcdlock_guard *g, void *ud) {
///         if (st == ETCDLOCK_OK) hand_over(g, ud); else fprintf(stderr, "%s\n", etcdlock_last_error_message());
///     }
///     etcdlock_cancel_handle *h = NULL;
///     etcdlock_lock_async(c, "orders", ETCDLOCK_WAIT_FOREVER, done, ctx, &h);
///     ... etcdlock_cancel(h); etcdlock_cancel_free(h);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_lock_async(
    client: *const etcdlock_client,
    name: *const c_char,
    timeout_ms: i64,
    callback: etcdlock_lock_cb,
    user_data: *mut c_void,
    cancel: *mut *mut etcdlock_cancel_handle,
) -> c_int {
    ffi(|| {
        if let Some(out) = cancel.as_mut() {
            *out = std::ptr::null_mut();
        }
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let timeout = timeout_arg(timeout_ms)?;
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        let token = CancellationToken::new();
        let ud = UserData(user_data);
        let opts = LockOptions { timeout, cancel: Some(token.clone()) };
        let done = move |r: Result<etcdlock_core::Guard, Error>| {
            let ud = ud;
            let (status, g) = match r {
                Ok(g) => (ETCDLOCK_OK, new_guard(g)),
                Err(e) => (fail(&e), std::ptr::null_mut()),
            };
            cb(status, g, ud.0);
        };
        bridge::spawn_complete(async move { c.lock_with(&name, opts).await }, done)?;
        if let Some(out) = cancel.as_mut() {
            *out = Box::into_raw(Box::new(etcdlock_cancel_handle { token }));
        }
        Ok(())
    })
}

/// Cancel the etcdlock_lock_async wait behind this handle: if the callback has
/// not run yet, it runs (once) with ETCDLOCK_CANCELLED and the waiter's key is
/// removed from etcd. Idempotent; a no-op after the callback ran. Never blocks;
/// callable from any thread, including callbacks.
///
/// Safety: cancel is a live handle from etcdlock_lock_async.
///
/// Example: etcdlock_cancel(h);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_cancel(cancel: *const etcdlock_cancel_handle) -> c_int {
    ffi(|| {
        let h = cancel.as_ref().ok_or_else(|| invalid("cancel handle is NULL"))?;
        h.token.cancel();
        Ok(())
    })
}

/// Free a cancel handle. Does not cancel: the callback still runs exactly once.
/// NULL is a no-op.
///
/// Safety: cancel is NULL or a handle not yet freed.
///
/// Example: etcdlock_cancel_free(h);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_cancel_free(cancel: *mut etcdlock_cancel_handle) {
    if cancel.is_null() {
        return;
    }
    ffi_void(|| drop(Box::from_raw(cancel)));
}

// ---------------------------------------------------------------------------
// Guard
// ---------------------------------------------------------------------------

/// Our lock key in etcd (namespace + name + "/" + lease id in hex...). *key
/// points into the guard and stays valid until etcdlock_guard_free.
///
/// Safety: guard is a live handle; key is writable.
///
/// Example: const char *k; etcdlock_guard_key(g, &k); printf("%s\n", k);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_key(guard: *const etcdlock_guard, key: *mut *const c_char) -> c_int {
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
pub unsafe extern "C" fn etcdlock_guard_lease_id(guard: *const etcdlock_guard, lease_id: *mut i64) -> c_int {
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
pub unsafe extern "C" fn etcdlock_guard_fencing_token(guard: *const etcdlock_guard, token: *mut i64) -> c_int {
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
pub unsafe extern "C" fn etcdlock_guard_is_held(guard: *const etcdlock_guard, held: *mut c_int) -> c_int {
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
pub unsafe extern "C" fn etcdlock_guard_loss_reason(guard: *const etcdlock_guard, reason: *mut c_int) -> c_int {
    ffi(|| {
        let out = out_arg(reason, "reason (out)")?;
        *out = guard_arg(guard)?.guard.loss().map(|l| l.reason as c_int).unwrap_or(ETCDLOCK_LOSS_NONE);
        Ok(())
    })
}

/// Register a callback for the end of the hold. `callback(reason, user_data)`
/// runs exactly once, on a runtime thread, when the hold ends: with an
/// ETCDLOCK_LOSS_* reason if the lock was lost (lease expired, key deleted,
/// connection lost past the safety margin, client closed), or with
/// ETCDLOCK_LOSS_NONE when it was released by etcdlock_unlock /
/// etcdlock_guard_free. It never runs if the process exits while the lock is
/// still held. If the hold already ended, it runs at once (on a runtime
/// thread). Several callbacks may be registered; each runs once. Loss is
/// reported locally before etcd can grant the lock to anyone else (as long as
/// the process is running): stop touching the protected resource.
///
/// Safety: guard is a live handle; user_data must stay valid until the callback ran.
///
/// Example:
///     static void lost(int reason, void *flag) { if (reason) atomic_store((atomic_int *)flag, 1); }
///     etcdlock_guard_on_loss(g, lost, &stop_flag);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_on_loss(
    guard: *const etcdlock_guard,
    callback: etcdlock_loss_cb,
    user_data: *mut c_void,
) -> c_int {
    ffi(|| {
        // Core's owned loss signal: the watcher does not keep the guard alive
        // (freeing it still releases the lock, and the callback then gets NONE).
        let mut signal = guard_arg(guard)?.guard.lost_signal();
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        let ud = UserData(user_data);
        etcdlock_core::runtime::spawn(async move {
            let ud = ud;
            let reason = signal.wait().await.map(|l| l.reason as c_int).unwrap_or(ETCDLOCK_LOSS_NONE);
            cb(reason, ud.0);
        })?;
        Ok(())
    })
}

/// Whether the hold's keep-alive renewal is failing now: sets *valid_for_ms to
/// the milliseconds the hold still has (no keep-alive acknowledged for an
/// interval past when one was due), or to -1 when renewals are acknowledged
/// (or the hold ended). A failing hold is still held: pause work on the
/// protected resource, do not assume the lock is gone.
///
/// Safety: guard is a live handle; valid_for_ms is writable.
///
/// Example: int64_t left; etcdlock_guard_renewal(g, &left); if (left >= 0) pause_writes(left);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_renewal(guard: *const etcdlock_guard, valid_for_ms: *mut i64) -> c_int {
    ffi(|| {
        let out = out_arg(valid_for_ms, "valid_for_ms (out)")?;
        let g = &guard_arg(guard)?.guard;
        *out = match g.renewal() {
            etcdlock_core::Renewal::Failing { valid_until } if g.is_held() => {
                valid_until.saturating_duration_since(std::time::Instant::now()).as_millis() as i64
            }
            _ => -1,
        };
        Ok(())
    })
}

/// Register a callback for changes of the keep-alive renewal. `callback(ms,
/// user_data)` runs on a runtime thread, one call at a time, in order: with
/// the milliseconds the hold still has when renewal starts failing, -1 when it
/// is renewed again, and a last time with ETCDLOCK_RENEWAL_ENDED (-2) when the
/// hold ends (released or lost), after which it is never called again.
///
/// Safety: guard is a live handle; user_data must stay valid until the
/// ETCDLOCK_RENEWAL_ENDED call.
///
/// Example:
///     static void renewal(int64_t ms, void *flag) { atomic_store((atomic_int *)flag, ms >= 0); }
///     etcdlock_guard_on_renewal(g, renewal, &paused);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_guard_on_renewal(
    guard: *const etcdlock_guard,
    callback: etcdlock_renewal_cb,
    user_data: *mut c_void,
) -> c_int {
    ffi(|| {
        let g = &guard_arg(guard)?.guard;
        let mut changes = g.renewal_changes();
        let mut ended = g.lost_signal();
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        let ud = UserData(user_data);
        etcdlock_core::runtime::spawn(async move {
            let ud = ud;
            loop {
                tokio::select! {
                    _ = ended.wait() => break,
                    r = changes.changed() => {
                        if r.is_err() {
                            break;
                        }
                        let ms = match *changes.borrow_and_update() {
                            etcdlock_core::Renewal::Failing { valid_until } => {
                                valid_until.saturating_duration_since(std::time::Instant::now()).as_millis() as i64
                            }
                            etcdlock_core::Renewal::Ok => -1,
                        };
                        cb(ms, ud.0);
                    }
                }
            }
            cb(ETCDLOCK_RENEWAL_ENDED, ud.0);
        })?;
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
            std::mem::forget(h);
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
        if let Some(v) = block_on(async move { g.get(k).await })? {
            let buf = libc::malloc(v.len().max(1)).cast::<u8>();
            if buf.is_null() {
                return Err(Error::new(ErrorCode::Internal, "out of memory"));
            }
            std::ptr::copy_nonoverlapping(v.as_ptr(), buf, v.len());
            *out = buf;
            *out_len = v.len();
        }
        Ok(())
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

// ---------------------------------------------------------------------------
// Recipes: semaphore, read-write lock, multi-lock, election, queue view
// ---------------------------------------------------------------------------

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
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let timeout = timeout_arg(timeout_ms)?;
        let g = block_on(async move { c.acquire_permit(&name, permits, LockOptions { timeout, cancel: None }).await })?;
        *out = new_guard(g);
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
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let timeout = timeout_arg(timeout_ms)?;
        let g = block_on(async move { c.read_lock(&name, LockOptions { timeout, cancel: None }).await })?;
        *out = new_guard(g);
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
            return Err(invalid(format!("lock_many takes 1 to {ETCDLOCK_MAX_MULTI} names, got {count}")));
        }
        let names: Vec<String> = std::slice::from_raw_parts(names, count).iter().map(|&p| name_arg(p)).collect::<Result<_, _>>()?;
        let timeout = timeout_arg(timeout_ms)?;
        let m = block_on(async move {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            c.lock_many(&refs, LockOptions { timeout, cancel: None }).await
        })?;
        let keys = m.guards().iter().map(|g| CString::new(g.key()).unwrap_or_default()).collect();
        *out = Box::into_raw(Box::new(etcdlock_multi { multi: Arc::new(m), keys, pid: current_pid() }));
        Ok(())
    })
}

unsafe fn multi_arg<'a>(m: *const etcdlock_multi) -> Result<&'a etcdlock_multi, Error> {
    let m = m.as_ref().ok_or_else(|| invalid("multi is NULL"))?;
    if m.pid != current_pid() {
        return Err(Error::new(ErrorCode::Closed, "this multi-lock belongs to the parent process (fork)"));
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
pub unsafe extern "C" fn etcdlock_multi_key(multi: *const etcdlock_multi, index: usize, key: *mut *const c_char) -> c_int {
    ffi(|| {
        let out = out_arg(key, "key (out)")?;
        let m = multi_arg(multi)?;
        *out = m.keys.get(index).ok_or_else(|| invalid(format!("index {index} out of range (0..{})", m.keys.len())))?.as_ptr();
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
pub unsafe extern "C" fn etcdlock_multi_fencing_token(multi: *const etcdlock_multi, token: *mut i64) -> c_int {
    ffi(|| {
        let out = out_arg(token, "token (out)")?;
        *out = multi_arg(multi)?.multi.guards().first().map(|g| g.fencing_token()).unwrap_or(0);
        Ok(())
    })
}

/// *held = 1 while every lock is held, else 0.
///
/// Safety: multi is a live handle; held is writable.
///
/// Example: int held; etcdlock_multi_is_held(m, &held);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_multi_is_held(multi: *const etcdlock_multi, held: *mut c_int) -> c_int {
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
            std::mem::forget(h);
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
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let v = bytes_arg(value, value_len, "value", true)?.to_vec();
        let timeout = timeout_arg(timeout_ms)?;
        let l = block_on(async move { c.campaign(&name, v, LockOptions { timeout, cancel: None }).await })?;
        *out = new_guard(l.into_guard());
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
pub unsafe extern "C" fn etcdlock_proclaim(guard: *const etcdlock_guard, value: *const u8, value_len: usize) -> c_int {
    ffi(|| {
        let g = guard_arg(guard)?.guard.clone();
        let v = bytes_arg(value, value_len, "value", true)?.to_vec();
        block_on(async move { g.set_value(v).await })
    })
}

fn malloc_copy(b: &[u8], nul: bool) -> Result<*mut u8, Error> {
    let n = b.len() + nul as usize;
    let buf = unsafe { libc::malloc(n.max(1)) }.cast::<u8>();
    if buf.is_null() {
        return Err(Error::new(ErrorCode::Internal, "out of memory"));
    }
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr(), buf, b.len());
        if nul {
            *buf.add(b.len()) = 0;
        }
    }
    Ok(buf)
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
        let Some(l) = block_on(async move { c.leader(&name).await })? else { return Ok(()) };
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

/// Follow the election `name`: `callback` runs on a runtime thread with the
/// current state first, then each change (a new proclamation is a change;
/// "no leader" is reported as key NULL), until etcdlock_cancel on the handle
/// stored in *cancel (then a last call with ETCDLOCK_CANCELLED) or an error
/// (a last call with that status). Calls are never concurrent for one
/// observer; the callback must not block (see etcdlock_lock_async).
///
/// Safety: client is live; name NUL-terminated; user_data valid until the
/// last call; cancel is writable (required: it is the only way to stop).
///
/// Example:
///     static void on_leader(int st, const char *k, const uint8_t *v, size_t n, int64_t rev, void *ud) {
///         if (st == ETCDLOCK_OK) printf("leader: %s\n", k ? k : "(none)");
///     }
///     etcdlock_cancel_handle *h; etcdlock_observe(c, "scheduler", on_leader, NULL, &h);
///     ... etcdlock_cancel(h); etcdlock_cancel_free(h);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_observe(
    client: *const etcdlock_client,
    name: *const c_char,
    callback: etcdlock_observe_cb,
    user_data: *mut c_void,
    cancel: *mut *mut etcdlock_cancel_handle,
) -> c_int {
    ffi(|| {
        let out = out_arg(cancel, "cancel (out)")?;
        *out = std::ptr::null_mut();
        let c = client_arg(client)?.client.clone();
        let name = name_arg(name)?;
        let cb = callback.ok_or_else(|| invalid("callback is NULL"))?;
        let mut obs = c.observe(&name)?;
        let token = CancellationToken::new();
        let t = token.clone();
        let ud = UserData(user_data);
        etcdlock_core::runtime::spawn(async move {
            let ud = ud;
            loop {
                let next = tokio::select! {
                    biased;
                    _ = t.cancelled() => Err(Error::new(ErrorCode::Cancelled, "observe: cancelled")),
                    r = obs.next() => r,
                };
                // A panic ends the observer (no further call).
                let done = bridge::catch(|| {
                    Ok(match next {
                        Ok(Some(l)) => {
                            let key = CString::new(l.key).unwrap_or_default();
                            cb(ETCDLOCK_OK, key.as_ptr(), l.value.as_ptr(), l.value.len(), l.revision, ud.0);
                            false
                        }
                        Ok(None) => {
                            cb(ETCDLOCK_OK, std::ptr::null(), std::ptr::null(), 0, 0, ud.0);
                            false
                        }
                        Err(e) => {
                            cb(fail(&e), std::ptr::null(), std::ptr::null(), 0, 0, ud.0);
                            true
                        }
                    })
                })
                .unwrap_or(true);
                if done {
                    break;
                }
            }
        })?;
        *out = Box::into_raw(Box::new(etcdlock_cancel_handle { token }));
        Ok(())
    })
}

/// Read the queue of `name` for any kind of lock (mutex, semaphore,
/// read-write lock, election; etcdctl and Go keys too): *queue is a new handle
/// (free with etcdlock_queue_free) holding every contender in queue order,
/// holders first. This is what `etcdlock status` shows.
///
/// Safety: client is live; name is NUL-terminated; queue is writable.
///
/// Example:
///     etcdlock_queue *q = NULL;
///     etcdlock_status(c, "orders", &q);
///     for (size_t i = 0; i < etcdlock_queue_len(q); i++) {
///         const etcdlock_contender *x = etcdlock_queue_at(q, i);
///         printf("%s %s\n", x->holds ? "holds" : "waits", x->key);
///     }
///     etcdlock_queue_free(q);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_status(client: *const etcdlock_client, name: *const c_char, queue: *mut *mut etcdlock_queue) -> c_int {
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
///     etcdlock_locks *l = NULL;
///     etcdlock_list(c, "jobs/", &l);
///     for (size_t i = 0; i < etcdlock_locks_len(l); i++)
///         printf("%s: %zu\n", etcdlock_queue_name(etcdlock_locks_at(l, i)), etcdlock_queue_len(etcdlock_locks_at(l, i)));
///     etcdlock_locks_free(l);
#[no_mangle]
pub unsafe extern "C" fn etcdlock_list(client: *const etcdlock_client, prefix: *const c_char, list: *mut *mut etcdlock_locks) -> c_int {
    ffi(|| {
        let out = out_arg(list, "list (out)")?;
        *out = std::ptr::null_mut();
        let c = client_arg(client)?.client.clone();
        if prefix.is_null() {
            return Err(invalid("prefix is NULL"));
        }
        let prefix = CStr::from_ptr(prefix).to_str().map_err(|_| invalid("prefix is not UTF-8"))?.to_string();
        let l = block_on(async move { c.list(&prefix).await })?;
        *out = Box::into_raw(Box::new(etcdlock_locks { queues: l.into_iter().map(queue_of).collect() }));
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
pub unsafe extern "C" fn etcdlock_locks_at(list: *const etcdlock_locks, index: usize) -> *const etcdlock_queue {
    list.as_ref().and_then(|l| l.queues.get(index)).map_or(std::ptr::null(), |q| q as *const _)
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
pub unsafe extern "C" fn etcdlock_release(client: *const etcdlock_client, name: *const c_char, token: i64, released: *mut c_int) -> c_int {
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
pub unsafe extern "C" fn etcdlock_queue_at(queue: *const etcdlock_queue, index: usize) -> *const etcdlock_contender {
    queue.as_ref().and_then(|q| q.items.get(index)).map_or(std::ptr::null(), |x| x as *const _)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_mirror_the_core() {
        for code in ErrorCode::ALL {
            let n = unsafe { CStr::from_ptr(etcdlock_status_name(code as c_int)) };
            assert_eq!(n.to_str().unwrap(), code.name());
        }
        for r in 1..=4 {
            let reason = LossReason::from_i32(r).unwrap();
            let n = unsafe { CStr::from_ptr(etcdlock_loss_reason_name(r)) };
            assert_eq!(n.to_str().unwrap(), reason.name());
        }
    }

    #[test]
    fn version_matches_header_constants() {
        assert_eq!(etcdlock_version_number(), ETCDLOCK_VERSION_NUMBER);
    }
}
