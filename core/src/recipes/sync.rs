//! Count-down latches and barriers on etcd (Java's `CountDownLatch` and a
//! one-shot `CyclicBarrier`, Redisson's `RCountDownLatch`, etcd's Go
//! `recipes.Barrier`/`DoubleBarrier`), for processes that must wait for each
//! other.
//!
//! Both live beside their name, `<ns><name>\0etcdlock-latch/` and
//! `<ns><name>\0etcdlock-barrier/` ([`crate::RECORD_MARK`]: never under a
//! lock's prefix, inside any RBAC range granted for the name), on a
//! *shared lease*: granted by whoever creates the latch or barrier, and
//! renewed by every client that has a handle to it open (with its own
//! session's keep-alives). When the last handle is closed (or its client's
//! session ends) the lease runs out and the keys go: nothing is left behind.
//!
//! - A latch is one record `.../n` (`{"initial":N,"count":C}`) and a
//!   gate key `.../g` that the count-down reaching zero deletes in
//!   the same Txn; waiters watch the gate's delete (the client's one watch
//!   stream), so all of them wake at once, with no polling. Both wait
//!   through the engine's one wait loop (engine/rule.rs), with a driver
//!   that reads the state and names the gate key to wait behind.
//! - A barrier is a gate key `.../gate` (`{"parties":P}`) and one
//!   key per waiting party `.../p/<lease hex>` on the party's
//!   session lease. The party that makes the count `P` deletes the gate and
//!   puts `.../done` in one Txn: every party wakes at once. A party
//!   that dies while waiting takes its key with it, so its place is free for
//!   another; a party that comes after the release is refused.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::engine::queue::{kvs, revision};
use crate::engine::waiter::{key_deleted, wait_out, Driver, Stop, Turn};
use crate::engine::waiter::{Interrupt, Own, WaitEnds};
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::names::{is_direct_child, show, validate_name, RECORD_MARK};
use crate::session::Session;
use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp};

mod barrier;

/// The largest count a latch and the most parties a barrier may have.
pub const MAX_SYNC_COUNT: u64 = 1 << 31;

/// A count-down latch shared by every process that opens the same name with
/// the same count: see [`Client::latch`]. Close it (or drop it) when done.
pub struct Latch {
    client: Client,
    name: String,
    record: Vec<u8>,
    gate: Vec<u8>,
    initial: u64,
    lease: i64,
    session: Arc<Session>,
    closed: AtomicBool,
}

/// A barrier for a fixed number of parties: see [`Client::barrier`].
pub struct Barrier {
    client: Client,
    name: String,
    parties: u32,
    base: Vec<u8>,
    lease: i64,
    session: Arc<Session>,
    closed: AtomicBool,
}

fn record_of(v: &[u8]) -> Option<(u64, u64)> {
    let v: serde_json::Value = serde_json::from_slice(v).ok()?;
    Some((v.get("initial")?.as_u64()?, v.get("count")?.as_u64()?))
}

fn parties_of(v: &[u8]) -> Option<u32> {
    let v: serde_json::Value = serde_json::from_slice(v).ok()?;
    v.get("parties")?
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
}

fn check_count(what: &str, n: u64) -> Result<()> {
    if n == 0 || n > MAX_SYNC_COUNT {
        return Err(Error::invalid(format!(
            "{what} must be between 1 and {MAX_SYNC_COUNT}, got {n}"
        )));
    }
    Ok(())
}

fn gone(kind: &str, name: &str) -> Error {
    Error::lost(
        LossReason::LeaseExpired,
        format!(
            "{kind} {} is gone: every client that had it open closed it or lost its session",
            show(name)
        ),
    )
}

pub(crate) fn sync_key(client: &Client, kind: &str, name: &str, leaf: &str) -> Vec<u8> {
    client.ns_key(format!("{name}{RECORD_MARK}{kind}/{leaf}").as_bytes())
}

pub(crate) async fn txn_now(client: &Client, txn: Txn) -> Result<etcd_client::TxnResponse> {
    client
        .call(Some(client.request_bound()), |mut c| {
            let t = txn.clone();
            async move { c.txn(t).await }
        })
        .await
}

