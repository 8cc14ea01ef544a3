//! The core behaviour suite, against real etcd processes started by the testkit.
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use etcdlock::{Client, ClientOptions, ErrorCode, GuardState, LockOptions, LossReason};
use etcdlock_testkit::{connections_to, Etcd};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn uncontended_lock_unlock_uses_go_mutex_layout() {
    let etcd = Etcd::single();
    let ns = unique_ns("uncontended");
    let c = client(&etcd, &ns, 10).await;
    let g = c.lock("orders").await.unwrap();
    assert!(g.is_held());
    assert_eq!(g.state(), GuardState::Held);
    // Go Mutex layout: <ns>orders/<lease id in hex>.
    assert_eq!(g.key(), format!("{ns}orders/{:x}", g.lease_id()));
    assert_eq!(
        keys(&c, &format!("{ns}orders/")).await,
        vec![(g.key(), g.fencing_token())]
    );
    assert!(g.waited_on().is_empty());
    g.unlock().await.unwrap();
    assert!(!g.is_held());
    assert_eq!(g.state(), GuardState::Released);
    assert!(keys(&c, &format!("{ns}orders/")).await.is_empty());
    // Idempotent unlock; guarded ops after unlock are NotHeld.
    g.unlock().await.unwrap();
    assert_eq!(
        g.put("x", "1").await.unwrap_err().code(),
        ErrorCode::NotHeld
    );
    assert_eq!(g.get("x").await.unwrap_err().code(), ErrorCode::NotHeld);
    assert_eq!(g.delete("x").await.unwrap_err().code(), ErrorCode::NotHeld);
    assert_eq!(g.wait_lost().await, None);
    c.close().await;
}

#[tokio::test]
async fn try_lock_on_held_lock_would_block_and_leaves_no_key() {
    let etcd = Etcd::single();
    let ns = unique_ns("try");
    let a = client(&etcd, &ns, 10).await;
    let b = client(&etcd, &ns, 10).await;
    let g = a.try_lock("job").await.unwrap();
    let err = b.try_lock("job").await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::WouldBlock);
    assert!(err.message().contains("job"), "{err}");
    assert_eq!(keys(&a, &format!("{ns}job/")).await.len(), 1);
    g.unlock().await.unwrap();
    let g2 = b.try_lock("job").await.unwrap();
    assert!(g2.fencing_token() > g.fencing_token());
}

