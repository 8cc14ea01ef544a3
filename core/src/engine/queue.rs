//! The queue of a lock as one read saw it, from a waiter's point of view,
//! and how deletes seen after the read step it forward. Pure: the waiter's
//! protocol (`wait.rs`, `mutex.rs`) feeds it reads and delete events.

use etcd_client::{KeyValue, TxnOpResponse, TxnResponse};

use crate::names::is_direct_child;

pub(crate) fn revision(r: &TxnResponse) -> i64 {
    r.header().map(|h| h.revision()).unwrap_or(0)
}

pub(crate) fn kvs(r: Option<&TxnOpResponse>) -> &[KeyValue] {
    match r {
        Some(TxnOpResponse::Get(g)) => g.kvs(),
        _ => &[],
    }
}

/// Why a waiter stopped waiting for its predecessor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// The predecessor was the holder and is gone: the lock is ours.
    Acquired,
    /// The predecessor left while a key older than it remained: with the
    /// whole queue known, the next older key is our predecessor (else read).
    PredGone,
    /// Something else changed: read the queue again.
    Reread,
    /// The key ahead of the predecessor went: read the queue again, keeping
    /// the predecessor's watch.
    Ahead,
}

/// Whether a Txn's range read was cut by its limit (more keys match).
pub(crate) fn more(r: Option<&TxnOpResponse>) -> bool {
    match r {
        Some(TxnOpResponse::Get(g)) => g.more(),
        _ => false,
    }
}

/// A key under the lock's prefix: its name and create_revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Contender {
    pub(crate) key: Vec<u8>,
    pub(crate) rev: i64,
}

impl Contender {
    pub(crate) fn of(kv: &KeyValue) -> Contender {
        Contender {
            key: kv.key().to_vec(),
            rev: kv.create_revision(),
        }
    }
}

/// How many keys older than ours a queue read returns at most. When that is
/// all of them, the waiter knows the whole queue ahead of it and follows it by
/// delete events alone: no read at any handoff (with 8 contenders, a read per
/// handoff would land right on the handoff's path).
pub(crate) const OLDER_READ: i64 = 16;

/// The queue as one read saw it, from our key's point of view.
pub(crate) struct Queue {
    /// Our key still exists.
    pub(crate) mine: bool,
    /// The newest direct child created before ours: the key we wait for.
    pub(crate) pred: Option<Contender>,
    /// The holder, when the read tells it cheaply: `pred` when it is the only
    /// older key (then its delete hands the lock to us without another read).
    pub(crate) holder: Option<Contender>,
    /// The key just before `pred`, when the read saw it: watched too, so that
    /// when it goes (and `pred` takes the lock) we learn that `pred` holds,
    /// and `pred`'s own delete then hands the lock over with no read.
    pub(crate) ahead: Option<Contender>,
    /// Every older key beyond `ahead`, newest first, when the read saw all the
    /// older keys (`None`: it saw only the newest of them). Keys only leave
    /// this set (a new key is always newer than ours), so deletes seen after
    /// the read step the queue forward with no read ([`Queue::ahead_gone`],
    /// [`Queue::pred_gone`]).
    pub(crate) rest: Option<std::collections::VecDeque<Contender>>,
    /// The store revision of the read; every watch of the wait reports the
    /// deletes after it.
    pub(crate) rev: i64,
}

impl Queue {
    /// The queue from the keys older than ours, newest first (direct children
    /// only); `all`: they are all the older keys (the read was not cut by its limit).
    pub(crate) fn of_older(mine: bool, older: &[Contender], all: bool, rev: i64) -> Queue {
        let pred = older.first().cloned();
        let holder = if all && older.len() == 1 {
            pred.clone()
        } else {
            None
        };
        let ahead = older.get(1).cloned();
        let rest = all.then(|| older.iter().skip(2).cloned().collect());
        Queue {
            mine,
            pred,
            holder,
            ahead,
            rest,
            rev,
        }
    }

    /// The queue from a read of the newest keys of `prefix` made in the Txn
    /// that created our `key` (revision `my_rev`), as the mutex's own
    /// acquisition reads it; `all`: the read returned every key under the
    /// prefix. `None` when that read cannot tell (our key is not the newest,
    /// or a nested name's key is among them): read it then.
    pub(crate) fn from_newest(
        prefix: &[u8],
        key: &[u8],
        my_rev: i64,
        newest: &[KeyValue],
        all: bool,
    ) -> Option<Queue> {
        let newest: Vec<Contender> = newest.iter().map(Contender::of).collect();
        Queue::from_newest_contenders(prefix, key, my_rev, &newest, all)
    }

