//! The MVCC store: every key's versions, the event history watches replay,
//! and the leases. One mutex guards it all; every request is a short critical
//! section, so requests are linearizable as on a single etcd member.
//!
//! Revisions follow etcd's MVCC: the store starts at revision 1; every Put,
//! every DeleteRange that deletes something and every Txn that writes is one
//! new revision (all ops of a Txn share it); a lease that expires or is
//! revoked deletes its keys at one revision. A key's `create_revision` is the
//! revision of the put that created it (since its last delete), `version`
//! counts its puts since then, `mod_revision` is its last put's revision.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;
use tonic::Status;

use crate::pb::etcdserverpb as pb;
use crate::pb::mvccpb::{event::EventType, Event, KeyValue};

mod txncheck;
use txncheck::*;

mod shared;
pub(crate) use shared::Store;

/// Revisions of history kept for watches and reads at a past revision; a
/// watch or read further back is answered as compacted, as etcd does after a
/// compaction.
pub const HISTORY: i64 = 10_000;
/// etcd's minimum lease TTL with its default election timeout (1 s) and
/// heartbeat (100 ms): ceil(1.5 * 10 * 0.1 s) = 2 s. Shorter TTLs are raised.
pub const MIN_TTL: i64 = 2;
/// etcd's `MaxLeaseTTL`.
pub const MAX_TTL: i64 = 9_000_000_000;
/// etcd's default `--max-txn-ops`.
pub const MAX_TXN_OPS: usize = 128;
/// etcd's default `--max-request-bytes` (1.5 MiB).
pub const MAX_REQUEST_BYTES: usize = 1536 * 1024;

pub(crate) const CLUSTER_ID: u64 = 0x6d65_6d65_7463_6401;

pub(crate) fn err(code: tonic::Code, msg: &str) -> Status {
    Status::new(code, format!("etcdserver: {msg}"))
}

fn lease_not_found() -> Status {
    err(tonic::Code::NotFound, "requested lease not found")
}

pub(crate) struct Lease {
    pub ttl: i64,
    pub expiry: Instant,
    pub keys: BTreeSet<Vec<u8>>,
}

pub(crate) struct Mvcc {
    pub rev: i64,
    pub compacted: i64,
    /// Every key's versions, oldest first: (revision, value or tombstone).
    keys: BTreeMap<Vec<u8>, Vec<(i64, Option<KeyValue>)>>,
    /// Events of each revision at or above `compacted`, prev_kv filled in.
    events: VecDeque<(i64, Vec<Event>)>,
    pub leases: HashMap<i64, Lease>,
    next_lease: i64,
}

type KeyBounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);
/// A branch's puts and its delete ranges.
type BranchWrites = (HashSet<Vec<u8>>, Vec<(Vec<u8>, Vec<u8>)>);

/// The keys `key`..`range_end` select, in etcd's encoding: an empty end is
/// the one key, `\0` is every key from `key` on.
pub(crate) fn bounds<'a>(key: &'a [u8], range_end: &'a [u8]) -> Option<KeyBounds<'a>> {
    if range_end.is_empty() {
        return Some((Bound::Included(key), Bound::Included(key)));
    }
    if range_end == [0] {
        return Some((Bound::Included(key), Bound::Unbounded));
    }
    if range_end <= key {
        return None;
    }
    Some((Bound::Included(key), Bound::Excluded(range_end)))
}

pub(crate) fn in_range(k: &[u8], key: &[u8], range_end: &[u8]) -> bool {
    if range_end.is_empty() {
        return k == key;
    }
    if range_end == [0] {
        return k >= key;
    }
    k >= key && k < range_end
}

fn at(versions: &[(i64, Option<KeyValue>)], rev: i64) -> Option<&KeyValue> {
    versions
        .iter()
        .rev()
        .find(|(r, _)| *r <= rev)
        .and_then(|(_, v)| v.as_ref())
}

