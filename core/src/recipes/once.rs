//! Run-once records: a scheduled job that runs on one node per tick, with
//! ShedLock's semantics (`lock_at_most_for`, `lock_at_least_for`), shared by
//! every language (Java's ShedLock provider, Python's `once`, Node's
//! `runOnce`).
//!
//! A job `name` is one key, `<namespace>__etcdlock/once/<name>`, whose JSON
//! value says until when it is taken (`lock_until_ms`, wall clock), since when
//! and by whom. No lease: the record outlives its writer, which is the point
//! (a node that dies in the middle of a job keeps it taken until
//! `lock_at_most`, and one that finishes early keeps it until `lock_at_least`
//! so a node whose clock or schedule is a little behind does not run the same
//! tick again).
//!
//! Every change is one compare-and-swap Txn on the record's mod_revision, so
//! two nodes can never both take it, and a hold is identified by the revision
//! its take (or last extend) wrote: [`OnceHold::revision`]. Finishing or
//! extending compares that revision, so a holder whose record expired and was
//! taken by another node changes nothing (Ok(false) / Ok(None)).
//!
//! Expiry compares `lock_until_ms` with the clock of the node that reads it,
//! as ShedLock's JDBC and Mongo providers do: keep the nodes' clocks in sync
//! (NTP) and choose `lock_at_least` above their skew. Each call takes `now`
//! explicitly in its `_at` form (Java passes ShedLock's `ClockProvider`), or
//! the system clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse};
use serde_json::{json, Value};

use crate::client::Client;
use crate::error::{Error, Result};
pub use crate::names::ONCE_PREFIX;
use crate::names::{hostname, validate_name};

/// What a run-once record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnceRecord {
    /// The job is taken while the reader's clock is before this (ms since the
    /// Unix epoch).
    pub lock_until_ms: i64,
    /// When the hold began (ms since the Unix epoch).
    pub locked_at_ms: i64,
    /// Host name of the node that took it.
    pub locked_by: String,
    /// Its process id.
    pub pid: u32,
    /// The etcd revision that wrote the record: the hold's identity, strictly
    /// increasing per job (a fencing token).
    pub revision: i64,
}

impl OnceRecord {
    /// Whether the job is taken at `now_ms`.
    pub fn is_taken_at(&self, now_ms: i64) -> bool {
        self.lock_until_ms > now_ms
    }
}

/// A taken run-once record: plain values (a binding can keep them as they
/// are), used by [`Client::once_finish_at`] and [`Client::once_extend_at`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnceHold {
    /// The job's name.
    pub name: String,
    /// The record as this hold wrote it; `record.revision` identifies the hold.
    pub record: OnceRecord,
}

impl OnceHold {
    /// A hold this process took, from the values a binding kept: job name,
    /// revision, `locked_at_ms`, `lock_until_ms` (host and pid are ours).
    pub fn mine(name: &str, revision: i64, locked_at_ms: i64, lock_until_ms: i64) -> OnceHold {
        OnceHold {
            name: name.to_string(),
            record: OnceRecord {
                lock_until_ms,
                locked_at_ms,
                locked_by: hostname(),
                pid: std::process::id(),
                revision,
            },
        }
    }

    /// The revision that identifies this hold (its fencing token).
    pub fn revision(&self) -> i64 {
        self.record.revision
    }
}

/// Milliseconds since the Unix epoch on the system clock.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn ms(d: Duration, what: &str) -> Result<i64> {
    i64::try_from(d.as_millis()).map_err(|_| Error::invalid(format!("{what} is too long: {d:?}")))
}

fn validate_job(name: &str) -> Result<()> {
    validate_name(name).map_err(|e| Error::invalid(e.to_string().replace("lock name", "job name")))
}

fn encode(r: &OnceRecord) -> String {
    json!({
        "lock_until_ms": r.lock_until_ms,
        "locked_at_ms": r.locked_at_ms,
        "locked_by": r.locked_by,
        "pid": r.pid,
    })
    .to_string()
}

