//! The one encoding of core's records for the bindings: [`crate::Status`]
//! (with its [`crate::Contender`]s), [`crate::Metrics`], [`Leader`],
//! [`Deadlocks`] and [`History`] serialize with
//! serde to JSON objects with snake_case keys, and each binding builds its
//! language's objects from that JSON by field name. Adding a field to a
//! record is a change here plus, at most, a typed declaration per language.
//!
//! Invariants of the encoding (guarded by `tests::*` below and by each
//! binding's status and metrics tests):
//! - 64-bit identities (`lease_id`, `fencing_token`, `revision` and every
//!   `*_revision`) are decimal strings, so JavaScript reads them exactly;
//! - durations are seconds as numbers, in keys ending `_seconds`; what is
//!   read from etcd's keys (a key's age, a history's times and spans) is
//!   whole milliseconds, in keys ending `_ms` (wall-clock times: since the
//!   epoch);
//! - a key's `value` is an array of byte values; `metadata` is an object;
//! - a [`Leader`]'s `key` is its key as (lossy) UTF-8 text, `value`
//!   its proclamation as an array of byte values;
//! - per-outcome and per-reason counters are objects keyed by
//!   [`crate::AcquireResult::name`] and [`crate::LossReason::name`], in that
//!   order; absent values are `null`.
//!
//! Layer: records. This folder owns the records core hands to the CLI and
//! the bindings and their one encoding (this file), and status.rs, which
//! reads the queue view of a name or a prefix (`Client::status`, `list`,
//! `release`, `release_permit`) through the client's unary door. It may call
//! the client's request helpers, `names` and `meta`; it calls no recipe, and
//! nothing below it (transport, session, watch) calls it.

use std::time::Duration;

use serde::ser::{SerializeMap, Serializer};

use crate::error::LossReason;
use crate::meta::LockKind;
use crate::metrics::{Acquisitions, WAIT_BUCKETS};

pub(crate) mod deadlock;
pub(crate) mod history;
pub(crate) mod status;
pub use deadlock::{find_cycles, Cycle, Deadlocks, Party, WaitEdge};
pub use history::{History, HistoryEntry};
pub use status::{Contender, ContenderKind, Status};

/// A record as the bindings receive it: the JSON of its serde encoding.
pub fn to_json<T: serde::Serialize + ?Sized>(record: &T) -> String {
    // The records hold only strings, numbers, booleans and maps with string
    // keys, which serde_json always encodes.
    serde_json::to_string(record).unwrap_or_else(|_| "null".to_string())
}

/// The records of every name under a prefix ([`crate::Client::list`]), as one JSON array.
pub fn list_to_json(list: &[Status]) -> String {
    to_json(list)
}

/// The current leader of an election, as read from etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The leader's key (with the namespace), e.g. `jobs/694d7a3e4b2c8f05`.
    pub key: Vec<u8>,
    /// Its proclamation.
    pub value: Vec<u8>,
    /// Its key's create_revision: the leadership's fencing token.
    pub revision: i64,
    /// Its lease.
    pub lease_id: i64,
}

impl serde::Serialize for Leader {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("key", &String::from_utf8_lossy(&self.key))?;
        m.serialize_entry("value", &self.value)?;
        m.serialize_entry("revision", &self.revision.to_string())?;
        m.serialize_entry("lease_id", &self.lease_id.to_string())?;
        m.end()
    }
}

pub(crate) fn decimal<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