impl Mvcc {
    pub fn new(seed: i64) -> Mvcc {
        Mvcc {
            rev: 1,
            compacted: 0,
            keys: BTreeMap::new(),
            events: VecDeque::new(),
            leases: HashMap::new(),
            next_lease: seed,
        }
    }

    fn current(&self, key: &[u8]) -> Option<&KeyValue> {
        self.keys
            .get(key)
            .and_then(|v| v.last())
            .and_then(|(_, v)| v.as_ref())
    }

    /// Live keys in a range at revision `rev`, in key order.
    fn scan(&self, key: &[u8], range_end: &[u8], rev: i64) -> Vec<&KeyValue> {
        let Some(b) = bounds(key, range_end) else {
            return Vec::new();
        };
        self.keys
            .range::<[u8], _>(b)
            .filter_map(|(_, v)| at(v, rev))
            .collect()
    }

    pub fn range(&self, r: &pb::RangeRequest) -> Result<pb::RangeResponse, Status> {
        if r.key.is_empty() {
            return Err(err(tonic::Code::InvalidArgument, "key is not provided"));
        }
        let rev = match r.revision {
            0 => self.rev,
            x if x > self.rev => {
                return Err(err(
                    tonic::Code::OutOfRange,
                    "mvcc: required revision is a future revision",
                ))
            }
            x if x < self.compacted => {
                return Err(err(
                    tonic::Code::OutOfRange,
                    "mvcc: required revision has been compacted",
                ))
            }
            x => x,
        };
        Ok(self.range_rev(r, rev))
    }

    /// `range` at a revision already checked (or a Txn's pending one, which
    /// the key versions already hold).
    fn range_rev(&self, r: &pb::RangeRequest, rev: i64) -> pb::RangeResponse {
        let all = self.scan(&r.key, &r.range_end, rev);
        let count = all.len() as i64;
        let mut kvs: Vec<KeyValue> = Vec::new();
        if !r.count_only {
            kvs = all
                .into_iter()
                .filter(|kv| {
                    (r.min_mod_revision == 0 || kv.mod_revision >= r.min_mod_revision)
                        && (r.max_mod_revision == 0 || kv.mod_revision <= r.max_mod_revision)
                        && (r.min_create_revision == 0
                            || kv.create_revision >= r.min_create_revision)
                        && (r.max_create_revision == 0
                            || kv.create_revision <= r.max_create_revision)
                })
                .cloned()
                .collect();
            use pb::range_request::{SortOrder, SortTarget};
            let target = SortTarget::try_from(r.sort_target).unwrap_or(SortTarget::Key);
            let mut order = SortOrder::try_from(r.sort_order).unwrap_or(SortOrder::None);
            if order == SortOrder::None && target != SortTarget::Key {
                order = SortOrder::Ascend;
            }
            if order != SortOrder::None
                && !(order == SortOrder::Ascend && target == SortTarget::Key)
            {
                match target {
                    SortTarget::Key => kvs.sort_by(|a, b| a.key.cmp(&b.key)),
                    SortTarget::Version => kvs.sort_by_key(|kv| kv.version),
                    SortTarget::Create => kvs.sort_by_key(|kv| kv.create_revision),
                    SortTarget::Mod => kvs.sort_by_key(|kv| kv.mod_revision),
                    SortTarget::Value => kvs.sort_by(|a, b| a.value.cmp(&b.value)),
                }
                if order == SortOrder::Descend {
                    kvs.reverse();
                }
            }
        }
        let mut more = false;
        if r.limit > 0 && kvs.len() > r.limit as usize {
            kvs.truncate(r.limit as usize);
            more = true;
        }
        if r.keys_only {
            for kv in &mut kvs {
                kv.value.clear();
            }
        }
        pb::RangeResponse {
            header: None,
            kvs,
            more,
            count,
        }
    }

