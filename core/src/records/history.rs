//! A lock's history from etcd's MVCC history: [`crate::Client::history`]
//! (and `etcdlock history`). A marker key put beside the name gives the
//! revision the history ends at; one watch of the name's prefix from the
//! oldest revision etcd keeps replays every put and delete up to it; the replay
//! applies the holding rule (`waitgraph::holds`) after each revision, so
//! each key's grant is the revision at which it came to hold.
//!
//! What etcd's history does not say, and how this answers it:
//! - Times: etcd keeps revisions, not times. Every etcdlock key carries the
//!   wall-clock time it was written (`since_ms`); a revision's time is
//!   interpolated between the nearest such stamps (and the read's own
//!   time). A grant or end between two queued keys is placed by revision.
//! - How a hold ended: a delete of the key looks the same in etcd whether
//!   its holder released it, an operator released it, or its lease ended.
//!   An end whose lease lived on (a later key of the same lease, or the
//!   lease still alive now) is `released`; else `lease_ended` (the lease
//!   expired or was revoked, e.g. by a close, at or after the delete).
//! - Reading costs etcd a put and a delete of a marker key beside the name
//!   (`N\0etcdlock-history`) and one watch of the name's range from the
//!   oldest revision etcd keeps (a role that may lock the name may write
//!   the marker: it lies in the name's range, as the lock-delay records do).
//! - Waits inside a client beyond its queued keys are not keys; the owner
//!   records count them (`Status::local_waiters` now; not in history).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etcd_client::{EventType, WatchOptions};

use crate::client::Client;
use crate::error::Result;
use crate::names::{is_direct_child, prefix_end, validate_name, KeyInfo, RECORD_MARK};
use crate::records::status::ContenderKind;
use crate::waitgraph::{holds, Slot};

/// Most leases whose liveness one history asks etcd about.
const LEASE_PROBES: usize = 256;

/// One key queued on a name: a wait, and the hold it became.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HistoryEntry {
    /// The key (with the namespace).
    pub key: String,
    /// What kind of contender (encoded as `kind` and `permits`).
    #[serde(flatten)]
    pub kind: ContenderKind,
    /// Its lease: the client.
    #[serde(serialize_with = "crate::records::decimal")]
    pub lease_id: i64,
    /// Its create_revision: its fencing token if it held.
    #[serde(serialize_with = "crate::records::decimal")]
    pub fencing_token: i64,
    /// `host:pid`, for etcdlock keys.
    pub owner: Option<String>,
    /// The client's host, for etcdlock keys.
    pub host: Option<String>,
    /// The client's process id, for etcdlock keys.
    pub pid: Option<u32>,
    /// The language of the client, for etcdlock keys.
    pub language: Option<String>,
    /// When the key was queued (wall clock, ms since the epoch).
    pub queued_ms: u64,
    /// The revision at which it came to hold.
    #[serde(serialize_with = "crate::records::opt_decimal")]
    pub granted_revision: Option<i64>,
    /// When it came to hold (estimated).
    pub granted_ms: Option<u64>,
    /// The revision of its delete.
    #[serde(serialize_with = "crate::records::opt_decimal")]
    pub ended_revision: Option<i64>,
    /// When it was deleted (estimated).
    pub ended_ms: Option<u64>,
    /// `"holding"`, `"waiting"` (still there), `"released"` (deleted while
    /// its lease lived on), `"lease_ended"` (gone with its lease), or
    /// `"abandoned"` (deleted before it held: a timeout, cancel or try).
    pub ended: &'static str,
    /// How long it waited (to its grant, its end, or now).
    pub wait_ms: u64,
    /// How long it held (to its end, or now), if it held.
    pub hold_ms: Option<u64>,
}

/// The history of one name.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct History {
    /// The name.
    pub name: String,
    /// The store revision of the read (the history ends there).
    #[serde(serialize_with = "crate::records::decimal")]
    pub revision: i64,
    /// The first revision replayed: etcd's compaction revision (or 1).
    #[serde(serialize_with = "crate::records::decimal")]
    pub from_revision: i64,
    /// When the read was made (wall clock, ms since the epoch).
    pub read_ms: u64,
    /// Every key queued since then, oldest first.
    pub entries: Vec<HistoryEntry>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A put or delete of a direct child of the name, in revision order.
