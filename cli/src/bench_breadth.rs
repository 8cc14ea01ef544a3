//! `etcdlock bench --breadth`: many independent locks at once. `clients`
//! clients (each its own connection and session) lock and unlock names drawn
//! at random from `names` distinct ones, for `duration`. Beside it, in
//! alternating phases of the same length in the same process, etcd's own
//! write ceiling for the same requests: as many raw etcd-client connections,
//! each with a lease of its own, making the Txn+Delete floor's round
//! ([`etcdlock::bench_floor::txn_delete_round`]: the same Txn a lock makes,
//! then the Delete an unlock makes) on names drawn the same way, as fast as
//! etcd answers. Raw rounds never wait for each other (each has a key of its
//! own), so no lock can do more; the ratio of the two rates is what the
//! locking costs. Client CPU per acquisition is this process's user+system
//! CPU during a phase divided by its acquisitions (etcd runs in another
//! process). etcd's CPU per acquisition (its `process_cpu_seconds_total`)
//! and its KV requests per acquisition (`grpc_server_handled_total`) come
//! from the first member's `/metrics` before and after each phase: on a
//! machine that etcd shares with the clients, the two CPUs together are what
//! an acquisition costs. Go's Mutex doing the same: `go-mutex -breadth-clients`
//! (`bench/breadth.sh` runs both against one etcd).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcdlock::{Client, ClientOptions};
use serde_json::json;

use crate::bench::{ms, stats, Stats};

pub struct Phase {
    pub acquisitions: usize,
    pub per_s: f64,
    /// lock (or the raw Txn) call -> it returned.
    pub acquire: Stats,
    /// lock + unlock (or Txn + Delete).
    pub cycle: Stats,
    pub cpu_us_per_acquisition: f64,
    /// etcd's own CPU (its `process_cpu_seconds_total`) per acquisition, if
    /// its `/metrics` answered; with the client's CPU, what the 2 cores spend.
    pub etcd_cpu_us_per_acquisition: Option<f64>,
    /// etcd's KV requests (Range, Put, DeleteRange, Txn) per acquisition.
    pub kv_requests_per_acquisition: Option<f64>,
    pub errors: usize,
}

/// etcd's CPU seconds and its completed KV requests so far, from `/metrics`
/// of a plain-`http://` member (what the harness starts); None otherwise.
#[derive(Clone, Copy)]
struct EtcdCounters {
    cpu_s: f64,
    kv_requests: f64,
}

async fn etcd_counters(endpoint: &str) -> Option<EtcdCounters> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = endpoint.strip_prefix("http://")?.trim_end_matches('/');
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).await.ok()?;
    let value = |l: &str| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
    let mut c = EtcdCounters {
        cpu_s: f64::NAN,
        kv_requests: 0.0,
    };
    for l in body.lines() {
        if l.starts_with("process_cpu_seconds_total ") {
            c.cpu_s = value(l)?;
        } else if l.starts_with("grpc_server_handled_total{")
            && l.contains("grpc_service=\"etcdserverpb.KV\"")
        {
            c.kv_requests += value(l)?;
        }
    }
    (!c.cpu_s.is_nan()).then_some(c)
}

async fn etcd_delta(endpoint: &str, before: Option<EtcdCounters>, p: &mut Phase) {
    if let (Some(b), Some(a)) = (before, etcd_counters(endpoint).await) {
        let n = p.acquisitions.max(1) as f64;
        p.etcd_cpu_us_per_acquisition = Some((a.cpu_s - b.cpu_s) * 1e6 / n);
        p.kv_requests_per_acquisition = Some((a.kv_requests - b.kv_requests) / n);
    }
}

/// This process's user + system CPU time (zero where getrusage is missing).
#[cfg(not(unix))]
fn cpu_time() -> Duration {
    Duration::ZERO
}

/// This process's user + system CPU time.
#[cfg(unix)]
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// A small xorshift generator per task (no shared state, no dependency).
struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

type Samples = (Vec<Duration>, Vec<Duration>, usize);

