//! The Rust side of ffi-c/bench.sh: on the etcd given as argument, measure
//! - `raw_txn_delete`: the floor, the two requests an uncontended lock+unlock
//!   makes (Txn put-with-lease-if-absent + range the prefix, then Delete), with
//!   a plain etcd-client (`etcdlock::bench_floor::txn_delete`, as every bench);
//! - `rust_core_async`: core `lock` + `unlock` awaited inside the runtime;
//! - `rust_core_blocking`: the same through `etcdlock::runtime::block_on` per call;
//! - `rust_rt_block_on`: the same through `Runtime::block_on` on the calling
//!   thread per call, the path the C ABI takes (a C call = one block_on).
//!
//! Prints one JSON line per measure.
//!
//! `cargo run --release -p etcdlock-ffi-bench -- ENDPOINT [ITERATIONS]`
use std::time::{Duration, Instant};

use etcdlock::runtime::block_on;
use etcdlock::{Client, ClientOptions};

fn report(metric: &str, mut v: Vec<Duration>) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0;
    println!("{{\"metric\":\"{metric}\",\"p50_ms\":{:.4},\"p99_ms\":{:.4},\"n\":{}}}", at(0.5), at(0.99), v.len());
}

fn main() {
    let mut args = std::env::args().skip(1);
    let endpoint = args.next().expect("usage: core_bench ENDPOINT [ITERATIONS]");
    let iterations: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let warm = iterations / 10;
    let pid = std::process::id();

    let ep = endpoint.clone();
    let raw = block_on(async move { etcdlock::bench_floor::txn_delete(&[ep], iterations).await }).expect("raw");
    report("raw_txn_delete", raw);

    let ep = endpoint.clone();
    let client = block_on(async move { Client::connect(ClientOptions::new([ep]).with_ttl(30)).await }).expect("connect");
    let c = client.clone();
    let name = format!("bench-rust-async-{pid}");
    let core_async = block_on(async move {
        let mut v = Vec::with_capacity(iterations);
        for i in 0..iterations + warm {
            let t = Instant::now();
            let g = c.lock(&name).await?;
            g.unlock().await?;
            if i >= warm {
                v.push(t.elapsed());
            }
        }
        Ok(v)
    })
    .expect("core async");
    report("rust_core_async", core_async);

    let name = format!("bench-rust-blocking-{pid}");
    let mut v = Vec::with_capacity(iterations);
    for i in 0..iterations + warm {
        let t = Instant::now();
        let (c, n) = (client.clone(), name.clone());
        let g = block_on(async move { c.lock(&n).await }).expect("lock");
        let g = std::sync::Arc::new(g);
        let g2 = g.clone();
        block_on(async move { g2.unlock().await }).expect("unlock");
        drop(g);
        if i >= warm {
            v.push(t.elapsed());
        }
    }
    report("rust_core_blocking", v);

    // The same with Runtime::block_on on the calling thread (what the C ABI does).
    let rt = etcdlock::runtime::runtime().expect("runtime");
    let name = format!("bench-rust-rt-block-on-{pid}");
    let mut v = Vec::with_capacity(iterations);
    for i in 0..iterations + warm {
        let t = Instant::now();
        let g = rt.block_on(client.lock(&name)).expect("lock");
        rt.block_on(g.unlock()).expect("unlock");
        drop(g);
        if i >= warm {
            v.push(t.elapsed());
        }
    }
    report("rust_rt_block_on", v);
    let _ = block_on(async move {
        client.close().await;
        Ok(())
    });
}