struct Ev {
    rev: i64,
    put: bool,
    key: Vec<u8>,
    value: Vec<u8>,
    lease: i64,
    create: i64,
}

/// Every event of the keys under `prefix` (the name's, `N/`) from the
/// oldest revision etcd keeps up to `upto`: (the first revision replayed,
/// the events). The watch covers `N\0` to the end of `N/`, which holds a
/// marker key `N\0etcdlock-history` that the caller put at `upto` + 1: its
/// event says the replay is complete (etcd sends a watcher's events in
/// revision order, and nothing else says when an old revision's replay has
/// caught up). Keys of other names in that range (`N-2/...`) are skipped.
async fn replay(client: &Client, prefix: &[u8], upto: i64) -> Result<(i64, Vec<Ev>)> {
    let end = prefix_end(prefix);
    let mut start = prefix[..prefix.len() - 1].to_vec();
    start.push(0);
    client
        .call_watch(None, |mut c| {
            let (start, end) = (start.clone(), end.clone());
            async move {
                let mut from = 1;
                loop {
                    let o = WatchOptions::new()
                        .with_range(end.clone())
                        .with_start_revision(from);
                    let mut s = c.watch(start.clone(), Some(o)).await?;
                    let mut evs = Vec::new();
                    let compacted = loop {
                        let Some(m) = s.message().await? else {
                            return Err(etcd_client::Error::WatchError("watch ended".into()));
                        };
                        if m.compact_revision() > 0 {
                            break m.compact_revision();
                        }
                        for e in m.events() {
                            let Some(kv) = e.kv() else { continue };
                            if kv.mod_revision() > upto {
                                return Ok((from, evs));
                            }
                            evs.push(Ev {
                                rev: kv.mod_revision(),
                                put: e.event_type() == EventType::Put,
                                key: kv.key().to_vec(),
                                value: kv.value().to_vec(),
                                lease: kv.lease(),
                                create: kv.create_revision(),
                            });
                        }
                    };
                    from = compacted;
                }
            }
        })
        .await
}

/// The wall-clock time of each revision: stamps (revision, ms) interpolated.
struct Clock {
    points: Vec<(i64, u64)>,
}

impl Clock {
    fn new(mut points: Vec<(i64, u64)>) -> Clock {
        points.sort_unstable();
        // Clocks of different hosts disagree: never let time run backwards.
        let mut hi = 0;
        for p in &mut points {
            hi = hi.max(p.1);
            p.1 = hi;
        }
        Clock { points }
    }

    fn at(&self, rev: i64) -> u64 {
        let i = self.points.partition_point(|p| p.0 <= rev);
        match (i.checked_sub(1).map(|j| self.points[j]), self.points.get(i)) {
            (Some(a), _) if a.0 == rev => a.1,
            (Some(a), Some(b)) => {
                let f = (rev - a.0) as f64 / (b.0 - a.0) as f64;
                a.1 + ((b.1 - a.1) as f64 * f) as u64
            }
            (Some(a), None) => a.1,
            (None, Some(b)) => b.1,
            (None, None) => 0,
        }
    }
}

