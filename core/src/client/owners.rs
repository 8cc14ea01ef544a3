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
    /// What each owner waits for now (the name's prefix), while its
    /// reentrant lock call waits: the owner-level wait-for graph inside
    /// this client, which etcd cannot see (every owner's key is on the
    /// client's one lease).
    waits: Mutex<HashMap<u64, Vec<u8>>>,
}

/// One wait of an owner-level cycle: `waiter` waits for `prefix`, held by
/// `holder`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnerWait {
    pub(crate) waiter: u64,
    pub(crate) prefix: Vec<u8>,
    pub(crate) holder: u64,
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

    /// The owners (other than `not`) whose hold of `prefix` lives.
    fn holders(&self, prefix: &[u8], not: u64) -> Vec<u64> {
        let holds = self.holds.locked();
        let mut v: Vec<u64> = holds
            .iter()
            .filter(|((p, o), h)| p == prefix && *o != not && !h.is_gone())
            .map(|((_, o), _)| *o)
            .collect();
        v.sort_unstable();
        v
    }

    /// `owner` waits for `prefix` until the returned mark is dropped; with
    /// `check`, unless that wait would close a cycle of owners of this
    /// client (each waiting for a name the next one holds, back to `owner`):
    /// then the cycle, and nothing recorded. The check and the record are
    /// one step under the table's lock, so of two owners starting to wait
    /// on each other at once, the second sees the first.
    pub(crate) fn wait_unless_cycle(
        &self,
        owner: u64,
        prefix: &[u8],
        check: bool,
    ) -> std::result::Result<WaitMark<'_>, Vec<OwnerWait>> {
        let mut waits = self.waits.locked();
        if check {
            let mut path: Vec<OwnerWait> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            if self.walk(owner, owner, prefix, &waits, &mut path, &mut seen) {
                return Err(path);
            }
        }
        waits.insert(owner, prefix.to_vec());
        Ok(WaitMark {
            owners: self,
            owner,
        })
    }

    fn walk(
        &self,
        start: u64,
        waiter: u64,
        prefix: &[u8],
        waits: &HashMap<u64, Vec<u8>>,
        path: &mut Vec<OwnerWait>,
        seen: &mut std::collections::HashSet<u64>,
    ) -> bool {
        for holder in self.holders(prefix, waiter) {
            path.push(OwnerWait {
                waiter,
                prefix: prefix.to_vec(),
                holder,
            });
            if holder == start {
                return true;
            }
            if seen.insert(holder) {
                if let Some(next) = waits.get(&holder) {
                    if self.walk(start, holder, next, waits, path, seen) {
                        return true;
                    }
                }
            }
            path.pop();
        }
        false
    }
}

/// An owner's wait in [`Owners::wait_unless_cycle`], ended when dropped.
pub(crate) struct WaitMark<'a> {
    owners: &'a Owners,
    owner: u64,
}

impl Drop for WaitMark<'_> {
    fn drop(&mut self) {
        self.owners.waits.locked().remove(&self.owner);
    }
}
