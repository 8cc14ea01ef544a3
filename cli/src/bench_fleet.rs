//! `etcdlock bench --fleet`: one process of a client fleet (issue 60), driven
//! by `bench/fleet.sh` over stdin/stdout. `--clients` clients, each its own
//! `Client` (connection, lease, keep-alive) as that many processes would
//! have, each holding `--locks` locks on distinct names, and `--fleet-waiters`
//! more lock calls queued on names the fleet already holds. One JSON line per
//! event on stdout:
//! - `{"event":"holding",...}` once every hold is in and every waiter's key is
//!   in etcd (a count of the fleet's prefix);
//! - then stdin `window` starts the steady window (keep-alive gaps are
//!   recorded from then on) and `release` (or EOF) ends it;
//! - `{"event":"done",...}`: holds lost, false losses (a lost hold whose key
//!   etcd still has under a live lease, asked when the loss is reported;
//!   seconds from "holding" to the first and last loss), and the
//!   keep-alive gaps: for a sample of clients, the step of a guard's
//!   `valid_until` (send time of the last acknowledged keep-alive + TTL -
//!   margin), polled every 100 ms: the time between the sends of two
//!   acknowledged keep-alives, exact whenever one keep-alive fell between
//!   two polls.
//!
//! With `--clients 0` the process is the probe instead: one client locking
//! and unlocking one uncontended name every `--probe-pace` during the window.
//! Messages, CPU, RSS and open files are measured from outside (etcd's
//! `/metrics`, `/proc`), the same way for etcdlock's and Go's fleet.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcdlock::{Client, ClientOptions, Guard};
use serde_json::json;
use tokio::sync::Semaphore;

use crate::bench::{ms, stats};

pub struct FleetArgs {
    pub clients: usize,
    pub locks: usize,
    pub waiters: usize,
    /// Lock names start with it (distinct per process).
    pub prefix: String,
    /// Clients whose keep-alive gaps are sampled.
    pub sample: usize,
    /// The probe's pace (with `clients == 0`).
    pub probe_pace: Duration,
}

/// How many connects or lock calls run at once while the fleet forms.
const SETUP_PARALLEL: usize = 16;

fn emit(v: serde_json::Value) {
    println!("{v}");
}

/// stdin lines to a channel: `window`, `release`; EOF counts as `release`.
fn commands() -> tokio::sync::mpsc::UnboundedReceiver<String> {
    // A thread of its own (the CLI's tokio has no `io-std`): blocking reads.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for l in std::io::stdin().lines() {
            let Ok(l) = l else { break };
            if tx.send(l.trim().to_string()).is_err() {
                return;
            }
        }
        let _ = tx.send("release".into());
    });
    rx
}

async fn until(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>, what: &str) {
    while let Some(l) = rx.recv().await {
        if l == what || l == "release" {
            return;
        }
    }
}

