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
use crate::engine::keys::{why_deleted, OwnEvent, OwnKeyWatch};
use crate::engine::queue::{kvs, Contender, Queue, Woken};
use crate::engine::wait::{self, cancelled, timeout_err, Interrupt, Pending, WaitEnds};
use crate::error::{Error, ErrorCode, Result};
use crate::guard::Guard;
use crate::names::lost_err;
use crate::runtime::sleep_opt;
use crate::session::Session;
use crate::watch::{WatchEvent, WatchHub};

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
        let (client, name) = (self.client, self.name);
        let key = pending.key.clone();
        // Wait for every key created before ours to go, watching only the newest
        // of them (no thundering herd), and our own key (a waiter whose key or
        // session dies fails at once: etcd issue 19597). Both watches ride the
        // client's one watch stream and start "now"; when etcd reports that
        // "now" is past our last read, one read of both keys closes the gap, so
        // no delete is missed whatever the timing.
        let hub = &client.inner.hub;
        let mut w = TurnWatches::start(hub, key.clone(), my_rev);
        pending.watches.push(w.own_id);
        let mut waited_on: Vec<Vec<u8>> = Vec::new();
        let closed = client.inner.closed.clone();
        let ends = WaitEnds {
            closed: &closed,
            cancel: self.cancel,
            deadline: self.deadline(),
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
                return Ok(w.hold(self, session, pending, waited_on));
            };
            if waited_on.last() != Some(&pred.key) {
                waited_on.push(pred.key.clone());
            }
            tracing::trace!(lock = name, pred = %String::from_utf8_lossy(&pred.key), "waiting for predecessor");
            let round = w.round(&mut pending, &queue, pred);
            let woken = match w.wake(client, &ends, &mut pending, &queue, &round).await {
                Ok(woken) => woken,
                Err(i) => {
                    let timeout = self.timeout;
                    return Err(wait::end_wait(
                        client, i, name, session, pending, timeout, "waiter",
                    )
                    .await);
                }
            };
            w.end_round(&mut pending, &round, &woken);
            if let Woken::Acquired = woken {
                return Ok(w.hold(self, session, pending, waited_on));
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
                queue = match self.reread(session, &key, my_rev, &mut backoff).await {
                    Ok(q) => q,
                    Err(ReadStop::Abandon(e)) => {
                        pending.abandon().await;
                        return Err(e);
                    }
                    Err(ReadStop::Fail(e)) => return Err(e),
                };
            }
            if !pending.watches.contains(&w.own_id) && queue.mine {
                w.own_id = hub.watch(key.clone(), queue.rev, w.own.sink());
                pending.watches.push(w.own_id);
            }
        }
    }

    /// Read the queue around our key again, retrying an unavailable cluster
    /// with backoff while the session lives, until the deadline or a cancel.
    async fn reread(
        &self,
        session: &Session,
        key: &[u8],
        my_rev: i64,
        backoff: &mut Duration,
    ) -> std::result::Result<Queue, ReadStop> {
        loop {
            match crate::engine::keys::read_queue(self.client, &self.prefix, key, my_rev).await {
                Ok(q) => {
                    *backoff = Duration::from_millis(25);
                    return Ok(q);
                }
                Err(e) if e.code() == ErrorCode::Unavailable && session.alive() => {
                    tokio::select! {
                        _ = tokio::time::sleep(*backoff) => {}
                        _ = sleep_opt(self.deadline()) => {
                            return Err(ReadStop::Abandon(timeout_err(self.name, self.timeout)));
                        }
                        _ = self.cancel.cancelled() => {
                            return Err(ReadStop::Abandon(cancelled(self.name)));
                        }
                    }
                    *backoff = (*backoff * 2).min(Duration::from_secs(1));
                }
                Err(e) => return Err(ReadStop::Fail(self.ctx(e))),
            }
        }
    }
}

/// How a re-read of the queue ends without a queue: the wait is abandoned
/// (deadline, cancel: the caller cleans up our key), or the read failed.
enum ReadStop {
    Abandon(Error),
    Fail(Error),
}

