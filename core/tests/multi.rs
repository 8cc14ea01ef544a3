//! Multi-lock: all waiter keys in one Txn; guarded operations under every lock.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{client, unique_ns};
use etcdlock::{CancellationToken, ErrorCode, LockOptions};
use etcdlock_testkit::Etcd;

const NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_clients_on_overlapping_sets_never_stall_and_counters_are_exact() {
    let etcd = Etcd::single();
    let ns = unique_ns("multi");
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(client(&etcd, &ns, 10).await);
    }
    let expected: Arc<Vec<AtomicU64>> =
        Arc::new((0..NAMES.len()).map(|_| AtomicU64::new(0)).collect());
    let until = Instant::now() + Duration::from_secs(4);
    let mut tasks = Vec::new();
    for (t, c) in clients.iter().enumerate() {
        let (c, expected) = (c.clone(), expected.clone());
        tasks.push(tokio::spawn(async move {
            let mut seed = 0x9e3779b97f4a7c15u64 ^ (t as u64 + 1);
            let mut rounds = 0u64;
            while Instant::now() < until {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let k = 2 + (seed % 2) as usize; // pairs and triples
                let mut picked: Vec<usize> = Vec::new();
                let mut s = seed;
                while picked.len() < k {
                    let i = (s % NAMES.len() as u64) as usize;
                    if !picked.contains(&i) {
                        picked.push(i);
                    }
                    s = s / 5 + 7919 * (picked.len() as u64 + 1);
                }
                let names: Vec<&str> = picked.iter().map(|i| NAMES[*i]).collect();
                // A stall would hit this timeout and fail the test.
                let m = c
                    .lock_many(&names, LockOptions::timeout(Duration::from_secs(20)))
                    .await
                    .unwrap();
                assert!(m.is_held());
                for (g, i) in m.guards().iter().zip(&picked) {
                    let key = format!("count-{}", NAMES[*i]);
                    let n: u64 = g
                        .get(&key)
                        .await
                        .unwrap()
                        .map(|v| String::from_utf8_lossy(&v).parse().unwrap())
                        .unwrap_or(0);
                    g.put(&key, (n + 1).to_string()).await.unwrap();
                    expected[*i].fetch_add(1, Ordering::Relaxed);
                }
                m.unlock().await.unwrap();
                rounds += 1;
            }
            rounds
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    let mut raw = clients[0].etcd().await.unwrap();
    for (i, n) in NAMES.iter().enumerate() {
        let v = raw.get(format!("{ns}count-{n}"), None).await.unwrap();
        let got: u64 = v
            .kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.value()).parse().unwrap())
            .unwrap_or(0);
        assert_eq!(got, expected[i].load(Ordering::Relaxed), "counter {n}");
    }
    assert!(total > 8, "only {total} multi-lock rounds in 4 s");
    println!("{total} multi-lock rounds, counters exact");
}

#[tokio::test]
async fn one_try_and_cancel_leave_no_key_and_bad_input_is_refused() {
    let etcd = Etcd::single();
    let ns = unique_ns("multi2");
    let a = client(&etcd, &ns, 10).await;
    let b = client(&etcd, &ns, 10).await;
    let g = a.lock("b").await.unwrap();
    let e = b
        .lock_many(&["a", "b", "c"], LockOptions::timeout(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
    let e = b
        .lock_many(
            &["a", "b"],
            LockOptions::timeout(Duration::from_millis(200)),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Timeout, "{e}");
    let t = CancellationToken::new();
    let waiting = tokio::spawn({
        let (b, t) = (b.clone(), t.clone());
        async move {
            b.lock_many(
                &["c", "b"],
                LockOptions {
                    timeout: None,
                    cancel: Some(t),
                    ..LockOptions::default()
                },
            )
            .await
        }
    });
    common::await_key_count(&a, &format!("{ns}b/"), 2).await;
    t.cancel();
    assert_eq!(
        waiting.await.unwrap().unwrap_err().code(),
        ErrorCode::Cancelled
    );
    for n in ["a", "c"] {
        assert!(
            common::keys(&a, &format!("{ns}{n}/")).await.is_empty(),
            "{n} left a key"
        );
    }
    assert_eq!(common::keys(&a, &format!("{ns}b/")).await.len(), 1);
    g.unlock().await.unwrap();
    let m = b
        .lock_many(&["a", "b", "c"], LockOptions::timeout(Duration::ZERO))
        .await
        .unwrap();
    let tokens: Vec<i64> = m.guards().iter().map(|g| g.fencing_token()).collect();
    assert!(
        tokens.windows(2).all(|w| w[0] == w[1]),
        "one Txn, one revision: {tokens:?}"
    );
    m.unlock().await.unwrap();
    for bad in [vec![], vec!["x", "x"], vec![""]] {
        assert_eq!(
            b.lock_many(&bad, LockOptions::default())
                .await
                .unwrap_err()
                .code(),
            ErrorCode::InvalidArgument
        );
    }
    let many: Vec<String> = (0..etcdlock::MAX_MULTI + 1)
        .map(|i| format!("n{i}"))
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert_eq!(
        b.lock_many(&many, LockOptions::default())
            .await
            .unwrap_err()
            .code(),
        ErrorCode::InvalidArgument
    );
}

/// The Txn that creates the keys also reads each queue (up to 64 names; two
/// ops per name within etcd's --max-txn-ops): a name whose read shows an older
/// key waits for it, a nested name (`a` and `a/b` in one multi-lock, their
/// keys of one revision under one prefix) falls back to a separate read, and
/// 64, 65 and 128 names all lock and release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_read_in_the_txn_is_right_for_held_nested_and_many_names() {
    let etcd = Etcd::single();
    let ns = unique_ns("multi3");
    let a = client(&etcd, &ns, 10).await;
    let b = client(&etcd, &ns, 10).await;
    // Held elsewhere: the in-Txn read sees the holder and waits for it.
    let g = a.lock("y").await.unwrap();
    let waiting = tokio::spawn({
        let b = b.clone();
        async move {
            b.lock_many(&["x", "y"], LockOptions::timeout(Duration::from_secs(10)))
                .await
        }
    });
    common::await_key_count(&a, &format!("{ns}y/"), 2).await;
    assert!(!waiting.is_finished());
    g.unlock().await.unwrap();
    let m = waiting.await.unwrap().unwrap();
    assert!(m.is_held());
    m.unlock().await.unwrap();
    // A name and its nested name in one multi-lock.
    let m = b
        .lock_many(&["a", "a/b"], LockOptions::timeout(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(m.is_held());
    assert_eq!(
        a.try_lock("a").await.unwrap_err().code(),
        ErrorCode::WouldBlock
    );
    assert_eq!(
        a.try_lock("a/b").await.unwrap_err().code(),
        ErrorCode::WouldBlock
    );
    m.unlock().await.unwrap();
    for n in [64usize, 65, 128] {
        let names: Vec<String> = (0..n).map(|i| format!("many{n}-{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let m = b
            .lock_many(&names, LockOptions::timeout(Duration::from_secs(10)))
            .await
            .unwrap();
        assert_eq!(m.guards().len(), n);
        assert_eq!(
            a.try_lock(names[n - 1]).await.unwrap_err().code(),
            ErrorCode::WouldBlock
        );
        m.unlock().await.unwrap();
        assert!(common::keys(&a, &format!("{ns}many{n}-0/"))
            .await
            .is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_operations_need_every_lock_and_a_lost_one_is_reported() {
    let etcd = Etcd::single();
    let ns = unique_ns("multi-guarded");
    let c = client(&etcd, &ns, 10).await;
    let m = c
        .lock_many(
            &["acct-1", "acct-2"],
            LockOptions::timeout(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    m.put("ledger", "100").await.unwrap();
    assert_eq!(m.get("ledger").await.unwrap().as_deref(), Some(&b"100"[..]));
    assert!(m.delete("ledger").await.unwrap());
    assert!(!m.delete("ledger").await.unwrap());
    assert_eq!(m.get("ledger").await.unwrap(), None);
    // Data under either lock's own prefix would join its queue: refused.
    for bad in ["acct-1/x", "acct-2/y", ""] {
        assert_eq!(
            m.put(bad, "v").await.unwrap_err().code(),
            ErrorCode::InvalidArgument,
            "{bad:?}"
        );
    }
    // Lose the second lock from outside: the next operation is refused by
    // etcd, that lock (and only it) reports KeyDeleted, the data is untouched.
    m.put("ledger", "1").await.unwrap();
    let lost_key = m.guards()[1].key();
    let mut raw = c.etcd().await.unwrap();
    raw.delete(lost_key.clone(), None).await.unwrap();
    let e = m.put("ledger", "2").await.unwrap_err();
    assert_eq!(
        (e.code(), e.loss_reason()),
        (ErrorCode::LockLost, Some(etcdlock::LossReason::KeyDeleted))
    );
    assert!(
        m.guards()[0].loss().is_none(),
        "the lock still held is not reported lost"
    );
    assert_eq!(
        m.guards()[1].loss().map(|l| l.reason),
        Some(etcdlock::LossReason::KeyDeleted)
    );
    assert!(!m.is_held());
    let v = raw.get(format!("{ns}ledger"), None).await.unwrap();
    assert_eq!(v.kvs()[0].value(), b"1");
    assert_eq!(m.unlock().await.unwrap_err().code(), ErrorCode::LockLost);
    c.close().await;
}
