//! A waiter's turn: [`Acquisition::wait_turn`] waits behind the keys created
//! before ours, watching only the newest of them (no thundering herd), and
//! the reads it decides by: the queue around our key
//! ([`read_queue`](crate::engine::keys::read_queue)) and the point reads that close a watch's gap
//! ([`presence`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{GetOptions, Txn, TxnOp};
use tokio::sync::mpsc;

use crate::client::Client;
use crate::engine::acquisition::Acquisition;
use crate::engine::keys::{why_deleted, OwnKeyWatch};
use crate::engine::queue::{kvs, Contender, Queue, Woken};
use crate::engine::wait::{self, cancelled, timeout_err, Pending, WaitEnds};
use crate::error::{Error, ErrorCode, Result};
use crate::guard::Guard;
use crate::names::lost_err;
use crate::runtime::sleep_opt;
use crate::session::Session;
use crate::watch::WatchEvent;

impl Acquisition<'_> {
    /// Queued with `my_rev` on `session`: wait until no key older than ours
    /// remains.
    pub(crate) async fn wait_turn(
        &self,
        session: &Arc<Session>,
        mut pending: Pending,
        my_rev: i64,
        mut queue: Queue,
    ) -> Result<Guard> {
        let (client, name, prefix) = (self.client, self.name, &self.prefix);
        let (deadline, timeout, cancel) = (self.deadline(), self.timeout, self.cancel);
        let key = pending.key.clone();
        let ctx = |e: Error| self.ctx(e);
        // Wait for every key created before ours to go, watching only the newest
        // of them (no thundering herd), and our own key (a waiter whose key or
        // session dies fails at once: etcd issue 19597). Both watches ride the
        // client's one watch stream and start "now"; when etcd reports that
        // "now" is past our last read, one read of both keys closes the gap, so
        // no delete is missed whatever the timing.
        let hub = &client.inner.hub;
        let (own, mut own_rx) = OwnKeyWatch::new();
        let mut own_id = hub.watch(key.clone(), my_rev, own.sink());
        pending.watches.push(own_id);
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel::<(u64, WatchEvent)>();
        // Every watch this wait starts gets a tag; events of watches no longer
        // current are dropped.
        let mut tags = 0u64;
        let watch = |key: &[u8], after: i64, tags: &mut u64| {
            *tags += 1;
            let (tag, tx) = (*tags, ev_tx.clone());
            (
                tag,
                hub.watch(
                    key.to_vec(),
                    after,
                    Arc::new(move |ev| {
                        let _ = tx.send((tag, ev));
                    }),
                ),
            )
        };
        // The predecessor's watch lives as long as the predecessor: a re-read
        // that finds the same predecessor keeps it (no new watch, no gap).
        let mut pred_w: Option<(Contender, u64, i64)> = None;
        let mut waited_on: Vec<Vec<u8>> = Vec::new();
        let closed = client.inner.closed.clone();
        let ends = WaitEnds {
            closed: &closed,
            cancel,
            deadline,
            session,
        };
        let mut backoff = Duration::from_millis(25);
        loop {
            if !queue.mine {
                let reason = why_deleted(client, session).await;
                return Err(lost_err(
                    name,
                    reason,
                    "our waiter key was deleted while waiting",
                ));
            }
            let Some(pred) = queue.pred.clone() else {
                pending.watches.retain(|w| *w != own_id);
                return Ok(crate::engine::acquisition::held(
                    client,
                    name,
                    session,
                    pending,
                    my_rev,
                    waited_on,
                    Some((own_id, own, own_rx)),
                ));
            };
            if waited_on.last() != Some(&pred.key) {
                waited_on.push(pred.key.clone());
            }
            tracing::trace!(lock = name, pred = %String::from_utf8_lossy(&pred.key), "waiting for predecessor");
            let pred_is_holder = queue.holder.as_ref() == Some(&pred);
            let fresh = !matches!(&pred_w, Some((p, _, _)) if *p == pred);
            if fresh {
                if let Some((_, _, id)) = pred_w.take() {
                    hub.cancel(id);
                    pending.watches.retain(|w| *w != id);
                }
                let (tag, id) = watch(&pred.key, queue.rev, &mut tags);
                pending.watches.push(id);
                pred_w = Some((pred.clone(), tag, id));
            }
            let (pred_tag, pred_id) = pred_w
                .as_ref()
                .map(|(_, t, id)| (*t, *id))
                .unwrap_or_default();
            // Look ahead: watch the key before the predecessor too. Its delete
            // (the predecessor takes the lock) is answered by a re-read while the
            // predecessor holds, off the handoff's path. A missed event there
            // only costs that read later; the predecessor's watch decides.
            let ahead = match (&queue.ahead, pred_is_holder) {
                (Some(a), false) => {
                    let (tag, id) = watch(&a.key, queue.rev, &mut tags);
                    pending.watches.push(id);
                    Some((tag, id))
                }
                _ => None,
            };
            let ahead_tag = ahead.map(|(t, _)| t).unwrap_or(0);
            // Whether the key ahead is known to exist at the read or later (its
            // watch reported no gap, or a point read found it).
            let mut ahead_sure = false;
            // etcd turns "now" into a revision before it registers the watch; a
            // write in between leaves the watch unsynced, served by a 100 ms
            // catch-up loop (what bounds Go's Mutex's handoff rate). For a new
            // watch on the holder, a few reads over its first moments (`polls`) close that
            // window; deeper waiters have time for the loop to catch up.
            let mut polls = [5u64, 10, 20, 40, 40].into_iter();
            let mut next_poll: Option<Instant> = None;
            let woken = loop {
                tokio::select! {
                    biased;
                    i = ends.next(&mut own_rx) => match i {
                        Ok(_) => {
                            // Re-watch our key from the next read on.
                            pending.watches.retain(|w| *w != own_id);
                            break Woken::Reread;
                        }
                        Err(i) => return Err(wait::end_wait(client, i, name, session, pending, timeout, "waiter").await),
                    },
                    Some((tag, ev)) = ev_rx.recv() => {
                        if tag == ahead_tag && tag != 0 {
                            // The key ahead of our predecessor went (the
                            // predecessor's watch stays).
                            match ev {
                                WatchEvent::Deleted { .. } => break Woken::Ahead,
                                // The watch starts after our read: with the whole
                                // queue known we step by its deletes, so look once
                                // whether it is still there (a point read). Without,
                                // a missed delete only costs a read later.
                                WatchEvent::Created { rev } if rev > queue.rev && queue.rest.is_some() => {
                                    let Some(a) = &queue.ahead else { continue };
                                    match presence(client, a, &key, my_rev).await {
                                        Ok((true, true)) => ahead_sure = true,
                                        // Gone, and ours is there: step past it.
                                        Ok((false, true)) => break Woken::Ahead,
                                        // Our key went, or no answer: never step on a
                                        // guess; a read tells.
                                        _ => break Woken::Reread,
                                    }
                                }
                                WatchEvent::Created { .. } => ahead_sure = true,
                                _ => {}
                            }
                            continue;
                        }
                        if tag != pred_tag { continue; }
                        match ev {
                            WatchEvent::Created { rev } => {
                                // The watch starts after `rev`: if the store moved since our
                                // read, one read closes the gap (both keys).
                                if rev > queue.rev && !matches!(still_there(client, &pred, &key, my_rev).await, Ok(true)) {
                                    break Woken::Reread;
                                }
                                if pred_is_holder && fresh {
                                    next_poll = polls.next().map(|ms| Instant::now() + Duration::from_millis(ms));
                                }
                            }
                            WatchEvent::Deleted { .. } => break queue.pred_deleted(&pred, session.alive(), ahead_sure),
                            WatchEvent::Reset => break Woken::Reread,
                        }
                    }
                    _ = sleep_opt(next_poll) => {
                        match still_there(client, &pred, &key, my_rev).await {
                            Ok(false) => break Woken::Reread,
                            _ => next_poll = polls.next().map(|ms| Instant::now() + Duration::from_millis(ms)),
                        }
                    }
                }
            };
            if let Some((_, id)) = ahead {
                hub.cancel(id);
                pending.watches.retain(|w| *w != id);
            }
            if !matches!(woken, Woken::Ahead) {
                // The predecessor changed (or we hold): its watch is done.
                hub.cancel(pred_id);
                pending.watches.retain(|w| *w != pred_id);
                pred_w = None;
            }
            if let Woken::Acquired = woken {
                pending.watches.retain(|w| *w != own_id);
                return Ok(crate::engine::acquisition::held(
                    client,
                    name,
                    session,
                    pending,
                    my_rev,
                    waited_on,
                    Some((own_id, own, own_rx)),
                ));
            }
            // With the whole queue known, a delete steps it forward; the new
            // watches start at the same read's revision, so the hub replays a
            // delete they would otherwise have missed (or reports the gap).
            let stepped = match woken {
                Woken::Ahead => queue.ahead_gone(&|k, r| hub.deleted_after(k, r)),
                Woken::PredGone => queue.pred_gone(&|k, r| hub.deleted_after(k, r)),
                _ => false,
            };
            if !stepped {
                queue = loop {
                    match crate::engine::keys::read_queue(client, prefix, &key, my_rev).await {
                        Ok(q) => {
                            backoff = Duration::from_millis(25);
                            break q;
                        }
                        Err(e) if e.code() == ErrorCode::Unavailable && session.alive() => {
                            tokio::select! {
                                _ = tokio::time::sleep(backoff) => {}
                                _ = sleep_opt(deadline) => {
                                    pending.abandon().await;
                                    return Err(timeout_err(name, timeout));
                                }
                                _ = cancel.cancelled() => {
                                    pending.abandon().await;
                                    return Err(cancelled(name));
                                }
                            }
                            backoff = (backoff * 2).min(Duration::from_secs(1));
                        }
                        Err(e) => return Err(ctx(e)),
                    }
                };
            }
            if !pending.watches.contains(&own_id) && queue.mine {
                own_id = hub.watch(key.clone(), queue.rev, own.sink());
                pending.watches.push(own_id);
            }
        }
    }
}

/// Whether the predecessor (as created) and our key both still exist: two
/// point reads in one Txn, O(1) however long the queue (the full queue
/// read is a sorted range, and etcd reads the whole prefix for those).
async fn still_there(client: &Client, pred: &Contender, key: &[u8], my_rev: i64) -> Result<bool> {
    presence(client, pred, key, my_rev)
        .await
        .map(|(theirs, ours)| theirs && ours)
}

/// Whether `other` (as created) and our key still exist, each: the two
/// point reads of [`still_there`].
async fn presence(
    client: &Client,
    other: &Contender,
    key: &[u8],
    my_rev: i64,
) -> Result<(bool, bool)> {
    let txn = Txn::new().and_then([
        TxnOp::get(other.key.clone(), Some(GetOptions::new().with_keys_only())),
        TxnOp::get(key.to_vec(), Some(GetOptions::new().with_keys_only())),
    ]);
    let resp = client
        .call(None, |mut c| {
            let t = txn.clone();
            async move { c.txn(t).await }
        })
        .await?;
    let ops = resp.op_responses();
    let rev_of = |i: usize| kvs(ops.get(i)).first().map(|kv| kv.create_revision());
    Ok((rev_of(0) == Some(other.rev), rev_of(1) == Some(my_rev)))
}
