//! etcdlock_options: the C struct, its versioning by struct_size, and its
//! conversion to core's option pairs (core parses and checks them).

use std::ffi::{c_char, c_int};

use etcdlock_core::bridge::{self, Unit};
use etcdlock_core::{ClientOptions, Error, LockOptions};

use crate::*;

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
    /// most TTL - margin - min(5 s, half of TTL - margin)); ETCDLOCK_UNSET =
    /// not set (ETCDLOCK_KEEPALIVE_INTERVAL, default 75 % of the TTL or
    /// TTL - margin - 5 s, whichever is shorter, 8 s at TTL 15; at small TTLs
    /// TTL/3, at most (TTL - margin)/4, at least 250 ms).
    pub keepalive_interval_ms: i64,
    /// Set to 1 to connect on first use: etcdlock_client_connect then only
    /// checks the options and returns at once, so a program starts while
    /// etcd is briefly down, and each call reaches etcd within its own bound
    /// (a lock call its timeout_ms, others request_timeout_ms). 0 = connect
    /// now (ETCDLOCK_UNAVAILABLE within connect_timeout_ms when no member
    /// answers). -1 = not set (ETCDLOCK_LAZY_CONNECT, default 0).
    pub lazy_connect: i32,
}

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
        lazy_connect: -1,
    }
}

/// Size of the first published etcdlock_options (up to margin_ms); anything
/// smaller is not an etcdlock_options.
const OPTIONS_V1_SIZE: usize = std::mem::offset_of!(etcdlock_options, keepalive_interval_ms);

