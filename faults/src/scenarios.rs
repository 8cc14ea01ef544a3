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
use crate::failpoint::{run_rounds, run_until, ClockJump, Compaction, Failpoint, Injected, MemberKill, MemberPause, ProxyBurst};
use crate::{
    await_key_count, current_revision, keys_under, ms_between, opts, raw, seed, spawn_holder, unique_ns, Checker, ChildProc,
    Counters, Hold, HolderLang, LossInfo, Proxy, Rng, Workload,
};

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
        Profile { rounds: 3, fault_secs: 12, baseline_acquisitions: 9000, baseline_max_secs: 90 }
    }
    /// A soak round: longer runs, more repetitions.
    pub fn soak() -> Profile {
        Profile { rounds: 6, fault_secs: 40, baseline_acquisitions: 20000, baseline_max_secs: 120 }
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
}

impl Outcome {
    fn new(id: u32, name: &'static str) -> Outcome {
        Outcome { id, name, figure: String::new(), acquisitions: 0, faults: 0, violations: 0, failures: Vec::new() }
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
    /// The figure line printed by the tests and the soak.
    pub fn line(&self) -> String {
        let mut s = format!(
            "scenario {} {}: {} [acquisitions={} faults={} violations={}]",
            self.id, self.name, self.figure, self.acquisitions, self.faults, self.violations
        );
        if !self.failures.is_empty() {
            s.push_str(&format!(" FAILED: {}", self.failures.join("; ")));
        }
        s
    }
}

/// Every scenario id: 1-11, 12 / 13 = scenarios 2 / 3 with a Python holder,
/// 14 / 15 = the recipes (semaphore, read-write lock, election, multi-lock)
/// under a paused holder and under member kills.
pub const ALL: [u32; 15] = [1, 2, 12, 3, 13, 4, 5, 6, 7, 8, 9, 10, 11, 14, 15];

/// Run scenario `id` (1-11; 12 and 13 are scenarios 2 and 3 with a holder
/// process written in Python, on the Python binding).
pub async fn run(id: u32, p: &Profile) -> Outcome {
    match id {
        1 => baseline(p).await,
        2 => holder_sigstop(p, HolderLang::Rust).await,
        3 => holder_kill9(p, HolderLang::Rust).await,
        12 => holder_sigstop(p, HolderLang::Python).await,
        13 => holder_kill9(p, HolderLang::Python).await,
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
        _ => {
            let mut o = Outcome::new(id, "unknown");
            o.fail(format!("no scenario {id}"));
            o
        }
    }
}

/// Check the history and fold the result into the outcome.
async fn finish(o: &mut Outcome, checker: &Checker, rawc: &mut etcd_client::Client, ns: &str, from: Option<i64>) -> Report {
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
    if r.violations() > 0 {
        o.fail(format!("checker: {}; {:?}", r.summary(), r.details));
    }
    r
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
fn spawn_waiter(c: Client, lock: &str, kind: &str) -> tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>> {
    let (lock, kind) = (lock.to_string(), kind.to_string());
    tokio::spawn(async move {
        let (g, _others) = crate::acquire_kind(&c, &lock, &kind).await?;
        let at = clock_monotonic_ns();
        g.put(resource_key(&lock), g.fencing_token().to_string()).await?;
        Ok((g, at))
    })
}

/// Release a parent-side hold and record it.
async fn release(checker: &Checker, g: etcdlock::Guard, acquired_ns: u64, client: &str) -> Result<(), String> {
    let end = clock_monotonic_ns();
    let loss = g.loss();
    let r = g.unlock().await;
    checker.record(Hold {
        lock: g.name().to_string(),
        token: g.fencing_token(),
        acquired_ns,
        ended_ns: loss.map(|l| instant_to_mono_ns(l.at).min(end)).unwrap_or(end),
        client: client.to_string(),
        loss: loss.map(|l| LossInfo { reason: l.reason.name().into(), at_ns: instant_to_mono_ns(l.at), reported_ns: end }),
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
    o.expect(r.losses == 0, || format!("{} losses without any fault", r.losses));
    o.figure = format!(
        "8 clients, 4 locks: {} acquisitions in {took:.1} s ({:.0}/s), {}; errors: {}",
        o.acquisitions,
        o.acquisitions as f64 / took,
        r.summary(),
        counters.errors_summary()
    );
    o
}

fn holder_spec(eps: &[String], ns: &str, rounds: u32) -> serde_json::Value {
    json!({"mode": "holder", "endpoints": eps, "ns": ns, "ttl": TTL, "lock": "L", "rounds": rounds})
}

/// The waiter's kind behind a holder of `kind`: a writer behind a reader, else the same kind.
fn waiter_kind(kind: &str) -> &str {
    if kind == "read" {
        "writer"
    } else {
        kind
    }
}

fn parse_hold(parts: &[String]) -> Option<Hold> {
    Hold::from_json(&parts[1..].join(" "))
}

/// A holder process, a waiter of ours queued behind it, and the fault's moment.
struct HolderRound {
    waiter: tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>,
    token: i64,
    acquired_ns: u64,
    key: String,
    at_ns: u64,
}

/// Start of a holder round: the holder has taken `L` (its `HELD` line read) and
/// written under it; queue a waiter of this process behind it.
async fn queue_behind(
    child: &mut ChildProc,
    wc: &Client,
    rawc: &mut etcd_client::Client,
    ns: &str,
    kind: &str,
) -> Result<(tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>, i64, u64, String), String> {
    let held = child.expect("HELD", Duration::from_secs(20)).await?;
    let token: i64 = held[1].parse().unwrap_or(0);
    let acquired_ns: u64 = held[2].parse().unwrap_or(0);
    let key = held.get(3).cloned().unwrap_or_default();
    child.expect("PUT", Duration::from_secs(10)).await?;
    let waiter = spawn_waiter(wc.clone(), "L", waiter_kind(kind));
    if await_key_count(rawc, &format!("{ns}L/"), 2, Duration::from_secs(10)).await.is_none() {
        waiter.abort();
        return Err("waiter never queued".into());
    }
    Ok((waiter, token, acquired_ns, key))
}

/// The waiter of a round takes the lock within TTL + 1 s of the fault, with a
/// higher token than the holder's.
async fn waiter_takes_over(r: HolderRound, what: &str, errs: &mut Vec<String>) -> Option<(etcdlock::Guard, u64, u64)> {
    match tokio::time::timeout(Duration::from_secs(TTL as u64 + 10), r.waiter).await {
        Ok(Ok(Ok((g, at)))) => {
            let waited = at.saturating_sub(r.at_ns);
            if waited > TTL_NS + 1_000_000_000 {
                errs.push(format!("waiter acquired {:.2} s after {what}", secs(waited)));
            }
            if g.fencing_token() <= r.token {
                errs.push(format!("token {} not above the holder's {}", g.fencing_token(), r.token));
            }
            Some((g, at, waited))
        }
        other => {
            errs.push(format!("waiter did not acquire: {other:?}"));
            None
        }
    }
}

fn errs_to_result(errs: Vec<String>) -> Result<(), String> {
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

/// SIGSTOP the holder process for 2×TTL while a waiter of ours is queued: the
/// waiter must take over within TTL + 1 s with a higher token, and once resumed
/// the holder must report the loss and have its stale writes refused (a guarded
/// put, and a raw compare on its key's create_revision). One holder process
/// serves every round.
struct HolderPause<'a> {
    lang: HolderLang,
    kind: &'static str,
    child: ChildProc,
    wc: &'a Client,
    rawc: &'a mut etcd_client::Client,
    checker: &'a Checker,
    ns: &'a str,
    round: Result<HolderRound, String>,
    acquisitions: u64,
    done: u32,
    max_wait: u64,
    reported: u32,
    stale_ok: u32,
    raw_ok: u32,
    min_gap: i64,
}

impl<'a> HolderPause<'a> {
    fn new(lang: HolderLang, kind: &'static str, child: ChildProc, wc: &'a Client, rawc: &'a mut etcd_client::Client, checker: &'a Checker, ns: &'a str) -> Self {
        HolderPause {
            lang,
            kind,
            child,
            wc,
            rawc,
            checker,
            ns,
            round: Err("no round".into()),
            acquisitions: 0,
            done: 0,
            max_wait: 0,
            reported: 0,
            stale_ok: 0,
            raw_ok: 0,
            min_gap: i64::MAX,
        }
    }
}

impl Failpoint for HolderPause<'_> {
    fn name(&self) -> &'static str {
        "holder SIGSTOP"
    }
    async fn inject(&mut self, _k: u32) -> Injected {
        match queue_behind(&mut self.child, self.wc, self.rawc, self.ns, self.kind).await {
            Ok((waiter, token, acquired_ns, key)) => {
                self.acquisitions += 1;
                let at_ns = clock_monotonic_ns();
                self.child.signal(libc::SIGSTOP);
                self.round = Ok(HolderRound { waiter, token, acquired_ns, key, at_ns });
                Injected::new(1, Duration::from_nanos(2 * TTL_NS))
            }
            Err(e) => {
                self.round = Err(e);
                Injected::new(0, Duration::ZERO)
            }
        }
    }
    async fn heal(&mut self, k: u32) -> Result<(), String> {
        let r = std::mem::replace(&mut self.round, Err("no round".into()))?;
        let (stop_ns, token, acquired_ns, key) = (r.at_ns, r.token, r.acquired_ns, r.key.clone());
        let mut errs = Vec::new();
        let took = waiter_takes_over(r, "SIGSTOP", &mut errs).await;
        // Let the holder run into its stale state.
        self.child.signal(libc::SIGCONT);
        let Some((g, at, waited)) = took else {
            return errs_to_result(errs);
        };
        self.acquisitions += 1;
        self.max_wait = self.max_wait.max(waited);
        let lost = self.child.expect("LOST", Duration::from_secs(10)).await;
        let stale = self.child.expect("STALE", Duration::from_secs(10)).await;
        // Rust holders send the raw compare themselves and print their hold; for
        // others the parent sends the same compare with the holder's key and token.
        let (rawtx, hold) = if self.lang == HolderLang::Rust {
            (self.child.expect("RAWTXN", Duration::from_secs(20)).await, self.child.expect("HOLD", Duration::from_secs(10)).await)
        } else {
            let txn = etcd_client::Txn::new()
                .when([etcd_client::Compare::create_revision(key, etcd_client::CompareOp::Equal, token)])
                .and_then([etcd_client::TxnOp::put(format!("{}{}", self.ns, resource_key("L")), token.to_string(), None)]);
            let r = self.rawc.txn(txn).await.map(|r| vec!["RAWTXN".to_string(), r.succeeded().to_string()]).map_err(|e| e.to_string());
            (r, Ok(Vec::new()))
        };
        match (lost, stale, rawtx, hold) {
            (Ok(lost), Ok(stale), Ok(rawtx), Ok(hold)) => {
                self.reported += 1;
                let lost_at: u64 = lost[2].parse().unwrap_or(u64::MAX);
                self.min_gap = self.min_gap.min(ms_between(lost_at, at));
                if stale[1] == "ok" {
                    self.stale_ok += 1;
                }
                if rawtx[1] == "true" {
                    self.raw_ok += 1;
                }
                if self.lang == HolderLang::Rust {
                    match parse_hold(&hold) {
                        Some(h) => self.checker.record(h),
                        None => errs.push(format!("bad HOLD line {hold:?}")),
                    }
                } else {
                    // Python: the hold ends at the last moment is_held() said True.
                    let rep: u64 = lost.get(3).and_then(|s| s.parse().ok()).unwrap_or(lost_at);
                    self.checker.record(Hold {
                        lock: "L".into(),
                        token,
                        acquired_ns,
                        ended_ns: lost_at,
                        client: format!("python-child-round{k}"),
                        loss: Some(LossInfo { reason: lost[1].clone(), at_ns: lost_at, reported_ns: rep }),
                    });
                    if rep <= stop_ns + TTL_NS {
                        errs.push("python holder saw the loss before it was resumed?".into());
                    }
                }
            }
            other => errs.push(format!("resumed holder did not report: {other:?}")),
        }
        if let Err(e) = release(self.checker, g, at, "parent-waiter").await {
            errs.push(e);
        }
        self.done += 1;
        errs_to_result(errs)
    }
}

/// kill -9 of the holder process while a waiter of ours is queued: the waiter
/// must take over within TTL + 1 s with a higher token. A new holder process
/// each round.
struct HolderKill<'a> {
    lang: HolderLang,
    kind: &'static str,
    eps: &'a [String],
    wc: &'a Client,
    rawc: &'a mut etcd_client::Client,
    checker: &'a Checker,
    ns: &'a str,
    round: Result<HolderRound, String>,
    acquisitions: u64,
    done: u32,
    max_wait: u64,
}

impl<'a> HolderKill<'a> {
    fn new(lang: HolderLang, kind: &'static str, eps: &'a [String], wc: &'a Client, rawc: &'a mut etcd_client::Client, checker: &'a Checker, ns: &'a str) -> Self {
        HolderKill { lang, kind, eps, wc, rawc, checker, ns, round: Err("no round".into()), acquisitions: 0, done: 0, max_wait: 0 }
    }
}

impl Failpoint for HolderKill<'_> {
    fn name(&self) -> &'static str {
        "holder kill -9"
    }
    async fn inject(&mut self, k: u32) -> Injected {
        let mut spec = holder_spec(self.eps, self.ns, 1);
        spec["kind"] = json!(self.kind);
        let mut child = match spawn_holder(self.lang, spec) {
            Ok(c) => c,
            Err(e) => {
                self.round = Err(e);
                return Injected::new(0, Duration::ZERO);
            }
        };
        match queue_behind(&mut child, self.wc, self.rawc, self.ns, self.kind).await {
            Ok((waiter, token, acquired_ns, key)) => {
                self.acquisitions += 1;
                let at_ns = clock_monotonic_ns();
                child.kill9().await;
                self.checker.record(Hold {
                    lock: "L".into(),
                    token,
                    acquired_ns,
                    ended_ns: at_ns,
                    client: format!("child-round{k}"),
                    loss: None,
                });
                self.round = Ok(HolderRound { waiter, token, acquired_ns, key, at_ns });
                Injected::new(1, Duration::ZERO)
            }
            Err(e) => {
                child.kill9().await;
                self.round = Err(e);
                Injected::new(0, Duration::ZERO)
            }
        }
    }
    async fn heal(&mut self, _k: u32) -> Result<(), String> {
        let r = std::mem::replace(&mut self.round, Err("no round".into()))?;
        let mut errs = Vec::new();
        if let Some((g, at, waited)) = waiter_takes_over(r, "kill -9", &mut errs).await {
            self.acquisitions += 1;
            self.max_wait = self.max_wait.max(waited);
            if let Err(e) = release(self.checker, g, at, "parent-waiter").await {
                errs.push(e);
            }
            self.done += 1;
        }
        errs_to_result(errs)
    }
}

