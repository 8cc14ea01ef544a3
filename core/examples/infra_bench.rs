//! The lock behind etcd's gRPC proxy and a GOAWAY-sending load balancer,
//! measured beside bare etcd in the same run (issue 47's acceptance):
//!
//! - two clients contending on one name for `CONTEND` seconds on bare etcd,
//!   then through `etcd grpc-proxy`: cycles, failed calls, handoff p50/p99;
//! - one client's lock+unlock loop for `LB` seconds through nginx
//!   `grpc_pass` with `keepalive_requests 100`: cycles, failed calls,
//!   p50/p99/max, connections nginx served (each ended by a GOAWAY);
//! - meanwhile, one hold through the proxy at the default TTL and one at
//!   TTL 5 for `HOLD` seconds: whether either was lost.
//!
//! `cargo run --release -p etcdlock --example infra_bench -- [CONTEND] [LB] [HOLD]`
//! (defaults 300 60 600).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcdlock::{Client, ClientOptions};
use etcdlock_testkit::{grpc_balancer, grpc_proxy, nginx_requests, Etcd};

fn pct(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// Two clients on `endpoint` take turns on one name for `secs`: each locks,
/// and the other's acquisition after an unlock is a handoff.
async fn contend(endpoint: String, ns: &str, secs: u64) -> (u64, u64, Vec<Duration>) {
    let released = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let failed = Arc::new(AtomicU64::new(0));
    let cycles = Arc::new(AtomicU64::new(0));
    let handoffs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let c = Client::connect(ClientOptions::new(vec![endpoint.clone()]).with_namespace(ns))
            .await
            .expect("connect");
        let (released, failed, cycles, handoffs, stop) = (
            released.clone(),
            failed.clone(),
            cycles.clone(),
            handoffs.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match c.lock("contended").await {
                    Ok(g) => {
                        if let Some(at) = released.lock().unwrap().take() {
                            handoffs.lock().unwrap().push(at.elapsed());
                        }
                        cycles.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        *released.lock().unwrap() = Some(Instant::now());
                        if g.unlock().await.is_err() {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(e) => {
                        eprintln!("lock failed: {e}");
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            c.close().await;
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let h = std::mem::take(&mut *handoffs.lock().unwrap());
    (
        cycles.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        h,
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (contend_secs, lb_secs, hold_secs) = (
        args.first().copied().unwrap_or(300),
        args.get(1).copied().unwrap_or(60),
        args.get(2).copied().unwrap_or(600),
    );
    let etcd = Etcd::single();
    let proxy = grpc_proxy(&etcd.endpoints());
    let lb = grpc_balancer(&etcd.endpoints()[0], 100);

    // The holds through the proxy run beside everything else.
    let mut holds = Vec::new();
    for ttl in [15, 5] {
        let c = Client::connect(
            ClientOptions::new(vec![proxy.endpoint()])
                .with_ttl(ttl)
                .with_namespace("bench-hold/"),
        )
        .await
        .expect("connect");
        let g = c.lock(&format!("held-ttl{ttl}")).await.expect("lock");
        holds.push((ttl, c, g));
    }
    let started = Instant::now();

    // The floor: one raw Range's round trip, on etcd and through the proxy.
    let mut floors = Vec::new();
    for ep in [etcd.endpoints()[0].clone(), proxy.endpoint()] {
        let mut raw = etcd_client::Client::connect([ep.as_str()], None)
            .await
            .expect("raw connect");
        let mut rtt = Vec::new();
        for _ in 0..2000 {
            let t = Instant::now();
            raw.get("floor", None).await.expect("raw get");
            rtt.push(t.elapsed());
        }
        floors.push(pct(&mut rtt, 0.5));
    }
    println!(
        "raw Range round trip p50: bare etcd {:?}, through the proxy {:?} ({:.2}x)",
        floors[0],
        floors[1],
        floors[1].as_secs_f64() / floors[0].as_secs_f64()
    );
    let (n, f, mut h) = contend(etcd.endpoints()[0].clone(), "bench-bare/", contend_secs).await;
    let bare = pct(&mut h, 0.5);
    println!(
        "bare etcd, 2 clients {contend_secs} s: {n} cycles, {f} failed, handoff p50 {:?} p99 {:?}",
        bare,
        pct(&mut h, 0.99)
    );
    let (n, f, mut h) = contend(proxy.endpoint(), "bench-proxy/", contend_secs).await;
    let proxied = pct(&mut h, 0.5);
    println!(
        "through etcd grpc-proxy, 2 clients {contend_secs} s: {n} cycles, {f} failed, handoff p50 {:?} p99 {:?} ({:.2}x bare)",
        proxied,
        pct(&mut h, 0.99),
        proxied.as_secs_f64() / bare.as_secs_f64()
    );

    let c = Client::connect(ClientOptions::new(vec![lb.endpoint()]).with_namespace("bench-lb/"))
        .await
        .expect("connect");
    let until = Instant::now() + Duration::from_secs(lb_secs);
    let (mut lat, mut failed) = (Vec::new(), 0u64);
    while Instant::now() < until {
        let t = Instant::now();
        match c.lock("loop").await {
            Ok(g) => {
                if g.unlock().await.is_err() {
                    failed += 1;
                }
            }
            Err(_) => failed += 1,
        }
        lat.push(t.elapsed());
    }
    let (conns, reqs) = nginx_requests(&lb);
    let n = lat.len();
    println!(
        "through nginx keepalive_requests 100, one client {lb_secs} s: {n} cycles, {failed} failed, p50 {:?} p99 {:?} max {:?}; nginx served {conns} connections, {reqs} requests",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
        pct(&mut lat, 1.0)
    );

    let left = Duration::from_secs(hold_secs).saturating_sub(started.elapsed());
    tokio::time::sleep(left).await;
    for (ttl, c, g) in holds {
        println!(
            "hold through the proxy at TTL {ttl} for {:?}: held {} (loss {:?})",
            started.elapsed(),
            g.is_held(),
            g.loss().map(|l| l.reason)
        );
        let _ = g.unlock().await;
        c.close().await;
    }
}