    /// [`Queue::from_newest`] on the read's keys and create revisions.
    fn from_newest_contenders(
        prefix: &[u8],
        key: &[u8],
        my_rev: i64,
        newest: &[Contender],
        all: bool,
    ) -> Option<Queue> {
        if newest.first().map(|c| c.key.as_slice()) != Some(key)
            || !newest.iter().all(|c| is_direct_child(prefix, &c.key))
        {
            return None;
        }
        Some(Queue::of_older(true, &newest[1..], all, my_rev))
    }

    /// The wait's decision when its predecessor `pred`'s key is deleted.
    /// The lock is ours with no further read only when `pred` was the
    /// holder (the only older key) and our session is alive (a delete of our
    /// own key would have been seen). Stepping to the next older key needs
    /// the whole queue known and the key ahead known present (`ahead_sure`:
    /// its watch confirmed it). Anything else is one read.
    pub(crate) fn pred_deleted(
        &self,
        pred: &Contender,
        session_alive: bool,
        ahead_sure: bool,
    ) -> Woken {
        let pred_is_holder = self.holder.as_ref() == Some(pred);
        if pred_is_holder && session_alive {
            Woken::Acquired
        } else if !pred_is_holder && self.rest.is_some() && ahead_sure {
            Woken::PredGone
        } else {
            Woken::Reread
        }
    }

    /// `ahead` was deleted after the read. With the whole queue known, step
    /// to the next older key, skipping those this client's watches saw deleted
    /// since the read (a key older than the holder is gone: when `ahead` held
    /// the lock, every one of them); when none is left, `pred` holds. `false`
    /// when only a read can tell (a key no watch of ours covers).
    pub(crate) fn ahead_gone(
        &mut self,
        deleted_after: &dyn Fn(&[u8], i64) -> Option<bool>,
    ) -> bool {
        let Some(rest) = self.rest.as_mut() else {
            return false;
        };
        loop {
            let Some(next) = rest.front() else {
                self.ahead = None;
                self.holder = self.pred.clone();
                return true;
            };
            match deleted_after(&next.key, self.rev) {
                Some(true) => {
                    rest.pop_front();
                }
                Some(false) => {
                    self.ahead = rest.pop_front();
                    self.holder = None;
                    return true;
                }
                None => return false,
            }
        }
    }

