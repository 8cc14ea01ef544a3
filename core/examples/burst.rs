//! Memory of held locks with core as a library, as the bindings run it: the
//! shared runtime (`etcdlock::runtime`, two workers), the system allocator
//! (glibc malloc on Linux: not the CLI's mimalloc, no `malloc_trim`).
//!
//! `N` distinct locks are taken in one burst (all `N` lock calls at once) on
//! one client, hence one session; with every lock still held, the process's
//! RSS is read after `SETTLE` seconds. The same run measures the floor: a
//! plain etcd-client process that grants one lease and puts `N` keys with it
//! in one burst. Each side runs in a child process of its own (a fresh heap)
//! against one etcd the parent starts on 127.0.0.1.
//!
//! `cargo run --release -p etcdlock --example burst -- [N] [SETTLE]`
//! (defaults 10000 3). Prints one JSON line per side and a summary line.

use std::process::Command;
use std::time::{Duration, Instant};

use etcdlock::{Client, ClientOptions};

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// glibc's heap now: bytes in use and bytes free but kept (all arenas).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap_kb() -> (u64, u64) {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let m = unsafe { libc::mallinfo2() };
    (
        (m.uordblks + m.hblkhd) as u64 / 1024,
        m.fordblks as u64 / 1024,
    )
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn heap_kb() -> (u64, u64) {
    (0, 0)
}

/// The most heap in use seen, sampled every millisecond by a thread.
fn peak_sampler() -> std::sync::Arc<std::sync::atomic::AtomicU64> {
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let p = peak.clone();
    std::thread::spawn(move || loop {
        p.fetch_max(heap_kb().0, std::sync::atomic::Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(1));
    });
    peak
}

/// One side's figures: RSS before the burst, after it settled, and the time
/// the burst took.
fn report(side: &str, n: usize, before: u64, settled: u64, took: Duration, ok: usize) {
    let (in_use, free) = heap_kb();
    println!(
        "{{\"side\":\"{side}\",\"n\":{n},\"ok\":{ok},\"rss_before_kb\":{before},\"rss_settled_kb\":{settled},\"heap_in_use_kb\":{in_use},\"heap_free_kb\":{free},\"bytes_per_lock\":{:.0},\"burst_ms\":{}}}",
        (settled.saturating_sub(before) * 1024) as f64 / n.max(1) as f64,
        took.as_millis()
    );
}

/// The library: `n` lock calls at once on the shared runtime, as a binding
/// makes them.
fn library(endpoint: String, n: usize, settle: Duration) {
    let rt = etcdlock::runtime::runtime().expect("runtime");
    rt.block_on(async move {
        let opts = ClientOptions::new([endpoint]).with_namespace("burst-lib/");
        let client = Client::connect(opts).await.expect("connect");
        // Warm: the session (lease and keep-alive), the watch stream and the
        // runtime's threads exist before the baseline, as in a service.
        client
            .lock("warm")
            .await
            .expect("warm")
            .unlock()
            .await
            .expect("unlock");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = rss_kb();
        let peak = peak_sampler();
        let t = Instant::now();
        let batch: usize = std::env::var("BURST_BATCH")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(n);
        let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(batch));
        let calls: Vec<_> = (0..n)
            .map(|i| {
                let c = client.clone();
                let gate = gate.clone();
                tokio::spawn(async move {
                    let _p = gate.acquire().await;
                    c.lock(&format!("held-{i}")).await
                })
            })
            .collect();
        let mut guards = Vec::with_capacity(n);
        for call in calls {
            if let Ok(Ok(g)) = call.await {
                guards.push(g);
            }
        }
        let took = t.elapsed();
        tokio::time::sleep(settle).await;
        let settled = rss_kb();
        let held = guards.iter().filter(|g| g.is_held()).count();
        eprintln!(
            "heap peak in use: {} kB",
            peak.load(std::sync::atomic::Ordering::Relaxed)
        );
        report("etcdlock", n, before, settled, took, held);
        for g in guards {
            let _ = g.unlock().await;
        }
        client.close().await;
    });
}

/// The floor: one lease and `n` puts with it at once, plain etcd-client on
/// a runtime of the same shape.
fn raw(endpoint: String, n: usize, settle: Duration) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let client = etcd_client::Client::connect([endpoint], None)
            .await
            .expect("connect");
        let lease = client
            .lease_client()
            .grant(15, None)
            .await
            .expect("grant")
            .id();
        let (mut keeper, _stream) = client.lease_client().keep_alive(lease).await.expect("keep");
        keeper.keep_alive().await.expect("keep-alive");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = rss_kb();
        let t = Instant::now();
        let puts: Vec<_> = (0..n)
            .map(|i| {
                let mut kv = client.kv_client();
                tokio::spawn(async move {
                    let put = etcd_client::PutOptions::new().with_lease(lease);
                    kv.put(format!("burst-raw/held-{i}/{lease:x}"), "x", Some(put))
                        .await
                })
            })
            .collect();
        let mut ok = 0;
        for p in puts {
            ok += matches!(p.await, Ok(Ok(_))) as usize;
        }
        let took = t.elapsed();
        tokio::time::sleep(settle).await;
        let settled = rss_kb();
        report("raw", n, before, settled, took, ok);
        let _ = client.lease_client().revoke(lease).await;
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [side, endpoint, n, settle] = &args[..] {
        let (n, settle) = (
            n.parse().unwrap(),
            Duration::from_secs(settle.parse().unwrap()),
        );
        match side.as_str() {
            "lib" => library(endpoint.clone(), n, settle),
            _ => raw(endpoint.clone(), n, settle),
        }
        return;
    }
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let settle: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let etcd = etcdlock_testkit::Etcd::single();
    let me = std::env::current_exe().expect("own path");
    let mut rows = Vec::new();
    for side in ["raw", "lib"] {
        let out = Command::new(&me)
            .args([
                side,
                &etcd.endpoints_csv(),
                &n.to_string(),
                &settle.to_string(),
            ])
            .output()
            .expect("child");
        let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || line.is_empty() {
            eprintln!("{side} failed: {}", String::from_utf8_lossy(&out.stderr));
            std::process::exit(1);
        }
        println!("{line}");
        rows.push(serde_json::from_str::<serde_json::Value>(&line).expect("json"));
    }
    let per = |r: &serde_json::Value| r["bytes_per_lock"].as_f64().unwrap_or(0.0);
    let (raw, lib) = (per(&rows[0]), per(&rows[1]));
    println!(
        "{{\"summary\":\"{n} locks in one burst, settled {settle} s, glibc malloc\",\"etcdlock_bytes_per_lock\":{lib:.0},\"raw_bytes_per_key\":{raw:.0},\"ratio\":{:.2},\"target_bytes_per_lock\":4096,\"meets_target\":{}}}",
        lib / raw.max(1.0),
        lib <= 4096.0
    );
}
