//! The mutex's driver of the wait engine (rule.rs), for the mutex, the
//! election and the multi-lock: [`Acquisition::wait_turn`] waits behind the
//! keys created before ours, watching only the newest of them (no
//! thundering herd) and the key ahead of it, stepping a known queue forward
//! on deletes; and the reads it decides by: the queue around our key
//! ([`read_queue`](crate::engine::keys::read_queue)) and the point reads
//! that close a watch's gap ([`presence`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{GetOptions, Txn, TxnOp};
use tokio::sync::mpsc;

use crate::client::Client;
use crate::engine::acquisition::Acquisition;
use crate::engine::queue::{kvs, Contender, Queue, Woken};
use crate::engine::wait::Pending;
use crate::engine::waiter::{Driver, Turn};
use crate::error::{Error, ErrorCode, Result};
use crate::guard::Guard;
use crate::runtime::sleep_opt;
use crate::session::Session;
use crate::watch::{WatchEvent, WatchHub};

impl Acquisition<'_> {
    /// Queued with `my_rev` on `session`, behind `queue` (read by the
    /// acquire Txn): wait until no key older than ours remains.
    pub(crate) async fn wait_turn(
        &self,
        session: &Arc<Session>,
        pending: Pending,
        my_rev: i64,
        queue: Queue,
    ) -> Result<Guard> {
        let mut driver = Stepper::new(self, session, pending.key.clone(), my_rev, queue);
        self.wait_on(session, pending, my_rev, &mut driver, "waiter")
            .await
    }
}

/// The mutex's driver: waits behind the keys created before ours, watching
/// only the newest of them (no thundering herd) and the key ahead of it.
/// With the whole queue known, a delete steps the queue forward with no
/// read (a handoff costs none); it reads the queue when it cannot step.
/// Every watch starts "now"; when etcd reports that "now" is past our last
/// read, a point read of both keys closes the gap, so no delete is missed
/// whatever the timing.
pub(crate) struct Stepper<'a, 'c> {
    acq: &'a Acquisition<'c>,
    session: &'a Session,
    hub: &'a WatchHub,
    key: Vec<u8>,
    my_rev: i64,
    queue: Queue,
    /// `queue` is the acquire Txn's read, not used yet.
    first: bool,
    /// How the last wake ended (`None`: it was dropped, or none ran).
    woken: Option<Woken>,
    /// The watches of the last wake, ended at the next turn.
    round: Option<Round>,
    // Every watch this wait starts gets a tag; events of watches no longer
    // current are dropped.
    tags: u64,
    ev_tx: mpsc::UnboundedSender<(u64, WatchEvent)>,
    ev_rx: mpsc::UnboundedReceiver<(u64, WatchEvent)>,
    // The predecessor's watch lives as long as the predecessor: a re-read
    // that finds the same predecessor keeps it (no new watch, no gap).
    pred_w: Option<(Contender, u64, i64)>,
}

impl Driver for Stepper<'_, '_> {
    async fn turn(&mut self, watches: &mut Vec<i64>) -> Result<Turn> {
        let woken = self.woken.take();
        if let Some(round) = self.round.take() {
            self.end_round(watches, &round, woken.unwrap_or(Woken::Reread));
        }
        let hub = self.hub;
        // With the whole queue known, a delete steps it forward; the new
        // watches start at the same read's revision, so the hub replays a
        // delete they would otherwise have missed (or reports the gap).
        let stepped = match woken {
            Some(Woken::Acquired) => return Ok(Turn::go(self.queue.rev)),
            Some(Woken::Ahead) => self.queue.ahead_gone(&|k, r| hub.deleted_after(k, r)),
            Some(Woken::PredGone) => self.queue.pred_gone(&|k, r| hub.deleted_after(k, r)),
            None => self.first,
            Some(Woken::Reread) => false,
        };
        self.first = false;
        if !stepped {
            let (acq, key) = (self.acq, &self.key);
            self.queue = crate::engine::keys::read_queue(acq.client, &acq.prefix, key, self.my_rev)
                .await
                .map_err(|e| acq.ctx(e))?;
        }
        if !self.queue.mine {
            return Err(Error::new(ErrorCode::LockLost, "our waiter key is gone"));
        }
        Ok(match &self.queue.pred {
            None => Turn::go(self.queue.rev),
            Some(p) => Turn::behind(self.queue.rev, p.key.clone(), true),
        })
    }

