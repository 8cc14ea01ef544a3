//! Scenario 26: through etcd's gRPC proxy, which is killed, restarted and stopped
//! past the TTL of the holder behind it.

use super::*;
use etcdlock_testkit::Front;

/// The faults on the gRPC proxy, in turn: SIGKILL, down for 2×TTL, then
/// restarted on its port; SIGSTOP for 2×TTL, then SIGCONT; SIGKILL and a
/// restart 300 ms later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProxyFaultKind {
    KillRestart,
    Stop,
    QuickRestart,
}

impl ProxyFaultKind {
    fn of(k: u32) -> ProxyFaultKind {
        [
            ProxyFaultKind::KillRestart,
            ProxyFaultKind::Stop,
            ProxyFaultKind::QuickRestart,
        ][k as usize % 3]
    }
}

/// One round of [`ProxyFault`].
struct ProxyRound {
    kind: ProxyFaultKind,
    lock: String,
    a: Client,
    d: Client,
    ga: Arc<etcdlock::Guard>,
    a_acq: u64,
    at_ns: u64,
    lost: tokio::task::JoinHandle<Option<(etcdlock::Loss, u64)>>,
    waiter: tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>,
    call: tokio::task::JoinHandle<Duration>,
}

/// Holder A reaches etcd through the gRPC proxy, waiter D directly, both on
/// `F<k>`; the proxy is faulted (see [`ProxyFaultKind`]). When the proxy
/// stays away past the TTL, A must report its loss, and its hold end, before
/// D acquires, and D must acquire within TTL + 1.5 s of the fault. After a
/// restart 300 ms later, A's hold may live on (then D acquires only after A
/// unlocks), or be lost as above. A's guarded put at the moment of the fault
/// returns within its request timeout + 0.5 s; after every heal, A (a new
/// session through the healed proxy if its lease was lost) takes a fresh lock
/// within 5 s.
struct ProxyFault<'a> {
    proxy: &'a mut Front,
    pe: &'a [String],
    eps: &'a [String],
    ns: &'a str,
    rawc: &'a mut etcd_client::Client,
    checker: &'a Checker,
    round: Result<ProxyRound, String>,
    acquisitions: u64,
    lost: u32,
    kept: u32,
    min_gap: i64,
    max_take: u64,
    max_call: Duration,
    max_again: Duration,
}

impl ProxyFault<'_> {
    async fn start_round(&mut self, k: u32) -> Result<ProxyRound, String> {
        let a = Client::connect(opts(self.pe, self.ns, TTL, A_REQUEST_TIMEOUT))
            .await
            .map_err(|e| format!("A connect: {e}"))?;
        let d = Client::connect(opts(self.eps, self.ns, 10, Duration::from_secs(2)))
            .await
            .map_err(|e| format!("D connect: {e}"))?;
        let lock = format!("F{k}");
        let ga = Arc::new(
            a.lock_with(&lock, LockOptions::timeout(Duration::from_secs(5)))
                .await
                .map_err(|e| format!("A lock: {e}"))?,
        );
        let a_acq = clock_monotonic_ns();
        self.acquisitions += 1;
        ga.put(resource_key(&lock), ga.fencing_token().to_string())
            .await
            .map_err(|e| format!("A put: {e}"))?;
        let waiter = spawn_waiter(d.clone(), &lock, "mutex");
        if await_key_count(
            self.rawc,
            &format!("{}{lock}/", self.ns),
            2,
            Duration::from_secs(10),
        )
        .await
        .is_none()
        {
            waiter.abort();
            return Err("D never queued".into());
        }
        let lost = {
            let ga = ga.clone();
            tokio::spawn(async move { ga.wait_lost().await.map(|l| (l, clock_monotonic_ns())) })
        };
        Ok(ProxyRound {
            kind: ProxyFaultKind::of(k),
            lock,
            a,
            d,
            ga,
            a_acq,
            at_ns: 0,
            lost,
            waiter,
            call: tokio::spawn(async { Duration::ZERO }),
        })
    }
}

