//! The counting semaphore on the mutex's keys (issue 13, core part).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{client, unique_ns};
use etcdlock::{ErrorCode, LockOptions};
use etcdlock_testkit::Etcd;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_permits_twelve_contenders_never_more_than_three_holders() {
    let etcd = Etcd::single();
    let ns = unique_ns("sem");
    let clients = [
        client(&etcd, &ns, 10).await,
        client(&etcd, &ns, 10).await,
        client(&etcd, &ns, 10).await,
    ];
    let now = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..12 {
        let (c, now, peak, done, ns) = (
            clients[t % 3].clone(),
            now.clone(),
            peak.clone(),
            done.clone(),
            ns.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for _ in 0..50 {
                let p = c
                    .acquire_permit("pool", 3, LockOptions::timeout(Duration::from_secs(30)))
                    .await
                    .unwrap();
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                assert!(n <= 3, "{n} holders of 3 permits");
                // The ledger in etcd: each holder enters itself with a guarded
                // put (refused unless its permit is still its own), then counts
                // the entries etcd has; leaving deletes the entry before unlock.
                let entry = format!("ledger/{}", p.fencing_token());
                p.put(&entry, "in").await.unwrap();
                let in_etcd = c
                    .etcd()
                    .await
                    .unwrap()
                    .get(
                        format!("{ns}ledger/"),
                        Some(
                            etcd_client::GetOptions::new()
                                .with_prefix()
                                .with_count_only(),
                        ),
                    )
                    .await
                    .unwrap()
                    .count();
                assert!(
                    (1..=3).contains(&in_etcd),
                    "{in_etcd} holders in etcd's ledger"
                );
                tokio::task::yield_now().await;
                now.fetch_sub(1, Ordering::SeqCst);
                assert!(p.delete(&entry).await.unwrap());
                p.unlock().await.unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 600);
    assert_eq!(
        peak.load(Ordering::SeqCst),
        3,
        "three permits were used at once"
    );
    assert!(common::keys(&clients[0], &format!("{ns}pool/"))
        .await
        .is_empty());
}

#[tokio::test]
async fn a_full_semaphore_times_out_at_once_and_a_mismatched_count_is_refused() {
    let etcd = Etcd::single();
    let ns = unique_ns("sem2");
    let a = client(&etcd, &ns, 10).await;
    let b = client(&etcd, &ns, 10).await;
    let p1 = a
        .acquire_permit("pool", 2, LockOptions::default())
        .await
        .unwrap();
    let p2 = a
        .acquire_permit("pool", 2, LockOptions::default())
        .await
        .unwrap();
    assert!(p2.fencing_token() > p1.fencing_token());
    let rev = a
        .etcd()
        .await
        .unwrap()
        .get("x", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    let e = b
        .acquire_permit("pool", 2, LockOptions::timeout(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout);
    assert_eq!(
        common::writes_under(&a, &format!("{ns}pool/"), rev).await,
        0,
        "a full try writes nothing"
    );
    // FIFO: a waiter gets the first permit released.
    let waiter = tokio::spawn({
        let b = b.clone();
        async move {
            b.acquire_permit("pool", 2, LockOptions::timeout(Duration::from_secs(10)))
                .await
        }
    });
    common::await_key_count(&a, &format!("{ns}pool/"), 3).await;
    let e = a
        .acquire_permit("pool", 3, LockOptions::timeout(Duration::from_secs(2)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    p1.unlock().await.unwrap();
    let p3 = waiter.await.unwrap().unwrap();
    assert!(p3.is_held());
    for bad in [0, etcdlock::MAX_PERMITS + 1] {
        assert_eq!(
            a.acquire_permit("pool", bad, LockOptions::default())
                .await
                .unwrap_err()
                .code(),
            ErrorCode::InvalidArgument
        );
    }
    // A plain lock on the same name sees the semaphore's holders as contenders.
    assert_eq!(
        b.try_lock("pool").await.unwrap_err().code(),
        ErrorCode::WouldBlock
    );
    p2.unlock().await.unwrap();
    p3.unlock().await.unwrap();
}