pub(crate) fn opt_decimal<S: Serializer>(v: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

pub(crate) fn seconds<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

pub(crate) fn opt_seconds<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

pub(crate) fn pairs<S: Serializer>(v: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(v.iter().map(|(k, v)| (k, v)))
}

pub(crate) fn lock_kind<S: Serializer>(k: &Option<LockKind>, s: S) -> Result<S::Ok, S::Error> {
    match k {
        Some(k) => s.serialize_str(k.name()),
        None => s.serialize_none(),
    }
}

pub(crate) fn acquisitions<S: Serializer>(a: &[Acquisitions; 5], s: S) -> Result<S::Ok, S::Error> {
    #[derive(serde::Serialize)]
    struct One {
        count: u64,
        wait_seconds: f64,
    }
    s.collect_map(a.iter().map(|a| {
        (
            a.result.name(),
            One {
                count: a.count,
                wait_seconds: a.wait_total.as_secs_f64(),
            },
        )
    }))
}

pub(crate) fn lost<S: Serializer>(l: &[(LossReason, u64); 4], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(l.iter().map(|(r, n)| (r.name(), n)))
}

pub(crate) fn histogram<S: Serializer>(
    h: &[[u64; WAIT_BUCKETS.len() + 1]; 5],
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(5))?;
    for (r, counts) in crate::metrics::AcquireResult::ALL.iter().zip(h) {
        m.serialize_entry(r.name(), &counts[..])?;
    }
    m.end()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use crate::metrics::Recorder;
    use crate::records::Contender;
    use crate::records::ContenderKind;
    use serde_json::{json, Value};

    fn contender(kind: ContenderKind) -> Contender {
        Contender {
            key: "locks/a/694d9a0b1c2d3e4f".into(),
            kind,
            holds: true,
            lease_id: 0x694d_9a0b_1c2d_3e4f,
            ttl_remaining: Some(9),
            create_revision: 42,
            owner: Some("h:7".into()),
            age_ms: Some(1500),
            value: vec![0, 255],
            host: Some("h".into()),
            pid: Some(7),
            language: Some("rust".into()),
            local_waiters: None,
            metadata: vec![("app".into(), "billing".into())],
            foreign: false,
        }
    }

    #[test]
    fn a_status_is_one_json_object_with_exact_ids() {
        let st = Status {
            name: "a".into(),
            revision: 43,
            holders: vec![contender(ContenderKind::Permit(3))],
            waiters: vec![contender(ContenderKind::Reader)],
            kind: Some(LockKind::Semaphore),
        };
        let v: Value = serde_json::from_str(&to_json(&st)).unwrap();
        assert_eq!(v["name"], "a");
        assert_eq!(v["kind"], "semaphore");
        assert_eq!(v["revision"], "43");
        let h = &v["holders"][0];
        // 7587862106543470159 is beyond 2^53: a decimal string keeps it exact.
        assert_eq!(h["lease_id"], (0x694d_9a0b_1c2d_3e4f_i64).to_string());
        assert_eq!(h["fencing_token"], "42");
        assert_eq!(h["kind"], "permit");
        assert_eq!(h["permits"], 3);
        assert_eq!(h["value"], json!([0, 255]));
        assert_eq!(h["metadata"], json!({"app": "billing"}));
        assert_eq!(h["age_ms"], 1500);
        assert_eq!(h["local_waiters"], Value::Null);
        assert_eq!(v["waiters"][0]["kind"], "reader");
        assert_eq!(v["waiters"][0]["permits"], Value::Null);
        let mut keys: Vec<&str> = h.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "age_ms",
                "fencing_token",
                "foreign",
                "holds",
                "host",
                "key",
                "kind",
                "language",
                "lease_id",
                "local_waiters",
                "metadata",
                "owner",
                "permits",
                "pid",
                "ttl_remaining",
                "value"
            ]
        );
    }

    #[test]
    fn a_leader_is_one_json_object_with_exact_ids() {
        let l = Leader {
            key: b"jobs/694d9a0b1c2d3e4f".to_vec(),
            value: vec![0, 255],
            revision: 42,
            lease_id: 0x694d_9a0b_1c2d_3e4f,
        };
        let v: Value = serde_json::from_str(&to_json(&l)).unwrap();
        assert_eq!(
            v,
            json!({
                "key": "jobs/694d9a0b1c2d3e4f",
                "value": [0, 255],
                "revision": "42",
                "lease_id": (0x694d_9a0b_1c2d_3e4f_i64).to_string(),
            })
        );
        assert_eq!(to_json(&None::<Leader>), "null");
    }

    #[test]
    fn metrics_are_keyed_by_outcome_and_reason_in_seconds() {
        let m = Metrics {
            member_failures: 3,
            keepalive_rtt: Some(Duration::from_millis(2)),
            ..Recorder::new().snapshot()
        };
        let v: Value = serde_json::from_str(&to_json(&m)).unwrap();
        assert_eq!(v["member_failures"], 3);
        assert_eq!(v["keepalive_rtt_seconds"], 0.002);
        let text = to_json(&m);
        let at = |k: &str| text.find(&format!("\"{k}\"")).unwrap();
        let order = ["acquired", "timeout", "would_block", "cancelled", "error"];
        assert!(order.windows(2).all(|w| at(w[0]) < at(w[1])), "{text}");
        assert_eq!(
            v["acquisitions"]["acquired"],
            json!({"count": 0, "wait_seconds": 0.0})
        );
        let order = [
            "LeaseExpired",
            "KeyDeleted",
            "ConnectionLost",
            "ClientClosed",
        ];
        assert!(order.windows(2).all(|w| at(w[0]) < at(w[1])), "{text}");
        assert_eq!(
            v["wait_histogram"]["timeout"].as_array().unwrap().len(),
            WAIT_BUCKETS.len() + 1
        );
        let none = Recorder::new().snapshot();
        let v: Value = serde_json::from_str(&to_json(&none)).unwrap();
        assert_eq!(v["keepalive_rtt_seconds"], Value::Null);
    }
}
