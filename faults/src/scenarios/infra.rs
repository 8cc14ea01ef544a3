//! Behind real etcd infrastructure: etcd's gRPC proxy (26), nginx as a gRPC
//! load balancer sending GOAWAY every 100 requests (27), and a client's
//! `close()` while it is cut off (28); 32 and 33 are 27 and 28 over TLS.

use super::*;
use etcdlock_testkit::Front;

/// nginx's `keepalive_requests` in scenario 27: a GOAWAY every 100 requests
/// of a client connection.
pub const KEEPALIVE_REQUESTS: u32 = 100;

/// A lost hold, recorded with its loss.
fn record_lost(
    checker: &Checker,
    lock: &str,
    g: &etcdlock::Guard,
    acquired_ns: u64,
    loss: &etcdlock::Loss,
    reported_ns: u64,
    client: String,
) {
    let at = instant_to_mono_ns(loss.at);
    checker.record(Hold {
        lock: lock.into(),
        token: g.fencing_token(),
        acquired_ns,
        ended_ns: at,
        client,
        loss: Some(LossInfo {
            reason: loss.reason.name().into(),
            at_ns: at,
            reported_ns,
        }),
        ..Default::default()
    });
}

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

const A_REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

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

/// The requests of a [`grpc_lb_goaway`] run the client cancelled before etcd
/// answered, by gRPC method.
fn cancelled(st: &etcdlock_testkit::BalancerStats) -> String {
    if st.cancelled == 0 {
        return "none cancelled by the client".into();
    }
    format!(
        "{} cancelled by the client: {:?}",
        st.cancelled, st.cancelled_methods
    )
}

/// What one client of [`grpc_lb_goaway`] did.
#[derive(Debug, Default)]
struct LbClient {
    /// Lock, put and unlock calls (each timed) and holds made.
    calls: u64,
    acquisitions: u64,
    /// Requests sent (a lock, a guarded put and an unlock are one each).
    requests: u64,
    /// Call times, microseconds (uncontended loops only).
    micros: Vec<u64>,
    /// Failed calls, with their errors.
    failed: Vec<String>,
}

