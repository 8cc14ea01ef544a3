//! Issue 11, item 2: after its stream breaks, the client's one watch stream is
//! re-created and each watch resumes from the revision after the last event
//! it saw; a watch whose start revision was compacted meanwhile re-reads its
//! state. The faults suite's compaction scenario hits this by chance; this
//! test forces it.

use std::time::{Duration, Instant};

use etcdlock::{Client, LockOptions, LossReason};
use etcdlock_faults::{await_key_count, opts, raw, unique_ns, Proxy};
use etcdlock_testkit::Etcd;

/// etcd's count of watchers (`etcd_debugging_mvcc_watcher_total`).
fn etcd_watchers(etcd: &Etcd) -> i64 {
    etcd.metric(0, "etcd_debugging_mvcc_watcher_total", &[]) as i64
}

/// Wait (at most 10 s) until `f` holds.
async fn until(what: &str, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(10), "still not: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Client `b` reaches etcd only through a proxy. It holds `Y` (a held-key
/// watch) and waits for `L`, which `a` holds (watches on its own key and on
/// `a`'s). With every one of those watches registered in etcd, the proxy
/// stops forwarding; `a` unlocks `L`, and etcd's history is compacted past
/// that delete. Then the proxy resets `b`'s connections and passes again:
/// `b`'s hub re-creates its stream from the revisions after the last events
/// it saw, which are compacted now. Each watch must report a reset and its
/// owner re-read: the waiter finds itself first and gets `L`, and `Y` stays
/// held, its watch back, so an outside delete of its key is still reported.
/// Ignoring the compacted resume fails both: the waiter waits out its 10 s
/// timeout and `Y`'s guard never hears of the delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_resumed_from_a_compacted_revision_re_read_and_miss_nothing() {
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("resume");
    let mut rawc = raw(&eps).await;
    let proxy = Proxy::start(&eps[0]).await.unwrap();
    let before = etcd_watchers(&etcd);
    let mut ao = opts(&eps, &ns, 10, Duration::from_secs(2));
    ao.apply_pairs([("watch_held_keys", "false")]).unwrap();
    let a = Client::connect(ao).await.unwrap();
    let b = Client::connect(opts(&[proxy.endpoint()], &ns, 10, Duration::from_secs(2)))
        .await
        .unwrap();

    let y = b.lock("Y").await.unwrap();
    until("Y's held-key watch subscribed", || b.active_watches() == 1).await;
    let ga = a.lock("L").await.unwrap();
    let waiter = tokio::spawn({
        let b = b.clone();
        async move {
            b.lock_with("L", LockOptions::timeout(Duration::from_secs(10)))
                .await
        }
    });
    await_key_count(&mut rawc, &format!("{ns}L/"), 2, Duration::from_secs(10))
        .await
        .expect("the waiter queued");
    until("the waiter's watches subscribed", || {
        b.active_watches() >= 3
    })
    .await;
    let watches = b.etcd_watches();
    assert!(
        watches >= 3,
        "Y's key, the waiter's key and a's key: {watches} etcd watches"
    );
    until("etcd registered every watch of b", || {
        etcd_watchers(&etcd) == before + watches
    })
    .await;
    assert_eq!(b.watch_streams_opened(), 1);
    // A waiter behind a fresh holder also re-checks it a few times in its
    // first 115 ms (mutex.rs, `polls`); let those end, so that only the
    // watch can tell this waiter the lock is free.
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Cut b off (chunks are held, not forwarded), then let history move on
    // past a's delete and compact it away.
    proxy.blackhole();
    let token_a = ga.fencing_token();
    ga.unlock().await.unwrap();
    let put = rawc.put(format!("{ns}bump"), "1", None).await.unwrap();
    let compacted = put.header().unwrap().revision();
    rawc.compact(compacted, None).await.unwrap();
    // Closed before the proxy passes again: the held-back delete event dies
    // with the connection.
    assert!(
        proxy.reset_all_and_wait().await >= 1,
        "b had live connections through the proxy"
    );
    proxy.pass();

    let t = Instant::now();
    let gb = tokio::time::timeout(Duration::from_secs(8), waiter)
        .await
        .expect("the waiter re-read after the compacted resume and got L")
        .unwrap()
        .expect("the waiter got L, not an error");
    println!("waiter got L {:?} after the reset", t.elapsed());
    assert!(
        gb.fencing_token() > token_a,
        "tokens increase: {} then {}",
        token_a,
        gb.fencing_token()
    );
    assert!(
        gb.fencing_token() < compacted,
        "the waiter kept its place (its key is older than the compaction)"
    );
    assert_eq!(
        b.watch_streams_opened(),
        2,
        "one stream re-created for every watch"
    );
    gb.unlock().await.unwrap();

    // Y survived the reset: its guard re-read its key and watches it again.
    until("Y's watch is back", || b.active_watches() == 1).await;
    assert!(
        y.is_held(),
        "Y reported lost after a compaction reset: {:?}",
        y.loss()
    );
    y.put("probe", "1")
        .await
        .expect("a guarded write under Y still succeeds");
    rawc.delete(y.key(), None).await.unwrap();
    let loss = tokio::time::timeout(Duration::from_secs(5), y.wait_lost())
        .await
        .expect("the delete of Y's key reported")
        .unwrap();
    assert_eq!(loss.reason, LossReason::KeyDeleted);
    a.close().await;
    b.close().await;
}
