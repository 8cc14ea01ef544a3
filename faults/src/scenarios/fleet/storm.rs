//! Scenario 37's faults: the round object on [`run_rounds`] that kills the
//! leader, pauses the cluster or restarts it member by member, and checks
//! every hold against etcd after each fault (what it measures comes from
//! `sampling`).

use etcdlock::poison::Locked;
use etcdlock::Guard;

use super::queues::Queues;
use super::*;
use crate::scenarios::upgrade::{run_steps, Step};

use super::sampling::pct;
pub(super) use super::sampling::{measured_interval, spawn_probe, spawn_sampler, Probes, Renewals};

/// The storm's rounds, in order (round `k` is `ROUNDS[k % 4]`): the CI
/// profile's three rounds make one of each.
const ROUNDS: [&str; 4] = [
    "leader-kill",
    "cluster-pause",
    "rolling-restart",
    "leader-kill",
];

/// Tries of each hold's guarded write after a round: etcd not answering
/// within the request timeout after a fault is tried again.
const WRITE_TRIES: usize = 3;

/// What one round measured.
#[derive(Debug, Default, Clone)]
pub(super) struct FleetRound {
    kind: &'static str,
    /// Rolling restart: members restarted, of them the leader at their
    /// turn, the longest SIGTERM-to-exit and SIGTERM-to-healthy-with-a-leader (ms).
    rolled: usize,
    rolled_leaders: usize,
    max_stop_ms: i64,
    max_back_ms: i64,
    /// Kill: clients whose member in use was the killed leader.
    on_victim: usize,
    /// Kill: from the kill until another member led (etcdctl polled every 50 ms).
    elected_ms: u64,
    /// Pause: how long the members were stopped; rolling restart: from
    /// the first SIGTERM until the last member was back (+ 500 ms).
    paused_ms: u64,
    /// From etcd back (leader again / continued) to each client's first renewal after it, ms, sorted.
    renew_ms: Vec<u64>,
    /// Most renewals seen in one 100 ms window after etcd was back.
    peak_per_100ms: usize,
    /// Probe latencies from etcd being back until the holds were checked, ms, sorted.
    probe_ms: Vec<u64>,
    /// Probe calls that failed or timed out, from the fault until the holds were checked.
    probe_errors: usize,
    /// Holds still held and in etcd under their live lease after the round.
    kept: usize,
    /// Holds reported lost.
    losses: usize,
    /// Holds reported lost while etcd still had the key under a live lease.
    false_losses: usize,
    /// Guarded writes accepted after the round (one per client).
    writes_ok: usize,
    /// Of them, accepted only when tried again; and the writes tried again.
    writes_retried: usize,
    write_retries: usize,
    /// Before the fault: the most clients whose last proven renewal fell in
    /// one 100 ms window (their keep-alives are in phase: due together).
    in_phase: usize,
}

impl FleetRound {
    pub(super) fn line(&self) -> String {
        let head = match self.kind {
            "leader-kill" => format!(
                "leader kill ({} clients on it): elected {} ms after",
                self.on_victim, self.elected_ms
            ),
            "rolling-restart" => format!(
                "rolling restart of {} members ({} the leader) in {} ms: SIGTERM to exit <= {} ms, to healthy with a leader <= {} ms",
                self.rolled,
                self.rolled_leaders,
                self.paused_ms,
                self.max_stop_ms,
                self.max_back_ms
            ),
            _ => format!("cluster paused {} ms", self.paused_ms),
        };
        format!(
            "{head} (before: at most {} clients renewing in one 100 ms); renewed again p50 {} / p90 {} / max {} ms after (peak {}/100 ms); probe p50 {} / p99 {} / max {} ms, {} failed; kept {}, lost {} (false {}), writes ok {} ({} after {} tries again)",
            self.in_phase,
            pct(&self.renew_ms, 0.5),
            pct(&self.renew_ms, 0.9),
            self.renew_ms.last().copied().unwrap_or(0),
            self.peak_per_100ms,
            pct(&self.probe_ms, 0.5),
            pct(&self.probe_ms, 0.99),
            self.probe_ms.last().copied().unwrap_or(0),
            self.probe_errors,
            self.kept,
            self.losses,
            self.false_losses,
            self.writes_ok,
            self.writes_retried,
            self.write_retries,
        )
    }
}

