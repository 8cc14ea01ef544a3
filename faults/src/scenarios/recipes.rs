//! The recipes (semaphore, read-write lock, election, multi-lock) under a
//! paused holder and a killed member.

use super::*;

/// Scenario 14: a holder process SIGSTOPped for 2×TTL (then one killed with SIGKILL) while it holds through each
/// recipe in turn: a 1-permit semaphore, a read lock (a writer waits behind
/// it), an election and a multi-lock. As in scenario 2: the waiter takes over
/// within TTL + 1 s with a higher token, and the resumed holder reports its
/// loss and has its stale writes refused.
pub async fn recipes_holder_sigstop(_p: &Profile) -> Outcome {
    let mut o = Outcome::new(14, "recipes-holder-sigstop");
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("rstop");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Checker::new();
    let wc = Client::connect(opts(&eps, &ns, 10, Duration::from_secs(2)))
        .await
        .expect("waiter connect");
    let (mut stale, mut reported, mut done, mut killed) = (0u32, 0u32, 0u32, 0u32);
    let (mut waits, mut kill_waits) = (Vec::new(), Vec::new());
    const KINDS: [&str; 4] = ["permit", "read", "campaign", "many"];
    for kind in KINDS {
        let mut spec = holder_spec(&eps, &ns, 1);
        spec["kind"] = json!(kind);
        let child = match spawn_holder(HolderLang::Rust, spec) {
            Ok(c) => c,
            Err(e) => {
                o.fail(format!("{kind}: {e}"));
                continue;
            }
        };
        let mut fp = HolderPause::new(HolderLang::Rust, kind, child, &wc, &mut rawc, &checker, &ns);
        let r = run_rounds(&mut fp, Duration::ZERO, 1).await;
        o.faults += r.faults;
        o.acquisitions += fp.acquisitions;
        for f in r.failures {
            o.fail(format!("{kind}: {f}"));
        }
        if let Err(e) = fp.child.expect("DONE", Duration::from_secs(20)).await {
            o.fail(format!("{kind}: {e}"));
        }
        fp.child.kill9().await;
        stale += fp.stale_ok + fp.raw_ok;
        reported += fp.reported;
        done += fp.done;
        waits.push(format!("{kind} {:.2} s", secs(fp.max_wait)));
        // The same hold, its process killed with SIGKILL: the permit (read
        // lock, leadership, locks) is freed by its lease within TTL + 1 s.
        let mut fk = HolderKill::new(HolderLang::Rust, kind, &eps, &wc, &mut rawc, &checker, &ns);
        let r = run_rounds(&mut fk, Duration::ZERO, 1).await;
        o.faults += r.faults;
        o.acquisitions += fk.acquisitions;
        for f in r.failures {
            o.fail(format!("{kind} kill -9: {f}"));
        }
        killed += fk.done;
        kill_waits.push(format!("{kind} {:.2} s", secs(fk.max_wait)));
    }
    wc.close().await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    let n = KINDS.len() as u32;
    o.expect(done == n, || format!("{done}/{n} rounds completed"));
    o.expect(reported == n, || format!("{reported}/{n} losses reported"));
    o.expect(stale == 0, || format!("{stale} stale writes accepted"));
    o.expect(killed == n, || {
        format!("{killed}/{n} kill -9 rounds completed")
    });
    o.figure = format!(
        "{done} SIGSTOP rounds (semaphore, read lock behind which a writer waits, election, multi-lock), waiter took over after SIGSTOP in {} (TTL {TTL} s, bound {} s), {reported}/{n} losses reported, {stale} stale writes accepted; {killed} kill -9 rounds, waiter took over in {}; {}",
        waits.join(", "),
        TTL + 1,
        kill_waits.join(", "),
        r.summary()
    );
    o
}

