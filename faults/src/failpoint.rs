//! Faults as small objects on one round runner, in the shape of etcd's
//! robustness suite (`tests/robustness/failpoint`: a `Failpoint` has a name
//! and an `Inject`, run by one loop against live traffic): each fault here
//! says how long to let the workload run first ([`Failpoint::gap`]), how to
//! inject itself ([`Failpoint::inject`]) and how to heal ([`Failpoint::heal`]);
//! [`run_rounds`] repeats it. The scenarios own the workload, the checker and
//! the figures; a fault object only keeps the counts its figure needs.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use etcdlock::{CancellationToken, Client, LockOptions};
use etcdlock_testkit::Etcd;

use crate::{Counters, Proxy, Rng};

/// What one injection did.
pub struct Injected {
    /// Faults it counts as (e.g. one member pause; a proxy burst counts each proxy and each reset).
    pub faults: u64,
    /// How long the fault stays before [`Failpoint::heal`].
    pub hold: Duration,
    /// How long to let the workload run after healing, before the next gap.
    pub settle: Duration,
}

impl Injected {
    /// `faults` faults, healed after `hold`.
    pub fn new(faults: u64, hold: Duration) -> Injected {
        Injected {
            faults,
            hold,
            settle: Duration::ZERO,
        }
    }
}

/// One kind of fault.
#[allow(async_fn_in_trait)] // driven with block_on on the test thread; no Send bound needed
pub trait Failpoint {
    /// Short name, for messages.
    fn name(&self) -> &'static str;
    /// How long the workload runs unfaulted before injection `k`.
    fn gap(&mut self, _k: u32) -> Duration {
        Duration::ZERO
    }
    /// Inject the fault for the `k`-th time (0-based).
    async fn inject(&mut self, k: u32) -> Injected;
    /// Undo injection `k`. An error is a failed expectation of the scenario.
    async fn heal(&mut self, k: u32) -> Result<(), String>;
}

/// What [`run_rounds`] did.
#[derive(Debug, Default)]
pub struct Rounds {
    /// Injections made.
    pub rounds: u32,
    /// Faults counted by the injections.
    pub faults: u64,
    /// Heal errors, in order.
    pub failures: Vec<String>,
}

/// The round runner: gap, inject, hold, heal, settle; repeated while less
/// than `secs` have passed since the start or fewer than `min_rounds` ran.
pub async fn run_rounds<F: Failpoint>(fp: &mut F, secs: Duration, min_rounds: u32) -> Rounds {
    let mut r = Rounds::default();
    let started = Instant::now();
    while started.elapsed() < secs || r.rounds < min_rounds {
        let k = r.rounds;
        tokio::time::sleep(fp.gap(k)).await;
        let i = fp.inject(k).await;
        r.faults += i.faults;
        tokio::time::sleep(i.hold).await;
        if let Err(e) = fp.heal(k).await {
            r.failures.push(format!("{} {k}: {e}", fp.name()));
        }
        tokio::time::sleep(i.settle).await;
        r.rounds += 1;
    }
    r
}

/// [`run_rounds`] until `stop` is cancelled (checked before each round and
/// during the gap), for a fault that runs beside a scenario's own steps
/// (`tokio::join!` them; fault objects need not be `Send`).
pub async fn run_until<F: Failpoint>(fp: &mut F, stop: &CancellationToken) -> Rounds {
    let mut r = Rounds::default();
    while !stop.is_cancelled() {
        let k = r.rounds;
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(fp.gap(k)) => {}
        }
        let i = fp.inject(k).await;
        r.faults += i.faults;
        tokio::time::sleep(i.hold).await;
        if let Err(e) = fp.heal(k).await {
            r.failures.push(format!("{} {k}: {e}", fp.name()));
        }
        tokio::time::sleep(i.settle).await;
        r.rounds += 1;
    }
    r
}

/// Compact etcd's history up to the current revision every `every`: watches
/// that start at a compacted revision must re-read, not miss a delete.
pub struct Compaction {
    etcd: etcd_client::Client,
    every: Duration,
}

impl Compaction {
    /// Compactions through `etcd`, one every `every`.
    pub fn new(etcd: etcd_client::Client, every: Duration) -> Self {
        Compaction { etcd, every }
    }
}

