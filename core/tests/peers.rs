//! What users of the peers ask for (issue 32): lock-delay, lease time, holder
//! metadata, release by token and by permit id, latches and barriers; against
//! real etcd, with the time bounds asserted.
mod common;

use std::time::{Duration, Instant};

use common::*;
use etcdlock::{ErrorCode, LockOptions, LossReason};
use etcdlock_testkit::Etcd;

fn delay(secs: u64) -> LockOptions {
    LockOptions::default().with_lock_delay(Duration::from_secs(secs))
}

#[tokio::test]
async fn lock_delay_holds_the_lock_after_the_holder_lease_is_revoked_and_a_clean_unlock_hands_over_at_once(
) {
    let etcd = Etcd::single();
    let ns = unique_ns("delay");
    let (a, b) = (client(&etcd, &ns, 2).await, client(&etcd, &ns, 10).await);

    // A clean unlock: the waiter gets it at once, no delay.
    let g = a.lock_with("job", delay(3)).await.unwrap();
    assert_eq!(
        keys(&a, &format!("{ns}job\0etcdlock-delay/h/")).await.len(),
        1,
        "the holder's delay record"
    );
    let b2 = b.clone();
    let waiter = tokio::spawn(async move { b2.lock("job").await.map(|g| (g, Instant::now())) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    g.unlock().await.unwrap();
    let (gb, at) = waiter.await.unwrap().unwrap();
    assert!(
        at - t0 < Duration::from_millis(500),
        "clean unlock handed over in {:?}",
        at - t0
    );
    assert!(
        keys(&a, &format!("{ns}job\0etcdlock-delay/"))
            .await
            .is_empty(),
        "unlock deleted the records with the key"
    );
    gb.unlock().await.unwrap();

    // The holder's lease ends without unlock (revoked, as when its session
    // is lost): nobody gets the lock before the delay has run.
    let g = a.lock_with("job", delay(3)).await.unwrap();
    let lease = g.lease_id();
    let b2 = b.clone();
    let waiter = tokio::spawn(async move { b2.lock("job").await.map(|g| (g, Instant::now())) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    a.etcd().await.unwrap().lease_revoke(lease).await.unwrap();
    // try_lock during the delay: WouldBlock, and it writes nothing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c = client(&etcd, &ns, 10).await;
    let e = c.try_lock("job").await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::WouldBlock, "{e}");
    let (gb, at) = waiter.await.unwrap().unwrap();
    let waited = at - t0;
    // The delay lease outlives the session's by the delay: at least 3 s after
    // the key went; at most TTL + delay (+ slack) after a revoke.
    assert!(
        waited >= Duration::from_secs(3),
        "granted {waited:?} after the holder's key vanished (delay 3 s)"
    );
    assert!(
        waited < Duration::from_secs(2 + 3 + 1 + 2),
        "granted {waited:?} after the revoke"
    );
    gb.unlock().await.unwrap();
    assert!(
        keys(&a, &format!("{ns}job\0etcdlock-delay/"))
            .await
            .is_empty(),
        "the delay record expired with its lease"
    );
    for cl in [a, b, c] {
        cl.close().await;
    }
}

#[tokio::test]
async fn lock_delay_bad_values_are_invalid_and_permits_refuse_it() {
    let etcd = Etcd::single();
    let ns = unique_ns("delay-bad");
    let c = client(&etcd, &ns, 10).await;
    let e = c.lock_with("x", delay(3 * 24 * 3600)).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    let e = c.acquire_permit("x", 3, delay(1)).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    let e = c
        .lock_with("x", LockOptions::default().with_lease_time(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    let e = c
        .lock_with(
            "x",
            LockOptions::default().with_metadata("k", "v".repeat(2000)),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    // try_lock with a delay: takes it and puts its record in the same Txn.
    let g = c
        .lock_with(
            "y",
            LockOptions {
                timeout: Some(Duration::ZERO),
                ..delay(2)
            },
        )
        .await
        .unwrap();
    assert_eq!(
        keys(&c, &format!("{ns}y\0etcdlock-delay/h/")).await.len(),
        1
    );
    g.unlock().await.unwrap();
    assert!(keys(&c, &format!("{ns}y\0etcdlock-delay/"))
        .await
        .is_empty());
    c.close().await;
}

#[tokio::test]
async fn lease_time_ends_a_hold_that_is_never_unlocked() {
    let etcd = Etcd::single();
    let ns = unique_ns("lease-time");
    let (a, b) = (client(&etcd, &ns, 10).await, client(&etcd, &ns, 10).await);
    let t0 = Instant::now();
    let p = a
        .acquire_permit(
            "pool",
            1,
            LockOptions::default().with_lease_time(Duration::from_millis(1500)),
        )
        .await
        .unwrap();
    let got = b
        .acquire_permit("pool", 1, LockOptions::timeout(Duration::from_secs(5)))
        .await
        .unwrap();
    let after = t0.elapsed();
    assert!(
        after >= Duration::from_millis(1500) && after < Duration::from_millis(2500),
        "freed after {after:?} (lease time 1.5 s)"
    );
    let loss = p.wait_lost().await.expect("lost, not released");
    assert_eq!(loss.reason, LossReason::LeaseExpired);
    got.unlock().await.unwrap();
    // The same client's try right after the loss is not refused by its own
    // key still being deleted.
    for _ in 0..5 {
        let g = a
            .lock_with(
                "solo",
                LockOptions::default().with_lease_time(Duration::from_millis(300)),
            )
            .await
            .unwrap();
        assert_eq!(
            g.wait_lost().await.map(|l| l.reason),
            Some(LossReason::LeaseExpired)
        );
        a.try_lock("solo")
            .await
            .expect("free once the lease time ended")
            .unlock()
            .await
            .unwrap();
    }
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn metadata_is_in_status_and_release_by_token_or_permit_id_tells_the_holder() {
    let etcd = Etcd::single();
    let ns = unique_ns("meta");
    let (a, b) = (client(&etcd, &ns, 10).await, client(&etcd, &ns, 10).await);
    let g = a
        .lock_with(
            "orders",
            LockOptions::default()
                .with_metadata("app", "billing")
                .with_metadata("build", "1.2.3"),
        )
        .await
        .unwrap();
    let t0 = Instant::now();
    let st = loop {
        let st = b.status("orders").await.unwrap();
        if !st.holders[0].metadata.is_empty() || t0.elapsed() > Duration::from_secs(2) {
            break st;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let h = &st.holders[0];
    let mut md = h.metadata.clone();
    md.sort();
    assert_eq!(
        md,
        vec![
            ("app".into(), "billing".into()),
            ("build".into(), "1.2.3".into())
        ]
    );
    assert_eq!(h.language.as_deref(), Some("rust"));
    assert!(h.host.is_some() && h.pid == Some(std::process::id()));

    // A stale token does nothing; the holder's token releases it, the holder
    // hears KeyDeleted and a waiter gets the lock.
    assert!(!b.release("orders", g.fencing_token() - 1).await.unwrap());
    assert!(g.is_held());
    let b2 = b.clone();
    let waiter = tokio::spawn(async move { b2.lock("orders").await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(b.release("orders", g.fencing_token()).await.unwrap());
    let loss = tokio::time::timeout(Duration::from_secs(2), g.wait_lost())
        .await
        .expect("loss signal in time")
        .expect("lost");
    assert_eq!(loss.reason, LossReason::KeyDeleted);
    let gw = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    gw.unlock().await.unwrap();

    // Permits carry ids (their tokens) another client releases.
    let p1 = a
        .acquire_permit("pool", 2, LockOptions::default())
        .await
        .unwrap();
    let p2 = a
        .acquire_permit("pool", 2, LockOptions::default())
        .await
        .unwrap();
    assert!(b.release_permit("pool", p1.fencing_token()).await.unwrap());
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(2), p1.wait_lost())
            .await
            .unwrap()
            .unwrap()
            .reason,
        LossReason::KeyDeleted
    );
    assert!(p2.is_held());
    assert!(
        !b.release_permit("pool", p1.fencing_token()).await.unwrap(),
        "a released id is gone"
    );
    p2.unlock().await.unwrap();
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn a_latch_counts_down_across_clients_and_leaves_no_keys() {
    let etcd = Etcd::single();
    let ns = unique_ns("latch");
    let cs = [
        client(&etcd, &ns, 2).await,
        client(&etcd, &ns, 2).await,
        client(&etcd, &ns, 2).await,
    ];
    let l0 = cs[0].latch("shards", 2).await.unwrap();
    assert_eq!(l0.count().await.unwrap(), 2);
    assert_eq!(
        cs[1].latch("shards", 3).await.err().map(|e| e.code()),
        Some(ErrorCode::InvalidArgument),
        "count mismatch"
    );
    assert_eq!(
        cs[1].latch("shards", 0).await.err().map(|e| e.code()),
        Some(ErrorCode::InvalidArgument)
    );
    let e = l0.wait(Some(Duration::from_millis(200))).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout);
    let waiter = {
        let c = cs[0].clone();
        tokio::spawn(async move {
            let l = c.latch("shards", 2).await.unwrap();
            l.wait(Some(Duration::from_secs(10)))
                .await
                .map(|_| Instant::now())
        })
    };
    let l1 = cs[1].latch("shards", 2).await.unwrap();
    let l2 = cs[2].latch("shards", 2).await.unwrap();
    assert_eq!(l1.count_down().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished());
    let t0 = Instant::now();
    assert_eq!(l2.count_down().await.unwrap(), 0);
    let at = waiter.await.unwrap().unwrap();
    assert!(
        at.saturating_duration_since(t0) < Duration::from_millis(500),
        "released {:?} after the last count-down",
        at - t0
    );
    assert_eq!(
        l2.count_down().await.unwrap(),
        0,
        "count_down at zero is a no-op"
    );
    l0.wait(Some(Duration::ZERO)).await.unwrap();
    drop((l0, l1, l2));
    for c in &cs {
        c.close().await;
    }
    let raw = client(&etcd, &ns, 10).await;
    let t0 = Instant::now();
    while !keys(&raw, ns.as_str()).await.is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "latch keys left: {:?}",
            keys(&raw, ns.as_str()).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    raw.close().await;
}

#[tokio::test]
async fn a_barrier_releases_its_parties_together_and_refuses_late_comers() {
    let etcd = Etcd::single();
    let ns = unique_ns("barrier");
    let cs = [
        client(&etcd, &ns, 2).await,
        client(&etcd, &ns, 2).await,
        client(&etcd, &ns, 2).await,
    ];
    assert_eq!(
        cs[0].barrier("start", 0).await.err().map(|e| e.code()),
        Some(ErrorCode::InvalidArgument)
    );
    let b0 = cs[0].barrier("start", 3).await.unwrap();
    assert_eq!(
        cs[1].barrier("start", 2).await.err().map(|e| e.code()),
        Some(ErrorCode::InvalidArgument),
        "parties mismatch"
    );
    // A party that times out leaves; its place is free again.
    assert_eq!(
        b0.wait(Some(Duration::from_millis(200)))
            .await
            .unwrap_err()
            .code(),
        ErrorCode::Timeout
    );
    // A wait whose future is dropped (a cancelled task) leaves too.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), b0.wait(None))
            .await
            .is_err()
    );
    let parties = format!("{ns}start\0etcdlock-barrier/p/");
    let t0 = Instant::now();
    while !keys(&cs[0], &parties).await.is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "a cancelled party's key stayed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut tasks = Vec::new();
    for c in cs.iter().take(2) {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let b = c.barrier("start", 3).await.unwrap();
            let i = b.wait(Some(Duration::from_secs(10))).await;
            (i, Instant::now())
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        tasks.iter().all(|t| !t.is_finished()),
        "released before the third party"
    );
    let b2 = cs[2].barrier("start", 3).await.unwrap();
    let t0 = Instant::now();
    assert_eq!(
        b2.wait(Some(Duration::from_secs(5))).await.unwrap(),
        2,
        "the last party's index"
    );
    let mut seen = vec![2];
    for t in tasks {
        let (i, at) = t.await.unwrap();
        seen.push(i.unwrap());
        assert!(at.saturating_duration_since(t0) < Duration::from_millis(500));
    }
    seen.sort();
    assert_eq!(seen, vec![0, 1, 2]);
    // Finished: a late party is refused.
    let e = cs[0].barrier("start", 3).await.err().expect("finished");
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    drop((b0, b2));
    for c in &cs {
        c.close().await;
    }
    let raw = client(&etcd, &ns, 10).await;
    let t0 = Instant::now();
    while !keys(&raw, ns.as_str()).await.is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "barrier keys left: {:?}",
            keys(&raw, ns.as_str()).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    raw.close().await;
}

#[tokio::test]
async fn a_vanished_delay_lease_is_replaced_without_ending_the_session() {
    let etcd = Etcd::single();
    let ns = unique_ns("delay-lease");
    let a = client(&etcd, &ns, 10).await;
    let keep = a.lock("other").await.unwrap();
    a.lock_with("x", delay(2))
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    // The delay lease is gone (revoked from outside; as if its renewal had failed).
    let mut raw = a.etcd().await.unwrap();
    let leases = raw.leases().await.unwrap();
    let ids: Vec<i64> = leases
        .leases()
        .iter()
        .map(|l| l.id())
        .filter(|id| *id != keep.lease_id())
        .collect();
    assert_eq!(
        ids.len(),
        1,
        "one delay lease beside the session's: {ids:?}"
    );
    raw.lease_revoke(ids[0]).await.unwrap();
    let g = a.lock_with("x", delay(2)).await.unwrap();
    assert!(keep.is_held(), "the session's other hold is untouched");
    assert_eq!(g.lease_id(), keep.lease_id(), "same session");
    g.unlock().await.unwrap();
    keep.unlock().await.unwrap();
    a.close().await;
}

#[tokio::test]
async fn a_wait_that_times_out_in_the_lock_delay_returns_on_time_and_leaves_no_key() {
    let etcd = Etcd::single();
    let ns = unique_ns("delay-timeout");
    let (a, c) = (client(&etcd, &ns, 2).await, client(&etcd, &ns, 10).await);
    let g = a.lock_with("job2", delay(3)).await.unwrap();
    a.etcd()
        .await
        .unwrap()
        .lease_revoke(g.lease_id())
        .await
        .unwrap();
    // First in the queue, the waiter is in the gate: its timeout holds.
    let t = Instant::now();
    let e = c
        .lock_with("job2", LockOptions::timeout(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "returned {:?} after a 300 ms timeout",
        t.elapsed()
    );
    // Its key is gone (deleted by the cleanup, which this client's try waits for).
    assert_eq!(
        c.try_lock("job2").await.unwrap_err().code(),
        ErrorCode::WouldBlock
    );
    assert!(
        keys(&c, &format!("{ns}job2/")).await.is_empty(),
        "no key left behind"
    );
    let t = Instant::now();
    let g2 = c
        .lock_with("job2", LockOptions::timeout(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(1500),
        "the delay still ran"
    );
    g2.unlock().await.unwrap();
    a.close().await;
    c.close().await;
}
