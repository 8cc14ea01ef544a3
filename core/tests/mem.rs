//! The in-process etcd (`mem://`, `mem://NAME`): clients naming one store
//! exclude each other, two stores do not, a lease expiry frees a lock, and
//! bad in-process endpoints are `InvalidArgument`, never a panic.

use std::time::{Duration, Instant};

use etcd_client::PutOptions;
use etcdlock::{Client, ClientOptions, ErrorCode, LossReason};

async fn mem(store: &str, ns: &str, ttl: i64) -> Client {
    Client::connect(ClientOptions::new([store]).with_ttl(ttl).with_namespace(ns))
        .await
        .expect("connect to mem")
}

#[tokio::test]
async fn one_store_excludes_two_stores_do_not() {
    let a = mem("mem://x", "excl/", 10).await;
    let b = mem("mem://x", "excl/", 10).await;
    let other = mem("mem://y", "excl/", 10).await;
    let g = a.lock("job").await.unwrap();
    assert_eq!(
        b.try_lock("job").await.unwrap_err().code(),
        ErrorCode::WouldBlock
    );
    // Another store is another etcd: the same name is free there.
    let y = other.try_lock("job").await.unwrap();
    assert!(y.is_held());
    // Handoff by watch: b waits, a releases, b holds with a larger token.
    let waiter = tokio::spawn({
        let b = b.clone();
        async move { b.lock("job").await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished());
    g.unlock().await.unwrap();
    let h = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(h.fencing_token() > g.fencing_token());
    // A key deleted behind the holder's back is reported as its loss.
    let mut raw = b.etcd().await.unwrap();
    raw.delete(h.key(), None).await.unwrap();
    let loss = tokio::time::timeout(Duration::from_secs(5), h.wait_lost())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loss.reason, LossReason::KeyDeleted);
    for c in [a, b, other] {
        c.close().await;
    }
}

#[tokio::test]
async fn plain_mem_is_one_default_store() {
    let a = mem("mem://", "default/", 10).await;
    let b = mem("mem://", "default/", 10).await;
    let _g = a.lock("d").await.unwrap();
    assert_eq!(
        b.try_lock("d").await.unwrap_err().code(),
        ErrorCode::WouldBlock
    );
    assert_eq!(a.endpoints(), "mem://");
}

/// A holder whose lease is never kept alive (a process that died): its
/// lock is free once etcd's TTL runs out, not before.
#[tokio::test]
async fn lease_expiry_frees_a_lock() {
    let c = mem("mem://expiry", "exp/", 10).await;
    let mut raw = c.etcd().await.unwrap();
    // Before the grant: the lease's TTL runs from when etcd grants it, which
    // is before its answer arrives (taken after it, the bound below once
    // read 1.998 s).
    let granted = Instant::now();
    let lease = raw.lease_grant(2, None).await.unwrap();
    assert_eq!(lease.ttl(), 2);
    // The Go Mutex layout a dead holder left: <ns><name>/<lease hex>.
    raw.put(
        format!("exp/gone/{:x}", lease.id()),
        "",
        Some(PutOptions::new().with_lease(lease.id())),
    )
    .await
    .unwrap();
    assert_eq!(
        c.try_lock("gone").await.unwrap_err().code(),
        ErrorCode::WouldBlock
    );
    let g = c.lock("gone").await.unwrap();
    let took = granted.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took <= Duration::from_millis(3500),
        "acquired after {took:?}"
    );
    assert!(g.is_held());
    c.close().await;
}

#[tokio::test]
async fn bad_mem_endpoints_are_invalid_argument() {
    for eps in [
        vec!["mem://x:2379"],
        vec!["mem://x/path"],
        vec!["mem://x?q=1"],
        vec!["mem:///"],
        vec!["mem://a b"],
        vec!["mem://x", "http://127.0.0.1:2379"],
        vec!["http://127.0.0.1:2379", "mem://"],
        vec!["mem://x", "mem://y"],
    ] {
        let r = Client::connect(ClientOptions::new(eps.clone())).await;
        assert_eq!(r.unwrap_err().code(), ErrorCode::InvalidArgument, "{eps:?}");
        // The string form every binding passes (`endpoints=a,b`).
        let r = match ClientOptions::from_pairs([("endpoints", eps.join(","))]) {
            Ok(o) => Client::connect(o).await.map(|_| ()),
            Err(e) => Err(e),
        };
        assert_eq!(r.unwrap_err().code(), ErrorCode::InvalidArgument, "{eps:?}");
    }
    let r = Client::connect(ClientOptions::new(["mem://x"]).with_user("u", "p")).await;
    assert_eq!(r.unwrap_err().code(), ErrorCode::InvalidArgument);
    // The same store named twice is one store.
    let c = Client::connect(ClientOptions::new(["mem://x", "mem://x"]))
        .await
        .unwrap();
    c.close().await;
}
