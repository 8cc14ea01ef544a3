//! The queue view of any lock kind on a name (mutex, semaphore, read-write
//! lock, election), as `etcdlock status` shows it: who holds, who waits, in
//! create_revision order. Keys of `etcdctl lock`, `etcdctl elect` and Go's
//! Mutex/Election are shown too (they carry no owner info). `list` gives the
//! same view of every name under a prefix.

use std::collections::{BTreeMap, HashMap};
use std::time::{SystemTime, UNIX_EPOCH};

use etcd_client::{Compare, CompareOp, GetOptions, KeyValue, SortOrder, SortTarget, Txn, TxnOp};

use crate::client::Client;
use crate::error::Result;
use crate::meta::{self, LockKind, META_PREFIX};
use crate::names::KeyInfo;
use crate::names::{is_direct_child, validate_name};
use crate::waitgraph::{holds, Slot};

/// What a contender is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContenderKind {
    /// A mutex or election key, or a read-write lock's writer.
    Exclusive,
    /// A read-write lock's reader (`-r` key).
    Reader,
    /// A semaphore permit key, with the semaphore's permit count.
    Permit(u32),
}

/// One key in the queue of a name (its encoding for the bindings: [`crate::records`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Contender {
    /// The key (with the namespace).
    pub key: String,
    /// What kind of contender (encoded as `kind` and `permits`).
    #[serde(flatten)]
    pub kind: ContenderKind,
    /// Whether it holds now (by the kind's rule) or waits.
    pub holds: bool,
    /// Its lease.
    #[serde(serialize_with = "crate::records::decimal")]
    pub lease_id: i64,
    /// Seconds left on its lease, if etcd reports it.
    pub ttl_remaining: Option<i64>,
    /// The key's create_revision (a holder's fencing token; encoded as `fencing_token`).
    #[serde(rename = "fencing_token", serialize_with = "crate::records::decimal")]
    pub create_revision: i64,
    /// `host:pid` for etcdlock keys; `None` for etcdctl and Go keys.
    pub owner: Option<String>,
    /// Milliseconds since the key was created, for etcdlock keys.
    pub age_ms: Option<u64>,
    /// The key's value (an election's proclamation; etcdlock's owner info).
    pub value: Vec<u8>,
    /// The holder's host, for etcdlock keys.
    pub host: Option<String>,
    /// The holder's process id, for etcdlock keys.
    pub pid: Option<u32>,
    /// The language the holder uses etcdlock from (`"rust"`, `"python"`,
    /// ...), from its key's value (or, for an election, its meta record,
    /// written 100 ms (the meta records' tick) into a use of the name).
    pub language: Option<String>,
    /// Acquisitions of this name in progress in the contender's client (its
    /// local queue: a client keeps at most two keys per name in etcd), from
    /// its meta record; for an etcdlock key with no record (one mutex
    /// acquisition or hold gets none: see `meta.rs`), `Some(0)` for a holder
    /// and `Some(1)` for a waiter.
    pub local_waiters: Option<u32>,
    /// What the holder's acquisition gave as metadata
    /// ([`crate::LockOptions::metadata`]), from its meta record (empty until
    /// it is written, 100 ms (the meta records' tick) into a use of the name).
    #[serde(serialize_with = "crate::records::pairs")]
    pub metadata: Vec<(String, String)>,
    /// A key without etcdlock's owner info or meta record: `etcdctl lock`,
    /// `etcdctl elect`, Go's Mutex or Election, or another program.
    pub foreign: bool,
}

/// Holders and waiters of one name, as one read saw them (its encoding for
/// the bindings: [`crate::records`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Status {
    /// The name.
    pub name: String,
    /// The store revision of the read.
    #[serde(serialize_with = "crate::records::decimal")]
    pub revision: i64,
    /// Who holds, oldest first.
    pub holders: Vec<Contender>,
    /// Who waits, in the order they will be served.
    pub waiters: Vec<Contender>,
    /// What the name is used as, from the contenders' meta records or their
    /// keys (a reader key means a read-write lock, a permit count a
    /// semaphore); `None` when neither tells (no contender, or only foreign
    /// keys).
    #[serde(serialize_with = "crate::records::lock_kind")]
    pub kind: Option<LockKind>,
}

