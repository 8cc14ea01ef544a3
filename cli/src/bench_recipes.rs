//! `etcdlock bench --recipes`: the recipes against floors taken in the same run
//! (the same floors as the lock's bench, from `etcdlock::bench_floor`):
//!
//! - election failover after `resign()` (resign call -> the next candidate's
//!   `campaign` returns), against the Delete -> watch event floor;
//! - election failover after the leader process is killed with SIGKILL (a
//!   child `etcdlock elect`; bounded by its lease TTL, 2 s here);
//! - a 3-permit semaphore with 8 contenders, against the mutex with 8
//!   contenders in the same run;
//! - a read-write lock with 7 readers and 1 writer (reader and writer
//!   throughput, the writer's wait: no starvation);
//! - multi-locks: uncontended pair lock+unlock against the Txn+Delete floor,
//!   and 8 contenders locking random pairs of 4 names.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcdlock::{Client, ClientOptions, LockOptions};
use serde_json::json;

use crate::bench::{contended, stats, Stats};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn url(e: &str) -> String {
    if e.contains("://") {
        e.to_string()
    } else {
        format!("http://{e}")
    }
}

async fn connect(endpoints: &[String], ns: &str, ttl: i64) -> Client {
    Client::connect(
        ClientOptions::new(endpoints.to_vec())
            .with_namespace(ns)
            .with_ttl(ttl),
    )
    .await
    .expect("connect")
}