#[tokio::test]
async fn timeout_and_cancel_leave_no_key() {
    let etcd = Etcd::single();
    let ns = unique_ns("timeout");
    let a = client(&etcd, &ns, 10).await;
    let b = client(&etcd, &ns, 10).await;
    let prefix = format!("{ns}t/");
    let g = a.lock("t").await.unwrap();

    // Timeout.
    let started = Instant::now();
    let err = b
        .lock_with("t", LockOptions::timeout(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Timeout);
    assert!(started.elapsed() < Duration::from_secs(2));
    await_key_count(&a, &prefix, 1).await;

    // Cancellation token: the wait ends with Cancelled.
    let token = CancellationToken::new();
    let b2 = b.clone();
    let t2 = token.clone();
    let waiter = tokio::spawn(async move {
        b2.lock_with(
            "t",
            LockOptions {
                timeout: None,
                cancel: Some(t2),
                ..LockOptions::default()
            },
        )
        .await
    });
    await_key_count(&a, &prefix, 2).await;
    token.cancel();
    assert_eq!(
        waiter.await.unwrap().unwrap_err().code(),
        ErrorCode::Cancelled
    );
    await_key_count(&a, &prefix, 1).await;

    // Dropping the future cancels too.
    let b3 = b.clone();
    let waiter = tokio::spawn(async move { b3.lock("t").await });
    await_key_count(&a, &prefix, 2).await;
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    await_key_count(&a, &prefix, 1).await;

    g.unlock().await.unwrap();
    assert!(keys(&a, &prefix).await.is_empty());
}

#[tokio::test]
async fn twenty_waiters_acquire_in_create_revision_order_each_watching_only_its_predecessor() {
    let etcd = Etcd::single();
    let ns = unique_ns("fifo");
    let prefix = format!("{ns}q/");
    let holder = client(&etcd, &ns, 10).await;
    let first = holder.lock("q").await.unwrap();
    let order = Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    let mut clients = Vec::new();
    for i in 0..20 {
        let c = client(&etcd, &ns, 10).await;
        clients.push(c.clone());
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let g = c.lock("q").await.unwrap();
            order
                .lock()
                .await
                .push((i, g.fencing_token(), g.key(), g.waited_on()));
            g.unlock().await.unwrap();
        }));
        // Enqueue strictly one after the other.
        await_key_count(&holder, &prefix, i + 2).await;
    }
    let queue = keys(&holder, &prefix).await;
    assert_eq!(queue.len(), 21);
    first.unlock().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    let order = order.lock().await.clone();
    assert_eq!(order.len(), 20);
    for (pos, (i, token, key, waited)) in order.iter().enumerate() {
        assert_eq!(*i, pos, "waiter {i} acquired at position {pos}");
        assert_eq!(
            (key.clone(), *token),
            queue[pos + 1],
            "grant order = create_revision order"
        );
        // It watched exactly one key: the one created just before its own.
        assert_eq!(
            waited,
            &vec![queue[pos].0.clone()],
            "waiter {i} watched {waited:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mutual_exclusion_two_clients_eight_tasks_counter_exact_tokens_increase() {
    let etcd = Etcd::single();
    let ns = unique_ns("mutex");
    let clients = [client(&etcd, &ns, 10).await, client(&etcd, &ns, 10).await];
    const PER_TASK: usize = 126; // 2 clients x 8 tasks x 126 = 2016 acquisitions
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let in_section = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for c in &clients {
        for _ in 0..8 {
            let c = c.clone();
            let tokens = tokens.clone();
            let in_section = in_section.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..PER_TASK {
                    let g = c.lock("counter").await.unwrap();
                    assert_eq!(
                        in_section.fetch_add(1, std::sync::atomic::Ordering::SeqCst),
                        0
                    );
                    // Non-atomic read-modify-write, safe only under the lock.
                    let n: u64 = g
                        .get("count")
                        .await
                        .unwrap()
                        .map(|v| String::from_utf8(v).unwrap().parse().unwrap())
                        .unwrap_or(0);
                    g.put("count", (n + 1).to_string()).await.unwrap();
                    tokens.lock().unwrap().push(g.fencing_token());
                    in_section.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    g.unlock().await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut etcd_c = clients[0].etcd().await.unwrap();
    let v = etcd_c.get(format!("{ns}count"), None).await.unwrap();
    let count: usize = std::str::from_utf8(v.kvs()[0].value())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(count, 2 * 8 * PER_TASK);
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 2 * 8 * PER_TASK);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens strictly increase"
    );
}

#[tokio::test]
async fn concurrent_holds_on_one_session_use_distinct_keys() {
    let etcd = Etcd::single();
    let ns = unique_ns("samesession");
    let c = client(&etcd, &ns, 10).await;
    let g1 = c.lock("s").await.unwrap();
    let c2 = c.clone();
    let t = tokio::spawn(async move { c2.lock("s").await.unwrap() });
    await_key_count(&c, &format!("{ns}s/"), 2).await;
    assert!(
        !t.is_finished(),
        "a second acquisition on the same session must wait"
    );
    let ks = keys(&c, &format!("{ns}s/")).await;
    assert_eq!(ks[0].0, g1.key());
    assert!(ks[1].0.starts_with(&g1.key()) && ks[1].0 != g1.key());
    g1.unlock().await.unwrap();
    let g2 = t.await.unwrap();
    assert_eq!(g2.lease_id(), g1.lease_id());
    assert!(g2.is_held());
}

#[tokio::test]
async fn outside_delete_and_revoke_are_reported_and_a_fresh_lease_follows() {
    let etcd = Etcd::single();
    let ns = unique_ns("loss");
    let c = client(&etcd, &ns, 10).await;
    let g = c.lock("l").await.unwrap();
    let mut raw = c.etcd().await.unwrap();
    raw.delete(g.key(), None).await.unwrap();
    let loss = tokio::time::timeout(Duration::from_secs(5), g.wait_lost())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loss.reason, LossReason::KeyDeleted);
    assert!(!g.is_held());
    let err = g.put("x", "1").await.unwrap_err();
    assert_eq!(
        (err.code(), err.loss_reason()),
        (ErrorCode::LockLost, Some(LossReason::KeyDeleted))
    );
    assert_eq!(g.unlock().await.unwrap_err().code(), ErrorCode::LockLost);

    // Revoke the lease from outside: the hold ends, later locks get a fresh lease.
    let g = c.lock("l").await.unwrap();
    let old_lease = g.lease_id();
    raw.lease_revoke(old_lease).await.unwrap();
    let loss = tokio::time::timeout(Duration::from_secs(10), g.wait_lost())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(
            loss.reason,
            LossReason::KeyDeleted | LossReason::LeaseExpired
        ),
        "{loss:?}"
    );
    // The session notices at once (its lease watch) or at its next keep-alive; a new lock then opens a new lease.
    let g2 = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let g2 = c.lock("l").await.unwrap();
            if g2.lease_id() != old_lease {
                return g2;
            }
            // Locked on the doomed session before it noticed: that guard is lost too.
            let _ = g2.wait_lost().await;
        }
    })
    .await
    .unwrap();
    assert!(g2.is_held());
    g2.put("x", "1").await.unwrap();
}

