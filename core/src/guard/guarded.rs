//! Guarded operations: reads and writes etcd applies only while our key
//! still has the create_revision we acquired it with (the fencing token), so
//! a holder that lost the lock is refused by etcd itself.

use etcd_client::{Compare, CompareOp, DeleteOptions, TxnOp, TxnOpResponse};

use super::{Guard, GuardState};
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::names::show;

impl Guard {
    async fn guarded(&self, op: TxnOp) -> Result<TxnOpResponse> {
        guarded_all(std::slice::from_ref(self), op).await
    }

    /// Replace the value of our own key, only while we hold it (guarded by
    /// its create_revision, so a stale holder is refused with `LockLost`);
    /// the key keeps its lease and create_revision. This is an election's
    /// proclamation ([`crate::Leadership::proclaim`]; bindings that hand a
    /// leadership out as a guard call it); on a mutex key it replaces the
    /// owner info `etcdlock status` shows.
    pub async fn set_value(&self, value: impl AsRef<[u8]>) -> Result<()> {
        let opts = etcd_client::PutOptions::new().with_lease(self.shared.session.lease);
        self.guarded(TxnOp::put(
            self.shared.key.clone(),
            value.as_ref().to_vec(),
            Some(opts),
        ))
        .await
        .map(|_| ())
    }

    /// Put `key` = `value` (namespaced like the lock) only while we hold the
    /// lock: etcd applies it in a Txn that compares our key's create_revision.
    pub async fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        put_all(std::slice::from_ref(self), key.as_ref(), value.as_ref()).await
    }

    /// Get `key` only while we hold the lock.
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        get_all(std::slice::from_ref(self), key.as_ref()).await
    }

    /// Delete `key` only while we hold the lock; true if it existed.
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        delete_all(std::slice::from_ref(self), key.as_ref()).await
    }
}

/// `op`, applied by etcd only while every guard of `guards` (one client's)
/// still holds its key with the create_revision it acquired it with: one Txn
/// that compares them all. A guard whose key etcd no longer has with that
/// revision is marked lost (`KeyDeleted`), and the call fails with `LockLost`.
pub(crate) async fn guarded_all(guards: &[Guard], op: TxnOp) -> Result<TxnOpResponse> {
    let Some(first) = guards.first() else {
        return Err(Error::new(
            ErrorCode::Internal,
            "a guarded operation with no lock",
        ));
    };
    for g in guards {
        g.settle_loss().await;
        g.check_held()?;
    }
    let compares: Vec<Compare> = guards
        .iter()
        .map(|g| Compare::create_revision(g.shared.key.clone(), CompareOp::Equal, g.shared.token))
        .collect();
    let txn = etcd_client::Txn::new().when(compares).and_then([op]);
    let names = || {
        guards
            .iter()
            .map(|g| show(&g.shared.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let client = &first.shared.client;
    let resp = client
        .call(None, |mut c| {
            let t = txn.clone();
            async move { c.txn(t).await }
        })
        .await
        .map_err(|e| e.context(format!("lock {}", names())))?;
    if !resp.succeeded() {
        if guards
            .iter()
            .any(|g| g.shared.state.get() == GuardState::Released)
        {
            // Raced our own unlock: the key is gone because we released it.
            return Err(Error::new(
                ErrorCode::NotHeld,
                format!("lock {} was released by this handle", names()),
            ));
        }
        // Which keys changed: read them, and mark those guards lost (all of
        // them if the read fails: the Txn's compare already failed).
        let reads: Vec<TxnOp> = guards
            .iter()
            .map(|g| TxnOp::get(g.shared.key.clone(), None))
            .collect();
        let now = client
            .call(None, |mut c| {
                let t = etcd_client::Txn::new().and_then(reads.clone());
                async move { c.txn(t).await }
            })
            .await
            .ok();
        let mut reason = LossReason::KeyDeleted;
        for (i, g) in guards.iter().enumerate() {
            let still = now.as_ref().is_some_and(|r| match r.op_responses().get(i) {
                Some(TxnOpResponse::Get(get)) => get
                    .kvs()
                    .first()
                    .is_some_and(|kv| kv.create_revision() == g.shared.token),
                _ => false,
            });
            if !still {
                // Gone with the lease (expired or revoked: the whole session
                // is lost) or by itself, as the watch path tells them apart.
                // Ended at the latest now, earlier if the session's validity
                // ran out first (the lease's expiry took the key).
                reason = crate::guard::keys::why_deleted(client, &g.shared.session).await;
                g.shared
                    .mark_lost(crate::guard::keys::loss_now(&g.shared.session, reason));
            }
        }
        return Err(Error::lost(
            reason,
            format!(
                "lock {}: etcd rejected the guarded operation; the lock is no longer held",
                names()
            ),
        ));
    }
    resp.op_responses()
        .into_iter()
        .next()
        .ok_or_else(|| Error::new(ErrorCode::Internal, "guarded operation returned no result"))
}

/// A data key for a guarded operation of `guards`: namespaced like the
/// locks, and under none of their prefixes (a key there would join that
/// lock's queue, as etcd's layout counts every key under `name/`).
pub(crate) fn data_key_all(guards: &[Guard], key: &[u8]) -> Result<Vec<u8>> {
    let Some(first) = guards.first() else {
        return Err(Error::new(
            ErrorCode::Internal,
            "a guarded operation with no lock",
        ));
    };
    if key.is_empty() {
        return Err(Error::invalid("guarded operation on an empty key"));
    }
    let k = first.shared.client.ns_key(key);
    for g in guards {
        let lock_prefix_len = g
            .shared
            .key
            .iter()
            .rposition(|b| *b == b'/')
            .map(|i| i + 1)
            .unwrap_or(0);
        if k.starts_with(&g.shared.key[..lock_prefix_len]) {
            return Err(Error::invalid(format!(
                "key {:?} is under the lock's own prefix {:?}; keep data beside the lock, not inside it",
                String::from_utf8_lossy(key).chars().take(64).collect::<String>(),
                String::from_utf8_lossy(&g.shared.key[..lock_prefix_len]),
            )));
        }
    }
    Ok(k)
}

/// Put, get and delete through [`guarded_all`] (a guard's and a multi-lock's).
pub(crate) async fn put_all(guards: &[Guard], key: &[u8], value: &[u8]) -> Result<()> {
    let k = data_key_all(guards, key)?;
    guarded_all(guards, TxnOp::put(k, value.to_vec(), None))
        .await
        .map(|_| ())
}

/// See [`put_all`].
pub(crate) async fn get_all(guards: &[Guard], key: &[u8]) -> Result<Option<Vec<u8>>> {
    let k = data_key_all(guards, key)?;
    match guarded_all(guards, TxnOp::get(k, None)).await? {
        TxnOpResponse::Get(g) => Ok(g.kvs().first().map(|kv| kv.value().to_vec())),
        _ => Err(Error::new(
            ErrorCode::Internal,
            "unexpected response to a guarded get",
        )),
    }
}

/// See [`put_all`].
pub(crate) async fn delete_all(guards: &[Guard], key: &[u8]) -> Result<bool> {
    let k = data_key_all(guards, key)?;
    match guarded_all(guards, TxnOp::delete(k, None::<DeleteOptions>)).await? {
        TxnOpResponse::Delete(d) => Ok(d.deleted() > 0),
        _ => Err(Error::new(
            ErrorCode::Internal,
            "unexpected response to a guarded delete",
        )),
    }
}
