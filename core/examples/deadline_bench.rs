//! How late calls return past their one bound, with etcd hung (SIGSTOP) and
//! with etcd down (killed): `cargo run --release -p etcdlock --example
//! deadline_bench [ROUNDS]`. Starts its own etcd (testkit), prints p50, p99
//! and max of (returned - bound) per call kind; the target is p99 <= 100 ms.
use std::time::{Duration, Instant};

use etcdlock::{Client, ClientOptions, LockOptions};
use etcdlock_testkit::Etcd;

const RT: Duration = Duration::from_millis(500);
const LOCK_TIMEOUT: Duration = Duration::from_millis(400);

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

async fn measure(c: &Client, rounds: usize, what: &str) {
    let mut rows: Vec<(&str, Duration, Vec<f64>, String)> = Vec::new();
    for (kind, bound) in [
        ("lock(timeout 400 ms)", LOCK_TIMEOUT),
        ("try_lock", RT),
        ("status", RT),
    ] {
        let mut over = Vec::new();
        let mut codes = std::collections::BTreeMap::<String, usize>::new();
        for i in 0..rounds {
            let name = format!("bench-{i}");
            let t = Instant::now();
            let r = match kind {
                "try_lock" => c.try_lock(&name).await.map(|_| ()),
                "status" => c.status(&name).await.map(|_| ()),
                _ => c
                    .lock_with(&name, LockOptions::timeout(LOCK_TIMEOUT))
                    .await
                    .map(|_| ()),
            };
            let took = t.elapsed();
            over.push((took.as_secs_f64() - bound.as_secs_f64()) * 1000.0);
            *codes
                .entry(
                    r.err()
                        .map(|e| format!("{:?}", e.code()))
                        .unwrap_or_else(|| "ok".into()),
                )
                .or_default() += 1;
        }
        rows.push((kind, bound, over, format!("{codes:?}")));
    }
    for (kind, bound, mut over, codes) in rows {
        println!(
            "{what:<11} {kind:<22} bound {:>4} ms  past it: p50 {:>6.1} ms  p99 {:>6.1} ms  max {:>6.1} ms  outcomes {codes}",
            bound.as_millis(),
            pct(&mut over, 0.5),
            pct(&mut over, 0.99),
            pct(&mut over, 1.0)
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let mut etcd = Etcd::single();
    let c = Client::connect(
        ClientOptions::new(etcd.endpoints())
            .with_ttl(60)
            .with_request_timeout(RT),
    )
    .await
    .unwrap();
    c.lock("warm").await.unwrap().unlock().await.unwrap();
    println!(
        "{rounds} calls of each kind, request_timeout {} ms, one member",
        RT.as_millis()
    );
    etcd.pause(0);
    measure(&c, rounds, "etcd hung").await;
    etcd.resume(0);
    c.lock("warm").await.unwrap().unlock().await.unwrap();
    etcd.kill(0);
    measure(&c, rounds, "etcd down").await;
}