/// The record in `value` written at `revision`. A value that is not a record
/// (written by something else) counts as expired, so it never blocks the
/// job forever.
fn decode(value: &[u8], revision: i64) -> OnceRecord {
    let v: Value = serde_json::from_slice(value).unwrap_or(Value::Null);
    let int = |k: &str| v.get(k).and_then(Value::as_i64).unwrap_or(0);
    OnceRecord {
        lock_until_ms: int("lock_until_ms"),
        locked_at_ms: int("locked_at_ms"),
        locked_by: v
            .get("locked_by")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        pid: u32::try_from(int("pid")).unwrap_or(0),
        revision,
    }
}

pub(crate) fn once_key(client: &Client, name: &str) -> Vec<u8> {
    client.ns_key(format!("{ONCE_PREFIX}{name}").as_bytes())
}

/// One Txn: if the record's mod_revision is `expect` (0: no record), put
/// `value`; else read it. Ok(Ok(revision written)) or Ok(Err(current)).
pub(crate) async fn once_swap(
    client: &Client,
    key: &[u8],
    expect: i64,
    value: Option<String>,
) -> Result<std::result::Result<i64, Option<OnceRecord>>> {
    let op = match value {
        Some(v) => TxnOp::put(key.to_vec(), v, None::<PutOptions>),
        None => TxnOp::delete(key.to_vec(), None),
    };
    let txn = Txn::new()
        .when([Compare::mod_revision(
            key.to_vec(),
            CompareOp::Equal,
            expect,
        )])
        .and_then([op])
        .or_else([TxnOp::get(key.to_vec(), None::<GetOptions>)]);
    let r = client
        .call(Some(client.request_bound()), |mut c| {
            let t = txn.clone();
            async move { c.txn(t).await }
        })
        .await?;
    if r.succeeded() {
        return Ok(Ok(r.header().map(|h| h.revision()).unwrap_or(0)));
    }
    let current = r.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(g) => g
            .kvs()
            .first()
            .map(|kv| decode(kv.value(), kv.mod_revision())),
        _ => None,
    });
    Ok(Err(current))
}

/// The body of [`Client::once_take`].
pub(crate) async fn once_take(
    client: &Client,
    name: &str,
    at_most: Duration,
) -> Result<Option<OnceHold>> {
    let now = now_ms();
    let until = now.saturating_add(ms(at_most, "at_most")?);
    client.once_take_at(name, now, until).await
}

/// The body of [`Client::once_take_at`].
pub(crate) async fn once_take_at(
    client: &Client,
    name: &str,
    now_ms: i64,
    lock_until_ms: i64,
) -> Result<Option<OnceHold>> {
    validate_job(name)?;
    if lock_until_ms <= now_ms {
        return Err(Error::invalid(format!(
            "at_most must be positive: lock_until {lock_until_ms} ms is not after now {now_ms} ms"
        )));
    }
    let key = once_key(client, name);
    let mut record = OnceRecord {
        lock_until_ms,
        locked_at_ms: now_ms,
        locked_by: hostname(),
        pid: std::process::id(),
        revision: 0,
    };
    let value = encode(&record);
    let mut expect = 0;
    loop {
        match once_swap(client, &key, expect, Some(value.clone())).await? {
            Ok(rev) => {
                record.revision = rev;
                tracing::debug!(
                    job = name,
                    revision = rev,
                    lock_until_ms,
                    "run-once record taken"
                );
                return Ok(Some(OnceHold {
                    name: name.to_string(),
                    record,
                }));
            }
            Err(Some(current)) if !current.is_taken_at(now_ms) && current.revision != expect => {
                // Expired (or not a record): replace exactly that version.
                expect = current.revision;
            }
            Err(None) if expect != 0 => expect = 0, // deleted since we looked
            Err(_) => return Ok(None),
        }
    }
}

/// The body of [`Client::once_finish`].
pub(crate) async fn once_finish(
    client: &Client,
    hold: &OnceHold,
    at_least: Duration,
) -> Result<bool> {
    let until = hold
        .record
        .locked_at_ms
        .saturating_add(ms(at_least, "at_least")?);
    client.once_finish_at(hold, now_ms(), until).await
}

