//! The holds this client took with an owner (reentrancy: Java's
//! `ReentrantLock` per thread, recipes/reentry.rs), kept weakly, so that the
//! same owner takes a held lock again without a request. The table is the
//! client's; what a hold is belongs to the guard layer above, which
//! implements [`OwnedHold`] (guard/reentry.rs): the client names nothing
//! above it.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Mutex;

use crate::poison::Locked;

/// Past this many entries, a new one first drops the entries of ended holds.
const PRUNE_AT: usize = 1024;

/// A hold as the table keeps it: weakly, so an ended hold is only an entry
/// to drop.
pub(crate) trait OwnedHold: Send + Sync + 'static {
    /// The hold has ended (every handle of it is gone).
    fn is_gone(&self) -> bool;
    /// The hold itself, for the layer that put it here.
    fn as_any(&self) -> &dyn Any;
}

/// (the name's prefix, owner): whose hold an entry is.
type OwnerKey = (Vec<u8>, u64);

/// The holds taken with an owner: (the name's prefix, owner) -> hold.
#[derive(Default)]
pub(crate) struct Owners {
    holds: Mutex<HashMap<OwnerKey, Box<dyn OwnedHold>>>,
}

impl Owners {
    /// `f` of `owner`'s hold of `prefix`, if the table has one; the entry is
    /// dropped when `f` says the hold is over (returns `None`).
    pub(crate) fn find<R>(
        &self,
        prefix: &[u8],
        owner: u64,
        f: impl FnOnce(&dyn OwnedHold) -> Option<R>,
    ) -> Option<R> {
        let mut holds = self.holds.locked();
        let key = (prefix.to_vec(), owner);
        let r = f(holds.get(&key)?.as_ref());
        if r.is_none() {
            holds.remove(&key);
        }
        r
    }

    /// Remember `hold` as `owner`'s hold of `prefix`.
    pub(crate) fn insert(&self, prefix: Vec<u8>, owner: u64, hold: Box<dyn OwnedHold>) {
        let mut holds = self.holds.locked();
        if holds.len() >= PRUNE_AT {
            holds.retain(|_, h| !h.is_gone());
        }
        holds.insert((prefix, owner), hold);
    }
}
