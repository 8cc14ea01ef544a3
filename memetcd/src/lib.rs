//! An in-process etcd v3 server for tests: etcd's own gRPC API (KV, Watch,
//! Lease, and Maintenance.Status / Cluster.MemberList), generated from etcd's
//! protos, over an MVCC store that numbers revisions as etcd does.
//!
//! [`endpoint`] starts the store named `name` on first use (one per name per
//! process) and returns the `http://127.0.0.1:PORT` URL it is served on. The
//! server listens on the loopback interface only and runs on its own thread
//! (a one-worker tokio runtime that lives as long as the process), so a
//! store outlives the runtime of the test that started it and every client
//! in the process, whatever its runtime, reaches the same store.
//!
//! It locks nothing across processes: it is for unit tests. There is no
//! Raft, no persistence, no auth and no TLS; history is kept for the last
//! [`store::HISTORY`] revisions (older watch start revisions and reads are
//! answered as compacted, as etcd does).

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};

/// etcd's protos, generated with `tonic-prost-build` (server side only).
#[allow(clippy::all, missing_docs)]
pub mod pb {
    pub mod mvccpb {
        include!("gen/mvccpb.rs");
    }
    pub mod authpb {
        include!("gen/authpb.rs");
    }
    pub mod etcdserverpb {
        include!("gen/etcdserverpb.rs");
    }
}

mod faults;
mod service;
pub mod store;

/// Why a store could not be started.
#[derive(Debug)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

fn runtime() -> Result<&'static tokio::runtime::Runtime, StartError> {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    if let Some(rt) = RT.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("memetcd")
        .enable_all()
        .build()
        .map_err(|e| StartError(format!("cannot start the in-process etcd's runtime: {e}")))?;
    Ok(RT.get_or_init(|| rt))
}

/// The URL (`http://127.0.0.1:PORT`) of the in-process store `name`,
/// started on first use; `""` is the process-wide default store. Every call
/// with the same name in one process returns the same store.
pub fn endpoint(name: &str) -> Result<String, StartError> {
    Ok(handle(name)?.url)
}

/// A handle on the in-process store `name` (started on first use, as by
/// [`endpoint`]): what a test does to it, as a fault or another party would.
#[derive(Clone)]
pub struct Handle {
    store: Arc<store::Store>,
    url: String,
}

/// A key as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// The lease the key lives on (0: none).
    pub lease: i64,
    pub create_revision: i64,
    pub mod_revision: i64,
}

impl Handle {
    /// The store's `http://127.0.0.1:PORT` URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Answer nothing for `d`: every request and watch event waits (as on
    /// an etcd that hangs) and is answered when it ends, if its caller still
    /// waits. Leases expire meanwhile at their time-to-live. A later call
    /// replaces the end; zero ends the silence now.
    pub fn silence(&self, d: std::time::Duration) {
        self.store.faults.silence(d)
    }

    /// Answer nothing to the client of lease `lease` for `d` (its
    /// connection and every request naming the lease), while every other
    /// client goes on. Zero ends the stall now.
    pub fn stall(&self, lease: i64, d: std::time::Duration) {
        self.store.faults.stall(lease, d)
    }

    /// End every silence and stall now.
    pub fn resume(&self) {
        self.store.faults.resume()
    }

    /// End lease `lease` now, as its time-to-live would: its keys are
    /// deleted at one revision. False if there is no such lease.
    pub fn expire_lease(&self, lease: i64) -> bool {
        self.store.expire(lease)
    }

    /// Delete `key`, as another party would (an operator, a script). False
    /// if there was no such key.
    pub fn delete(&self, key: &[u8]) -> bool {
        let req = pb::etcdserverpb::DeleteRangeRequest {
            key: key.to_vec(),
            ..Default::default()
        };
        self.store
            .with(|m| Ok(m.delete_range(&req)?.deleted > 0))
            .map(|(d, _)| d)
            .unwrap_or(false)
    }