/// One client of the recipe workload: a 2-permit semaphore `S`, the
/// read-write lock `R` (readers and writers), the election `E`, and pairs of
/// `M0..M2` through multi-locks, picked at random; every hold is recorded
/// (`S#p2`, `R#r`, `R#w` for the shared checks; `E`, `Mi` as exclusive locks
/// with a guarded resource write).
pub(super) async fn recipe_client(
    idx: usize,
    eps: Vec<String>,
    ns: String,
    checker: Arc<Checker>,
    counters: Arc<Counters>,
    stop: CancellationToken,
) {
    let id = format!("recipes-c{idx}");
    let mut rng = Rng::new(seed() ^ ((idx as u64 + 1) * 104_729));
    let Some(client) = crate::connect_until(
        opts(&eps, &ns, TTL, Duration::from_secs(1)),
        &counters,
        &stop,
    )
    .await
    else {
        return;
    };
    while !stop.is_cancelled() {
        let lo = LockOptions::timeout(Duration::from_secs(4));
        let pick = rng.below(5);
        let invoked = clock_monotonic_ns();
        let r: etcdlock::Result<Vec<(String, etcdlock::Guard)>> = tokio::select! {
            r = async {
                match pick {
                    0 => client.acquire_permit("S", 2, lo).await.map(|g| vec![("S#p2".to_string(), g)]),
                    1 => client.read_lock("R", lo).await.map(|g| vec![("R#r".to_string(), g)]),
                    2 => client.lock_with("R", lo).await.map(|g| vec![("R#w".to_string(), g)]),
                    3 => client.campaign("E", id.as_str(), lo).await.map(|l| vec![("E".to_string(), l.into_guard())]),
                    _ => {
                        let a = rng.below(3);
                        let b = (a + 1 + rng.below(2)) % 3;
                        let (x, y) = (format!("M{a}"), format!("M{b}"));
                        client.lock_many(&[x.as_str(), y.as_str()], lo).await.map(|m| {
                            m.into_guards().into_iter().map(|g| (g.name().to_string(), g)).collect()
                        })
                    }
                }
            } => r,
            _ = stop.cancelled() => break,
        };
        let gs = match r {
            Ok(gs) => gs,
            Err(e) => {
                counters.err(e.code());
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let acquired = clock_monotonic_ns();
        counters
            .last_acquired_ns
            .fetch_max(acquired, Ordering::Relaxed);
        counters.acquisitions.fetch_add(1, Ordering::Relaxed);
        let mut ops = Vec::with_capacity(gs.len());
        for (label, g) in &gs {
            let mut op = Vec::new();
            if !label.contains('#') {
                let call = clock_monotonic_ns();
                let w = g
                    .put(resource_key(label), g.fencing_token().to_string())
                    .await;
                let result = crate::OpResult::of(&w);
                let ret_ns = (result != crate::OpResult::Unknown).then(clock_monotonic_ns);
                op.push(crate::GuardedOp {
                    write: true,
                    call_ns: call,
                    ret_ns,
                    value: g.fencing_token(),
                    result,
                });
                if let Err(e) = w {
                    counters.err(e.code());
                }
            }
            ops.push(op);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        let end_call = clock_monotonic_ns();
        for ((label, g), op) in gs.into_iter().zip(ops) {
            crate::release_and_record_ops(
                &checker,
                &counters,
                label,
                &g,
                (invoked, acquired),
                end_call,
                &id,
                op,
            )
            .await;
        }
    }
    client.close().await;
}

/// Scenario 15: the recipes under member kill -9 and restart (the leader included) in
/// a 3-member cluster: 6 clients take permits of a 2-permit semaphore, read and
/// write locks, leadership and multi-locks; never more than 2 permits, never a
/// writer beside anyone, one leader at a time, exclusion on every multi-locked
/// name, no stale guarded write accepted, nothing left behind.
pub async fn recipes_member_kill(p: &Profile) -> Outcome {
    let mut o = Outcome::new(15, "recipes-member-kill");
    let mut etcd = Etcd::cluster(3);
    let eps = etcd.endpoints();
    let ns = unique_ns("rkill");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Arc::new(Checker::new());
    let counters = Arc::new(Counters::default());
    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    for i in 0..6 {
        tasks.push(tokio::spawn(recipe_client(
            i,
            eps.clone(),
            ns.clone(),
            checker.clone(),
            counters.clone(),
            stop.clone(),
        )));
    }
    let probe = Client::connect(opts(&eps, &ns, TTL, Duration::from_secs(1)))
        .await
        .expect("probe connect");
    let mut fp = MemberKill::new(&mut etcd, Rng::new(seed() ^ 15), &probe, (1, 3));
    let rounds = run_rounds(&mut fp, Duration::from_secs(p.fault_secs), 3).await;
    o.faults = rounds.faults;
    o.failures.append(&mut fp.failures);
    o.failures.extend(rounds.failures);
    let healed_ns = clock_monotonic_ns();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.cancel();
    for t in tasks {
        let _ = t.await;
    }
    probe.close().await;
    let (keys, leases) = await_clean(&mut rawc, &ns, Duration::from_secs(15)).await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.acquisitions = counters.acquisitions.load(Ordering::Relaxed);
    let last = counters.last_acquired_ns.load(Ordering::Relaxed);
    o.expect(last > healed_ns, || {
        "no recipe acquisition after the last member restarted".into()
    });
    o.expect(keys == 0 && leases == 0, || {
        format!("{keys} lock keys and {leases} leases left")
    });
    let by_kind = |prefix: &str| {
        checker
            .holds()
            .iter()
            .filter(|h| h.lock.starts_with(prefix))
            .count()
    };
    o.figure = format!(
        "{} member kill -9 + restart, {} recipe acquisitions (permits {}, reads {}, writes {}, leaderships {}, multi-locked names {}), {keys} lock keys and {leases} leases left; {}; errors: {}",
        o.faults,
        o.acquisitions,
        by_kind("S#"),
        by_kind("R#r"),
        by_kind("R#w"),
        by_kind("E"),
        by_kind("M"),
        r.summary(),
        counters.errors_summary()
    );
    o
}
