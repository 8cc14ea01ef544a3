//! Faults between a client and its member, through the TCP proxy: a
//! blackholed client, delays and drops, and a response lost after etcd
//! applied the request.

use super::*;

/// One round of [`ClientBlackhole`]: holder A behind the proxy, waiter B direct.
pub(super) struct BlackholeRound {
    pub(super) a: Client,
    pub(super) b: Client,
    pub(super) ga: Arc<etcdlock::Guard>,
    pub(super) a_acq: u64,
    pub(super) last_valid: Arc<AtomicU64>,
    pub(super) poller: tokio::task::JoinHandle<()>,
    pub(super) lost: tokio::task::JoinHandle<Option<(etcdlock::Loss, u64)>>,
    pub(super) waiter: tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>,
}

/// Cut holder A off from etcd (its proxy drops everything) for 2×TTL while B
/// waits: A must report its loss within TTL of its last acknowledged keep-alive
/// and before B acquires; after healing, A's stale writes are refused (locally
/// and by etcd's compare) and A re-acquires with a higher token. New clients
/// each round.
pub(super) struct ClientBlackhole<'a> {
    pub(super) net: &'a Net,
    pub(super) eps: &'a [String],
    pub(super) proxy: &'a Proxy,
    pub(super) ns: &'a str,
    pub(super) rawc: &'a mut etcd_client::Client,
    pub(super) checker: &'a Checker,
    pub(super) margin: Duration,
    pub(super) round: Result<BlackholeRound, String>,
    pub(super) acquisitions: u64,
    pub(super) done: u32,
    pub(super) max_since_ack: i64,
    pub(super) min_gap: i64,
    pub(super) reacquired: u32,
    pub(super) stale: u32,
}

impl ClientBlackhole<'_> {
    async fn start_round(&mut self) -> Result<BlackholeRound, String> {
        let mut ao = self.net.opts(
            &[self.net.via(self.proxy)],
            self.ns,
            TTL,
            Duration::from_secs(1),
        );
        ao.margin = Some(self.margin);
        let a = Client::connect(ao)
            .await
            .map_err(|e| format!("A connect: {e}"))?;
        let b = Client::connect(self.net.opts(self.eps, self.ns, 10, Duration::from_secs(2)))
            .await
            .map_err(|e| format!("B connect: {e}"))?;
        let ga = Arc::new(a.lock("L").await.map_err(|e| format!("A lock: {e}"))?);
        let a_acq = clock_monotonic_ns();
        self.acquisitions += 1;
        ga.put(resource_key("L"), ga.fencing_token().to_string())
            .await
            .map_err(|e| format!("A put: {e}"))?;
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
        if await_key_count(
            self.rawc,
            &format!("{}L/", self.ns),
            2,
            Duration::from_secs(10),
        )
        .await
        .is_none()
        {
            return Err("B never queued".into());
        }
        let lost = {
            let ga = ga.clone();
            tokio::spawn(async move { ga.wait_lost().await.map(|l| (l, clock_monotonic_ns())) })
        };
        Ok(BlackholeRound {
            a,
            b,
            ga,
            a_acq,
            last_valid,
            poller,
            lost,
            waiter,
        })
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
        let last_ack_send =
            r.last_valid.load(Ordering::Relaxed) - (TTL_NS - self.margin.as_nanos() as u64);
        let since_ack = ms_between(last_ack_send, rep_ns);
        self.max_since_ack = self.max_since_ack.max(since_ack);
        if since_ack > TTL * 1000 {
            errs.push(format!(
                "loss reported {since_ack} ms after the last acknowledged keep-alive"
            ));
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
            loss: Some(LossInfo {
                reason: loss.reason.name().into(),
                at_ns: loss_at,
                reported_ns: rep_ns,
            }),
            ..Default::default()
        });
        // After healing, A's stale writes are refused: locally, and by etcd's compare.
        if ga
            .put(resource_key("L"), ga.fencing_token().to_string())
            .await
            .map_err(|e| e.code())
            != Err(ErrorCode::LockLost)
        {
            self.stale += 1;
        }
        let txn = etcd_client::Txn::new()
            .when([etcd_client::Compare::create_revision(
                ga.key(),
                etcd_client::CompareOp::Equal,
                ga.fencing_token(),
            )])
            .and_then([etcd_client::TxnOp::put(
                format!("{}{}", self.ns, resource_key("L")),
                ga.fencing_token().to_string(),
                None,
            )]);
        let mut araw = r.a.etcd().await.map_err(|e| e.to_string())?;
        let heal = Instant::now();
        loop {
            match araw.txn(txn.clone()).await {
                Ok(resp) => {
                    if resp.succeeded() {
                        self.stale += 1;
                    }
                    break;
                }
                Err(_) if heal.elapsed() < Duration::from_secs(10) => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
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
                let g = a
                    .lock_with("L", LockOptions::timeout(Duration::from_secs(20)))
                    .await?;
                let at = clock_monotonic_ns();
                g.put(resource_key("L"), g.fencing_token().to_string())
                    .await?;
                Ok::<_, etcdlock::Error>((g, at))
            }
        });
        let _ = await_key_count(
            self.rawc,
            &format!("{}L/", self.ns),
            2,
            Duration::from_secs(10),
        )
        .await;
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
    client_blackholed_on(p, &Net::new(false)).await
}

