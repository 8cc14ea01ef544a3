//! Who holds and waits for what, as everyone can read it: one meta record
//! per session and lock name, so `list` and `status` tell a lock's kind, the
//! holder's host, pid and language, and how many waiters a client queues
//! locally (a client keeps at most two keys per lock in etcd, whatever the
//! number of its waiters).
//!
//! The record lives beside the locks, never under a lock's prefix, so etcdctl,
//! Go's Mutex and Election see exactly the keys they always did:
//! `<namespace>__etcdlock/meta/<name>/<lease hex>`, attached to the session's
//! lease (it vanishes with the session). It is written off the lock path by a
//! task that wakes every [`TICK`] and writes only names that have been in use
//! for a whole tick: a short hold costs etcd nothing, a long one a put when it
//! starts to matter and a delete when it ends. A plain use (one mutex
//! acquisition or hold, no metadata) gets no record at all: its lock key's
//! value already names the host, pid, language and start, and `status` reads
//! a key without a record as a mutex with no other local waiter. Lock names
//! that start with `__etcdlock/` are reserved for it.

use crate::poison::Locked;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use crate::names::META_PREFIX;

/// How often the records are brought up to date.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// Most operations in one Txn (etcd's default `--max-txn-ops` is 128).
pub(crate) const TXN_OPS: usize = 128;

/// The kind of lock a name is used as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// `lock` / `try_lock` / `lock_many` (also a read-write lock's writer).
    Mutex,
    /// `campaign`.
    Election,
    /// `acquire_permit`.
    Semaphore,
    /// `read_lock` (the name is a read-write lock).
    RwLock,
}

