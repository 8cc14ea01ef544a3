//! The state machine of a hold, as pure functions: a hold ends once, by the
//! first of unlock or loss, and a reader never sees `Held` past the local
//! deadline, whether or not a task has run since.

use std::time::Instant;

use super::GuardState;
use crate::error::LossReason;
use crate::session::Loss;

/// End a hold: `Held` becomes `to` (`Released` or `Lost`); an ended hold
/// never changes again, so the first of unlock and loss wins. True if this
/// call ended it.
pub(crate) fn end_hold(state: &mut GuardState, to: GuardState) -> bool {
    if *state == GuardState::Held && to != GuardState::Held {
        *state = to;
        true
    } else {
        false
    }
}

/// The state a reader sees now. `stored` is what the guard recorded; `alive`
/// whether the session's local deadline is still ahead; `session_loss` the
/// loss the session settled (with etcd's reason) if it has; `deadline` the
/// instant the hold ended locally. Past the deadline a stored `Held` reads as
/// lost: with the session's reason once known, else a provisional
/// `ConnectionLost` at the deadline (the loss event carries etcd's answer).
pub(crate) fn observed(
    stored: GuardState,
    alive: bool,
    session_loss: Option<Loss>,
    deadline: Instant,
) -> GuardState {
    match stored {
        GuardState::Held if !alive => GuardState::Lost(session_loss.unwrap_or(Loss {
            reason: LossReason::ConnectionLost,
            at: deadline,
        })),
        st => st,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[derive(Debug, Clone, Copy)]
    enum Event {
        Unlock,
        Lose(LossReason),
        /// The local deadline passes (the keep-alives stopped).
        Expire,
        /// The session learns etcd's reason for the expiry.
        Answer(LossReason),
    }

    fn event() -> impl proptest::strategy::Strategy<Value = Event> {
        use proptest::prelude::*;
        let reason = proptest::sample::select(LossReason::ALL.to_vec());
        prop_oneof![
            Just(Event::Unlock),
            reason.clone().prop_map(Event::Lose),
            Just(Event::Expire),
            reason.prop_map(Event::Answer),
        ]
    }

    #[test]
    fn unlock_and_loss_race_and_the_first_wins() {
        let at = Instant::now();
        let mut s = GuardState::Held;
        assert!(end_hold(&mut s, GuardState::Released));
        assert!(!end_hold(
            &mut s,
            GuardState::Lost(Loss {
                reason: LossReason::KeyDeleted,
                at
            })
        ));
        assert_eq!(s, GuardState::Released);
        let mut s = GuardState::Held;
        assert!(end_hold(
            &mut s,
            GuardState::Lost(Loss {
                reason: LossReason::KeyDeleted,
                at
            })
        ));
        assert!(
            !end_hold(&mut s, GuardState::Released),
            "unlock after a loss reports the loss, it does not hide it"
        );
        assert!(matches!(s, GuardState::Lost(l) if l.reason == LossReason::KeyDeleted));
        assert!(
            !end_hold(&mut GuardState::Held, GuardState::Held),
            "Held is not an end"
        );
    }

    #[test]
    fn past_the_deadline_a_hold_reads_lost_before_etcd_answers() {
        let deadline = Instant::now();
        let st = observed(GuardState::Held, false, None, deadline);
        assert_eq!(
            st,
            GuardState::Lost(Loss {
                reason: LossReason::ConnectionLost,
                at: deadline
            })
        );
        let answered = Loss {
            reason: LossReason::LeaseExpired,
            at: deadline,
        };
        assert_eq!(
            observed(GuardState::Held, false, Some(answered), deadline),
            GuardState::Lost(answered)
        );
        assert_eq!(
            observed(GuardState::Held, true, None, deadline),
            GuardState::Held
        );
        assert_eq!(
            observed(GuardState::Released, false, Some(answered), deadline),
            GuardState::Released
        );
    }

    proptest::proptest! {
        /// Any interleaving of unlock, loss, expiry and etcd's answer: the
        /// hold ends exactly once, at the first unlock, loss or observed
        /// expiry, and nothing after it changes what a reader sees.
        #[test]
        fn a_hold_ends_once_whatever_the_interleaving(events in proptest::collection::vec(event(), 1..12)) {
            let t0 = Instant::now();
            let deadline = t0 + Duration::from_secs(1);
            let (mut stored, mut alive, mut answer) = (GuardState::Held, true, None::<Loss>);
            let mut first_end: Option<GuardState> = None;
            for ev in events {
                match ev {
                    Event::Unlock => {
                        // unlock ends with what a reader sees at that moment.
                        let seen = observed(stored, alive, answer, deadline);
                        if seen == GuardState::Held {
                            end_hold(&mut stored, GuardState::Released);
                        } else if let GuardState::Lost(l) = seen {
                            end_hold(&mut stored, GuardState::Lost(l));
                        }
                    }
                    Event::Lose(reason) => {
                        end_hold(&mut stored, GuardState::Lost(Loss { reason, at: t0 }));
                    }
                    Event::Expire => alive = false,
                    Event::Answer(reason) => {
                        if !alive && answer.is_none() {
                            answer = Some(Loss { reason, at: deadline });
                        }
                    }
                }
                let seen = observed(stored, alive, answer, deadline);
                if !alive {
                    proptest::prop_assert_ne!(seen, GuardState::Held, "never Held past the deadline");
                }
                match first_end {
                    None => if seen != GuardState::Held { first_end = Some(seen) },
                    Some(GuardState::Released) => proptest::prop_assert_eq!(seen, GuardState::Released),
                    Some(GuardState::Lost(_)) => proptest::prop_assert!(matches!(seen, GuardState::Lost(_)), "a lost hold stays lost"),
                    Some(GuardState::Held) => unreachable!(),
                }
                if stored != GuardState::Held {
                    proptest::prop_assert_eq!(seen, stored, "an ended hold reads as it ended");
                }
            }
        }
    }
}
