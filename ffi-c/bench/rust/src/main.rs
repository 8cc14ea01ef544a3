//! The Rust side of ffi-c/bench.sh: on the etcd given as argument, measure
//! - `raw_txn_delete`: the floor, the two requests an uncontended lock+unlock
//!   makes (Txn put-with-lease-if-absent + range the prefix, then Delete), with
//!   a plain etcd-client (`etcdlock::bench_floor::txn_delete`, as every bench);
//! - `rust_core_async`: core `lock` + `unlock` awaited inside the runtime;
//! - `rust_core_blocking`: the same through `etcdlock::runtime::block_on` per call;
//! - `rust_rt_block_on`: the same through `Runtime::block_on` on the calling
//!   thread per call, the path the C ABI takes (a C call = one block_on);
//! - `rust_core_handoff`: [`CONTENDERS`] contenders, each its own client (its
//!   own connection and session), on one lock name, each looping lock ->
//!   unlock (no work in between) for ITERATIONS acquisitions after a tenth as
//!   many as warm-up. Handoff = the instant the next holder's `lock` returned
//!   minus the instant the previous holder called `unlock` (taken just before
//!   the call), as `etcdlock bench` measures it; every binding's bench measures
//!   it the same way (`bench/languages.sh`). Reports handoff p50/p99, the lock
//!   wait p50 (call to return) and acquisitions/s;
//! - `thread_wake`: what one thread waking another costs on this machine, the
//!   cost a binding's call pays once per completion (a runtime worker reads
//!   the answer and wakes the caller's thread or event loop) and the core's
//!   tasks do not: the instant a parked thread resumes minus the instant
//!   another, busy until then, called `unpark` for it, ITERATIONS times (no
//!   etcd involved). On a VM, waking a thread on an idle CPU costs most (the
//!   hypervisor must run that virtual CPU again).
//!
//! Prints one JSON line per measure.
//!
//! `cargo run --release -p etcdlock-ffi-bench -- ENDPOINT [ITERATIONS]`
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcdlock::runtime::block_on;
use etcdlock::{Client, ClientOptions};

fn report(metric: &str, mut v: Vec<Duration>) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0;
    println!(
        "{{\"metric\":\"{metric}\",\"p50_ms\":{:.4},\"p99_ms\":{:.4},\"n\":{}}}",
        at(0.5),
        at(0.99),
        v.len()
    );
}

/// Contenders in the handoff case: 8, as `etcdlock bench` and issue 33 item 2.
const CONTENDERS: usize = 8;

/// What the contenders share, touched only by the holder of the lock.
#[derive(Default)]
struct Turns {
    /// Acquisitions so far (warm-up included).
    taken: usize,
    /// When the last holder called unlock.
    last_unlock: Option<Instant>,
    handoffs: Vec<Duration>,
    waits: Vec<Duration>,
    /// When the first measured acquisition happened, and the last one.
    first: Option<Instant>,
    last: Option<Instant>,
}