/// 2. Holder process SIGSTOPped for 2×TTL, repeatedly (holder in Rust or Python).
pub async fn holder_sigstop(p: &Profile, lang: HolderLang) -> Outcome {
    let mut o = Outcome::new(2, if lang == HolderLang::Rust { "holder-sigstop" } else { "holder-sigstop-python" });
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("stop");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Checker::new();
    let rounds = p.rounds;
    let child = match spawn_holder(lang, holder_spec(&eps, &ns, rounds)) {
        Ok(c) => c,
        Err(e) => {
            o.fail(e);
            o.figure = "not run".into();
            return o;
        }
    };
    let wc = Client::connect(opts(&eps, &ns, 10, Duration::from_secs(2))).await.expect("waiter connect");
    let mut fp = HolderPause::new(lang, "mutex", child, &wc, &mut rawc, &checker, &ns);
    let r = run_rounds(&mut fp, Duration::ZERO, rounds).await;
    o.faults += r.faults;
    o.acquisitions += fp.acquisitions;
    for f in r.failures {
        o.fail(f);
    }
    if o.passed() {
        if let Err(e) = fp.child.expect("DONE", Duration::from_secs(20)).await {
            o.fail(e);
        }
    }
    fp.child.kill9().await;
    let HolderPause { done, max_wait, reported, stale_ok, raw_ok, min_gap, .. } = fp;
    wc.close().await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.expect(done == rounds, || format!("{done}/{rounds} rounds completed"));
    o.expect(stale_ok + raw_ok == 0, || format!("{stale_ok} guarded and {raw_ok} raw stale writes accepted"));
    o.expect(reported == rounds, || format!("{reported}/{rounds} losses reported"));
    o.figure = format!(
        "{done} rounds, {} stale writes accepted (guarded put {stale_ok}, raw compare {raw_ok}), max waiter acquire {:.2} s after SIGSTOP (TTL {TTL} s, bound {} s), {reported}/{rounds} losses reported, each hold ended >= {} ms before the waiter acquired; {}",
        stale_ok + raw_ok,
        secs(max_wait),
        TTL + 1,
        if min_gap == i64::MAX { 0 } else { min_gap },
        r.summary()
    );
    o
}

