//! Lock-delay (Chubby's, Consul's `LockDelay`): after a holder that asked for
//! one vanishes without unlocking, the lock stays unavailable for the delay,
//! so the requests it still had in flight drain before anyone else acts.
//!
//! The holder's key dies with its session's lease, so the delay lives in a
//! record beside it that outlives it:
//! `<ns><name>\0etcdlock-delay/h/<key suffix>` (see [`crate::RECORD_MARK`]),
//! put by the holder when it
//! is granted the lock, under a *delay lease* of its session (TTL + delay,
//! renewed right after each of the session's keep-alives, never after the
//! session is lost). A clean unlock deletes key and record in one Txn. When
//! the session's lease ends instead (expiry, revoke, a partition), the record
//! stays until the delay lease expires: at least the delay after etcd
//! removed the key, by etcd's own clock. A contender that is first in the
//! queue is granted the lock only when no such record of another holder is
//! left (it watches the record's delete).
//!
//! Nobody can miss a record: a contender that asks for a delay also puts
//! `<ns><name>\0etcdlock-delay/w/<key suffix>` in the Txn that queues it,
//! and every acquisition counts the name's records in its own queueing Txn.
//! A holder with a delay was either ahead of us when we queued (its `w`
//! record, or its `h` record, was counted) or gone before (its `h` record
//! was counted): an acquisition that counted none can take the lock with no
//! further read, as one without lock-delay does; one that counted some reads the `h` records once
//! more when it comes first. `try_lock` compares the `h` records in its Txn.

use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::engine::queue::{kvs, revision};
use crate::engine::wait::{cancelled, closed_err, hold_ended, timeout_err};
use crate::engine::waiter::{key_deleted, wait_out, Driver, Stop, Turn};
use crate::engine::waiter::{Interrupt, Own, WaitEnds};
use crate::error::{Error, ErrorCode, Result};
use crate::guard::keys::why_deleted;
use crate::guard::Guard;
use crate::names::{is_direct_child, lost_err, owner_info, show, Mode, RECORD_MARK};
use crate::transport::Bound;

/// The record keys of one name.
pub(crate) struct Records {
    /// Every record of the name: what an acquisition counts.
    pub(crate) all: Vec<u8>,
    /// The prefix of the holders' records.
    pub(crate) held: Vec<u8>,
    /// The prefix of the waiters' records.
    pub(crate) waiting: Vec<u8>,
}

pub(crate) fn delay_records(client: &Client, name: &str) -> Records {
    Records::of(client.ns_key(name.as_bytes()))
}

impl Records {
    /// The record keys of the name whose namespaced key is `name`.
    pub(crate) fn of(name: Vec<u8>) -> Records {
        let mut all = name;
        all.extend_from_slice(RECORD_MARK.as_bytes());
        all.extend_from_slice(b"delay/");
        let (mut held, mut waiting) = (all.clone(), all.clone());
        held.extend_from_slice(b"h/");
        waiting.extend_from_slice(b"w/");
        Records { all, held, waiting }
    }

    /// The holder record of our `key` under the lock's `prefix`.
    pub(crate) fn held_of(&self, prefix: &[u8], key: &[u8]) -> Vec<u8> {
        [&self.held[..], &key[prefix.len()..]].concat()
    }

    /// The waiter record of our `key` under the lock's `prefix`.
    pub(crate) fn waiting_of(&self, prefix: &[u8], key: &[u8]) -> Vec<u8> {
        [&self.waiting[..], &key[prefix.len()..]].concat()
    }
}

/// The op that puts a record of ours (its value says who we are, as a lock
/// key's does) under the delay lease `lease`.
pub(crate) fn put_record(key: Vec<u8>, lease: i64) -> TxnOp {
    TxnOp::put(key, owner_info(), Some(PutOptions::new().with_lease(lease)))
}

/// Whether `kvs` (a read of the holders' records) holds a record of a holder
/// other than `ours`; the first such key.
pub(crate) fn blocking(
    held_prefix: &[u8],
    kvs: &[etcd_client::KeyValue],
    ours: &[u8],
) -> Option<Vec<u8>> {
    kvs.iter()
        .find(|kv| is_direct_child(held_prefix, kv.key()) && kv.key() != ours)
        .map(|kv| kv.key().to_vec())
}