/// A new shared lease with this client's TTL.
pub(crate) async fn shared_lease(client: &Client, session: &Session) -> Result<i64> {
    let ttl = session.ttl;
    let r = client
        .call_lease(Some(client.request_bound()), move |mut c| async move {
            c.grant(ttl, None).await
        })
        .await?;
    Ok(r.id())
}

pub(crate) fn revoke_later(client: &Client, lease: i64) {
    let c = client.clone();
    client.inner.handle.spawn(async move {
        let _ = c
            .call_lease(Some(c.request_bound()), move |mut cl| async move {
                cl.revoke(lease).await
            })
            .await;
    });
}

/// The body of [`Client::latch`].
pub(crate) async fn latch(client: &Client, name: &str, count: u64) -> Result<Latch> {
    validate_name(name)?;
    check_count("count", count)?;
    client.check_open()?;
    let session = client.session_by(client.request_bound()).await?;
    let (record, gate) = (
        sync_key(client, "latch", name, "n"),
        sync_key(client, "latch", name, "g"),
    );
    let mut ours = None;
    for _ in 0..3 {
        let r = txn_now(
            client,
            Txn::new().and_then([TxnOp::get(record.clone(), None)]),
        )
        .await?;
        let found = kvs(r.op_responses().first()).first().cloned();
        let kv = match found {
            Some(kv) => kv,
            None => {
                let lease = match ours {
                    Some(l) => l,
                    None => *ours.insert(shared_lease(client, &session).await?),
                };
                let body = format!("{{\"initial\":{count},\"count\":{count}}}");
                let with = || Some(PutOptions::new().with_lease(lease));
                let t = Txn::new()
                    .when([Compare::create_revision(
                        record.clone(),
                        CompareOp::Equal,
                        0,
                    )])
                    .and_then([
                        TxnOp::put(record.clone(), body, with()),
                        TxnOp::put(gate.clone(), "", with()),
                    ])
                    .or_else([TxnOp::get(record.clone(), None)]);
                let r = txn_now(client, t).await?;
                if r.succeeded() {
                    session.share(lease);
                    return Ok(Latch {
                        client: client.clone(),
                        name: name.into(),
                        record,
                        gate,
                        initial: count,
                        lease,
                        session,
                        closed: AtomicBool::new(false),
                    });
                }
                match kvs(r.op_responses().first()).first().cloned() {
                    Some(kv) => kv,
                    None => continue,
                }
            }
        };
        if let Some(l) = ours.take() {
            revoke_later(client, l);
        }
        let Some((initial, _)) = record_of(kv.value()) else {
            return Err(Error::invalid(format!(
                "latch {}: its record is not etcdlock's",
                show(name)
            )));
        };
        if initial != count {
            return Err(Error::invalid(format!(
                "latch {} was created with count {initial}, not {count}",
                show(name)
            )));
        }
        session.share(kv.lease());
        return Ok(Latch {
            client: client.clone(),
            name: name.into(),
            record,
            gate,
            initial,
            lease: kv.lease(),
            session,
            closed: AtomicBool::new(false),
        });
    }
    if let Some(l) = ours {
        revoke_later(client, l);
    }
    Err(Error::new(
        ErrorCode::Unavailable,
        format!("latch {}: created and gone three times over", show(name)),
    ))
}