#[tokio::test]
async fn close_releases_every_lock_and_reports_client_closed() {
    let etcd = Etcd::single();
    let ns = unique_ns("close");
    let a = client(&etcd, &ns, 10).await;
    let b = client(&etcd, &ns, 10).await;
    let g1 = a.lock("x").await.unwrap();
    let g2 = a.lock("y").await.unwrap();
    a.close().await;
    assert_eq!(
        g1.wait_lost().await.unwrap().reason,
        LossReason::ClientClosed
    );
    assert_eq!(g2.loss().unwrap().reason, LossReason::ClientClosed);
    assert_eq!(a.lock("x").await.unwrap_err().code(), ErrorCode::Closed);
    // Released in etcd at once (lease revoked), not after the TTL.
    let got = tokio::time::timeout(Duration::from_secs(2), b.lock("x"))
        .await
        .unwrap()
        .unwrap();
    assert!(got.fencing_token() > g1.fencing_token());
    b.try_lock("y").await.unwrap();
    a.close().await; // idempotent
}

#[tokio::test]
async fn close_closes_the_connection_while_the_client_lives_on() {
    // A binding's client object outlives close() until garbage collection
    // frees it; its connection to etcd must not.
    let etcd = Etcd::single();
    let ns = unique_ns("close-conn");
    let c = client(&etcd, &ns, 10).await;
    let port: u16 = c
        .member_in_use()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap();
    c.lock("x").await.unwrap().unlock().await.unwrap();
    assert_eq!(
        connections_to(port),
        1,
        "one connection for requests, keep-alives and watches"
    );
    c.close().await;
    assert_eq!(connections_to(port), 0, "the connection outlived close()");
    // Nothing connects again through the closed client, raw requests included.
    assert!(c.etcd().await.unwrap().get("x", None).await.is_err());
    assert_eq!(c.lock("x").await.unwrap_err().code(), ErrorCode::Closed);
    assert_eq!(connections_to(port), 0);
}

#[tokio::test]
async fn guarded_ops_apply_only_while_held() {
    let etcd = Etcd::single();
    let ns = unique_ns("guarded");
    let c = client(&etcd, &ns, 10).await;
    let g = c.lock("g").await.unwrap();
    g.put("k", b"v1").await.unwrap();
    assert_eq!(g.get("k").await.unwrap(), Some(b"v1".to_vec()));
    assert!(g.delete("k").await.unwrap());
    assert!(!g.delete("k").await.unwrap());
    assert_eq!(g.get("k").await.unwrap(), None);
    g.put("k", "v2").await.unwrap();
    // The key is namespaced like the lock.
    let mut raw = c.etcd().await.unwrap();
    assert_eq!(
        raw.get(format!("{ns}k"), None).await.unwrap().kvs()[0].value(),
        b"v2"
    );
    // etcd itself rejects the write once our key is gone, even before the watch fires.
    let cfg = ClientOptions {
        watch_held_keys: false,
        ..opts(&etcd, &ns, 10)
    };
    let c2 = Client::connect(cfg).await.unwrap();
    let g2 = c2.lock("g2").await.unwrap();
    raw.delete(g2.key(), None).await.unwrap();
    assert!(
        g2.is_held(),
        "without the key watch the guard cannot know yet"
    );
    let err = g2.put("k", "stale").await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::LockLost);
    assert_eq!(
        raw.get(format!("{ns}k"), None).await.unwrap().kvs()[0].value(),
        b"v2"
    );
    assert!(!g2.is_held());
}