fn phase(results: Vec<Samples>, elapsed: Duration, cpu: Duration) -> Phase {
    let (mut acq, mut cyc, mut errors) = (Vec::new(), Vec::new(), 0);
    for (a, c, e) in results {
        acq.extend(a);
        cyc.extend(c);
        errors += e;
    }
    let n = cyc.len();
    let empty = || Stats {
        p50: Duration::ZERO,
        p99: Duration::ZERO,
        n: 0,
    };
    Phase {
        acquisitions: n,
        per_s: n as f64 / elapsed.as_secs_f64(),
        acquire: if acq.is_empty() { empty() } else { stats(acq) },
        cycle: if cyc.is_empty() { empty() } else { stats(cyc) },
        cpu_us_per_acquisition: cpu.as_secs_f64() * 1e6 / n.max(1) as f64,
        etcd_cpu_us_per_acquisition: None,
        kv_requests_per_acquisition: None,
        errors,
    }
}

/// etcd's ceiling: `conns` raw connections making Txn+Delete rounds on random names.
async fn ceiling(
    raw: &[(etcd_client::Client, i64)],
    ns: &str,
    names: usize,
    duration: Duration,
    seed: u64,
) -> Phase {
    let stop = Arc::new(AtomicBool::new(false));
    let (t0, c0) = (Instant::now(), cpu_time());
    let mut tasks = Vec::new();
    for (i, (c, lease)) in raw.iter().enumerate() {
        let (mut c, lease, stop, ns) = (c.clone(), *lease, stop.clone(), ns.to_string());
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng::new(seed + i as u64);
            let (mut cyc, mut errors) = (Vec::new(), 0);
            while !stop.load(Ordering::Relaxed) {
                let key = format!("{ns}breadth-{}/{lease:x}", rng.below(names));
                match etcdlock::bench_floor::txn_delete_round(&mut c, &key, lease).await {
                    Ok(d) => cyc.push(d),
                    Err(_) => errors += 1,
                }
            }
            (Vec::new(), cyc, errors)
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap_or_default());
    }
    phase(out, t0.elapsed(), cpu_time() - c0)
}

/// etcdlock: `clients` clients locking and unlocking random names.
async fn ours(clients: &[Client], names: usize, duration: Duration, seed: u64) -> Phase {
    let stop = Arc::new(AtomicBool::new(false));
    let (t0, c0) = (Instant::now(), cpu_time());
    let mut tasks = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let (c, stop) = (c.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng::new(seed + i as u64);
            let (mut acq, mut cyc, mut errors) = (Vec::new(), Vec::new(), 0);
            while !stop.load(Ordering::Relaxed) {
                let name = format!("breadth-{}", rng.below(names));
                let t = Instant::now();
                match c.lock(&name).await {
                    Ok(g) => {
                        let got = t.elapsed();
                        match g.unlock().await {
                            Ok(_) => {
                                acq.push(got);
                                cyc.push(t.elapsed());
                            }
                            Err(_) => errors += 1,
                        }
                    }
                    Err(_) => errors += 1,
                }
            }
            (acq, cyc, errors)
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap_or_default());
    }
    phase(out, t0.elapsed(), cpu_time() - c0)
}

fn row(what: &str, p: &Phase, extra: serde_json::Value) -> serde_json::Value {
    let mut v = json!({"metric":what,"acquisitions":p.acquisitions,"acquisitions_per_s":p.per_s,
        "acquire_p50_ms":ms(p.acquire.p50),"acquire_p99_ms":ms(p.acquire.p99),
        "cycle_p50_ms":ms(p.cycle.p50),"cycle_p99_ms":ms(p.cycle.p99),
        "client_cpu_us_per_acquisition":p.cpu_us_per_acquisition,"errors":p.errors,
        "etcd_cpu_us_per_acquisition":p.etcd_cpu_us_per_acquisition,"kv_requests_per_acquisition":p.kv_requests_per_acquisition});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    v
}