/// 3. Holder process kill -9, repeatedly (holder in Rust or Python).
pub async fn holder_kill9(p: &Profile, lang: HolderLang) -> Outcome {
    let mut o = Outcome::new(3, if lang == HolderLang::Rust { "holder-kill9" } else { "holder-kill9-python" });
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("kill");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Checker::new();
    let wc = Client::connect(opts(&eps, &ns, 10, Duration::from_secs(2))).await.expect("waiter connect");
    let mut fp = HolderKill::new(lang, "mutex", &eps, &wc, &mut rawc, &checker, &ns);
    let r = run_rounds(&mut fp, Duration::ZERO, p.rounds).await;
    o.faults += r.faults;
    o.acquisitions += fp.acquisitions;
    for f in r.failures {
        o.fail(f);
    }
    let (done, max_wait) = (fp.done, fp.max_wait);
    wc.close().await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.expect(done == p.rounds, || format!("{done}/{} rounds completed", p.rounds));
    o.figure = format!(
        "{done} rounds, max next-waiter acquire {:.2} s after kill -9 (TTL {TTL} s, bound {} s); {}",
        secs(max_wait),
        TTL + 1,
        r.summary()
    );
    o
}

fn cluster_workload(endpoints: Vec<String>, ns: &str) -> Workload {
    let mut w = Workload::new(endpoints, ns);
    w.hold = Duration::from_millis(5);
    w.lock_timeout = Duration::from_secs(4);
    w.request_timeout = Duration::from_secs(1);
    w
}

/// 4. Member SIGSTOP for 1-5 s, repeatedly, in a 3-member cluster.
pub async fn member_sigstop(p: &Profile) -> Outcome {
    let mut o = Outcome::new(4, "member-sigstop");
    let etcd = Etcd::cluster(3);
    let eps = etcd.endpoints();
    let ns = unique_ns("mstop");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Arc::new(Checker::new());
    let counters = Arc::new(Counters::default());
    let (stop, h) = start_workload(cluster_workload(eps.clone(), &ns), checker.clone(), counters.clone());
    let mut fp = MemberPause::new(&etcd, Rng::new(seed() ^ 4));
    let rounds = run_rounds(&mut fp, Duration::from_secs(p.fault_secs), 3).await;
    o.faults = rounds.faults;
    o.failures.extend(rounds.failures);
    let healed_ns = clock_monotonic_ns();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.cancel();
    let _ = h.await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.acquisitions = counters.acquisitions.load(Ordering::Relaxed);
    let last = counters.last_acquired_ns.load(Ordering::Relaxed);
    o.expect(last > healed_ns, || "no acquisition after the last member resumed".into());
    o.figure = format!(
        "{} member pauses of 1-5 s ({} of the leader, {:.1} s stopped in total), {} acquisitions; {}; errors: {}",
        o.faults,
        fp.leaders,
        fp.stopped.as_secs_f64(),
        o.acquisitions,
        r.summary(),
        counters.errors_summary()
    );
    o
}

