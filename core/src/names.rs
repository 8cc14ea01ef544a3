//! Lock names and keys: what a name may be, how it is shown in messages, the
//! key ranges a lock owns, and what one acquisition asks for. Every
//! primitive (mutex, election, semaphore, read-write lock, multi-lock) and the
//! status reader share these; they depend on nothing but the error type.

use crate::poison::Locked;

use crate::error::{Error, LossReason, Result};

/// Longest accepted lock name, in bytes. A lock request carries the name about
/// five times (compare, put, ranges), so this stays far below etcd's default
/// 1.5 MiB request limit.
pub const MAX_NAME_LEN: usize = 32 * 1024;

/// Where meta records live, under the client's namespace (the records
/// `status` and `list` read); lock names under it are refused.
pub const META_PREFIX: &str = "__etcdlock/meta/";

/// Where run-once records live, under the client's namespace (see
/// [`crate::Client::once_take`]); lock names under it are refused.
pub const ONCE_PREFIX: &str = "__etcdlock/once/";

/// What separates a name from etcdlock's records kept beside it: the
/// lock-delay records of lock `N` live under `<ns>N\0etcdlock-delay/`, a
/// latch or barrier `N` under `<ns>N\0etcdlock-latch/` and
/// `<ns>N\0etcdlock-barrier/`. Beside the name, not under its prefix `N/`
/// (so etcdctl and Go's Mutex never see them as contenders), and inside any
/// key range an RBAC role grants for the name (a role that may lock
/// `/app/locks/` may keep these records too); a NUL byte cannot appear in a C
/// or Java name and `list` leaves these keys out.
pub const RECORD_MARK: &str = "\0etcdlock-";

pub(crate) fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("lock name is empty"));
    }
    if let Some(p) = [META_PREFIX, ONCE_PREFIX]
        .into_iter()
        .find(|p| name.starts_with(p))
    {
        return Err(Error::invalid(format!(
            "lock names under {p:?} are reserved for etcdlock's records"
        )));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::invalid(format!(
            "lock name is {} bytes; the limit is {MAX_NAME_LEN}",
            name.len()
        )));
    }
    Ok(())
}

/// The first component after `prefix` is the whole rest of the key: a direct
/// child of the lock, not a key of a nested name (`jobs/x/...` under `jobs/`).
pub(crate) fn is_direct_child(prefix: &[u8], key: &[u8]) -> bool {
    key.len() > prefix.len() && key.starts_with(prefix) && !key[prefix.len()..].contains(&b'/')
}

/// The lock name a key (without the namespace) is queued on: all before
/// its last `/`. `None` for etcdlock's own records (meta, lock-delay,
/// latches, barriers; also the meta records of a client whose namespace
/// lies inside this one's, `<inner ns>__etcdlock/meta/...`) and for a key
/// with no `/`.
pub(crate) fn lock_name(k: &[u8]) -> Option<&[u8]> {
    let has = |mark: &str| k.windows(mark.len()).any(|w| w == mark.as_bytes());
    if has(META_PREFIX) || has(RECORD_MARK) {
        return None;
    }
    let cut = k.iter().rposition(|b| *b == b'/')?;
    Some(&k[..cut])
}

/// The end of the key range that `prefix` starts (etcd's `GetPrefixRangeEnd`).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// A lock name as shown in messages: quoted, shortened if huge.
pub(crate) fn show(name: &str) -> String {
    if name.len() <= 64 {
        format!("{name:?}")
    } else {
        let mut end = 64;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        format!("{:?}...", &name[..end])
    }
}

/// `LockLost` for a waiter or holder whose key went for `reason`.
pub(crate) fn lost_err(name: &str, reason: LossReason, what: &str) -> Error {
    Error::lost(reason, format!("lock {}: {what} ({reason})", show(name)))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    /// Queue and wait (until the deadline, if any).
    Wait,
    /// `try_lock`: take it if free, else `WouldBlock`; writes nothing when held.
    Try,
    /// Timeout zero: one try, no wait; `Timeout` when held; writes nothing when held.
    Once,
}

/// The language a process uses etcdlock from, for its keys' values and meta records
/// (`"rust"` unless a binding says otherwise at load).
pub fn set_language(lang: &'static str) {
    *LANGUAGE.locked() = lang;
}

static LANGUAGE: std::sync::Mutex<&'static str> = std::sync::Mutex::new("rust");

pub(crate) fn language() -> &'static str {
    *LANGUAGE.locked()
}

/// This machine's host name, reduced to `[A-Za-z0-9.-]` (at most 64), so
/// it needs no escaping in JSON or a table.
pub(crate) fn hostname() -> String {
    let h = gethostname::gethostname().to_string_lossy().into_owned();
    h.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
        .take(64)
        .collect()
}