impl Failpoint for ProxyFault<'_> {
    fn name(&self) -> &'static str {
        "grpc-proxy fault"
    }
    fn gap(&mut self, _k: u32) -> Duration {
        Duration::from_millis(300)
    }
    async fn inject(&mut self, k: u32) -> Injected {
        self.round = self.start_round(k).await;
        let Ok(r) = &mut self.round else {
            return Injected::new(0, Duration::ZERO);
        };
        r.at_ns = clock_monotonic_ns();
        let hold = match r.kind {
            ProxyFaultKind::KillRestart | ProxyFaultKind::QuickRestart => {
                blocking(|| self.proxy.kill());
                if r.kind == ProxyFaultKind::QuickRestart {
                    Duration::from_millis(300)
                } else {
                    Duration::from_nanos(2 * TTL_NS)
                }
            }
            ProxyFaultKind::Stop => {
                self.proxy.pause();
                Duration::from_nanos(2 * TTL_NS)
            }
        };
        // A call of A's while its proxy is away returns within its bound.
        r.call = {
            let (ga, lock) = (r.ga.clone(), r.lock.clone());
            tokio::spawn(async move {
                let t = Instant::now();
                let _ = ga
                    .put(resource_key(&lock), ga.fencing_token().to_string())
                    .await;
                t.elapsed()
            })
        };
        Injected::new(1, hold)
    }
    async fn heal(&mut self, k: u32) -> Result<(), String> {
        let r = std::mem::replace(&mut self.round, Err("no round".into()));
        let healed = match r.as_ref().map(|r| r.kind) {
            Ok(ProxyFaultKind::Stop) => {
                self.proxy.resume();
                Ok(())
            }
            _ => {
                blocking(|| self.proxy.restart());
                Ok::<(), String>(())
            }
        };
        let mut r = r?;
        healed?;
        let mut errs = Vec::new();
        match (&mut r.call).await {
            Ok(d) => {
                self.max_call = self.max_call.max(d);
                if d > A_REQUEST_TIMEOUT + Duration::from_millis(500) {
                    errs.push(format!("A's put during the fault returned after {d:?} (bound {A_REQUEST_TIMEOUT:?} + 0.5 s)"));
                }
            }
            Err(e) => errs.push(format!("A's put: {e}")),
        }
        // After the quick restart A's hold may live on; otherwise it is lost.
        let lost = if r.kind == ProxyFaultKind::QuickRestart {
            tokio::select! {
                x = &mut r.lost => x.ok().flatten(),
                _ = tokio::time::sleep(Duration::from_nanos(2 * TTL_NS)) => None,
            }
        } else {
            match tokio::time::timeout(Duration::from_secs(TTL as u64 + 5), &mut r.lost).await {
                Ok(Ok(Some(x))) => Some(x),
                other => {
                    errs.push(format!(
                        "A never reported the loss of its hold through the {:?} proxy: {other:?}",
                        r.kind
                    ));
                    None
                }
            }
        };
        r.lost.abort();
        match lost {
            Some((loss, rep_ns)) => {
                self.lost += 1;
                record_lost(
                    self.checker,
                    &r.lock,
                    &r.ga,
                    r.a_acq,
                    &loss,
                    rep_ns,
                    format!("A{k}"),
                );
                match tokio::time::timeout(Duration::from_secs(TTL as u64 + 10), r.waiter).await {
                    Ok(Ok(Ok((gd, d_at)))) => {
                        self.acquisitions += 1;
                        let took = d_at.saturating_sub(r.at_ns);
                        self.max_take = self.max_take.max(took);
                        if took > TTL_NS + 1_500_000_000 {
                            errs.push(format!(
                                "D acquired {:.2} s after the {:?} (bound TTL + 1.5 s)",
                                secs(took),
                                r.kind
                            ));
                        }
                        let gap = ms_between(instant_to_mono_ns(loss.at), d_at);
                        self.min_gap = self.min_gap.min(gap);
                        if gap <= 0 {
                            errs.push(format!("D acquired {} ms before A's hold ended", -gap));
                        }
                        if let Err(e) = release(self.checker, gd, d_at, &format!("D{k}")).await {
                            errs.push(e);
                        }
                    }
                    other => errs.push(format!("D did not acquire after A's loss: {other:?}")),
                }
            }
            None if r.kind == ProxyFaultKind::QuickRestart => {
                self.kept += 1;
                if r.waiter.is_finished() {
                    errs.push("D acquired while A's hold lived".into());
                }
                if !r.ga.is_held() {
                    errs.push("A's hold neither lived nor was reported lost".into());
                }
                if let Err(e) = release_ref(self.checker, &r.ga, r.a_acq, &format!("A{k}")).await {
                    errs.push(e);
                }
                match tokio::time::timeout(Duration::from_secs(10), r.waiter).await {
                    Ok(Ok(Ok((gd, d_at)))) => {
                        self.acquisitions += 1;
                        if let Err(e) = release(self.checker, gd, d_at, &format!("D{k}")).await {
                            errs.push(e);
                        }
                    }
                    other => errs.push(format!("D did not acquire after A unlocked: {other:?}")),
                }
            }
            None => r.waiter.abort(),
        }
        // A takes a fresh lock through the healed proxy.
        let t = Instant::now();
        match r
            .a
            .lock_with(
                &format!("R{k}"),
                LockOptions::timeout(Duration::from_secs(5)),
            )
            .await
        {
            Ok(g) => {
                let at = clock_monotonic_ns();
                self.acquisitions += 1;
                self.max_again = self.max_again.max(t.elapsed());
                if let Err(e) = release(self.checker, g, at, &format!("A{k}-again")).await {
                    errs.push(e);
                }
            }
            Err(e) => errs.push(format!(
                "A could not lock through the healed proxy within 5 s: {e}"
            )),
        }
        r.a.close().await;
        r.d.close().await;
        errs_to_result(errs)
    }
}

