//! The queue view of a name (core `Status`, `Contender`) as JavaScript objects.

use napi::bindgen_prelude::*;
use napi_derive::napi;

/// One key in the queue of a name (core `Contender`).
#[napi(object)]
pub struct NativeContender {
    pub key: String,
    /// "exclusive", "reader" or "permit".
    pub kind: String,
    pub permits: Option<u32>,
    pub holds: bool,
    pub lease_id: String,
    pub ttl_remaining: Option<f64>,
    pub fencing_token: String,
    pub owner: Option<String>,
    pub age_ms: Option<f64>,
    pub value: Buffer,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub language: Option<String>,
    pub local_waiters: Option<u32>,
    /// The holder's metadata (`LockOptions::metadata`), `[key, value]` pairs.
    pub metadata: Vec<Vec<String>>,
    pub foreign: bool,
}

/// Holders and waiters of one name (core `Status`).
#[napi(object)]
pub struct NativeStatus {
    pub name: String,
    /// "mutex", "election", "semaphore", "rwlock", or none.
    pub kind: Option<String>,
    pub revision: String,
    pub holders: Vec<NativeContender>,
    pub waiters: Vec<NativeContender>,
}

fn contender_info(c: etcdlock::Contender) -> NativeContender {
    let (kind, permits) = match c.kind {
        etcdlock::ContenderKind::Exclusive => ("exclusive", None),
        etcdlock::ContenderKind::Reader => ("reader", None),
        etcdlock::ContenderKind::Permit(n) => ("permit", Some(n)),
    };
    NativeContender {
        key: c.key,
        kind: kind.into(),
        permits,
        holds: c.holds,
        lease_id: c.lease_id.to_string(),
        ttl_remaining: c.ttl_remaining.map(|t| t as f64),
        fencing_token: c.create_revision.to_string(),
        owner: c.owner,
        age_ms: c.age_ms.map(|a| a as f64),
        value: Buffer::from(c.value),
        host: c.host,
        pid: c.pid,
        language: c.language,
        local_waiters: c.local_waiters,
        metadata: c.metadata.into_iter().map(|(k, v)| vec![k, v]).collect(),
        foreign: c.foreign,
    }
}

pub(crate) fn status_info(st: etcdlock::Status) -> NativeStatus {
    NativeStatus {
        name: st.name,
        kind: st.kind.map(|k| k.name().to_string()),
        revision: st.revision.to_string(),
        holders: st.holders.into_iter().map(contender_info).collect(),
        waiters: st.waiters.into_iter().map(contender_info).collect(),
    }
}