impl serde::Serialize for ContenderKind {
    /// As the two fields `kind` (`"exclusive"`, `"reader"`, `"permit"`) and
    /// `permits` (the semaphore's permit count, else null) of a contender.
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (kind, permits) = match self {
            ContenderKind::Exclusive => ("exclusive", None),
            ContenderKind::Reader => ("reader", None),
            ContenderKind::Permit(n) => ("permit", Some(*n)),
        };
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("kind", kind)?;
        m.serialize_entry("permits", &permits)?;
        m.end()
    }
}

fn kind_of(kv: &KeyValue) -> ContenderKind {
    match Slot::of(kv.key(), kv.value()) {
        Slot::Exclusive => ContenderKind::Exclusive,
        Slot::Reader => ContenderKind::Reader,
        Slot::Permit(n) => ContenderKind::Permit(n),
    }
}

/// A contender's meta record (see `meta.rs`).
#[derive(Debug, Clone, Default)]
struct MetaRecord {
    kind: Option<LockKind>,
    host: Option<String>,
    pid: Option<u32>,
    language: Option<String>,
    waiting: Option<u32>,
    metadata: Vec<(String, String)>,
}

fn meta_record(v: &[u8]) -> MetaRecord {
    let Ok(serde_json::Value::Object(o)) = serde_json::from_slice::<serde_json::Value>(v) else {
        return MetaRecord::default();
    };
    let s = |k: &str| o.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let n = |k: &str| {
        o.get(k)
            .and_then(|v| v.as_u64())
            .and_then(|v| u32::try_from(v).ok())
    };
    MetaRecord {
        kind: s("kind").as_deref().and_then(LockKind::from_name),
        host: s("host"),
        pid: n("pid"),
        language: s("language"),
        waiting: n("waiting"),
        metadata: match o.get("metadata") {
            Some(serde_json::Value::Object(m)) => m
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect(),
            _ => Vec::new(),
        },
    }
}

/// What one read saw of the names it covers: (name, lease) -> meta record,
/// and lease -> seconds left.
struct Seen {
    metas: HashMap<(String, i64), MetaRecord>,
    ttls: HashMap<i64, Option<i64>>,
    now_ms: u64,
}

/// The status of `name` from its direct children `kvs`, oldest first.
fn build(name: &str, revision: i64, kvs: &[&KeyValue], seen: &Seen) -> Status {
    let mut st = Status {
        name: name.to_string(),
        revision,
        holders: Vec::new(),
        waiters: Vec::new(),
        kind: None,
    };
    let mut inferred = None;
    let slots: Vec<Slot> = kvs
        .iter()
        .map(|kv| Slot::of(kv.key(), kv.value()))
        .collect();
    for ((kv, holds), slot) in kvs.iter().zip(holds(&slots)).zip(&slots) {
        let kind = kind_of(kv);
        match slot {
            Slot::Reader => inferred = Some(LockKind::RwLock),
            Slot::Permit(_) => inferred = inferred.or(Some(LockKind::Semaphore)),
            Slot::Exclusive => {}
        }
        let lease = kv.lease();
        let info = KeyInfo::of(kv.value());
        let record = seen.metas.get(&(name.to_string(), lease));
        // An etcdlock key with no record: one mutex acquisition or hold (or
        // a use not a tick old yet).
        let plain = record.is_none() && info.language.is_some();
        if plain && kind == ContenderKind::Exclusive && info.permits.is_none() {
            inferred = inferred.or(Some(LockKind::Mutex));
        }
        let m = record.cloned().unwrap_or_default();
        if st.kind.is_none() {
            st.kind = m.kind;
        }
        let host = info.host.or(m.host);
        let language = info.language.or(m.language);
        let pid = info.pid.or(m.pid);
        let age_ms = info.since_ms.map(|s| seen.now_ms.saturating_sub(s));
        let c = Contender {
            key: String::from_utf8_lossy(kv.key()).into_owned(),
            kind,
            holds,
            lease_id: lease,
            ttl_remaining: seen.ttls.get(&lease).copied().flatten(),
            create_revision: kv.create_revision(),
            owner: match (&host, pid) {
                (Some(h), Some(p)) => Some(format!("{h}:{p}")),
                _ => None,
            },
            age_ms,
            value: kv.value().to_vec(),
            foreign: host.is_none() && language.is_none(),
            host,
            pid,
            language,
            local_waiters: m.waiting.or(plain.then_some(u32::from(!holds))),
            metadata: m.metadata,
        };
        if holds {
            st.holders.push(c);
        } else {
            st.waiters.push(c);
        }
    }
    st.kind = st.kind.or(inferred);
    st
}