    /// The keys in etcd's range `[key, range_end)` (`range_end` empty: the
    /// one key; `[0]`, `[0]`: every key), in key order.
    pub fn keys(&self, key: &[u8], range_end: &[u8]) -> Vec<Key> {
        let req = pb::etcdserverpb::RangeRequest {
            key: key.to_vec(),
            range_end: range_end.to_vec(),
            ..Default::default()
        };
        let kvs = self
            .store
            .lock()
            .range(&req)
            .map(|r| r.kvs)
            .unwrap_or_default();
        kvs.into_iter()
            .map(|kv| Key {
                key: kv.key,
                value: kv.value,
                lease: kv.lease,
                create_revision: kv.create_revision,
                mod_revision: kv.mod_revision,
            })
            .collect()
    }
}

/// The handle of the in-process store `name`, started on first use; `""` is
/// the process-wide default store (`mem://`).
pub fn handle(name: &str) -> Result<Handle, StartError> {
    static STORES: OnceLock<Mutex<HashMap<String, Handle>>> = OnceLock::new();
    let stores = STORES.get_or_init(Default::default);
    let mut stores = stores.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(h) = stores.get(name) {
        return Ok(h.clone());
    }
    let rt = runtime()?;
    let listener = std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| {
            StartError(format!(
                "cannot listen on 127.0.0.1 for the in-process etcd: {e}"
            ))
        })?;
    let addr = listener
        .local_addr()
        .map_err(|e| StartError(format!("in-process etcd: {e}")))?;
    let url = format!("http://{addr}");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(1);
    // Lease ids look like etcd's: large, positive, distinct per store.
    let seed = 0x0700_0000_0000_0000 | ((seed & 0x00ff_ffff_ffff) << 8);
    let member_id = 0x6d65_6d00_0000_0000 | (stores.len() as u64 + 1);
    let store = Arc::new(store::Store::new(member_id, seed));
    let svc = service::Svc {
        store: store.clone(),
        url: url.clone(),
    };
    let _guard = rt.enter();
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|e| StartError(format!("in-process etcd: {e}")))?;
    rt.spawn(store.clone().reap());
    rt.spawn(serve(svc, listener));
    announce(name, &url)?;
    let h = Handle { store, url };
    stores.insert(name.to_string(), h.clone());
    Ok(h)
}

/// With `ETCDLOCK_MEM_URL_DIR` set, write each store's URL to
/// `<dir>/<name>.url` (`default.url` for `mem://`; the directory is created
/// if missing), so a test can point a
/// tool of its own (etcdctl) at the store its code under test uses. Off by
/// default: nothing else learns the port.
fn announce(name: &str, url: &str) -> Result<(), StartError> {
    let Some(dir) = std::env::var_os("ETCDLOCK_MEM_URL_DIR") else {
        return Ok(());
    };
    let file = std::path::Path::new(&dir).join(format!(
        "{}.url",
        if name.is_empty() { "default" } else { name }
    ));
    // Created if missing: a test sets the variable before anything exists.
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&file, url))
        .map_err(|e| {
            StartError(format!(
                "cannot write the in-process etcd's URL to {} (ETCDLOCK_MEM_URL_DIR): {e}",
                file.display()
            ))
        })
}

async fn serve(svc: service::Svc, listener: tokio::net::TcpListener) {
    use pb::etcdserverpb::{
        cluster_server::ClusterServer, kv_server::KvServer, lease_server::LeaseServer,
        maintenance_server::MaintenanceServer, watch_server::WatchServer,
    };
    let max = store::MAX_REQUEST_BYTES + 512 * 1024;
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let r = tonic::transport::Server::builder()
        .add_service(KvServer::new(svc.clone()).max_decoding_message_size(max))
        .add_service(WatchServer::new(svc.clone()).max_decoding_message_size(max))
        .add_service(LeaseServer::new(svc.clone()))
        .add_service(MaintenanceServer::new(svc.clone()))
        .add_service(ClusterServer::new(svc))
        .serve_with_incoming(incoming)
        .await;
    if let Err(e) = r {
        eprintln!("memetcd: the in-process etcd stopped: {e}");
    }
}