    fn compare(&self, c: &pb::Compare) -> bool {
        use pb::compare::{CompareResult, CompareTarget, TargetUnion};
        let target = CompareTarget::try_from(c.target).unwrap_or(CompareTarget::Version);
        let result = CompareResult::try_from(c.result).unwrap_or(CompareResult::Equal);
        let kvs = self.scan(&c.key, &c.range_end, self.rev);
        let zero = KeyValue::default();
        let kvs = if kvs.is_empty() {
            // etcd: a value compare on missing keys is false; any other
            // compares against a zero KeyValue.
            if target == CompareTarget::Value {
                return false;
            }
            vec![&zero]
        } else {
            kvs
        };
        kvs.into_iter().all(|kv| {
            let ord = match (target, &c.target_union) {
                (CompareTarget::Value, Some(TargetUnion::Value(v))) => {
                    kv.value.as_slice().cmp(v.as_slice())
                }
                (CompareTarget::Value, _) => kv.value.as_slice().cmp(&[][..]),
                (CompareTarget::Version, u) => kv.version.cmp(&int_of(u)),
                (CompareTarget::Create, u) => kv.create_revision.cmp(&int_of(u)),
                (CompareTarget::Mod, u) => kv.mod_revision.cmp(&int_of(u)),
                (CompareTarget::Lease, u) => kv.lease.cmp(&int_of(u)),
            };
            match result {
                CompareResult::Equal => ord.is_eq(),
                CompareResult::Greater => ord.is_gt(),
                CompareResult::Less => ord.is_lt(),
                CompareResult::NotEqual => ord.is_ne(),
            }
        })
    }

    /// The branch each (nested) Txn takes, decided on the store before the
    /// Txn as etcd does, in the order the ops are applied.
    fn path(&self, t: &pb::TxnRequest, out: &mut Vec<bool>) {
        let ok = t.compare.iter().all(|c| self.compare(c));
        out.push(ok);
        for op in if ok { &t.success } else { &t.failure } {
            if let Some(pb::request_op::Request::RequestTxn(n)) = &op.request {
                self.path(n, out);
            }
        }
    }