/// Scenario 7 over plaintext or TLS (29).
pub async fn client_blackholed_on(p: &Profile, net: &Net) -> Outcome {
    let mut o = Outcome::new(7, net.name("client-blackholed", "client-blackholed-tls"));
    let etcd = net.etcd(1);
    let eps = net.eps(&etcd);
    let ns = unique_ns("bh");
    let mut rawc = raw(&etcd.endpoints()).await;
    let from = current_revision(&mut rawc).await;
    let checker = Checker::new();
    let proxy = Proxy::start(&eps[0]).await.expect("proxy");
    let rounds = p.rounds.clamp(2, 3);
    let mut fp = ClientBlackhole {
        net,
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
    let ClientBlackhole {
        done,
        max_since_ack,
        min_gap,
        reacquired,
        stale,
        ..
    } = fp;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.expect(done == rounds && reacquired == rounds, || {
        format!("{reacquired}/{rounds} re-acquired with a higher token")
    });
    o.expect(stale == 0, || {
        format!("{stale} stale writes accepted after healing")
    });
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
    o.expect(
        counters.last_acquired_ns.load(Ordering::Relaxed) > healed_ns,
        || "no acquisition after the last burst".into(),
    );
    o.expect(delayed > 0 && refused > 0, || {
        format!("the proxies delayed {delayed} chunks and refused {refused} connections")
    });
    o.figure = format!(
        "{bursts} bursts of 1 s on 3 proxies (delay 75±50 ms: {delayed} chunks delayed; 50% of new connections refused: {refused}; {resets} live connections reset), {} acquisitions ({in_bursts} during bursts); {}; errors: {}",
        o.acquisitions,
        r.summary(),
        counters.errors_summary()
    );
    o
}

/// The proxy drops etcd's response to one acquire Txn (etcd applied it). Even
/// rounds: a waiter's acquisition on a held lock — the call fails, and its key
/// must be gone within TTL + 1 s although its session lives on. Odd rounds: an
/// uncontended acquisition — the retry must find our key and hold the lock
/// with the right token and no extra key. `inject` arms the drop, `heal` makes
/// the acquisition and checks the client repaired what the lost response left.
pub(super) struct ResponseDrop<'a> {
    pub(super) w: &'a Client,
    pub(super) proxy: &'a Proxy,
    pub(super) ns: &'a str,
    pub(super) rawc: &'a mut etcd_client::Client,
    pub(super) checker: &'a Checker,
    pub(super) armed: Result<(i64, String), String>,
    pub(super) acquisitions: u64,
    pub(super) max_gone: i64,
    pub(super) free_ok: u32,
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
        let key = if k % 2 == 0 {
            format!("{}L/{lease:x}", self.ns)
        } else {
            format!("{}F{}/{lease:x}", self.ns, k / 2)
        };
        self.proxy.drop_response_to(key.as_bytes());
        self.armed = Ok((lease, key));
        Injected::new(1, Duration::ZERO)
    }
    async fn heal(&mut self, k: u32) -> Result<(), String> {
        let (lease, key) = std::mem::replace(&mut self.armed, Err("not armed".into()))?;
        let mut errs = Vec::new();
        if k % 2 == 0 {
            // a. A waiter's acquisition: the request is applied, the response lost; the call then fails.
            let r = self
                .w
                .lock_with("L", LockOptions::timeout(Duration::from_millis(1500)))
                .await;
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
                let ks = keys_under(self.rawc, &format!("{}L/", self.ns))
                    .await
                    .unwrap_or_default();
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
                None => errs.push(format!(
                    "waiter key {key} still there {} s after the failed acquire",
                    TTL + 5
                )),
            }
            // The session is alive, so without the cleanup the key would have stayed forever.
            if self.w.lease_id().await != Some(lease) {
                errs.push("W's session changed".into());
            }
        } else {
            // b. An uncontended acquisition whose response is lost: the retry finds our key and we hold the lock.
            let name = format!("F{}", k / 2);
            match self
                .w
                .lock_with(&name, LockOptions::timeout(Duration::from_secs(8)))
                .await
            {
                Ok(g) => {
                    let at = clock_monotonic_ns();
                    self.acquisitions += 1;
                    let ks = keys_under(self.rawc, &format!("{}{name}/", self.ns))
                        .await
                        .unwrap_or_default();
                    if ks.len() == 1
                        && ks[0].0 == g.key()
                        && ks[0].1 == g.fencing_token()
                        && !self.proxy.drop_pending()
                    {
                        self.free_ok += 1;
                    } else {
                        errs.push(format!(
                            "keys {ks:?} for guard {} token {}",
                            g.key(),
                            g.fencing_token()
                        ));
                    }
                    if let Err(e) = release(self.checker, g, at, "W").await {
                        errs.push(e);
                    }
                    if await_key_count(
                        self.rawc,
                        &format!("{}{name}/", self.ns),
                        0,
                        Duration::from_secs(5),
                    )
                    .await
                    .is_none()
                    {
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
    let holder = Client::connect(opts(&eps, &ns, 10, Duration::from_secs(2)))
        .await
        .expect("holder");
    let gh = holder.lock("L").await.expect("holder lock");
    let h_acq = clock_monotonic_ns();
    o.acquisitions += 1;
    let w = Client::connect(opts(&[proxy.endpoint()], &ns, TTL, Duration::from_secs(1)))
        .await
        .expect("W connect");
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
    let ResponseDrop {
        max_gone, free_ok, ..
    } = fp;
    if let Err(e) = release(&checker, gh, h_acq, "holder").await {
        o.fail(e);
    }
    w.close().await;
    holder.close().await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.expect(free_ok == rounds, || {
        format!("{free_ok}/{rounds} uncontended acquisitions recovered")
    });
    o.figure = format!(
        "{rounds} dropped responses to a waiter's acquire: its key gone <= {max_gone} ms after the failed call (bound TTL+1 s = {} ms); {free_ok}/{rounds} dropped responses to an uncontended acquire recovered by the retry with the right token and no extra key; {}",
        TTL * 1000 + 1000,
        r.summary()
    );
    o
}