/// A hold lost unseen (no key watch, no guarded operation since) is reported
/// by unlock: its key was gone, someone may have held the lock meanwhile.
#[tokio::test]
async fn unlock_reports_a_hold_lost_unseen() {
    let etcd = Etcd::single();
    let ns = unique_ns("unseen");
    let c = Client::connect(ClientOptions {
        watch_held_keys: false,
        ..opts(&etcd, &ns, 10)
    })
    .await
    .unwrap();
    let g = c.lock("x").await.unwrap();
    c.etcd().await.unwrap().delete(g.key(), None).await.unwrap();
    assert!(
        g.is_held(),
        "without the key watch the guard cannot know yet"
    );
    let err = g.unlock().await.unwrap_err();
    assert_eq!(
        (err.code(), err.loss_reason()),
        (ErrorCode::LockLost, Some(LossReason::KeyDeleted)),
        "{err}"
    );
    assert!(g.unlock().await.is_ok(), "a second unlock is Ok");
    // The session is fine: the next hold of the same name works and unlocks cleanly.
    let g2 = c.lock("x").await.unwrap();
    g2.unlock().await.unwrap();
}

#[tokio::test]
async fn bad_input_gets_typed_errors() {
    let etcd = Etcd::single();
    let ns = unique_ns("bad");
    let c = client(&etcd, &ns, 10).await;
    assert_eq!(
        c.lock("").await.unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        c.try_lock("").await.unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    let huge = "x".repeat(2 * 1024 * 1024);
    let err = c.lock(&huge).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    assert!(
        err.message().len() < 300,
        "message must not echo the huge name"
    );
    // Just over our limit, and etcd's own limit through a guarded put.
    assert_eq!(
        c.lock(&"y".repeat(etcdlock::MAX_NAME_LEN + 1))
            .await
            .unwrap_err()
            .code(),
        ErrorCode::InvalidArgument
    );
    let g = c.lock(&"y".repeat(etcdlock::MAX_NAME_LEN)).await.unwrap();
    assert_eq!(
        g.put("big", vec![0u8; 2 * 1024 * 1024])
            .await
            .unwrap_err()
            .code(),
        ErrorCode::InvalidArgument
    );
    g.unlock().await.unwrap();

    for ttl in [0, -1, etcdlock::MAX_TTL_SECS + 1, i64::MAX] {
        let err = Client::connect(opts(&etcd, &ns, ttl)).await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidArgument, "ttl {ttl}");
    }
    // TTL 1 is below etcd's minimum: raised, and the effective value reported.
    let low = Client::connect(opts(&etcd, &ns, 1)).await.unwrap();
    assert!(low.ttl() >= 1);
    let big = Client::connect(opts(&etcd, &ns, etcdlock::MAX_TTL_SECS))
        .await
        .unwrap();
    assert_eq!(big.ttl(), etcdlock::MAX_TTL_SECS);
    big.close().await;

    assert_eq!(
        Client::connect(ClientOptions::new(Vec::<String>::new()))
            .await
            .unwrap_err()
            .code(),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        Client::connect(ClientOptions::new(["not a url"]))
            .await
            .unwrap_err()
            .code(),
        ErrorCode::InvalidArgument
    );
    // https without TLS options: fail closed.
    assert_eq!(
        Client::connect(ClientOptions::new(["https://127.0.0.1:2379"]))
            .await
            .unwrap_err()
            .code(),
        ErrorCode::InvalidArgument
    );

    // Unreachable: a clear Unavailable within the connect timeout, naming the endpoint.
    let port = etcdlock_testkit::free_port();
    let started = Instant::now();
    let err = Client::connect(
        ClientOptions::new([format!("127.0.0.1:{port}")])
            .with_connect_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Unavailable, "{err}");
    assert!(err.message().contains(&port.to_string()), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );

    // Passwords never appear in messages.
    let err = Client::connect(opts(&etcd, &ns, 10).with_user("root", "s3cret-Passw0rd"))
        .await
        .unwrap_err();
    assert!(!err.to_string().contains("s3cret"), "{err}");
    assert!(!format!(
        "{:?}",
        opts(&etcd, &ns, 10).with_user("u", "s3cret-Passw0rd")
    )
    .contains("s3cret"));
}