/// The watches of one [`Acquisition::wait_turn`]: our own key's, and tagged
/// ones on the keys before ours.
struct TurnWatches<'a> {
    hub: &'a WatchHub,
    key: Vec<u8>,
    my_rev: i64,
    own: Arc<OwnKeyWatch>,
    own_rx: mpsc::UnboundedReceiver<OwnEvent>,
    own_id: i64,
    // Every watch this wait starts gets a tag; events of watches no longer
    // current are dropped.
    tags: u64,
    ev_tx: mpsc::UnboundedSender<(u64, WatchEvent)>,
    ev_rx: mpsc::UnboundedReceiver<(u64, WatchEvent)>,
    // The predecessor's watch lives as long as the predecessor: a re-read
    // that finds the same predecessor keeps it (no new watch, no gap).
    pred_w: Option<(Contender, u64, i64)>,
}

/// One round of the wait: the predecessor a read found, and the watches on
/// it and on the key ahead of it.
struct Round {
    pred: Contender,
    pred_is_holder: bool,
    /// Whether the predecessor's watch is new this round.
    fresh: bool,
    pred_tag: u64,
    pred_id: i64,
    ahead: Option<(u64, i64)>,
}

impl<'a> TurnWatches<'a> {
    /// Watch our own key (created at `my_rev`).
    fn start(hub: &'a WatchHub, key: Vec<u8>, my_rev: i64) -> Self {
        let (own, own_rx) = OwnKeyWatch::new();
        let own_id = hub.watch(key.clone(), my_rev, own.sink());
        let (ev_tx, ev_rx) = mpsc::unbounded_channel::<(u64, WatchEvent)>();
        TurnWatches {
            hub,
            key,
            my_rev,
            own,
            own_rx,
            own_id,
            tags: 0,
            ev_tx,
            ev_rx,
            pred_w: None,
        }
    }

    /// A tagged watch on `key` from after `after`: (tag, watch id).
    fn watch(&mut self, key: &[u8], after: i64) -> (u64, i64) {
        self.tags += 1;
        let (tag, tx) = (self.tags, self.ev_tx.clone());
        (
            tag,
            self.hub.watch(
                key.to_vec(),
                after,
                Arc::new(move |ev| {
                    let _ = tx.send((tag, ev));
                }),
            ),
        )
    }

    /// The watches of a round waiting for `pred`: the predecessor's (kept
    /// from the last round when it is the same), and the key ahead of it.
    fn round(&mut self, pending: &mut Pending, queue: &Queue, pred: Contender) -> Round {
        let pred_is_holder = queue.holder.as_ref() == Some(&pred);
        let fresh = !matches!(&self.pred_w, Some((p, _, _)) if *p == pred);
        if fresh {
            if let Some((_, _, id)) = self.pred_w.take() {
                self.hub.cancel(id);
                pending.watches.retain(|w| *w != id);
            }
            let (tag, id) = self.watch(&pred.key, queue.rev);
            pending.watches.push(id);
            self.pred_w = Some((pred.clone(), tag, id));
        }
        let (pred_tag, pred_id) = self
            .pred_w
            .as_ref()
            .map(|(_, t, id)| (*t, *id))
            .unwrap_or_default();
        // Look ahead: watch the key before the predecessor too. Its delete
        // (the predecessor takes the lock) is answered by a re-read while the
        // predecessor holds, off the handoff's path. A missed event there
        // only costs that read later; the predecessor's watch decides.
        let ahead = match (&queue.ahead, pred_is_holder) {
            (Some(a), false) => {
                let (tag, id) = self.watch(&a.key, queue.rev);
                pending.watches.push(id);
                Some((tag, id))
            }
            _ => None,
        };
        Round {
            pred,
            pred_is_holder,
            fresh,
            pred_tag,
            pred_id,
            ahead,
        }
    }