/// A hold through the proxy while no fault is injected: held for `d`, a
/// guarded put every second; `Ok(puts)` if it was never lost and every put
/// went through.
async fn hold_through(
    c: &Client,
    checker: &Checker,
    lock: &str,
    d: Duration,
    rawc: &mut etcd_client::Client,
) -> Result<u32, String> {
    let g = c
        .lock_with(lock, LockOptions::timeout(Duration::from_secs(5)))
        .await
        .map_err(|e| format!("lock: {e}"))?;
    let at = clock_monotonic_ns();
    let start = Instant::now();
    let mut puts = 0;
    let mut errs = Vec::new();
    while start.elapsed() < d {
        tokio::time::sleep(Duration::from_millis(1000).min(d.saturating_sub(start.elapsed())))
            .await;
        match g
            .put(resource_key(lock), g.fencing_token().to_string())
            .await
        {
            Ok(()) => puts += 1,
            Err(e) => {
                errs.push(format!(
                    "guarded put {:.1} s into the hold: {e}",
                    start.elapsed().as_secs_f64()
                ));
                break;
            }
        }
    }
    if let Some(l) = g.loss() {
        errs.push(format!(
            "lost ({}) {:.1} s into the hold",
            l.reason.name(),
            secs(instant_to_mono_ns(l.at).saturating_sub(at))
        ));
    }
    // The lease lives at etcd (asked directly, not through the proxy).
    match rawc.lease_time_to_live(g.lease_id(), None).await {
        Ok(t) if t.ttl() > 0 => {}
        Ok(t) => errs.push(format!(
            "lease {:x} gone at etcd (ttl {})",
            g.lease_id(),
            t.ttl()
        )),
        Err(e) => errs.push(format!("lease time-to-live: {e}")),
    }
    if let Err(e) = release_ref(checker, &g, at, "H").await {
        if g.loss().is_none() {
            errs.push(e);
        }
    }
    errs_to_result(errs).map(|_| puts)
}

/// The lease TTL of scenario 26's hold and workload through the proxy, in
/// seconds (the faulted holders keep [`TTL`]). The proxy answers a
/// keep-alive up to TTL/3 + 0.5 s late; at TTL 2 on a loaded 2-core machine
/// that has left too little of the TTL for the client to prove its lease
/// alive (an idle hold was reported lost 4.4 s in while its lease lived, in
/// 2 of 11 runs beside scenario 27), so the proxy's rule is tested at 5 s,
/// the TTL of the acceptance runs.
pub const PROXY_TTL: i64 = 5;

/// Acquisitions the three clients through the proxy must make in scenario
/// 26's 2×TTL + 1 s without a fault, beside one direct client on the same lock (a
/// handoff takes a few milliseconds; a watch answered only on a 100 ms tick
/// would still allow this many).
const MIN_PROXIED_ACQUISITIONS: u64 = 50;