/// The body of [`Client::barrier`].
pub(crate) async fn barrier(client: &Client, name: &str, parties: u32) -> Result<Barrier> {
    validate_name(name)?;
    check_count("parties", parties as u64)?;
    client.check_open()?;
    let session = client.session_by(client.request_bound()).await?;
    let (gate, done) = (
        sync_key(client, "barrier", name, "gate"),
        sync_key(client, "barrier", name, "done"),
    );
    let base = sync_key(client, "barrier", name, "");
    let mut ours = None;
    for _ in 0..3 {
        let read = || {
            [
                TxnOp::get(gate.clone(), None),
                TxnOp::get(done.clone(), Some(GetOptions::new().with_keys_only())),
            ]
        };
        let r = txn_now(client, Txn::new().and_then(read())).await?;
        let mut ops = r.op_responses();
        if ops.len() == 2 && kvs(ops.first()).is_empty() && kvs(ops.get(1)).is_empty() {
            let lease = match ours {
                Some(l) => l,
                None => *ours.insert(shared_lease(client, &session).await?),
            };
            let t = Txn::new()
                .when([
                    Compare::create_revision(gate.clone(), CompareOp::Equal, 0),
                    Compare::create_revision(done.clone(), CompareOp::Equal, 0),
                ])
                .and_then([TxnOp::put(
                    gate.clone(),
                    format!("{{\"parties\":{parties}}}"),
                    Some(PutOptions::new().with_lease(lease)),
                )])
                .or_else(read());
            let r = txn_now(client, t).await?;
            if r.succeeded() {
                session.share(lease);
                return Ok(Barrier {
                    client: client.clone(),
                    name: name.into(),
                    parties,
                    base,
                    lease,
                    session,
                    closed: AtomicBool::new(false),
                });
            }
            ops = r.op_responses();
        }
        if !kvs(ops.get(1)).is_empty() {
            if let Some(l) = ours.take() {
                revoke_later(client, l);
            }
            return Err(finished(name));
        }
        let Some(kv) = kvs(ops.first()).first().cloned() else {
            continue;
        };
        if let Some(l) = ours.take() {
            revoke_later(client, l);
        }
        match parties_of(kv.value()) {
            Some(p) if p == parties => {}
            Some(p) => {
                return Err(Error::invalid(format!(
                    "barrier {} was created for {p} parties, not {parties}",
                    show(name)
                )))
            }
            None => {
                return Err(Error::invalid(format!(
                    "barrier {}: its record is not etcdlock's",
                    show(name)
                )))
            }
        }
        session.share(kv.lease());
        return Ok(Barrier {
            client: client.clone(),
            name: name.into(),
            parties,
            base,
            lease: kv.lease(),
            session,
            closed: AtomicBool::new(false),
        });
    }
    if let Some(l) = ours {
        revoke_later(client, l);
    }
    Err(Error::new(
        ErrorCode::Unavailable,
        format!("barrier {}: created and gone three times over", show(name)),
    ))
}

/// What ends a latch's or a barrier's wait: the client's close, the
/// deadline (no cancel, no session of its own).
pub(crate) fn sync_ends(client: &Client, deadline: Option<Instant>) -> WaitEnds<'_> {
    WaitEnds {
        closed: &client.inner.closed,
        cancel: None,
        deadline,
        session: None,
    }
}

/// The error of a latch's or a barrier's wait that ended other than at the
/// deadline (the client was closed).
pub(crate) fn sync_stop(stop: Stop) -> Error {
    match stop {
        Stop::Failed(e) => e,
        Stop::End(_) => Error::new(ErrorCode::Closed, "the client was closed"),
    }
}

/// A latch's [`Driver`]: read the count; while it is above zero, wait for
/// the gate key's delete.
struct Zero<'a> {
    latch: &'a Latch,
    count: u64,
    live: Vec<i64>,
}

impl Driver for Zero<'_> {
    async fn turn(&mut self, _watches: &mut Vec<i64>) -> Result<Turn> {
        let (rev, _, count) = self.latch.read().await?;
        self.count = count;
        Ok(match count {
            0 => Turn::go(rev),
            _ => Turn::behind(rev, self.latch.gate.clone(), false),
        })
    }

    async fn wake(&mut self, client: &Client, watches: &mut Vec<i64>, turn: &Turn) {
        key_deleted(client, watches, &mut self.live, turn).await
    }
}

fn finished(name: &str) -> Error {
    Error::invalid(format!(
        "barrier {} has already released its parties; a finished barrier is not reused (use a new name per round)",
        show(name)
    ))
}

fn deadline_of(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}

impl Latch {
    /// The latch's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The count it was created with.
    pub fn initial(&self) -> u64 {
        self.initial
    }