    /// What etcd checks before applying: leases exist, keys an
    /// `ignore_value`/`ignore_lease` put names exist.
    fn check(&self, t: &pb::TxnRequest, path: &[bool], at: &mut usize) -> Result<(), Status> {
        let ok = path[*at];
        *at += 1;
        for op in if ok { &t.success } else { &t.failure } {
            match &op.request {
                Some(pb::request_op::Request::RequestPut(p)) => self.check_put(p)?,
                Some(pb::request_op::Request::RequestTxn(n)) => self.check(n, path, at)?,
                Some(pb::request_op::Request::RequestRange(r)) if r.key.is_empty() => {
                    return Err(err(tonic::Code::InvalidArgument, "key is not provided"))
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn check_put(&self, p: &pb::PutRequest) -> Result<(), Status> {
        if p.key.is_empty() {
            return Err(err(tonic::Code::InvalidArgument, "key is not provided"));
        }
        if (p.ignore_value || p.ignore_lease) && self.current(&p.key).is_none() {
            return Err(err(tonic::Code::InvalidArgument, "key not found"));
        }
        if p.ignore_value && !p.value.is_empty() {
            return Err(err(tonic::Code::InvalidArgument, "value is provided"));
        }
        if p.ignore_lease && p.lease != 0 {
            return Err(err(tonic::Code::InvalidArgument, "lease is provided"));
        }
        if !p.ignore_lease && p.lease != 0 && !self.leases.contains_key(&p.lease) {
            return Err(lease_not_found());
        }
        Ok(())
    }

    pub fn put(&mut self, p: &pb::PutRequest) -> Result<pb::PutResponse, Status> {
        self.check_put(p)?;
        let mut w = Writes::default();
        let prev = self.do_put(&mut w, p);
        self.commit(w);
        Ok(pb::PutResponse {
            header: None,
            prev_kv: if p.prev_kv { prev } else { None },
        })
    }

    pub fn delete_range(
        &mut self,
        d: &pb::DeleteRangeRequest,
    ) -> Result<pb::DeleteRangeResponse, Status> {
        if d.key.is_empty() {
            return Err(err(tonic::Code::InvalidArgument, "key is not provided"));
        }
        let mut w = Writes::default();
        let r = self.do_delete(&mut w, d);
        self.commit(w);
        Ok(r)
    }

    pub fn txn(&mut self, t: &pb::TxnRequest) -> Result<pb::TxnResponse, Status> {
        check_txn(t)?;
        let mut path = Vec::new();
        self.path(t, &mut path);
        self.check(t, &path, &mut 0)?;
        let mut w = Writes::default();
        let r = self.do_txn(&mut w, t, &path, &mut 0);
        self.commit(w);
        Ok(r)
    }

    fn do_txn(
        &mut self,
        w: &mut Writes,
        t: &pb::TxnRequest,
        path: &[bool],
        at: &mut usize,
    ) -> pb::TxnResponse {
        use pb::request_op::Request as Q;
        use pb::response_op::Response as A;
        let ok = path[*at];
        *at += 1;
        let mut responses = Vec::new();
        for op in if ok { &t.success } else { &t.failure } {
            let a = match &op.request {
                Some(Q::RequestRange(r)) => {
                    // Reads in a Txn see its own writes (all at the Txn's revision).
                    let pending = self.rev + if w.events.is_empty() { 0 } else { 1 };
                    let rev = if r.revision > 0 {
                        r.revision.clamp(self.compacted, pending)
                    } else {
                        pending
                    };
                    A::ResponseRange(self.range_rev(r, rev))
                }
                Some(Q::RequestPut(p)) => {
                    let prev = self.do_put(w, p);
                    A::ResponsePut(pb::PutResponse {
                        header: None,
                        prev_kv: if p.prev_kv { prev } else { None },
                    })
                }
                Some(Q::RequestDeleteRange(d)) => A::ResponseDeleteRange(self.do_delete(w, d)),
                Some(Q::RequestTxn(n)) => A::ResponseTxn(self.do_txn(w, n, path, at)),
                None => continue,
            };
            responses.push(pb::ResponseOp { response: Some(a) });
        }
        pb::TxnResponse {
            header: None,
            succeeded: ok,
            responses,
        }
    }

    fn do_put(&mut self, w: &mut Writes, p: &pb::PutRequest) -> Option<KeyValue> {
        let rev = self.rev + 1;
        let prev = self.current(&p.key).cloned();
        let lease = if p.ignore_lease {
            prev.as_ref().map_or(0, |kv| kv.lease)
        } else {
            p.lease
        };
        let value = if p.ignore_value {
            prev.as_ref().map(|kv| kv.value.clone()).unwrap_or_default()
        } else {
            p.value.clone()
        };
        let kv = KeyValue {
            key: p.key.clone(),
            create_revision: prev.as_ref().map_or(rev, |kv| kv.create_revision),
            mod_revision: rev,
            version: prev.as_ref().map_or(1, |kv| kv.version + 1),
            value,
            lease,
        };
        if let Some(old) = prev
            .as_ref()
            .map(|kv| kv.lease)
            .filter(|l| *l != 0 && *l != lease)
        {
            if let Some(l) = self.leases.get_mut(&old) {
                l.keys.remove(&p.key);
            }
        }
        if lease != 0 {
            if let Some(l) = self.leases.get_mut(&lease) {
                l.keys.insert(p.key.clone());
            }
        }
        self.keys
            .entry(p.key.clone())
            .or_default()
            .push((rev, Some(kv.clone())));
        w.events.push(Event {
            r#type: EventType::Put as i32,
            kv: Some(kv),
            prev_kv: prev.clone(),
        });
        prev
    }

    fn do_delete(&mut self, w: &mut Writes, d: &pb::DeleteRangeRequest) -> pb::DeleteRangeResponse {
        let rev = self.rev + 1;
        let victims: Vec<KeyValue> = self
            .scan(&d.key, &d.range_end, rev)
            .into_iter()
            .cloned()
            .collect();
        for kv in &victims {
            if kv.lease != 0 {
                if let Some(l) = self.leases.get_mut(&kv.lease) {
                    l.keys.remove(&kv.key);
                }
            }
            self.keys
                .entry(kv.key.clone())
                .or_default()
                .push((rev, None));
            let tomb = KeyValue {
                key: kv.key.clone(),
                mod_revision: rev,
                ..Default::default()
            };
            w.events.push(Event {
                r#type: EventType::Delete as i32,
                kv: Some(tomb),
                prev_kv: Some(kv.clone()),
            });
        }
        pb::DeleteRangeResponse {
            header: None,
            deleted: victims.len() as i64,
            prev_kvs: if d.prev_kv { victims } else { Vec::new() },
        }
    }

    /// Make the writes one revision (none if nothing changed).
    fn commit(&mut self, w: Writes) {
        if w.events.is_empty() {
            return;
        }
        self.rev += 1;
        self.events.push_back((self.rev, w.events));
        if self.rev - self.compacted > HISTORY + HISTORY / 10 {
            self.compact(self.rev - HISTORY);
        }
    }

    /// Drop history below `c`; reads at `c` and watches from `c` still work.
    pub fn compact(&mut self, c: i64) {
        if c <= self.compacted {
            return;
        }
        self.compacted = c;
        while self.events.front().is_some_and(|(r, _)| *r < c) {
            self.events.pop_front();
        }
        self.keys.retain(|_, vs| {
            // Keep what is visible at `c` (if live) and everything after.
            let keep_from = vs.iter().rposition(|(r, _)| *r <= c).unwrap_or(0);
            vs.drain(..keep_from);
            if vs.first().is_some_and(|(r, v)| *r <= c && v.is_none()) {
                vs.remove(0);
            }
            !vs.is_empty()
        });
    }

    pub fn grant(&mut self, id: i64, ttl: i64, now: Instant) -> Result<(i64, i64), Status> {
        if ttl > MAX_TTL {
            return Err(err(tonic::Code::OutOfRange, "too large lease TTL"));
        }
        let ttl = ttl.max(MIN_TTL);
        let id = if id == 0 {
            loop {
                self.next_lease = self.next_lease.wrapping_add(1) & i64::MAX;
                if self.next_lease > 0 && !self.leases.contains_key(&self.next_lease) {
                    break self.next_lease;
                }
            }
        } else if id < 0 {
            return Err(err(
                tonic::Code::InvalidArgument,
                "lease ID must be positive",
            ));
        } else if self.leases.contains_key(&id) {
            return Err(err(tonic::Code::FailedPrecondition, "lease already exists"));
        } else {
            id
        };
        self.leases.insert(
            id,
            Lease {
                ttl,
                expiry: now + Duration::from_secs(ttl as u64),
                keys: BTreeSet::new(),
            },
        );
        Ok((id, ttl))
    }

    /// Revoke a lease: its keys go at one revision.
    pub fn revoke(&mut self, id: i64) -> Result<(), Status> {
        let lease = self.leases.remove(&id).ok_or_else(lease_not_found)?;
        let mut w = Writes::default();
        for k in lease.keys {
            self.do_delete(
                &mut w,
                &pb::DeleteRangeRequest {
                    key: k,
                    ..Default::default()
                },
            );
        }
        self.commit(w);
        Ok(())
    }

    pub fn keep_alive(&mut self, id: i64, now: Instant) -> i64 {
        match self.leases.get_mut(&id) {
            Some(l) => {
                l.expiry = now + Duration::from_secs(l.ttl as u64);
                l.ttl
            }
            None => 0,
        }
    }

    /// The events of revisions `from..` in a watch's range, the revision they
    /// run to, or `Err(compacted)` when `from` is older than the history.
    pub fn events_since(
        &self,
        from: i64,
        key: &[u8],
        range_end: &[u8],
    ) -> Result<(Vec<Event>, i64), i64> {
        if from < self.compacted {
            return Err(self.compacted);
        }
        let start = self.events.partition_point(|(r, _)| *r < from);
        let mut out = Vec::new();
        for (_, evs) in self.events.range(start..) {
            out.extend(
                evs.iter()
                    .filter(|e| {
                        e.kv.as_ref()
                            .is_some_and(|kv| in_range(&kv.key, key, range_end))
                    })
                    .cloned(),
            );
        }
        Ok((out, self.rev))
    }
}

fn int_of(u: &Option<pb::compare::TargetUnion>) -> i64 {
    use pb::compare::TargetUnion as T;
    match u {
        Some(T::Version(v) | T::CreateRevision(v) | T::ModRevision(v) | T::Lease(v)) => *v,
        _ => 0,
    }
}

#[derive(Default)]
struct Writes {
    events: Vec<Event>,
}

#[cfg(test)]
mod tests {
    //! The MVCC rules etcdlock's protocol relies on, checked on the store
    //! alone (the conformance table runs the whole client on it too).
    use super::*;
    use pb::compare::{CompareResult, CompareTarget, TargetUnion};
    use pb::request_op::Request;

    fn put(m: &mut Mvcc, k: &str, v: &str, lease: i64) -> Result<pb::PutResponse, Status> {
        m.put(&pb::PutRequest {
            key: k.into(),
            value: v.into(),
            lease,
            prev_kv: true,
            ..Default::default()
        })
    }

    fn get(m: &Mvcc, k: &str, end: &str, rev: i64) -> Result<pb::RangeResponse, Status> {
        m.range(&pb::RangeRequest {
            key: k.into(),
            range_end: end.into(),
            revision: rev,
            ..Default::default()
        })
    }

    fn keys(r: &pb::RangeResponse) -> Vec<String> {
        r.kvs
            .iter()
            .map(|kv| String::from_utf8_lossy(&kv.key).into_owned())
            .collect()
    }

    /// `create_revision(key) == 0` then put, else get: etcdlock's acquire Txn.
    fn create_if_absent(k: &str) -> pb::TxnRequest {
        pb::TxnRequest {
            compare: vec![pb::Compare {
                key: k.into(),
                target: CompareTarget::Create as i32,
                result: CompareResult::Equal as i32,
                target_union: Some(TargetUnion::CreateRevision(0)),
                ..Default::default()
            }],
            success: vec![pb::RequestOp {
                request: Some(Request::RequestPut(pb::PutRequest {
                    key: k.into(),
                    value: b"me".to_vec(),
                    ..Default::default()
                })),
            }],
            failure: vec![pb::RequestOp {
                request: Some(Request::RequestRange(pb::RangeRequest {
                    key: k.into(),
                    ..Default::default()
                })),
            }],
        }
    }

    #[test]
    fn revisions_count_writes_and_a_key_remembers_its_creation() {
        let mut m = Mvcc::new(1);
        assert_eq!(m.rev, 1);
        put(&mut m, "a", "1", 0).unwrap();
        put(&mut m, "a", "2", 0).unwrap();
        put(&mut m, "b", "1", 0).unwrap();
        assert_eq!(m.rev, 4);
        let r = get(&m, "a", "", 0).unwrap();
        let kv = &r.kvs[0];
        assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 3, 2));
        assert_eq!(kv.value, b"2");
        // A read at an older revision sees the older value.
        assert_eq!(get(&m, "a", "", 2).unwrap().kvs[0].value, b"1");
        // Delete, then put again: a new incarnation with a new create_revision.
        m.delete_range(&pb::DeleteRangeRequest {
            key: b"a".to_vec(),
            ..Default::default()
        })
        .unwrap();
        put(&mut m, "a", "3", 0).unwrap();
        let kv = &get(&m, "a", "", 0).unwrap().kvs[0];
        assert_eq!((kv.create_revision, kv.version), (6, 1));
    }

    #[test]
    fn a_prefix_range_is_in_key_order_and_stops_at_its_end() {
        let mut m = Mvcc::new(1);
        for k in ["jobs/2", "jobs/1", "jobs0", "jobs/x/1", "job"] {
            put(&mut m, k, "v", 0).unwrap();
        }
        // "jobs/" .. "jobs0": etcd's prefix end of "jobs/".
        let r = get(&m, "jobs/", "jobs0", 0).unwrap();
        assert_eq!(keys(&r), ["jobs/1", "jobs/2", "jobs/x/1"]);
        assert_eq!(r.count, 3);
        assert!(get(&m, "", "", 0).is_err(), "an empty key is refused");
    }

    #[test]
    fn the_acquire_txn_creates_once_and_otherwise_reads_the_holder() {
        let mut m = Mvcc::new(1);
        let first = m.txn(&create_if_absent("lock/k")).unwrap();
        assert!(first.succeeded);
        let second = m.txn(&create_if_absent("lock/k")).unwrap();
        assert!(!second.succeeded);
        match &second.responses[0].response {
            Some(pb::response_op::Response::ResponseRange(r)) => {
                assert_eq!(r.kvs[0].create_revision, 2);
            }
            other => panic!("{other:?}"),
        }
        // One revision per Txn, and a failed compare writes nothing.
        assert_eq!(m.rev, 2);
    }

    #[test]
    fn a_txn_that_writes_one_key_twice_is_refused_as_etcd_does() {
        let mut m = Mvcc::new(1);
        let mut t = create_if_absent("k");
        t.success.push(t.success[0].clone());
        let e = m.txn(&t).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert_eq!(m.rev, 1);
    }

    #[test]
    fn a_revoked_lease_deletes_its_keys_at_one_revision() {
        let mut m = Mvcc::new(1);
        let now = Instant::now();
        let (id, ttl) = m.grant(0, 1, now).unwrap();
        assert_eq!(ttl, MIN_TTL, "a TTL below the minimum is raised");
        put(&mut m, "l/1", "v", id).unwrap();
        put(&mut m, "l/2", "v", id).unwrap();
        put(&mut m, "other", "v", 0).unwrap();
        assert_eq!(
            put(&mut m, "l/3", "v", id + 1).unwrap_err().code(),
            tonic::Code::NotFound,
            "a put on an unknown lease"
        );
        let before = m.rev;
        m.revoke(id).unwrap();
        assert_eq!(m.rev, before + 1);
        assert!(get(&m, "l/", "l0", 0).unwrap().kvs.is_empty());
        assert_eq!(get(&m, "other", "", 0).unwrap().kvs.len(), 1);
        assert_eq!(
            m.keep_alive(id, now),
            0,
            "a revoked lease cannot be renewed"
        );
        assert!(m.revoke(id).is_err());
    }

    #[test]
    fn watch_history_replays_from_a_revision_until_compacted() {
        let mut m = Mvcc::new(1);
        put(&mut m, "w/a", "1", 0).unwrap();
        put(&mut m, "x", "1", 0).unwrap();
        m.delete_range(&pb::DeleteRangeRequest {
            key: b"w/a".to_vec(),
            prev_kv: true,
            ..Default::default()
        })
        .unwrap();
        let (evs, to) = m.events_since(2, b"w/", b"w0").unwrap();
        assert_eq!(to, 4);
        let kinds: Vec<i32> = evs.iter().map(|e| e.r#type).collect();
        assert_eq!(kinds, [EventType::Put as i32, EventType::Delete as i32]);
        assert_eq!(evs[1].kv.as_ref().unwrap().mod_revision, 4);
        m.compact(3);
        assert_eq!(m.events_since(2, b"w/", b"w0").unwrap_err(), 3);
        assert_eq!(m.events_since(3, b"w/", b"w0").unwrap().0.len(), 1);
        // A read below the compaction is refused; at it, it still works.
        assert!(get(&m, "x", "", 2).is_err());
        assert_eq!(get(&m, "x", "", 3).unwrap().kvs.len(), 1);
    }
}
