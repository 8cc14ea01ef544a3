//! The fault controls of an in-process store (`MemStore`): each one travels
//! the real path, so a holder sees what it would see on etcd: the at-risk
//! signal, the loss with its reason, waiters granted in order, calls ending
//! at their bounds.

use std::time::{Duration, Instant};

use etcdlock::{Client, ClientOptions, ErrorCode, LockOptions, LossReason, MemStore, Renewal};

async fn client(store: &MemStore, ttl: i64) -> Client {
    Client::connect(
        ClientOptions::new([store.endpoint()])
            .with_ttl(ttl)
            .with_request_timeout(Duration::from_secs(1)),
    )
    .await
    .expect("connect to mem")
}

const SECS: Duration = Duration::from_secs(1);

#[tokio::test]
async fn expire_lease_loses_the_hold_with_lease_expired_and_grants_the_waiter() {
    let store = MemStore::open("faults-expire").unwrap();
    let a = client(&store, 15).await;
    let b = client(&store, 15).await;
    let g = a.lock("job").await.unwrap();
    let waiter = tokio::spawn({
        let b = b.clone();
        async move { b.lock("job").await }
    });
    // The waiter's key is in the store behind the holder's.
    let t0 = Instant::now();
    while store
        .keys(a.namespace())
        .iter()
        .filter(|k| k.lease != 0)
        .count()
        < 2
    {
        assert!(t0.elapsed() < 5 * SECS, "the waiter queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(store.expire_lease(g.lease_id()));
    assert!(!store.expire_lease(g.lease_id()), "gone already");
    let loss = tokio::time::timeout(5 * SECS, g.wait_lost())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loss.reason, LossReason::LeaseExpired);
    let h = tokio::time::timeout(5 * SECS, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(h.fencing_token() > g.fencing_token());
    h.unlock().await.unwrap();
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn delete_key_loses_the_hold_with_key_deleted() {
    let store = MemStore::open("faults-delete").unwrap();
    let a = client(&store, 15).await;
    let g = a.lock("job").await.unwrap();
    let held: Vec<_> = store
        .keys(g.key_bytes())
        .into_iter()
        .map(|k| k.lease)
        .collect();
    assert_eq!(held, vec![g.lease_id()]);
    assert!(store.delete_key(g.key()));
    assert!(!store.delete_key(g.key()));
    let loss = tokio::time::timeout(5 * SECS, g.wait_lost())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loss.reason, LossReason::KeyDeleted);
    assert_eq!(g.unlock().await.unwrap_err().code(), ErrorCode::LockLost);
    a.close().await;
}

#[tokio::test]
async fn silence_turns_a_hold_at_risk_then_lost_and_calls_end_at_their_bounds() {
    let store = MemStore::open("faults-silence").unwrap();
    let a = client(&store, 3).await;
    let g = a.lock("job").await.unwrap();
    let mut renewal = g.renewal_changes();
    let t0 = Instant::now();
    store.silence(Duration::from_secs(60));
    // A lock call ends at its timeout, not later.
    let r = a
        .lock_with("other", LockOptions::timeout(Duration::from_millis(500)))
        .await;
    assert_eq!(r.unwrap_err().code(), ErrorCode::Timeout);
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    // At risk first, then lost: on the session's own clock.
    tokio::time::timeout(
        5 * SECS,
        renewal.wait_for(|r| matches!(r, Renewal::Failing { .. })),
    )
    .await
    .expect("at risk")
    .unwrap();
    assert!(g.is_held(), "at risk is not lost");
    let loss = tokio::time::timeout(5 * SECS, g.wait_lost())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loss.reason, LossReason::ConnectionLost);
    assert!(
        t0.elapsed() < 4 * SECS,
        "lost within the TTL: {:?}",
        t0.elapsed()
    );
    store.resume();
    // The store answers again: a new hold is granted.
    let again = tokio::time::timeout(10 * SECS, a.lock("job"))
        .await
        .unwrap()
        .unwrap();
    again.unlock().await.unwrap();
    a.close().await;
}

#[tokio::test]
async fn stall_cuts_off_one_client_while_the_others_go_on() {
    let store = MemStore::open("faults-stall").unwrap();
    let a = client(&store, 3).await;
    let b = client(&store, 3).await;
    let g = a.lock("job").await.unwrap();
    let t0 = Instant::now();
    store.stall(g.lease_id(), Duration::from_secs(60));
    // b goes on while a is stalled.
    let other = b
        .lock_with("other", LockOptions::timeout(SECS))
        .await
        .unwrap();
    assert!(t0.elapsed() < SECS);
    let loss = tokio::time::timeout(6 * SECS, g.wait_lost())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loss.reason, LossReason::ConnectionLost);
    // Once a's lease expires in the store, b is granted a's lock.
    let h = tokio::time::timeout(6 * SECS, b.lock("job"))
        .await
        .unwrap()
        .unwrap();
    assert!(h.fencing_token() > g.fencing_token());
    store.stall(g.lease_id(), Duration::ZERO);
    h.unlock().await.unwrap();
    other.unlock().await.unwrap();
    a.close().await;
    b.close().await;
}

#[test]
fn a_bad_store_name_is_invalid_argument() {
    assert_eq!(
        MemStore::open("a/b").unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    assert_eq!(MemStore::open("").unwrap().endpoint(), "mem://");
}

#[tokio::test]
async fn a_guarded_write_refused_after_the_lease_ended_says_lease_expired() {
    let store = MemStore::open("faults-guarded").unwrap();
    let a = client(&store, 15).await;
    let g = a.lock("job").await.unwrap();
    g.put("job-data", "1").await.unwrap();
    // The write races the loss report: either way the reason is the lease's.
    assert!(store.expire_lease(g.lease_id()));
    let e = g.put("job-data", "2").await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::LockLost);
    assert_eq!(e.loss_reason(), Some(LossReason::LeaseExpired));
    let loss = tokio::time::timeout(5 * SECS, g.wait_lost())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loss.reason, LossReason::LeaseExpired);
    a.close().await;
}
