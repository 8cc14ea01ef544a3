//! What stands between clients and etcd in larger installations: etcd's own
//! gRPC proxy (it coalesces lease keep-alives and watches) and a gRPC load
//! balancer that ends connections with GOAWAY (nginx `grpc_pass`). Real
//! processes on 127.0.0.1, started here: a hold lives as long as its lease
//! does, waiters are handed the lock, and no call fails for a GOAWAY.
mod common;

use std::time::{Duration, Instant};

use common::*;
use etcdlock::{Client, ClientOptions, Renewal};
use etcdlock_testkit::{grpc_balancer, grpc_proxy, nginx_requests, Etcd, Front};

fn through(front: &Front, ns: &str, ttl: i64) -> ClientOptions {
    ClientOptions::new(vec![front.endpoint()])
        .with_ttl(ttl)
        .with_namespace(ns)
}

/// The lease's remaining TTL at etcd itself (asked directly, not through the front).
async fn remaining_at_etcd(etcd: &Etcd, lease: i64) -> i64 {
    let mut c = etcd_client::Client::connect(etcd.endpoints(), None)
        .await
        .unwrap();
    c.lease_time_to_live(lease, None)
        .await
        .map(|t| t.ttl())
        .unwrap_or(-1)
}

/// Holds `name` on `c` for `secs`, checking every 100 ms that it is held and
/// that renewal was never reported failing; returns the guard.
async fn hold_for(c: &Client, name: &str, secs: u64, renewal_ok: bool) -> etcdlock::Guard {
    let g = c.lock(name).await.expect("lock through the front");
    let mut renewal = g.renewal_changes();
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            r = renewal.changed() => {
                r.unwrap();
                let now = *renewal.borrow_and_update();
                assert!(!renewal_ok || now == Renewal::Ok, "renewal reported failing through the front: {now:?}");
            }
        }
        assert!(
            g.is_held(),
            "the hold ended while its lease lived: {:?}",
            g.loss()
        );
    }
    g
}

/// etcd's gRPC proxy answers a client's keep-alive with the answer etcd gives
/// to its own renewal, up to TTL/3 + 0.5 s later. Such a late answer is not a
/// dead member: a hold through the proxy lives as long as its lease lives
/// (at TTL 5 and 2, for over three TTLs), renewal is never reported
/// failing at TTL 5, and etcd's view of the lease agrees. Before the session asked etcd about late
/// answers, the hold was reported lost after 4.5 s at TTL 5, 13 s at TTL 15.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_through_the_grpc_proxy_lives_as_long_as_its_lease() {
    let etcd = Etcd::single();
    let proxy = grpc_proxy(&etcd.endpoints());
    for ttl in [5, 2] {
        let ns = unique_ns("proxy-hold");
        let c = Client::connect(through(&proxy, &ns, ttl))
            .await
            .expect("connect through the proxy");
        // At TTL 2 the proxy's renewals (every TTL/3 + up to 0.5 s) may come
        // later than the renewal signal's bound (interval + silence): the hold
        // lives, the signal may say failing between them.
        let g = hold_for(&c, "held", 3 * ttl as u64 + 1, ttl >= 5).await;
        let left = remaining_at_etcd(&etcd, g.lease_id()).await;
        assert!(left > 0, "etcd has the lease: remaining {left} s");
        g.unlock().await.unwrap();
        c.close().await;
    }
}

/// 40 handoffs from `a` to a waiter on `b`: how long each waiter took to
/// acquire after the unlock began, sorted.
async fn handoffs(ns: &str, a: Client, b: Client) -> Vec<Duration> {
    let mut times = Vec::new();
    for _ in 0..40 {
        let g = a.lock("h").await.unwrap();
        let waiter = {
            let b = b.clone();
            tokio::spawn(async move {
                let g = b.lock("h").await.unwrap();
                let at = Instant::now();
                g.unlock().await.unwrap();
                at
            })
        };
        // Queued: two keys under the name.
        await_key_count(&a, &format!("{ns}h/"), 2).await;
        let released = Instant::now();
        g.unlock().await.unwrap();
        times.push(waiter.await.unwrap() - released);
    }
    times.sort();
    times
}