    async fn wake(&mut self, client: &Client, watches: &mut Vec<i64>, _turn: &Turn) {
        let Some(pred) = self.queue.pred.clone() else {
            return;
        };
        let name = self.acq.name;
        tracing::trace!(lock = name, pred = %String::from_utf8_lossy(&pred.key), "waiting for predecessor");
        let round = self.round(watches, pred);
        self.round = Some(round.clone());
        let woken = self.listen(client, &round).await;
        self.woken = Some(woken);
    }
}

/// One round of the wait: the predecessor a read found, and the watches on
/// it and on the key ahead of it.
#[derive(Clone)]
struct Round {
    pred: Contender,
    pred_is_holder: bool,
    /// Whether the predecessor's watch is new this round.
    fresh: bool,
    pred_tag: u64,
    pred_id: i64,
    ahead: Option<(u64, i64)>,
}

impl<'a, 'c> Stepper<'a, 'c> {
    /// The driver of `acq`'s wait with our `key` (created at `my_rev`),
    /// behind `queue`.
    fn new(
        acq: &'a Acquisition<'c>,
        session: &'a Session,
        key: Vec<u8>,
        my_rev: i64,
        queue: Queue,
    ) -> Self {
        let (ev_tx, ev_rx) = mpsc::unbounded_channel::<(u64, WatchEvent)>();
        Stepper {
            acq,
            session,
            hub: &acq.client.inner.hub,
            key,
            my_rev,
            queue,
            first: true,
            woken: None,
            round: None,
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
    fn round(&mut self, watches: &mut Vec<i64>, pred: Contender) -> Round {
        let queue = &self.queue;
        let pred_is_holder = queue.holder.as_ref() == Some(&pred);
        let fresh = !matches!(&self.pred_w, Some((p, _, _)) if *p == pred);
        if fresh {
            if let Some((_, _, id)) = self.pred_w.take() {
                self.hub.cancel(id);
                watches.retain(|w| *w != id);
            }
            let (tag, id) = self.watch(&pred.key, self.queue.rev);
            watches.push(id);
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
        let ahead = match (self.queue.ahead.clone(), pred_is_holder) {
            (Some(a), false) => {
                let (tag, id) = self.watch(&a.key, self.queue.rev);
                watches.push(id);
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

    /// Wait for the event that ends `round`: how we were woken. What ends
    /// the wait otherwise (close, cancel, deadline, loss, our own key) is
    /// the engine's ([`WaitEnds::next`](crate::engine::wait::WaitEnds::next)).
    async fn listen(&mut self, client: &Client, round: &Round) -> Woken {
        let queue = &self.queue;
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
                Some((tag, ev)) = self.ev_rx.recv() => {
                    if tag == ahead_tag && tag != 0 {
                        // The key ahead of our predecessor went (the
                        // predecessor's watch stays).
                        match ev {
                            WatchEvent::Deleted { .. } => return Woken::Ahead,
                            // The watch starts after our read: with the whole
                            // queue known we step by its deletes, so look once
                            // whether it is still there (a point read). Without,
                            // a missed delete only costs a read later.
                            WatchEvent::Created { rev } if rev > queue.rev && queue.rest.is_some() => {
                                let Some(a) = &queue.ahead else { continue };
                                match presence(client, a, key, my_rev).await {
                                    Ok((true, true)) => ahead_sure = true,
                                    // Gone, and ours is there: step past it.
                                    Ok((false, true)) => return Woken::Ahead,
                                    // Our key went, or no answer: never step on a
                                    // guess; a read tells.
                                    _ => return Woken::Reread,
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
                                return Woken::Reread;
                            }
                            if round.pred_is_holder && round.fresh {
                                next_poll = polls.next().map(|ms| Instant::now() + Duration::from_millis(ms));
                            }
                        }
                        WatchEvent::Deleted { .. } => return queue.pred_deleted(pred, self.session.alive(), ahead_sure),
                        WatchEvent::Reset => return Woken::Reread,
                    }
                }
                _ = sleep_opt(next_poll) => {
                    match still_there(client, pred, key, my_rev).await {
                        Ok(false) => return Woken::Reread,
                        _ => next_poll = polls.next().map(|ms| Instant::now() + Duration::from_millis(ms)),
                    }
                }
            }
        }
    }

    /// Close `round`'s watches that `woken` leaves without a use.
    fn end_round(&mut self, watches: &mut Vec<i64>, round: &Round, woken: Woken) {
        if let Some((_, id)) = round.ahead {
            self.hub.cancel(id);
            watches.retain(|w| *w != id);
        }
        if !matches!(woken, Woken::Ahead) {
            // The predecessor changed (or we hold): its watch is done.
            self.hub.cancel(round.pred_id);
            watches.retain(|w| *w != round.pred_id);
            self.pred_w = None;
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
