//! Deadlocks found from etcd's state (`Client::deadlocks`), the opt-in
//! `Deadlock` error of a wait that would close a cycle, and a lock's
//! history from etcd's MVCC history (`Client::history`).
mod common;

use std::time::{Duration, Instant};

use etcdlock::{ErrorCode, LockOptions};
use etcdlock_testkit::Etcd;

use common::{await_key_count, client, unique_ns};

const SECS: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_holding_what_the_other_waits_for_are_reported_and_the_opt_in_backs_one_off() {
    let etcd = Etcd::single();
    let ns = unique_ns("deadlock");
    let a = client(&etcd, &ns, 15).await;
    let b = client(&etcd, &ns, 15).await;
    let x = a.lock("x").await.unwrap();
    let y = b.lock("y").await.unwrap();
    assert!(a.deadlocks("").await.unwrap().cycles.is_empty());

    // A waits for y (held by B): a chain, not a cycle.
    let a_waits = tokio::spawn({
        let a = a.clone();
        async move { a.lock("y").await }
    });
    await_key_count(&a, &format!("{ns}y/"), 2).await;
    let d = a.deadlocks("").await.unwrap();
    assert_eq!((d.clients, d.waits, d.cycles.len()), (2, 1, 0), "{d:?}");

    // B waits for x without the opt-in: a cycle of two, seen by any client.
    let b_waits = tokio::spawn({
        let b = b.clone();
        async move { b.lock_with("x", LockOptions::timeout(3 * SECS)).await }
    });
    await_key_count(&a, &format!("{ns}x/"), 2).await;
    let d = b.deadlocks("").await.unwrap();
    assert_eq!(d.cycles.len(), 1, "{d:?}");
    let c = &d.cycles[0];
    assert_eq!(c.edges.len(), 2);
    let names: Vec<&str> = c.edges.iter().map(|e| e.name.as_str()).collect();
    assert!(names.contains(&"x") && names.contains(&"y"), "{names:?}");
    for (i, e) in c.edges.iter().enumerate() {
        assert_eq!(e.holder, c.edges[(i + 1) % 2].waiter);
        assert_eq!(e.waiter.language.as_deref(), Some("rust"));
    }
    let holds: Vec<i64> = c.edges.iter().map(|e| e.fencing_token).collect();
    assert!(holds.contains(&x.fencing_token()) && holds.contains(&y.fencing_token()));
    assert!(
        c.describe().contains("waits for \"x\" held by"),
        "{}",
        c.describe()
    );
    let json = etcdlock::records::to_json(&d);
    assert!(
        json.contains("\"cycles\":[{\"edges\":[{\"waiter\":{\"lease_id\":\""),
        "{json}"
    );
    // A prefix that leaves out one of the names shows no cycle.
    assert!(a.deadlocks("x").await.unwrap().cycles.is_empty());
    // Without the opt-in, B waits to its timeout.
    assert_eq!(
        b_waits.await.unwrap().unwrap_err().code(),
        ErrorCode::Timeout
    );

    // With the opt-in, B's wait fails at once with Deadlock, naming the cycle.
    let t0 = Instant::now();
    let e = b
        .lock_with("x", LockOptions::timeout(10 * SECS).with_detect_deadlock())
        .await
        .unwrap_err();
    let took = t0.elapsed();
    assert_eq!(e.code(), ErrorCode::Deadlock, "{e}");
    assert!(took < 2 * SECS, "{took:?}");
    assert!(
        e.message().contains("\"y\"") && e.message().contains("\"x\""),
        "{e}"
    );
    assert!(!e.retryable());
    // Its key is gone: x's queue is the holder alone.
    await_key_count(&a, &format!("{ns}x/"), 1).await;
    // B backs off; A is served.
    y.unlock().await.unwrap();
    let got = tokio::time::timeout(5 * SECS, a_waits)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(got.fencing_token() > y.fencing_token());
    assert!(a.deadlocks("").await.unwrap().cycles.is_empty());
    got.unlock().await.unwrap();
    x.unlock().await.unwrap();
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opted_in_wait_on_no_cycle_is_served_when_its_predecessor_goes() {
    // C holds y; A waits for y with the check: a chain, no cycle, so the
    // check made as A's key is queued lets it wait, and A is served when C
    // lets go (the option changes nothing without a cycle).
    let etcd = Etcd::single();
    let ns = unique_ns("deadlock2");
    let a = client(&etcd, &ns, 15).await;
    let c = client(&etcd, &ns, 15).await;
    let held = c.lock("y").await.unwrap();
    let a_waits = tokio::spawn({
        let a = a.clone();
        async move {
            a.lock_with("y", LockOptions::timeout(10 * SECS).with_detect_deadlock())
                .await
        }
    });
    await_key_count(&a, &format!("{ns}y/"), 2).await;
    held.unlock().await.unwrap();
    let g = tokio::time::timeout(5 * SECS, a_waits)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    g.unlock().await.unwrap();
    a.close().await;
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_lists_every_hold_and_wait_with_its_token_and_how_it_ended() {
    let etcd = Etcd::single();
    let ns = unique_ns("history");
    let a = client(&etcd, &ns, 15).await;
    let b = client(&etcd, &ns, 15).await;
    let first = a.lock("job").await.unwrap();
    let waiter = tokio::spawn({
        let b = b.clone();
        async move { b.lock("job").await }
    });
    await_key_count(&a, &format!("{ns}job/"), 2).await;
    // A wait that times out: its key queued, then deleted before it held.
    let e = a
        .lock_with("job", LockOptions::timeout(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout);
    first.unlock().await.unwrap();
    let second = tokio::time::timeout(5 * SECS, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let second_token = second.fencing_token();
    // The second holder's client closes with the hold: it ends with its lease.
    std::mem::forget(second);
    b.close().await;
    let third = a.lock("job").await.unwrap();

    let h = a.history("job", None).await.unwrap();
    assert_eq!(h.name, "job");
    assert!(h.from_revision >= 1 && h.revision >= third.fencing_token());
    let by_token = |t: i64| h.entries.iter().find(|e| e.fencing_token == t).unwrap();
    assert_eq!(h.entries.len(), 4, "{:#?}", h.entries);
    let f = by_token(first.fencing_token());
    assert_eq!(
        (f.ended, f.granted_revision),
        ("released", Some(first.fencing_token()))
    );
    assert_eq!(f.language.as_deref(), Some("rust"));
    let s = by_token(second_token);
    assert_eq!(s.ended, "lease_ended", "{s:?}");
    assert_eq!(
        s.granted_revision, f.ended_revision,
        "granted at the holder's delete"
    );
    assert!(s.granted_ms.unwrap() >= s.queued_ms);
    let t = by_token(third.fencing_token());
    assert_eq!(t.ended, "holding");
    assert_eq!(t.granted_revision, Some(third.fencing_token()));
    let tries: Vec<_> = h
        .entries
        .iter()
        .filter(|e| e.ended == "abandoned")
        .collect();
    assert_eq!(tries.len(), 1, "the wait that timed out");
    assert!(tries[0].wait_ms < 5_000 && tries[0].hold_ms.is_none());
    // Entries are oldest first.
    assert!(h
        .entries
        .windows(2)
        .all(|w| w[0].fencing_token < w[1].fencing_token));
    // `since` keeps what ended within it, and what has not ended.
    let recent = a
        .history("job", Some(Duration::from_millis(1)))
        .await
        .unwrap();
    assert!(recent.entries.iter().any(|e| e.ended == "holding"));
    assert!(
        recent.entries.len() < h.entries.len() || h.entries.iter().all(|e| e.ended_ms.is_none())
    );
    let json = etcdlock::records::to_json(&h);
    assert!(json.contains("\"ended\":\"lease_ended\""), "{json}");
    third.unlock().await.unwrap();
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_owners_of_one_client_waiting_on_each_other_are_seen_by_the_client_only() {
    let etcd = Etcd::single();
    let ns = unique_ns("deadlock-local");
    let c = client(&etcd, &ns, 15).await;
    let x = c
        .lock_reentrant("x", 1, LockOptions::default())
        .await
        .unwrap();
    let y = c
        .lock_reentrant("y", 2, LockOptions::default())
        .await
        .unwrap();
    let one_waits = tokio::spawn({
        let c = c.clone();
        async move {
            c.lock_reentrant("y", 1, LockOptions::timeout(10 * SECS))
                .await
        }
    });
    await_key_count(&c, &format!("{ns}y/"), 2).await;
    // etcd sees one lease waiting on itself: no cycle there.
    assert!(c.deadlocks("").await.unwrap().cycles.is_empty());
    let t0 = Instant::now();
    let e = c
        .lock_reentrant(
            "x",
            2,
            LockOptions::timeout(10 * SECS).with_detect_deadlock(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Deadlock, "{e}");
    assert!(t0.elapsed() < SECS);
    assert!(
        e.message()
            .contains("owner 2 waits for \"x\" held by owner 1")
            && e.message()
                .contains("owner 1 waits for \"y\" held by owner 2"),
        "{e}"
    );
    // Owner 2 backs off; owner 1 is served.
    drop(y);
    let got = tokio::time::timeout(5 * SECS, one_waits)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    drop(got);
    drop(x);
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opted_in_wait_backs_off_when_a_later_wait_without_the_check_closes_the_cycle() {
    let etcd = Etcd::single();
    let ns = unique_ns("deadlock-later");
    let a = client(&etcd, &ns, 15).await;
    let b = client(&etcd, &ns, 15).await;
    let x = a.lock("x").await.unwrap();
    let y = b.lock("y").await.unwrap();
    // A opts in and waits first: its wait closes nothing.
    let a_waits = tokio::spawn({
        let a = a.clone();
        async move {
            let t0 = Instant::now();
            let r = a
                .lock_with("y", LockOptions::timeout(30 * SECS).with_detect_deadlock())
                .await;
            (r, t0.elapsed())
        }
    });
    await_key_count(&a, &format!("{ns}y/"), 2).await;
    // B closes the cycle without the check: A's checks while it waits find
    // the cycle twice in a row and A backs off.
    let b_waits = tokio::spawn({
        let b = b.clone();
        async move { b.lock_with("x", LockOptions::timeout(30 * SECS)).await }
    });
    await_key_count(&a, &format!("{ns}x/"), 2).await;
    let closed = Instant::now();
    let (r, _) = tokio::time::timeout(15 * SECS, a_waits)
        .await
        .unwrap()
        .unwrap();
    let e = r.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Deadlock, "{e}");
    let after = closed.elapsed();
    assert!(after < 10 * SECS, "{after:?}");
    // A backs off: B is served.
    x.unlock().await.unwrap();
    let g = tokio::time::timeout(5 * SECS, b_waits)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    eprintln!("the opted-in earlier wait failed {after:?} after the cycle closed");
    g.unlock().await.unwrap();
    y.unlock().await.unwrap();
    a.close().await;
    b.close().await;
}
