//! The door every stream leaves by (the watch hub's streams, the session's
//! keep-alive stream), and with it the requests that must reach the same
//! member as their stream (the read and the lease question that check a
//! keep-alive's answer, the renewal of the leases renewed with the session's,
//! the connect probe of each member):
//! a [`Pinned`] member, picked healthy. These requests are not retried on
//! another member: the caller tells the transport a member failed
//! ([`Transport::fail`]) and opens the stream anew through this door.

use super::*;

/// A member a stream runs on, and its index for [`Transport::fail`].
#[derive(Clone)]
pub(crate) struct Pinned {
    pub(crate) member: usize,
    client: etcd_client::Client,
}

impl Transport {
    /// A member believed healthy for a stream, connected within the request
    /// timeout; a member that fails to connect is failed.
    pub(crate) async fn stream_door(&self) -> Result<Pinned> {
        let i = self.pick();
        match tokio::time::timeout(self.request_timeout, self.pinned(i)).await {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(e)) => {
                self.fail(i);
                Err(Error::from_etcd(e, &self.endpoints))
            }
            Err(_) => {
                self.fail(i);
                Err(self.unavailable("no answer while connecting"))
            }
        }
    }

    /// Member `i`, connected (no bound: the caller sets one), for a stream
    /// or for the connect probe of every member ([`Transport::connect`]).
    pub(super) async fn pinned(&self, i: usize) -> EtcdResult<Pinned> {
        let client = self.member_client(i).await?;
        Ok(Pinned { member: i, client })
    }
}

type EtcdResult<T> = std::result::Result<T, etcd_client::Error>;

impl Pinned {
    /// The member's watch client (a watch stream per `watch` call).
    pub(crate) fn watch_client(&self) -> etcd_client::WatchClient {
        self.client.watch_client()
    }

    /// A watch stream of one key (or prefix, by `opts`).
    pub(crate) async fn watch(
        &self,
        key: Vec<u8>,
        opts: etcd_client::WatchOptions,
    ) -> EtcdResult<etcd_client::WatchStream> {
        self.client.watch_client().watch(key, Some(opts)).await
    }

    /// A keep-alive stream of `lease`.
    pub(crate) async fn keep_alive(
        &self,
        lease: i64,
    ) -> EtcdResult<(etcd_client::LeaseKeeper, etcd_client::LeaseKeepAliveStream)> {
        self.client.lease_client().keep_alive(lease).await
    }

    /// The TTL left on `lease`, as this member answers.
    pub(crate) async fn time_to_live(
        &self,
        lease: i64,
    ) -> EtcdResult<etcd_client::LeaseTimeToLiveResponse> {
        self.client.lease_client().time_to_live(lease, None).await
    }

    /// The member's status (the connect probe: does it answer at all).
    pub(crate) async fn status(&self) -> EtcdResult<etcd_client::StatusResponse> {
        self.client.maintenance_client().status().await
    }

    /// A linearizable count of `key` on this member (its header's raft term
    /// is what a keep-alive check reads).
    pub(crate) async fn count(&self, key: Vec<u8>) -> EtcdResult<etcd_client::GetResponse> {
        let opts = etcd_client::GetOptions::new().with_count_only();
        self.client.kv_client().get(key, Some(opts)).await
    }
}
