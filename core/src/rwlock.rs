//! A read-write lock on the mutex's keys. Writers are exactly mutex
//! contenders ([`Client::lock`]): they wait for every older key, so a writer,
//! `etcdctl lock`, Go's Mutex and an etcdlock mutex on one name exclude each
//! other and every reader. Readers put keys marked `-r`
//! (`name/<lease hex>-r`) and wait only for the newest older *writer* key, so
//! readers overlap, and a writer queued behind readers gets in before any
//! reader that came after it (FIFO: a stream of readers cannot starve a writer).

use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp};

use crate::client::Client;
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::guard::Guard;
use crate::keys::{why_deleted, OwnKeyWatch};
use crate::names::{is_direct_child, lost_err, owner_info, show, validate_name};
use crate::options::LockOptions;
use crate::queue::{kvs, revision};
use crate::transport::Bound;
use crate::wait::{cancelled, timeout_because, timeout_err, Pending, Recheck, WaitEnds};

/// The mark at the end of a reader's key.
const READER: &str = "-r";

fn is_writer(prefix: &[u8], key: &[u8]) -> bool {
    is_direct_child(prefix, key) && !key.ends_with(READER.as_bytes())
}

impl Client {
    /// Take the read side of the read-write lock `name`: shared with other
    /// readers, excluded by writers ([`Client::lock`] on the same name is the
    /// write side). Waits (FIFO) as [`Client::lock_with`]; timeout zero is one
    /// try that writes nothing while a writer holds or waits.
    pub async fn read_lock(&self, name: &str, opts: LockOptions) -> Result<Guard> {
        opts.validate()?;
        if opts.lock_delay.is_some_and(|d| !d.is_zero()) {
            return Err(Error::invalid(
                "lock_delay applies to locks and elections, not to read locks",
            ));
        }
        let m = self.inner.metrics.acquiring();
        let _meta = self.meta_wait(name, crate::meta::LockKind::RwLock, &opts.metadata);
        let lease_time = opts.lease_time;
        let r = Box::pin(self.read_lock_counted(name, opts)).await;
        m.finish(&r);
        if let (Ok(g), Some(t)) = (&r, lease_time) {
            g.expire_after(t);
        }
        r
    }