/// What the storm acts on and measures: the scenario's fleet, its queues,
/// the sampler's renewals and the probe's calls.
pub(super) struct StormFleet<'a> {
    pub(super) ns: &'a str,
    pub(super) members: &'a mut [Member],
    pub(super) queues: &'a Queues,
    pub(super) renewals: Renewals,
    pub(super) probes: Probes,
    /// The keep-alive interval, measured before the first fault.
    pub(super) interval: Duration,
}

/// The faults, in the order of [`ROUNDS`]: the leader killed (restarted
/// once every client has renewed through the others), every member paused
/// for one keep-alive interval + 1 s, every member stopped (SIGTERM) and
/// started again one at a time, each healthy before the next (scenario
/// 34's steps), within the TTL.
pub(super) struct FleetStorm<'a> {
    etcd: &'a mut Etcd,
    rawc: &'a mut etcd_client::Client,
    ns: &'a str,
    members: &'a mut [Member],
    /// The queue holders' guards (client `j` holds `q{j}`).
    queue_guards: &'a [Arc<Guard>],
    waiters: &'a [tokio::task::JoinHandle<etcdlock::Result<(Guard, u64)>>],
    renewals: Renewals,
    probes: Probes,
    /// The keep-alive interval, measured before the first fault.
    interval: Duration,
    /// Every client renews again within `interval + slack` of etcd being back.
    slack: Duration,
    // The round in progress.
    fault_ns: u64,
    victim: usize,
    election: Option<std::thread::JoinHandle<Option<u64>>>,
    pre_valid: Vec<u64>,
    /// Rolling restart: the steps' failures, and when the last member was back.
    roll_errs: Vec<String>,
    roll_end_ns: u64,
    round: FleetRound,
    /// Every round's figures.
    pub(super) done: Vec<FleetRound>,
}

impl<'a> FleetStorm<'a> {
    /// The storm on `etcd` against `fleet` (its members, the queue holders'
    /// guards and the waiters), observed through `rawc`.
    pub(super) fn new(
        etcd: &'a mut Etcd,
        rawc: &'a mut etcd_client::Client,
        fleet: StormFleet<'a>,
    ) -> Self {
        let slack = renew_slack(fleet.members.len());
        FleetStorm {
            etcd,
            rawc,
            ns: fleet.ns,
            members: fleet.members,
            queue_guards: &fleet.queues.guards,
            waiters: &fleet.queues.waiters,
            renewals: fleet.renewals,
            probes: fleet.probes,
            interval: fleet.interval,
            slack,
            fault_ns: 0,
            victim: 0,
            election: None,
            pre_valid: Vec::new(),
            roll_errs: Vec::new(),
            roll_end_ns: 0,
            round: FleetRound::default(),
            done: Vec::new(),
        }
    }