/// Waiters queued through the proxy are handed the lock at each unlock, and
/// the proxy's watch coalescing adds no tick: 40 handoffs between two clients
/// through the proxy, each within a bound far under etcd's 100 ms unsynced
/// watch loop (the median is printed beside bare etcd's, measured in this
/// run). The proxy killed: the holder's loss is reported before a client
/// connected to etcd directly acquires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_through_the_grpc_proxy_are_handed_the_lock() {
    let etcd = Etcd::single();
    let mut proxy = grpc_proxy(&etcd.endpoints());
    let ns = unique_ns("proxy-handoff");
    let direct = handoffs(
        &ns,
        client(&etcd, &ns, 5).await,
        client(&etcd, &ns, 5).await,
    )
    .await;
    let a = Client::connect(through(&proxy, &ns, 5)).await.unwrap();
    let b = Client::connect(through(&proxy, &ns, 5)).await.unwrap();
    let proxied = handoffs(&ns, a.clone(), b).await;
    println!(
        "handoff median: bare etcd {:?}, through the proxy {:?} (max {:?})",
        direct[20], proxied[20], proxied[39]
    );
    assert!(
        proxied[20] < Duration::from_millis(50),
        "a handoff through the proxy took {:?} (median)",
        proxied[20]
    );

    // The proxy killed while `a` holds: its loss is reported before a client
    // on etcd itself acquires.
    let g = a.lock("k").await.unwrap();
    let direct_client = client(&etcd, &ns, 5).await;
    proxy.kill();
    let got = direct_client.lock("k").await.unwrap();
    let acquired = Instant::now();
    let loss = g
        .loss()
        .expect("the hold through the killed proxy is lost before another client acquires");
    println!(
        "proxy killed: loss {:?} ({:?}) before the direct client acquired",
        acquired - loss.at,
        loss.reason
    );
    assert!(loss.at < acquired);
    got.unlock().await.unwrap();
}

/// A load balancer sends GOAWAY after a number of requests on a connection
/// (nginx: `keepalive_requests`, here 100): the connection takes no new
/// streams, while the streams on it (the session's keep-alive, the watch
/// stream) go on. New requests go to a new connection at once: 1,100
/// lock/unlock cycles (over 20 GOAWAYs) with no failed call and none near the
/// request timeout, while another hold on the same session lives throughout
/// and a waiter through the balancer is handed it at the end. Before: every
/// request on a connection after its GOAWAY failed until its bound (5 s
/// `Timeout`s, 12 of 511 cycles in 60 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_call_fails_for_a_load_balancers_goaway() {
    let etcd = Etcd::single();
    let lb = grpc_balancer(&etcd.endpoints()[0], 100);
    let ns = unique_ns("goaway");
    let c = Client::connect(through(&lb, &ns, 5))
        .await
        .expect("connect through nginx");
    let held = c.lock("held").await.unwrap();
    let waiter_client = Client::connect(through(&lb, &ns, 5)).await.unwrap();
    let waiter =
        tokio::spawn(async move { waiter_client.lock("held").await.map(|g| (g, waiter_client)) });
    let mut worst = Duration::ZERO;
    for i in 0..1100 {
        let t = Instant::now();
        let cycle = async {
            let g = c
                .lock("loop")
                .await
                .unwrap_or_else(|e| panic!("cycle {i}: lock failed: {e}"));
            g.unlock()
                .await
                .unwrap_or_else(|e| panic!("cycle {i}: unlock failed: {e}"));
        };
        tokio::time::timeout(Duration::from_secs(5), cycle)
            .await
            .unwrap_or_else(|_| panic!("cycle {i} took over 5 s"));
        worst = worst.max(t.elapsed());
    }
    let (conns, requests) = nginx_requests(&lb);
    println!("1100 cycles through nginx: {conns} connections, {requests} requests, slowest cycle {worst:?}");
    assert!(
        conns >= 21,
        "nginx served {conns} connections (>= 20 GOAWAYs expected)"
    );
    assert!(worst < Duration::from_secs(1), "a cycle took {worst:?}");
    assert!(
        held.is_held(),
        "the hold ended across GOAWAYs: {:?}",
        held.loss()
    );
    let released = Instant::now();
    held.unlock().await.unwrap();
    let (g, _w) = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("waiter handed the lock")
        .unwrap()
        .unwrap();
    println!(
        "waiter handed the lock {:?} after the unlock",
        released.elapsed()
    );
    g.unlock().await.unwrap();
    c.close().await;
}