impl Failpoint for Compaction {
    fn name(&self) -> &'static str {
        "compaction"
    }
    fn gap(&mut self, _k: u32) -> Duration {
        self.every
    }
    async fn inject(&mut self, _k: u32) -> Injected {
        let rev = crate::current_revision(&mut self.etcd).await;
        Injected::new(
            self.etcd.compact(rev, None).await.is_ok() as u64,
            Duration::ZERO,
        )
    }
    async fn heal(&mut self, _k: u32) -> Result<(), String> {
        Ok(())
    }
}

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// The member to fault in round `k`: the leader in even rounds, a random one
/// in odd rounds (`rng` is drawn only then, keeping seeded runs reproducible).
fn pick_member(etcd: &Etcd, rng: &mut Rng, k: u32, leaders: &mut u32) -> usize {
    let leader = blocking(|| etcd.leader());
    let victim = if k % 2 == 0 {
        leader.unwrap_or(0)
    } else {
        rng.below(3) as usize
    };
    if Some(victim) == leader {
        *leaders += 1;
    }
    victim
}

/// SIGSTOP a member (the leader every other time) for 1-5 s, after 0.5-1.5 s of workload.
pub struct MemberPause<'a> {
    etcd: &'a Etcd,
    rng: Rng,
    victim: usize,
    /// Pauses of the leader.
    pub leaders: u32,
    /// Time members spent stopped.
    pub stopped: Duration,
}

impl<'a> MemberPause<'a> {
    /// Pauses on `etcd`, random choices from `rng`.
    pub fn new(etcd: &'a Etcd, rng: Rng) -> Self {
        MemberPause {
            etcd,
            rng,
            victim: 0,
            leaders: 0,
            stopped: Duration::ZERO,
        }
    }
}

impl Failpoint for MemberPause<'_> {
    fn name(&self) -> &'static str {
        "member pause"
    }
    fn gap(&mut self, _k: u32) -> Duration {
        self.rng
            .between(Duration::from_millis(500), Duration::from_millis(1500))
    }
    async fn inject(&mut self, k: u32) -> Injected {
        self.victim = pick_member(self.etcd, &mut self.rng, k, &mut self.leaders);
        let d = self
            .rng
            .between(Duration::from_secs(1), Duration::from_secs(5));
        self.etcd.pause(self.victim);
        self.stopped += d;
        Injected::new(1, d)
    }
    async fn heal(&mut self, _k: u32) -> Result<(), String> {
        self.etcd.resume(self.victim);
        Ok(())
    }
}

/// kill -9 a member (the leader every other time), check that lock operations
/// resume through the others within [`RESUME_AFTER_LEADER`] of etcd having a
/// leader again (measured apart: how long the two members left take to
/// elect one is etcd's, and on a loaded 2-core machine it has taken 4 s with
/// a 500 ms election timeout), restart it after 500 ms.
pub struct MemberKill<'a> {
    etcd: &'a mut Etcd,
    rng: Rng,
    probe: &'a Client,
    gap_secs: (u64, u64),
    victim: usize,
    /// Kills of the leader.
    pub leaders: u32,
    /// Longest time until a lock went through after a kill.
    pub max_resume: Duration,
    /// Longest time until a member other than the victim led after a kill.
    pub max_elected: Duration,
    /// Longest time from etcd having a leader to a lock going through.
    pub max_after_leader: Duration,
    /// Probe acquisitions made.
    pub probes: u64,
    /// Failed expectations (operations did not resume in time).
    pub failures: Vec<String>,
}

impl<'a> MemberKill<'a> {
    /// Kills on `etcd`, resumption probed with `probe`, `gap_secs` of workload between kills.
    pub fn new(etcd: &'a mut Etcd, rng: Rng, probe: &'a Client, gap_secs: (u64, u64)) -> Self {
        MemberKill {
            etcd,
            rng,
            probe,
            gap_secs,
            victim: 0,
            leaders: 0,
            max_resume: Duration::ZERO,
            max_elected: Duration::ZERO,
            max_after_leader: Duration::ZERO,
            probes: 0,
            failures: Vec::new(),
        }
    }
}

