//! The holds a client took with an owner, for reentrancy
//! (`recipes/reentry.rs`): the per-client table, kept weakly.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::error::Result;
use crate::guard::{Guard, WeakHold};
use crate::poison::Locked;

/// Past this many entries, a new one first drops the entries of ended holds.
const PRUNE_AT: usize = 1024;

/// The holds taken with an owner: (the name's prefix, owner) -> hold.
#[derive(Default)]
pub(crate) struct Reentry {
    holds: Mutex<HashMap<(Vec<u8>, u64), WeakHold>>,
}

impl Reentry {
    /// Another handle of `owner`'s hold of `prefix`, if it holds it (or
    /// `LockLost` if that hold was lost).
    pub(crate) fn reenter(&self, prefix: &[u8], owner: u64) -> Option<Result<Guard>> {
        let mut holds = self.holds.locked();
        let key = (prefix.to_vec(), owner);
        let r = holds.get(&key)?.reenter();
        if r.is_none() {
            holds.remove(&key);
        }
        r
    }

    pub(crate) fn remember(&self, prefix: Vec<u8>, owner: u64, g: &Guard) {
        let mut holds = self.holds.locked();
        if holds.len() >= PRUNE_AT {
            holds.retain(|_, h| !h.is_gone());
        }
        holds.insert((prefix, owner), g.downgrade());
    }
}
