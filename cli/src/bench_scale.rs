//! `etcdlock bench --waiters N / --held N`: N waiters on one lock of one
//! client (errors, FIFO order by fencing token, RSS per waiter, drain rate)
//! and N distinct locks held on one session (errors, RSS per lock, keys and
//! leases seen in etcd). RSS is this process's VmRSS before and after,
//! divided by N. Only the public API is used.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::GetOptions;
use etcdlock::{Client, ClientOptions};
use serde_json::json;

use crate::bench::{ms, BenchArgs};

/// Resident set size after handing the allocator's free pages back to the
/// OS: what the process really keeps, without the allocator's cache of a
/// burst's freed memory. mimalloc (this binary's allocator) collects every
/// thread's abandoned and free pages and purges them at once
/// (`mi_collect(true)`); glibc's `malloc_trim(0)` as well, for what the C
/// runtime allocates. Both this and the raw RSS are reported.
pub fn live_rss_bytes() -> u64 {
    // SAFETY: mi_collect takes no pointers; it only frees and purges unused pages.
    unsafe { libmimalloc_sys::mi_collect(true) };
    // SAFETY: malloc_trim only releases free heap memory; it takes no pointers of ours.
    // glibc only (musl and macOS have no malloc_trim).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0)
    };
    rss_bytes()
}

/// Resident set size of this process in bytes (`VmRSS` of /proc/self/status), 0 if unknown.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Error messages grouped (first 120 characters of each), with counts.
#[derive(Default)]
pub struct Errors(std::collections::BTreeMap<String, usize>);