/// What etcdlock writes as the value of each of its keys (`owner_info`), read
/// back by `status`/`list` and by semaphores (each key's permit count). Keys
/// of Go's Mutex and etcdctl have an empty value: every field is then `None`.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct KeyInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The language the key's client uses etcdlock from (`"rust"`,
    /// `"python"`, ...): a plain hold has no meta record to say it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// Wall clock (ms since the epoch) when the key was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<u64>,
    /// A semaphore permit's count of permits; absent (one) elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permits: Option<u32>,
}

impl KeyInfo {
    /// A key's value as etcdlock wrote it; all `None` for any other value.
    pub(crate) fn of(value: &[u8]) -> KeyInfo {
        serde_json::from_slice(value).unwrap_or_default()
    }

    /// This process's value for a semaphore permit of `permits` permits.
    pub(crate) fn permit_value(permits: u32) -> String {
        let mut info = KeyInfo::of(owner_info().as_bytes());
        info.permits = Some(permits);
        serde_json::to_string(&info).unwrap_or_default()
    }
}

/// The value stored in our lock key: who we are and since when (wall clock, for
/// `etcdlock status`), as [`KeyInfo`]. Go's Mutex and etcdctl store an empty
/// value and ignore values, so this stays wire-compatible. Built by hand from
/// a per-process head because it is on every lock's path; the host is
/// [`hostname`]'s (letters, digits, `.` and `-` only), which needs no escaping.
pub(crate) fn owner_info() -> String {
    use std::sync::Mutex;
    // `{"host":"<host>","pid":<pid>,"language":"<lang>","since_ms":` for
    // the pid and language it was made for.
    static HEAD: Mutex<Option<(u32, &'static str, String)>> = Mutex::new(None);
    let pid = crate::runtime::current_pid();
    let lang = language();
    let since_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let mut head = HEAD.locked();
    let head = match head.as_ref() {
        Some((p, l, h)) if *p == pid && *l == lang => h,
        _ => {
            let host = hostname();
            &head
                .insert((
                    pid,
                    lang,
                    format!(
                        "{{\"host\":\"{host}\",\"pid\":{pid},\"language\":\"{lang}\",\"since_ms\":"
                    ),
                ))
                .2
        }
    };
    let mut out = String::with_capacity(head.len() + 16);
    out.push_str(head);
    let _ = std::fmt::Write::write_fmt(&mut out, format_args!("{since_ms}}}"));
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_keys_value_is_read_back_as_written_and_any_other_value_is_empty() {
        let mine = KeyInfo::of(owner_info().as_bytes());
        assert_eq!(mine.host.as_deref(), Some(hostname().as_str()));
        assert_eq!(mine.pid, Some(crate::runtime::current_pid()));
        assert!(mine.since_ms.is_some_and(|t| t > 0));
        assert_eq!(mine.permits, None);
        let permit = KeyInfo::of(KeyInfo::permit_value(3).as_bytes());
        assert_eq!((permit.permits, permit.pid), (Some(3), mine.pid));
        // Go's Mutex and etcdctl write an empty value; a user's value is anything.
        for foreign in [&b""[..], b"leader-1", b"{\"permits\":\"x\"}", b"[1,2]"] {
            let k = KeyInfo::of(foreign);
            assert!(
                k.host.is_none() && k.pid.is_none() && k.permits.is_none(),
                "{foreign:?}"
            );
        }
        // A field added later by another etcdlock version is skipped.
        assert_eq!(
            KeyInfo::of(br#"{"pid":7,"permits":2,"zone":"a"}"#).permits,
            Some(2)
        );
    }
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn only_direct_children_are_contenders() {
        assert!(is_direct_child(b"jobs/", b"jobs/694d7a3e"));
        assert!(is_direct_child(b"jobs/", b"jobs/694d7a3e_2"));
        assert!(!is_direct_child(b"jobs/", b"jobs/x/694d7a3e"));
        assert!(!is_direct_child(b"jobs/", b"jobs/"));
        assert!(!is_direct_child(b"jobs/", b"jobsx/1"));
    }

    #[test]
    fn prefix_end_is_etcds() {
        assert_eq!(prefix_end(b"a/"), b"a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
    }

    #[test]
    fn huge_names_are_shortened_on_a_char_boundary() {
        let name = "é".repeat(100);
        let s = show(&name);
        assert!(s.ends_with("...") && s.len() < 80, "{s}");
    }

    #[test]
    fn names_are_checked_before_any_request() {
        assert_eq!(
            validate_name("").unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
        assert_eq!(
            validate_name(&"n".repeat(MAX_NAME_LEN + 1))
                .unwrap_err()
                .code(),
            ErrorCode::InvalidArgument
        );
        assert!(validate_name(&"n".repeat(MAX_NAME_LEN)).is_ok());
        assert!(
            validate_name("jobs/x\n").is_ok(),
            "control characters are the caller's business, shown escaped"
        );
        assert_eq!(
            validate_name("__etcdlock/meta/x").unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
        assert_eq!(
            validate_name("__etcdlock/once/x").unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
        assert!(validate_name("__etcdlock").is_ok());
    }
}
