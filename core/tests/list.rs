//! `Client::list`: every kind of lock under a prefix, their holders and
//! waiters, with what the meta records add (kind, language, local queue),
//! and nothing new under any lock's own prefix.
mod common;

use std::time::{Duration, Instant};

use etcd_client::{GetOptions, PutOptions};
use etcdlock::{LockKind, LockOptions, Status};
use etcdlock_testkit::Etcd;

use common::{client, keys, unique_ns};

/// List until `ok` holds (the meta records are written within ~200 ms), at most 5 s.
async fn list_until(
    c: &etcdlock::Client,
    prefix: &str,
    ok: impl Fn(&[Status]) -> bool,
) -> Vec<Status> {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let l = c.list(prefix).await.expect("list");
        if ok(&l) || Instant::now() > until {
            return l;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_every_kind_with_its_holders_waiters_and_local_queue() {
    let etcd = Etcd::single();
    let ns = unique_ns("list");
    let a = client(&etcd, &ns, 15).await;
    let b = client(&etcd, &ns, 15).await;

    // A mutex held by a, with 100 waiters in b (two keys in etcd, 100 in b's local queue).
    let held = a.lock("app/mutex").await.unwrap();
    let mut waits = Vec::new();
    for _ in 0..100 {
        let b = b.clone();
        // Each releases as soon as it holds, so they drain in queue order.
        waits.push(tokio::spawn(async move {
            b.lock("app/mutex").await?.unlock().await
        }));
    }
    // An election, a 3-permit semaphore with one permit taken, a read-write
    // lock with a reader and a queued writer.
    let leader = a
        .campaign("app/election", "node-1", LockOptions::default())
        .await
        .unwrap();
    let permit = a
        .acquire_permit("app/sem", 3, LockOptions::default())
        .await
        .unwrap();
    let reader = a.read_lock("app/rw", LockOptions::default()).await.unwrap();
    let writer = {
        let b = b.clone();
        tokio::spawn(async move { b.lock("app/rw").await })
    };
    // A foreign holder, as etcdctl lock writes it (a leased key, empty value),
    // and data written beside the locks (no lease: not a lock).
    let mut raw = a.etcd().await.unwrap();
    let lease = raw.lease_grant(15, None).await.unwrap().id();
    raw.put(
        format!("{ns}app/foreign/{lease:x}"),
        "",
        Some(PutOptions::new().with_lease(lease)),
    )
    .await
    .unwrap();
    raw.put(format!("{ns}app/stock"), "300", None)
        .await
        .unwrap();

    let l = list_until(&a, "app/", |l| {
        l.iter().any(|s| {
            s.name == "app/mutex" && s.waiters.iter().any(|w| w.local_waiters == Some(100))
        }) && l.iter().any(|s| s.name == "app/rw" && s.waiters.len() == 1)
            && l.iter()
                .filter(|s| s.holders.iter().any(|h| h.language.is_some()))
                .count()
                == 4
    })
    .await;
    let names: Vec<&str> = l.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "app/election",
            "app/foreign",
            "app/mutex",
            "app/rw",
            "app/sem"
        ],
        "sorted, data keys left out"
    );
    let by = |n: &str| l.iter().find(|s| s.name == n).unwrap();

    let m = by("app/mutex");
    assert_eq!(m.kind, Some(LockKind::Mutex));
    assert_eq!(
        (m.holders.len(), m.waiters.len()),
        (1, 2),
        "two keys per client in etcd"
    );
    assert_eq!(m.holders[0].create_revision, held.fencing_token());
    assert_eq!(m.holders[0].pid, Some(std::process::id()));
    assert_eq!(m.holders[0].language.as_deref(), Some("rust"));
    assert_eq!(m.holders[0].local_waiters, Some(0));
    assert!(
        m.waiters
            .iter()
            .all(|w| w.local_waiters == Some(100) && !w.foreign),
        "{:?}",
        m.waiters
    );

    let e = by("app/election");
    assert_eq!(e.kind, Some(LockKind::Election));
    assert_eq!(
        e.holders[0].value, b"node-1",
        "an election's value stays the raw proclamation"
    );

    let s = by("app/sem");
    assert_eq!(s.kind, Some(LockKind::Semaphore));
    assert_eq!(s.holders.len(), 1);

    let rw = by("app/rw");
    assert_eq!(
        rw.kind,
        Some(LockKind::RwLock),
        "a reader key tells the kind before any meta record"
    );
    assert_eq!((rw.holders.len(), rw.waiters.len()), (1, 1));

    let f = by("app/foreign");
    assert_eq!(f.kind, None);
    assert!(f.holders[0].foreign && f.holders[0].host.is_none() && f.holders[0].language.is_none());

    // Go's Mutex and etcdctl see exactly the lock keys under each prefix: the
    // meta records live beside them.
    for (name, n) in [
        ("app/mutex/", 3),
        ("app/election/", 1),
        ("app/sem/", 1),
        ("app/rw/", 2),
    ] {
        assert_eq!(keys(&a, &format!("{ns}{name}")).await.len(), n, "{name}");
    }
    // A meta record for each use its lock key does not describe: b's 100
    // waiters, the election, the semaphore and the reader. a's mutex hold
    // and b's one queued writer (one mutex acquisition each) have none.
    let records = format!("{ns}{}", etcdlock::META_PREFIX);
    let until = Instant::now() + Duration::from_secs(5);
    while keys(&a, &records).await.len() != 4 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut names: Vec<String> = keys(&a, &records)
        .await
        .iter()
        .map(|(k, _)| k[records.len()..k.rfind('/').unwrap()].to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["app/election", "app/mutex", "app/rw", "app/sem"]);

    // Everything released: the records go too.
    held.unlock().await.unwrap();
    for w in waits {
        w.await.unwrap().unwrap();
    }
    leader.resign().await.unwrap();
    permit.unlock().await.unwrap();
    reader.unlock().await.unwrap();
    writer.await.unwrap().unwrap().unlock().await.unwrap();
    raw.lease_revoke(lease).await.unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    let meta = format!("{ns}{}", etcdlock::META_PREFIX);
    while raw
        .get(meta.clone(), Some(GetOptions::new().with_prefix()))
        .await
        .unwrap()
        .count()
        > 0
        && Instant::now() < until
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        raw.get(meta, Some(GetOptions::new().with_prefix()))
            .await
            .unwrap()
            .count(),
        0,
        "meta records deleted"
    );
    assert!(a.list("app/").await.unwrap().is_empty());
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_holds_write_no_meta_record() {
    let etcd = Etcd::single();
    let ns = unique_ns("list-short");
    let a = client(&etcd, &ns, 15).await;
    let mut raw = a.etcd().await.unwrap();
    let start = raw
        .get("x", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    for _ in 0..20 {
        a.lock("quick").await.unwrap().unlock().await.unwrap();
    }
    // Two ticks later, still nothing but the 20 puts and 20 deletes of the lock keys.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let now = raw
        .get("x", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    assert_eq!(
        now - start,
        40,
        "no meta writes for holds shorter than a tick"
    );
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_by_token_frees_a_wedged_holder_who_learns_it() {
    let etcd = Etcd::single();
    let ns = unique_ns("release");
    let holder = client(&etcd, &ns, 15).await;
    let admin = client(&etcd, &ns, 15).await;
    let g = holder.lock("wedged").await.unwrap();
    let token = g.fencing_token();
    assert!(
        !admin.release("wedged", token + 1).await.unwrap(),
        "a token nobody has"
    );
    let waiter = {
        let admin = admin.clone();
        tokio::spawn(async move { admin.lock("wedged").await })
    };
    common::await_key_count(&admin, &format!("{ns}wedged/"), 2).await;
    let t = Instant::now();
    assert!(admin.release("wedged", token).await.unwrap());
    let loss = tokio::time::timeout(Duration::from_secs(2), g.wait_lost())
        .await
        .expect("told within 2 s")
        .expect("lost, not released");
    assert_eq!(loss.reason, etcdlock::LossReason::KeyDeleted);
    let next = waiter.await.unwrap().unwrap();
    assert!(next.fencing_token() > token);
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(
        !admin.release("wedged", token).await.unwrap(),
        "released already"
    );
    assert_eq!(
        g.unlock().await.unwrap_err().code(),
        etcdlock::ErrorCode::LockLost
    );
    // The new holder is untouched by a stale release.
    assert!(next.is_held());
    next.unlock().await.unwrap();
    holder.close().await;
    admin.close().await;
}

/// A list from an outer namespace (here the root, with no prefix: all of
/// it) shows an inner-namespace client's locks under their full names, and
/// leaves out that client's meta records (`<ns>__etcdlock/meta/...` are
/// records, not locks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_from_an_outer_namespace_leaves_inner_meta_records_out() {
    let etcd = Etcd::single();
    let ns = unique_ns("inner");
    let inner = client(&etcd, &ns, 15).await;
    let root = client(&etcd, "", 15).await;
    // With metadata, so that the hold has a meta record (a plain one has none).
    let held = inner
        .lock_with("alpha", LockOptions::default().with_metadata("job", "x"))
        .await
        .unwrap();
    let mut raw = root.etcd().await.unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    let records = format!("{ns}{}", etcdlock::META_PREFIX);
    while raw
        .get(
            records.clone(),
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .unwrap()
        .count()
        != 1
    {
        assert!(Instant::now() < until, "no meta record under {records}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for prefix in ["", ns.as_str()] {
        let names: Vec<String> = root
            .list(prefix)
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(
            names,
            [format!("{ns}alpha")],
            "list({prefix:?}) from the root"
        );
    }
    let names: Vec<String> = inner
        .list("")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["alpha"]);
    held.unlock().await.unwrap();
}