impl LockKind {
    /// `"mutex"`, `"election"`, `"semaphore"` or `"rwlock"`.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::Election => "election",
            LockKind::Semaphore => "semaphore",
            LockKind::RwLock => "rwlock",
        }
    }

    /// The kind named `s`.
    pub fn from_name(s: &str) -> Option<LockKind> {
        [
            LockKind::Mutex,
            LockKind::Election,
            LockKind::Semaphore,
            LockKind::RwLock,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
}

use crate::names::language;
pub use crate::names::set_language;

struct Entry {
    kind: LockKind,
    waiting: u32,
    holding: u32,
    /// When the name came into use (monotonic, and wall clock for readers).
    since: Instant,
    since_ms: u64,
    /// The lease the record was last written under (0: not written).
    written: i64,
    /// What was written, to skip a put that changes nothing.
    written_counts: (u32, u32),
    /// The holder's metadata (`LockOptions::metadata` of the latest
    /// acquisition that gave some), as a JSON object.
    metadata: Option<String>,
    /// The metadata changed since the record was written.
    dirty: bool,
}

impl Entry {
    /// One mutex acquisition or hold, with no metadata: its lock key's
    /// value (host, pid, language, since) says everything its record would,
    /// and `status` reads a key with no record as kind `mutex` with no other
    /// local waiter. Such a name gets no record: a fleet taking and holding
    /// its locks costs etcd no write beyond the locks' own (`bench/fleet.sh`
    /// reports the writes a forming fleet costs, by method).
    fn plain(&self) -> bool {
        self.kind == LockKind::Mutex && self.metadata.is_none() && self.waiting + self.holding <= 1
    }
}

/// One client's names in use, and what etcd has of them.
#[derive(Default)]
pub(crate) struct Book {
    map: Mutex<HashMap<String, Entry>>,
    running: AtomicBool,
}

/// What a flush writes: records to put (name, JSON) and to delete (name).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Due {
    pub(crate) puts: Vec<(String, String)>,
    pub(crate) deletes: Vec<String>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Book {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.map.locked()
    }

    /// An acquisition of `name` as `kind` starts. True when the book was
    /// idle until now (the caller starts the flush task).
    pub(crate) fn wait_started(
        &self,
        name: &str,
        kind: LockKind,
        metadata: &[(String, String)],
    ) -> bool {
        let mut m = self.map();
        let md = (!metadata.is_empty()).then(|| metadata_json(metadata));
        match m.get_mut(name) {
            Some(e) => {
                e.waiting += 1;
                e.kind = kind;
                if md.is_some() && md != e.metadata {
                    e.metadata = md;
                    e.dirty = true;
                }
            }
            None => {
                m.insert(
                    name.to_string(),
                    Entry {
                        kind,
                        waiting: 1,
                        holding: 0,
                        since: Instant::now(),
                        since_ms: now_ms(),
                        written: 0,
                        written_counts: (0, 0),
                        metadata: md,
                        dirty: false,
                    },
                );
            }
        }
        // Under the map's lock, as `is_idle` clears it: a use never meets a
        // task that is about to stop without seeing it.
        let start = !self.running.swap(true, Ordering::AcqRel);
        drop(m);
        start
    }

    /// An acquisition of `name` ended (a guard made by it counted its hold).
    pub(crate) fn wait_ended(&self, name: &str) {
        let mut m = self.map();
        if let Some(e) = m.get_mut(name) {
            e.waiting = e.waiting.saturating_sub(1);
            forget_if_unused(&mut m, name);
        }
    }

    /// A hold of `name` starts.
    pub(crate) fn hold_started(&self, name: &str) {
        let mut m = self.map();
        match m.get_mut(name) {
            Some(e) => e.holding += 1,
            None => {
                m.insert(
                    name.to_string(),
                    Entry {
                        kind: LockKind::Mutex,
                        waiting: 0,
                        holding: 1,
                        since: Instant::now(),
                        since_ms: now_ms(),
                        written: 0,
                        written_counts: (0, 0),
                        metadata: None,
                        dirty: false,
                    },
                );
            }
        }
    }

    /// A hold of `name` ended.
    pub(crate) fn hold_ended(&self, name: &str) {
        let mut m = self.map();
        if let Some(e) = m.get_mut(name) {
            e.holding = e.holding.saturating_sub(1);
            forget_if_unused(&mut m, name);
        }
    }

    /// What to write now under `lease` (0: no session, nothing to write):
    /// names in use for a whole [`TICK`] whose record is missing, stale or
    /// under another lease; deletes for written names no longer in use.
    /// Names that came and went within a tick are forgotten unwritten.
    pub(crate) fn due(&self, lease: i64, now: Instant, host: &str, pid: u32) -> Due {
        let mut due = Due::default();
        let mut m = self.map();
        m.retain(|name, e| {
            let in_use = e.waiting + e.holding > 0;
            if !in_use {
                if e.written != 0 && e.written == lease {
                    due.deletes.push(name.clone());
                }
                return false;
            }
            let ripe = now.saturating_duration_since(e.since) >= TICK;
            // A plain hold's key says all its record would (see `plain`):
            // no record is started for it. One written already is kept up
            // to date until the name is no longer in use.
            let needed = e.written == lease || !e.plain();
            if lease != 0
                && ripe
                && needed
                && (e.written != lease || e.written_counts != (e.waiting, e.holding) || e.dirty)
            {
                due.puts.push((name.clone(), record(e, host, pid)));
                e.written = lease;
                e.written_counts = (e.waiting, e.holding);
                e.dirty = false;
            }
            true
        });
        due
    }

    /// The puts of `names` did not reach etcd: write them again next tick.
    pub(crate) fn unwritten(&self, names: &[String]) {
        let mut m = self.map();
        for n in names {
            if let Some(e) = m.get_mut(n) {
                e.written = 0;
            }
        }
    }

    /// Whether no name is in use (the flush task then stops).
    pub(crate) fn is_idle(&self) -> bool {
        let m = self.map();
        let idle = m.is_empty();
        if idle {
            self.running.store(false, Ordering::Release);
        }
        drop(m);
        idle
    }
}

/// A name no longer in use and never written is forgotten at once, so its
/// next use starts a new tick (a try that fails leaves no trace). A written
/// one stays until the flush deletes its record.
fn forget_if_unused(m: &mut HashMap<String, Entry>, name: &str) {
    if m.get(name)
        .is_some_and(|e| e.waiting + e.holding == 0 && e.written == 0)
    {
        m.remove(name);
    }
}

