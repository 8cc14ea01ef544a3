//! `etcdlock bench`: speed measured against floors taken in the same run.
//!
//! Floors (raw etcd-client, no etcdlock), from `etcdlock::bench_floor`, the one
//! definition every binding's bench uses too:
//! - `txn_delete`: the two requests an uncontended lock+unlock must make — a
//!   Txn (put with lease if absent + read the owner, the prefix's first key) and a Delete.
//! - `delete_to_event`: a Delete sent on one connection until the event
//!   arrives on a synced watch of another connection: the cost of a handoff.
//!
//! Then: uncontended lock+unlock (measured in blocks alternating with the
//! Txn+Delete floor, so both see the same load), N contenders on one lock (handoff latency =
//! next holder's acquisition - previous holder's unlock call), and many
//! distinct locks held at once on one session.
//!
//! `--waiters N` / `--held N` run only the scale measurements: N waiters on
//! one lock of one client (errors, FIFO order by fencing token, RSS per
//! waiter, drain rate) and N distinct locks held on one session (errors, RSS
//! per lock, keys and leases seen in etcd). RSS is this process's VmRSS
//! before and after, divided by N. Only the public API is used.
//!
//! `--burst N`: N distinct locks taken in one burst (all N calls at once),
//! RSS per lock after the burst settled. `--breadth`: many clients locking
//! random names beside etcd's own ceiling for the same requests
//! (`bench_breadth`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcdlock::{Client, ClientOptions};
use serde_json::json;

use crate::bench_scale::{held, print_held, scale};

pub struct BenchArgs {
    pub endpoints: Option<Vec<String>>,
    pub iterations: usize,
    pub contenders: usize,
    pub duration: Duration,
    pub distinct: usize,
    /// Run only the scale measurements: N waiters on one lock / N held locks.
    pub waiters: Option<usize>,
    pub held: Option<usize>,
    /// Run only N distinct locks taken in one burst (all N lock calls at once).
    pub burst: Option<usize>,
    /// Run only the breadth measurement: (clients, names), see `bench_breadth`.
    pub breadth: Option<(usize, usize)>,
    /// Run only the recipes' measurements (`bench_recipes`).
    pub recipes: bool,
    pub json_only: bool,
}

#[derive(Clone, Copy)]
pub struct Stats {
    pub p50: Duration,
    pub p99: Duration,
    pub n: usize,
}

pub fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    Stats {
        p50: at(0.50),
        p99: at(0.99),
        n: v.len(),
    }
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub struct Contended {
    pub acquisitions: usize,
    pub per_sec: f64,
    pub wait: Stats,
    pub handoff: Stats,
    /// The Delete->event floor measured during the run, beside the
    /// contenders (a probe round every [`PROBE_PACE`]): the handoff's floor
    /// under the same load. `None` unless asked for.
    pub loaded_event: Option<Stats>,
}

/// How often the loaded-floor probe makes a round (a put and a delete): at
/// 8 contenders about 6 % of etcd's writes.
pub const PROBE_PACE: Duration = Duration::from_millis(10);