/// The error of a try that met a lock-delay in effect.
pub(crate) fn in_delay(name: &str, mode: Mode, timeout: Option<Duration>) -> Error {
    match mode {
        Mode::Once => timeout_err(name, timeout),
        _ => Error::new(
            ErrorCode::WouldBlock,
            format!(
                "lock {} is in its lock-delay: a holder vanished without unlocking",
                show(name)
            ),
        ),
    }
}

/// What the gate needs to know of the acquisition.
pub(crate) struct Gate<'a> {
    pub(crate) mode: Mode,
    /// Our delay lease, if we asked for a delay (we put our record when granted).
    pub(crate) lease: Option<i64>,
    pub(crate) deadline: Option<Instant>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) cancel: &'a CancellationToken,
}

/// We are first in the queue of `g`'s lock: wait until no other holder's
/// delay record is left, then (with a delay of our own) put ours, in one
/// Txn conditional on our key. A try (or timeout zero) does not wait:
/// `WouldBlock` (`Timeout`). The caller releases `g` on an error. The wait
/// is the engine's ([`wait_out`]): it ends at the deadline, a cancel, a
/// close, or the end of our hold.
pub(crate) async fn delay_gate(client: &Client, g: &Guard, gate: Gate<'_>) -> Result<()> {
    let name = g.name().to_string();
    let prefix = crate::engine::keys::prefix(client, &name);
    let recs = delay_records(client, &name);
    let key = g.key_bytes().to_vec();
    let mine = (recs.held_of(&prefix, &key), recs.waiting_of(&prefix, &key));
    let bound = match gate.mode {
        Mode::Wait => Bound::Wait(gate.deadline),
        _ => client.request_bound(),
    };
    let mut driver = GateDriver {
        client,
        g,
        gate: &gate,
        name: &name,
        recs,
        key,
        mine,
        bound,
        live: Vec::new(),
    };
    let mut lost = g.lost_signal();
    let hold_ends = std::pin::pin!(lost.wait());
    let closed = client.inner.closed.clone();
    let ends = WaitEnds {
        closed: &closed,
        cancel: Some(gate.cancel),
        deadline: gate.deadline,
        session: None,
    };
    let may_wait = gate.mode == Mode::Wait;
    match wait_out(client, ends, Own::Hold(hold_ends), may_wait, &mut driver).await {
        Ok(t) if t.behind.is_empty() => Ok(()),
        Ok(_) => Err(in_delay(&name, gate.mode, gate.timeout)),
        Err(Stop::Failed(e)) => Err(e),
        Err(Stop::End(i)) => Err(match i {
            Interrupt::Deadline => timeout_err(&name, gate.timeout),
            Interrupt::Cancelled => cancelled(&name),
            Interrupt::HoldEnded(l) => hold_ended(&name, l, "the lock-delay ran"),
            Interrupt::SessionLost(l) => hold_ended(&name, Some(l), "the lock-delay ran"),
            Interrupt::Closed | Interrupt::OwnDeleted => closed_err(&name),
        }),
    }
}

/// The gate's [`Driver`]: each turn one gate Txn; wait for the delete of
/// the vanished holder's record it found.
struct GateDriver<'a> {
    client: &'a Client,
    g: &'a Guard,
    gate: &'a Gate<'a>,
    name: &'a str,
    recs: Records,
    key: Vec<u8>,
    /// Our holder and waiter records.
    mine: (Vec<u8>, Vec<u8>),
    bound: Bound,
    live: Vec<i64>,
}