    /// Wait for the event that ends `round`: how we were woken, or how the
    /// wait ends (close, cancel, deadline, loss: [`WaitEnds::next`]'s order).
    async fn wake(
        &mut self,
        client: &Client,
        ends: &WaitEnds<'_>,
        pending: &mut Pending,
        queue: &Queue,
        round: &Round,
    ) -> std::result::Result<Woken, Interrupt> {
        let (key, my_rev, pred) = (&self.key, self.my_rev, &round.pred);
        let ahead_tag = round.ahead.map(|(t, _)| t).unwrap_or(0);
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
        loop {
            tokio::select! {
                biased;
                i = ends.next(&mut self.own_rx) => match i {
                    Ok(_) => {
                        // Re-watch our key from the next read on.
                        pending.watches.retain(|w| *w != self.own_id);
                        return Ok(Woken::Reread);
                    }
                    Err(i) => return Err(i),
                },
                Some((tag, ev)) = self.ev_rx.recv() => {
                    if tag == ahead_tag && tag != 0 {
                        // The key ahead of our predecessor went (the
                        // predecessor's watch stays).
                        match ev {
                            WatchEvent::Deleted { .. } => return Ok(Woken::Ahead),
                            // The watch starts after our read: with the whole
                            // queue known we step by its deletes, so look once
                            // whether it is still there (a point read). Without,
                            // a missed delete only costs a read later.
                            WatchEvent::Created { rev } if rev > queue.rev && queue.rest.is_some() => {
                                let Some(a) = &queue.ahead else { continue };
                                match presence(client, a, key, my_rev).await {
                                    Ok((true, true)) => ahead_sure = true,
                                    // Gone, and ours is there: step past it.
                                    Ok((false, true)) => return Ok(Woken::Ahead),
                                    // Our key went, or no answer: never step on a
                                    // guess; a read tells.
                                    _ => return Ok(Woken::Reread),
                                }
                            }
                            WatchEvent::Created { .. } => ahead_sure = true,
                            _ => {}
                        }
                        continue;
                    }
                    if tag != round.pred_tag { continue; }
                    match ev {
                        WatchEvent::Created { rev } => {
                            // The watch starts after `rev`: if the store moved since our
                            // read, one read closes the gap (both keys).
                            if rev > queue.rev && !matches!(still_there(client, pred, key, my_rev).await, Ok(true)) {
                                return Ok(Woken::Reread);
                            }
                            if round.pred_is_holder && round.fresh {
                                next_poll = polls.next().map(|ms| Instant::now() + Duration::from_millis(ms));
                            }
                        }
                        WatchEvent::Deleted { .. } => return Ok(queue.pred_deleted(pred, ends.session.alive(), ahead_sure)),
                        WatchEvent::Reset => return Ok(Woken::Reread),
                    }
                }
                _ = sleep_opt(next_poll) => {
                    match still_there(client, pred, key, my_rev).await {
                        Ok(false) => return Ok(Woken::Reread),
                        _ => next_poll = polls.next().map(|ms| Instant::now() + Duration::from_millis(ms)),
                    }
                }
            }
        }
    }

    /// Close `round`'s watches that `woken` leaves without a use.
    fn end_round(&mut self, pending: &mut Pending, round: &Round, woken: &Woken) {
        if let Some((_, id)) = round.ahead {
            self.hub.cancel(id);
            pending.watches.retain(|w| *w != id);
        }
        if !matches!(woken, Woken::Ahead) {
            // The predecessor changed (or we hold): its watch is done.
            self.hub.cancel(round.pred_id);
            pending.watches.retain(|w| *w != round.pred_id);
            self.pred_w = None;
        }
    }

    /// Our turn came: the guard, keeping the watch on our own key.
    fn hold(
        self,
        acq: &Acquisition<'_>,
        session: &Arc<Session>,
        mut pending: Pending,
        waited_on: Vec<Vec<u8>>,
    ) -> Guard {
        let own_id = self.own_id;
        pending.watches.retain(|w| *w != own_id);
        crate::engine::acquisition::held(
            acq.client,
            acq.name,
            session,
            pending,
            self.my_rev,
            waited_on,
            Some((own_id, self.own, self.own_rx)),
        )
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