/// One client through the load balancer: holds `H<i>` the whole run, and
/// meanwhile takes, writes under and releases `lock` in a loop, each call
/// timed (contended: several clients loop on the same `lock`).
async fn lb_client(
    c: Client,
    i: usize,
    lock: String,
    checker: Arc<Checker>,
    counters: Arc<Counters>,
    stop: CancellationToken,
) -> LbClient {
    let mut s = LbClient::default();
    let long = format!("H{i}");
    let g = match c
        .lock_with(&long, LockOptions::timeout(Duration::from_secs(5)))
        .await
    {
        Ok(g) => g,
        Err(e) => {
            s.failed.push(format!("{long}: lock: {e}"));
            return s;
        }
    };
    let held_at = clock_monotonic_ns();
    s.acquisitions += 1;
    let contended = lock == "C";
    let id = format!("lb{i}");
    while !stop.is_cancelled() {
        let invoked = clock_monotonic_ns();
        let t = Instant::now();
        let r = c
            .lock_with(&lock, LockOptions::timeout(Duration::from_secs(5)))
            .await;
        let lock_took = t.elapsed();
        s.calls += 1;
        s.requests += 1;
        let gl = match r {
            Ok(g) => g,
            Err(e) => {
                s.failed.push(format!("{lock}: lock: {e}"));
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let acquired = clock_monotonic_ns();
        s.acquisitions += 1;
        let (t, call) = (Instant::now(), clock_monotonic_ns());
        let wr = gl
            .put(resource_key(&lock), gl.fencing_token().to_string())
            .await;
        let put_took = t.elapsed();
        let ret = clock_monotonic_ns();
        s.calls += 1;
        s.requests += 1;
        let result = crate::OpResult::of(&wr);
        let op = crate::GuardedOp {
            write: true,
            call_ns: call,
            ret_ns: (result != crate::OpResult::Unknown).then_some(ret),
            value: gl.fencing_token(),
            result,
        };
        if let Err(e) = &wr {
            s.failed.push(format!("{lock}: guarded put: {e}"));
        }
        let errors_before = counters
            .errors
            .lock()
            .map(|e| e.values().sum::<u64>())
            .unwrap_or(0);
        let t = Instant::now();
        crate::release_and_record_ops(
            &checker,
            &counters,
            lock.clone(),
            &gl,
            (invoked, acquired),
            clock_monotonic_ns(),
            &id,
            vec![op],
        )
        .await;
        let unlock_took = t.elapsed();
        s.calls += 1;
        s.requests += 1;
        if counters
            .errors
            .lock()
            .map(|e| e.values().sum::<u64>())
            .unwrap_or(0)
            > errors_before
            || gl.loss().is_some()
        {
            s.failed.push(format!("{lock}: unlock: {:?}", gl.loss()));
        }
        if !contended {
            s.micros
                .extend([lock_took, put_took, unlock_took].map(|d| d.as_micros() as u64));
        }
    }
    // The long hold lived through every GOAWAY its connections got.
    if let Some(l) = g.loss() {
        s.failed.push(format!(
            "{long}: lost ({}) {:.1} s into the run",
            l.reason.name(),
            secs(instant_to_mono_ns(l.at).saturating_sub(held_at))
        ));
    }
    if let Err(e) = g
        .put(resource_key(&long), g.fencing_token().to_string())
        .await
    {
        s.failed
            .push(format!("{long}: guarded put at the end: {e}"));
    }
    s.requests += 1;
    if let Err(e) = release_ref(&checker, &g, held_at, &format!("{id}-long")).await {
        s.failed.push(e);
    }
    c.close().await;
    s
}

/// 27. Through a gRPC load balancer that sends GOAWAY.
///
/// nginx `grpc_pass` with `keepalive_requests 100`. Two clients loop lock, guarded put, unlock
/// on a lock each (uncontended, every call timed) and two on one shared
/// lock; each of the four holds a lock of its own for the whole run, so its
/// session's streams (keep-alive, watch) live across the GOAWAYs of its
/// connections. 0 failed calls, p99 of the uncontended calls under 50 ms,
/// every long hold kept, >= 20 GOAWAYs in nginx's access log and >= 20 on
/// each uncontended client's connections (>= 2,000 requests each: a
/// connection carries at most 100).
pub async fn grpc_lb_goaway(p: &Profile, net: &Net) -> Outcome {
    let mut o = Outcome::new(27, net.name("grpc-lb-goaway", "grpc-lb-goaway-tls"));
    let etcd = net.etcd(1);
    let ns = unique_ns("goaway");
    let mut rawc = raw(&etcd.endpoints()).await;
    let from = current_revision(&mut rawc).await;
    let nginx = blocking(|| match net.pki() {
        Some(pki) => etcdlock_testkit::grpc_balancer_tls(
            &net.eps(&etcd)[0],
            KEEPALIVE_REQUESTS,
            &pki.server(),
            &pki.ca,
        ),
        None => etcdlock_testkit::grpc_balancer(&etcd.endpoints()[0], KEEPALIVE_REQUESTS),
    });
    let ne = vec![nginx.endpoint()];
    let checker = Arc::new(Checker::new());
    let counters = Arc::new(Counters::default());
    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    for (i, lock) in ["U0", "U1", "C", "C"].into_iter().enumerate() {
        let c = match Client::connect(net.opts(&ne, &ns, TTL, Duration::from_secs(2))).await {
            Ok(c) => c,
            Err(e) => {
                o.fail(format!("connect through nginx: {e}"));
                stop.cancel();
                break;
            }
        };
        tasks.push(tokio::spawn(lb_client(
            c,
            i,
            lock.to_string(),
            checker.clone(),
            counters.clone(),
            stop.clone(),
        )));
    }
    let run = Duration::from_secs(p.fault_secs);
    tokio::time::sleep(run).await;
    stop.cancel();
    let mut all = Vec::new();
    for t in tasks {
        match t.await {
            Ok(s) => all.push(s),
            Err(e) => o.fail(format!("client task: {e}")),
        }
    }
    let conns = etcdlock_testkit::balancer_stats(&nginx, KEEPALIVE_REQUESTS);
    o.faults = conns.goaways as u64;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.acquisitions = all.iter().map(|s| s.acquisitions).sum();
    let calls: u64 = all.iter().map(|s| s.calls).sum();
    let failed: Vec<&String> = all.iter().flat_map(|s| s.failed.iter()).collect();
    let mut micros: Vec<u64> = all.iter().flat_map(|s| s.micros.iter().copied()).collect();
    micros.sort_unstable();
    let pct = |q: f64| {
        micros
            .get(((micros.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0) as f64
            / 1000.0
    };
    let (p50, p99, max) = (
        pct(0.5),
        pct(0.99),
        micros.last().copied().unwrap_or(0) as f64 / 1000.0,
    );
    let min_requests = all.iter().take(2).map(|s| s.requests).min().unwrap_or(0);
    o.expect(failed.is_empty(), || {
        format!(
            "{} of {calls} calls failed: {:?}",
            failed.len(),
            failed.iter().take(5).collect::<Vec<_>>()
        )
    });
    o.expect(p99 < 50.0, || format!("p99 {p99:.1} ms (bound 50 ms)"));
    o.expect(conns.goaways >= 20, || {
        format!("only {} GOAWAYs in nginx's access log", conns.goaways)
    });
    o.expect(min_requests >= 20 * KEEPALIVE_REQUESTS as u64, || format!("an uncontended client made only {min_requests} requests (< 20 GOAWAYs on its connections)"));
    o.expect(conns.non_200 == 0, || {
        let log = nginx.log();
        let serious: Vec<&str> = log
            .lines()
            .filter(|l| !l.contains(" [info] ") && !l.contains(" [notice] "))
            .take(20)
            .collect();
        format!(
            "nginx answered {} requests with an error status: {:?}; its error log: {serious:?}",
            conns.non_200, conns.errors
        )
    });
    o.figure = format!(
        "{:.0} s through nginx (keepalive_requests {KEEPALIVE_REQUESTS}{}): {} GOAWAYs ({} client connections, {} requests in its access log, {}), {calls} calls, {} failed, uncontended calls p50 {p50:.1} ms p99 {p99:.1} ms max {max:.1} ms (bound p99 < 50 ms), 4 long holds kept across >= {} GOAWAYs each, {} acquisitions; {}",
        run.as_secs_f64(),
        if net.tls() { ", TLS on both sides" } else { ", h2c" },
        conns.goaways,
        conns.connections,
        conns.requests,
        cancelled(&conns),
        failed.len(),
        min_requests / KEEPALIVE_REQUESTS as u64,
        o.acquisitions,
        r.summary()
    );
    o
}

/// "At once" for a call on a closed client, with room for a loaded 2-core machine.
const AT_ONCE: Duration = Duration::from_millis(500);

/// One round of [`CloseDuringFault`].
struct CloseRound {
    a: Client,
    ga: etcdlock::Guard,
    a_acq: u64,
    gw: etcdlock::Guard,
    w_acq: u64,
    at_ns: u64,
    pending: tokio::task::JoinHandle<etcdlock::Result<etcdlock::Guard>>,
    waiter: tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>,
}

/// Client A (through the TCP fault proxy) holds `L` and waits for `W<k>`,
/// which B (direct) holds; B queues on `L`; the proxy blackholes A; 300 ms
/// later A's `close()` is called. It returns within A's request timeout +
/// 0.3 s; A's hold ends `ClientClosed` (or an earlier loss) no later than
/// that; its pending wait ends `Closed`, and a call after the close fails
/// `Closed`, at once (within [`AT_ONCE`]); no connection of A's to the proxy
/// is open 2.5 s after the close, nor after the proxy passes traffic again;
/// B acquires `L` after A's hold ended and within TTL + 1.5 s of the fault.
struct CloseDuringFault<'a> {
    net: &'a Net,
    eps: &'a [String],
    proxy: &'a Proxy,
    b: &'a Client,
    ns: &'a str,
    rawc: &'a mut etcd_client::Client,
    checker: &'a Checker,
    round: Result<CloseRound, String>,
    acquisitions: u64,
    done: u32,
    max_close: Duration,
    max_conn_gone: Duration,
    max_take: u64,
    min_gap: i64,
}

impl CloseDuringFault<'_> {
    async fn start_round(&mut self, k: u32) -> Result<CloseRound, String> {
        let _ = self.eps;
        let a = Client::connect(self.net.opts(
            &[self.net.via(self.proxy)],
            self.ns,
            TTL,
            A_REQUEST_TIMEOUT,
        ))
        .await
        .map_err(|e| format!("A connect: {e}"))?;
        let ga = a
            .lock_with("L", LockOptions::timeout(Duration::from_secs(5)))
            .await
            .map_err(|e| format!("A lock: {e}"))?;
        let a_acq = clock_monotonic_ns();
        self.acquisitions += 1;
        ga.put(resource_key("L"), ga.fencing_token().to_string())
            .await
            .map_err(|e| format!("A put: {e}"))?;
        let wname = format!("W{k}");
        let gw = self
            .b
            .lock_with(&wname, LockOptions::timeout(Duration::from_secs(5)))
            .await
            .map_err(|e| format!("B lock: {e}"))?;
        let w_acq = clock_monotonic_ns();
        self.acquisitions += 1;
        let pending = {
            let (a, wname) = (a.clone(), wname.clone());
            tokio::spawn(async move {
                a.lock_with(&wname, LockOptions::timeout(Duration::from_secs(30)))
                    .await
            })
        };
        let waiter = spawn_waiter(self.b.clone(), "L", "mutex");
        for lock in [wname.as_str(), "L"] {
            if await_key_count(
                self.rawc,
                &format!("{}{lock}/", self.ns),
                2,
                Duration::from_secs(10),
            )
            .await
            .is_none()
            {
                pending.abort();
                waiter.abort();
                return Err(format!("nobody queued on {lock}"));
            }
        }
        Ok(CloseRound {
            a,
            ga,
            a_acq,
            gw,
            w_acq,
            at_ns: 0,
            pending,
            waiter,
        })
    }
}

impl Failpoint for CloseDuringFault<'_> {
    fn name(&self) -> &'static str {
        "close during a blackhole"
    }
    async fn inject(&mut self, k: u32) -> Injected {
        self.round = self.start_round(k).await;
        let Ok(r) = &mut self.round else {
            return Injected::new(0, Duration::ZERO);
        };
        self.proxy.blackhole();
        r.at_ns = clock_monotonic_ns();
        Injected::new(1, Duration::from_millis(300))
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
        let t = Instant::now();
        r.a.close().await;
        let closed = clock_monotonic_ns();
        let took = t.elapsed();
        self.max_close = self.max_close.max(took);
        if took > A_REQUEST_TIMEOUT + Duration::from_millis(300) {
            errs.push(format!(
                "close() took {took:?} (bound {A_REQUEST_TIMEOUT:?} + 0.3 s)"
            ));
        }
        // A's hold ended by the time close() returned.
        let loss = r.ga.loss();
        match &loss {
            Some(l) if instant_to_mono_ns(l.at) <= closed => {}
            other => errs.push(format!("A's hold after close(): {other:?}")),
        }
        // A's pending wait ended Closed by then.
        match tokio::time::timeout(AT_ONCE, r.pending).await {
            Ok(Ok(Err(e))) if e.code() == ErrorCode::Closed => {}
            other => errs.push(format!("A's pending wait after close(): {other:?}")),
        }
        let t = Instant::now();
        match r.a.lock("L").await {
            Err(e) if e.code() == ErrorCode::Closed && t.elapsed() < AT_ONCE => {}
            other => errs.push(format!(
                "a lock call after close(): {:?} in {:?}",
                other.map(|g| g.fencing_token()),
                t.elapsed()
            )),
        }
        // A's connections to the proxy go (at once in plaintext; over TLS
        // once the requests still on them end, within A's request timeout).
        let port = self.proxy.addr().port();
        let t = Instant::now();
        while etcdlock_testkit::connections_to(port) > 0
            && t.elapsed() < Duration::from_millis(2500)
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let open = etcdlock_testkit::connections_to(port);
        self.max_conn_gone = self.max_conn_gone.max(t.elapsed());
        if open > 0 {
            errs.push(format!(
                "{open} connections of the closed client still open 2.5 s after close()"
            ));
        }
        // B takes L after A's hold ended (A's lease expires at etcd: its revoke could not pass).
        let (loss, rep) = (loss, clock_monotonic_ns());
        match tokio::time::timeout(Duration::from_secs(TTL as u64 + 10), r.waiter).await {
            Ok(Ok(Ok((gb, b_at)))) => {
                self.acquisitions += 1;
                let took = b_at.saturating_sub(r.at_ns);
                self.max_take = self.max_take.max(took);
                if took > TTL_NS + 1_500_000_000 {
                    errs.push(format!(
                        "B acquired {:.2} s after the blackhole (bound TTL + 1.5 s)",
                        secs(took)
                    ));
                }
                if let Some(l) = &loss {
                    let gap = ms_between(instant_to_mono_ns(l.at), b_at);
                    self.min_gap = self.min_gap.min(gap);
                    record_lost(self.checker, "L", &r.ga, r.a_acq, l, rep, format!("A{k}"));
                }
                if let Err(e) = release(self.checker, gb, b_at, &format!("B{k}")).await {
                    errs.push(e);
                }
            }
            other => errs.push(format!("B did not acquire L: {other:?}")),
        }
        if let Err(e) = release(self.checker, r.gw, r.w_acq, &format!("B{k}-W")).await {
            errs.push(e);
        }
        // Healed: nothing of the closed client connects again.
        self.proxy.pass();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let again = etcdlock_testkit::connections_to(port);
        if again > 0 {
            errs.push(format!(
                "{again} connections to the proxy after healing, from a closed client"
            ));
        }
        self.done += 1;
        errs_to_result(errs)
    }
}

