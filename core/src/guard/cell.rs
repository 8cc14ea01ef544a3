//! A hold's state, with a watch channel on it made only for those who subscribe.

use std::sync::{Mutex, OnceLock};

use tokio::sync::watch;

use super::GuardState;
use crate::poison::Locked;

/// The state of one hold. Most holds are never subscribed to (a guard whose
/// owner only calls `unlock`, or checks `is_held`), so the state is a plain
/// value, and the `watch` channel behind [`Guard::subscribe`] and
/// [`Guard::lost_signal`] is made by the first subscriber, from the value then
/// (a channel costs a few hundred bytes per held lock). Changes and the
/// channel's creation happen under one mutex, so a subscriber never misses a
/// change; dropping the cell closes the channel (a receiver's `changed()` then
/// fails: the guard is gone).
///
/// [`Guard::subscribe`]: super::Guard::subscribe
/// [`Guard::lost_signal`]: super::Guard::lost_signal
pub(super) struct StateCell {
    value: Mutex<GuardState>,
    tx: OnceLock<watch::Sender<GuardState>>,
}

impl StateCell {
    pub(super) fn new(state: GuardState) -> StateCell {
        StateCell {
            value: Mutex::new(state),
            tx: OnceLock::new(),
        }
    }

    /// The state now.
    pub(super) fn get(&self) -> GuardState {
        *self.value.locked()
    }

    /// Apply `change`; if it says it changed the state, subscribers see the new
    /// state (they are woken after `change` returns). Returns what `change` said.
    pub(super) fn send_if_modified(&self, change: impl FnOnce(&mut GuardState) -> bool) -> bool {
        let mut value = self.value.locked();
        let changed = change(&mut value);
        if changed {
            if let Some(tx) = self.tx.get() {
                tx.send_replace(*value);
            }
        }
        changed
    }

    /// A receiver of every change from now on, starting at the state now.
    pub(super) fn subscribe(&self) -> watch::Receiver<GuardState> {
        let value = self.value.locked();
        self.tx.get_or_init(|| watch::channel(*value).0).subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::LossReason;
    use crate::session::Loss;

    #[tokio::test]
    async fn a_subscriber_sees_the_state_then_and_every_change_after() {
        let cell = StateCell::new(GuardState::Held);
        assert!(cell.tx.get().is_none(), "no channel before a subscriber");
        let mut rx = cell.subscribe();
        assert_eq!(*rx.borrow_and_update(), GuardState::Held);
        let loss = Loss {
            reason: LossReason::KeyDeleted,
            at: std::time::Instant::now(),
        };
        assert!(cell.send_if_modified(|s| {
            *s = GuardState::Lost(loss);
            true
        }));
        rx.changed().await.unwrap();
        assert_eq!(*rx.borrow_and_update(), GuardState::Lost(loss));
        // A change that says it changed nothing wakes nobody.
        assert!(!cell.send_if_modified(|_| false));
        assert!(!rx.has_changed().unwrap());
        // A late subscriber starts from the state now.
        assert_eq!(*cell.subscribe().borrow(), GuardState::Lost(loss));
        drop(cell);
        assert!(
            rx.changed().await.is_err(),
            "the cell gone closes the channel"
        );
    }

    #[test]
    fn unsubscribed_changes_need_no_channel() {
        let cell = StateCell::new(GuardState::Held);
        assert!(cell.send_if_modified(|s| {
            *s = GuardState::Released;
            true
        }));
        assert_eq!(cell.get(), GuardState::Released);
        assert!(cell.tx.get().is_none());
    }
}