/// Metadata pairs as a JSON object (later keys win).
fn metadata_json(md: &[(String, String)]) -> String {
    let map: serde_json::Map<String, serde_json::Value> = md
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    serde_json::Value::Object(map).to_string()
}

fn record(e: &Entry, host: &str, pid: u32) -> String {
    let mut r = record_head(e, host, pid);
    if let Some(md) = &e.metadata {
        r.pop();
        r.push_str(",\"metadata\":");
        r.push_str(md);
        r.push('}');
    }
    r
}

fn record_head(e: &Entry, host: &str, pid: u32) -> String {
    serde_json_lite(&[
        ("kind", Json::Str(e.kind.name())),
        ("host", Json::Str(host)),
        ("pid", Json::Num(pid as u64)),
        ("language", Json::Str(language())),
        ("since_ms", Json::Num(e.since_ms)),
        ("waiting", Json::Num(e.waiting as u64)),
        ("holding", Json::Num(e.holding as u64)),
    ])
}

enum Json<'a> {
    Str(&'a str),
    Num(u64),
}

/// A flat JSON object (core has no JSON dependency; keys and values here
/// are known, strings are escaped).
fn serde_json_lite(fields: &[(&str, Json<'_>)]) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("\"{k}\":"));
        match v {
            Json::Num(n) => out.push_str(&n.to_string()),
            Json::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
        }
    }
    out.push('}');
    out
}

/// The meta key of `name` under `lease`, with the client's namespace `ns`.
pub(crate) fn key(ns: &[u8], name: &str, lease: i64) -> Vec<u8> {
    let mut k = ns.to_vec();
    k.extend_from_slice(META_PREFIX.as_bytes());
    k.extend_from_slice(name.as_bytes());
    k.extend_from_slice(format!("/{lease:x}").as_bytes());
    k
}

/// The (name, lease) of a meta key with the namespace already removed.
pub(crate) fn parse_key(k: &[u8]) -> Option<(String, i64)> {
    let rest = k.strip_prefix(META_PREFIX.as_bytes())?;
    let cut = rest.iter().rposition(|b| *b == b'/')?;
    let lease = i64::from_str_radix(std::str::from_utf8(&rest[cut + 1..]).ok()?, 16).ok()?;
    Some((String::from_utf8_lossy(&rest[..cut]).into_owned(), lease))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_uses_are_never_written_and_long_ones_once() {
        let b = Book::default();
        assert!(
            b.wait_started("a", LockKind::Mutex, &[]),
            "the first use starts the flush task"
        );
        assert!(!b.wait_started("b", LockKind::Election, &[]));
        let t0 = Instant::now();
        b.hold_started("a");
        b.wait_ended("a");
        b.hold_ended("a");
        // "a" came and went within the tick: forgotten unwritten.
        let d = b.due(7, t0 + TICK, "h", 1);
        assert_eq!(d.deletes, Vec::<String>::new());
        assert_eq!(d.puts.len(), 1, "{d:?}");
        assert_eq!(d.puts[0].0, "b");
        assert!(
            d.puts[0].1.contains("\"kind\":\"election\"") && d.puts[0].1.contains("\"waiting\":1"),
            "{}",
            d.puts[0].1
        );
        // Unchanged: nothing to write.
        assert_eq!(b.due(7, t0 + TICK * 2, "h", 1), Due::default());
        // A second waiter changes the record; a new session rewrites it.
        b.wait_started("b", LockKind::Election, &[]);
        assert_eq!(b.due(7, t0 + TICK * 3, "h", 1).puts.len(), 1);
        assert_eq!(b.due(8, t0 + TICK * 4, "h", 1).puts.len(), 1);
        // Done with it: one delete, then nothing.
        b.wait_ended("b");
        b.wait_ended("b");
        assert_eq!(
            b.due(8, t0 + TICK * 5, "h", 1).deletes,
            vec!["b".to_string()]
        );
        assert!(b.is_idle());
        assert!(
            b.wait_started("c", LockKind::Mutex, &[]),
            "idle again: the next use restarts the task"
        );
    }

    #[test]
    fn a_put_that_failed_is_due_again() {
        let b = Book::default();
        b.wait_started("a", LockKind::Semaphore, &[]);
        let t0 = Instant::now();
        assert_eq!(b.due(7, t0 + TICK, "h", 1).puts.len(), 1);
        assert_eq!(b.due(7, t0 + TICK * 2, "h", 1), Due::default());
        b.unwritten(&["a".to_string()]);
        assert_eq!(
            b.due(7, t0 + TICK * 3, "h", 1).puts.len(),
            1,
            "written again after a failure"
        );
    }

    #[test]
    fn one_mutex_acquisition_or_hold_gets_no_record_and_more_get_one() {
        let b = Book::default();
        let t0 = Instant::now();
        // One acquisition, then its hold: the lock key says it all.
        b.wait_started("a", LockKind::Mutex, &[]);
        assert_eq!(b.due(7, t0 + TICK, "h", 1), Due::default());
        b.hold_started("a");
        b.wait_ended("a");
        assert_eq!(b.due(7, t0 + TICK * 2, "h", 1), Due::default());
        // A second local acquisition of the held name: the record counts it.
        b.wait_started("a", LockKind::Mutex, &[]);
        let d = b.due(7, t0 + TICK * 3, "h", 1);
        assert_eq!(d.puts.len(), 1, "{d:?}");
        assert!(d.puts[0].1.contains("\"waiting\":1"), "{}", d.puts[0].1);
        // Back to one hold: the written record is kept up to date, then
        // deleted when the name is no longer in use.
        b.wait_ended("a");
        assert_eq!(b.due(7, t0 + TICK * 4, "h", 1).puts.len(), 1);
        b.hold_ended("a");
        assert_eq!(
            b.due(7, t0 + TICK * 5, "h", 1).deletes,
            vec!["a".to_string()]
        );
        // Metadata, or another kind, is not on the key: recorded.
        b.wait_started("m", LockKind::Mutex, &[("job".into(), "nightly".into())]);
        b.wait_started("s", LockKind::Semaphore, &[]);
        let mut names: Vec<String> = b
            .due(7, Instant::now() + TICK, "h", 1)
            .puts
            .into_iter()
            .map(|p| p.0)
            .collect();
        names.sort();
        assert_eq!(names, ["m", "s"]);
    }

    #[test]
    fn without_a_session_nothing_is_written() {
        let b = Book::default();
        b.wait_started("a", LockKind::Semaphore, &[]);
        assert_eq!(b.due(0, Instant::now() + TICK, "h", 1), Due::default());
    }

    #[test]
    fn keys_round_trip_and_never_fall_under_a_lock_prefix() {
        let k = key(b"ns/", "jobs/nightly\n", 0x694d);
        assert_eq!(k, b"ns/__etcdlock/meta/jobs/nightly\n/694d".to_vec());
        assert_eq!(
            parse_key(&k[3..]),
            Some(("jobs/nightly\n".to_string(), 0x694d))
        );
        assert_eq!(parse_key(b"jobs/694d"), None);
    }

    #[test]
    fn records_are_json_with_escaped_strings() {
        let e = Entry {
            kind: LockKind::RwLock,
            waiting: 2,
            holding: 1,
            since: Instant::now(),
            since_ms: 5,
            written: 0,
            written_counts: (0, 0),
            metadata: Some(metadata_json(&[("app".into(), "billing \"eu\"".into())])),
            dirty: false,
        };
        let r = record(&e, "h\"x", 9);
        let v: serde_json::Value = serde_json::from_str(&r).unwrap();
        assert_eq!(v["metadata"]["app"], "billing \"eu\"", "{r}");
        assert!(
            r.starts_with("{\"kind\":\"rwlock\",\"host\":\"h\\\"x\",\"pid\":9,"),
            "{r}"
        );
    }
}
