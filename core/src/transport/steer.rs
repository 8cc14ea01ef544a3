//! Which member a request goes to after one failed or stayed silent: the
//! members' status (a local answer, no Raft round) names the leader, and
//! whether a silent member is down or only slow ([`Transport::judge`]).

use super::*;

/// One member's answers to [`Transport::ask_status`].
struct Asked {
    k: usize,
    /// It answered at least once.
    seen: bool,
    /// It named itself leader, in a term no older than any seen.
    leads: bool,
    /// Its own member id, and the leader it names (0: none), in its last answer.
    id: u64,
    names: u64,
    /// How long its last answer took.
    took: Duration,
}

/// What to do about a member that has not answered ([`Transport::judge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It is alive: wait for its answer.
    Wait,
    /// No member leads (an election, or a leader that does not answer):
    /// wait, and judge again one silence on.
    Unsure,
    /// Re-send to member `to`; `bench`: the silent member is down.
    Move { to: usize, bench: bool },
}

impl Transport {
    /// After a member failed or stayed silent: ask every member for its
    /// status (a local answer, no Raft round) and make the leader current
    /// (or, with no leader in time, any member that answered). A hung
    /// member never answers, and a follower that is merely stuck forwarding
    /// to a hung leader names the new one once etcd has elected it; a
    /// request sent mid-election is dropped by Raft and never answered, so
    /// while no member that answers says it leads, each member is asked
    /// again, 20 ms after its answer at first and twice as long each time
    /// (at most 200 ms, jittered), for up to twice the member silence: one
    /// question in flight per member, so that a fleet of clients steering
    /// at once (a leader killed, the cluster paused) asks etcd a few times,
    /// not every 20 ms each. The next attempt then goes where it can succeed
    /// instead of round-robin onto a hung member or into the election.
    /// Bounded by `end` too.
    pub(crate) async fn steer(&self, end: Option<Instant>) {
        let n = self.members.len();
        if n < 2 {
            return;
        }
        let mut until = Instant::now() + self.silence() * 2;
        if let Some(e) = end {
            until = until.min(e);
        }
        // `bad` too: a follower stuck forwarding to a hung leader answers
        // its status, and may be the new leader by now.
        let mut probes: futures_util::stream::FuturesUnordered<_> =
            (0..n).map(|k| self.ask_status(k, until, false)).collect();
        let mut answered = None;
        while let Some(a) = futures_util::StreamExt::next(&mut probes).await {
            if a.leads {
                return self.make_current(a.k);
            }
            if a.seen {
                answered.get_or_insert(a.k);
            }
        }
        // No leader in time: any member that answered.
        if let Some(k) = answered {
            self.make_current(k);
        }
    }