pub async fn run(opts: ClientOptions, a: FleetArgs) -> i32 {
    if a.clients == 0 {
        return probe(opts, a).await;
    }
    let t0 = Instant::now();
    let mut rx = commands();
    // Connect: each client its own connection and session.
    let sem = Arc::new(Semaphore::new(SETUP_PARALLEL));
    let mut tasks = Vec::with_capacity(a.clients);
    for _ in 0..a.clients {
        let (sem, o) = (sem.clone(), opts.clone());
        tasks.push(tokio::spawn(async move {
            let _p = sem.acquire_owned().await;
            // Connect ends Unavailable when no member answers within the
            // connect timeout (many clients forming at once on a loaded
            // machine): try again, as a service would, and count it.
            let mut retries = 0usize;
            loop {
                match Client::connect(o.clone()).await {
                    Ok(c) => return Ok((c, retries)),
                    Err(e) if e.code() == etcdlock::ErrorCode::Unavailable && retries < 10 => {
                        retries += 1
                    }
                    Err(e) => return Err(e),
                }
            }
        }));
    }
    let (mut clients, mut connect_retries) = (Vec::with_capacity(a.clients), 0);
    for t in tasks {
        match t.await {
            Ok(Ok((c, r))) => {
                clients.push(c);
                connect_retries += r;
            }
            Ok(Err(e)) => {
                emit(
                    json!({"event":"error","stage":"connect","connected":clients.len(),"error":e.to_string()}),
                );
                return 1;
            }
            Err(e) => {
                emit(json!({"event":"error","stage":"connect","error":e.to_string()}));
                return 1;
            }
        }
    }
    let connect_s = t0.elapsed().as_secs_f64();
    // Hold: every client takes its locks one after the other, clients in parallel.
    let mut tasks = Vec::with_capacity(a.clients);
    for (i, c) in clients.iter().enumerate() {
        let (sem, c, prefix, locks) = (sem.clone(), c.clone(), a.prefix.clone(), a.locks);
        tasks.push(tokio::spawn(async move {
            let _p = sem.acquire_owned().await;
            let (mut gs, mut retries) = (Vec::with_capacity(locks), 0usize);
            for j in 0..locks {
                // A lock call ends Unavailable when no member answers within
                // the request timeout (a loaded machine, many clients forming
                // at once): try again, as a service would, and count it.
                let name = format!("{prefix}c{i}-l{j}");
                let mut tries = 0;
                loop {
                    match c.lock(&name).await {
                        Ok(g) => break gs.push(g),
                        Err(e) if e.code() == etcdlock::ErrorCode::Unavailable && tries < 10 => {
                            tries += 1;
                            retries += 1;
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            Ok::<_, etcdlock::Error>((gs, retries))
        }));
    }
    let mut guards: Vec<Vec<Guard>> = Vec::with_capacity(a.clients);
    let mut setup_retries = 0;
    for t in tasks {
        match t.await {
            Ok(Ok((g, r))) => {
                guards.push(g);
                setup_retries += r;
            }
            Ok(Err(e)) => {
                emit(
                    json!({"event":"error","stage":"lock","holding_clients":guards.len(),"error":e.to_string()}),
                );
                return 1;
            }
            Err(e) => {
                emit(json!({"event":"error","stage":"lock","error":e.to_string()}));
                return 1;
            }
        }
    }
    // Waiters: client (w+1) queues on the first name client w holds.
    let waiters = if a.locks == 0 {
        0
    } else {
        a.waiters.min(a.clients)
    };
    let waiter_errors = Arc::new(Mutex::new(0usize));
    let mut waiting = Vec::with_capacity(waiters);
    for w in 0..waiters {
        let c = clients[(w + 1) % clients.len()].clone();
        let (name, errs) = (format!("{}c{w}-l0", a.prefix), waiter_errors.clone());
        waiting.push(tokio::spawn(async move {
            // Never granted while the fleet holds; aborted (its key deleted) at release.
            if c.lock(&name).await.is_err() {
                *errs.lock().unwrap() += 1;
            }
        }));
    }
    let holds = a.clients * a.locks;
    let mut kv = match clients[0].etcd().await {
        Ok(k) => k,
        Err(e) => {
            emit(json!({"event":"error","stage":"etcd","error":e.to_string()}));
            return 1;
        }
    };
    let mut prefix = clients[0].namespace().to_vec();
    prefix.extend_from_slice(a.prefix.as_bytes());
    let queued_by = Instant::now() + Duration::from_secs(120);
    let keys = loop {
        let n = kv
            .get(
                prefix.clone(),
                Some(
                    etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_count_only(),
                ),
            )
            .await
            .map(|r| r.count() as usize)
            .unwrap_or(0);
        if n >= holds + waiters || Instant::now() > queued_by {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    emit(
        json!({"event":"holding","pid":std::process::id(),"clients":a.clients,"holds":holds,
        "waiters":waiters,"keys":keys,"setup_retries":setup_retries,"connect_retries":connect_retries,"connect_s":connect_s,"setup_s":t0.elapsed().as_secs_f64()}),
    );

    // Losses as they happen: a loss is false if etcd, asked at once, still has
    // the key under a live lease. One watcher per client, on its first hold:
    // the losses a fleet meets (connection lost, lease expired) end every
    // hold of the session together. Asked after the step instead, a lease
    // that the client stopped renewing would have expired by then.
    let formed = Instant::now();
    let verdicts = Arc::new(Mutex::new(Vec::<(usize, f64, bool)>::new()));
    let mut watchers = Vec::with_capacity(a.clients);
    for (i, gs) in guards.iter().enumerate() {
        let Some(g) = gs.first() else { continue };
        let (mut signal, key, lease) = (g.lost_signal(), g.key_bytes().to_vec(), g.lease_id());
        let (mut kv, verdicts) = (kv.clone(), verdicts.clone());
        watchers.push(tokio::spawn(async move {
            if signal.wait().await.is_some() {
                let at = formed.elapsed().as_secs_f64();
                let lives = kv
                    .lease_time_to_live(lease, None)
                    .await
                    .map(|r| r.ttl() > 0);
                let has = kv.get(key, None).await.map(|r| !r.kvs().is_empty());
                let false_loss = matches!((lives, has), (Ok(true), Ok(true)));
                verdicts.lock().unwrap().push((i, at, false_loss));
            }
        }));
    }

    // Keep-alive gaps of a sample of clients, recorded inside the window.
    let recording = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let step = (a.clients / a.sample.clamp(1, a.clients)).max(1);
    let guards = Arc::new(guards);
    let sampled: Vec<usize> = (0..a.clients)
        .step_by(step)
        .filter(|&i| !guards[i].is_empty())
        .collect();
    let sampled_n = sampled.len();
    let sampler = {
        let (recording, stop, guards) = (recording.clone(), stop.clone(), guards.clone());
        tokio::spawn(async move {
            let sampled: Vec<&Guard> = sampled.iter().map(|&i| &guards[i][0]).collect();
            let mut last: Vec<Instant> = sampled.iter().map(|g| g.valid_until()).collect();
            let mut gaps = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
                for (g, l) in sampled.iter().zip(last.iter_mut()) {
                    let v = g.valid_until();
                    if v > *l {
                        if recording.load(Ordering::Relaxed) {
                            gaps.push(v - *l);
                        }
                        *l = v;
                    }
                }
            }
            gaps
        })
    };
    until(&mut rx, "window").await;
    recording.store(true, Ordering::Relaxed);
    until(&mut rx, "release").await;
    recording.store(false, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let gaps = sampler.await.unwrap_or_default();

    // Losses: each client's holds lost by the window's end count as false if
    // its watcher found the lease alive and the key present.
    let (mut lost, mut false_losses) = (0usize, 0usize);
    let mut reasons = std::collections::BTreeMap::<String, usize>::new();
    let verdicts = std::mem::take(&mut *verdicts.lock().unwrap());
    let false_clients: std::collections::HashSet<usize> =
        verdicts.iter().filter(|v| v.2).map(|v| v.0).collect();
    for (i, gs) in guards.iter().enumerate() {
        for g in gs {
            if let Some(l) = g.loss() {
                lost += 1;
                *reasons.entry(l.reason.to_string()).or_default() += 1;
                false_losses += usize::from(false_clients.contains(&i));
            }
        }
    }
    let first_loss_s = verdicts.iter().map(|v| v.1).reduce(f64::min);
    let last_loss_s = verdicts.iter().map(|v| v.1).reduce(f64::max);
    for w in &watchers {
        w.abort();
    }
    let held_at_end = guards.iter().flatten().filter(|g| g.is_held()).count();
    for w in &waiting {
        w.abort();
    }
    let waiter_errors = *waiter_errors.lock().unwrap();
    // Release: unlock every hold, then close (revokes the leases).
    let t_rel = Instant::now();
    let mut tasks = Vec::with_capacity(a.clients);
    for i in 0..guards.len() {
        let (sem, guards) = (sem.clone(), guards.clone());
        tasks.push(tokio::spawn(async move {
            let _p = sem.acquire_owned().await;
            let mut errors = 0usize;
            for g in &guards[i] {
                if g.unlock().await.is_err() {
                    errors += 1;
                }
            }
            errors
        }));
    }
    let mut unlock_errors = 0;
    for t in tasks {
        unlock_errors += t.await.unwrap_or(0);
    }
    for c in &clients {
        c.close().await;
    }
    let n = gaps.len();
    let g = (!gaps.is_empty()).then(|| {
        let max = *gaps.iter().max().unwrap();
        (stats(gaps), max)
    });
    emit(
        json!({"event":"done","clients":a.clients,"holds":holds,"held_at_end":held_at_end,
        "lost":lost,"lost_reasons":reasons,"false_losses":false_losses,"clients_lost":verdicts.len(),
        "first_loss_s":first_loss_s,"last_loss_s":last_loss_s,
        "waiter_errors":waiter_errors,"unlock_errors":unlock_errors,
        "release_s":t_rel.elapsed().as_secs_f64(),
        "sampled_clients":sampled_n,
        "keepalive_gaps":n,
        "keepalive_gap_p50_ms":g.map(|g| ms(g.0.p50)),"keepalive_gap_p99_ms":g.map(|g| ms(g.0.p99)),
        "keepalive_gap_max_ms":g.map(|g| ms(g.1))}),
    );
    0
}

/// One client locking and unlocking `<prefix>probe` every `probe_pace`
/// during the window: lock+unlock latency while the fleet holds.
async fn probe(opts: ClientOptions, a: FleetArgs) -> i32 {
    let mut rx = commands();
    let c = match Client::connect(opts).await {
        Ok(c) => c,
        Err(e) => {
            emit(json!({"event":"error","stage":"connect","error":e.to_string()}));
            return 1;
        }
    };
    let name = format!("{}probe", a.prefix);
    // One warm-up round, so the first sample is not the first use.
    if let Ok(g) = c.lock(&name).await {
        let _ = g.unlock().await;
    }
    emit(json!({"event":"holding","pid":std::process::id(),"clients":0}));
    until(&mut rx, "window").await;
    let stop = Arc::new(AtomicBool::new(false));
    let task = {
        let (c, stop, pace) = (c.clone(), stop.clone(), a.probe_pace);
        tokio::spawn(async move {
            let (mut v, mut errors) = (Vec::new(), 0usize);
            let mut tick = tokio::time::interval(pace);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let t = Instant::now();
                match c.lock(&name).await {
                    Ok(g) => match g.unlock().await {
                        Ok(()) => v.push(t.elapsed()),
                        Err(_) => errors += 1,
                    },
                    Err(_) => errors += 1,
                }
            }
            (v, errors)
        })
    };
    until(&mut rx, "release").await;
    stop.store(true, Ordering::Relaxed);
    let (v, errors) = task.await.unwrap_or_default();
    c.close().await;
    let s = (!v.is_empty()).then(|| stats(v));
    emit(
        json!({"event":"done","probe":true,"n":s.map(|s| s.n).unwrap_or(0),"errors":errors,
        "p50_ms":s.map(|s| ms(s.p50)),"p99_ms":s.map(|s| ms(s.p99))}),
    );
    0
}
