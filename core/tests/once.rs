//! Run-once records (ShedLock's semantics in core), against real etcd.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use etcdlock::{ErrorCode, ONCE_PREFIX};
use etcdlock_testkit::Etcd;

#[tokio::test]
async fn one_take_per_record_and_at_least_and_at_most_hold() {
    let etcd = Etcd::single();
    let ns = unique_ns("once");
    let a = client(&etcd, &ns, 10).await;
    let b = client(&etcd, &ns, 10).await;
    let t0 = 1_000_000_i64;

    let h = a
        .once_take_at("report", t0, t0 + 10_000)
        .await
        .unwrap()
        .expect("free job is taken");
    assert_eq!(h.record.lock_until_ms, t0 + 10_000);
    assert_eq!(h.record.pid, std::process::id());
    // The record is one key, outside every lock prefix, with the hold's revision.
    assert_eq!(
        keys(&a, &format!("{ns}{ONCE_PREFIX}")).await,
        vec![(format!("{ns}{ONCE_PREFIX}report"), h.revision())]
    );
    let seen = b.once_record("report").await.unwrap().unwrap();
    assert_eq!(seen, h.record);
    // Taken until lock_until, by anyone, the holder included.
    assert!(b
        .once_take_at("report", t0 + 9_999, t0 + 20_000)
        .await
        .unwrap()
        .is_none());
    assert!(a
        .once_take_at("report", t0 + 1, t0 + 20_000)
        .await
        .unwrap()
        .is_none());

    // Finished before at_least: stays taken until locked_at + at_least (lowered, never raised).
    assert!(a.once_finish_at(&h, t0 + 100, t0 + 3_000).await.unwrap());
    let r = b.once_record("report").await.unwrap().unwrap();
    assert_eq!(r.lock_until_ms, t0 + 3_000);
    assert!(b
        .once_take_at("report", t0 + 2_999, t0 + 5_000)
        .await
        .unwrap()
        .is_none());
    // A second finish of the same hold changes nothing.
    assert!(!a.once_finish_at(&h, t0 + 200, t0 + 200).await.unwrap());
    assert_eq!(b.once_record("report").await.unwrap().unwrap(), r);

    // After at_least anyone takes it, with a higher revision.
    let h2 = b
        .once_take_at("report", t0 + 3_000, t0 + 8_000)
        .await
        .unwrap()
        .expect("free after at_least");
    assert!(h2.revision() > h.revision());
    // Finished after at_least: the record is deleted.
    assert!(b.once_finish_at(&h2, t0 + 4_000, t0 + 3_500).await.unwrap());
    assert!(b.once_record("report").await.unwrap().is_none());
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn an_expired_holder_finishes_and_extends_nothing() {
    let etcd = Etcd::single();
    let ns = unique_ns("once-expired");
    let a = client(&etcd, &ns, 10).await;
    let b = client(&etcd, &ns, 10).await;
    let t0 = 5_000_000_i64;
    let ha = a
        .once_take_at("job", t0, t0 + 1_000)
        .await
        .unwrap()
        .unwrap();
    // Extend while unexpired: a new hold, the old one is dead.
    let ha2 = a
        .once_extend_at(&ha, t0 + 500, t0 + 2_000)
        .await
        .unwrap()
        .expect("extend while ours");
    assert!(ha2.revision() > ha.revision());
    assert!(
        a.once_extend_at(&ha, t0 + 600, t0 + 2_000)
            .await
            .unwrap()
            .is_none(),
        "old hold extends nothing"
    );
    assert!(
        !a.once_finish_at(&ha, t0 + 600, t0 + 600).await.unwrap(),
        "old hold finishes nothing"
    );
    // a never finishes; at lock_until b takes over.
    assert!(b
        .once_take_at("job", t0 + 1_999, t0 + 9_000)
        .await
        .unwrap()
        .is_none());
    let hb = b
        .once_take_at("job", t0 + 2_000, t0 + 9_000)
        .await
        .unwrap()
        .expect("expired record is taken");
    // a's late finish and extend leave b's record alone.
    assert!(!a
        .once_finish_at(&ha2, t0 + 2_100, t0 + 2_100)
        .await
        .unwrap());
    assert!(a
        .once_extend_at(&ha2, t0 + 1_900, t0 + 50_000)
        .await
        .unwrap()
        .is_none());
    assert!(a
        .once_extend_at(&ha2, t0 + 2_100, t0 + 50_000)
        .await
        .unwrap()
        .is_none());
    assert_eq!(b.once_record("job").await.unwrap().unwrap(), hb.record);
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn many_nodes_racing_for_each_tick_take_it_exactly_once() {
    let etcd = Etcd::single();
    let ns = unique_ns("once-race");
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client(&etcd, &ns, 10).await);
    }
    let taken = Arc::new(AtomicUsize::new(0));
    for tick in 0..20_i64 {
        // Every node's scheduler fires the same tick (clock skew up to 40 ms);
        // the job lasts 10 ms, at_least is 500 ms, ticks are 1 s apart.
        let now = 10_000_000 + tick * 1_000;
        let mut tasks = Vec::new();
        for (i, c) in clients.iter().enumerate() {
            let c = c.clone();
            let taken = taken.clone();
            tasks.push(tokio::spawn(async move {
                let skewed = now + (i as i64) * 10;
                if let Some(h) = c
                    .once_take_at("tick", skewed, skewed + 30_000)
                    .await
                    .unwrap()
                {
                    taken.fetch_add(1, Ordering::SeqCst);
                    assert!(c
                        .once_finish_at(&h, skewed + 10, h.record.locked_at_ms + 500)
                        .await
                        .unwrap());
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(
            taken.load(Ordering::SeqCst),
            tick as usize + 1,
            "tick {tick}"
        );
    }
    for c in clients {
        c.close().await;
    }
}

#[tokio::test]
async fn bad_input_is_invalid_argument_and_system_clock_forms_work() {
    let etcd = Etcd::single();
    let ns = unique_ns("once-bad");
    let c = client(&etcd, &ns, 10).await;
    for (name, now, until) in [
        ("", 1, 2),
        ("j", 5, 5),
        ("j", 5, 4),
        ("__etcdlock/meta/x", 1, 2),
    ] {
        let e = c.once_take_at(name, now, until).await.unwrap_err();
        assert_eq!(
            e.code(),
            ErrorCode::InvalidArgument,
            "{name:?} {now} {until}: {e}"
        );
    }
    assert_eq!(
        c.once_take("j", Duration::ZERO).await.unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        c.lock("__etcdlock/once/j").await.unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    let h = c
        .once_take("j", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert!(c
        .once_take("j", Duration::from_secs(60))
        .await
        .unwrap()
        .is_none());
    let h = c
        .once_extend(&h, Duration::from_secs(120))
        .await
        .unwrap()
        .unwrap();
    assert!(c.once_finish(&h, Duration::ZERO).await.unwrap());
    assert!(c.once_record("j").await.unwrap().is_none());
    assert!(c
        .once_take("j", Duration::from_secs(60))
        .await
        .unwrap()
        .is_some());
    c.close().await;
}