impl Failpoint for MemberKill<'_> {
    fn name(&self) -> &'static str {
        "member kill"
    }
    fn gap(&mut self, _k: u32) -> Duration {
        self.rng.between(
            Duration::from_secs(self.gap_secs.0),
            Duration::from_secs(self.gap_secs.1),
        )
    }
    async fn inject(&mut self, k: u32) -> Injected {
        self.victim = pick_member(self.etcd, &mut self.rng, k, &mut self.leaders);
        let victim = self.victim;
        let eps = self.etcd.endpoints();
        let others: Vec<String> = eps
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != victim)
            .map(|(_, e)| e.clone())
            .collect();
        blocking(|| self.etcd.kill(victim));
        let killed = Instant::now();
        // When etcd has a leader again (at once if a follower was killed),
        // asked beside the probe every 50 ms (etcdctl costs CPU the election
        // and the clients need).
        let election = std::thread::spawn(move || {
            etcdlock_testkit::await_leader_among(
                &others,
                Duration::from_secs(15),
                Duration::from_millis(50),
            )
            .map(|_| killed.elapsed())
        });
        // Operations resume: a fresh lock on a new name goes through.
        let mut resumed = None;
        let mut i = 0;
        while killed.elapsed() < Duration::from_secs(15) {
            i += 1;
            if let Ok(g) = self
                .probe
                .lock_with(
                    &format!("probe-{k}-{i}"),
                    LockOptions::timeout(Duration::from_secs(2)),
                )
                .await
            {
                let _ = g.unlock().await;
                self.probes += 1;
                resumed = Some(killed.elapsed());
                break;
            }
        }
        let elected = election.join().unwrap_or(None);
        match (resumed, elected) {
            (Some(d), Some(e)) => {
                self.max_resume = self.max_resume.max(d);
                self.max_elected = self.max_elected.max(e);
                let after = d.saturating_sub(e);
                self.max_after_leader = self.max_after_leader.max(after);
                if after > RESUME_AFTER_LEADER {
                    self.failures.push(format!("kill {k}: operations resumed {after:?} after etcd had a leader again ({e:?} after the kill)"));
                }
            }
            (None, _) => self
                .failures
                .push(format!("kill {k}: operations did not resume within 15 s")),
            (_, None) => self
                .failures
                .push(format!("kill {k}: no member led within 15 s of the kill")),
        }
        Injected::new(1, Duration::from_millis(500))
    }
    async fn heal(&mut self, _k: u32) -> Result<(), String> {
        let victim = self.victim;
        blocking(|| {
            self.etcd.restart(victim);
            self.etcd
                .wait_member_healthy(victim, Duration::from_secs(20))
        })
        .map_err(|e| format!("restart of m{victim}: {e}"))
    }
}

/// How soon after etcd has a leader again lock operations must go through
/// (a request stuck on the dead or leaderless member times out after the
/// probe client's 1 s request timeout, then fails over and retries).
pub const RESUME_AFTER_LEADER: Duration = Duration::from_millis(2500);

/// A 1 s burst on every proxy: 75±50 ms delay per chunk, half of the new
/// connections refused, half of the live ones reset; then 1 s of calm.
pub struct ProxyBurst<'a> {
    proxies: &'a [Proxy],
    counters: &'a Counters,
    before: u64,
    /// Live connections reset.
    pub resets: u64,
    /// Acquisitions made during bursts.
    pub in_bursts: u64,
}

impl<'a> ProxyBurst<'a> {
    /// Bursts on `proxies`; `counters` tell how much the workload did meanwhile.
    pub fn new(proxies: &'a [Proxy], counters: &'a Counters) -> Self {
        ProxyBurst {
            proxies,
            counters,
            before: 0,
            resets: 0,
            in_bursts: 0,
        }
    }
}

impl Failpoint for ProxyBurst<'_> {
    fn name(&self) -> &'static str {
        "proxy burst"
    }
    async fn inject(&mut self, _k: u32) -> Injected {
        self.before = self.counters.acquisitions.load(Ordering::Relaxed);
        let mut resets = 0;
        for px in self.proxies {
            px.delay(Duration::from_millis(75), Duration::from_millis(50));
            px.drop_new_connections(0.5);
            resets += px.reset_fraction(0.5) as u64;
        }
        self.resets += resets;
        Injected {
            faults: self.proxies.len() as u64 + resets,
            hold: Duration::from_secs(1),
            settle: Duration::from_secs(1),
        }
    }
    async fn heal(&mut self, _k: u32) -> Result<(), String> {
        for px in self.proxies {
            px.pass();
            px.drop_new_connections(0.0);
        }
        self.in_bursts += self.counters.acquisitions.load(Ordering::Relaxed) - self.before;
        Ok(())
    }
}

/// Every 1.2 s, the wall clock of the processes that read `file` through
/// libfaketime jumps to the next offset of +262 s, -262 s, 0 (the third jump
/// is the heal of the first two; no separate heal step).
pub struct ClockJump {
    file: PathBuf,
}

const CLOCK_OFFSETS: [&str; 3] = ["+262", "-262", "+0"];

impl ClockJump {
    /// Jumps written to libfaketime's timestamp `file` (which must start at "+0").
    pub fn new(file: PathBuf) -> Self {
        ClockJump { file }
    }
}

impl Failpoint for ClockJump {
    fn name(&self) -> &'static str {
        "clock jump"
    }
    fn gap(&mut self, _k: u32) -> Duration {
        Duration::from_millis(1200)
    }
    async fn inject(&mut self, k: u32) -> Injected {
        let _ = std::fs::write(
            &self.file,
            format!("{}\n", CLOCK_OFFSETS[(k as usize + 1) % 3]),
        );
        Injected::new(1, Duration::ZERO)
    }
    async fn heal(&mut self, _k: u32) -> Result<(), String> {
        Ok(())
    }
}