// What `Client::status`, `release`, `release_permit` and `list` do
// (recipes/mod.rs delegates to these).

/// [`Client::status`].
pub(crate) async fn status(client: &Client, name: &str) -> Result<Status> {
    validate_name(name)?;
    let prefix = crate::engine::keys::prefix(client, name);
    let (revision, kvs) = read_sorted(client, prefix.clone(), None).await?;
    let kvs: Vec<&KeyValue> = kvs
        .iter()
        .filter(|kv| is_direct_child(&prefix, kv.key()))
        .collect();
    let mut meta_prefix = format!("{META_PREFIX}{name}/").into_bytes();
    meta_prefix.splice(0..0, client.inner.ns.iter().copied());
    let seen = seen(client, &kvs, &meta_prefix, revision, |n| n == name).await?;
    Ok(build(name, revision, &kvs, &seen))
}

/// [`Client::release`].
pub(crate) async fn release(client: &Client, name: &str, token: i64) -> Result<bool> {
    validate_name(name)?;
    let prefix = crate::engine::keys::prefix(client, name);
    let (_, kvs) = read_sorted(client, prefix.clone(), None).await?;
    let Some(kv) = kvs
        .iter()
        .find(|kv| kv.create_revision() == token && is_direct_child(&prefix, kv.key()))
    else {
        return Ok(false);
    };
    let key = kv.key().to_vec();
    // An operator's release hands over at once, as an unlock does: the
    // holder's lock-delay records (if any) go with its key.
    let recs = crate::engine::delay::delay_records(client, name);
    let txn = Txn::new()
        .when([Compare::create_revision(
            key.clone(),
            CompareOp::Equal,
            token,
        )])
        .and_then([
            TxnOp::delete(recs.held_of(&prefix, &key), None),
            TxnOp::delete(recs.waiting_of(&prefix, &key), None),
            TxnOp::delete(key, None),
        ]);
    let r = client
        .call(Some(client.request_bound()), |mut c| {
            let t = txn.clone();
            async move { c.txn(t).await }
        })
        .await?;
    Ok(r.succeeded())
}

/// [`Client::release_permit`].
pub(crate) async fn release_permit(client: &Client, name: &str, id: i64) -> Result<bool> {
    release(client, name, id).await
}

/// [`Client::list`].
pub(crate) async fn list(client: &Client, prefix: &str) -> Result<Vec<Status>> {
    Ok(list_read(client, prefix, true).await?.1)
}

/// [`Client::list`]'s read; `ttls`: also ask etcd each lease's time to
/// live (one request per lease), else `ttl_remaining` is `None`. With the
/// read's revision (which an empty list would not carry).
pub(crate) async fn list_read(
    client: &Client,
    prefix: &str,
    ttls: bool,
) -> Result<(i64, Vec<Status>)> {
    let mut from = client.inner.ns.clone();
    from.extend_from_slice(prefix.as_bytes());
    let (revision, kvs) = read_sorted(client, from, None).await?;
    let ns = client.inner.ns.len();
    let mut names: BTreeMap<String, Vec<&KeyValue>> = BTreeMap::new();
    for kv in kvs.iter().filter(|kv| kv.lease() != 0) {
        let Some(name) = crate::names::lock_name(&kv.key()[ns..]) else {
            continue;
        };
        let name = String::from_utf8_lossy(name).into_owned();
        if name.is_empty() || !name.starts_with(prefix) {
            continue;
        }
        names.entry(name).or_default().push(kv);
    }
    let all: Vec<&KeyValue> = names.values().flatten().copied().collect();
    let mut meta_prefix = client.inner.ns.clone();
    meta_prefix.extend_from_slice(format!("{META_PREFIX}{prefix}").as_bytes());
    let leases: &[&KeyValue] = if ttls { &all } else { &[] };
    let seen = seen(client, leases, &meta_prefix, revision, |n| {
        names.contains_key(n)
    })
    .await?;
    Ok((
        revision,
        names
            .iter()
            .map(|(name, kvs)| build(name, revision, kvs, &seen))
            .collect(),
    ))
}

