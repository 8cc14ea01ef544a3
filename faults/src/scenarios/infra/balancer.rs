//! 27 (and 32 over TLS). Through nginx as a gRPC load balancer that sends
//! GOAWAY every 50 requests of a client connection.

use super::*;

/// nginx's `keepalive_requests` in scenarios 27 and 32: a GOAWAY every 50 requests
/// of a client connection.
pub const KEEPALIVE_REQUESTS: u32 = 50;

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
/// nginx `grpc_pass` with `keepalive_requests 50`. Two clients loop lock, guarded put, unlock
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
