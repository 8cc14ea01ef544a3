//! The client's metrics source (issue 12: every language exposes it; Java as
//! Micrometer meters), against real etcd.

mod common;

use std::time::{Duration, Instant};

use common::{client, unique_ns};
use etcdlock::{AcquireResult, ErrorCode, LockOptions, LossReason};
use etcdlock_testkit::Etcd;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_holds_losses_and_keepalives_are_counted() {
    let etcd = Etcd::single();
    let ns = unique_ns("metrics");
    let c = client(&etcd, &ns, 2).await;
    let other = client(&etcd, &ns, 10).await;
    let m = c.metrics();
    assert_eq!((m.waiting, m.held, m.holds_ended), (0, 0, 0));
    assert!(m.acquisitions.iter().all(|a| a.count == 0));

    let g = c.lock("a").await.unwrap();
    let m = c.metrics();
    assert_eq!(
        (m.held, m.acquisitions(AcquireResult::Acquired).count),
        (1, 1)
    );
    g.unlock().await.unwrap();
    assert_eq!((c.metrics().held, c.metrics().holds_ended), (0, 1));

    // Held elsewhere: a try, a timeout, a zero timeout, a cancelled wait.
    let h = other.lock("a").await.unwrap();
    assert_eq!(
        c.try_lock("a").await.unwrap_err().code(),
        ErrorCode::WouldBlock
    );
    assert_eq!(
        c.lock_with("a", LockOptions::timeout(Duration::from_millis(50)))
            .await
            .unwrap_err()
            .code(),
        ErrorCode::Timeout
    );
    assert_eq!(
        c.lock_with("a", LockOptions::timeout(Duration::ZERO))
            .await
            .unwrap_err()
            .code(),
        ErrorCode::Timeout
    );
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { c.lock("a").await })
    };
    let t0 = Instant::now();
    while c.metrics().waiting != 1 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the waiter never counted as waiting"
        );
        tokio::task::yield_now().await;
    }
    waiter.abort(); // the call's future is dropped: a cancellation
    let _ = waiter.await;
    let m = c.metrics();
    assert_eq!(m.waiting, 0);
    assert_eq!(m.acquisitions(AcquireResult::WouldBlock).count, 1);
    assert_eq!(m.acquisitions(AcquireResult::Timeout).count, 2);
    assert_eq!(m.acquisitions(AcquireResult::Cancelled).count, 1);
    assert!(m.acquisitions(AcquireResult::Timeout).wait_total >= Duration::from_millis(50));
    assert_eq!(
        c.lock("").await.unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    assert_eq!(c.metrics().acquisitions(AcquireResult::Error).count, 1);
    h.unlock().await.unwrap();

    // A loss, by its reason; the hold time of ended holds adds up.
    let g = c.lock("b").await.unwrap();
    assert!(c.metrics().held_duration < Duration::from_secs(5));
    other
        .etcd()
        .await
        .unwrap()
        .delete(g.key(), None)
        .await
        .unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), g.wait_lost())
            .await
            .unwrap()
            .unwrap()
            .reason,
        LossReason::KeyDeleted
    );
    let m = c.metrics();
    assert_eq!(
        (m.held, m.holds_ended, m.lost(LossReason::KeyDeleted)),
        (0, 2, 1)
    );
    assert!(m.hold_total > Duration::ZERO);

    // The keep-alive (every 400 ms at TTL 2) reports its round trip.
    let t0 = Instant::now();
    while c.metrics().keepalives == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "no keep-alive acknowledged"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(c.metrics().keepalive_rtt.unwrap() < Duration::from_secs(2));
    assert!(c.ping().await.unwrap() < Duration::from_secs(5));
    c.close().await;
    assert_eq!(c.ping().await.unwrap_err().code(), ErrorCode::Closed);
    other.close().await;
}

/// `member_failures` counts the requests that failed on a member: with a
/// dead endpoint listed first and a lazy connect (an eager one probes every
/// member at once and keeps the first to answer, so whether the dead one's
/// refusal is counted before that is a race), the session's first request
/// fails on it once and moves to the live one, which every later request
/// uses (the dead one is benched): 0 after connecting, 1 after a lock and
/// its release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_member_counts_one_member_failure() {
    if common::skip_on_mem("a_dead_member_counts_one_member_failure") {
        return;
    }
    let etcd = Etcd::single();
    let ns = unique_ns("member-failures");
    // Port 1: nothing listens there, and no free-port pick can hand it to
    // another process while the test runs.
    let dead = "127.0.0.1:1".to_string();
    let mut o = common::opts(&etcd, &ns, 10);
    o.endpoints.insert(0, dead);
    o.lazy_connect = true;
    let c = etcdlock::Client::connect(o).await.expect("connect");
    let after_connect = c.metrics().member_failures;
    let g = c.lock("a").await.unwrap();
    g.unlock().await.unwrap();
    assert_eq!((after_connect, c.metrics().member_failures), (0, 1));
    let healthy = common::client(&etcd, &ns, 10).await;
    assert_eq!(healthy.metrics().member_failures, 0);
}
