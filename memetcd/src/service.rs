//! etcd's gRPC services over the store: KV, Watch, Lease, and the parts of
//! Maintenance and Cluster a client asks at connect (Status, MemberList).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

use crate::pb::etcdserverpb as pb;
use crate::pb::etcdserverpb::{
    cluster_server::Cluster, kv_server::Kv, lease_server::Lease, maintenance_server::Maintenance,
    watch_server::Watch,
};
use crate::pb::mvccpb::event::EventType;
use crate::store::{err, Store, MAX_REQUEST_BYTES};

type Rpc<T> = Result<Response<T>, Status>;
type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[derive(Clone)]
pub(crate) struct Svc {
    pub store: Arc<Store>,
    pub url: String,
}

fn too_large(m: &impl Message) -> Result<(), Status> {
    if m.encoded_len() > MAX_REQUEST_BYTES {
        return Err(err(tonic::Code::InvalidArgument, "request is too large"));
    }
    Ok(())
}

impl Svc {
    /// Wait at the store's fault gate ([`crate::faults`]): the connection of
    /// `r`, and the leases the request names.
    async fn admit<T>(&self, r: &Request<T>, leases: &[i64]) {
        self.store.faults.gate(r.remote_addr(), leases).await
    }
}

/// The leases a put or a transaction's top-level puts attach keys to.
fn put_leases(t: &pb::TxnRequest) -> Vec<i64> {
    use pb::request_op::Request as R;
    t.success
        .iter()
        .chain(&t.failure)
        .filter_map(|op| match &op.request {
            Some(R::RequestPut(p)) if p.lease != 0 => Some(p.lease),
            _ => None,
        })
        .collect()
}

fn unimplemented(what: &str) -> Status {
    Status::unimplemented(format!(
        "{what} is not implemented by the in-process etcd (mem://)"
    ))
}

#[tonic::async_trait]
impl Kv for Svc {
    async fn range(&self, r: Request<pb::RangeRequest>) -> Rpc<pb::RangeResponse> {
        self.admit(&r, &[]).await;
        let r = r.into_inner();
        let (mut resp, h) = self.store.with(|m| m.range(&r))?;
        resp.header = Some(h);
        Ok(Response::new(resp))
    }

    type RangeStreamStream = Out<pb::RangeStreamResponse>;
    async fn range_stream(&self, _r: Request<pb::RangeRequest>) -> Rpc<Self::RangeStreamStream> {
        Err(unimplemented("RangeStream"))
    }

    async fn put(&self, r: Request<pb::PutRequest>) -> Rpc<pb::PutResponse> {
        let lease = [r.get_ref().lease]
            .into_iter()
            .filter(|l| *l != 0)
            .collect::<Vec<_>>();
        self.admit(&r, &lease).await;
        let r = r.into_inner();
        too_large(&r)?;
        let (mut resp, h) = self.store.with(|m| m.put(&r))?;
        resp.header = Some(h);
        Ok(Response::new(resp))
    }

    async fn delete_range(
        &self,
        r: Request<pb::DeleteRangeRequest>,
    ) -> Rpc<pb::DeleteRangeResponse> {
        self.admit(&r, &[]).await;
        let r = r.into_inner();
        let (mut resp, h) = self.store.with(|m| m.delete_range(&r))?;
        resp.header = Some(h);
        Ok(Response::new(resp))
    }

    async fn txn(&self, r: Request<pb::TxnRequest>) -> Rpc<pb::TxnResponse> {
        self.admit(&r, &put_leases(r.get_ref())).await;
        let r = r.into_inner();
        too_large(&r)?;
        let (mut resp, h) = self.store.with(|m| m.txn(&r))?;
        resp.header = Some(h);
        Ok(Response::new(resp))
    }

    async fn compact(&self, r: Request<pb::CompactionRequest>) -> Rpc<pb::CompactionResponse> {
        self.admit(&r, &[]).await;
        let rev = r.into_inner().revision;
        let (_, h) = self.store.with(|m| {
            if rev < m.compacted {
                return Err(err(
                    tonic::Code::OutOfRange,
                    "mvcc: required revision has been compacted",
                ));
            }
            if rev > m.rev {
                return Err(err(
                    tonic::Code::OutOfRange,
                    "mvcc: required revision is a future revision",
                ));
            }
            m.compact(rev);
            Ok(())
        })?;
        // Watchers behind the compaction learn it at once.
        self.store.rev_tx.send_modify(|_| {});
        Ok(Response::new(pb::CompactionResponse { header: Some(h) }))
    }
}

