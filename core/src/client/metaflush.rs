//! Meta records: an acquisition in progress counted while it lasts, and the task that writes each lock's meta record with the client's own lease.

use super::*;

/// An acquisition in progress, as the meta records count it (ended on drop).
pub(crate) struct MetaWait<'a> {
    pub(super) inner: &'a Arc<Inner>,
    pub(super) name: &'a str,
}

impl Drop for MetaWait<'_> {
    fn drop(&mut self) {
        self.inner.meta.wait_ended(self.name);
    }
}

/// Keep the meta records of `inner`'s client up to date until it has no
/// name in use or is closed (see [`crate::meta`]).
pub(super) async fn flush_meta(inner: Weak<Inner>) {
    let (host, pid) = (crate::names::hostname(), crate::runtime::current_pid());
    loop {
        tokio::time::sleep(meta::TICK).await;
        let Some(inner) = inner.upgrade() else { return };
        if inner.closed.is_cancelled() {
            return;
        }
        // The session's lease, without waiting for a session being opened.
        let lease = match inner.session.try_lock() {
            Ok(s) => s
                .as_ref()
                .filter(|s| s.alive())
                .map(|s| s.lease)
                .unwrap_or(0),
            Err(_) => continue,
        };
        let due = inner.meta.due(lease, Instant::now(), &host, pid);
        // (put name or None for a delete, op)
        let mut ops: Vec<(Option<String>, TxnOp)> = Vec::new();
        for (name, rec) in due.puts {
            let op = TxnOp::put(
                meta::key(&inner.ns, &name, lease),
                rec,
                Some(PutOptions::new().with_lease(lease)),
            );
            ops.push((Some(name), op));
        }
        for name in due.deletes {
            ops.push((
                None,
                TxnOp::delete(meta::key(&inner.ns, &name, lease), None),
            ));
        }
        for chunk in ops.chunks(meta::TXN_OPS) {
            let txn =
                Txn::new().and_then(chunk.iter().map(|(_, op)| op.clone()).collect::<Vec<_>>());
            let t = &inner.transport;
            if let Err(e) = t
                .call(t.request_bound(), |mut c| {
                    let txn = txn.clone();
                    async move { c.txn(txn).await }
                })
                .await
                .result
            {
                // The puts go again next tick; a delete that failed leaves a
                // record that ends with the session's lease (list shows
                // records only beside lock keys that exist).
                tracing::debug!(error = %e, "meta records not written; the next tick retries the puts");
                inner.meta.unwritten(
                    &chunk
                        .iter()
                        .filter_map(|(n, _)| n.clone())
                        .collect::<Vec<_>>(),
                );
            }
        }
        if inner.meta.is_idle() {
            return;
        }
    }
}
