//! The fault scenarios. Each starts its own etcd (one node or three members),
//! injects one kind of fault repeatedly, feeds every hold to the [`Checker`],
//! and returns an [`Outcome`] whose [`Outcome::line`] is the pass figure.
//!
//! All scenarios use a 2 s lease TTL. They must run on a multi-threaded tokio
//! runtime (the etcd harness is driven with `block_in_place`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcdlock::runtime::{clock_monotonic_ns, instant_to_mono_ns};
use etcdlock::{CancellationToken, Client, ErrorCode, LockOptions};
use etcdlock_testkit::Etcd;
use serde_json::json;

use crate::checker::{resource_history, resource_key, Report};
use crate::failpoint::{
    run_rounds, run_until, ClockJump, Compaction, Failpoint, Injected, MemberKill, MemberPause,
    ProxyBurst,
};
use crate::{
    await_key_count, current_revision, keys_under, ms_between, opts, raw, seed, spawn_holder,
    unique_ns, Checker, ChildProc, Counters, Hold, HolderLang, LossInfo, Proxy, Rng, Workload,
};

mod clock;
mod compaction;
mod fleet;
mod holders;
mod infra;
mod members;
mod net;
mod network;
mod partitions;
mod recipes;
mod upgrade;

#[allow(unused_imports)]
use clock::*;
pub use clock::{libfaketime, wall_clock_jumps};
pub use compaction::waiters_under_compaction;
#[allow(unused_imports)]
use compaction::*;
pub use fleet::{fleet_clients, fleet_faults, FLEET_CLIENTS, FLEET_TTL};
#[allow(unused_imports)]
use holders::*;
pub use holders::{holder_kill9, holder_sigstop};
pub use infra::{close_during_fault, grpc_lb_goaway, grpc_proxy};
#[allow(unused_imports)]
use members::*;
pub use members::{leader_change_after_holder_death, member_kill_restart, member_sigstop};
pub use net::Net;
#[allow(unused_imports)]
use network::*;
pub use network::{acquire_response_dropped, client_blackholed, proxy_delay_and_drop};
pub use partitions::{
    client_on_cut_off_follower, holder_member_partitioned, isolated_follower, minority_leader,
    one_way_loss,
};
#[allow(unused_imports)]
use recipes::*;
pub use recipes::{recipes_holder_sigstop, recipes_member_kill};
pub use upgrade::{rolling_restart, rolling_upgrade, rolling_upgrade_36, UPGRADE_VERSIONS};

/// The partitions between members (16-19): nftables on `lo`, members on 127.0.0.2-4.
pub const PARTITIONS: [u32; 4] = [16, 17, 18, 19];

/// A fleet of clients under leader kills, a cluster-wide pause and a rolling restart (37).
pub const FLEET: [u32; 1] = [37];

/// The scenarios behind real etcd infrastructure (26-28) and their TLS runs (29-33).
pub const INFRA: [u32; 8] = [26, 27, 28, 29, 30, 31, 32, 33];

/// The plaintext scenario a TLS run id stands for: 29-33 are 7, 5, 6, 27
/// and 28 with etcd serving clients over TLS (certificates from a test CA).
pub fn tls_run(id: u32) -> Option<u32> {
    Some(match id {
        29 => 7,
        30 => 5,
        31 => 6,
        32 => 27,
        33 => 28,
        _ => return None,
    })
}

/// The lease TTL of every scenario, in seconds.
pub const TTL: i64 = 2;
const TTL_NS: u64 = TTL as u64 * 1_000_000_000;

/// How long and how often: the CI short profile or a soak profile.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Rounds of each repeated fault.
    pub rounds: u32,
    /// Seconds of faulted workload (scenarios 4, 5, 8, 11).
    pub fault_secs: u64,
    /// Acquisitions the baseline aims for.
    pub baseline_acquisitions: u64,
    /// Upper bound on the baseline's run time.
    pub baseline_max_secs: u64,
}

impl Profile {
    /// The CI profile: the whole suite in well under 10 minutes.
    pub fn short() -> Profile {
        Profile {
            rounds: 3,
            fault_secs: 12,
            baseline_acquisitions: 9000,
            baseline_max_secs: 90,
        }
    }
    /// A soak round: longer runs, more repetitions.
    pub fn soak() -> Profile {
        Profile {
            rounds: 6,
            fault_secs: 40,
            baseline_acquisitions: 20000,
            baseline_max_secs: 120,
        }
    }
}