/// [`Client::history`].
pub(crate) async fn history(
    client: &Client,
    name: &str,
    since: Option<Duration>,
) -> Result<History> {
    validate_name(name)?;
    let prefix = crate::engine::keys::prefix(client, name);
    // The marker that ends the replay (see `replay`), beside the name as
    // etcdlock's other records are, deleted once read.
    let mut marker = prefix[..prefix.len() - 1].to_vec();
    marker.extend_from_slice(format!("{RECORD_MARK}history").as_bytes());
    let read_ms = now_ms();
    let m = marker.clone();
    let put = client
        .call(None, |mut c| {
            let m = m.clone();
            async move { c.put(m, read_ms.to_string(), None).await }
        })
        .await?;
    let upto = put.header().map_or(0, |h| h.revision()) - 1;
    let replayed = replay(client, &prefix, upto).await;
    let m = marker.clone();
    let _ = client
        .call(None, |mut c| {
            let m = m.clone();
            async move { c.delete(m, None).await }
        })
        .await;
    let (from, evs) = replayed.map_err(|e| e.context(format!("history of \"{name}\"")))?;
    let evs: Vec<Ev> = evs
        .into_iter()
        .filter(|e| is_direct_child(&prefix, &e.key))
        .collect();
    let mut entries = build(&evs, upto, read_ms);
    classify(client, &mut entries, &evs).await;
    if let Some(d) = since {
        let cut = read_ms.saturating_sub(d.as_millis() as u64);
        entries.retain(|e| e.ended_ms.map_or(true, |t| t >= cut));
    }
    Ok(History {
        name: name.to_string(),
        revision: upto,
        from_revision: from,
        read_ms,
        entries,
    })
}

/// The entries of a replay, granted by the holding rule after each revision.
fn build(evs: &[Ev], upto: i64, read_ms: u64) -> Vec<HistoryEntry> {
    let mut stamps = vec![(upto, read_ms)];
    let mut entries: Vec<HistoryEntry> = Vec::new();
    // Live keys (create_revision -> entry index), in queue order.
    let mut live: BTreeMap<i64, (usize, Slot)> = BTreeMap::new();
    let mut at: HashMap<Vec<u8>, i64> = HashMap::new();
    let mut i = 0;
    while i < evs.len() {
        let rev = evs[i].rev;
        while i < evs.len() && evs[i].rev == rev {
            let e = &evs[i];
            i += 1;
            if e.put && e.create == e.rev {
                let info = KeyInfo::of(&e.value);
                if let Some(t) = info.since_ms {
                    stamps.push((e.rev, t));
                }
                live.insert(e.create, (entries.len(), Slot::of(&e.key, &e.value)));
                at.insert(e.key.clone(), e.create);
                entries.push(entry(e, info));
            } else if !e.put {
                if let Some((idx, _)) = at.remove(&e.key).and_then(|c| live.remove(&c)) {
                    entries[idx].ended_revision = Some(rev);
                }
            }
        }
        let slots: Vec<Slot> = live.values().map(|v| v.1).collect();
        for ((idx, _), h) in live.values().zip(holds(&slots)) {
            if h && entries[*idx].granted_revision.is_none() {
                entries[*idx].granted_revision = Some(rev);
            }
        }
    }
    let clock = Clock::new(stamps);
    for e in &mut entries {
        if e.queued_ms == 0 {
            e.queued_ms = clock.at(e.fencing_token);
        }
        e.granted_ms = e.granted_revision.map(|r| clock.at(r).max(e.queued_ms));
        e.ended_ms = e.ended_revision.map(|r| clock.at(r).max(e.queued_ms));
        let end = e.ended_ms.unwrap_or(read_ms);
        e.wait_ms = e.granted_ms.unwrap_or(end).saturating_sub(e.queued_ms);
        e.hold_ms = e.granted_ms.map(|g| end.saturating_sub(g));
        e.ended = match (e.granted_revision, e.ended_revision) {
            (Some(_), None) => "holding",
            (None, None) => "waiting",
            (None, Some(_)) => "abandoned",
            (Some(_), Some(_)) => "released",
        };
    }
    entries
}

fn entry(e: &Ev, info: KeyInfo) -> HistoryEntry {
    let kind = match Slot::of(&e.key, &e.value) {
        Slot::Exclusive => ContenderKind::Exclusive,
        Slot::Reader => ContenderKind::Reader,
        Slot::Permit(n) => ContenderKind::Permit(n),
    };
    HistoryEntry {
        key: String::from_utf8_lossy(&e.key).into_owned(),
        kind,
        lease_id: e.lease,
        fencing_token: e.create,
        owner: match (&info.host, info.pid) {
            (Some(h), Some(p)) => Some(format!("{h}:{p}")),
            _ => None,
        },
        host: info.host,
        pid: info.pid,
        language: info.language,
        queued_ms: info.since_ms.unwrap_or(0),
        granted_revision: None,
        granted_ms: None,
        ended_revision: None,
        ended_ms: None,
        ended: "waiting",
        wait_ms: 0,
        hold_ms: None,
    }
}

