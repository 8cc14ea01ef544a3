//! Fault controls on an in-process store (`mem://NAME`), for a test to make
//! a hold be lost the ways production loses it, and watch its code cope.

use std::time::Duration;

use crate::error::{Error, ErrorCode, Result};

/// A handle on the in-process store that `mem://NAME` endpoints reach (the
/// `mem` feature): what a test does to it, as a fault or another party
/// would. A client connected to etcd has no such handle; clients of this
/// process that name the store see every control as they would see the
/// same thing happen on etcd: the same signals and reasons, in the same
/// order, within the same bounds.
///
/// | control | what the store does | what a holder sees |
/// |---|---|---|
/// | [`MemStore::expire_lease`] | ends the lease now, as its TTL would; its keys go | the hold is lost with `LeaseExpired` |
/// | [`MemStore::delete_key`] | deletes a lock's key, as an operator would | the hold is lost with `KeyDeleted`; the next waiter is granted |
/// | [`MemStore::silence`] | answers nothing for a while (as an etcd that hangs); leases expire meanwhile | at risk after a keep-alive interval, lost at the local deadline (`ConnectionLost`); calls end at their bounds |
/// | [`MemStore::stall`] | answers nothing to one client (its lease) while the others go on | that client as under silence; others are granted once its lease expires |
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use etcdlock::{Client, ClientOptions, GuardState, LossReason, MemStore};
///
/// let store = MemStore::open("doc-expire")?;
/// let client = Client::connect(ClientOptions::new([store.endpoint()])).await?;
/// let guard = client.lock("job").await?;
/// assert!(store.expire_lease(guard.lease_id()));
/// let loss = guard.wait_lost().await.expect("lost");
/// assert_eq!(loss.reason, LossReason::LeaseExpired);
/// assert!(matches!(guard.state(), GuardState::Lost(_)));
/// # client.close().await;
/// # Ok::<(), etcdlock::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct MemStore {
    name: String,
    handle: memetcd::Handle,
}

/// A key as a [`MemStore`] holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemKey {
    /// The key.
    pub key: Vec<u8>,
    /// Its value.
    pub value: Vec<u8>,
    /// The lease it lives on (0: none).
    pub lease: i64,
    /// The revision that created it (a lock key's fencing token).
    pub create_revision: i64,
    /// The revision of its last write.
    pub mod_revision: i64,
}

impl MemStore {
    /// The store `mem://NAME` (`""`: the process-wide `mem://`), started if
    /// no client started it yet. `InvalidArgument` for a name that is not up
    /// to 64 of `A-Z a-z 0-9 . _ -`.
    pub fn open(name: &str) -> Result<MemStore> {
        let url = format!("mem://{name}");
        let name = match crate::transport::mem_store(&url) {
            Some(Ok(n)) => n.to_string(),
            Some(Err(e)) => return Err(e),
            None => return Err(Error::invalid(format!("bad store name {name:?}"))),
        };
        let handle = memetcd::handle(&name)
            .map_err(|e| Error::new(ErrorCode::Unavailable, e.to_string()))?;
        Ok(MemStore { name, handle })
    }

    /// The endpoint clients give to reach this store: `mem://NAME`.
    pub fn endpoint(&self) -> String {
        format!("mem://{}", self.name)
    }

    /// The store's name (`""` for `mem://`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// End lease `lease` now, as its time-to-live would: every key on it is
    /// deleted at one revision, its holders lose their holds with
    /// `LeaseExpired`, and waiters behind them are granted. A client's lease
    /// is [`crate::Guard::lease_id`] (or [`crate::Client::lease_id`]). False
    /// if the store has no such lease.
    pub fn expire_lease(&self, lease: i64) -> bool {
        self.handle.expire_lease(lease)
    }

    /// Delete `key` as another party would (an operator, a script): a lock's
    /// key is [`crate::Guard::key`]; its holder loses the hold with
    /// `KeyDeleted`. False if there was no such key.
    pub fn delete_key(&self, key: impl AsRef<[u8]>) -> bool {
        self.handle.delete(key.as_ref())
    }

    /// Answer nothing for `d`, as an etcd that hangs: every request, keep-alive
    /// and watch event waits, and is answered when the silence ends if its
    /// caller still waits. Time goes on: leases whose time-to-live runs out
    /// meanwhile expire. A hold turns at risk a keep-alive interval after its
    /// last renewal and is lost at its local deadline (`ConnectionLost`);
    /// lock calls end at their timeout, other calls at the request timeout
    /// (`Unavailable`). A later call replaces the end; `Duration::ZERO` ends
    /// it now.
    pub fn silence(&self, d: Duration) {
        self.handle.silence(d)
    }

    /// Answer nothing to the client of lease `lease` for `d`, while every
    /// other client goes on: as a client cut off from etcd. Its holds turn
    /// at risk and are lost as under [`MemStore::silence`]; once its lease
    /// expires, other clients are granted its locks, and the client stays
    /// cut off (its connection, and any new session it asks for) until `d`
    /// ends. `Duration::ZERO` ends it now.
    pub fn stall(&self, lease: i64, d: Duration) {
        self.handle.stall(lease, d)
    }

    /// End every silence and stall now.
    pub fn resume(&self) {
        self.handle.resume()
    }

    /// The keys under `prefix` (every key for an empty one), in key order:
    /// what the store holds, for a test to assert on.
    pub fn keys(&self, prefix: impl AsRef<[u8]>) -> Vec<MemKey> {
        let prefix = prefix.as_ref();
        // etcd's range for a prefix; the empty prefix is every key.
        let start = if prefix.is_empty() {
            &[0u8][..]
        } else {
            prefix
        };
        self.handle
            .keys(start, &crate::names::prefix_end(prefix))
            .into_iter()
            .map(|k| MemKey {
                key: k.key,
                value: k.value,
                lease: k.lease,
                create_revision: k.create_revision,
                mod_revision: k.mod_revision,
            })
            .collect()
    }
}

impl std::fmt::Debug for MemStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemStore")
            .field("endpoint", &self.endpoint())
            .finish()
    }
}
