//! `etcdlock bench`: speed measured against floors taken in the same run.
//!
//! Floors (raw etcd-client, no etcdlock):
//! - `txn_delete`: the two requests an uncontended lock+unlock must make — a
//!   Txn (put with lease if absent + range the prefix) and a Delete.
//! - `delete_to_event`: a Delete sent on one connection until the event
//!   arrives on a synced watch of another connection: the cost of a handoff.
//!
//! Then: uncontended lock+unlock, N contenders on one lock (handoff latency =
//! next holder's acquisition - previous holder's unlock call), and many
//! distinct locks held at once on one session.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp, WatchOptions};
use etcdlock::{Client, ClientOptions};
use serde_json::json;

pub struct BenchArgs {
    pub endpoints: Option<Vec<String>>,
    pub iterations: usize,
    pub contenders: usize,
    pub duration: Duration,
    pub distinct: usize,
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
    Stats { p50: at(0.50), p99: at(0.99), n: v.len() }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub async fn raw_txn_delete_floor(endpoints: &[String], iterations: usize) -> Stats {
    let mut raw = etcd_client::Client::connect(endpoints, None).await.expect("connect");
    let lease = raw.lease_grant(30, None).await.expect("lease").id();
    let prefix = format!("bench-floor-{}/", std::process::id());
    let key = format!("{prefix}{lease:x}");
    let mut v = Vec::with_capacity(iterations);
    for i in 0..iterations + iterations / 10 {
        let t = Instant::now();
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([
                TxnOp::put(key.clone(), "", Some(PutOptions::new().with_lease(lease))),
                TxnOp::get(
                    prefix.clone(),
                    Some(GetOptions::new().with_prefix().with_sort(SortTarget::Create, SortOrder::Ascend).with_limit(1)),
                ),
            ]);
        raw.txn(txn).await.expect("txn");
        raw.delete(key.clone(), None).await.expect("delete");
        if i >= iterations / 10 {
            v.push(t.elapsed()); // the first 10% warm up
        }
    }
    let _ = raw.lease_revoke(lease).await;
    stats(v)
}

pub async fn raw_delete_to_event_floor(endpoints: &[String], iterations: usize) -> Stats {
    let mut writer = etcd_client::Client::connect(endpoints, None).await.expect("connect");
    let mut watcher = etcd_client::Client::connect(endpoints, None).await.expect("connect");
    let key = format!("bench-event-{}", std::process::id());
    let mut stream = watcher.watch(key.clone(), Some(WatchOptions::new())).await.expect("watch");
    stream.message().await.expect("created");
    let mut v = Vec::with_capacity(iterations);
    for i in 0..iterations + iterations / 10 {
        writer.put(key.clone(), "x", None).await.expect("put");
        // drain the put event
        loop {
            let m = stream.message().await.expect("watch").expect("open");
            if !m.events().is_empty() {
                break;
            }
        }
        let t = Instant::now();
        writer.delete(key.clone(), None).await.expect("delete");
        loop {
            let m = stream.message().await.expect("watch").expect("open");
            if m.events().iter().any(|e| e.event_type() == etcd_client::EventType::Delete) {
                break;
            }
        }
        if i >= iterations / 10 {
            v.push(t.elapsed());
        }
    }
    stats(v)
}

pub async fn uncontended(c: &Client, iterations: usize) -> Stats {
    let mut v = Vec::with_capacity(iterations);
    for i in 0..iterations + iterations / 10 {
        let t = Instant::now();
        let g = c.lock("bench-uncontended").await.expect("lock");
        g.unlock().await.expect("unlock");
        if i >= iterations / 10 {
            v.push(t.elapsed());
        }
    }
    stats(v)
}

pub struct Contended {
    pub acquisitions: usize,
    pub per_sec: f64,
    pub wait: Stats,
    pub handoff: Stats,
}

pub async fn contended(endpoints: &[String], ns: &str, contenders: usize, duration: Duration) -> Contended {
    let mut clients = Vec::new();
    for _ in 0..contenders {
        clients.push(Client::connect(ClientOptions::new(endpoints.to_vec()).with_namespace(ns)).await.expect("connect"));
    }
    // (unlock call instant) of the previous holder, to measure handoffs.
    let last_unlock: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let waits = Arc::new(Mutex::new(Vec::new()));
    let handoffs = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let end = start + duration;
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
                    handoffs.lock().unwrap().push(acquired.saturating_duration_since(u));
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
    let waits = std::mem::take(&mut *waits.lock().unwrap());
    let handoffs = std::mem::take(&mut *handoffs.lock().unwrap());
    Contended {
        acquisitions: waits.len(),
        per_sec: waits.len() as f64 / elapsed.as_secs_f64(),
        wait: stats(waits),
        handoff: stats(handoffs),
    }
}

pub async fn distinct(c: &Client, n: usize) -> (Duration, Duration, usize) {
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..n {
        let c = c.clone();
        set.spawn(async move { c.lock(&format!("bench-distinct-{i}")).await.expect("lock") });
    }
    let mut guards = Vec::new();
    while let Some(g) = set.join_next().await {
        guards.push(g.unwrap());
    }
    let acquire = t.elapsed();
    let leases: std::collections::HashSet<i64> = guards.iter().map(|g| g.lease_id()).collect();
    assert!(guards.iter().all(|g| g.is_held()));
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for g in guards {
        set.spawn(async move { g.unlock().await.expect("unlock") });
    }
    while set.join_next().await.is_some() {}
    (acquire, t.elapsed(), leases.len())
}

pub async fn run(args: BenchArgs) -> i32 {
    let _etcd;
    let endpoints = match args.endpoints {
        Some(e) => e,
        None => {
            let e = tokio::task::spawn_blocking(etcdlock_testkit::Etcd::single).await.unwrap();
            let eps = e.endpoints();
            _etcd = e;
            eps
        }
    };
    let ns = format!("etcdlock-bench-{}/", std::process::id());
    let say = |s: String| {
        if !args.json_only {
            eprintln!("{s}");
        }
    };
    say(format!("etcd at {} - measuring floors...", endpoints.join(",")));
    let floor = raw_txn_delete_floor(&endpoints, args.iterations).await;
    let event = raw_delete_to_event_floor(&endpoints, args.iterations).await;
    let client = Client::connect(ClientOptions::new(endpoints.clone()).with_namespace(&ns)).await.expect("connect");
    say("uncontended lock+unlock...".into());
    let unc = uncontended(&client, args.iterations).await;
    say(format!("{} contenders on one lock for {:?}...", args.contenders, args.duration));
    let con = contended(&endpoints, &ns, args.contenders, args.duration).await;
    say(format!("{} distinct locks held at once on one session...", args.distinct));
    let (dist_acq, dist_rel, dist_leases) = distinct(&client, args.distinct).await;
    client.close().await;

    let r_unc = ms(unc.p50) / ms(floor.p50);
    let r_con = ms(con.handoff.p50) / ms(event.p50);
    let rows = vec![
        json!({"metric":"floor_txn_delete","p50_ms":ms(floor.p50),"p99_ms":ms(floor.p99),"n":floor.n}),
        json!({"metric":"floor_delete_to_event","p50_ms":ms(event.p50),"p99_ms":ms(event.p99),"n":event.n}),
        json!({"metric":"uncontended_lock_unlock","p50_ms":ms(unc.p50),"p99_ms":ms(unc.p99),"n":unc.n,"ratio_to_floor":r_unc,"target_ratio":1.15}),
        json!({"metric":"contended","contenders":args.contenders,"seconds":args.duration.as_secs_f64(),
               "acquisitions":con.acquisitions,"acquisitions_per_s":con.per_sec,
               "wait_p50_ms":ms(con.wait.p50),"wait_p99_ms":ms(con.wait.p99),
               "handoff_p50_ms":ms(con.handoff.p50),"handoff_p99_ms":ms(con.handoff.p99),
               "handoff_ratio_to_event_floor":r_con,"target_ratio":3.0}),
        json!({"metric":"distinct_locks_one_session","locks":args.distinct,"acquire_all_ms":ms(dist_acq),"release_all_ms":ms(dist_rel),"leases":dist_leases}),
    ];
    if !args.json_only {
        println!("| measure | p50 | p99 | ratio |");
        println!("|---|---|---|---|");
        println!("| floor: Txn+Delete (raw) | {:.3} ms | {:.3} ms | 1.00 |", ms(floor.p50), ms(floor.p99));
        println!("| floor: Delete -> watch event (raw, 2 connections) | {:.3} ms | {:.3} ms | 1.00 |", ms(event.p50), ms(event.p99));
        println!("| uncontended lock+unlock | {:.3} ms | {:.3} ms | {:.2}x Txn+Delete (target <= 1.15x) |", ms(unc.p50), ms(unc.p99), r_unc);
        println!(
            "| {} contenders, handoff (unlock -> next holder) | {:.3} ms | {:.3} ms | {:.2}x Delete->event (target <= 3x) |",
            args.contenders, ms(con.handoff.p50), ms(con.handoff.p99), r_con
        );
        println!(
            "| {} contenders, wait per acquisition | {:.3} ms | {:.3} ms | {:.0} acquisitions/s ({} in {:.0} s) |",
            args.contenders, ms(con.wait.p50), ms(con.wait.p99), con.per_sec, con.acquisitions, args.duration.as_secs_f64()
        );
        println!(
            "| {} distinct locks on one session | acquire all {:.0} ms | release all {:.0} ms | {} lease(s) |",
            args.distinct, ms(dist_acq), ms(dist_rel), dist_leases
        );
        println!();
    }
    for r in rows {
        println!("{r}");
    }
    0
}