/// The result of one scenario.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Scenario number (1-11).
    pub id: u32,
    /// Short name.
    pub name: &'static str,
    /// The pass figure.
    pub figure: String,
    /// Lock acquisitions made.
    pub acquisitions: u64,
    /// Faults injected.
    pub faults: u64,
    /// Checker violations.
    pub violations: u64,
    /// Failed expectations (empty: passed).
    pub failures: Vec<String>,
    /// Languages of the processes that held locks.
    pub languages: Vec<&'static str>,
    /// Holds checked by our own checker.
    pub holds: u64,
    /// Holds that ended in a loss.
    pub losses: u64,
    /// Violations found by our own checker.
    pub ours_violations: u64,
    /// Porcupine's verdict on the scenario's history.
    pub porcupine: crate::history::Verdict,
    /// Longest time from a lost hold's local end to the moment its holder's
    /// code saw the loss, ms (None: no loss).
    pub max_loss_detect_ms: Option<i64>,
    /// Smallest gap between a lost hold's local end and the next
    /// acquisition of that lock, ms: how much of the safety margin was left
    /// at the tightest moment (None: no lost hold was followed by another).
    pub min_loss_gap_ms: Option<i64>,
}

impl Outcome {
    fn new(id: u32, name: &'static str) -> Outcome {
        Outcome {
            id,
            name,
            figure: String::new(),
            acquisitions: 0,
            faults: 0,
            violations: 0,
            failures: Vec::new(),
            languages: vec!["Rust"],
            holds: 0,
            losses: 0,
            ours_violations: 0,
            porcupine: Default::default(),
            max_loss_detect_ms: None,
            min_loss_gap_ms: None,
        }
    }
    fn fail(&mut self, msg: impl Into<String>) {
        self.failures.push(msg.into());
    }
    fn expect(&mut self, cond: bool, msg: impl FnOnce() -> String) {
        if !cond {
            self.fail(msg());
        }
    }
    /// Whether every expectation held.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
    /// The outcome as one JSON object (for `summary.json`).
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "id": self.id,
            "name": self.name,
            "languages": self.languages,
            "acquisitions": self.acquisitions,
            "holds": self.holds,
            "losses": self.losses,
            "faults": self.faults,
            "violations": self.violations,
            "checkers": {
                "ours": {"violations": self.ours_violations},
                "porcupine": {
                    "result": self.porcupine.result,
                    "ops": self.porcupine.ops,
                    "locks": self.porcupine.locks,
                    "ms": self.porcupine.ms,
                    "history": self.porcupine.history.display().to_string(),
                    "html": self.porcupine.html.as_ref().map(|p| p.display().to_string()),
                },
            },
            "max_loss_detect_ms": self.max_loss_detect_ms,
            "min_loss_gap_ms": self.min_loss_gap_ms,
            "passed": self.passed(),
            "figure": self.figure,
            "failures": self.failures,
        })
    }

    /// The figure line printed by the tests and the soak.
    pub fn line(&self) -> String {
        let mut s = format!(
            "scenario {} {}: {} [acquisitions={} faults={} violations={} porcupine={} ops={}]",
            self.id,
            self.name,
            self.figure,
            self.acquisitions,
            self.faults,
            self.violations,
            self.porcupine.result,
            self.porcupine.ops
        );
        if !self.failures.is_empty() {
            s.push_str(&format!(" FAILED: {}", self.failures.join("; ")));
        }
        s
    }
}

/// Every scenario id: 1-11, 12 / 13 = scenarios 2 / 3 with a Python holder,
/// 14 / 15 = the recipes (semaphore, read-write lock, election, multi-lock)
/// under a paused holder and under member kills, 20-22 / 23-25 = scenarios 2 / 3
/// with a Java, Node and C holder (see [`holder_run`]).
pub const ALL: [u32; 21] = [
    1, 2, 12, 20, 21, 22, 3, 13, 23, 24, 25, 4, 5, 6, 7, 8, 9, 10, 11, 14, 15,
];

/// The holder scenario (2 or 3) and the holder's language a run id stands for.
pub fn holder_run(id: u32) -> Option<(u32, HolderLang)> {
    Some(match id {
        2 => (2, HolderLang::Rust),
        12 => (2, HolderLang::Python),
        20 => (2, HolderLang::Java),
        21 => (2, HolderLang::Node),
        22 => (2, HolderLang::C),
        3 => (3, HolderLang::Rust),
        13 => (3, HolderLang::Python),
        23 => (3, HolderLang::Java),
        24 => (3, HolderLang::Node),
        25 => (3, HolderLang::C),
        _ => return None,
    })
}