/// 28. A client's `close()` while it is cut off from etcd (see [`CloseDuringFault`]).
pub async fn close_during_fault(p: &Profile, net: &Net) -> Outcome {
    let mut o = Outcome::new(28, net.name("close-during-fault", "close-during-fault-tls"));
    let etcd = net.etcd(1);
    let eps = net.eps(&etcd);
    let ns = unique_ns("close");
    let mut rawc = raw(&etcd.endpoints()).await;
    let from = current_revision(&mut rawc).await;
    let checker = Checker::new();
    let proxy = Proxy::start(&eps[0]).await.expect("proxy");
    let b = Client::connect(net.opts(&eps, &ns, 10, Duration::from_secs(2)))
        .await
        .expect("B connect");
    let rounds = p.rounds.saturating_sub(1).max(2);
    let mut fp = CloseDuringFault {
        net,
        eps: &eps,
        proxy: &proxy,
        b: &b,
        ns: &ns,
        rawc: &mut rawc,
        checker: &checker,
        round: Err("no round".into()),
        acquisitions: 0,
        done: 0,
        max_close: Duration::ZERO,
        max_conn_gone: Duration::ZERO,
        max_take: 0,
        min_gap: i64::MAX,
    };
    let rr = run_rounds(&mut fp, Duration::ZERO, rounds).await;
    o.faults += rr.faults;
    o.acquisitions += fp.acquisitions;
    o.failures.extend(rr.failures);
    let CloseDuringFault {
        done,
        max_close,
        max_conn_gone,
        max_take,
        min_gap,
        ..
    } = fp;
    b.close().await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.expect(done == rounds, || {
        format!("{done}/{rounds} rounds completed")
    });
    o.figure = format!(
        "{done} rounds of close() 300 ms into a blackhole: close() returned within {} ms (bound {} ms), the hold ended and the pending wait ended Closed by then, the closed client's connections gone within {} ms and none after healing, the other client acquired <= {:.2} s after the fault (bound TTL + 1.5 s) and >= {} ms after the hold ended; {}",
        max_close.as_millis(),
        (A_REQUEST_TIMEOUT + Duration::from_millis(300)).as_millis(),
        max_conn_gone.as_millis(),
        secs(max_take),
        if min_gap == i64::MAX { 0 } else { min_gap },
        r.summary()
    );
    o
}
