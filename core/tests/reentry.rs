//! Reentrancy by an explicit owner (`Client::lock_reentrant`): the same
//! owner takes its hold again at once, as another handle of it; the hold
//! ends with its last handle; other owners wait; a lost hold is never
//! re-entered.

mod common;

use std::time::Duration;

use common::{client, unique_ns};
use etcdlock::{ErrorCode, GuardState, LockOptions, LossReason};
use etcdlock_testkit::Etcd;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_reenters_its_hold_and_the_last_handle_releases_it() {
    let etcd = Etcd::single();
    let ns = unique_ns("reentry");
    let c = client(&etcd, &ns, 10).await;
    let other = client(&etcd, &ns, 10).await;
    let outer = c
        .lock_reentrant("a", 1, LockOptions::default())
        .await
        .unwrap();
    let inner = c
        .lock_reentrant("a", 1, LockOptions::default())
        .await
        .unwrap();
    let tried = c
        .try_lock_reentrant("a", 1, LockOptions::default())
        .await
        .unwrap();
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    assert_eq!((inner.key(), tried.key()), (outer.key(), outer.key()));
    assert_eq!(c.metrics().held, 1, "one hold, three handles");
    // Another owner of the same client, and another client, are excluded.
    let code = |r: etcdlock::Result<etcdlock::Guard>| r.map(|_| ()).unwrap_err().code();
    assert_eq!(
        code(c.try_lock_reentrant("a", 2, LockOptions::default()).await),
        ErrorCode::WouldBlock
    );
    assert_eq!(code(other.try_lock("a").await), ErrorCode::WouldBlock);

    // Ending the inner handles ends only them.
    inner.unlock().await.unwrap();
    assert!(!inner.is_held() && outer.is_held());
    assert_eq!(inner.state(), GuardState::Released);
    assert_eq!(
        inner.put("k", "v").await.unwrap_err().code(),
        ErrorCode::NotHeld
    );
    drop(tried);
    assert_eq!(
        code(other.try_lock("a").await),
        ErrorCode::WouldBlock,
        "a re-entry dropped: still held"
    );
    outer.put("k", "v").await.unwrap();

    // The last handle releases: the other client takes it, owner 2 waits.
    outer.unlock().await.unwrap();
    let g = other
        .lock_with("a", LockOptions::timeout(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(g.fencing_token() > outer.fencing_token());
    assert_eq!(
        code(
            c.lock_reentrant("a", 1, LockOptions::timeout(Duration::from_millis(100)))
                .await
        ),
        ErrorCode::Timeout,
        "an ended hold is not re-entered: owner 1 queues again"
    );
    g.unlock().await.unwrap();
    let again = c
        .lock_reentrant("a", 1, LockOptions::default())
        .await
        .unwrap();
    assert!(again.fencing_token() > g.fencing_token());
    // Dropping every handle releases too.
    let nested = c
        .lock_reentrant("a", 1, LockOptions::default())
        .await
        .unwrap();
    drop(again);
    assert_eq!(code(other.try_lock("a").await), ErrorCode::WouldBlock);
    drop(nested);
    let g = other
        .lock_with("a", LockOptions::timeout(Duration::from_secs(5)))
        .await
        .unwrap();
    g.unlock().await.unwrap();
    c.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_hold_is_never_reentered() {
    let etcd = Etcd::single();
    let ns = unique_ns("reentry-lost");
    let c = client(&etcd, &ns, 10).await;
    let op = client(&etcd, &ns, 10).await;
    let outer = c
        .lock_reentrant("a", 7, LockOptions::default())
        .await
        .unwrap();
    let inner = c
        .lock_reentrant("a", 7, LockOptions::default())
        .await
        .unwrap();
    assert!(op.release("a", outer.fencing_token()).await.unwrap());
    assert_eq!(
        outer.wait_lost().await.map(|l| l.reason),
        Some(LossReason::KeyDeleted)
    );
    let e = c
        .lock_reentrant("a", 7, LockOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.loss_reason()),
        (ErrorCode::LockLost, Some(LossReason::KeyDeleted))
    );
    // Each handle's unlock says it was lost; then the owner takes a new hold.
    assert_eq!(
        inner.unlock().await.unwrap_err().code(),
        ErrorCode::LockLost
    );
    assert_eq!(
        c.try_lock_reentrant("a", 7, LockOptions::default())
            .await
            .unwrap_err()
            .code(),
        ErrorCode::LockLost,
        "not until every handle of the lost hold ended"
    );
    assert_eq!(
        outer.unlock().await.unwrap_err().code(),
        ErrorCode::LockLost
    );
    let fresh = c
        .lock_reentrant("a", 7, LockOptions::default())
        .await
        .unwrap();
    assert!(fresh.fencing_token() > outer.fencing_token() && fresh.is_held());
    fresh.unlock().await.unwrap();
    c.close().await;
    op.close().await;
}