    /// [`Transport::steer`]'s questions to member `k` until `until`: whether
    /// it answered at all, and whether it named itself leader (then at once).
    /// With `first`, the first answer ends the questions too.
    async fn ask_status(&self, k: usize, until: Instant, first: bool) -> Asked {
        let mut a = Asked {
            k,
            seen: false,
            leads: false,
            id: 0,
            names: 0,
            took: Duration::ZERO,
        };
        let mut pause = Duration::from_millis(20);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let asked_at = Instant::now();
            let asked = tokio::time::timeout(left, async {
                let mut c = self
                    .member(k, etcd_client::Client::maintenance_client)
                    .await
                    .ok()?;
                c.status().await.ok()
            })
            .await;
            match asked {
                // A member that names itself leader is it (a hung one never answers).
                Ok(Some(st)) => {
                    a.seen = true;
                    a.took = asked_at.elapsed();
                    a.id = st.header().map_or(0, |h| h.member_id());
                    a.names = st.leader();
                    self.saw(&st);
                    // A leader of an older term than one already seen (cut
                    // off, not yet stepped down) is not the leader.
                    let current = st.header().is_some_and(|h| h.raft_term() >= self.term());
                    if st.leader() != 0
                        && Some(st.leader()) == st.header().map(|h| h.member_id())
                        && current
                    {
                        a.leads = true;
                        return a;
                    }
                    if first {
                        return a;
                    }
                }
                Ok(None) => {}
                Err(_) => return a,
            }
            let wait = jitter(pause);
            if Instant::now() + wait >= until {
                return a;
            }
            tokio::time::sleep(wait).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    /// Note the raft term a member's status carries, when it names a leader
    /// in it. A candidate's term is not one: a member cut off from the
    /// leader's messages (one-way loss) campaigns again every election
    /// timeout, each time in a higher term, and without pre-vote (etcd 3.4's
    /// default) its status carries that term while the others, hearing their
    /// leader, ignore its votes. Counted, those terms made the real leader
    /// look stale (older than a term seen), so no member led and the
    /// requests waited on the cut-off member until they timed out.
    pub(super) fn saw(&self, st: &etcd_client::StatusResponse) {
        if let Some(h) = st.header().filter(|_| st.leader() != 0) {
            self.term.fetch_max(h.raft_term(), Ordering::Relaxed);
        }
    }

    /// The highest raft term in which a member named a leader (0: none yet).
    pub(crate) fn term(&self) -> u64 {
        self.term.load(Ordering::Relaxed)
    }

    /// Member `i` has not answered a request sent when the highest term seen
    /// was `since` for a member silence or more: is it down, or only slow?
    /// Every member is asked for its status (a local answer, no Raft round)
    /// while the request stays in flight, for up to two silences (bounded by
    /// `end`):
    /// - another member leads and `i` does not answer: `i` is down (hung,
    ///   or the path to it is): bench it and re-send to the leader. "Does
    ///   not answer" is judged against the leader's own answer: `i` gets
    ///   four times as long as the leader took (at least 100 ms), so a hung
    ///   leader's requests move to its successor a moment after the
    ///   election, not two silences on, while under load (every answer
    ///   slow) a member is given time in proportion;
    /// - a member leads in a later term than `since`: an election came
    ///   between (Raft may have dropped the request): re-send to the leader,
    ///   benching `i` only if it does not answer;
    /// - `i` answers but names another leader, or none, while a member
    ///   leads: `i` does not hear the leader (a one-way loss, or a follower
    ///   not yet told of a new leader): re-send to the leader; `i` is not
    ///   benched, it answers;
    /// - `i` answers, and no election came between (the cluster is slow,
    ///   overloaded, or has no leader yet): wait for the request. Re-sending
    ///   it would only add the same work to etcd's queue; a fleet of clients
    ///   doing that every silence turned an overloaded cluster into a storm
    ///   that never drained;
    /// - nobody answers (the cluster is paused), or no member leads (an
    ///   election): wait, and judge again one silence on ([`Verdict::Unsure`]);
    /// - no leader, `i` silent, another member answers: re-send there, and
    ///   bench `i` (a hung leader before the election ends).
    pub(crate) async fn judge(&self, i: usize, since: u64, end: Option<Instant>) -> Verdict {
        let n = self.members.len();
        if n < 2 {
            return Verdict::Wait;
        }
        let mut until = Instant::now() + self.silence() * 2;
        if let Some(e) = end {
            until = until.min(e);
        }
        let mut probes: futures_util::stream::FuturesUnordered<_> =
            (0..n).map(|k| self.ask_status(k, until, k == i)).collect();
        let (mut i_seen, mut leader, mut other) = (None, None, None);
        // The leader `i` names, and the leader's own member id.
        let (mut i_names, mut leader_id) = (0, 0);
        let mut decide_by = until;
        loop {
            let next = futures_util::StreamExt::next(&mut probes);
            let Ok(Some(Asked {
                k,
                seen,
                leads,
                id,
                names,
                took,
            })) = tokio::time::timeout_at(decide_by.into(), next).await
            else {
                break;
            };
            if k == i && seen {
                i_names = names;
            }
            if k == i && i_seen.is_none() {
                i_seen = Some(seen);
                if seen && !leads {
                    // Alive: keep asking whether it becomes the leader (an
                    // election it wins while our request is stuck in it).
                    probes.push(self.ask_status(i, until, false));
                }
            } else if k != i && seen {
                other.get_or_insert(k);
            }
            if leads {
                leader = Some(k);
                leader_id = id;
                // How long `i` is given to answer, from the leader's pace.
                let grace = (took * 4).max(Duration::from_millis(100));
                decide_by = decide_by.min(Instant::now() + grace);
            }
            if let Some(l) = leader {
                let moved = self.term() > since;
                match i_seen {
                    _ if l == i && !moved => return Verdict::Wait,
                    _ if l == i => {
                        return Verdict::Move {
                            to: i,
                            bench: false,
                        }
                    }
                    // Alive, but not hearing the leader: its answer would never come.
                    Some(true) if i_names != leader_id => {
                        return Verdict::Move {
                            to: l,
                            bench: false,
                        }
                    }
                    Some(true) if !moved => return Verdict::Wait,
                    Some(seen) => {
                        return Verdict::Move {
                            to: l,
                            bench: !seen,
                        }
                    }
                    // Whether `i` answers decides its bench: its answer, or the end.
                    None => {}
                }
            }
        }
        match (leader, i_seen, other) {
            (Some(l), seen, _) => Verdict::Move {
                to: l,
                bench: seen != Some(true),
            },
            (None, Some(false) | None, Some(k)) => Verdict::Move { to: k, bench: true },
            // No leader yet (an election): ask again soon.
            _ => Verdict::Unsure,
        }
    }

    /// Leave member `i`, silent for its bound (a stream that did not open
    /// or answer), only if it is down: [`Transport::judge`]. When it answers
    /// (the cluster is paused or overloaded), the next attempt goes to `i`
    /// again: benching every member in turn and moving every stream helps
    /// no one, and a fleet doing it at once made a pause of the cluster into
    /// a storm of streams and status rounds that outlasted the pause.
    pub(crate) async fn leave_silent(&self, i: usize, end: Option<Instant>) {
        let since = self.term();
        self.follow(i, self.judge(i, since, end).await);
    }

    /// Act on a [`Verdict`] about member `i`.
    pub(crate) fn follow(&self, i: usize, v: Verdict) {
        if let Verdict::Move { to, bench } = v {
            if bench {
                self.fail(i);
            }
            self.make_current(to);
        }
    }

    /// Requests go to member `k` from now on (it answered: no bench).
    fn make_current(&self, k: usize) {
        self.ok(k);
        self.current.store(k, Ordering::Relaxed);
    }
}
