//! etcd members paused, killed and restarted, and a leader change right
//! after a holder's death.

use super::*;

pub(super) fn cluster_workload(endpoints: Vec<String>, ns: &str) -> Workload {
    let mut w = Workload::new(endpoints, ns);
    w.hold = Duration::from_millis(5);
    w.lock_timeout = Duration::from_secs(4);
    w.request_timeout = Duration::from_secs(1);
    w
}

/// Scenario 4: member SIGSTOP for 1-5 s, repeatedly, in a 3-member cluster
/// (the leader included). The sessions' TTL (7 s) outlasts the longest pause
/// plus a keep-alive interval: an etcd leader stopped as a whole process and
/// resumed still believes it leads for a few milliseconds, and revokes every
/// lease whose TTL ran out on its own clock while it was stopped, although
/// the new leader renewed them; the revoke is forwarded to the new leader and
/// applied (etcd-io/etcd#15247; the fix in 3.5.13 and its 3.4 backport checks
/// leadership, but skips the check when the raft loop ticked recently, as it
/// does at once after SIGCONT). Seen here with TTL 2 s on etcd 3.4.23 and
/// 3.6.16: all eight sessions' leases revoked at once, 100-200 ms after each
/// had been renewed through the new leader. No client can prevent a server
/// revoking a lease it just renewed; the README says to pick a TTL longer
/// than the longest stall of the leader.
pub async fn member_sigstop(p: &Profile) -> Outcome {
    let mut o = Outcome::new(4, "member-sigstop");
    let etcd = Etcd::cluster(3);
    let eps = etcd.endpoints();
    let ns = unique_ns("mstop");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Arc::new(Checker::new());
    let counters = Arc::new(Counters::default());
    let mut w = cluster_workload(eps.clone(), &ns);
    w.ttl = MEMBER_PAUSE_TTL;
    let (stop, h) = start_workload(w, checker.clone(), counters.clone());
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
    o.expect(last > healed_ns, || {
        "no acquisition after the last member resumed".into()
    });
    o.figure = format!(
        "{} member pauses of 1-5 s ({} of the leader, {:.1} s stopped in total; TTL {MEMBER_PAUSE_TTL} s), {} acquisitions; {}; errors: {}",
        o.faults,
        fp.leaders,
        fp.stopped.as_secs_f64(),
        o.acquisitions,
        r.summary(),
        counters.errors_summary()
    );
    o
}

/// Scenario 4's lease TTL: longer than its longest pause (5 s) plus a
/// keep-alive interval (TTL/5 = 1.4 s).
pub const MEMBER_PAUSE_TTL: i64 = 7;

