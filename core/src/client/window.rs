//! The local queue in front of etcd's queue.
//!
//! Each queued contender's acquire Txn reads the newest keys of its lock's
//! prefix, sorted by create revision, and etcd serves any sorted range by
//! reading the whole prefix: with N keys queued, queueing costs O(N) in etcd
//! and a burst of N waiters O(N²): a burst of thousands makes etcd so slow
//! that keep-alives miss their TTL and every session is lost.
//!
//! So the waiters of one client on one lock take turns locally first (a fair,
//! FIFO semaphore per lock name): at most [`WINDOW`] of them have a key queued
//! in etcd at a time; a waiter leaves the window when it is granted, gives up,
//! or fails, and the next local waiter queues. The prefix then holds at most
//! `WINDOW` waiting keys per client plus the holders, whatever the number of
//! waiters. Order is unchanged within a client (FIFO); across clients, a waiter
//! of another client queues behind at most `WINDOW` keys of ours instead of all
//! of them. Handoff stays one watch event: the next local waiter is already
//! queued behind the holder.
//!
//! Only waits use the window: one-try acquisitions (`try_lock`, timeout zero)
//! write nothing while a lock is held and never queue.

use crate::poison::Locked;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// Acquisitions one client carries between admission and etcd's answer to
/// the Txn that queues their key (then they wait, or hold, at no cost to the
/// next). A burst of calls beyond it waits for admission with only its
/// outer future allocated: the state of an acquisition in progress (its
/// futures, key, Txn, request) exists for at most this many calls at once,
/// so the burst's peak, which a host's allocator may keep after it, stays
/// near what the locks then held cost (`examples/burst.rs`). Requests in
/// flight are bounded alike (`transport::MAX_IN_FLIGHT`).
pub(crate) const ADMITTED: usize = 256;

/// Waiting keys per client and lock name in etcd's queue at a time (exported
/// as `etcdlock::QUEUED_PER_CLIENT`). Two, so the next
/// local waiter is queued (and watching its predecessor) while the one ahead
/// takes over: a handoff inside one client costs no extra round trip.
pub const WINDOW: usize = 2;

/// Per-client map of lock prefix -> its window. Entries exist only while some
/// waiter uses them.
#[derive(Default)]
pub(crate) struct Windows {
    map: Arc<Mutex<HashMap<Vec<u8>, Arc<Semaphore>>>>,
}

/// A place in the window; leaving (drop) lets the next local waiter queue.
pub(crate) struct Place {
    permit: Option<OwnedSemaphorePermit>,
    sem: Arc<Semaphore>,
    prefix: Vec<u8>,
    map: Arc<Mutex<HashMap<Vec<u8>, Arc<Semaphore>>>>,
}

/// Why no place was given.
pub(crate) enum NoPlace {
    Deadline,
    Cancelled,
    Closed,
}

impl Windows {
    /// Wait, FIFO among this client's waiters on `prefix`, for a place in its
    /// window, until `deadline` or a cancellation.
    pub(crate) async fn enter(
        &self,
        prefix: &[u8],
        deadline: Option<Instant>,
        cancel: &CancellationToken,
        closed: &CancellationToken,
    ) -> Result<Place, NoPlace> {
        let sem = {
            let mut map = self.map.locked();
            map.entry(prefix.to_vec())
                .or_insert_with(|| Arc::new(Semaphore::new(WINDOW)))
                .clone()
        };
        let mut place = Place {
            permit: None,
            sem: sem.clone(),
            prefix: prefix.to_vec(),
            map: self.map.clone(),
        };
        // Fast path: a free place is taken without a timer.
        if let Ok(p) = sem.clone().try_acquire_owned() {
            place.permit = Some(p);
            return Ok(place);
        }
        tokio::select! {
            biased;
            _ = cancel.cancelled() => Err(NoPlace::Cancelled),
            _ = closed.cancelled() => Err(NoPlace::Closed),
            _ = crate::runtime::sleep_opt(deadline) => Err(NoPlace::Deadline),
            p = sem.acquire_owned() => {
                // The semaphore is never closed.
                place.permit = p.ok();
                Ok(place)
            }
        }
    }

    /// Lock prefixes with a window in use (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.lock().unwrap().len()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.permit.take();
        // Forget the window when nobody else uses it. Clones are made under
        // the map lock, so the count seen here is exact.
        let mut map = self.map.locked();
        if Arc::strong_count(&self.sem) == 2 && self.sem.available_permits() == WINDOW {
            if let Some(s) = map.get(&self.prefix) {
                if Arc::ptr_eq(s, &self.sem) {
                    map.remove(&self.prefix);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn window_is_fifo_bounded_and_forgotten() {
        let w = Windows::default();
        let never = CancellationToken::new();
        let a = w.enter(b"p/", None, &never, &never).await.ok().unwrap();
        let b = w.enter(b"p/", None, &never, &never).await.ok().unwrap();
        // Full: a third waits until its deadline.
        let late = Instant::now() + Duration::from_millis(20);
        assert!(matches!(
            w.enter(b"p/", Some(late), &never, &never).await,
            Err(NoPlace::Deadline)
        ));
        // Another name has its own window.
        let other = w.enter(b"q/", None, &never, &never).await.ok().unwrap();
        assert_eq!(w.len(), 2);
        drop(other);
        assert_eq!(w.len(), 1);
        // A cancelled waiter leaves; a waiting one gets the place `a` frees.
        let c = CancellationToken::new();
        c.cancel();
        assert!(matches!(
            w.enter(b"p/", None, &c, &never).await,
            Err(NoPlace::Cancelled)
        ));
        let (w2, n2) = (Arc::new(w), never.clone());
        let w3 = w2.clone();
        let third = tokio::spawn(async move { w3.enter(b"p/", None, &n2, &n2).await.is_ok() });
        tokio::task::yield_now().await;
        drop(a);
        assert!(third.await.unwrap());
        drop(b);
        assert_eq!(w2.len(), 0);
    }
}