/// Run scenario `id` (1-19; 12 and 13 are scenarios 2 and 3 with a holder
/// process written in Python, on the Python binding, 20-22 and 23-25 with one
/// in Java, Node and C).
/// One scenario as a test (`faults/tests/*.rs`): the short profile on a
/// fresh 4-worker runtime; prints its figure line and time, saves its
/// outcome for the report, and panics with the figure line if it failed.
pub fn run_test(id: u32) {
    trace_if_asked();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let t = std::time::Instant::now();
    let o = rt.block_on(run(id, &Profile::short()));
    println!("{}", o.line());
    println!(
        "took: scenario {} {} {:.1} s",
        o.id,
        o.name,
        t.elapsed().as_secs_f64()
    );
    crate::report::save_outcome(&o);
    assert!(o.passed(), "{}", o.line());
}

/// `ETCDLOCK_FAULTS_TRACE=<filter>` (e.g. `etcdlock=trace`): core's tracing
/// on stderr, stamped with CLOCK_MONOTONIC milliseconds like the histories.
fn trace_if_asked() {
    struct Mono;
    impl tracing_subscriber::fmt::time::FormatTime for Mono {
        fn format_time(
            &self,
            w: &mut tracing_subscriber::fmt::format::Writer<'_>,
        ) -> std::fmt::Result {
            let ns = etcdlock::runtime::clock_monotonic_ns();
            write!(w, "{}.{:06}", ns / 1_000_000, ns % 1_000_000)
        }
    }
    if let Ok(filter) = std::env::var("ETCDLOCK_FAULTS_TRACE") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_timer(Mono)
            .with_writer(std::io::stderr)
            .try_init();
    }
}

pub async fn run(id: u32, p: &Profile) -> Outcome {
    if let Some(plain) = tls_run(id) {
        let net = Net::new(true);
        let mut o = match plain {
            7 => client_blackholed_on(p, &net).await,
            5 => member_kill_restart_on(p, &net).await,
            6 => leader_change_on(p, &net).await,
            27 => grpc_lb_goaway(p, &net).await,
            _ => close_during_fault(p, &net).await,
        };
        o.id = id;
        return o;
    }
    if let Some((scenario, lang)) = holder_run(id) {
        let mut o = if scenario == 2 {
            holder_sigstop(p, lang).await
        } else {
            holder_kill9(p, lang).await
        };
        // The waiter is Rust; the holder process is in `lang`.
        o.languages = if lang == HolderLang::Rust {
            vec!["Rust"]
        } else {
            vec!["Rust", lang.name()]
        };
        return o;
    }
    let o = match id {
        1 => baseline(p).await,
        4 => member_sigstop(p).await,
        5 => member_kill_restart(p).await,
        6 => leader_change_after_holder_death(p).await,
        7 => client_blackholed(p).await,
        8 => proxy_delay_and_drop(p).await,
        9 => waiters_under_compaction(p).await,
        10 => acquire_response_dropped(p).await,
        11 => wall_clock_jumps(p).await,
        14 => recipes_holder_sigstop(p).await,
        15 => recipes_member_kill(p).await,
        16 => minority_leader(p).await,
        17 => isolated_follower(p).await,
        18 => one_way_loss(p).await,
        19 => holder_member_partitioned(p).await,
        26 => grpc_proxy(p).await,
        27 => grpc_lb_goaway(p, &Net::new(false)).await,
        28 => close_during_fault(p, &Net::new(false)).await,
        34 => rolling_restart(p).await,
        35 => rolling_upgrade(p).await,
        36 => rolling_upgrade_36(p).await,
        37 => fleet_faults(p).await,
        _ => {
            let mut o = Outcome::new(id, "unknown");
            o.fail(format!("no scenario {id}"));
            o
        }
    };
    o
}

/// Check the history and fold the result into the outcome.
async fn finish(
    o: &mut Outcome,
    checker: &Checker,
    rawc: &mut etcd_client::Client,
    ns: &str,
    from: Option<i64>,
) -> Report {
    let hist = match from {
        Some(f) => match resource_history(rawc, ns, f).await {
            Ok(h) => h,
            Err(e) => {
                o.fail(format!("resource history: {e}"));
                BTreeMap::new()
            }
        },
        None => BTreeMap::new(),
    };
    let r = checker.check(&hist);
    o.violations = r.violations() as u64;
    o.ours_violations = o.violations;
    if r.violations() > 0 {
        o.fail(format!("checker: {}; {:?}", r.summary(), r.details));
    }
    // The outside checker, on the same holds with their timed operations.
    let holds = checker.holds();
    (o.holds, o.losses) = (r.holds as u64, r.losses as u64);
    (o.max_loss_detect_ms, o.min_loss_gap_ms) = loss_figures(&holds);
    let name = format!("{:02}-{}", o.id, o.name);
    o.porcupine = blocking(|| crate::history::check(&holds, &name));
    if !o.porcupine.ok() {
        o.violations += 1;
        let html = o
            .porcupine
            .html
            .as_ref()
            .map(|p| format!(", visualization {}", p.display()))
            .unwrap_or_default();
        o.fail(format!(
            "porcupine: {} on {}{html}",
            o.porcupine.result,
            o.porcupine.history.display()
        ));
    }
    r
}

