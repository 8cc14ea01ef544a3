//! Reentrant holds (`recipes/reentry.rs`) as the client's owner table keeps
//! them (`client/owners.rs`): a [`WeakHold`], handed out again as another
//! handle of the same hold.

use std::any::Any;

use crate::client::owners::{OwnedHold, Owners};
use crate::error::Result;
use crate::guard::{Guard, WeakHold};

impl OwnedHold for WeakHold {
    fn is_gone(&self) -> bool {
        WeakHold::is_gone(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Another handle of `owner`'s hold of `prefix`, if it holds it (or
/// `LockLost` if that hold was lost).
pub(crate) fn reenter(owners: &Owners, prefix: &[u8], owner: u64) -> Option<Result<Guard>> {
    owners.find(prefix, owner, |h| {
        h.as_any().downcast_ref::<WeakHold>()?.reenter()
    })
}

/// Remember `g` as `owner`'s hold of `prefix`.
pub(crate) fn remember(owners: &Owners, prefix: Vec<u8>, owner: u64, g: &Guard) {
    owners.insert(prefix, owner, Box::new(g.downgrade()));
}