impl Driver for GateDriver<'_> {
    async fn turn(&mut self, _watches: &mut Vec<i64>) -> Result<Turn> {
        let (client, g, name) = (self.client, self.g, self.name);
        let (mine_h, mine_w) = (&self.mine.0, &self.mine.1);
        let (key, token, bound) = (&self.key, g.fencing_token(), self.bound);
        let txn = gate_txn(&self.recs, key, token, (mine_h, mine_w), self.gate.lease);
        let resp = client
            .call(Some(bound), |mut c| {
                let t = txn.clone();
                async move { c.txn(t).await }
            })
            .await
            .map_err(|e| {
                if e.code() == ErrorCode::Timeout {
                    timeout_err(name, self.gate.timeout)
                } else {
                    e
                }
            })?;
        let rev = revision(&resp);
        if self.gate.lease.is_some() && resp.succeeded() {
            g.set_delay_records(vec![mine_h.clone(), mine_w.clone()]);
            return Ok(Turn::go(rev));
        }
        let ops = resp.op_responses();
        if !kvs(ops.get(1))
            .first()
            .is_some_and(|kv| kv.create_revision() == token)
        {
            return Err(self.lost().await);
        }
        if let Some(rec) = blocking(&self.recs.held, kvs(ops.first()), mine_h) {
            if self.gate.mode == Mode::Wait {
                tracing::debug!(lock = %name, record = %String::from_utf8_lossy(&rec), "waiting out a vanished holder's lock-delay");
            }
            return Ok(Turn::behind(rev, rec, false));
        }
        if let Some(lease) = self.gate.lease {
            // Only records of nested names stopped the compare: put ours.
            let t = Txn::new()
                .when([Compare::create_revision(
                    key.clone(),
                    CompareOp::Equal,
                    token,
                )])
                .and_then([
                    put_record(mine_h.clone(), lease),
                    TxnOp::delete(mine_w.clone(), None),
                ]);
            let r = client
                .call(Some(bound), |mut c| {
                    let t = t.clone();
                    async move { c.txn(t).await }
                })
                .await?;
            if !r.succeeded() {
                return Err(self.lost().await);
            }
            g.set_delay_records(vec![mine_h.clone(), mine_w.clone()]);
        }
        Ok(Turn::go(rev))
    }

    async fn wake(&mut self, client: &Client, watches: &mut Vec<i64>, turn: &Turn) {
        key_deleted(client, watches, &mut self.live, turn).await
    }
}

impl GateDriver<'_> {
    /// Our key went while the gate ran.
    async fn lost(&self) -> Error {
        let reason = why_deleted(self.client, self.g.session()).await;
        lost_err(
            self.name,
            reason,
            "our key was deleted while the lock-delay ran",
        )
    }
}

/// The gate's Txn: read the holder records and our key; with our own
/// delay `lease`, first try to put our holder record (and drop our
/// waiter's) if our key is ours and no holder record is there.
fn gate_txn(
    recs: &Records,
    key: &[u8],
    token: i64,
    (mine_h, mine_w): (&[u8], &[u8]),
    lease: Option<i64>,
) -> Txn {
    let read = TxnOp::get(
        recs.held.clone(),
        Some(GetOptions::new().with_prefix().with_keys_only()),
    );
    let ours = TxnOp::get(key.to_vec(), Some(GetOptions::new().with_keys_only()));
    match lease {
        // Put ours only if no other holder's record is there: the
        // compare cannot tell nested names apart, so it reads too.
        Some(lease) => Txn::new()
            .when([
                Compare::create_revision(key.to_vec(), CompareOp::Equal, token),
                Compare::create_revision(recs.held.clone(), CompareOp::Equal, 0)
                    .with_range(crate::names::prefix_end(&recs.held)),
            ])
            .and_then([
                put_record(mine_h.to_vec(), lease),
                TxnOp::delete(mine_w.to_vec(), None),
            ])
            .or_else([read, ours]),
        None => Txn::new().and_then([read, ours]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_names_records_live_under_its_record_mark_apart_from_its_keys() {
        let r = Records::of(b"app/jobs".to_vec());
        let all = format!("app/jobs{RECORD_MARK}delay/");
        assert_eq!(r.all, all.as_bytes());
        assert_eq!(r.held, format!("{all}h/").as_bytes());
        assert_eq!(r.waiting, format!("{all}w/").as_bytes());
        // Not a contender of the lock: the records are no direct child of `jobs/`.
        assert!(!is_direct_child(b"app/jobs/", &r.held));
    }

    #[test]
    fn a_keys_records_are_named_after_the_key_under_the_prefix() {
        let r = Records::of(b"jobs".to_vec());
        let (prefix, key) = (&b"jobs/"[..], &b"jobs/694d7a3b2c1e"[..]);
        assert_eq!(
            r.held_of(prefix, key),
            [&r.held[..], b"694d7a3b2c1e"].concat()
        );
        assert_eq!(
            r.waiting_of(prefix, key),
            [&r.waiting[..], b"694d7a3b2c1e"].concat()
        );
    }

    #[test]
    fn a_lock_delay_is_would_block_for_a_try_and_timeout_for_timeout_zero() {
        let e = in_delay("jobs", Mode::Try, None);
        assert_eq!(e.code(), ErrorCode::WouldBlock);
        assert!(e.message().contains("lock-delay"), "{e}");
        let e = in_delay("jobs", Mode::Once, Some(Duration::ZERO));
        assert_eq!(e.code(), ErrorCode::Timeout);
    }
}