#[tonic::async_trait]
impl Lease for Svc {
    async fn lease_grant(&self, r: Request<pb::LeaseGrantRequest>) -> Rpc<pb::LeaseGrantResponse> {
        self.admit(&r, &[]).await;
        let conn = r.remote_addr();
        let r = r.into_inner();
        let now = tokio::time::Instant::now();
        let ((id, ttl), h) = self.store.with(|m| m.grant(r.id, r.ttl, now))?;
        self.store.faults.note(conn, id);
        self.store.lease_added.notify_one();
        Ok(Response::new(pb::LeaseGrantResponse {
            header: Some(h),
            id,
            ttl,
            error: String::new(),
        }))
    }

    async fn lease_revoke(
        &self,
        r: Request<pb::LeaseRevokeRequest>,
    ) -> Rpc<pb::LeaseRevokeResponse> {
        self.admit(&r, &[r.get_ref().id]).await;
        let id = r.into_inner().id;
        let (_, h) = self.store.with(|m| m.revoke(id))?;
        self.store.faults.forget(id);
        Ok(Response::new(pb::LeaseRevokeResponse { header: Some(h) }))
    }

    type LeaseKeepAliveStream = Out<pb::LeaseKeepAliveResponse>;
    async fn lease_keep_alive(
        &self,
        r: Request<Streaming<pb::LeaseKeepAliveRequest>>,
    ) -> Rpc<Self::LeaseKeepAliveStream> {
        self.admit(&r, &[]).await;
        let conn = r.remote_addr();
        let mut inbound = r.into_inner();
        let (tx, rx) = mpsc::channel(64);
        let store = self.store.clone();
        tokio::spawn(async move {
            while let Ok(Some(req)) = inbound.message().await {
                store.faults.note(conn, req.id);
                store.faults.gate(conn, &[req.id]).await;
                let now = tokio::time::Instant::now();
                let (ttl, h) = match store.with(|m| Ok(m.keep_alive(req.id, now))) {
                    Ok(v) => v,
                    Err(_) => break,
                };
                if tx
                    .send(Ok(pb::LeaseKeepAliveResponse {
                        header: Some(h),
                        id: req.id,
                        ttl,
                    }))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn lease_time_to_live(
        &self,
        r: Request<pb::LeaseTimeToLiveRequest>,
    ) -> Rpc<pb::LeaseTimeToLiveResponse> {
        self.store.faults.note(r.remote_addr(), r.get_ref().id);
        self.admit(&r, &[r.get_ref().id]).await;
        let r = r.into_inner();
        let now = tokio::time::Instant::now();
        let (resp, h) = self.store.with(|m| {
            Ok(match m.leases.get(&r.id) {
                // etcd answers a missing lease with TTL -1, not an error.
                None => pb::LeaseTimeToLiveResponse {
                    header: None,
                    id: r.id,
                    ttl: -1,
                    granted_ttl: 0,
                    keys: Vec::new(),
                },
                Some(l) => pb::LeaseTimeToLiveResponse {
                    header: None,
                    id: r.id,
                    ttl: l.expiry.saturating_duration_since(now).as_secs() as i64,
                    granted_ttl: l.ttl,
                    keys: if r.keys {
                        l.keys.iter().cloned().collect()
                    } else {
                        Vec::new()
                    },
                },
            })
        })?;
        Ok(Response::new(pb::LeaseTimeToLiveResponse {
            header: Some(h),
            ..resp
        }))
    }

    async fn lease_leases(
        &self,
        r: Request<pb::LeaseLeasesRequest>,
    ) -> Rpc<pb::LeaseLeasesResponse> {
        self.admit(&r, &[]).await;
        let (leases, h) = self.store.with(|m| {
            Ok(m.leases
                .keys()
                .map(|id| pb::LeaseStatus { id: *id })
                .collect())
        })?;
        Ok(Response::new(pb::LeaseLeasesResponse {
            header: Some(h),
            leases,
        }))
    }
}

/// One watch on a stream.
struct Watcher {
    key: Vec<u8>,
    range_end: Vec<u8>,
    /// The next revision to deliver.
    next: i64,
    prev_kv: bool,
    no_put: bool,
    no_delete: bool,
}

/// Responses above this many bytes are split (at event boundaries).
const CHUNK_BYTES: usize = 1 << 20;

/// Deliver what each watch has not seen yet; drop compacted ones. False when
/// the client went away.
async fn deliver(
    store: &Store,
    watchers: &mut HashMap<i64, Watcher>,
    tx: &mpsc::Sender<Result<pb::WatchResponse, Status>>,
) -> bool {
    let mut ids: Vec<i64> = watchers.keys().copied().collect();
    ids.sort_unstable();
    for id in ids {
        let w = &watchers[&id];
        let got = store.lock().events_since(w.next, &w.key, &w.range_end);
        match got {
            Err(compacted) => {
                watchers.remove(&id);
                let h = store.header(*store.rev_tx.borrow());
                let resp = pb::WatchResponse {
                    header: Some(h),
                    watch_id: id,
                    canceled: true,
                    compact_revision: compacted,
                    cancel_reason: "etcdserver: mvcc: required revision has been compacted".into(),
                    ..Default::default()
                };
                if tx.send(Ok(resp)).await.is_err() {
                    return false;
                }
            }
            Ok((events, rev)) => {
                let w = watchers.get_mut(&id).expect("present");
                w.next = rev + 1;
                let mut batch = Vec::new();
                let mut size = 0;
                let n = events.len();
                for (i, mut e) in events.into_iter().enumerate() {
                    let put = e.r#type == EventType::Put as i32;
                    if (put && w.no_put) || (!put && w.no_delete) {
                        continue;
                    }
                    if !w.prev_kv {
                        e.prev_kv = None;
                    }
                    size += e.encoded_len();
                    batch.push(e);
                    if size > CHUNK_BYTES || i + 1 == n {
                        let resp = pb::WatchResponse {
                            header: Some(store.header(rev)),
                            watch_id: id,
                            events: std::mem::take(&mut batch),
                            ..Default::default()
                        };
                        size = 0;
                        if tx.send(Ok(resp)).await.is_err() {
                            return false;
                        }
                    }
                }
                if !batch.is_empty() {
                    let resp = pb::WatchResponse {
                        header: Some(store.header(rev)),
                        watch_id: id,
                        events: batch,
                        ..Default::default()
                    };
                    if tx.send(Ok(resp)).await.is_err() {
                        return false;
                    }
                }
            }
        }
    }
    true
}

#[tonic::async_trait]
impl Watch for Svc {
    type WatchStream = Out<pb::WatchResponse>;
    async fn watch(&self, r: Request<Streaming<pb::WatchRequest>>) -> Rpc<Self::WatchStream> {
        self.admit(&r, &[]).await;
        let conn = r.remote_addr();
        let mut inbound = r.into_inner();
        let (tx, rx) = mpsc::channel(256);
        let store = self.store.clone();
        tokio::spawn(async move {
            let mut watchers: HashMap<i64, Watcher> = HashMap::new();
            let mut next_id: i64 = 0;
            let mut revs = store.rev_tx.subscribe();
            loop {
                tokio::select! {
                    m = inbound.message() => {
                        let Ok(Some(req)) = m else { break };
                        store.faults.gate(conn, &[]).await;
                        use pb::watch_request::RequestUnion as U;
                        match req.request_union {
                            Some(U::CreateRequest(c)) => {
                                let cur = store.lock().rev;
                                let id = if c.watch_id != 0 { c.watch_id } else {
                                    while watchers.contains_key(&next_id) { next_id += 1; }
                                    next_id += 1;
                                    next_id - 1
                                };
                                if watchers.contains_key(&id) {
                                    let resp = pb::WatchResponse {
                                        header: Some(store.header(cur)), watch_id: -1, created: true, canceled: true,
                                        cancel_reason: "mvcc: duplicate watch ID provided on the WatchStream".into(), ..Default::default()
                                    };
                                    if tx.send(Ok(resp)).await.is_err() { break }
                                    continue;
                                }
                                let mut no_put = false;
                                let mut no_delete = false;
                                for f in &c.filters {
                                    match pb::watch_create_request::FilterType::try_from(*f) {
                                        Ok(pb::watch_create_request::FilterType::Noput) => no_put = true,
                                        Ok(pb::watch_create_request::FilterType::Nodelete) => no_delete = true,
                                        Err(_) => {}
                                    }
                                }
                                let next = if c.start_revision > 0 { c.start_revision } else { cur + 1 };
                                watchers.insert(id, Watcher { key: c.key, range_end: c.range_end, next, prev_kv: c.prev_kv, no_put, no_delete });
                                let resp = pb::WatchResponse { header: Some(store.header(cur)), watch_id: id, created: true, ..Default::default() };
                                if tx.send(Ok(resp)).await.is_err() { break }
                                // History at or after the start revision is replayed now.
                                if !deliver(&store, &mut watchers, &tx).await { break }
                            }
                            // etcd answers nothing for a watch id it does not have.
                            Some(U::CancelRequest(c)) if watchers.remove(&c.watch_id).is_some() => {
                                let cur = store.lock().rev;
                                let resp = pb::WatchResponse { header: Some(store.header(cur)), watch_id: c.watch_id, canceled: true, ..Default::default() };
                                if tx.send(Ok(resp)).await.is_err() { break }
                            }
                            Some(U::CancelRequest(_)) => {}
                            Some(U::ProgressRequest(_)) => {
                                let cur = store.lock().rev;
                                let resp = pb::WatchResponse { header: Some(store.header(cur)), watch_id: -1, ..Default::default() };
                                if tx.send(Ok(resp)).await.is_err() { break }
                            }
                            None => {}
                        }
                    }
                    changed = revs.changed() => {
                        if changed.is_err() { break }
                        store.faults.gate(conn, &[]).await;
                        if !deliver(&store, &mut watchers, &tx).await { break }
                    }
                    _ = tx.closed() => break,
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

#[tonic::async_trait]
impl Maintenance for Svc {
    async fn alarm(&self, _r: Request<pb::AlarmRequest>) -> Rpc<pb::AlarmResponse> {
        let (_, h) = self.store.with(|_| Ok(()))?;
        Ok(Response::new(pb::AlarmResponse {
            header: Some(h),
            alarms: Vec::new(),
        }))
    }

    async fn status(&self, r: Request<pb::StatusRequest>) -> Rpc<pb::StatusResponse> {
        self.admit(&r, &[]).await;
        let (rev, h) = self.store.with(|m| Ok(m.rev))?;
        Ok(Response::new(pb::StatusResponse {
            header: Some(h),
            version: "3.5.0-memetcd".into(),
            leader: self.store.member_id,
            raft_index: rev as u64,
            raft_term: 2,
            raft_applied_index: rev as u64,
            storage_version: "3.5.0".into(),
            ..Default::default()
        }))
    }

    async fn defragment(&self, _r: Request<pb::DefragmentRequest>) -> Rpc<pb::DefragmentResponse> {
        let (_, h) = self.store.with(|_| Ok(()))?;
        Ok(Response::new(pb::DefragmentResponse { header: Some(h) }))
    }

    async fn hash(&self, _r: Request<pb::HashRequest>) -> Rpc<pb::HashResponse> {
        Err(unimplemented("Hash"))
    }

    async fn hash_kv(&self, _r: Request<pb::HashKvRequest>) -> Rpc<pb::HashKvResponse> {
        Err(unimplemented("HashKV"))
    }

    type SnapshotStream = Out<pb::SnapshotResponse>;
    async fn snapshot(&self, _r: Request<pb::SnapshotRequest>) -> Rpc<Self::SnapshotStream> {
        Err(unimplemented("Snapshot"))
    }

    async fn move_leader(&self, _r: Request<pb::MoveLeaderRequest>) -> Rpc<pb::MoveLeaderResponse> {
        Err(unimplemented("MoveLeader"))
    }

    async fn downgrade(&self, _r: Request<pb::DowngradeRequest>) -> Rpc<pb::DowngradeResponse> {
        Err(unimplemented("Downgrade"))
    }
}

#[tonic::async_trait]
impl Cluster for Svc {
    async fn member_add(&self, _r: Request<pb::MemberAddRequest>) -> Rpc<pb::MemberAddResponse> {
        Err(unimplemented("MemberAdd"))
    }

    async fn member_remove(
        &self,
        _r: Request<pb::MemberRemoveRequest>,
    ) -> Rpc<pb::MemberRemoveResponse> {
        Err(unimplemented("MemberRemove"))
    }

    async fn member_update(
        &self,
        _r: Request<pb::MemberUpdateRequest>,
    ) -> Rpc<pb::MemberUpdateResponse> {
        Err(unimplemented("MemberUpdate"))
    }

    async fn member_list(&self, r: Request<pb::MemberListRequest>) -> Rpc<pb::MemberListResponse> {
        self.admit(&r, &[]).await;
        let (_, h) = self.store.with(|_| Ok(()))?;
        let me = pb::Member {
            id: self.store.member_id,
            name: "memetcd".into(),
            peer_ur_ls: Vec::new(),
            client_ur_ls: vec![self.url.clone()],
            is_learner: false,
        };
        Ok(Response::new(pb::MemberListResponse {
            header: Some(h),
            members: vec![me],
        }))
    }

    async fn member_promote(
        &self,
        _r: Request<pb::MemberPromoteRequest>,
    ) -> Rpc<pb::MemberPromoteResponse> {
        Err(unimplemented("MemberPromote"))
    }
}