impl Errors {
    fn add(&mut self, what: &str, e: &etcdlock::Error) {
        let m: String = format!("{what}: {e}").chars().take(120).collect();
        *self.0.entry(m).or_default() += 1;
    }
    /// Total errors.
    pub fn total(&self) -> usize {
        self.0.values().sum()
    }
    fn json(&self) -> serde_json::Value {
        json!(self.0)
    }
    fn summary(&self) -> String {
        if self.0.is_empty() {
            return "none".into();
        }
        let mut v: Vec<_> = self.0.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1));
        v.iter()
            .take(3)
            .map(|(m, n)| format!("{n} x {m}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Keys under `prefix` as etcd sees them: (count, distinct non-zero leases).
async fn keys_in_etcd(
    raw: &mut etcd_client::Client,
    prefix: &str,
) -> Result<(usize, usize), etcd_client::Error> {
    let r = raw
        .get(
            prefix,
            Some(GetOptions::new().with_prefix().with_keys_only()),
        )
        .await?;
    let leases: std::collections::HashSet<i64> = r
        .kvs()
        .iter()
        .map(|kv| kv.lease())
        .filter(|l| *l != 0)
        .collect();
    Ok((r.kvs().len(), leases.len()))
}

async fn count_keys(raw: &mut etcd_client::Client, prefix: &str) -> Option<usize> {
    let r = raw
        .get(
            prefix,
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .ok()?;
    Some(r.count() as usize)
}

/// `--waiters N`: N waiters on one lock, all on one client, queued behind a
/// holder on a second client; then the holder unlocks and the queue drains
/// (each waiter unlocks as soon as it holds).
pub struct Waiters {
    pub n: usize,
    pub queued: usize,
    pub queue_time: Duration,
    pub errors: Errors,
    pub granted: usize,
    /// Grants whose fencing token (= the waiter key's create_revision, i.e.
    /// its arrival order in etcd) is not above the previous grant's.
    pub fifo_violations: usize,
    pub rss_per_waiter: f64,
    /// The same before `malloc_trim` (includes the allocator's cache).
    pub rss_raw_per_waiter: f64,
    pub drain_time: Duration,
    pub drain_per_s: f64,
    pub stuck: usize,
    pub keys_left: usize,
}

pub async fn waiters(endpoints: &[String], ns: &str, n: usize) -> Result<Waiters, String> {
    const STALL: Duration = Duration::from_secs(60);
    let name = "bench-waiters";
    let prefix = format!("{ns}{name}/");
    let opts = || ClientOptions::new(endpoints.to_vec()).with_namespace(ns);
    let holder = Client::connect(opts())
        .await
        .map_err(|e| format!("holder connect: {e}"))?;
    let hg = holder
        .lock(name)
        .await
        .map_err(|e| format!("holder lock: {e}"))?;
    let client = Client::connect(opts())
        .await
        .map_err(|e| format!("waiters' client connect: {e}"))?;
    let mut raw = etcd_client::Client::connect(endpoints, None)
        .await
        .map_err(|e| format!("raw connect: {e}"))?;
    let grants: Arc<Mutex<Vec<(i64, Instant)>>> = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let errors = Arc::new(Mutex::new(Errors::default()));
    let failed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let rss0 = live_rss_bytes();
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (c, grants, errors, failed) = (
            client.clone(),
            grants.clone(),
            errors.clone(),
            failed.clone(),
        );
        let started = started.clone();
        set.spawn(async move {
            started.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            match c.lock(name).await {
                Ok(g) => {
                    // Pushed while holding: the vector's order is the grant order.
                    grants
                        .lock()
                        .unwrap()
                        .push((g.fencing_token(), Instant::now()));
                    if let Err(e) = g.unlock().await {
                        errors.lock().unwrap().add("unlock", &e);
                    }
                }
                Err(e) => {
                    failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    errors.lock().unwrap().add("lock", &e);
                }
            }
        });
    }
    // Every waiter is waiting (its call started) or failed, and etcd's queue
    // behind the holder holds as many keys as one client queues at a time
    // (the rest wait in the client, FIFO: etcdlock::QUEUED_PER_CLIENT).
    let in_etcd = n.min(etcdlock::QUEUED_PER_CLIENT);
    let mut queued: usize;
    let (mut last, mut progress) = (usize::MAX, Instant::now());
    loop {
        let done = failed.load(std::sync::atomic::Ordering::Relaxed);
        let keys = count_keys(&mut raw, &prefix)
            .await
            .map(|k| k.saturating_sub(1))
            .unwrap_or(0);
        queued = started
            .load(std::sync::atomic::Ordering::Relaxed)
            .saturating_sub(done);
        if queued + done >= n && (keys >= in_etcd || done > 0) {
            break;
        }
        if queued + done != last {
            (last, progress) = (queued + done, Instant::now());
        } else if progress.elapsed() > STALL {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let queue_time = t0.elapsed();
    let rss1_raw = rss_bytes();
    let rss1 = live_rss_bytes();
    let released = Instant::now();
    if let Err(e) = hg.unlock().await {
        errors.lock().unwrap().add("holder unlock", &e);
    }
    let mut stuck = 0;
    loop {
        match tokio::time::timeout(STALL, set.join_next()).await {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(_) => {
                stuck = set.len();
                set.abort_all();
                break;
            }
        }
    }
    let grants = std::mem::take(&mut *grants.lock().unwrap());
    let drain_time = grants
        .last()
        .map(|g| g.1.saturating_duration_since(released))
        .unwrap_or_default();
    let fifo_violations = grants.windows(2).filter(|w| w[1].0 <= w[0].0).count();
    let keys_left = count_keys(&mut raw, &prefix).await.unwrap_or(usize::MAX);
    client.close().await;
    holder.close().await;
    let errors = std::mem::take(&mut *errors.lock().unwrap());
    Ok(Waiters {
        n,
        queued,
        queue_time,
        errors,
        granted: grants.len(),
        fifo_violations,
        rss_per_waiter: rss1.saturating_sub(rss0) as f64 / n.max(1) as f64,
        rss_raw_per_waiter: rss1_raw.saturating_sub(rss0) as f64 / n.max(1) as f64,
        drain_per_s: grants.len() as f64 / drain_time.as_secs_f64().max(1e-9),
        drain_time,
        stuck,
        keys_left,
    })
}

/// `--held N` (and the default run's distinct locks): N distinct locks
/// acquired at once on one client (one session), all held, then released.
pub struct Held {
    pub n: usize,
    /// Lock calls in flight at once while taking them ([`HELD_BATCH`], or N for `--burst`).
    pub batch: usize,
    /// `--burst`: RSS per lock after the burst settled ([`BURST_SETTLE`] with
    /// every lock still held, no `malloc_trim`): what the allocator handed back
    /// by itself.
    pub rss_settled_per_lock: Option<f64>,
    pub held: usize,
    pub errors: Errors,
    pub acquire_all: Duration,
    pub release_all: Duration,
    pub rss_per_lock: f64,
    /// The same before `malloc_trim` (includes the allocator's cache).
    pub rss_raw_per_lock: f64,
    /// Keys of these locks found in etcd while all were held, and the distinct leases they carry.
    pub keys_in_etcd: usize,
    pub leases_in_etcd: usize,
    /// Distinct lease ids the guards report.
    pub guard_leases: usize,
}

pub async fn held(endpoints: &[String], ns: &str, n: usize) -> Result<Held, String> {
    held_in(endpoints, ns, n, HELD_BATCH).await
}

/// How long `--burst` waits, all locks held, before reading the settled RSS:
/// the held keys' deferred watches start 50-60 ms into a hold, and a
/// purging allocator returns the burst's freed pages within about a second.
pub const BURST_SETTLE: Duration = Duration::from_secs(3);

/// [`held`] with `batch` lock calls in flight at once; `batch >= n` is one
/// burst (`--burst N`), which also reads the RSS after [`BURST_SETTLE`].
pub async fn held_in(
    endpoints: &[String],
    ns: &str,
    n: usize,
    batch: usize,
) -> Result<Held, String> {
    let batch = batch.clamp(1, n.max(1));
    let client = Client::connect(ClientOptions::new(endpoints.to_vec()).with_namespace(ns))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let mut raw = etcd_client::Client::connect(endpoints, None)
        .await
        .map_err(|e| format!("raw connect: {e}"))?;
    let mut errors = Errors::default();
    let rss0 = live_rss_bytes();
    let t = Instant::now();
    // Taken HELD_BATCH at a time, as a service accumulates held locks: the
    // figure is what a held lock costs, not what a burst of N concurrent lock
    // calls leaves in the allocator (a 10,000-call burst measured 10.3 KB per
    // lock after malloc_trim; freed request state the allocator cannot return).
    let mut set = tokio::task::JoinSet::new();
    let mut guards = Vec::with_capacity(n);
    let mut collect = |r: Result<etcdlock::Result<etcdlock::Guard>, tokio::task::JoinError>,
                       errors: &mut Errors| match r {
        Ok(Ok(g)) => guards.push(g),
        Ok(Err(e)) => errors.add("lock", &e),
        Err(e) => *errors.0.entry(format!("task: {e}")).or_default() += 1,
    };
    for i in 0..n {
        if set.len() >= batch {
            if let Some(r) = set.join_next().await {
                collect(r, &mut errors);
            }
        }
        let c = client.clone();
        set.spawn(async move { c.lock(&format!("bench-held-{i}")).await });
    }
    while let Some(r) = set.join_next().await {
        collect(r, &mut errors);
    }
    let acquire_all = t.elapsed();
    let burst = batch >= n && n > HELD_BATCH;
    let rss_settled_per_lock = if burst {
        tokio::time::sleep(BURST_SETTLE).await;
        Some(rss_bytes().saturating_sub(rss0) as f64 / n.max(1) as f64)
    } else {
        None
    };
    let rss1_raw = rss_bytes();
    let rss1 = live_rss_bytes();
    let held = guards.iter().filter(|g| g.is_held()).count();
    let guard_leases = guards
        .iter()
        .map(|g| g.lease_id())
        .collect::<std::collections::HashSet<_>>()
        .len();
    let (keys_in_etcd, leases_in_etcd) = keys_in_etcd(&mut raw, &format!("{ns}bench-held-"))
        .await
        .map_err(|e| format!("reading the keys: {e}"))?;
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for g in guards {
        set.spawn(async move { g.unlock().await });
    }
    while let Some(r) = set.join_next().await {
        if let Ok(Err(e)) = r {
            errors.add("unlock", &e);
        }
    }
    let release_all = t.elapsed();
    client.close().await;
    Ok(Held {
        n,
        batch,
        rss_settled_per_lock,
        held,
        errors,
        acquire_all,
        release_all,
        rss_per_lock: rss1.saturating_sub(rss0) as f64 / n.max(1) as f64,
        rss_raw_per_lock: rss1_raw.saturating_sub(rss0) as f64 / n.max(1) as f64,
        keys_in_etcd,
        leases_in_etcd,
        guard_leases,
    })
}

/// The global allocator of this binary (see main.rs), and an `LD_PRELOAD`ed one if any.
pub fn allocator() -> String {
    match std::env::var("LD_PRELOAD") {
        Ok(p) if !p.is_empty() => format!("{} (LD_PRELOAD={p})", crate::ALLOCATOR),
        _ => crate::ALLOCATOR.to_string(),
    }
}

/// Lock calls in flight at once while `--held N` takes its locks.
pub const HELD_BATCH: usize = 1000;

/// The memory each waiter and each held lock may cost (RSS growth per lock).
const RSS_TARGET_BYTES: f64 = 4096.0;

pub(crate) fn waiters_row(w: &Waiters) -> serde_json::Value {
    json!({"metric":"waiters_one_lock","waiters":w.n,"queued":w.queued,"queue_ms":ms(w.queue_time),
           "errors":w.errors.total(),"error_kinds":w.errors.json(),"granted":w.granted,"stuck":w.stuck,
           "fifo_violations":w.fifo_violations,"rss_bytes_per_waiter":w.rss_per_waiter,"rss_raw_bytes_per_waiter":w.rss_raw_per_waiter,
           "drain_ms":ms(w.drain_time),"drain_acquisitions_per_s":w.drain_per_s,"keys_left":w.keys_left,
           "target":{"errors":0,"rss_bytes_per_waiter":RSS_TARGET_BYTES},
           "meets_target": w.errors.total() == 0 && w.stuck == 0 && w.granted == w.n && w.fifo_violations == 0 && w.rss_per_waiter <= RSS_TARGET_BYTES})
}

fn held_row(h: &Held) -> serde_json::Value {
    let settled = h.rss_settled_per_lock;
    json!({"metric":if settled.is_some() {"burst_locks_one_session"} else {"held_locks_one_session"},
           "locks":h.n,"calls_in_flight":h.batch,"held":h.held,"rss_settled_bytes_per_lock":settled,"allocator":allocator(),"errors":h.errors.total(),"error_kinds":h.errors.json(),
           "acquire_all_ms":ms(h.acquire_all),"release_all_ms":ms(h.release_all),"rss_bytes_per_lock":h.rss_per_lock,"rss_raw_bytes_per_lock":h.rss_raw_per_lock,
           "keys_in_etcd":h.keys_in_etcd,"leases_in_etcd":h.leases_in_etcd,"guard_leases":h.guard_leases,
           "target":{"errors":0,"rss_bytes_per_lock":RSS_TARGET_BYTES},
           "meets_target": h.errors.total() == 0 && h.held == h.n && settled.unwrap_or(h.rss_per_lock) <= RSS_TARGET_BYTES})
}

pub(crate) fn print_waiters(w: &Waiters) {
    println!(
        "| {} waiters on one lock, one client | queued {} in {:.0} ms | {} granted, {} errors, {} stuck, {} FIFO violations | {:.1} KB live RSS per waiter (after purging the allocator; target <= 4 KB; {:.1} KB before it); drain {:.0} acquisitions/s ({:.0} ms); {} keys left |",
        w.n,
        w.queued,
        ms(w.queue_time),
        w.granted,
        w.errors.total(),
        w.stuck,
        w.fifo_violations,
        w.rss_per_waiter / 1024.0,
        w.rss_raw_per_waiter / 1024.0,
        w.drain_per_s,
        ms(w.drain_time),
        w.keys_left
    );
    if w.errors.total() > 0 {
        println!("|   errors | {} | | |", w.errors.summary());
    }
}

pub(crate) fn print_held(h: &Held) {
    let how = if h.batch >= h.n {
        "all in one burst".to_string()
    } else {
        format!("taken {} calls at a time", h.batch)
    };
    let settled = match h.rss_settled_per_lock {
        Some(s) => format!("{:.1} KB RSS per lock {:.0} s after the burst, no trim (target <= 4 KB; allocator: {}); ", s / 1024.0, BURST_SETTLE.as_secs_f64(), allocator()),
        None => String::new(),
    };
    println!(
        "| {} distinct locks held on one session ({how}) | acquire all {:.0} ms, release all {:.0} ms | {} held, {} errors | {settled}{:.1} KB live RSS per lock (after purging the allocator; target <= 4 KB; {:.1} KB before it); {} keys / {} lease(s) in etcd |",
        h.n,
        ms(h.acquire_all),
        ms(h.release_all),
        h.held,
        h.errors.total(),
        h.rss_per_lock / 1024.0,
        h.rss_raw_per_lock / 1024.0,
        h.keys_in_etcd,
        h.leases_in_etcd
    );
    if h.errors.total() > 0 {
        println!("|   errors | {} | | |", h.errors.summary());
    }
}

/// `--waiters N` / `--held N`: the scale measurements alone (targets: 0
/// errors and <= 4 KB RSS each at 10,000).
pub async fn scale(args: &BenchArgs, endpoints: &[String], ns: &str) -> i32 {
    let mut rows = Vec::new();
    let mut failed = false;
    if !args.json_only {
        println!("| measure | time | outcome | per item |");
        println!("|---|---|---|---|");
    }
    if let Some(n) = args.waiters {
        if !args.json_only {
            eprintln!("{n} waiters on one lock, one client...");
        }
        match waiters(endpoints, ns, n).await {
            Ok(w) => {
                if !args.json_only {
                    print_waiters(&w);
                }
                rows.push(waiters_row(&w));
            }
            Err(e) => {
                eprintln!("etcdlock bench --waiters: {e}");
                failed = true;
            }
        }
    }
    let held_runs = args
        .held
        .map(|n| (n, HELD_BATCH))
        .into_iter()
        .chain(args.burst.map(|n| (n, n)));
    for (n, batch) in held_runs {
        if !args.json_only {
            eprintln!(
                "{n} distinct locks held at once on one session, {batch} lock calls at a time..."
            );
        }
        match held_in(endpoints, ns, n, batch).await {
            Ok(h) => {
                if !args.json_only {
                    print_held(&h);
                }
                rows.push(held_row(&h));
            }
            Err(e) => {
                eprintln!("etcdlock bench --held/--burst: {e}");
                failed = true;
            }
        }
    }
    if !args.json_only {
        println!();
    }
    for r in rows {
        println!("{r}");
    }
    i32::from(failed)
}