/// 26. Through etcd's gRPC proxy.
///
/// `etcd grpc-proxy start` coalesces lease keep-alives and watches. Three
/// clients through the proxy (TTL [`PROXY_TTL`]) and one direct contend on
/// one lock the whole time. First no fault for 2×TTL + 1 s: a hold through
/// the proxy is never lost while its lease lives, no workload hold is lost,
/// no call fails, waiters through the proxy are handed the lock. Then the
/// proxy is killed and restarted, and stopped past the TTL of the holder
/// behind it (see [`ProxyFault`]).
pub async fn grpc_proxy(p: &Profile) -> Outcome {
    let mut o = Outcome::new(26, "grpc-proxy");
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("gproxy");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let mut proxy = blocking(|| etcdlock_testkit::grpc_proxy(&eps));
    let pe = vec![proxy.endpoint()];
    let checker = Arc::new(Checker::new());
    let (cp, cd) = (Arc::new(Counters::default()), Arc::new(Counters::default()));
    let mut w = Workload::new(pe.clone(), &ns);
    w.clients = 3;
    w.locks = 1;
    w.ttl = PROXY_TTL;
    w.hold = Duration::from_millis(5);
    w.request_timeout = Duration::from_secs(1);
    w.client_prefix = "proxied-c".into();
    let mut wd = w.clone();
    wd.ttl = TTL;
    wd.endpoints = eps.clone();
    wd.clients = 1;
    wd.client_prefix = "direct-c".into();
    let (stop_p, hp) = start_workload(w, checker.clone(), cp.clone());
    let (stop_d, hd) = start_workload(wd, checker.clone(), cd.clone());
    // No fault: a hold through the proxy for 2×TTL + 1 s.
    let hc = Client::connect(opts(&pe, &ns, PROXY_TTL, Duration::from_secs(1)))
        .await
        .expect("H connect");
    let nofault = Duration::from_secs(2 * PROXY_TTL as u64 + 1);
    let held = hold_through(&hc, &checker, "H", nofault, &mut rawc).await;
    hc.close().await;
    o.acquisitions += 1;
    let quiet = (
        cp.acquisitions.load(Ordering::Relaxed),
        cp.losses.load(Ordering::Relaxed),
        cp.errors_summary(),
        cd.errors_summary(),
    );
    match &held {
        Ok(_) => {}
        Err(e) => o.fail(format!("no fault: the hold through the proxy: {e}")),
    }
    o.expect(quiet.0 >= MIN_PROXIED_ACQUISITIONS, || {
        format!("no fault: only {} acquisitions through the proxy in {:.0} s (at least {MIN_PROXIED_ACQUISITIONS}: waiters through the proxy are handed the lock as on a bare etcd)", quiet.0, nofault.as_secs_f64())
    });
    o.expect(quiet.1 == 0 && quiet.2 == "no errors" && quiet.3 == "no errors", || {
        format!("no fault: {} workload holds through the proxy lost; errors through the proxy: {}; direct: {}", quiet.1, quiet.2, quiet.3)
    });
    // The faults.
    let mut fp = ProxyFault {
        proxy: &mut proxy,
        pe: &pe,
        eps: &eps,
        ns: &ns,
        rawc: &mut rawc,
        checker: &checker,
        round: Err("no round".into()),
        acquisitions: 0,
        lost: 0,
        kept: 0,
        min_gap: i64::MAX,
        max_take: 0,
        max_call: Duration::ZERO,
        max_again: Duration::ZERO,
    };
    let rounds = p.rounds.max(3);
    let rr = run_rounds(&mut fp, Duration::ZERO, rounds).await;
    o.faults += rr.faults;
    o.acquisitions += fp.acquisitions;
    o.failures.extend(rr.failures);
    let ProxyFault {
        lost,
        kept,
        min_gap,
        max_take,
        max_call,
        max_again,
        ..
    } = fp;
    // The clients through the proxy acquire again (a waiter whose session
    // ended with the proxy's faults fails LockLost, then locks again).
    let healed_ns = clock_monotonic_ns();
    let resumed = Instant::now();
    while cp.last_acquired_ns.load(Ordering::Relaxed) <= healed_ns
        && resumed.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let resumed = resumed.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop_p.cancel();
    stop_d.cancel();
    let _ = hp.await;
    let _ = hd.await;
    o.acquisitions +=
        cp.acquisitions.load(Ordering::Relaxed) + cd.acquisitions.load(Ordering::Relaxed);
    o.expect(
        cp.last_acquired_ns.load(Ordering::Relaxed) > healed_ns,
        || "no acquisition through the proxy within 10 s of the last heal".into(),
    );
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    let faulted = rounds - rounds / 3; // the kill and stop rounds: A must lose its hold
    o.expect(lost + kept == rounds && lost >= faulted, || {
        format!("{lost} holds lost, {kept} kept in {rounds} rounds ({faulted} must be lost)")
    });
    o.figure = format!(
        "no fault {:.0} s (TTL {PROXY_TTL} s): a hold through the proxy {} ({} guarded puts), {} workload acquisitions through the proxy, {} lost, errors: {}; faults: {} rounds (kill + 2xTTL down, SIGSTOP 2xTTL, kill + restart at 300 ms; holder TTL {TTL} s): {lost} holds through the proxy lost, {kept} kept; the direct waiter acquired <= {:.2} s after the fault (bound TTL + 1.5 s) and >= {} ms after the lost hold ended; a call during the fault returned within {} ms; a fresh lock through the healed proxy within {} ms, the workload through it acquired again {} ms after the last heal; {}; errors after the faults: through the proxy {}, direct {}",
        nofault.as_secs_f64(),
        if held.is_ok() { "kept" } else { "LOST" },
        held.as_ref().copied().unwrap_or(0),
        quiet.0,
        quiet.1,
        quiet.2,
        rr.rounds,
        secs(max_take),
        if min_gap == i64::MAX { 0 } else { min_gap },
        max_call.as_millis(),
        max_again.as_millis(),
        resumed.as_millis(),
        r.summary(),
        cp.errors_summary(),
        cd.errors_summary()
    );
    o
}
