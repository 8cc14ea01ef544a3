//! How long a keep-alive stream waits for its member before leaving it.

use super::keepalive::{Checked, Confirmed};
use super::*;

impl Session {
    /// How long the member a keep-alive stream is on may take to answer the
    /// read that proves a renewal, or a question about a late answer, before
    /// the stream leaves it: what is left of the hold before its deadline,
    /// less [`TAKEOVER`] silences for another member to take over (the
    /// members' status asked, a stream opened there, a renewal proved), and
    /// never less than one silence.
    ///
    /// A member that is slow (etcd overloaded, or this process short of CPU)
    /// is not left while the hold has time to wait for it: leaving moves the
    /// same load onto another member and adds a status round and a stream
    /// for every client that leaves, so a loaded fleet that left members
    /// after one silence turned slowness into a storm of failovers and holds
    /// ended while their leases lived. Within its patience, a read or
    /// question not answered within its bound is sent again on the same
    /// member (a read sent during an election is dropped by Raft and never
    /// answered), with twice the bound each time ([`Waits`]), so that a slow
    /// answer comes in the end and a lost one is replaced. A member that
    /// answers keep-alives but never a read (a leader cut off from its peers)
    /// is still left while there is time to renew elsewhere.
    pub(super) fn patience(&self, silence: Duration) -> Duration {
        let left = self.deadline().saturating_duration_since(Instant::now());
        left.saturating_sub(silence * TAKEOVER).max(silence)
    }

    /// When the next keep-alive goes, none being unanswered: `wait` after
    /// the last answer or proof, at `resend_at` if that is sooner (the
    /// leader changed), and early enough that a renewal as `slow` as the
    /// recent ones is proved with one such round trip to spare: under load
    /// the renewals come closer instead of too late.
    pub(super) fn due(
        &self,
        answered: Option<Instant>,
        wait: Duration,
        slow: Duration,
        resend_at: Option<Instant>,
    ) -> Instant {
        let due = answered.map_or(self.last_proof(), |a| a.max(self.last_proof())) + wait;
        let due = due.min(
            self.deadline()
                .checked_sub(slow * 2)
                .unwrap_or_else(Instant::now),
        );
        resend_at.map_or(due, |r| r.min(due))
    }
}

/// How long the next read that checks a renewal, and the next question
/// about a late answer, may take on this stream's member: one silence (half a
/// silence for a question) at first and after an answer, twice as long after
/// each one not answered in time, and never longer than the hold's
/// [`Session::patience`].
pub(super) struct Waits {
    pub(super) check: Duration,
    pub(super) confirm: Duration,
}

impl Waits {
    pub(super) fn new(silence: Duration) -> Waits {
        Waits {
            check: silence,
            confirm: silence / 2,
        }
    }

    /// The read that checks a renewal ended: `true` to renew again on this
    /// member (it was not answered within its bound and the hold can wait
    /// longer than that: the next read gets twice the bound); an answer
    /// brings the bound back to one silence.
    pub(super) fn read_again(
        &mut self,
        c: &Checked,
        patience: Duration,
        silence: Duration,
    ) -> bool {
        match c {
            Checked::Silent if patience > self.check => {
                self.check *= 2;
                true
            }
            Checked::Term(_) => {
                self.check = silence;
                false
            }
            _ => false,
        }
    }

    /// The question about a late answer ended: `true` to ask again (half a
    /// silence on) with twice the bound, as for a read.
    pub(super) fn ask_again(
        &mut self,
        c: &Confirmed,
        patience: Duration,
        silence: Duration,
    ) -> bool {
        match c {
            Confirmed::Silent if patience > self.confirm => {
                self.confirm *= 2;
                true
            }
            Confirmed::Alive(_) => {
                self.confirm = silence / 2;
                false
            }
            _ => false,
        }
    }
}

/// The silences [`Session::patience`] leaves for another member to take over
/// a hold: up to two for the members' status ([`Transport::steer`]), one to
/// open a stream there, one for a renewal and the read that proves it.
const TAKEOVER: u32 = 4;

#[cfg(test)]
mod tests {
    use super::*;

    /// A member gets the time the hold can wait less four silences, and at
    /// least one silence: at TTL 15 s (margin 2 s) just after a renewal was
    /// proved, 13 s - 2 s; once the deadline is near, the silence.
    #[test]
    fn patience_is_the_time_left_less_a_takeover_and_at_least_one_silence() {
        let silence = Duration::from_millis(500);
        let now = Instant::now();
        let s = Session::new(1, 15, Duration::from_secs(2), now, None, Vec::new());
        let p = s.patience(silence);
        assert!(p <= Duration::from_secs(11), "{p:?}");
        assert!(p > Duration::from_millis(10_900), "{p:?}");
        // Granted 12.5 s ago: 0.5 s left, under the takeover's 2 s.
        let s = Session::new(
            1,
            15,
            Duration::from_secs(2),
            now - Duration::from_millis(12_500),
            None,
            Vec::new(),
        );
        assert_eq!(s.patience(silence), silence);
        // Past the deadline: still one silence, never zero.
        let s = Session::new(
            1,
            15,
            Duration::from_secs(2),
            now - Duration::from_secs(20),
            None,
            Vec::new(),
        );
        assert_eq!(s.patience(silence), silence);
    }

    /// The next keep-alive goes `wait` after the last proof while renewals
    /// are quick, and no later than the deadline less twice the slowest
    /// recent round trip once they are slow: at TTL 15 s (margin 2 s,
    /// deadline 13 s after the grant), renewals taking 5 s bring an 8 s wait
    /// down to 3 s; a resend after a leader change goes sooner still.
    #[test]
    fn the_next_renewal_comes_closer_when_renewals_are_slow() {
        let now = Instant::now();
        let s = Session::new(1, 15, Duration::from_secs(2), now, None, Vec::new());
        let wait = Duration::from_secs(8);
        assert_eq!(
            s.due(None, wait, Duration::from_millis(3), None),
            now + wait
        );
        assert_eq!(
            s.due(None, wait, Duration::from_secs(5), None),
            now + Duration::from_secs(3)
        );
        let soon = now + Duration::from_secs(1);
        assert_eq!(s.due(None, wait, Duration::from_secs(5), Some(soon)), soon);
        // An answer after the last proof moves the wait's start.
        let answered = now + Duration::from_secs(2);
        assert_eq!(
            s.due(Some(answered), wait, Duration::ZERO, None),
            now + Duration::from_secs(10)
        );
    }
}