/// `contenders` clients take turns on one lock for `duration`; with `probe`,
/// the Delete->event floor is measured beside them on connections of its own.
pub async fn contended(
    endpoints: &[String],
    ns: &str,
    contenders: usize,
    duration: Duration,
    probe: bool,
) -> Contended {
    let mut clients = Vec::new();
    for _ in 0..contenders {
        clients.push(
            Client::connect(ClientOptions::new(endpoints.to_vec()).with_namespace(ns))
                .await
                .expect("connect"),
        );
    }
    // (unlock call instant) of the previous holder, to measure handoffs.
    let last_unlock: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let waits = Arc::new(Mutex::new(Vec::new()));
    let handoffs = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let end = start + duration;
    let probe = probe.then(|| {
        let eps = endpoints.to_vec();
        tokio::spawn(async move {
            etcdlock::bench_floor::delete_to_event_until(&eps, end, PROBE_PACE).await
        })
    });
    let mut tasks = Vec::new();
    for c in clients {
        let (last_unlock, waits, handoffs) = (last_unlock.clone(), waits.clone(), handoffs.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                let t = Instant::now();
                let g = c.lock("bench-contended").await.expect("lock");
                let acquired = Instant::now();
                waits.lock().unwrap().push(acquired - t);
                if let Some(u) = last_unlock.lock().unwrap().take() {
                    handoffs
                        .lock()
                        .unwrap()
                        .push(acquired.saturating_duration_since(u));
                }
                *last_unlock.lock().unwrap() = Some(Instant::now());
                g.unlock().await.expect("unlock");
            }
            c.close().await;
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = start.elapsed();
    let loaded_event = match probe {
        Some(p) => match p
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
        {
            Ok(v) if !v.is_empty() => Some(stats(v)),
            Ok(_) => None,
            Err(e) => {
                eprintln!("etcdlock bench: the loaded-floor probe failed: {e}");
                None
            }
        },
        None => None,
    };
    let waits = std::mem::take(&mut *waits.lock().unwrap());
    let handoffs = std::mem::take(&mut *handoffs.lock().unwrap());
    Contended {
        acquisitions: waits.len(),
        per_sec: waits.len() as f64 / elapsed.as_secs_f64(),
        wait: stats(waits),
        handoff: stats(handoffs),
        loaded_event,
    }
}

pub async fn run(args: BenchArgs) -> i32 {
    let _etcd;
    let endpoints = match args.endpoints.clone() {
        Some(e) => e,
        None => {
            // Not spawn_blocking: the harness starts etcd with PR_SET_PDEATHSIG,
            // which fires when the *thread* that spawned it exits, and an idle
            // blocking-pool thread exits after 10 s: etcd died mid-run. This
            // thread (the runtime's block_on thread, main) lives as long as we do.
            #[cfg(target_os = "linux")]
            {
                let e = tokio::task::block_in_place(etcdlock_testkit::Etcd::single);
                let eps = e.endpoints();
                _etcd = e;
                eps
            }
            #[cfg(not(target_os = "linux"))]
            {
                _etcd = ();
                eprintln!("etcdlock: bench needs --endpoints on this platform (no private etcd)");
                return crate::exit::USAGE;
            }
        }
    };
    let ns = format!("etcdlock-bench-{}/", std::process::id());
    let say = |s: String| {
        if !args.json_only {
            eprintln!("{s}");
        }
    };
    if let Some((clients, names)) = args.breadth {
        return crate::bench_breadth::run(
            &endpoints,
            &ns,
            clients,
            names,
            args.duration,
            args.json_only,
        )
        .await;
    }
    if args.waiters.is_some() || args.held.is_some() || args.burst.is_some() {
        return scale(&args, &endpoints, &ns).await;
    }
    if args.recipes {
        return crate::bench_recipes::run(
            &endpoints,
            &ns,
            args.iterations,
            args.duration,
            args.json_only,
        )
        .await;
    }
    say(format!(
        "etcd at {} - measuring floors and uncontended lock+unlock (interleaved)...",
        endpoints.join(",")
    ));
    let client = Client::connect(ClientOptions::new(endpoints.clone()).with_namespace(&ns))
        .await
        .expect("connect");
    let floors = async {
        // The Txn+Delete floor and our lock+unlock in alternating blocks: both
        // see the same machine load.
        // On a runtime task (a worker thread), as an application's code runs,
        // not on the thread that entered the runtime (`block_on`): there every
        // request hands off to a worker and back.
        let (eps, c, n) = (endpoints.clone(), client.clone(), args.iterations);
        let (floor, unc) = tokio::spawn(async move {
            etcdlock::bench_floor::interleaved(&eps, &c, "bench-uncontended", n).await
        })
        .await
        .map_err(|e| etcdlock::Error::new(etcdlock::ErrorCode::Internal, e.to_string()))??;
        let event = etcdlock::bench_floor::delete_to_event(&endpoints, args.iterations).await?;
        Ok::<_, etcdlock::Error>((stats(floor), stats(unc), stats(event)))
    };
    let (floor, unc, event) = match floors.await {
        Ok(f) => f,
        Err(e) => {
            eprintln!("etcdlock bench: measuring the floors: {e}");
            return 1;
        }
    };
    say(format!(
        "{} contenders on one lock for {:?}...",
        args.contenders, args.duration
    ));
    let con = contended(&endpoints, &ns, args.contenders, args.duration, true).await;
    say(format!(
        "{} distinct locks held at once on one session...",
        args.distinct
    ));
    client.close().await;
    let dist = match held(&endpoints, &ns, args.distinct).await {
        Ok(h) => h,
        Err(e) => {
            eprintln!("etcdlock bench: {e}");
            return 1;
        }
    };

    let r_unc = ms(unc.p50) / ms(floor.p50);
    let r_con = ms(con.handoff.p50) / ms(event.p50);
    // The same handoff against the floor measured beside the contenders.
    let loaded = con
        .loaded_event
        .map(|l| (ms(l.p50), ms(l.p99), l.n, ms(con.handoff.p50) / ms(l.p50)));
    let rows = vec![
        json!({"metric":"floor_txn_delete","p50_ms":ms(floor.p50),"p99_ms":ms(floor.p99),"n":floor.n}),
        json!({"metric":"floor_delete_to_event","p50_ms":ms(event.p50),"p99_ms":ms(event.p99),"n":event.n}),
        json!({"metric":"uncontended_lock_unlock","p50_ms":ms(unc.p50),"p99_ms":ms(unc.p99),"n":unc.n,"ratio_to_floor":r_unc,"target_ratio":1.05}),
        json!({"metric":"contended","contenders":args.contenders,"seconds":args.duration.as_secs_f64(),
               "acquisitions":con.acquisitions,"acquisitions_per_s":con.per_sec,
               "wait_p50_ms":ms(con.wait.p50),"wait_p99_ms":ms(con.wait.p99),
               "handoff_p50_ms":ms(con.handoff.p50),"handoff_p99_ms":ms(con.handoff.p99),
               "handoff_ratio_to_event_floor":r_con,"target_ratio":1.5,
               "loaded_event_floor_p50_ms":loaded.map(|l| l.0),"loaded_event_floor_p99_ms":loaded.map(|l| l.1),
               "loaded_event_floor_n":loaded.map(|l| l.2),"handoff_ratio_to_loaded_event_floor":loaded.map(|l| l.3)}),
        json!({"metric":"distinct_locks_one_session","locks":dist.n,"held":dist.held,"errors":dist.errors.total(),
               "acquire_all_ms":ms(dist.acquire_all),"release_all_ms":ms(dist.release_all),"leases":dist.leases_in_etcd,
               "rss_bytes_per_lock":dist.rss_per_lock}),
    ];
    if !args.json_only {
        println!("| measure | p50 | p99 | ratio |");
        println!("|---|---|---|---|");
        println!(
            "| floor: Txn+Delete (raw) | {:.3} ms | {:.3} ms | 1.00 |",
            ms(floor.p50),
            ms(floor.p99)
        );
        println!(
            "| floor: Delete -> watch event (raw, 2 connections) | {:.3} ms | {:.3} ms | 1.00 |",
            ms(event.p50),
            ms(event.p99)
        );
        println!("| uncontended lock+unlock | {:.3} ms | {:.3} ms | {:.2}x Txn+Delete (target <= 1.05x) |", ms(unc.p50), ms(unc.p99), r_unc);
        println!(
            "| {} contenders, handoff (unlock -> next holder) | {:.3} ms | {:.3} ms | {:.2}x Delete->event (target <= 1.5x) |",
            args.contenders, ms(con.handoff.p50), ms(con.handoff.p99), r_con
        );
        if let Some((p50, p99, n, r)) = loaded {
            println!(
                "| floor: Delete -> watch event, measured beside the {} contenders ({n} rounds) | {p50:.3} ms | {p99:.3} ms | handoff = {r:.2}x this floor |",
                args.contenders
            );
        }
        println!(
            "| {} contenders, wait per acquisition | {:.3} ms | {:.3} ms | {:.0} acquisitions/s ({} in {:.0} s) |",
            args.contenders, ms(con.wait.p50), ms(con.wait.p99), con.per_sec, con.acquisitions, args.duration.as_secs_f64()
        );
        print_held(&dist);
        println!();
    }
    for r in rows {
        println!("{r}");
    }
    0
}