/// The handoff case: `CONTENDERS` clients take turns on one lock name for
/// `warm + acquisitions` acquisitions; handoffs are recorded after the warm-up.
fn handoff(endpoint: &str, acquisitions: usize, warm: usize) {
    let rt = etcdlock::runtime::runtime().expect("runtime");
    let name = format!("bench-rust-handoff-{}", std::process::id());
    let turns = Arc::new(Mutex::new(Turns::default()));
    let total = warm + acquisitions;
    let mut clients = Vec::new();
    for _ in 0..CONTENDERS {
        let ep = endpoint.to_string();
        clients.push(
            rt.block_on(Client::connect(ClientOptions::new([ep]).with_ttl(30)))
                .expect("connect"),
        );
    }
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|c| {
            let (turns, name) = (turns.clone(), name.clone());
            rt.spawn(async move {
                loop {
                    let t = Instant::now();
                    let g = c.lock(&name).await.expect("lock");
                    let acquired = Instant::now();
                    let done = {
                        let mut s = turns.lock().unwrap();
                        let k = s.taken;
                        s.taken += 1;
                        if k >= warm && k < total {
                            if let Some(u) = s.last_unlock {
                                s.handoffs.push(acquired.saturating_duration_since(u));
                            }
                            s.waits.push(acquired - t);
                            s.first.get_or_insert(acquired);
                            s.last = Some(acquired);
                        }
                        s.last_unlock = Some(Instant::now());
                        k + 1 >= total
                    };
                    g.unlock().await.expect("unlock");
                    if done {
                        break;
                    }
                }
                c.close().await;
            })
        })
        .collect();
    for t in tasks {
        rt.block_on(t).expect("contender");
    }
    let s = std::mem::take(&mut *turns.lock().unwrap());
    let per_s = match (s.first, s.last) {
        (Some(a), Some(b)) if b > a => (s.waits.len() - 1) as f64 / (b - a).as_secs_f64(),
        _ => 0.0,
    };
    let mut h = s.handoffs;
    let mut w = s.waits;
    h.sort();
    w.sort();
    let at = |v: &[Duration], q: f64| {
        v[((v.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0
    };
    println!(
        "{{\"metric\":\"rust_core_handoff\",\"contenders\":{CONTENDERS},\"p50_ms\":{:.4},\"p99_ms\":{:.4},\"n\":{},\"wait_p50_ms\":{:.4},\"acquisitions_per_s\":{:.1}}}",
        at(&h, 0.5),
        at(&h, 0.99),
        h.len(),
        at(&w, 0.5),
        per_s
    );
}

/// One thread parks, another stamps the time and unparks it; the woken
/// thread stamps its own resume. Each sample is that one-way wake-up.
fn thread_wake(iterations: usize) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let base = Instant::now();
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let go = Arc::new(AtomicBool::new(false));
    let (s, g) = (sent.clone(), go.clone());
    let (tx, rx) = std::sync::mpsc::channel::<std::thread::Thread>();
    let sleeper = std::thread::spawn(move || {
        let mut v = Vec::with_capacity(iterations);
        tx.send(std::thread::current()).unwrap();
        for _ in 0..iterations {
            while !g.swap(false, Ordering::AcqRel) {
                std::thread::park();
            }
            let at = base.elapsed().as_nanos() as u64;
            v.push(Duration::from_nanos(
                at.saturating_sub(s.load(Ordering::Acquire)),
            ));
            tx.send(std::thread::current()).unwrap();
        }
        v
    });
    let mut them = rx.recv().unwrap();
    for _ in 0..iterations {
        // Busy for 200 us, as a worker is when it wakes a caller (it has just
        // read the answer), and the sleeper parked by then: the sleeper is
        // woken on the other CPU, as a binding's caller usually is.
        let busy = Instant::now();
        while busy.elapsed() < Duration::from_micros(200) {
            std::hint::spin_loop();
        }
        sent.store(base.elapsed().as_nanos() as u64, Ordering::Release);
        go.store(true, Ordering::Release);
        them.unpark();
        them = rx.recv().unwrap();
    }
    report("thread_wake", sleeper.join().unwrap());
}

fn main() {
    let mut args = std::env::args().skip(1);
    let endpoint = args
        .next()
        .expect("usage: core_bench ENDPOINT [ITERATIONS]");
    let iterations: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let warm = iterations / 10;
    let pid = std::process::id();

    let ep = endpoint.clone();
    let raw = block_on(async move { etcdlock::bench_floor::txn_delete(&[ep], iterations).await })
        .expect("raw");
    report("raw_txn_delete", raw);

    let ep = endpoint.clone();
    let client =
        block_on(async move { Client::connect(ClientOptions::new([ep]).with_ttl(30)).await })
            .expect("connect");
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
    handoff(&endpoint, iterations, warm);
    thread_wake(iterations);
    let _ = block_on(async move {
        client.close().await;
        Ok(())
    });
}
