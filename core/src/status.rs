//! The queue view of any lock kind on a name (mutex, semaphore, read-write
//! lock, election), as `etcdlock status` shows it: who holds, who waits, in
//! create_revision order. Keys of `etcdctl lock`, `etcdctl elect` and Go's
//! Mutex/Election are shown too (they carry no owner info).

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use etcd_client::{GetOptions, KeyValue, SortOrder, SortTarget};

use crate::client::Client;
use crate::error::Result;
use crate::names::{is_direct_child, validate_name};

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

/// One key in the queue of a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contender {
    /// The key (with the namespace).
    pub key: String,
    /// What kind of contender.
    pub kind: ContenderKind,
    /// Whether it holds now (by the kind's rule) or waits.
    pub holds: bool,
    /// Its lease.
    pub lease_id: i64,
    /// Seconds left on its lease, if etcd reports it.
    pub ttl_remaining: Option<i64>,
    /// The key's create_revision (a holder's fencing token).
    pub create_revision: i64,
    /// `host:pid` for etcdlock keys; `None` for etcdctl and Go keys.
    pub owner: Option<String>,
    /// Milliseconds since the key was created, for etcdlock keys.
    pub age_ms: Option<u64>,
    /// The key's value (an election's proclamation; etcdlock's owner info).
    pub value: Vec<u8>,
}

/// Holders and waiters of one name, as one read saw them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The name.
    pub name: String,
    /// The store revision of the read.
    pub revision: i64,
    /// Who holds, oldest first.
    pub holders: Vec<Contender>,
    /// Who waits, in the order they will be served.
    pub waiters: Vec<Contender>,
}

fn field<'a>(v: &'a str, name: &str) -> Option<&'a str> {
    let tag = format!("\"{name}\":");
    let at = v.find(&tag)? + tag.len();
    let rest = v[at..].trim_start_matches('"');
    let end = rest.find(['"', ',', '}']).unwrap_or(rest.len());
    Some(&rest[..end])
}

fn kind_of(kv: &KeyValue) -> ContenderKind {
    if kv.key().ends_with(b"-r") {
        return ContenderKind::Reader;
    }
    let v = String::from_utf8_lossy(kv.value());
    match field(&v, "permits").and_then(|p| p.parse().ok()) {
        Some(n) if n > 1 => ContenderKind::Permit(n),
        _ => ContenderKind::Exclusive,
    }
}

impl Client {
    /// The holders and waiters of `name`, whatever kind of lock it is.
    pub async fn status(&self, name: &str) -> Result<Status> {
        validate_name(name)?;
        // One bound for every request of the call: the request timeout.
        let bound = Some(self.request_bound());
        let prefix = self.prefix(name);
        let p = prefix.clone();
        let r = self
            .call(bound, |mut c| {
                let p = p.clone();
                async move { c.get(p, Some(GetOptions::new().with_prefix().with_sort(SortTarget::Create, SortOrder::Ascend))).await }
            })
            .await?;
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let mut ttls: HashMap<i64, Option<i64>> = HashMap::new();
        let mut st = Status { name: name.to_string(), revision: r.header().map(|h| h.revision()).unwrap_or(0), holders: Vec::new(), waiters: Vec::new() };
        let mut writer_seen = false;
        // `older`: contenders created before this one.
        for (older, kv) in (0u32..).zip(r.kvs().iter().filter(|kv| is_direct_child(&prefix, kv.key()))) {
            let kind = kind_of(kv);
            let holds = match kind {
                ContenderKind::Reader => !writer_seen,
                ContenderKind::Exclusive => older == 0,
                ContenderKind::Permit(n) => older < n,
            };
            if kind != ContenderKind::Reader {
                writer_seen = true;
            }
            let lease = kv.lease();
            let ttl = if lease == 0 {
                None
            } else if let Some(t) = ttls.get(&lease) {
                *t
            } else {
                let t = self
                    .call_lease(bound, |mut c| async move { c.time_to_live(lease, None).await })
                    .await
                    .ok()
                    .map(|t| t.ttl());
                ttls.insert(lease, t);
                t
            };
            let v = String::from_utf8_lossy(kv.value()).into_owned();
            let owner = match (field(&v, "host"), field(&v, "pid")) {
                (Some(h), Some(p)) => Some(format!("{h}:{p}")),
                _ => None,
            };
            let age_ms = field(&v, "since_ms").and_then(|s| s.parse::<u64>().ok()).map(|s| now_ms.saturating_sub(s));
            let c = Contender {
                key: String::from_utf8_lossy(kv.key()).into_owned(),
                kind,
                holds,
                lease_id: lease,
                ttl_remaining: ttl,
                create_revision: kv.create_revision(),
                owner,
                age_ms,
                value: kv.value().to_vec(),
            };
            if holds {
                st.holders.push(c);
            } else {
                st.waiters.push(c);
            }
        }
        Ok(st)
    }
}