/// Wait until no lock key (a key with a lease) is left under `ns` and etcd has no lease.
pub(super) async fn await_clean(
    rawc: &mut etcd_client::Client,
    ns: &str,
    timeout: Duration,
) -> (usize, usize) {
    let start = Instant::now();
    loop {
        let keys = keys_under(rawc, ns)
            .await
            .map(|k| k.iter().filter(|(_, _, lease)| *lease != 0).count())
            .unwrap_or(usize::MAX);
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
    member_kill_restart_on(p, &Net::new(false)).await
}

/// Scenario 5 over plaintext or TLS (30).
pub async fn member_kill_restart_on(p: &Profile, net: &Net) -> Outcome {
    let mut o = Outcome::new(
        5,
        net.name("member-kill-restart", "member-kill-restart-tls"),
    );
    let mut etcd = net.etcd(3);
    let eps = net.eps(&etcd);
    let ns = unique_ns("mkill");
    let mut rawc = raw(&etcd.endpoints()).await;
    let from = current_revision(&mut rawc).await;
    let checker = Arc::new(Checker::new());
    let counters = Arc::new(Counters::default());
    let mut w = cluster_workload(eps.clone(), &ns);
    w.tls_ca = net.ca().map(Into::into);
    let (stop, h) = start_workload(w, checker.clone(), counters.clone());
    let probe = Client::connect(net.opts(&eps, &ns, TTL, Duration::from_secs(1)))
        .await
        .expect("probe connect");
    let gap = if p.fault_secs > 20 { (5, 10) } else { (1, 3) };
    let mut fp = MemberKill::new(&mut etcd, Rng::new(seed() ^ 5), &probe, gap);
    let rounds = run_rounds(&mut fp, Duration::from_secs(p.fault_secs), 3).await;
    o.faults = rounds.faults;
    o.failures.append(&mut fp.failures);
    o.failures.extend(rounds.failures);
    let (leaders, max_resume, probes) = (fp.leaders, fp.max_resume, fp.probes);
    let (max_elected, max_after) = (fp.max_elected, fp.max_after_leader);
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.cancel();
    let _ = h.await;
    probe.close().await;
    let (keys, leases) = await_clean(&mut rawc, &ns, Duration::from_secs(15)).await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.acquisitions = counters.acquisitions.load(Ordering::Relaxed) + probes;
    o.expect(keys == 0 && leases == 0, || {
        format!("{keys} lock keys and {leases} leases left")
    });
    o.figure = format!(
        "{} member kill -9 + restart ({leaders} of the leader), a leader again within {:.2} s, operations resumed within {:.2} s of that (bound {:.1} s) and {:.2} s of the kill at most, {} acquisitions, {keys} lock keys and {leases} leases left; {}; errors: {}",
        o.faults,
        max_elected.as_secs_f64(),
        max_after.as_secs_f64(),
        crate::failpoint::RESUME_AFTER_LEADER.as_secs_f64(),
        max_resume.as_secs_f64(),
        o.acquisitions,
        r.summary(),
        counters.errors_summary()
    );
    o
}

/// One round of [`LeaderKill`].
pub(super) struct LeaderRound {
    pub(super) holder: HolderRound,
    pub(super) leader: usize,
    pub(super) px: usize,
    pub(super) a: Client,
    pub(super) ga: Arc<etcdlock::Guard>,
    pub(super) a_acq: u64,
    pub(super) last_valid: Arc<AtomicU64>,
    pub(super) poller: tokio::task::JoinHandle<()>,
    pub(super) a_lost: tokio::task::JoinHandle<Option<(etcdlock::Loss, u64)>>,
    pub(super) own_waiter: tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>,
}

/// kill -9 of a holder process and, right after, of the etcd leader (which
/// resets every lease's TTL on the new leader), while a second holder A is cut
/// off by its proxy at that moment. The waiter behind the dead holder acquires
/// within 2×TTL + 2 s with a higher token; A must not extend its validity from
/// the new leader's reset: its loss fires within TTL of its last acknowledged
/// keep-alive, and A's waiter acquires only after that. Heal: the proxy passes
/// again and the old leader restarts.
pub(super) struct LeaderKill<'a> {
    pub(super) net: &'a Net,
    pub(super) etcd: &'a mut Etcd,
    pub(super) proxies: &'a [Proxy],
    pub(super) eps: &'a [String],
    pub(super) ns: &'a str,
    pub(super) wc: &'a Client,
    pub(super) rawc: &'a mut etcd_client::Client,
    pub(super) checker: &'a Checker,
    pub(super) margin: Duration,
    pub(super) round: Result<LeaderRound, String>,
    pub(super) acquisitions: u64,
    pub(super) done: u32,
    pub(super) max_wait: u64,
    pub(super) max_since_ack: i64,
    pub(super) min_own_gap: i64,
}