async fn wait_keys(c: &Client, name: &str, n: usize) {
    for _ in 0..2000 {
        if c.status(name)
            .await
            .map(|s| s.holders.len() + s.waiters.len())
            .unwrap_or(0)
            >= n
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("{name}: {n} contenders never queued");
}

/// Resign -> the waiting candidate elected, `rounds` times.
async fn failover_resign(endpoints: &[String], ns: &str, rounds: usize) -> Stats {
    let (a, b) = (
        connect(endpoints, ns, 10).await,
        connect(endpoints, ns, 10).await,
    );
    let mut v = Vec::with_capacity(rounds);
    let (mut leader, mut next) = (a, b);
    let mut lead = leader
        .campaign("bench-elect", "x", LockOptions::default())
        .await
        .expect("campaign");
    for _ in 0..rounds {
        let c = next.clone();
        let waiting = tokio::spawn(async move {
            let l = c.campaign("bench-elect", "y", LockOptions::default()).await;
            (l, Instant::now())
        });
        wait_keys(&leader, "bench-elect", 2).await;
        let t0 = Instant::now();
        lead.resign().await.expect("resign");
        let (l, at) = waiting.await.expect("join");
        v.push(at.saturating_duration_since(t0));
        lead = l.expect("campaign");
        std::mem::swap(&mut leader, &mut next);
    }
    lead.resign().await.expect("resign");
    leader.close().await;
    next.close().await;
    stats(v)
}

/// SIGKILL of a leader process (`etcdlock elect` with a 2 s TTL) -> our candidate elected.
async fn failover_kill(endpoints: &[String], ns: &str, rounds: usize) -> Result<Stats, String> {
    let me = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let c = connect(endpoints, ns, 10).await;
    let mut v = Vec::new();
    for i in 0..rounds {
        let value = format!("child-{i}");
        let mut child = tokio::process::Command::new(&me)
            .args([
                "--endpoints",
                &endpoints.join(","),
                "--namespace",
                ns,
                "--ttl",
                "2",
                "elect",
                "bench-elect-kill",
                &value,
                "--",
                "sleep",
                "60",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawn etcdlock elect: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if c.leader("bench-elect-kill")
                .await
                .ok()
                .flatten()
                .is_some_and(|l| l.value == value.as_bytes())
            {
                break;
            }
            if Instant::now() > deadline {
                return Err("the child never became leader".into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let cc = c.clone();
        let waiting = tokio::spawn(async move {
            let l = cc
                .campaign("bench-elect-kill", "parent", LockOptions::default())
                .await;
            (l, Instant::now())
        });
        wait_keys(&c, "bench-elect-kill", 2).await;
        let t0 = Instant::now();
        child.start_kill().map_err(|e| format!("kill: {e}"))?;
        let _ = child.wait().await;
        let (l, at) = waiting.await.map_err(|e| format!("join: {e}"))?;
        v.push(at.saturating_duration_since(t0));
        l.map_err(|e| format!("campaign: {e}"))?
            .resign()
            .await
            .map_err(|e| format!("resign: {e}"))?;
    }
    c.close().await;
    Ok(stats(v))
}

struct Run {
    per_sec: f64,
    wait: Stats,
    n: usize,
}

/// `workers` tasks, each on its own client, looping `step(client, i)` for `duration`.
async fn run_for<F, Fut>(
    endpoints: &[String],
    ns: &str,
    workers: usize,
    duration: Duration,
    step: F,
) -> Vec<Run>
where
    F: Fn(Client, usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let mut tasks = Vec::new();
    let end = Instant::now() + duration;
    for i in 0..workers {
        let c = connect(endpoints, ns, 10).await;
        let step = step.clone();
        tasks.push(tokio::spawn(async move {
            let mut waits = Vec::new();
            let t = Instant::now();
            while Instant::now() < end {
                let s = Instant::now();
                step(c.clone(), i).await;
                waits.push(s.elapsed());
            }
            let el = t.elapsed();
            c.close().await;
            (waits, el)
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        let (waits, el) = t.await.expect("join");
        out.push(Run {
            per_sec: waits.len() as f64 / el.as_secs_f64(),
            n: waits.len(),
            wait: stats(waits),
        });
    }
    out
}

fn merge(runs: &[Run]) -> (f64, usize) {
    (
        runs.iter().map(|r| r.per_sec).sum(),
        runs.iter().map(|r| r.n).sum(),
    )
}

pub async fn run(
    endpoints: &[String],
    ns: &str,
    iterations: usize,
    duration: Duration,
    json_only: bool,
) -> i32 {
    let say = |s: &str| {
        if !json_only {
            eprintln!("{s}");
        }
    };
    let urls: Vec<String> = endpoints.iter().map(|e| url(e)).collect();
    say("floors...");
    let floor = match etcdlock::bench_floor::txn_delete(&urls, iterations).await {
        Ok(v) => stats(v),
        Err(e) => {
            eprintln!("etcdlock bench --recipes: floor: {e}");
            return 1;
        }
    };
    let event = match etcdlock::bench_floor::delete_to_event(&urls, iterations).await {
        Ok(v) => stats(v),
        Err(e) => {
            eprintln!("etcdlock bench --recipes: floor: {e}");
            return 1;
        }
    };

    say("election failover after resign...");
    let resign = failover_resign(endpoints, ns, iterations.min(300)).await;
    say("election failover after kill -9 of the leader process (TTL 2 s)...");
    let kill = match failover_kill(endpoints, ns, 3).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("etcdlock bench --recipes: failover after kill: {e}");
            return 1;
        }
    };

    say("mutex and 3-permit semaphore, 8 contenders each...");
    let mutex = contended(endpoints, ns, 8, duration, false).await;
    let sem = run_for(endpoints, ns, 8, duration, |c: Client, _| async move {
        let g = c
            .acquire_permit("bench-sem", 3, LockOptions::default())
            .await
            .expect("permit");
        g.unlock().await.expect("unlock");
    })
    .await;
    let (sem_rate, sem_n) = merge(&sem);

    say("read-write lock, 7 readers and 1 writer...");
    let overlap = Arc::new(AtomicBool::new(false));
    let inside = Arc::new(Mutex::new((0u32, 0u32)));
    let (ov, ins) = (overlap.clone(), inside.clone());
    let rw = run_for(endpoints, ns, 8, duration, move |c: Client, i| {
        let (ov, ins) = (ov.clone(), ins.clone());
        async move {
            let writer = i == 0;
            let g = if writer {
                c.lock("bench-rw").await
            } else {
                c.read_lock("bench-rw", LockOptions::default()).await
            }
            .expect("rw");
            {
                let mut s = ins.lock().unwrap();
                if writer {
                    s.1 += 1
                } else {
                    s.0 += 1
                }
                if s.1 > 1 || (s.1 == 1 && s.0 > 0) {
                    ov.store(true, Ordering::Relaxed);
                }
            }
            tokio::task::yield_now().await;
            {
                let mut s = ins.lock().unwrap();
                if writer {
                    s.1 -= 1
                } else {
                    s.0 -= 1
                }
            }
            g.unlock().await.expect("unlock");
        }
    })
    .await;
    let (readers_rate, readers_n) = merge(&rw[1..]);
    let writer = &rw[0];

    say("multi-lock pairs...");
    let c = connect(endpoints, ns, 10).await;
    let mut pair = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        let m = c
            .lock_many(&["bench-pair-a", "bench-pair-b"], LockOptions::default())
            .await
            .expect("lock_many");
        m.unlock().await.expect("unlock");
        pair.push(t.elapsed());
    }
    c.close().await;
    let pair = stats(pair);
    let names = ["bench-m0", "bench-m1", "bench-m2", "bench-m3"];
    let multi = run_for(endpoints, ns, 8, duration, move |c: Client, i| async move {
        static PICK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = PICK.fetch_add(1, Ordering::Relaxed);
        let a = (i + n) % 4;
        let b = (a + 1 + n % 3) % 4;
        let m = c
            .lock_many(&[names[a], names[b]], LockOptions::default())
            .await
            .expect("lock_many");
        m.unlock().await.expect("unlock");
    })
    .await;
    let (multi_rate, multi_n) = merge(&multi);

    let rows = vec![
        json!({"metric":"floor_txn_delete","p50_ms":ms(floor.p50),"p99_ms":ms(floor.p99),"n":floor.n}),
        json!({"metric":"floor_delete_to_event","p50_ms":ms(event.p50),"p99_ms":ms(event.p99),"n":event.n}),
        json!({"metric":"election_failover_resign","p50_ms":ms(resign.p50),"p99_ms":ms(resign.p99),"n":resign.n,"ratio_to_event_floor":ms(resign.p50)/ms(event.p50)}),
        json!({"metric":"election_failover_kill9","ttl_s":2,"p50_ms":ms(kill.p50),"max_ms":ms(kill.p99),"n":kill.n}),
        json!({"metric":"mutex_8_contenders","acquisitions_per_s":mutex.per_sec,"handoff_p50_ms":ms(mutex.handoff.p50)}),
        json!({"metric":"semaphore_3_permits_8_contenders","acquisitions_per_s":sem_rate,"acquisitions":sem_n,"ratio_to_mutex":sem_rate/mutex.per_sec}),
        json!({"metric":"rwlock_7_readers_1_writer","reader_acquisitions_per_s":readers_rate,"reader_acquisitions":readers_n,"writer_acquisitions_per_s":writer.per_sec,"writer_acquisitions":writer.n,"writer_wait_p50_ms":ms(writer.wait.p50),"writer_wait_p99_ms":ms(writer.wait.p99),"exclusion_breached":overlap.load(Ordering::Relaxed)}),
        json!({"metric":"multi_lock_pair_uncontended","p50_ms":ms(pair.p50),"p99_ms":ms(pair.p99),"ratio_to_txn_delete":ms(pair.p50)/ms(floor.p50)}),
        json!({"metric":"multi_lock_pairs_8_contenders_4_names","acquisitions_per_s":multi_rate,"acquisitions":multi_n}),
    ];
    if !json_only {
        println!("| measure | result | against the floor |");
        println!("|---|---|---|");
        println!(
            "| floor: Txn+Delete | p50 {:.3} ms, p99 {:.3} ms | 1.00 |",
            ms(floor.p50),
            ms(floor.p99)
        );
        println!(
            "| floor: Delete -> watch event | p50 {:.3} ms, p99 {:.3} ms | 1.00 |",
            ms(event.p50),
            ms(event.p99)
        );
        println!(
            "| election failover after resign() ({} rounds) | p50 {:.3} ms, p99 {:.3} ms | {:.2}x Delete->event |",
            resign.n, ms(resign.p50), ms(resign.p99), ms(resign.p50) / ms(event.p50)
        );
        println!("| election failover after kill -9 of the leader process (TTL 2 s, {} rounds) | p50 {:.0} ms, max {:.0} ms | bounded by the TTL |", kill.n, ms(kill.p50), ms(kill.p99));
        println!("| mutex, 8 contenders | {:.0} acquisitions/s, handoff p50 {:.3} ms | {:.2}x Delete->event |", mutex.per_sec, ms(mutex.handoff.p50), ms(mutex.handoff.p50) / ms(event.p50));
        println!("| semaphore, 3 permits, 8 contenders | {:.0} acquisitions/s ({sem_n}) | {:.2}x the mutex's rate |", sem_rate, sem_rate / mutex.per_sec);
        println!(
            "| read-write lock, 7 readers + 1 writer | readers {:.0}/s ({readers_n}), writer {:.0}/s ({}), writer wait p50 {:.2} ms, p99 {:.2} ms | exclusion {} |",
            readers_rate,
            writer.per_sec,
            writer.n,
            ms(writer.wait.p50),
            ms(writer.wait.p99),
            if overlap.load(Ordering::Relaxed) { "BREACHED" } else { "held" }
        );
        println!("| multi-lock, a pair, uncontended lock+unlock | p50 {:.3} ms, p99 {:.3} ms | {:.2}x Txn+Delete |", ms(pair.p50), ms(pair.p99), ms(pair.p50) / ms(floor.p50));
        println!("| multi-lock, random pairs of 4 names, 8 contenders | {:.0} acquisitions/s ({multi_n}) | |", multi_rate);
        println!();
    }
    for r in rows {
        println!("{r}");
    }
    i32::from(overlap.load(Ordering::Relaxed))
}