    async fn read_lock_counted(&self, name: &str, opts: LockOptions) -> Result<Guard> {
        validate_name(name)?;
        self.check_open()?;
        let once = opts.timeout == Some(Duration::ZERO);
        let deadline = if once {
            None
        } else {
            opts.timeout
                .and_then(|t| std::time::Instant::now().checked_add(t))
        };
        let bound = if once {
            self.request_bound()
        } else {
            Bound::Wait(deadline)
        };
        let timeout = opts.timeout;
        let cancel = opts.cancel.unwrap_or_default();
        let prefix = self.prefix(name);
        let ctx = |e: Error| e.context(format!("read lock {}", show(name)));
        if once
            && self
                .newest_writer(&prefix, None)
                .await
                .map_err(ctx)?
                .is_some()
        {
            return Err(timeout_err(name, timeout));
        }
        let _place = if once {
            None
        } else {
            Some(self.enter_window(name, deadline, timeout, &cancel).await?)
        };
        let session = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(cancelled(name)),
            s = self.session_by(bound) => s.map_err(|e| if e.code() == ErrorCode::Timeout { timeout_because(name, timeout, &e) } else { ctx(e) })?,
        };
        let key = session.reserve_key_marked(&prefix, READER);
        let mut pending = Pending::new(self, &session, key.clone());
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.clone(),
                owner_info(),
                Some(PutOptions::new().with_lease(session.lease)),
            )])
            .or_else([TxnOp::get(key.clone(), None)]);
        let resp = self
            .run_detached(&mut pending, txn, name, bound, &cancel)
            .await
            .map_err(|e| {
                if e.code() == ErrorCode::Timeout {
                    timeout_because(name, timeout, &e)
                } else {
                    ctx(e)
                }
            })?;
        let my_rev = if resp.succeeded() {
            revision(&resp)
        } else {
            kvs(resp.op_responses().first())
                .first()
                .map(|kv| kv.create_revision())
                .unwrap_or(0)
        };
        let hub = &self.inner.hub;
        let (own, mut own_rx) = OwnKeyWatch::new();
        let mut own_id = hub.watch(key.clone(), my_rev, own.sink());
        pending.watches.push(own_id);
        let mut own_reset = false;
        let closed = self.inner.closed.clone();
        let mut waited_on = Vec::new();
        loop {
            let (writer, rev) = match self.newest_writer(&prefix, Some((&key, my_rev))).await {
                Ok(Some((w, rev))) => (w, rev),
                Ok(None) => {
                    pending.watches.retain(|w| *w != own_id);
                    return Ok(self.held(
                        name,
                        &session,
                        pending,
                        my_rev,
                        waited_on,
                        Some((own_id, own, own_rx)),
                    ));
                }
                Err(e) if e.code() == ErrorCode::LockLost => {
                    let reason = why_deleted(self, &session).await;
                    return Err(lost_err(
                        name,
                        reason,
                        "our reader key was deleted while waiting",
                    ));
                }
                Err(e) => {
                    pending.abandon().await;
                    return Err(ctx(e));
                }
            };
            if once {
                pending.abandon().await;
                return Err(timeout_err(name, timeout));
            }
            if own_reset {
                // etcd dropped the watch on our key: watch it again from this read.
                pending.watches.retain(|w| *w != own_id);
                own_id = hub.watch(key.clone(), rev, own.sink());
                pending.watches.push(own_id);
                own_reset = false;
            }
            if waited_on.last() != Some(&writer) {
                waited_on.push(writer.clone());
            }
            let ends = WaitEnds {
                closed: &closed,
                cancel: &cancel,
                deadline,
                session: &session,
            };
            let woke = self
                .wait_any_deleted(&mut pending, std::slice::from_ref(&writer), rev, &ends, &mut own_rx, || {
                    // The watch started after our read: is the writer we watch still
                    // the newest older one? (one read)
                    let (prefix, key, writer) = (&prefix, &key, &writer);
                    async move { matches!(self.newest_writer(prefix, Some((key, my_rev))).await, Ok(Some((w, _))) if w == *writer) }
                })
                .await;
            match woke {
                Ok(Recheck::OwnReset) => own_reset = true,
                Ok(Recheck::Changed) => {}
                Err(i) => {
                    return Err(self
                        .end_wait(i, name, &session, pending, timeout, "reader")
                        .await)
                }
            }
        }
    }

    /// The newest writer key older than ours (or the newest at all, without
    /// `mine`), and the revision of the read. `LockLost` if our key is gone.
    async fn newest_writer(
        &self,
        prefix: &[u8],
        mine: Option<(&[u8], i64)>,
    ) -> Result<Option<(Vec<u8>, i64)>> {
        const PAGE: i64 = 64;
        let mut below = mine.map(|(_, r)| r).unwrap_or(i64::MAX);
        let mut first = true;
        loop {
            let mut older = GetOptions::new()
                .with_prefix()
                .with_keys_only()
                .with_sort(SortTarget::Create, SortOrder::Descend)
                .with_limit(PAGE);
            if below != i64::MAX {
                older = older.with_max_create_revision(below - 1);
            }
            let mut ops = vec![TxnOp::get(prefix.to_vec(), Some(older))];
            if let (true, Some((k, _))) = (first, mine) {
                ops.push(TxnOp::get(
                    k.to_vec(),
                    Some(GetOptions::new().with_keys_only()),
                ));
            }
            let txn = Txn::new().and_then(ops);
            let resp = self
                .call(None, |mut c| {
                    let t = txn.clone();
                    async move { c.txn(t).await }
                })
                .await?;
            let ops = resp.op_responses();
            if first && mine.is_some() && kvs(ops.get(1)).is_empty() {
                return Err(Error::lost(LossReason::KeyDeleted, "our key is gone"));
            }
            first = false;
            let page = kvs(ops.first());
            if let Some(w) = page.iter().find(|kv| is_writer(prefix, kv.key())) {
                return Ok(Some((w.key().to_vec(), revision(&resp))));
            }
            if (page.len() as i64) < PAGE {
                return Ok(None);
            }
            below = page.last().map(|kv| kv.create_revision()).unwrap_or(1);
        }
    }
}