    /// Wait until every client has renewed after `back_ns`; each one's delay in ms.
    async fn await_renewals(&self, back_ns: u64, within: Duration) -> (Vec<Option<u64>>, usize) {
        let until = Instant::now() + within;
        loop {
            let firsts: Vec<Option<u64>> = {
                let seen = self.renewals.locked();
                seen.iter()
                    .enumerate()
                    .map(|(i, v)| {
                        v.iter()
                            .find(|(_, vu)| *vu > self.pre_valid[i])
                            .map(|(at, _)| at.saturating_sub(back_ns) / 1_000_000)
                    })
                    .collect()
            };
            if firsts.iter().all(Option::is_some) || Instant::now() > until {
                let mut buckets: BTreeMap<u64, usize> = BTreeMap::new();
                for ms in firsts.iter().flatten() {
                    *buckets.entry(ms / 100).or_default() += 1;
                }
                let peak = buckets.values().copied().max().unwrap_or(0);
                return (firsts, peak);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The keys under the namespace and the live leases, read by the
    /// observer's raw client; on an error (its connection to a member that
    /// was killed) the observer reconnects and reads again, for up to 10 s.
    async fn etcd_view(&mut self) -> Result<(Vec<(String, i64, i64)>, Vec<i64>), String> {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let read = async {
                let keys = keys_under(self.rawc, self.ns)
                    .await
                    .map_err(|e| format!("reading the keys: {e}"))?;
                let leases = self
                    .rawc
                    .leases()
                    .await
                    .map_err(|e| format!("listing the leases: {e}"))?;
                Ok::<_, String>((keys, leases.leases().iter().map(|l| l.id()).collect()))
            }
            .await;
            match read {
                Ok(v) => return Ok(v),
                Err(e) if Instant::now() > until => return Err(e),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    if let Ok(c) = etcd_client::Client::connect(self.etcd.endpoints(), None).await {
                        *self.rawc = c;
                    }
                }
            }
        }
    }

    /// Every hold against etcd: still held, its key there with its token
    /// under its live lease; a loss while the key and lease lived is false.
    async fn check_holds(&mut self, errs: &mut Vec<String>) {
        let (keys, live) = match self.etcd_view().await {
            Ok(v) => v,
            Err(e) => {
                errs.push(e);
                return;
            }
        };
        let by_key: BTreeMap<String, (i64, i64)> =
            keys.into_iter().map(|(k, rev, l)| (k, (rev, l))).collect();
        let live: std::collections::BTreeSet<i64> = live.into_iter().collect();
        let ns = self.ns.to_string();
        let mut bad = Vec::new();
        let guards: Vec<(String, Arc<Guard>)> = self
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| (client_name(i), m.own.clone()))
            .chain(
                self.queue_guards
                    .iter()
                    .enumerate()
                    .map(|(j, g)| (client_name(j), g.clone())),
            )
            .collect();
        let (mut kept, mut losses, mut false_losses) = (0, 0, 0);
        for (who, g) in &guards {
            let key = g.key();
            let in_etcd = by_key
                .get(&key)
                .or_else(|| by_key.get(&format!("{ns}{key}")))
                .copied();
            let alive = in_etcd
                .is_some_and(|(rev, lease)| rev == g.fencing_token() && live.contains(&lease));
            match (g.is_held(), g.loss()) {
                (true, None) if alive => kept += 1,
                (_, Some(l)) => {
                    losses += 1;
                    if alive {
                        false_losses += 1;
                        bad.push(format!(
                            "{who} {} reported lost ({}) while etcd had its key under a live lease",
                            g.name(),
                            l.reason.name()
                        ));
                    } else {
                        bad.push(format!(
                            "{who} {} lost ({}): key {in_etcd:?}, its lease did not live through the fault",
                            g.name(),
                            l.reason.name()
                        ));
                    }
                }
                (held, None) => bad.push(format!(
                    "{who} {}: held {held}, in etcd {in_etcd:?} (token {}, lease {:x} live {})",
                    g.name(),
                    g.fencing_token(),
                    g.lease_id(),
                    live.contains(&g.lease_id())
                )),
            }
        }
        self.round.kept = kept;
        self.round.losses = losses;
        self.round.false_losses = false_losses;
        if !bad.is_empty() {
            errs.push(format!(
                "{} of {} holds not kept: {}",
                bad.len(),
                guards.len(),
                bad.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
            ));
        }
        let finished = self.waiters.iter().filter(|w| w.is_finished()).count();
        if finished > 0 {
            errs.push(format!(
                "{finished} waiters no longer queued after the fault (their holders still hold)"
            ));
        }
        // A guarded write per hold: etcd must accept each (the hold is real).
        // All of them go at once, right after the catch-up; one that etcd
        // did not answer in time (`Unavailable`, `Timeout`: the hold is not
        // in question) is tried again, at most twice, and counted.
        let mut set = tokio::task::JoinSet::new();
        for (i, m) in self.members.iter().enumerate() {
            let g = m.own.clone();
            set.spawn(async move {
                let mut tries = Vec::new();
                for _ in 0..WRITE_TRIES {
                    let (op, e) = guarded_write_why(&g).await;
                    let again = matches!(e, Some(("Unavailable" | "Timeout", _)));
                    tries.push((op, e));
                    if !again {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                (i, tries)
            });
        }
        let (mut ok, mut retried) = (0, 0);
        // Per error code of a refused write: how many, and one's message.
        let mut why: BTreeMap<&'static str, (usize, String)> = BTreeMap::new();
        while let Some(r) = set.join_next().await {
            if let Ok((i, tries)) = r {
                let n = tries.len();
                for (k, (op, e)) in tries.into_iter().enumerate() {
                    if op.result == OpResult::Ok {
                        ok += 1;
                        retried += usize::from(k > 0);
                    } else if k + 1 == n {
                        let (code, msg) = e.unwrap_or(("none", format!("{:?}", op.result)));
                        why.entry(code).or_insert((0, msg)).0 += 1;
                    }
                    self.members[i].ops.push(op);
                }
                self.round.write_retries += n - 1;
            }
        }
        self.round.writes_ok = ok;
        self.round.writes_retried = retried;
        if ok != self.members.len() {
            errs.push(format!(
                "{ok} of {} guarded writes accepted after the fault ({WRITE_TRIES} tries each); the others' last error: {why:?}",
                self.members.len()
            ));
        }
    }
}

impl Failpoint for FleetStorm<'_> {
    fn name(&self) -> &'static str {
        "fleet storm"
    }
    fn gap(&mut self, _k: u32) -> Duration {
        Duration::from_millis(500)
    }
    async fn inject(&mut self, k: u32) -> Injected {
        self.pre_valid = self
            .members
            .iter()
            .map(|m| instant_to_mono_ns(m.own.valid_until()))
            .collect();
        self.round = FleetRound::default();
        let mut phase: BTreeMap<u64, usize> = BTreeMap::new();
        for v in &self.pre_valid {
            *phase.entry(v / 100_000_000).or_default() += 1;
        }
        self.round.in_phase = phase.values().copied().max().unwrap_or(0);
        self.round.kind = ROUNDS[k as usize % ROUNDS.len()];
        if self.round.kind == "leader-kill" {
            let leader = blocking(|| self.etcd.leader()).unwrap_or(0);
            self.victim = leader;
            let victim_ep = self.etcd.members[leader].endpoint();
            self.round.on_victim = self
                .members
                .iter()
                .filter(|m| {
                    victim_ep.ends_with(&m.client.member_in_use())
                        || m.client.member_in_use().ends_with(&victim_ep)
                })
                .count();
            let others: Vec<String> = self
                .etcd
                .endpoints()
                .into_iter()
                .enumerate()
                .filter(|(i, _)| *i != leader)
                .map(|(_, e)| e)
                .collect();
            self.fault_ns = clock_monotonic_ns();
            blocking(|| self.etcd.kill(leader));
            self.election = Some(std::thread::spawn(move || {
                etcdlock_testkit::await_leader_among(
                    &others,
                    Duration::from_secs(15),
                    Duration::from_millis(50),
                )
                .map(|_| clock_monotonic_ns())
            }));
            Injected::new(1, Duration::ZERO)
        } else if self.round.kind == "rolling-restart" {
            // Scenario 34's steps: SIGTERM, exit, start, healthy, a leader
            // agreed, 500 ms, then the next member.
            self.fault_ns = clock_monotonic_ns();
            let mut steps = Outcome::new(37, "fleet-faults");
            let n = self.etcd.members.len();
            let s = run_steps(self.etcd, Step::restart_each(n), &mut steps).await;
            self.roll_end_ns = clock_monotonic_ns();
            self.roll_errs = steps.failures;
            self.round.rolled = s.done;
            self.round.rolled_leaders = s.leaders;
            self.round.max_stop_ms = s.max_stop_ms;
            self.round.max_back_ms = s.max_back_ms;
            Injected::new(s.done as u64, Duration::ZERO)
        } else {
            let pause = self.interval + Duration::from_secs(1);
            self.fault_ns = clock_monotonic_ns();
            for i in 0..self.etcd.members.len() {
                self.etcd.pause(i);
            }
            Injected::new(self.etcd.members.len() as u64, pause)
        }
    }
    async fn heal(&mut self, _k: u32) -> Result<(), String> {
        let mut errs = Vec::new();
        let back_ns = if self.round.kind == "leader-kill" {
            let elected = self.election.take().and_then(|t| t.join().ok().flatten());
            match elected {
                Some(at) => {
                    self.round.elected_ms = at.saturating_sub(self.fault_ns) / 1_000_000;
                    at
                }
                None => {
                    errs.push("no member led within 15 s of the leader kill".into());
                    clock_monotonic_ns()
                }
            }
        } else if self.round.kind == "rolling-restart" {
            errs.append(&mut self.roll_errs);
            let at = self.roll_end_ns;
            self.round.paused_ms = at.saturating_sub(self.fault_ns) / 1_000_000;
            if self.round.paused_ms >= FLEET_TTL as u64 * 1000 {
                errs.push(format!(
                    "the rolling restart took {} ms, not within the TTL ({FLEET_TTL} s)",
                    self.round.paused_ms
                ));
            }
            // Every client renews again after the whole cluster was
            // restarted (through a member that was restarted under it).
            self.pre_valid = self
                .members
                .iter()
                .map(|m| instant_to_mono_ns(m.own.valid_until()))
                .collect();
            at
        } else {
            for i in 0..self.etcd.members.len() {
                self.etcd.resume(i);
            }
            let at = clock_monotonic_ns();
            self.round.paused_ms = at.saturating_sub(self.fault_ns) / 1_000_000;
            at
        };
        // Every client renews again within an interval + the slack of etcd
        // being back; waited for up to the TTL (a hold ends locally sooner).
        let bound = self.interval + self.slack;
        let (firsts, peak) = self
            .await_renewals(back_ns, Duration::from_secs(FLEET_TTL as u64))
            .await;
        let missing = firsts.iter().filter(|f| f.is_none()).count();
        let mut renew: Vec<u64> = firsts.iter().flatten().copied().collect();
        renew.sort_unstable();
        let late = renew
            .iter()
            .filter(|ms| **ms > bound.as_millis() as u64)
            .count();
        if missing > 0 || late > 0 {
            errs.push(format!(
                "{missing} clients never renewed and {late} renewed later than {} ms after etcd was back (interval {} ms + {} ms)",
                bound.as_millis(),
                self.interval.as_millis(),
                self.slack.as_millis()
            ));
        }
        self.round.renew_ms = renew;
        self.round.peak_per_100ms = peak;
        if self.round.kind == "leader-kill" {
            let victim = self.victim;
            let healthy = blocking(|| {
                self.etcd.restart(victim);
                self.etcd
                    .wait_member_healthy(victim, Duration::from_secs(20))
            });
            if let Err(e) = healthy {
                errs.push(format!("restart of m{victim}: {e}"));
            }
        }
        // The probe's view of etcd from the fault until now.
        let until = clock_monotonic_ns();
        {
            let probes = self.probes.locked();
            let mut lat: Vec<u64> = probes
                .iter()
                .filter(|(t, _)| *t >= back_ns && *t < until)
                .filter_map(|(_, l)| l.map(|l| l / 1_000_000))
                .collect();
            lat.sort_unstable();
            self.round.probe_ms = lat;
            self.round.probe_errors = probes
                .iter()
                .filter(|(t, l)| *t >= self.fault_ns && *t < until && l.is_none())
                .count();
        }
        self.check_holds(&mut errs).await;
        self.done.push(self.round.clone());
        errs_to_result(errs)
    }
}