    /// `pred` was deleted after the read while `ahead` (known present) was
    /// older: `ahead` is our predecessor now, and the key ahead of it is found
    /// as in [`Queue::ahead_gone`]; `false` when only a read can tell.
    pub(crate) fn pred_gone(&mut self, deleted_after: &dyn Fn(&[u8], i64) -> Option<bool>) -> bool {
        if self.rest.is_none() || self.ahead.is_none() {
            return false;
        }
        self.pred = self.ahead.take();
        self.ahead_gone(deleted_after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(key: &str, rev: i64) -> Contender {
        Contender {
            key: key.as_bytes().to_vec(),
            rev,
        }
    }

    #[test]
    fn no_older_key_means_we_hold() {
        let q = Queue::of_older(true, &[], true, 10);
        assert!(q.mine && q.pred.is_none() && q.holder.is_none() && q.ahead.is_none());
    }

    #[test]
    fn the_only_older_key_is_the_holder_whose_delete_hands_over() {
        let q = Queue::of_older(true, &[c("l/a", 5)], true, 10);
        assert_eq!(q.pred, Some(c("l/a", 5)));
        assert_eq!(q.holder, q.pred);
        assert!(q.ahead.is_none());
        assert_eq!(q.rest.map(|r| r.len()), Some(0));
    }

    #[test]
    fn a_longer_queue_is_followed_newest_first() {
        // Newest first, as the read returns them: we wait for l/c, watch l/b ahead of it.
        let older = [c("l/c", 7), c("l/b", 6), c("l/a", 5)];
        let q = Queue::of_older(true, &older, true, 10);
        assert_eq!(q.pred, Some(c("l/c", 7)));
        assert_eq!(q.ahead, Some(c("l/b", 6)));
        assert!(q.holder.is_none(), "the holder is not our predecessor");
        assert_eq!(
            q.rest.unwrap().into_iter().collect::<Vec<_>>(),
            vec![c("l/a", 5)]
        );
        assert_eq!(q.rev, 10);
    }

    #[test]
    fn a_read_cut_by_its_limit_never_names_the_holder() {
        // One key seen, but more exist: it may not be the holder, and the
        // rest of the queue is unknown (a delete then costs a read).
        let q = Queue::of_older(true, &[c("l/p", 9)], false, 10);
        assert_eq!(q.pred, Some(c("l/p", 9)));
        assert!(q.holder.is_none() && q.rest.is_none());
    }

    #[test]
    fn a_delete_no_watch_covers_needs_a_read() {
        let mut q = Queue::of_older(true, &[c("l/c", 7), c("l/b", 6), c("l/a", 5)], true, 10);
        assert!(!q.ahead_gone(&|_, _| None), "unknown: read again");
        let mut q2 = Queue::of_older(true, &[c("l/c", 7)], false, 10);
        assert!(
            !q2.pred_gone(&|_, _| Some(true)),
            "the rest of the queue was never read"
        );
    }

    proptest::proptest! {
        /// Deletes seen by watches step the queue exactly as a fresh read of
        /// the remaining keys would build it, whatever the order of deletes.
        #[test]
        fn deletes_step_the_queue_like_a_fresh_read(n in 1usize..24, order in proptest::collection::vec(0usize..64, 0..48)) {
            // Older keys, newest first, as the acquisition's read returns them.
            let older: Vec<Contender> = (0..n).rev().map(|i| c(&format!("l/{i:02}"), 100 + i as i64)).collect();
            let mut present = vec![true; n]; // by index into `older`
            let mut q = Queue::of_older(true, &older, true, 1000);
            for pick in order {
                let live: Vec<usize> = (0..n).filter(|i| present[*i]).collect();
                if live.is_empty() { break; }
                let victim = live[pick % live.len()];
                present[victim] = false;
                let gone = |k: &[u8], _rev: i64| Some(older.iter().position(|x| x.key == k).map(|i| !present[i]).unwrap_or(true));
                let is = |o: &Option<Contender>| o.as_ref().map(|x| x.key == older[victim].key).unwrap_or(false);
                if is(&q.ahead) {
                    proptest::prop_assert!(q.ahead_gone(&gone));
                } else if is(&q.pred) {
                    if q.ahead.is_none() {
                        // The holder left: we hold. Nothing to step.
                        proptest::prop_assert_eq!(q.holder.as_ref(), q.pred.as_ref());
                        break;
                    }
                    proptest::prop_assert!(q.pred_gone(&gone));
                } else {
                    continue; // a key further ahead: seen when the queue reaches it
                }
                let rest: Vec<Contender> = (0..n).filter(|i| present[*i]).map(|i| older[i].clone()).collect();
                let fresh = Queue::of_older(true, &rest, true, 1000);
                proptest::prop_assert_eq!(&q.pred, &fresh.pred);
                proptest::prop_assert_eq!(&q.ahead, &fresh.ahead);
                proptest::prop_assert_eq!(&q.holder, &fresh.holder);
            }
        }

        /// The acquisition's own read tells the queue only when our key is the
        /// newest and every key is a direct child; a key re-created after ours
        /// (newer) or a nested name's key means read again.
        #[test]
        fn the_acquisition_read_is_trusted_only_when_ours_is_newest(n in 0usize..10, newer in proptest::bool::ANY, nested in proptest::bool::ANY) {
            let mut newest = Vec::new();
            if newer { newest.push(c("l/again", 501)); }
            newest.push(c("l/mine", 500));
            for i in (0..n).rev() { newest.push(c(&format!("l/{i}"), 100 + i as i64)); }
            if nested { newest.push(c("l/x/1", 50)); }
            let q = Queue::from_newest_contenders(b"l/", b"l/mine", 500, &newest, true);
            proptest::prop_assert_eq!(q.is_some(), !newer && !nested);
            if let Some(q) = q {
                proptest::prop_assert_eq!(q.pred.map(|p| p.rev), n.checked_sub(1).map(|i| 100 + i as i64));
                proptest::prop_assert_eq!(q.holder.is_some(), n == 1);
            }
        }
    }

    #[test]
    fn a_predecessors_delete_grants_only_a_live_session_behind_the_holder() {
        let holder = Queue::of_older(true, &[c("l/a", 5)], true, 10);
        let pred = c("l/a", 5);
        assert_eq!(holder.pred_deleted(&pred, true, false), Woken::Acquired);
        assert_eq!(
            holder.pred_deleted(&pred, false, true),
            Woken::Reread,
            "a dead session never takes the lock"
        );
        let deep = Queue::of_older(true, &[c("l/c", 7), c("l/b", 6), c("l/a", 5)], true, 10);
        let pred = c("l/c", 7);
        assert_eq!(deep.pred_deleted(&pred, true, true), Woken::PredGone);
        assert_eq!(
            deep.pred_deleted(&pred, true, false),
            Woken::Reread,
            "the key ahead is not known present"
        );
        let cut = Queue::of_older(true, &[c("l/c", 7), c("l/b", 6)], false, 10);
        assert_eq!(
            cut.pred_deleted(&pred, true, true),
            Woken::Reread,
            "the queue beyond is unknown"
        );
        let unsure = Queue::of_older(true, &[c("l/p", 9)], false, 10);
        assert_eq!(
            unsure.pred_deleted(&c("l/p", 9), true, true),
            Woken::Reread,
            "a cut read never names the holder"
        );
    }
}
