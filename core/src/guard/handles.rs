//! Handles of one hold: a guard from an acquisition, plus one per re-entry
//! by its owner ([`crate::Client::lock_reentrant`]); the hold ends with its
//! last handle. `Shared::handles` counts the handles not yet ended.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Weak};

use super::{Guard, GuardState, Shared};
use crate::error::{Error, Result};
use crate::names::show;

/// A hold as the re-entry table keeps it: it does not keep the hold alive.
pub(crate) struct WeakHold(Weak<Shared>);

impl WeakHold {
    /// Another handle of this hold for a re-entry: `None` when the hold has
    /// ended (released, or its last handle gone), `LockLost` when it was
    /// lost (a lost hold is never re-entered).
    pub(crate) fn reenter(&self) -> Option<Result<Guard>> {
        let shared = self.0.upgrade()?;
        if shared.handles.load(SeqCst) == 0 {
            // Every handle ended (unlocked, if not dropped): nothing to re-enter.
            return None;
        }
        match shared.hold_state() {
            GuardState::Held => {}
            GuardState::Released => return None,
            GuardState::Lost(l) => {
                return Some(Err(Error::lost(
                    l.reason,
                    format!(
                        "lock {} was lost ({}); a lost hold is not re-entered: unlock it first",
                        show(&shared.name),
                        l.reason
                    ),
                )))
            }
        }
        // Only while some handle still holds it (never from 0 back to 1).
        shared
            .handles
            .fetch_update(SeqCst, SeqCst, |n| (n > 0).then_some(n + 1))
            .ok()?;
        Some(Ok(Guard {
            shared,
            done: AtomicBool::new(false),
        }))
    }

    /// Whether the hold is gone for good (nothing to re-enter).
    pub(crate) fn is_gone(&self) -> bool {
        self.0
            .upgrade()
            .map_or(true, |s| s.handles.load(SeqCst) == 0)
    }
}

impl Guard {
    /// This hold for the re-entry table.
    pub(crate) fn downgrade(&self) -> WeakHold {
        WeakHold(Arc::downgrade(&self.shared))
    }

    /// End this handle: false when other handles of the hold (re-entries)
    /// still hold it, true when the hold itself should end now (this was
    /// its last handle, or it ended before).
    pub(super) fn end_handle(&self) -> bool {
        if !self.done.swap(true, SeqCst) {
            self.shared.handles.fetch_sub(1, SeqCst) <= 1
        } else {
            self.shared.handles.load(SeqCst) == 0
        }
    }

    /// Whether this handle was unlocked while re-entries still hold the lock.
    pub(super) fn ended_alone(&self) -> bool {
        self.done.load(SeqCst) && self.shared.handles.load(SeqCst) > 0
    }
}
