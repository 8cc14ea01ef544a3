//! Waiters whose watches start at a compacted revision.

use super::*;

/// 9. 20 waiters while etcd compacts every 200 ms.
pub async fn waiters_under_compaction(_p: &Profile) -> Outcome {
    let mut o = Outcome::new(9, "waiters-under-compaction");
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("compact");
    let mut rawc = raw(&eps).await;
    let checker = Arc::new(Checker::new());
    let prefix = format!("{ns}Q/");
    let n = 20usize;
    let holder = Client::connect(opts(&eps, &ns, 5, Duration::from_secs(2)))
        .await
        .expect("holder connect");
    let gh = holder.lock("Q").await.expect("holder lock");
    let h_acq = clock_monotonic_ns();
    let stop = CancellationToken::new();
    let mut compaction = Compaction::new(raw(&eps).await, Duration::from_millis(200));
    // The waiters queue, wait while compactions pass, and are granted one by
    // one; compactions run beside all of it until the last grant.
    let steps = async {
        let order = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        let mut queue_revs = Vec::new();
        for i in 0..n {
            let c = Client::connect(opts(&eps, &ns, 5, Duration::from_secs(2)))
                .await
                .expect("waiter connect");
            let (order, checker) = (order.clone(), checker.clone());
            tasks.push(tokio::spawn(async move {
                let r = c
                    .lock_with("Q", LockOptions::timeout(Duration::from_secs(60)))
                    .await;
                let out = match r {
                    Ok(g) => {
                        let at = clock_monotonic_ns();
                        let seq = order.fetch_add(1, Ordering::SeqCst);
                        let _ = g
                            .put(resource_key("Q"), g.fencing_token().to_string())
                            .await;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let tok = g.fencing_token();
                        let _ = release(&checker, g, at, &format!("w{i}")).await;
                        Ok((seq, tok))
                    }
                    Err(e) => Err(e),
                };
                c.close().await;
                out
            }));
            if await_key_count(&mut rawc, &prefix, i + 2, Duration::from_secs(10))
                .await
                .is_none()
            {
                o.fail(format!("waiter {i} never queued"));
            }
            let keys = keys_under(&mut rawc, &prefix).await.unwrap_or_default();
            queue_revs.push(keys.last().map(|k| k.1).unwrap_or(0));
        }
        // Let a few compactions pass while all 20 wait.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let released = Instant::now();
        if let Err(e) = release(&checker, gh, h_acq, "holder").await {
            o.fail(e);
        }
        let mut grants: Vec<(u64, usize, i64)> = Vec::new();
        let mut stuck = 0;
        for (i, t) in tasks.into_iter().enumerate() {
            match tokio::time::timeout(Duration::from_secs(60), t).await {
                Ok(Ok(Ok((seq, tok)))) => grants.push((seq, i, tok)),
                other => {
                    stuck += 1;
                    o.fail(format!("waiter {i}: {other:?}"));
                }
            }
        }
        let took = released.elapsed();
        stop.cancel();
        (grants, stuck, took, queue_revs)
    };
    let (compactions, (mut grants, stuck, took, queue_revs)) =
        tokio::join!(run_until(&mut compaction, &stop), steps);
    for f in compactions.failures {
        o.fail(f);
    }
    holder.close().await;
    grants.sort();
    let in_order = grants
        .iter()
        .enumerate()
        .all(|(k, (_, i, tok))| *i == k && queue_revs.get(*i) == Some(tok));
    o.acquisitions = grants.len() as u64 + 1;
    o.faults = compactions.faults;
    let r = finish(&mut o, &checker, &mut rawc, &ns, None).await;
    o.expect(stuck == 0 && grants.len() == n, || {
        format!("{stuck} stuck waiters")
    });
    o.expect(in_order, || {
        format!("grant order {grants:?} differs from create_revision order {queue_revs:?}")
    });
    let comps = o.faults;
    o.expect(comps >= 5, || format!("only {comps} compactions"));
    o.figure = format!(
        "{n} waiters, {} compactions (every 200 ms), {}/{n} granted in {:.1} s, {stuck} stuck, grant order = create_revision order: {}; {}",
        o.faults,
        grants.len(),
        took.as_secs_f64(),
        if in_order { "yes" } else { "NO" },
        r.summary()
    );
    o
}