/// The body of [`Client::once_finish_at`].
pub(crate) async fn once_finish_at(
    client: &Client,
    hold: &OnceHold,
    now_ms: i64,
    at_least_until_ms: i64,
) -> Result<bool> {
    validate_job(&hold.name)?;
    let key = once_key(client, &hold.name);
    let until = at_least_until_ms.min(hold.record.lock_until_ms);
    let value = (until > now_ms).then(|| {
        encode(&OnceRecord {
            lock_until_ms: until,
            ..hold.record.clone()
        })
    });
    let done = once_swap(client, &key, hold.record.revision, value)
        .await?
        .is_ok();
    tracing::debug!(
        job = hold.name,
        revision = hold.record.revision,
        done,
        "run-once record finished"
    );
    Ok(done)
}

/// The body of [`Client::once_extend`].
pub(crate) async fn once_extend(
    client: &Client,
    hold: &OnceHold,
    at_most: Duration,
) -> Result<Option<OnceHold>> {
    let now = now_ms();
    client
        .once_extend_at(hold, now, now.saturating_add(ms(at_most, "at_most")?))
        .await
}

/// The body of [`Client::once_extend_at`].
pub(crate) async fn once_extend_at(
    client: &Client,
    hold: &OnceHold,
    now_ms: i64,
    lock_until_ms: i64,
) -> Result<Option<OnceHold>> {
    validate_job(&hold.name)?;
    if lock_until_ms <= now_ms {
        return Err(Error::invalid(format!(
            "at_most must be positive: lock_until {lock_until_ms} ms is not after now {now_ms} ms"
        )));
    }
    if !hold.record.is_taken_at(now_ms) {
        return Ok(None);
    }
    let key = once_key(client, &hold.name);
    let mut record = OnceRecord {
        lock_until_ms,
        ..hold.record.clone()
    };
    match once_swap(client, &key, hold.record.revision, Some(encode(&record))).await? {
        Ok(rev) => {
            record.revision = rev;
            Ok(Some(OnceHold {
                name: hold.name.clone(),
                record,
            }))
        }
        Err(_) => Ok(None),
    }
}

/// The body of [`Client::once_record`].
pub(crate) async fn once_record(client: &Client, name: &str) -> Result<Option<OnceRecord>> {
    validate_job(name)?;
    let key = once_key(client, name);
    let r = client
        .call(Some(client.request_bound()), |mut c| {
            let k = key.clone();
            async move { c.get(k, None).await }
        })
        .await?;
    Ok(r.kvs()
        .first()
        .map(|kv| decode(kv.value(), kv.mod_revision())))
}

/// Run-once as a value: the job `name` of a client ([`Client::once_take`],
/// [`Client::once_finish`], [`Client::once_extend`], [`Client::once_record`]).
#[derive(Clone, Debug)]
pub struct Once {
    client: Client,
    name: String,
}

impl Once {
    /// The job `name` of `client` (nothing is sent until a call).
    pub fn new(client: &Client, name: impl Into<String>) -> Once {
        Once {
            client: client.clone(),
            name: name.into(),
        }
    }

    /// Take the run: [`Client::once_take`].
    pub async fn take(&self, at_most: Duration) -> Result<Option<OnceHold>> {
        once_take(&self.client, &self.name, at_most).await
    }

    /// Finish a run: [`Client::once_finish`].
    pub async fn finish(&self, hold: &OnceHold, at_least: Duration) -> Result<bool> {
        once_finish(&self.client, hold, at_least).await
    }

    /// Extend a run: [`Client::once_extend`].
    pub async fn extend(&self, hold: &OnceHold, at_most: Duration) -> Result<Option<OnceHold>> {
        once_extend(&self.client, hold, at_most).await
    }

    /// The job's record: [`Client::once_record`].
    pub async fn record(&self) -> Result<Option<OnceRecord>> {
        once_record(&self.client, &self.name).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_foreign_values_count_as_expired() {
        let r = OnceRecord {
            lock_until_ms: 20,
            locked_at_ms: 10,
            locked_by: "h\"x".into(),
            pid: 7,
            revision: 5,
        };
        assert_eq!(decode(encode(&r).as_bytes(), 5), r);
        let junk = decode(b"not json", 9);
        assert_eq!((junk.lock_until_ms, junk.revision), (0, 9));
        assert!(!junk.is_taken_at(0));
        assert!(r.is_taken_at(19));
        assert!(!r.is_taken_at(20));
    }
}