/// Holds that ended while their lease lived on stay `released`; the rest
/// ended with their lease (`lease_ended`). A lease lived on if a later key
/// of this name was queued on it, or etcd still has it.
async fn classify(client: &Client, entries: &mut [HistoryEntry], evs: &[Ev]) {
    let mut later: HashMap<i64, i64> = HashMap::new();
    for e in evs.iter().filter(|e| e.put) {
        let v = later.entry(e.lease).or_insert(e.create);
        *v = (*v).max(e.create);
    }
    let ended: HashSet<i64> = entries
        .iter()
        .filter(|e| e.ended_revision.is_some() && e.lease_id != 0)
        .filter(|e| {
            later
                .get(&e.lease_id)
                .map_or(true, |l| *l <= e.fencing_token)
        })
        .map(|e| e.lease_id)
        .collect();
    let mut alive: HashSet<i64> = HashSet::new();
    for lease in ended.into_iter().take(LEASE_PROBES) {
        let ttl = client
            .call_lease(
                None,
                |mut c| async move { c.time_to_live(lease, None).await },
            )
            .await;
        if matches!(ttl, Ok(t) if t.ttl() > 0) {
            alive.insert(lease);
        }
    }
    for e in entries.iter_mut().filter(|e| e.ended_revision.is_some()) {
        let lived_on = later.get(&e.lease_id).is_some_and(|l| *l > e.fencing_token)
            || alive.contains(&e.lease_id);
        if !lived_on {
            e.ended = if e.granted_revision.is_some() {
                "lease_ended"
            } else {
                "abandoned"
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_between_two_stamps_is_placed_between_them() {
        let c = Clock::new(vec![(10, 1_000), (20, 2_000), (15, 900)]);
        assert_eq!(c.at(10), 1_000);
        // A stamp behind an older one (another host's clock) is lifted.
        assert_eq!(c.at(15), 1_000);
        assert_eq!(c.at(18), 1_600);
        assert_eq!(c.at(25), 2_000);
        assert_eq!(c.at(5), 1_000);
    }

    fn put(rev: i64, key: &str, lease: i64, ms: u64) -> Ev {
        Ev {
            rev,
            put: true,
            key: key.as_bytes().to_vec(),
            value: format!(r#"{{"host":"h","pid":1,"language":"rust","since_ms":{ms}}}"#)
                .into_bytes(),
            lease,
            create: rev,
        }
    }

    fn del(rev: i64, key: &str) -> Ev {
        Ev {
            rev,
            put: false,
            key: key.as_bytes().to_vec(),
            value: Vec::new(),
            lease: 0,
            create: 0,
        }
    }

    #[test]
    fn a_handoff_grants_the_waiter_at_the_holders_delete() {
        let evs = vec![
            put(5, "n/a", 1, 1_000),
            put(6, "n/b", 2, 1_100),
            del(7, "n/a"),
            put(8, "n/c", 3, 1_300),
            del(9, "n/c"),
        ];
        let es = build(&evs, 10, 1_500);
        assert_eq!(es.len(), 3);
        assert_eq!(
            (es[0].granted_revision, es[0].ended_revision),
            (Some(5), Some(7))
        );
        assert_eq!(es[0].ended, "released");
        assert_eq!(es[0].hold_ms, Some(200));
        assert_eq!((es[1].granted_revision, es[1].ended), (Some(7), "holding"));
        assert_eq!(es[1].wait_ms, 100);
        assert_eq!(es[1].hold_ms, Some(300));
        assert_eq!((es[2].granted_revision, es[2].ended), (None, "abandoned"));
    }
}
