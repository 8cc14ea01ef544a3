//! Guarded operations: reads and writes etcd applies only while our key
//! still has the create_revision we acquired it with (the fencing token), so
//! a holder that lost the lock is refused by etcd itself.

use std::time::Instant;

use etcd_client::{Compare, CompareOp, DeleteOptions, TxnOp, TxnOpResponse};

use super::{Guard, GuardState};
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::names::show;
use crate::session::Loss;

impl Guard {
    /// A data key under the lock's own prefix would join the lock's queue (etcd's
    /// layout counts every key under `name/`) and block the next acquisition.
    fn data_key(&self, key: &[u8]) -> Result<Vec<u8>> {
        let k = self.shared.client.ns_key(key);
        let lock_prefix_len = self.shared.key.iter().rposition(|b| *b == b'/').map(|i| i + 1).unwrap_or(0);
        if key.is_empty() {
            return Err(Error::invalid("guarded operation on an empty key"));
        }
        if k.starts_with(&self.shared.key[..lock_prefix_len]) {
            return Err(Error::invalid(format!(
                "key {:?} is under the lock's own prefix {:?}; keep data beside the lock, not inside it",
                String::from_utf8_lossy(key).chars().take(64).collect::<String>(),
                String::from_utf8_lossy(&self.shared.key[..lock_prefix_len]),
            )));
        }
        Ok(k)
    }

    async fn guarded(&self, op: TxnOp) -> Result<TxnOpResponse> {
        self.settle_loss().await;
        self.check_held()?;
        let sh = &self.shared;
        let txn = etcd_client::Txn::new()
            .when([Compare::create_revision(sh.key.clone(), CompareOp::Equal, sh.token)])
            .and_then([op]);
        let resp = sh
            .client
            .call(None, |mut c| {
                let t = txn.clone();
                async move { c.txn(t).await }
            })
            .await
            .map_err(|e| e.context(format!("lock {}", show(&sh.name))))?;
        if !resp.succeeded() {
            if *sh.state.borrow() == GuardState::Released {
                // Raced our own unlock: the key is gone because we released it.
                return Err(Error::new(ErrorCode::NotHeld, format!("lock {} was released by this handle", show(&sh.name))));
            }
            sh.mark_lost(Loss { reason: LossReason::KeyDeleted, at: Instant::now() });
            return Err(Error::lost(
                LossReason::KeyDeleted,
                format!("lock {}: etcd rejected the guarded operation; the lock is no longer held", show(&sh.name)),
            ));
        }
        resp.op_responses()
            .into_iter()
            .next()
            .ok_or_else(|| Error::new(ErrorCode::Internal, "guarded operation returned no result"))
    }

    /// Replace the value of our own key, only while we hold it (guarded by
    /// its create_revision, so a stale holder is refused with `LockLost`);
    /// the key keeps its lease and create_revision. This is an election's
    /// proclamation ([`crate::Leadership::proclaim`]; bindings that hand a
    /// leadership out as a guard call it); on a mutex key it replaces the
    /// owner info `etcdlock status` shows.
    pub async fn set_value(&self, value: impl AsRef<[u8]>) -> Result<()> {
        let opts = etcd_client::PutOptions::new().with_lease(self.shared.session.lease);
        self.guarded(TxnOp::put(self.shared.key.clone(), value.as_ref().to_vec(), Some(opts))).await.map(|_| ())
    }

    /// Put `key` = `value` (namespaced like the lock) only while we hold the
    /// lock: etcd applies it in a Txn that compares our key's create_revision.
    pub async fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let k = self.data_key(key.as_ref())?;
        self.guarded(TxnOp::put(k, value.as_ref().to_vec(), None)).await.map(|_| ())
    }

    /// Get `key` only while we hold the lock.
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let k = self.data_key(key.as_ref())?;
        match self.guarded(TxnOp::get(k, None)).await? {
            TxnOpResponse::Get(g) => Ok(g.kvs().first().map(|kv| kv.value().to_vec())),
            _ => Err(Error::new(ErrorCode::Internal, "unexpected response to a guarded get")),
        }
    }

    /// Delete `key` only while we hold the lock; true if it existed.
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let k = self.data_key(key.as_ref())?;
        match self.guarded(TxnOp::delete(k, None::<DeleteOptions>)).await? {
            TxnOpResponse::Delete(d) => Ok(d.deleted() > 0),
            _ => Err(Error::new(ErrorCode::Internal, "unexpected response to a guarded delete")),
        }
    }
}