/// Wait until no lock key (a key with a lease) is left under `ns` and etcd has no lease.
async fn await_clean(rawc: &mut etcd_client::Client, ns: &str, timeout: Duration) -> (usize, usize) {
    let start = Instant::now();
    loop {
        let keys = keys_under(rawc, ns).await.map(|k| k.iter().filter(|(_, _, lease)| *lease != 0).count()).unwrap_or(usize::MAX);
        let leases = match rawc.leases().await {
            Ok(l) => l.leases().len(),
            Err(_) => usize::MAX,
        };
        if (keys == 0 && leases == 0) || start.elapsed() > timeout {
            return (keys, leases);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// 5. Member kill -9 and restart (the leader included), repeatedly.
pub async fn member_kill_restart(p: &Profile) -> Outcome {
    let mut o = Outcome::new(5, "member-kill-restart");
    let mut etcd = Etcd::cluster(3);
    let eps = etcd.endpoints();
    let ns = unique_ns("mkill");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Arc::new(Checker::new());
    let counters = Arc::new(Counters::default());
    let (stop, h) = start_workload(cluster_workload(eps.clone(), &ns), checker.clone(), counters.clone());
    let probe = Client::connect(opts(&eps, &ns, TTL, Duration::from_secs(1))).await.expect("probe connect");
    let gap = if p.fault_secs > 20 { (5, 10) } else { (1, 3) };
    let mut fp = MemberKill::new(&mut etcd, Rng::new(seed() ^ 5), &probe, gap);
    let rounds = run_rounds(&mut fp, Duration::from_secs(p.fault_secs), 3).await;
    o.faults = rounds.faults;
    o.failures.append(&mut fp.failures);
    o.failures.extend(rounds.failures);
    let (leaders, max_resume, probes) = (fp.leaders, fp.max_resume, fp.probes);
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.cancel();
    let _ = h.await;
    probe.close().await;
    let (keys, leases) = await_clean(&mut rawc, &ns, Duration::from_secs(15)).await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.acquisitions = counters.acquisitions.load(Ordering::Relaxed) + probes;
    o.expect(keys == 0 && leases == 0, || format!("{keys} lock keys and {leases} leases left"));
    o.figure = format!(
        "{} member kill -9 + restart ({leaders} of the leader), operations resumed within {:.2} s at most (bound 5 s), {} acquisitions, {keys} lock keys and {leases} leases left; {}; errors: {}",
        o.faults,
        max_resume.as_secs_f64(),
        o.acquisitions,
        r.summary(),
        counters.errors_summary()
    );
    o
}

/// One round of [`LeaderKill`].
struct LeaderRound {
    holder: HolderRound,
    leader: usize,
    px: usize,
    a: Client,
    ga: Arc<etcdlock::Guard>,
    a_acq: u64,
    last_valid: Arc<AtomicU64>,
    poller: tokio::task::JoinHandle<()>,
    a_lost: tokio::task::JoinHandle<Option<(etcdlock::Loss, u64)>>,
    own_waiter: tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>,
}

/// kill -9 of a holder process and, right after, of the etcd leader (which
/// resets every lease's TTL on the new leader), while a second holder A is cut
/// off by its proxy at that moment. The waiter behind the dead holder acquires
/// within 2×TTL + 2 s with a higher token; A must not extend its validity from
/// the new leader's reset: its loss fires within TTL of its last acknowledged
/// keep-alive, and A's waiter acquires only after that. Heal: the proxy passes
/// again and the old leader restarts.
struct LeaderKill<'a> {
    etcd: &'a mut Etcd,
    proxies: &'a [Proxy],
    eps: &'a [String],
    ns: &'a str,
    wc: &'a Client,
    rawc: &'a mut etcd_client::Client,
    checker: &'a Checker,
    margin: Duration,
    round: Result<LeaderRound, String>,
    acquisitions: u64,
    done: u32,
    max_wait: u64,
    max_since_ack: i64,
    min_own_gap: i64,
}

impl LeaderKill<'_> {
    async fn start_round(&mut self, child: &mut ChildProc) -> Result<(HolderRound, usize, usize, Client, Arc<etcdlock::Guard>, u64), String> {
        let (waiter, token, acquired_ns, key) = queue_behind(child, self.wc, self.rawc, self.ns, "mutex").await?;
        self.acquisitions += 1;
        let holder = HolderRound { waiter, token, acquired_ns, key, at_ns: 0 };
        let leader = blocking(|| self.etcd.leader()).ok_or("no leader")?;
        // The cut-off holder A talks to a follower through a proxy.
        let px = (leader + 1) % 3;
        let mut ao = opts(&[self.proxies[px].endpoint()], self.ns, TTL, Duration::from_secs(1));
        ao.margin = Some(self.margin);
        let a = Client::connect(ao).await.map_err(|e| format!("A connect: {e}"))?;
        let ga = Arc::new(a.lock("own").await.map_err(|e| format!("A lock: {e}"))?);
        let a_acq = clock_monotonic_ns();
        self.acquisitions += 1;
        Ok((holder, leader, px, a, ga, a_acq))
    }
}

impl Failpoint for LeaderKill<'_> {
    fn name(&self) -> &'static str {
        "holder and leader kill"
    }
    async fn inject(&mut self, k: u32) -> Injected {
        let mut child = ChildProc::spawn(holder_spec(self.eps, self.ns, 1), &[]);
        let (mut holder, leader, px, a, ga, a_acq) = match self.start_round(&mut child).await {
            Ok(x) => x,
            Err(e) => {
                child.kill9().await;
                self.round = Err(e);
                return Injected::new(0, Duration::ZERO);
            }
        };
        let last_valid = Arc::new(AtomicU64::new(0));
        let poller = {
            let (ga, last_valid) = (ga.clone(), last_valid.clone());
            tokio::spawn(async move {
                while ga.is_held() {
                    last_valid.store(instant_to_mono_ns(ga.valid_until()), Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        };
        let own_waiter = spawn_waiter(self.wc.clone(), "own", "mutex");
        if await_key_count(self.rawc, &format!("{}own/", self.ns), 2, Duration::from_secs(10)).await.is_none() {
            child.kill9().await;
            self.round = Err("waiter on own never queued".into());
            return Injected::new(0, Duration::ZERO);
        }
        holder.at_ns = clock_monotonic_ns();
        child.kill9().await;
        self.proxies[px].blackhole();
        let a_lost = {
            let ga = ga.clone();
            tokio::spawn(async move { ga.wait_lost().await.map(|l| (l, clock_monotonic_ns())) })
        };
        blocking(|| self.etcd.kill(leader));
        self.checker.record(Hold {
            lock: "L".into(),
            token: holder.token,
            acquired_ns: holder.acquired_ns,
            ended_ns: holder.at_ns,
            client: format!("child-round{k}"),
            loss: None,
        });
        self.round = Ok(LeaderRound { holder, leader, px, a, ga, a_acq, last_valid, poller, a_lost, own_waiter });
        Injected::new(3, Duration::ZERO)
    }
    async fn heal(&mut self, k: u32) -> Result<(), String> {
        let r = std::mem::replace(&mut self.round, Err("no round".into()))?;
        let mut errs = Vec::new();
        let kill_ns = r.holder.at_ns;
        // The waiter behind the dead holder: within 2×TTL + 2 s (the new leader
        // restarts the dead holder's lease TTL once).
        match tokio::time::timeout(Duration::from_secs(2 * TTL as u64 + 15), r.holder.waiter).await {
            Ok(Ok(Ok((g, at)))) => {
                self.acquisitions += 1;
                let waited = at.saturating_sub(kill_ns);
                self.max_wait = self.max_wait.max(waited);
                if waited > 2 * TTL_NS + 2_000_000_000 {
                    errs.push(format!("waiter acquired {:.2} s after the holder died", secs(waited)));
                }
                if g.fencing_token() <= r.holder.token {
                    errs.push("token not above the dead holder's".into());
                }
                if let Err(e) = release(self.checker, g, at, "parent-waiter").await {
                    errs.push(e);
                }
            }
            other => errs.push(format!("waiter did not acquire: {other:?}")),
        }
        match tokio::time::timeout(Duration::from_secs(TTL as u64 + 5), r.a_lost).await {
            Ok(Ok(Some((loss, rep_ns)))) => {
                let _ = r.poller.await;
                let last_ack_send = r.last_valid.load(Ordering::Relaxed) - (TTL_NS - self.margin.as_nanos() as u64);
                let since_ack = ms_between(last_ack_send, rep_ns);
                self.max_since_ack = self.max_since_ack.max(since_ack);
                if since_ack > TTL * 1000 {
                    errs.push(format!("cut-off holder reported its loss {since_ack} ms after its last ack"));
                }
                let loss_at = instant_to_mono_ns(loss.at);
                self.checker.record(Hold {
                    lock: "own".into(),
                    token: r.ga.fencing_token(),
                    acquired_ns: r.a_acq,
                    ended_ns: loss_at,
                    client: format!("A{k}"),
                    loss: Some(LossInfo { reason: loss.reason.name().into(), at_ns: loss_at, reported_ns: rep_ns }),
                });
                match tokio::time::timeout(Duration::from_secs(2 * TTL as u64 + 15), r.own_waiter).await {
                    Ok(Ok(Ok((gb, b_at)))) => {
                        self.acquisitions += 1;
                        self.min_own_gap = self.min_own_gap.min(ms_between(loss_at, b_at));
                        if let Err(e) = release(self.checker, gb, b_at, "parent-own-waiter").await {
                            errs.push(e);
                        }
                    }
                    other => errs.push(format!("waiter on own did not acquire: {other:?}")),
                }
            }
            other => errs.push(format!("the cut-off holder never reported its loss: {other:?}")),
        }
        self.proxies[r.px].pass();
        r.a.close().await;
        let leader = r.leader;
        let healthy = blocking(|| {
            self.etcd.restart(leader);
            self.etcd.wait_member_healthy(leader, Duration::from_secs(20))
        });
        if let Err(e) = healthy {
            errs.push(format!("restart of m{leader}: {e}"));
        }
        self.done += 1;
        errs_to_result(errs)
    }
}

/// 6. The leader is killed right after a holder dies (etcd resets lease TTLs on a leader change).
pub async fn leader_change_after_holder_death(p: &Profile) -> Outcome {
    let mut o = Outcome::new(6, "leader-change-after-holder-death");
    let mut etcd = Etcd::cluster(3);
    let eps = etcd.endpoints();
    let ns = unique_ns("lead");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Checker::new();
    let wc = Client::connect(opts(&eps, &ns, 5, Duration::from_secs(1))).await.expect("waiter connect");
    let rounds = p.rounds.clamp(2, 3);
    // A second holder, cut off by a proxy at the moment of the leader kill: the new
    // leader resets every lease's TTL on the server, but the client must not extend
    // its own validity from that; its loss must fire TTL after its last acknowledged
    // keep-alive as always, and the other client may only acquire after it.
    let mut proxies = Vec::new();
    for e in &eps {
        proxies.push(Proxy::start(e).await.expect("proxy"));
    }
    let mut fp = LeaderKill {
        etcd: &mut etcd,
        proxies: &proxies,
        eps: &eps,
        ns: &ns,
        wc: &wc,
        rawc: &mut rawc,
        checker: &checker,
        margin: Duration::from_millis(400),
        round: Err("no round".into()),
        acquisitions: 0,
        done: 0,
        max_wait: 0,
        max_since_ack: 0,
        min_own_gap: i64::MAX,
    };
    let rr = run_rounds(&mut fp, Duration::ZERO, rounds).await;
    o.faults += rr.faults;
    o.acquisitions += fp.acquisitions;
    for f in rr.failures {
        o.fail(f);
    }
    let LeaderKill { done, max_wait, max_since_ack, min_own_gap, .. } = fp;
    wc.close().await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.expect(done == rounds, || format!("{done}/{rounds} rounds completed"));
    o.figure = format!(
        "{done} rounds of holder kill -9 + leader kill -9, max waiter acquire {:.2} s after the holder died (bound 2xTTL+2 = {} s); a holder cut off at the leader kill reported its loss <= {max_since_ack} ms after its last acknowledged keep-alive (bound TTL = {} ms, no extension from the new leader's lease reset), its waiter acquired >= {} ms after that loss; {}",
        secs(max_wait),
        2 * TTL + 2,
        TTL * 1000,
        if min_own_gap == i64::MAX { 0 } else { min_own_gap },
        r.summary()
    );
    o
}

/// One round of [`ClientBlackhole`]: holder A behind the proxy, waiter B direct.
struct BlackholeRound {
    a: Client,
    b: Client,
    ga: Arc<etcdlock::Guard>,
    a_acq: u64,
    last_valid: Arc<AtomicU64>,
    poller: tokio::task::JoinHandle<()>,
    lost: tokio::task::JoinHandle<Option<(etcdlock::Loss, u64)>>,
    waiter: tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>,
}

/// Cut holder A off from etcd (its proxy drops everything) for 2×TTL while B
/// waits: A must report its loss within TTL of its last acknowledged keep-alive
/// and before B acquires; after healing, A's stale writes are refused (locally
/// and by etcd's compare) and A re-acquires with a higher token. New clients
/// each round.
struct ClientBlackhole<'a> {
    eps: &'a [String],
    proxy: &'a Proxy,
    ns: &'a str,
    rawc: &'a mut etcd_client::Client,
    checker: &'a Checker,
    margin: Duration,
    round: Result<BlackholeRound, String>,
    acquisitions: u64,
    done: u32,
    max_since_ack: i64,
    min_gap: i64,
    reacquired: u32,
    stale: u32,
}

impl ClientBlackhole<'_> {
    async fn start_round(&mut self) -> Result<BlackholeRound, String> {
        let mut ao = opts(&[self.proxy.endpoint()], self.ns, TTL, Duration::from_secs(1));
        ao.margin = Some(self.margin);
        let a = Client::connect(ao).await.map_err(|e| format!("A connect: {e}"))?;
        let b = Client::connect(opts(self.eps, self.ns, 10, Duration::from_secs(2))).await.map_err(|e| format!("B connect: {e}"))?;
        let ga = Arc::new(a.lock("L").await.map_err(|e| format!("A lock: {e}"))?);
        let a_acq = clock_monotonic_ns();
        self.acquisitions += 1;
        ga.put(resource_key("L"), ga.fencing_token().to_string()).await.map_err(|e| format!("A put: {e}"))?;
        // Track the validity deadline: (last acknowledged keep-alive send time) + TTL - margin.
        let last_valid = Arc::new(AtomicU64::new(0));
        let poller = {
            let (ga, last_valid) = (ga.clone(), last_valid.clone());
            tokio::spawn(async move {
                while ga.is_held() {
                    last_valid.store(instant_to_mono_ns(ga.valid_until()), Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        };
        let waiter = spawn_waiter(b.clone(), "L", "mutex");
        if await_key_count(self.rawc, &format!("{}L/", self.ns), 2, Duration::from_secs(10)).await.is_none() {
            return Err("B never queued".into());
        }
        let lost = {
            let ga = ga.clone();
            tokio::spawn(async move { ga.wait_lost().await.map(|l| (l, clock_monotonic_ns())) })
        };
        Ok(BlackholeRound { a, b, ga, a_acq, last_valid, poller, lost, waiter })
    }
}

impl Failpoint for ClientBlackhole<'_> {
    fn name(&self) -> &'static str {
        "client blackhole"
    }
    async fn inject(&mut self, _k: u32) -> Injected {
        self.round = self.start_round().await;
        if self.round.is_err() {
            return Injected::new(0, Duration::ZERO);
        }
        self.proxy.blackhole();
        Injected::new(1, Duration::from_nanos(2 * TTL_NS))
    }
    async fn heal(&mut self, k: u32) -> Result<(), String> {
        let r = std::mem::replace(&mut self.round, Err("no round".into()));
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                self.proxy.pass();
                return Err(e);
            }
        };
        let mut errs = Vec::new();
        // While still cut off: A reported its loss, B took the lock after it.
        let lost = tokio::time::timeout(Duration::from_secs(1), r.lost).await;
        let took = tokio::time::timeout(Duration::from_secs(TTL as u64 + 10), r.waiter).await;
        self.proxy.pass();
        let (loss, rep_ns) = match lost {
            Ok(Ok(Some(x))) => x,
            other => return Err(format!("A never reported the loss: {other:?}")),
        };
        let _ = r.poller.await;
        let last_ack_send = r.last_valid.load(Ordering::Relaxed) - (TTL_NS - self.margin.as_nanos() as u64);
        let since_ack = ms_between(last_ack_send, rep_ns);
        self.max_since_ack = self.max_since_ack.max(since_ack);
        if since_ack > TTL * 1000 {
            errs.push(format!("loss reported {since_ack} ms after the last acknowledged keep-alive"));
        }
        let (gb, b_at) = match took {
            Ok(Ok(Ok(x))) => x,
            other => return Err(format!("B did not acquire: {other:?}")),
        };
        self.acquisitions += 1;
        let loss_at = instant_to_mono_ns(loss.at);
        self.min_gap = self.min_gap.min(ms_between(loss_at, b_at));
        let ga = r.ga;
        self.checker.record(Hold {
            lock: "L".into(),
            token: ga.fencing_token(),
            acquired_ns: r.a_acq,
            ended_ns: loss_at,
            client: format!("A{k}"),
            loss: Some(LossInfo { reason: loss.reason.name().into(), at_ns: loss_at, reported_ns: rep_ns }),
        });
        // After healing, A's stale writes are refused: locally, and by etcd's compare.
        if ga.put(resource_key("L"), ga.fencing_token().to_string()).await.map_err(|e| e.code()) != Err(ErrorCode::LockLost) {
            self.stale += 1;
        }
        let txn = etcd_client::Txn::new()
            .when([etcd_client::Compare::create_revision(ga.key(), etcd_client::CompareOp::Equal, ga.fencing_token())])
            .and_then([etcd_client::TxnOp::put(format!("{}{}", self.ns, resource_key("L")), ga.fencing_token().to_string(), None)]);
        let mut araw = r.a.etcd();
        let heal = Instant::now();
        loop {
            match araw.txn(txn.clone()).await {
                Ok(resp) => {
                    if resp.succeeded() {
                        self.stale += 1;
                    }
                    break;
                }
                Err(_) if heal.elapsed() < Duration::from_secs(10) => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(e) => {
                    errs.push(format!("etcd unreachable through the healed proxy: {e}"));
                    break;
                }
            }
        }
        // A re-acquires once B releases, with a higher token.
        let a2 = tokio::spawn({
            let a = r.a.clone();
            async move {
                let g = a.lock_with("L", LockOptions::timeout(Duration::from_secs(20))).await?;
                let at = clock_monotonic_ns();
                g.put(resource_key("L"), g.fencing_token().to_string()).await?;
                Ok::<_, etcdlock::Error>((g, at))
            }
        });
        let _ = await_key_count(self.rawc, &format!("{}L/", self.ns), 2, Duration::from_secs(10)).await;
        let b_token = gb.fencing_token();
        if let Err(e) = release(self.checker, gb, b_at, &format!("B{k}")).await {
            errs.push(e);
        }
        match a2.await {
            Ok(Ok((g2, at2))) => {
                self.acquisitions += 1;
                if g2.fencing_token() > b_token && g2.fencing_token() > ga.fencing_token() {
                    self.reacquired += 1;
                }
                if let Err(e) = release(self.checker, g2, at2, &format!("A{k}-again")).await {
                    errs.push(e);
                }
            }
            other => errs.push(format!("A did not re-acquire after healing: {other:?}")),
        }
        r.a.close().await;
        r.b.close().await;
        self.done += 1;
        errs_to_result(errs)
    }
}

/// 7. A holder cut off by the proxy (blackhole) for 2×TTL.
pub async fn client_blackholed(p: &Profile) -> Outcome {
    let mut o = Outcome::new(7, "client-blackholed");
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("bh");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Checker::new();
    let proxy = Proxy::start(&eps[0]).await.expect("proxy");
    let rounds = p.rounds.clamp(2, 3);
    let mut fp = ClientBlackhole {
        eps: &eps,
        proxy: &proxy,
        ns: &ns,
        rawc: &mut rawc,
        checker: &checker,
        margin: Duration::from_millis(400),
        round: Err("no round".into()),
        acquisitions: 0,
        done: 0,
        max_since_ack: 0,
        min_gap: i64::MAX,
        reacquired: 0,
        stale: 0,
    };
    let rr = run_rounds(&mut fp, Duration::ZERO, rounds).await;
    o.faults += rr.faults;
    o.acquisitions += fp.acquisitions;
    for f in rr.failures {
        o.fail(f);
    }
    let ClientBlackhole { done, max_since_ack, min_gap, reacquired, stale, .. } = fp;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.expect(done == rounds && reacquired == rounds, || format!("{reacquired}/{rounds} re-acquired with a higher token"));
    o.expect(stale == 0, || format!("{stale} stale writes accepted after healing"));
    o.figure = format!(
        "{done} rounds of 2xTTL blackhole: loss reported <= {max_since_ack} ms after the last acknowledged keep-alive (bound TTL = {} ms), hold ended >= {} ms before the other client acquired, {reacquired}/{rounds} re-acquired with a higher token after healing, {stale} stale writes accepted; {}",
        TTL * 1000,
        if min_gap == i64::MAX { 0 } else { min_gap },
        r.summary()
    );
    o
}

/// 8. Proxy bursts of 75±50 ms delay and 50% connection drop, 1 s each.
pub async fn proxy_delay_and_drop(p: &Profile) -> Outcome {
    let mut o = Outcome::new(8, "proxy-delay-drop");
    let etcd = Etcd::cluster(3);
    let eps = etcd.endpoints();
    let ns = unique_ns("delay");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let mut proxies = Vec::new();
    for e in &eps {
        proxies.push(Proxy::start(e).await.expect("proxy"));
    }
    let checker = Arc::new(Checker::new());
    let counters = Arc::new(Counters::default());
    let mut w = cluster_workload(proxies.iter().map(|p| p.endpoint()).collect(), &ns);
    w.request_timeout = Duration::from_secs(2);
    w.lock_timeout = Duration::from_secs(5);
    let (stop, h) = start_workload(w, checker.clone(), counters.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut fp = ProxyBurst::new(&proxies, &counters);
    let rounds = run_rounds(&mut fp, Duration::from_secs(p.fault_secs), 0).await;
    o.failures.extend(rounds.failures);
    let (bursts, resets, in_bursts) = (rounds.rounds, fp.resets, fp.in_bursts);
    let healed_ns = clock_monotonic_ns();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.cancel();
    let _ = h.await;
    let refused: u64 = proxies.iter().map(|p| p.stats().refused).sum();
    let delayed: u64 = proxies.iter().map(|p| p.stats().delayed_chunks).sum();
    o.faults = rounds.faults + refused; // bursts x proxies + resets, + refused connections
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.acquisitions = counters.acquisitions.load(Ordering::Relaxed);
    o.expect(counters.last_acquired_ns.load(Ordering::Relaxed) > healed_ns, || "no acquisition after the last burst".into());
    o.expect(delayed > 0 && refused > 0, || format!("the proxies delayed {delayed} chunks and refused {refused} connections"));
    o.figure = format!(
        "{bursts} bursts of 1 s on 3 proxies (delay 75±50 ms: {delayed} chunks delayed; 50% of new connections refused: {refused}; {resets} live connections reset), {} acquisitions ({in_bursts} during bursts); {}; errors: {}",
        o.acquisitions,
        r.summary(),
        counters.errors_summary()
    );
    o
}

/// 9. 20 waiters while etcd compacts every 200 ms.
pub async fn waiters_under_compaction(_p: &Profile) -> Outcome {
    let mut o = Outcome::new(9, "waiters-under-compaction");
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("compact");
    let mut rawc = raw(&eps).await;
    let checker = Arc::new(Checker::new());
    let prefix = format!("{ns}Q/");
    let n = 20usize;
    let holder = Client::connect(opts(&eps, &ns, 5, Duration::from_secs(2))).await.expect("holder connect");
    let gh = holder.lock("Q").await.expect("holder lock");
    let h_acq = clock_monotonic_ns();
    let stop = CancellationToken::new();
    let mut compaction = Compaction::new(raw(&eps).await, Duration::from_millis(200));
    // The waiters queue, wait while compactions pass, and are granted one by
    // one; compactions run beside all of it until the last grant.
    let steps = async {
        let order = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        let mut queue_revs = Vec::new();
        for i in 0..n {
            let c = Client::connect(opts(&eps, &ns, 5, Duration::from_secs(2))).await.expect("waiter connect");
            let (order, checker) = (order.clone(), checker.clone());
            tasks.push(tokio::spawn(async move {
                let r = c.lock_with("Q", LockOptions::timeout(Duration::from_secs(60))).await;
                let out = match r {
                    Ok(g) => {
                        let at = clock_monotonic_ns();
                        let seq = order.fetch_add(1, Ordering::SeqCst);
                        let _ = g.put(resource_key("Q"), g.fencing_token().to_string()).await;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let tok = g.fencing_token();
                        let _ = release(&checker, g, at, &format!("w{i}")).await;
                        Ok((seq, tok))
                    }
                    Err(e) => Err(e),
                };
                c.close().await;
                out
            }));
            if await_key_count(&mut rawc, &prefix, i + 2, Duration::from_secs(10)).await.is_none() {
                o.fail(format!("waiter {i} never queued"));
            }
            let keys = keys_under(&mut rawc, &prefix).await.unwrap_or_default();
            queue_revs.push(keys.last().map(|k| k.1).unwrap_or(0));
        }
        // Let a few compactions pass while all 20 wait.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let released = Instant::now();
        if let Err(e) = release(&checker, gh, h_acq, "holder").await {
            o.fail(e);
        }
        let mut grants: Vec<(u64, usize, i64)> = Vec::new();
        let mut stuck = 0;
        for (i, t) in tasks.into_iter().enumerate() {
            match tokio::time::timeout(Duration::from_secs(60), t).await {
                Ok(Ok(Ok((seq, tok)))) => grants.push((seq, i, tok)),
                other => {
                    stuck += 1;
                    o.fail(format!("waiter {i}: {other:?}"));
                }
            }
        }
        let took = released.elapsed();
        stop.cancel();
        (grants, stuck, took, queue_revs)
    };
    let (compactions, (mut grants, stuck, took, queue_revs)) = tokio::join!(run_until(&mut compaction, &stop), steps);
    for f in compactions.failures {
        o.fail(f);
    }
    holder.close().await;
    grants.sort();
    let in_order = grants.iter().enumerate().all(|(k, (_, i, tok))| *i == k && queue_revs.get(*i) == Some(tok));
    o.acquisitions = grants.len() as u64 + 1;
    o.faults = compactions.faults;
    let r = finish(&mut o, &checker, &mut rawc, &ns, None).await;
    o.expect(stuck == 0 && grants.len() == n, || format!("{stuck} stuck waiters"));
    o.expect(in_order, || format!("grant order {grants:?} differs from create_revision order {queue_revs:?}"));
    let comps = o.faults;
    o.expect(comps >= 5, || format!("only {comps} compactions"));
    o.figure = format!(
        "{n} waiters, {} compactions (every 200 ms), {}/{n} granted in {:.1} s, {stuck} stuck, grant order = create_revision order: {}; {}",
        o.faults,
        grants.len(),
        took.as_secs_f64(),
        if in_order { "yes" } else { "NO" },
        r.summary()
    );
    o
}

/// The proxy drops etcd's response to one acquire Txn (etcd applied it). Even
/// rounds: a waiter's acquisition on a held lock — the call fails, and its key
/// must be gone within TTL + 1 s although its session lives on. Odd rounds: an
/// uncontended acquisition — the retry must find our key and hold the lock
/// with the right token and no extra key. `inject` arms the drop, `heal` makes
/// the acquisition and checks the client repaired what the lost response left.
struct ResponseDrop<'a> {
    w: &'a Client,
    proxy: &'a Proxy,
    ns: &'a str,
    rawc: &'a mut etcd_client::Client,
    checker: &'a Checker,
    armed: Result<(i64, String), String>,
    acquisitions: u64,
    max_gone: i64,
    free_ok: u32,
}

impl Failpoint for ResponseDrop<'_> {
    fn name(&self) -> &'static str {
        "acquire response drop"
    }
    async fn inject(&mut self, k: u32) -> Injected {
        let Some(lease) = self.w.lease_id().await else {
            self.armed = Err("W has no session".into());
            return Injected::new(0, Duration::ZERO);
        };
        let key = if k % 2 == 0 { format!("{}L/{lease:x}", self.ns) } else { format!("{}F{}/{lease:x}", self.ns, k / 2) };
        self.proxy.drop_response_to(key.as_bytes());
        self.armed = Ok((lease, key));
        Injected::new(1, Duration::ZERO)
    }
    async fn heal(&mut self, k: u32) -> Result<(), String> {
        let (lease, key) = std::mem::replace(&mut self.armed, Err("not armed".into()))?;
        let mut errs = Vec::new();
        if k % 2 == 0 {
            // a. A waiter's acquisition: the request is applied, the response lost; the call then fails.
            let r = self.w.lock_with("L", LockOptions::timeout(Duration::from_millis(1500))).await;
            let failed_ns = clock_monotonic_ns();
            if r.is_ok() {
                errs.push("W acquired a held lock".into());
            }
            if self.proxy.drop_pending() {
                errs.push("the response drop never fired".into());
            }
            let start = Instant::now();
            let mut gone = None;
            while start.elapsed() < Duration::from_secs(TTL as u64 + 5) {
                let ks = keys_under(self.rawc, &format!("{}L/", self.ns)).await.unwrap_or_default();
                if !ks.iter().any(|(k, _, _)| k.starts_with(&key)) {
                    gone = Some(ms_between(failed_ns, clock_monotonic_ns()));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            match gone {
                Some(ms) => {
                    self.max_gone = self.max_gone.max(ms);
                    if ms > TTL * 1000 + 1000 {
                        errs.push(format!("waiter key gone only after {ms} ms"));
                    }
                }
                None => errs.push(format!("waiter key {key} still there {} s after the failed acquire", TTL + 5)),
            }
            // The session is alive, so without the cleanup the key would have stayed forever.
            if self.w.lease_id().await != Some(lease) {
                errs.push("W's session changed".into());
            }
        } else {
            // b. An uncontended acquisition whose response is lost: the retry finds our key and we hold the lock.
            let name = format!("F{}", k / 2);
            match self.w.lock_with(&name, LockOptions::timeout(Duration::from_secs(8))).await {
                Ok(g) => {
                    let at = clock_monotonic_ns();
                    self.acquisitions += 1;
                    let ks = keys_under(self.rawc, &format!("{}{name}/", self.ns)).await.unwrap_or_default();
                    if ks.len() == 1 && ks[0].0 == g.key() && ks[0].1 == g.fencing_token() && !self.proxy.drop_pending() {
                        self.free_ok += 1;
                    } else {
                        errs.push(format!("keys {ks:?} for guard {} token {}", g.key(), g.fencing_token()));
                    }
                    if let Err(e) = release(self.checker, g, at, "W").await {
                        errs.push(e);
                    }
                    if await_key_count(self.rawc, &format!("{}{name}/", self.ns), 0, Duration::from_secs(5)).await.is_none() {
                        errs.push("key left after unlock".into());
                    }
                }
                Err(e) => errs.push(format!("uncontended acquire after a lost response: {e}")),
            }
        }
        errs_to_result(errs)
    }
}

/// 10. The response to an acquisition is dropped (etcd applied the request).
pub async fn acquire_response_dropped(p: &Profile) -> Outcome {
    let mut o = Outcome::new(10, "acquire-response-dropped");
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("drop");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Checker::new();
    let proxy = Proxy::start(&eps[0]).await.expect("proxy");
    let holder = Client::connect(opts(&eps, &ns, 10, Duration::from_secs(2))).await.expect("holder");
    let gh = holder.lock("L").await.expect("holder lock");
    let h_acq = clock_monotonic_ns();
    o.acquisitions += 1;
    let w = Client::connect(opts(&[proxy.endpoint()], &ns, TTL, Duration::from_secs(1))).await.expect("W connect");
    let rounds = p.rounds;
    let mut fp = ResponseDrop {
        w: &w,
        proxy: &proxy,
        ns: &ns,
        rawc: &mut rawc,
        checker: &checker,
        armed: Err("not armed".into()),
        acquisitions: 0,
        max_gone: 0,
        free_ok: 0,
    };
    let rr = run_rounds(&mut fp, Duration::ZERO, 2 * rounds).await;
    o.faults += rr.faults;
    o.acquisitions += fp.acquisitions;
    for f in rr.failures {
        o.fail(f);
    }
    let ResponseDrop { max_gone, free_ok, .. } = fp;
    if let Err(e) = release(&checker, gh, h_acq, "holder").await {
        o.fail(e);
    }
    w.close().await;
    holder.close().await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.expect(free_ok == rounds, || format!("{free_ok}/{rounds} uncontended acquisitions recovered"));
    o.figure = format!(
        "{rounds} dropped responses to a waiter's acquire: its key gone <= {max_gone} ms after the failed call (bound TTL+1 s = {} ms); {free_ok}/{rounds} dropped responses to an uncontended acquire recovered by the retry with the right token and no extra key; {}",
        TTL * 1000 + 1000,
        r.summary()
    );
    o
}

/// The libfaketime preload library, if installed.
pub fn libfaketime() -> Option<String> {
    for p in [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
        "/usr/local/lib/faketime/libfaketime.so.1",
    ] {
        if std::path::Path::new(p).is_file() {
            return Some(p.to_string());
        }
    }
    None
}

/// 11. The wall clock of a holder process jumps by ±262 s (libfaketime), repeatedly.
pub async fn wall_clock_jumps(p: &Profile) -> Outcome {
    let mut o = Outcome::new(11, "wall-clock-jumps");
    let Some(lib) = libfaketime() else {
        o.fail("libfaketime is not installed (apt-get install faketime)".to_string());
        o.figure = "not run".into();
        return o;
    };
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("clock");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Arc::new(Checker::new());
    let counters = Arc::new(Counters::default());
    let file = etcd.dir().join("faketime.rc");
    std::fs::write(&file, "+0\n").expect("write faketime file");
    let secs_run = p.fault_secs.max(8);
    let mut child = ChildProc::spawn(
        json!({"mode": "workload", "endpoints": eps, "ns": ns, "ttl": TTL, "secs": secs_run, "clients": 2, "locks": 2, "hold_ms": 10}),
        &[
            ("LD_PRELOAD", lib.clone()),
            ("FAKETIME_TIMESTAMP_FILE", file.display().to_string()),
            ("FAKETIME_NO_CACHE", "1".into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
            ("DONT_FAKE_MONOTONIC", "1".into()),
        ],
    );
    let mut w = Workload::new(eps.clone(), &ns);
    w.clients = 2;
    w.locks = 2;
    w.hold = Duration::from_millis(10);
    w.client_prefix = "parent-c".into();
    let (stop, h) = start_workload(w, checker.clone(), counters.clone());
    let rounds = run_rounds(&mut ClockJump::new(file.clone()), Duration::from_secs(secs_run), 0).await;
    o.failures.extend(rounds.failures);
    let jumps = rounds.faults;
    stop.cancel();
    let _ = h.await;
    o.faults = jumps;
    let lines = child.rest(Duration::from_secs(30)).await;
    child.wait().await;
    let (mut child_acq, mut child_losses, mut long) = (0u64, 0u64, None);
    let (mut off_min, mut off_max) = (i64::MAX, i64::MIN);
    let mut done = false;
    for l in &lines {
        let parts: Vec<String> = l.split_whitespace().map(String::from).collect();
        match parts.first().map(|s| s.as_str()) {
            Some("HOLD") => match parse_hold(&parts) {
                Some(h) => {
                    if h.loss.is_some() {
                        child_losses += 1;
                    }
                    checker.record(h)
                }
                None => o.fail(format!("bad HOLD line {l}")),
            },
            Some("WALL") if parts.len() == 3 => {
                let wall: i64 = parts[1].parse().unwrap_or(0);
                let mono: i64 = parts[2].parse::<i64>().unwrap_or(0) / 1_000_000;
                off_min = off_min.min(wall - mono);
                off_max = off_max.max(wall - mono);
            }
            Some("LONG") if parts.len() == 3 => long = Some((parts[1].clone(), parts[2].clone())),
            Some("DONE") if parts.len() >= 2 => {
                done = true;
                child_acq = parts[1].parse().unwrap_or(0);
            }
            _ => {}
        }
    }
    let span_s = if off_max >= off_min { (off_max - off_min) as f64 / 1000.0 } else { 0.0 };
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    let parent_losses = counters.losses.load(Ordering::Relaxed);
    o.acquisitions = counters.acquisitions.load(Ordering::Relaxed) + child_acq + 1;
    let long_ok = matches!(&long, Some((_, l)) if l == "none");
    let false_losses = child_losses + parent_losses + u64::from(!long_ok);
    o.expect(done, || "the child did not finish".into());
    o.expect(span_s >= 500.0, || format!("the child's wall clock moved by only {span_s:.0} s: libfaketime not effective"));
    o.expect(false_losses == 0, || format!("{false_losses} false losses (child {child_losses}, parent {parent_losses}, long hold {long:?})"));
    o.expect(child_acq > 0, || "the child acquired nothing".into());
    o.figure = format!(
        "{jumps} wall-clock jumps (+262 s / -262 s / 0) in a holder process under libfaketime (observed wall-clock span {span_s:.0} s), {} acquisitions across 2 processes ({child_acq} by the jumping one), one hold kept across all jumps ({} checks), {false_losses} false losses; {}",
        o.acquisitions,
        long.as_ref().map(|l| l.0.as_str()).unwrap_or("?"),
        r.summary()
    );
    o
}


/// Scenario 14: a holder process SIGSTOPped for 2×TTL (then one killed with SIGKILL) while it holds through each
/// recipe in turn: a 1-permit semaphore, a read lock (a writer waits behind
/// it), an election and a multi-lock. As in scenario 2: the waiter takes over
/// within TTL + 1 s with a higher token, and the resumed holder reports its
/// loss and has its stale writes refused.
pub async fn recipes_holder_sigstop(_p: &Profile) -> Outcome {
    let mut o = Outcome::new(14, "recipes-holder-sigstop");
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("rstop");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Checker::new();
    let wc = Client::connect(opts(&eps, &ns, 10, Duration::from_secs(2))).await.expect("waiter connect");
    let (mut stale, mut reported, mut done, mut killed) = (0u32, 0u32, 0u32, 0u32);
    let (mut waits, mut kill_waits) = (Vec::new(), Vec::new());
    const KINDS: [&str; 4] = ["permit", "read", "campaign", "many"];
    for kind in KINDS {
        let mut spec = holder_spec(&eps, &ns, 1);
        spec["kind"] = json!(kind);
        let child = match spawn_holder(HolderLang::Rust, spec) {
            Ok(c) => c,
            Err(e) => {
                o.fail(format!("{kind}: {e}"));
                continue;
            }
        };
        let mut fp = HolderPause::new(HolderLang::Rust, kind, child, &wc, &mut rawc, &checker, &ns);
        let r = run_rounds(&mut fp, Duration::ZERO, 1).await;
        o.faults += r.faults;
        o.acquisitions += fp.acquisitions;
        for f in r.failures {
            o.fail(format!("{kind}: {f}"));
        }
        if let Err(e) = fp.child.expect("DONE", Duration::from_secs(20)).await {
            o.fail(format!("{kind}: {e}"));
        }
        fp.child.kill9().await;
        stale += fp.stale_ok + fp.raw_ok;
        reported += fp.reported;
        done += fp.done;
        waits.push(format!("{kind} {:.2} s", secs(fp.max_wait)));
        // The same hold, its process killed with SIGKILL: the permit (read
        // lock, leadership, locks) is freed by its lease within TTL + 1 s.
        let mut fk = HolderKill::new(HolderLang::Rust, kind, &eps, &wc, &mut rawc, &checker, &ns);
        let r = run_rounds(&mut fk, Duration::ZERO, 1).await;
        o.faults += r.faults;
        o.acquisitions += fk.acquisitions;
        for f in r.failures {
            o.fail(format!("{kind} kill -9: {f}"));
        }
        killed += fk.done;
        kill_waits.push(format!("{kind} {:.2} s", secs(fk.max_wait)));
    }
    wc.close().await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    let n = KINDS.len() as u32;
    o.expect(done == n, || format!("{done}/{n} rounds completed"));
    o.expect(reported == n, || format!("{reported}/{n} losses reported"));
    o.expect(stale == 0, || format!("{stale} stale writes accepted"));
    o.expect(killed == n, || format!("{killed}/{n} kill -9 rounds completed"));
    o.figure = format!(
        "{done} SIGSTOP rounds (semaphore, read lock behind which a writer waits, election, multi-lock), waiter took over after SIGSTOP in {} (TTL {TTL} s, bound {} s), {reported}/{n} losses reported, {stale} stale writes accepted; {killed} kill -9 rounds, waiter took over in {}; {}",
        waits.join(", "),
        TTL + 1,
        kill_waits.join(", "),
        r.summary()
    );
    o
}

/// One client of the recipe workload: a 2-permit semaphore `S`, the
/// read-write lock `R` (readers and writers), the election `E`, and pairs of
/// `M0..M2` through multi-locks, picked at random; every hold is recorded
/// (`S#p2`, `R#r`, `R#w` for the shared checks; `E`, `Mi` as exclusive locks
/// with a guarded resource write).
async fn recipe_client(idx: usize, eps: Vec<String>, ns: String, checker: Arc<Checker>, counters: Arc<Counters>, stop: CancellationToken) {
    let id = format!("recipes-c{idx}");
    let mut rng = Rng::new(seed() ^ ((idx as u64 + 1) * 104_729));
    let Some(client) = crate::connect_until(opts(&eps, &ns, TTL, Duration::from_secs(1)), &counters, &stop).await else {
        return;
    };
    while !stop.is_cancelled() {
        let lo = LockOptions::timeout(Duration::from_secs(4));
        let pick = rng.below(5);
        let r: etcdlock::Result<Vec<(String, etcdlock::Guard)>> = tokio::select! {
            r = async {
                match pick {
                    0 => client.acquire_permit("S", 2, lo).await.map(|g| vec![("S#p2".to_string(), g)]),
                    1 => client.read_lock("R", lo).await.map(|g| vec![("R#r".to_string(), g)]),
                    2 => client.lock_with("R", lo).await.map(|g| vec![("R#w".to_string(), g)]),
                    3 => client.campaign("E", id.as_str(), lo).await.map(|l| vec![("E".to_string(), l.into_guard())]),
                    _ => {
                        let a = rng.below(3);
                        let b = (a + 1 + rng.below(2)) % 3;
                        let (x, y) = (format!("M{a}"), format!("M{b}"));
                        client.lock_many(&[x.as_str(), y.as_str()], lo).await.map(|m| {
                            m.into_guards().into_iter().map(|g| (g.name().to_string(), g)).collect()
                        })
                    }
                }
            } => r,
            _ = stop.cancelled() => break,
        };
        let gs = match r {
            Ok(gs) => gs,
            Err(e) => {
                counters.err(e.code());
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let acquired = clock_monotonic_ns();
        counters.last_acquired_ns.fetch_max(acquired, Ordering::Relaxed);
        counters.acquisitions.fetch_add(1, Ordering::Relaxed);
        for (label, g) in &gs {
            if !label.contains('#') {
                if let Err(e) = g.put(resource_key(label), g.fencing_token().to_string()).await {
                    counters.err(e.code());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        let end_call = clock_monotonic_ns();
        for (label, g) in gs {
            crate::release_and_record(&checker, &counters, label, &g, acquired, end_call, &id).await;
        }
    }
    client.close().await;
}

/// Scenario 15: the recipes under member kill -9 and restart (the leader included) in
/// a 3-member cluster: 6 clients take permits of a 2-permit semaphore, read and
/// write locks, leadership and multi-locks; never more than 2 permits, never a
/// writer beside anyone, one leader at a time, exclusion on every multi-locked
/// name, no stale guarded write accepted, nothing left behind.
pub async fn recipes_member_kill(p: &Profile) -> Outcome {
    let mut o = Outcome::new(15, "recipes-member-kill");
    let mut etcd = Etcd::cluster(3);
    let eps = etcd.endpoints();
    let ns = unique_ns("rkill");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Arc::new(Checker::new());
    let counters = Arc::new(Counters::default());
    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    for i in 0..6 {
        tasks.push(tokio::spawn(recipe_client(i, eps.clone(), ns.clone(), checker.clone(), counters.clone(), stop.clone())));
    }
    let probe = Client::connect(opts(&eps, &ns, TTL, Duration::from_secs(1))).await.expect("probe connect");
    let mut fp = MemberKill::new(&mut etcd, Rng::new(seed() ^ 15), &probe, (1, 3));
    let rounds = run_rounds(&mut fp, Duration::from_secs(p.fault_secs), 3).await;
    o.faults = rounds.faults;
    o.failures.append(&mut fp.failures);
    o.failures.extend(rounds.failures);
    let healed_ns = clock_monotonic_ns();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.cancel();
    for t in tasks {
        let _ = t.await;
    }
    probe.close().await;
    let (keys, leases) = await_clean(&mut rawc, &ns, Duration::from_secs(15)).await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.acquisitions = counters.acquisitions.load(Ordering::Relaxed);
    let last = counters.last_acquired_ns.load(Ordering::Relaxed);
    o.expect(last > healed_ns, || "no recipe acquisition after the last member restarted".into());
    o.expect(keys == 0 && leases == 0, || format!("{keys} lock keys and {leases} leases left"));
    let by_kind = |prefix: &str| checker.holds().iter().filter(|h| h.lock.starts_with(prefix)).count();
    o.figure = format!(
        "{} member kill -9 + restart, {} recipe acquisitions (permits {}, reads {}, writes {}, leaderships {}, multi-locked names {}), {keys} lock keys and {leases} leases left; {}; errors: {}",
        o.faults,
        o.acquisitions,
        by_kind("S#"),
        by_kind("R#r"),
        by_kind("R#w"),
        by_kind("E"),
        by_kind("M"),
        r.summary(),
        counters.errors_summary()
    );
    o
}