#[tokio::test]
async fn dropping_the_last_handle_revokes_the_lease() {
    let etcd = Etcd::single();
    let ns = unique_ns("drop");
    let observer = client(&etcd, &ns, 10).await;
    let c = client(&etcd, &ns, 10).await;
    let g = c.lock("d").await.unwrap();
    let lease = g.lease_id();
    drop(c);
    // The guard still holds a handle: the lease lives on.
    assert!(g.is_held());
    drop(g);
    let mut raw = observer.etcd().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let ttl = raw.lease_time_to_live(lease, None).await.unwrap().ttl();
        if ttl == -1 {
            break; // revoked
        }
        assert!(Instant::now() < deadline, "lease still alive (ttl {ttl})");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(keys(&observer, &format!("{ns}d/")).await.is_empty());
}

/// Regression: a client that unlocks and locks again re-creates the same
/// lease-hex key. A waiter closing the watch gap must not mistake that new
/// incarnation for its predecessor (it would wait behind a key that waits
/// behind it: a deadlock the flash-sale demo found).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reused_key_names_never_deadlock_two_alternating_clients() {
    let etcd = Etcd::single();
    let ns = unique_ns("reuse");
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let c = client(&etcd, &ns, 10).await;
        tasks.push(tokio::spawn(async move {
            for i in 0..300 {
                let g = c
                    .lock_with("r", LockOptions::timeout(Duration::from_secs(10)))
                    .await
                    .unwrap_or_else(|e| panic!("iteration {i}: {e}"));
                g.unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test]
async fn closing_the_client_fails_its_waiters_with_closed() {
    let etcd = Etcd::single();
    let ns = unique_ns("closewait");
    let holder = client(&etcd, &ns, 10).await;
    let _g = holder.lock("w").await.unwrap();
    let c = client(&etcd, &ns, 10).await;
    let waiter = tokio::spawn({
        let c = c.clone();
        async move { c.lock("w").await }
    });
    await_key_count(&holder, &format!("{ns}w/"), 2).await;
    c.close().await;
    assert_eq!(waiter.await.unwrap().unwrap_err().code(), ErrorCode::Closed);
    await_key_count(&holder, &format!("{ns}w/"), 1).await;
}

#[tokio::test]
async fn guarded_keys_under_the_locks_own_prefix_are_refused() {
    let etcd = Etcd::single();
    let ns = unique_ns("prefix");
    let c = client(&etcd, &ns, 10).await;
    let g = c.lock("stock").await.unwrap();
    // "stock/count" would sit in the lock's queue and block the next acquisition forever.
    for e in [
        g.put("stock/count", "1").await.unwrap_err(),
        g.get("stock/x").await.unwrap_err(),
        g.delete("stock/").await.unwrap_err(),
    ] {
        assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    }
    assert_eq!(
        g.put("", "1").await.unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    g.put("stock-count", "1").await.unwrap();
    g.put("stock", "1").await.unwrap(); // the bare name is outside the prefix
    g.unlock().await.unwrap();
    let g2 = tokio::time::timeout(Duration::from_secs(2), c.lock("stock"))
        .await
        .unwrap()
        .unwrap();
    assert!(g2.is_held());
}

/// A waiter whose key goes (its lease revoked from outside) fails at once with
/// LockLost, not when its predecessor finally leaves (etcd issue 19597).
#[tokio::test]
async fn a_waiter_whose_key_is_revoked_fails_at_once() {
    let etcd = Etcd::single();
    let ns = unique_ns("waiterlost");
    let holder = client(&etcd, &ns, 30).await;
    let g = holder.lock("w").await.unwrap();
    let c = client(&etcd, &ns, 30).await;
    let waiter = tokio::spawn({
        let c = c.clone();
        async move { c.lock("w").await }
    });
    await_key_count(&holder, &format!("{ns}w/"), 2).await;
    let lease = c.lease_id().await.unwrap();
    let started = Instant::now();
    holder
        .etcd()
        .await
        .unwrap()
        .lease_revoke(lease)
        .await
        .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::LockLost, "{err}");
    // Well before the next keep-alive (21 s at TTL 30) could have noticed.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(g.is_held());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_leaving_between_the_holder_and_us_never_hands_us_the_lock_early() {
    // C waits behind B (its predecessor) and watches A (the key ahead of B,
    // here the holder). B gives up: C must then wait for A, not take the lock.
    let etcd = Etcd::single();
    let ns = unique_ns("ahead");
    let prefix = format!("{ns}q/");
    let (a, b, c) = (
        client(&etcd, &ns, 10).await,
        client(&etcd, &ns, 10).await,
        client(&etcd, &ns, 10).await,
    );
    let ga = a.lock("q").await.unwrap();
    let cancel_b = CancellationToken::new();
    let opts_b = LockOptions {
        timeout: None,
        cancel: Some(cancel_b.clone()),
        ..LockOptions::default()
    };
    let tb = tokio::spawn(async move { b.lock_with("q", opts_b).await.map(|g| g.fencing_token()) });
    await_key_count(&a, &prefix, 2).await;
    let tc = tokio::spawn(async move { c.lock("q").await });
    await_key_count(&a, &prefix, 3).await;
    cancel_b.cancel();
    assert_eq!(tb.await.unwrap().unwrap_err().code(), ErrorCode::Cancelled);
    await_key_count(&a, &prefix, 2).await;
    // Round trips through the holder while C has every chance to misread B's delete.
    for i in 0..5 {
        ga.put("probe", i.to_string()).await.unwrap();
        assert!(!tc.is_finished(), "C took the lock while A held it");
    }
    assert!(ga.is_held());
    let token_a = ga.fencing_token();
    ga.unlock().await.unwrap();
    let gc = tc.await.unwrap().unwrap();
    assert!(gc.fencing_token() > token_a);
    assert_eq!(keys(&a, &prefix).await.len(), 1);
    gc.unlock().await.unwrap();
}

/// The recipes as values (`Mutex::new(&client, name)`, as Go's
/// `concurrency.NewMutex`): the same keys and exclusion as the calls on
/// `Client` they stand for.
#[tokio::test]
async fn recipe_values_take_the_same_locks_as_the_client_calls() {
    use etcdlock::{Election, MultiLock, Mutex, Once, ReentrantLock, RwLock, Semaphore};
    let etcd = Etcd::single();
    let ns = unique_ns("values");
    let c = client(&etcd, &ns, 10).await;
    let m = Mutex::new(&c, "m");
    assert_eq!(m.name(), "m");
    let g = m.lock(LockOptions::default()).await.unwrap();
    assert_eq!(g.key(), format!("{ns}m/{:x}", g.lease_id()));
    let busy = |r: etcdlock::Result<etcdlock::Guard>| r.map(|_| ()).unwrap_err().code();
    assert_eq!(
        busy(m.try_lock(LockOptions::default()).await),
        ErrorCode::WouldBlock
    );
    assert_eq!(busy(c.try_lock("m").await), ErrorCode::WouldBlock);
    g.unlock().await.unwrap();
    let rw = RwLock::new(&c, "rw");
    let (r1, r2) = (
        rw.read(LockOptions::default()).await.unwrap(),
        rw.read(LockOptions::default()).await.unwrap(),
    );
    let zero = LockOptions {
        timeout: Some(Duration::ZERO),
        ..LockOptions::default()
    };
    assert_eq!(busy(rw.write(zero.clone()).await), ErrorCode::Timeout);
    drop((r1, r2));
    let sem = Semaphore::new(&c, "s", 2);
    let (p1, p2) = (
        sem.acquire(LockOptions::default()).await.unwrap(),
        sem.acquire(LockOptions::default()).await.unwrap(),
    );
    assert_eq!(busy(sem.acquire(zero.clone()).await), ErrorCode::Timeout);
    drop((p1, p2));
    let both = MultiLock::new(&c, ["a", "b"])
        .lock(LockOptions::default())
        .await
        .unwrap();
    assert_eq!(busy(c.try_lock("b").await), ErrorCode::WouldBlock);
    drop(both);
    let re = ReentrantLock::new(&c, "re");
    let (h1, h2) = (
        re.lock(1, LockOptions::default()).await.unwrap(),
        re.try_lock(1, LockOptions::default()).await.unwrap(),
    );
    assert_eq!(h1.fencing_token(), h2.fencing_token());
    assert_eq!(
        busy(re.try_lock(2, LockOptions::default()).await),
        ErrorCode::WouldBlock
    );
    drop((h1, h2));
    let e = Election::new(&c, "e");
    let lead = e.campaign("me", LockOptions::default()).await.unwrap();
    assert_eq!(e.leader().await.unwrap().unwrap().value, b"me".to_vec());
    drop(lead);
    let once = Once::new(&c, "job");
    let hold = once.take(Duration::from_secs(5)).await.unwrap().unwrap();
    assert!(once.take(Duration::from_secs(5)).await.unwrap().is_none());
    assert!(once.finish(&hold, Duration::from_secs(60)).await.unwrap());
    assert!(once.record().await.unwrap().is_some());
    c.close().await;
}