/// Alternating phases (`rounds` of ceiling, then etcdlock), each `duration` long.
pub async fn run(
    endpoints: &[String],
    ns: &str,
    clients: usize,
    names: usize,
    duration: Duration,
    json_only: bool,
) -> i32 {
    let rounds = 2;
    let mut ours_clients = Vec::with_capacity(clients);
    let mut raw = Vec::with_capacity(clients);
    for _ in 0..clients {
        match Client::connect(ClientOptions::new(endpoints.to_vec()).with_namespace(ns)).await {
            Ok(c) => ours_clients.push(c),
            Err(e) => {
                eprintln!("etcdlock bench --breadth: connect: {e}");
                return 1;
            }
        }
        let r = async {
            let mut c = etcd_client::Client::connect(endpoints, None).await?;
            let lease = c.lease_grant(60, None).await?.id();
            Ok::<_, etcd_client::Error>((c, lease))
        };
        match r.await {
            Ok(r) => raw.push(r),
            Err(e) => {
                eprintln!("etcdlock bench --breadth: raw connect: {e}");
                return 1;
            }
        }
    }
    // Warm-up: every connection and session used (with 0.5 s the first etcdlock
    // phase after it measured 0.30-0.67 of the ceiling and the second 0.79-1.18).
    let warm = Duration::from_secs(2);
    let _ = ceiling(&raw, ns, names, warm, 0).await;
    let _ = ours(&ours_clients, names, warm, 0).await;
    let mut rows = Vec::new();
    let (mut ceil_all, mut ours_all) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        if !json_only {
            eprintln!("round {}/{rounds}: etcd's ceiling (raw Txn+Delete), then etcdlock, {duration:?} each...", r + 1);
        }
        let before = etcd_counters(&endpoints[0]).await;
        let mut c = ceiling(&raw, ns, names, duration, 1000 * (r as u64 + 1)).await;
        etcd_delta(&endpoints[0], before, &mut c).await;
        let before = etcd_counters(&endpoints[0]).await;
        let mut o = ours(&ours_clients, names, duration, 7000 * (r as u64 + 1)).await;
        etcd_delta(&endpoints[0], before, &mut o).await;
        rows.push(row(
            "breadth_etcd_ceiling",
            &c,
            json!({"round":r+1,"clients":clients,"names":names,"seconds":duration.as_secs_f64()}),
        ));
        rows.push(row(
            "breadth_etcdlock",
            &o,
            json!({"round":r+1,"clients":clients,"names":names,"seconds":duration.as_secs_f64(),"ratio_to_ceiling":o.per_s / c.per_s.max(1e-9)}),
        ));
        ceil_all.push(c);
        ours_all.push(o);
    }
    for (mut c, lease) in raw {
        let _ = c.lease_revoke(lease).await;
    }
    for c in ours_clients {
        c.close().await;
    }
    if !json_only {
        println!("| round | etcd ceiling (raw Txn+Delete) acquisitions/s | etcdlock acquisitions/s | ratio | etcdlock lock p50 / p99 | lock+unlock p50 / p99 (ceiling) | client CPU per acquisition (ceiling) | errors |");
        println!("|---|---|---|---|---|---|---|---|");
        for (i, (c, o)) in ceil_all.iter().zip(&ours_all).enumerate() {
            println!(
                "| {} | {:.0} | {:.0} | **{:.2}** | {:.2} / {:.2} ms | {:.2} / {:.2} ms ({:.2} / {:.2} ms) | {:.0} us ({:.0} us) | {} ({}) |",
                i + 1,
                c.per_s,
                o.per_s,
                o.per_s / c.per_s.max(1e-9),
                ms(o.acquire.p50),
                ms(o.acquire.p99),
                ms(o.cycle.p50),
                ms(o.cycle.p99),
                ms(c.cycle.p50),
                ms(c.cycle.p99),
                o.cpu_us_per_acquisition,
                c.cpu_us_per_acquisition,
                o.errors,
                c.errors
            );
        }
        println!();
    }
    for r in rows {
        println!("{r}");
    }
    i32::from(ours_all.iter().any(|o| o.errors > 0))
}