/// Every key under `from`, oldest first, and the read's revision (at
/// `revision` if given), within the request timeout.
async fn read_sorted(
    client: &Client,
    from: Vec<u8>,
    revision: Option<i64>,
) -> Result<(i64, Vec<KeyValue>)> {
    let bound = Some(client.request_bound());
    let r = client
        .call(bound, |mut c| {
            let from = from.clone();
            let mut o = GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Create, SortOrder::Ascend);
            if let Some(rev) = revision {
                o = o.with_revision(rev);
            }
            async move { c.get(from, Some(o)).await }
        })
        .await?;
    let rev = r.header().map(|h| h.revision()).unwrap_or(0);
    let mut r = r;
    Ok((rev, r.take_kvs()))
}

/// The meta records under `meta_prefix` (at the same revision as the
/// keys) of the names `wanted` accepts, and the TTL left on each lease of `kvs`.
async fn seen(
    client: &Client,
    kvs: &[&KeyValue],
    meta_prefix: &[u8],
    revision: i64,
    wanted: impl Fn(&str) -> bool,
) -> Result<Seen> {
    let bound = Some(client.request_bound());
    let (_, records) = read_sorted(client, meta_prefix.to_vec(), Some(revision)).await?;
    let ns = client.inner.ns.len();
    let mut metas = HashMap::new();
    for kv in &records {
        if let Some((name, lease)) = meta::parse_key(&kv.key()[ns..]) {
            if wanted(&name) {
                metas.insert((name, lease), meta_record(kv.value()));
            }
        }
    }
    let mut ttls: HashMap<i64, Option<i64>> = HashMap::new();
    for kv in kvs {
        let lease = kv.lease();
        if lease == 0 || ttls.contains_key(&lease) {
            continue;
        }
        let t = client
            .call_lease(
                bound,
                |mut c| async move { c.time_to_live(lease, None).await },
            )
            .await
            .ok()
            .map(|t| t.ttl());
        ttls.insert(lease, t);
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    Ok(Seen {
        metas,
        ttls,
        now_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meta_record_is_read_field_by_field() {
        let m = meta_record(
            br#"{"kind":"semaphore","host":"web-1","pid":42,"language":"java",
                 "waiting":3,"metadata":{"job":"nightly","n":7}}"#,
        );
        assert_eq!(m.kind, Some(LockKind::Semaphore));
        assert_eq!(m.host.as_deref(), Some("web-1"));
        assert_eq!(m.pid, Some(42));
        assert_eq!(m.language.as_deref(), Some("java"));
        assert_eq!(m.waiting, Some(3));
        // A value that is not text reads as empty text, its key kept.
        assert_eq!(
            m.metadata,
            vec![
                ("job".to_string(), "nightly".to_string()),
                ("n".to_string(), String::new())
            ]
        );
    }

    #[test]
    fn a_foreign_or_damaged_meta_record_tells_nothing() {
        for v in [&b"not json"[..], b"[1,2]", b"\"text\"", b""] {
            let m = meta_record(v);
            assert!(m.kind.is_none() && m.host.is_none() && m.pid.is_none());
            assert!(m.metadata.is_empty());
        }
        // Wrong types and out-of-range numbers are dropped field by field.
        let m = meta_record(br#"{"kind":"spinlock","host":7,"pid":4294967296,"waiting":-1}"#);
        assert!(m.kind.is_none() && m.host.is_none() && m.pid.is_none() && m.waiting.is_none());
    }
}
