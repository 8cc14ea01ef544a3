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
        Contender { key: kv.key().to_vec(), rev: kv.create_revision() }
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
        let holder = if all && older.len() == 1 { pred.clone() } else { None };
        let ahead = older.get(1).cloned();
        let rest = all.then(|| older.iter().skip(2).cloned().collect());
        Queue { mine, pred, holder, ahead, rest, rev }
    }

    /// The queue from a read of the newest keys of `prefix` made in the Txn
    /// that created our `key` (revision `my_rev`), as the mutex's own
    /// acquisition reads it; `all`: the read returned every key under the
    /// prefix. `None` when that read cannot tell (our key is not the newest,
    /// or a nested name's key is among them): read it then.
    pub(crate) fn from_newest(prefix: &[u8], key: &[u8], my_rev: i64, newest: &[KeyValue], all: bool) -> Option<Queue> {
        if newest.first().map(|kv| kv.key()) != Some(key) || !newest.iter().all(|kv| is_direct_child(prefix, kv.key())) {
            return None;
        }
        let older: Vec<Contender> = newest.iter().skip(1).map(Contender::of).collect();
        Some(Queue::of_older(true, &older, all, my_rev))
    }

    /// `ahead` was deleted after the read. With the whole queue known, step
    /// to the next older key, skipping those this client's watches saw deleted
    /// since the read (a key older than the holder is gone: when `ahead` held
    /// the lock, every one of them); when none is left, `pred` holds. `false`
    /// when only a read can tell (a key no watch of ours covers).
    pub(crate) fn ahead_gone(&mut self, deleted_after: &dyn Fn(&[u8], i64) -> Option<bool>) -> bool {
        let Some(rest) = self.rest.as_mut() else { return false };
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
        Contender { key: key.as_bytes().to_vec(), rev }
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
        assert_eq!(q.rest.unwrap().into_iter().collect::<Vec<_>>(), vec![c("l/a", 5)]);
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
}
