//! The live feed of `etcdlock ui`: one watch of the prefix (core's
//! `bridge::list_changes`, as `etcdlock watch` uses it: the lock keys and the
//! meta records under the prefix, two watches on the client's one stream),
//! and one `Client::list` per coalesced burst of changes, fanned out to every
//! browser through one tokio broadcast.
//!
//! Each read becomes one message, JSON text shared by every subscriber:
//! - `{"type":"snapshot", ...,"locks":[Status...]}`: everything (what a new
//!   browser gets first, and a browser that fell behind);
//! - `{"type":"diff", ...,"changed":[Status...],"removed":[name...]}`: the
//!   names whose holders or waiters changed since the previous read (a
//!   record's `revision`, `age_ms` and `ttl_remaining` alone do not count);
//! - `{"type":"error","message":...}`: a read or the watch failed (the feed
//!   retries each second; the last good view stays).
//!
//! Every message carries `seq` (the read's number: a browser skips a diff
//! whose `seq` is not above its snapshot's), `revision` (the highest store
//! revision of the read's records, a decimal string as in core's records;
//! an empty read has none, and keeps the last one), `now_ms` (this server's wall clock when the
//! read returned: a contender's start is `now_ms - age_ms`), `read_ms` (how
//! long the read took) and the deadlock `cycles` found in that read.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use etcdlock::{Client, Status};
use serde_json::{json, Value};
use tokio::sync::broadcast;

/// Messages a browser may fall behind by before it is sent a fresh snapshot.
const BACKLOG: usize = 64;

/// Wait before retrying a failed read or a watch that could not open or ended.
const RETRY: Duration = Duration::from_secs(1);

/// The shared state of the feed.
pub struct Feed {
    prefix: String,
    tx: broadcast::Sender<Arc<str>>,
    /// The last full snapshot message.
    latest: RwLock<Arc<str>>,
    /// List reads done (successful or not).
    pub reads: AtomicU64,
    /// List reads that failed.
    pub read_errors: AtomicU64,
    /// How long the last read took, in microseconds.
    pub last_read_us: AtomicU64,
    /// Names under the prefix at the last read.
    pub locks: AtomicU64,
    /// Deadlock cycles at the last read.
    pub cycles: AtomicU64,
}

/// What the feed remembers of its last read.
#[derive(Default)]
struct Previous {
    seq: u64,
    revision: i64,
    shapes: BTreeMap<String, Status>,
}