/// (longest loss detection, smallest gap after a lost hold), ms.
fn loss_figures(holds: &[Hold]) -> (Option<i64>, Option<i64>) {
    let detect = holds
        .iter()
        .filter_map(|h| h.loss.as_ref())
        .map(|l| ms_between(l.at_ns, l.reported_ns).max(0))
        .max();
    let mut by_lock: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for h in holds.iter().filter(|h| !h.lock.contains('#')) {
        by_lock.entry(h.lock.as_str()).or_default().push(h);
    }
    let mut gap: Option<i64> = None;
    for hs in by_lock.values_mut() {
        hs.sort_by_key(|h| h.acquired_ns);
        for w in hs.windows(2) {
            if w[0].loss.is_some() {
                let g = ms_between(w[0].ended_ns, w[1].acquired_ns);
                gap = Some(gap.map_or(g, |x| x.min(g)));
            }
        }
    }
    (detect, gap)
}

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Run a workload in the background; returns its stop token and join handle.
fn start_workload(
    w: Workload,
    checker: Arc<Checker>,
    counters: Arc<Counters>,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let stop = CancellationToken::new();
    let s = stop.clone();
    let h = tokio::spawn(async move { w.run(checker, counters, s).await });
    (stop, h)
}

/// A waiter in this process that takes the lock (as `kind` says, see
/// [`crate::acquire_kind`]), writes the resource with its token and returns.
fn spawn_waiter(
    c: Client,
    lock: &str,
    kind: &str,
) -> tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>> {
    let (lock, kind) = (lock.to_string(), kind.to_string());
    tokio::spawn(async move {
        let (g, _others) = crate::acquire_kind(&c, &lock, &kind).await?;
        let at = clock_monotonic_ns();
        g.put(resource_key(&lock), g.fencing_token().to_string())
            .await?;
        Ok((g, at))
    })
}

/// Release a parent-side hold and record it.
async fn release(
    checker: &Checker,
    g: etcdlock::Guard,
    acquired_ns: u64,
    client: &str,
) -> Result<(), String> {
    release_ref(checker, &g, acquired_ns, client).await
}

/// [`release`] of a guard shared with other tasks.
async fn release_ref(
    checker: &Checker,
    g: &etcdlock::Guard,
    acquired_ns: u64,
    client: &str,
) -> Result<(), String> {
    let end = clock_monotonic_ns();
    let loss = g.loss();
    let r = g.unlock().await;
    checker.record(Hold {
        lock: g.name().to_string(),
        token: g.fencing_token(),
        acquired_ns,
        ended_ns: loss
            .map(|l| instant_to_mono_ns(l.at).min(end))
            .unwrap_or(end),
        client: client.to_string(),
        loss: loss.map(|l| LossInfo {
            reason: l.reason.name().into(),
            at_ns: instant_to_mono_ns(l.at),
            reported_ns: end,
        }),
        ..Default::default()
    });
    r.map_err(|e| format!("unlock by {client}: {e}"))
}

/// 1. No fault: 8 clients, 4 locks.
pub async fn baseline(p: &Profile) -> Outcome {
    let mut o = Outcome::new(1, "baseline");
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("base");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Arc::new(Checker::new());
    let counters = Arc::new(Counters::default());
    let mut w = Workload::new(eps.clone(), &ns);
    w.max_acquisitions = p.baseline_acquisitions;
    let start = Instant::now();
    let (stop, h) = start_workload(w, checker.clone(), counters.clone());
    let cap = tokio::time::sleep(Duration::from_secs(p.baseline_max_secs));
    tokio::pin!(cap);
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = &mut cap => stop.cancel(),
    }
    let _ = h.await;
    let took = start.elapsed().as_secs_f64();
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.acquisitions = counters.acquisitions.load(Ordering::Relaxed);
    let acq = o.acquisitions;
    o.expect(acq >= 1000, || format!("only {acq} acquisitions"));
    o.expect(r.losses == 0, || {
        format!("{} losses without any fault", r.losses)
    });
    o.figure = format!(
        "8 clients, 4 locks: {} acquisitions in {took:.1} s ({:.0}/s), {}; errors: {}",
        o.acquisitions,
        o.acquisitions as f64 / took,
        r.summary(),
        counters.errors_summary()
    );
    o
}