/// Fill `*options` with "not set" in every field (NULL strings, ETCDLOCK_UNSET
/// numbers, margin_ms, watch_held_keys and lazy_connect -1) and set options->struct_size.
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
///
///     etcdlock_options o;
///     etcdlock_options_init(&o, sizeof o);
///     o.endpoints = "http://127.0.0.1:2379";
///     o.ttl_secs = 10;
#[no_mangle]
pub unsafe extern "C" fn etcdlock_options_init(
    options: *mut etcdlock_options,
    struct_size: usize,
) -> c_int {
    ffi(|| {
        if options.is_null() {
            return Err(invalid("options is NULL"));
        }
        if struct_size < OPTIONS_V1_SIZE {
            return Err(invalid(format!(
                "struct_size {struct_size} is smaller than any etcdlock_options"
            )));
        }
        let mut d = default_options();
        let n = struct_size.min(std::mem::size_of::<etcdlock_options>());
        d.struct_size = n as u32;
        std::ptr::copy_nonoverlapping(
            (&d as *const etcdlock_options).cast::<u8>(),
            options.cast::<u8>(),
            n,
        );
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
    std::ptr::copy_nonoverlapping(
        o.cast::<u8>(),
        (&mut d as *mut etcdlock_options).cast::<u8>(),
        size,
    );
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
    let fields: [(&'static str, Option<String>); 15] = [
        ("endpoints", list(text(o.endpoints, "options->endpoints")?)),
        (
            "ttl",
            (o.ttl_secs != ETCDLOCK_UNSET).then(|| o.ttl_secs.to_string()),
        ),
        (
            "namespace",
            text(o.namespace_prefix, "options->namespace_prefix")?,
        ),
        ("username", text(o.username, "options->username")?),
        ("password", text(o.password, "options->password")?),
        ("tls_ca", text(o.tls_ca, "options->tls_ca")?),
        ("tls_cert", text(o.tls_cert, "options->tls_cert")?),
        ("tls_key", text(o.tls_key, "options->tls_key")?),
        ("tls_domain", text(o.tls_domain, "options->tls_domain")?),
        ("connect_timeout", ms(o.connect_timeout_ms)),
        ("request_timeout", ms(o.request_timeout_ms)),
        (
            "margin",
            (o.margin_ms >= 0).then(|| bridge::duration_value(o.margin_ms as f64, Unit::Millis)),
        ),
        ("watch_held_keys", flag(o.watch_held_keys)),
        ("keepalive_interval", ms(o.keepalive_interval_ms)),
        ("lazy_connect", flag(o.lazy_connect)),
    ];
    Ok(fields
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect())
}

/// Client options from the caller's struct and the ETCDLOCK_* environment (core's one rule).
pub(crate) unsafe fn convert_options(o: *const etcdlock_options) -> Result<ClientOptions, Error> {
    let o = read_options(o)?;
    bridge::client_options(option_pairs(&o)?)
}

/// Options of one acquisition (etcdlock_lock_ex, etcdlock_acquire_permit_ex,
/// etcdlock_read_lock_ex, etcdlock_campaign_ex). Always fill with
/// etcdlock_acquire_options_init(&o, sizeof o) first, then set the fields you
/// need; as with etcdlock_options, the library reads only the first
/// struct_size bytes, so fields added later take their defaults for programs
/// built against this header.
///
/// The values are checked by the core, with the same rule and messages as in
/// every etcdlock language: a bad one is ETCDLOCK_INVALID_ARGUMENT and nothing
/// is written to etcd. The metadata strings are borrowed for the duration of
/// the call only.
#[repr(C)]
pub struct etcdlock_acquire_options {
    /// sizeof(etcdlock_acquire_options) as seen by the caller; set by
    /// etcdlock_acquire_options_init.
    pub struct_size: u32,
    /// Reserved, 0.
    pub reserved: u32,
    /// Maximum wait in milliseconds, as the timeout_ms of etcdlock_lock:
    /// negative (ETCDLOCK_WAIT_FOREVER, the default) waits as long as it
    /// takes, 0 is one try (ETCDLOCK_TIMEOUT if taken, writing nothing), at
    /// most ETCDLOCK_MAX_TIMEOUT_MS.
    pub timeout_ms: i64,
    /// Chubby's lock-delay, milliseconds: if this hold ends because its lease
    /// ended (the process died or froze, its session expired or was revoked,
    /// it was cut off from etcd) rather than by etcdlock_unlock, the next
    /// holder is granted the lock no earlier than this long after etcd removed
    /// the key, so requests the vanished holder still had in flight drain
    /// first. A clean unlock, etcdlock_guard_free, etcdlock_client_free or an
    /// operator's etcdlock_release hands over at once. Rounded up to whole
    /// seconds; at most 24 hours. ETCDLOCK_UNSET (the default) = none; any
    /// other negative value is ETCDLOCK_INVALID_ARGUMENT. Not allowed on
    /// permits and read locks (ETCDLOCK_INVALID_ARGUMENT).
    pub lock_delay_ms: i64,
    /// Hold at most this many milliseconds: then the hold is released even if
    /// the holder never unlocks, and its loss reason is
    /// ETCDLOCK_LOSS_LEASE_EXPIRED. Positive, at most 24 hours. ETCDLOCK_UNSET
    /// (the default) = until unlocked; other negative values and 0 are
    /// ETCDLOCK_INVALID_ARGUMENT.
    pub lease_time_ms: i64,
    /// Who holds, as etcdlock_status shows it to everyone (the contender's
    /// metadata): a NULL-terminated array of NUL-terminated UTF-8 strings,
    /// key, value, key, value, ..., NULL; at most 1 KB in all. NULL (the
    /// default) = none.
    pub metadata: *const *const c_char,
    /// Set to 1 to fail the wait with ETCDLOCK_DEADLOCK if it would close a
    /// cycle of clients waiting on each other's holds (etcdlock_deadlocks
    /// shows them); the last error's message names the cycle. Checked when
    /// the call's key is queued and again each time the key it waits behind
    /// changes, with one read of the client's namespace each time; of a
    /// cycle's waits checked at once only the youngest fails, so one member
    /// backs off and the others are served. 0 (the default) = no check.
    /// Added after the first etcdlock_acquire_options: a program built
    /// against an older header leaves it at 0.
    pub detect_deadlock: c_int,
}

fn default_acquire_options() -> etcdlock_acquire_options {
    etcdlock_acquire_options {
        struct_size: std::mem::size_of::<etcdlock_acquire_options>() as u32,
        reserved: 0,
        timeout_ms: ETCDLOCK_WAIT_FOREVER,
        lock_delay_ms: ETCDLOCK_UNSET,
        lease_time_ms: ETCDLOCK_UNSET,
        metadata: std::ptr::null(),
        detect_deadlock: 0,
    }
}

/// Size of the first published etcdlock_acquire_options (up to metadata);
/// anything smaller is not an etcdlock_acquire_options.
const ACQUIRE_OPTIONS_V1_SIZE: usize =
    std::mem::offset_of!(etcdlock_acquire_options, detect_deadlock);

/// Fill `*options` with the defaults (wait forever, no lock-delay, no lease
/// time, no metadata, no deadlock check: timeout_ms ETCDLOCK_WAIT_FOREVER,
/// lock_delay_ms and lease_time_ms ETCDLOCK_UNSET, metadata NULL,
/// detect_deadlock 0) and set options->struct_size.
/// struct_size must be sizeof(etcdlock_acquire_options) as the caller
/// compiled it; only that many bytes are written.
///
/// Safety: options points to at least struct_size writable bytes.
/// Returns ETCDLOCK_INVALID_ARGUMENT for NULL or a struct_size no etcdlock
/// version ever had.
///
/// Example:
///
///     etcdlock_acquire_options ao;
///     etcdlock_acquire_options_init(&ao, sizeof ao);
///     ao.timeout_ms = 5000;
///     ao.lock_delay_ms = 3000;
#[no_mangle]
pub unsafe extern "C" fn etcdlock_acquire_options_init(
    options: *mut etcdlock_acquire_options,
    struct_size: usize,
) -> c_int {
    ffi(|| {
        if options.is_null() {
            return Err(invalid("options is NULL"));
        }
        if struct_size < ACQUIRE_OPTIONS_V1_SIZE {
            return Err(invalid(format!(
                "struct_size {struct_size} is smaller than any etcdlock_acquire_options"
            )));
        }
        let mut d = default_acquire_options();
        let n = struct_size.min(std::mem::size_of::<etcdlock_acquire_options>());
        d.struct_size = n as u32;
        std::ptr::copy_nonoverlapping(
            (&d as *const etcdlock_acquire_options).cast::<u8>(),
            options.cast::<u8>(),
            n,
        );
        Ok(())
    })
}

/// The caller's acquisition options (NULL: the defaults), fields past its
/// struct_size at their defaults.
unsafe fn read_acquire_options(
    o: *const etcdlock_acquire_options,
) -> Result<etcdlock_acquire_options, Error> {
    let mut d = default_acquire_options();
    if o.is_null() {
        return Ok(d);
    }
    let size = std::ptr::read_unaligned(o.cast::<u32>()) as usize;
    if size < ACQUIRE_OPTIONS_V1_SIZE {
        return Err(invalid(format!(
            "options->struct_size is {size}; call etcdlock_acquire_options_init(&o, sizeof o) first"
        )));
    }
    if size > std::mem::size_of::<etcdlock_acquire_options>() {
        return Err(invalid(format!(
            "options->struct_size is {size}, from a newer etcdlock.h than this library ({}); link a newer libetcdlock",
            std::mem::size_of::<etcdlock_acquire_options>()
        )));
    }
    std::ptr::copy_nonoverlapping(
        o.cast::<u8>(),
        (&mut d as *mut etcdlock_acquire_options).cast::<u8>(),
        size,
    );
    Ok(d)
}

/// The pairs of a NULL-terminated key, value, ... array (NULL: none).
unsafe fn metadata_pairs(mut p: *const *const c_char) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::new();
    if p.is_null() {
        return Ok(out);
    }
    while !(*p).is_null() {
        let key = str_arg(*p, "options->metadata key")?.unwrap_or_default();
        let value = str_arg(*p.add(1), "options->metadata value")?.ok_or_else(|| {
            invalid(format!(
                "options->metadata: the key {key:?} has no value before the terminating NULL"
            ))
        })?;
        out.push((key, value));
        p = p.add(2);
    }
    Ok(out)
}

/// Core's options of one acquisition from the caller's struct, built only by
/// `bridge::acquire_options` (core's one rule and messages). C's own rules
/// stay: a negative timeout waits forever, one above ETCDLOCK_MAX_TIMEOUT_MS
/// is refused; ETCDLOCK_UNSET spans are "not set".
pub(crate) unsafe fn convert_acquire_options(
    o: *const etcdlock_acquire_options,
) -> Result<LockOptions, Error> {
    let o = read_acquire_options(o)?;
    timeout_arg(o.timeout_ms)?;
    let timeout = (o.timeout_ms >= 0).then_some(o.timeout_ms as f64);
    let span = |v: i64| (v != ETCDLOCK_UNSET).then_some(v as f64);
    let extras = bridge::Extras {
        lock_delay: span(o.lock_delay_ms),
        lease_time: span(o.lease_time_ms),
        metadata: metadata_pairs(o.metadata)?,
        detect_deadlock: o.detect_deadlock != 0,
    };
    bridge::acquire_options(timeout, extras, Unit::Millis)
}