    fn check(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::new(
                ErrorCode::Closed,
                format!("latch {} was closed", show(&self.name)),
            ));
        }
        self.client.check_open()
    }

    async fn read(&self) -> Result<(i64, i64, u64)> {
        let r = txn_now(
            &self.client,
            Txn::new().and_then([TxnOp::get(self.record.clone(), None)]),
        )
        .await?;
        let Some(kv) = kvs(r.op_responses().first()).first().cloned() else {
            return Err(gone("latch", &self.name));
        };
        let (_, count) = record_of(kv.value()).ok_or_else(|| gone("latch", &self.name))?;
        Ok((revision(&r), kv.mod_revision(), count))
    }

    /// The count now (one read).
    pub async fn count(&self) -> Result<u64> {
        self.check()?;
        Ok(self.read().await?.2)
    }

    /// Lower the count by one; at zero every waiter is released. At zero
    /// already it does nothing (as `CountDownLatch.countDown`). Returns the
    /// count after.
    pub async fn count_down(&self) -> Result<u64> {
        self.check()?;
        loop {
            let (_, m, count) = self.read().await?;
            if count == 0 {
                return Ok(0);
            }
            let body = format!("{{\"initial\":{},\"count\":{}}}", self.initial, count - 1);
            let mut ops = vec![TxnOp::put(
                self.record.clone(),
                body,
                Some(PutOptions::new().with_ignore_lease()),
            )];
            if count == 1 {
                ops.push(TxnOp::delete(self.gate.clone(), None));
            }
            let t = Txn::new()
                .when([Compare::mod_revision(
                    self.record.clone(),
                    CompareOp::Equal,
                    m,
                )])
                .and_then(ops);
            if txn_now(&self.client, t).await?.succeeded() {
                return Ok(count - 1);
            }
        }
    }

    /// Wait until the count is zero; `Timeout` after `timeout` (`None`: no
    /// limit; zero: look once).
    pub async fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        self.check()?;
        let c = &self.client;
        let mut zero = Zero {
            latch: self,
            count: 0,
            live: Vec::new(),
        };
        let ends = sync_ends(c, deadline_of(timeout));
        match wait_out(c, ends, Own::Nothing, true, &mut zero).await {
            Ok(_) => Ok(()),
            Err(Stop::End(Interrupt::Deadline)) => Err(Error::new(
                ErrorCode::Timeout,
                format!(
                    "latch {}: the count was still {} when the timeout ({:?}) ran out",
                    show(&self.name),
                    zero.count,
                    timeout.unwrap_or_default()
                ),
            )),
            Err(stop) => Err(sync_stop(stop)),
        }
    }

    /// Stop renewing the latch's lease from this handle (idempotent; drop
    /// does it too).
    pub fn close(&self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            self.session.unshare(self.lease);
        }
    }
}

impl Drop for Latch {
    fn drop(&mut self) {
        self.close();
    }
}

impl Latch {
    /// Open the latch `name` of `client`: [`Client::latch`].
    pub async fn open(client: &Client, name: &str, count: u64) -> Result<Latch> {
        latch(client, name, count).await
    }
}

impl Barrier {
    /// Open the barrier `name` of `client`: [`Client::barrier`].
    pub async fn open(client: &Client, name: &str, parties: u32) -> Result<Barrier> {
        barrier(client, name, parties).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latchs_record_is_read_back_and_anything_else_is_none() {
        assert_eq!(record_of(br#"{"initial":5,"count":3}"#), Some((5, 3)));
        assert_eq!(record_of(br#"{"initial":5}"#), None);
        assert_eq!(record_of(br#"{"initial":-1,"count":3}"#), None);
        assert_eq!(record_of(b"not json"), None);
    }

    #[test]
    fn a_barriers_parties_are_read_back_within_u32() {
        assert_eq!(parties_of(br#"{"parties":4}"#), Some(4));
        assert_eq!(parties_of(br#"{"parties":4294967296}"#), None);
        assert_eq!(parties_of(br#"{"parties":"4"}"#), None);
        assert_eq!(parties_of(b""), None);
    }

    #[test]
    fn counts_run_from_one_to_the_limit() {
        assert!(check_count("count", 1).is_ok());
        assert!(check_count("count", MAX_SYNC_COUNT).is_ok());
        for n in [0, MAX_SYNC_COUNT + 1] {
            let e = check_count("count", n).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument);
            assert!(
                e.message().starts_with("count must be between 1 and"),
                "{e}"
            );
        }
    }
}