/// The parts of a record that say who holds and who waits: without the
/// read's revision, the contenders' ages and their leases' TTLs, which change
/// with every read.
fn shape(st: &Status) -> Status {
    let mut s = st.clone();
    s.revision = 0;
    for c in s.holders.iter_mut().chain(s.waiters.iter_mut()) {
        c.age_ms = None;
        c.ttl_remaining = None;
    }
    s
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn records(list: &[&Status]) -> Value {
    // Core's one encoding of a Status (records/mod.rs), parsed back to embed it.
    serde_json::from_str(&etcdlock::records::to_json(list)).unwrap_or(Value::Null)
}

/// The deadlock cycles of one read of the prefix, as core finds them
/// (`etcdlock deadlocks` reads the same, without the leases' TTLs).
fn cycles(list: &[Status]) -> (usize, Value) {
    let c = etcdlock::records::find_cycles(list);
    let v = serde_json::from_str(&etcdlock::records::to_json(&c)).unwrap_or(Value::Null);
    (c.len(), v)
}

impl Feed {
    /// A feed of `prefix` (nothing read until [`Feed::run`]).
    pub fn new(prefix: &str) -> Arc<Feed> {
        let first = json!({"type": "snapshot", "prefix": prefix, "seq": 0, "revision": "0",
            "now_ms": now_ms(), "read_ms": 0, "locks": [], "cycles": [], "pending": true});
        Arc::new(Feed {
            prefix: prefix.to_string(),
            tx: broadcast::channel(BACKLOG).0,
            latest: RwLock::new(first.to_string().into()),
            reads: AtomicU64::new(0),
            read_errors: AtomicU64::new(0),
            last_read_us: AtomicU64::new(0),
            locks: AtomicU64::new(0),
            cycles: AtomicU64::new(0),
        })
    }

    /// A browser's subscription: the messages from now on, then the current
    /// snapshot (in that order, so no change falls between the two; a diff
    /// already in the snapshot is applied again, which changes nothing, and
    /// the browser skips any whose revision is not above the snapshot's).
    pub fn subscribe(&self) -> (broadcast::Receiver<Arc<str>>, Arc<str>) {
        let rx = self.tx.subscribe();
        (rx, self.snapshot())
    }

    /// The last full snapshot message.
    pub fn snapshot(&self) -> Arc<str> {
        match self.latest.read() {
            Ok(l) => l.clone(),
            Err(e) => e.into_inner().clone(),
        }
    }

    /// Browsers connected to the feed now.
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }

    fn error(&self, message: &str) {
        crate::observe::say("warn", message, json!({"prefix": self.prefix}));
        let _ = self.tx.send(
            json!({"type": "error", "message": message})
                .to_string()
                .into(),
        );
    }

    /// Watch the prefix and re-read it after each burst of changes (at most
    /// one read per `coalesce`), until the process ends.
    pub async fn run(self: Arc<Self>, client: Client, coalesce: Duration) {
        let mut prev = Previous::default();
        loop {
            let mut rx = match etcdlock::bridge::list_changes(&client, &self.prefix).await {
                Ok(rx) => rx,
                Err(e) => {
                    self.error(&format!("cannot watch the prefix: {e}"));
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            };
            loop {
                // Read after the watch is open, so no change falls between.
                let started = Instant::now();
                let ok = self.read(&client, &mut prev).await;
                let wait = if ok { Duration::MAX } else { RETRY };
                if let Ok(None) = tokio::time::timeout(wait, rx.recv()).await {
                    self.error("the watch of the prefix ended; opening it again");
                    break;
                }
                if let Some(rest) = coalesce.checked_sub(started.elapsed()) {
                    tokio::time::sleep(rest).await;
                }
                while rx.try_recv().is_ok() {}
            }
            tokio::time::sleep(RETRY).await;
        }
    }

    /// One read of the prefix: the new snapshot, and the diff sent to the
    /// browsers. False when the read failed.
    async fn read(&self, client: &Client, prev: &mut Previous) -> bool {
        let started = Instant::now();
        let r = client.list(&self.prefix).await;
        let took = started.elapsed();
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.last_read_us
            .store(took.as_micros() as u64, Ordering::Relaxed);
        let list = match r {
            Ok(l) => l,
            Err(e) => {
                self.read_errors.fetch_add(1, Ordering::Relaxed);
                self.error(&format!("cannot read the locks: {e}"));
                return false;
            }
        };
        prev.seq += 1;
        let seq = prev.seq;
        let revision = list
            .iter()
            .map(|s| s.revision)
            .max()
            .unwrap_or(prev.revision);
        prev.revision = revision;
        let now = now_ms();
        let read_ms = took.as_secs_f64() * 1000.0;
        let (n_cycles, cycles) = cycles(&list);
        let next: BTreeMap<String, Status> =
            list.iter().map(|s| (s.name.clone(), shape(s))).collect();
        let changed: Vec<&Status> = list
            .iter()
            .filter(|s| prev.shapes.get(&s.name) != next.get(&s.name))
            .collect();
        let removed: Vec<&String> = (prev.shapes.keys())
            .filter(|n| !next.contains_key(*n))
            .collect();
        let all: Vec<&Status> = list.iter().collect();
        let snapshot = json!({"type": "snapshot", "prefix": self.prefix, "seq": seq,
            "revision": revision.to_string(), "now_ms": now, "read_ms": read_ms,
            "locks": records(&all), "cycles": cycles});
        let diff = json!({"type": "diff", "seq": seq, "revision": revision.to_string(), "now_ms": now,
            "read_ms": read_ms, "changed": records(&changed), "removed": removed,
            "cycles": cycles});
        prev.shapes = next;
        self.locks.store(list.len() as u64, Ordering::Relaxed);
        self.cycles.store(n_cycles as u64, Ordering::Relaxed);
        if let Ok(mut l) = self.latest.write() {
            *l = snapshot.to_string().into();
        }
        let _ = self.tx.send(diff.to_string().into());
        true
    }
}
