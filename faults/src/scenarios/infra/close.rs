//! 28 (and 33 over TLS). A client's `close()` while it is cut off from etcd.

use super::*;

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