impl LeaderKill<'_> {
    async fn start_round(
        &mut self,
        child: &mut ChildProc,
    ) -> Result<(HolderRound, usize, usize, Client, Arc<etcdlock::Guard>, u64), String> {
        let (waiter, token, acquired_ns, key, put) =
            queue_behind(child, self.wc, self.rawc, self.ns, "mutex").await?;
        self.acquisitions += 1;
        let holder = HolderRound {
            waiter,
            token,
            acquired_ns,
            key,
            at_ns: 0,
            put,
        };
        let leader = blocking(|| self.etcd.leader()).ok_or("no leader")?;
        // The cut-off holder A talks to a follower through a proxy.
        let px = (leader + 1) % 3;
        let mut ao = self.net.opts(
            &[self.net.via(&self.proxies[px])],
            self.ns,
            TTL,
            Duration::from_secs(1),
        );
        ao.margin = Some(self.margin);
        let a = Client::connect(ao)
            .await
            .map_err(|e| format!("A connect: {e}"))?;
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
        let mut spec = holder_spec(self.eps, self.ns, 1);
        if let Some(ca) = self.net.ca() {
            spec["tls_ca"] = json!(ca);
        }
        let mut child = ChildProc::spawn(spec, &[]);
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
        if await_key_count(
            self.rawc,
            &format!("{}own/", self.ns),
            2,
            Duration::from_secs(10),
        )
        .await
        .is_none()
        {
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
            ops: vec![holder.put.clone()],
            ..Default::default()
        });
        self.round = Ok(LeaderRound {
            holder,
            leader,
            px,
            a,
            ga,
            a_acq,
            last_valid,
            poller,
            a_lost,
            own_waiter,
        });
        Injected::new(3, Duration::ZERO)
    }
    async fn heal(&mut self, k: u32) -> Result<(), String> {
        let r = std::mem::replace(&mut self.round, Err("no round".into()))?;
        let mut errs = Vec::new();
        let kill_ns = r.holder.at_ns;
        // The waiter behind the dead holder: within 2×TTL + 2 s (the new leader
        // restarts the dead holder's lease TTL once).
        match tokio::time::timeout(Duration::from_secs(2 * TTL as u64 + 15), r.holder.waiter).await
        {
            Ok(Ok(Ok((g, at)))) => {
                self.acquisitions += 1;
                let waited = at.saturating_sub(kill_ns);
                self.max_wait = self.max_wait.max(waited);
                if waited > 2 * TTL_NS + 2_000_000_000 {
                    errs.push(format!(
                        "waiter acquired {:.2} s after the holder died",
                        secs(waited)
                    ));
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
                let last_ack_send =
                    r.last_valid.load(Ordering::Relaxed) - (TTL_NS - self.margin.as_nanos() as u64);
                let since_ack = ms_between(last_ack_send, rep_ns);
                self.max_since_ack = self.max_since_ack.max(since_ack);
                if since_ack > TTL * 1000 {
                    errs.push(format!(
                        "cut-off holder reported its loss {since_ack} ms after its last ack"
                    ));
                }
                let loss_at = instant_to_mono_ns(loss.at);
                self.checker.record(Hold {
                    lock: "own".into(),
                    token: r.ga.fencing_token(),
                    acquired_ns: r.a_acq,
                    ended_ns: loss_at,
                    client: format!("A{k}"),
                    loss: Some(LossInfo {
                        reason: loss.reason.name().into(),
                        at_ns: loss_at,
                        reported_ns: rep_ns,
                    }),
                    ..Default::default()
                });
                match tokio::time::timeout(Duration::from_secs(2 * TTL as u64 + 15), r.own_waiter)
                    .await
                {
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
            other => errs.push(format!(
                "the cut-off holder never reported its loss: {other:?}"
            )),
        }
        self.proxies[r.px].pass();
        r.a.close().await;
        let leader = r.leader;
        let healthy = blocking(|| {
            self.etcd.restart(leader);
            self.etcd
                .wait_member_healthy(leader, Duration::from_secs(20))
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
    leader_change_on(p, &Net::new(false)).await
}

/// Scenario 6 over plaintext or TLS (31).
pub async fn leader_change_on(p: &Profile, net: &Net) -> Outcome {
    let mut o = Outcome::new(
        6,
        net.name(
            "leader-change-after-holder-death",
            "leader-change-after-holder-death-tls",
        ),
    );
    let mut etcd = net.etcd(3);
    let eps = net.eps(&etcd);
    let ns = unique_ns("lead");
    let mut rawc = raw(&etcd.endpoints()).await;
    let from = current_revision(&mut rawc).await;
    let checker = Checker::new();
    let wc = Client::connect(net.opts(&eps, &ns, 5, Duration::from_secs(1)))
        .await
        .expect("waiter connect");
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
        net,
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
    let LeaderKill {
        done,
        max_wait,
        max_since_ack,
        min_own_gap,
        ..
    } = fp;
    wc.close().await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.expect(done == rounds, || {
        format!("{done}/{rounds} rounds completed")
    });
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
