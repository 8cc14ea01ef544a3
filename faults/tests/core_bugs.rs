//! Regression tests for core bugs the fault suite found (each failed against
//! the core of its day and now guards the fix).

use std::time::{Duration, Instant};

use etcdlock::{Client, LockOptions};
use etcdlock_faults::{await_key_count, opts, raw, unique_ns, Proxy};
use etcdlock_testkit::Etcd;

/// A waiter reads its predecessor's key, then creates a watch for its delete.
/// If the predecessor's client unlocks and re-locks the same name in between,
/// the re-created key has the same name (prefix + lease id) but a higher
/// create_revision: it is queued *behind* the waiter. `wait_deleted` checks the
/// gap with a count of the key name only, finds the new key, and waits for its
/// delete, while the new key's owner waits for the waiter: both block until a
/// timeout. The proxy widens the window (150 ms per chunk for the waiter).
/// Fixed in core: the gap check compares create_revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiter_is_not_stuck_when_the_holder_relocks_the_same_name_at_once() {
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("relock");
    let mut rawc = raw(&eps).await;
    let proxy = Proxy::start(&eps[0]).await.unwrap();
    let a = Client::connect(opts(&eps, &ns, 10, Duration::from_secs(2)))
        .await
        .unwrap();
    let b = Client::connect(opts(&[proxy.endpoint()], &ns, 10, Duration::from_secs(5)))
        .await
        .unwrap();
    proxy.delay(Duration::from_millis(150), Duration::ZERO);
    let mut stuck = 0;
    let attempts = 3;
    for _ in 0..attempts {
        let ga = a.lock("L").await.unwrap();
        let waiter = tokio::spawn({
            let b = b.clone();
            async move {
                b.lock_with("L", LockOptions::timeout(Duration::from_secs(4)))
                    .await
            }
        });
        // B's key is in; its predecessor read reaches etcd ~300 ms later and its
        // watch ~600 ms later. Unlock and re-lock in between.
        await_key_count(&mut rawc, &format!("{ns}L/"), 2, Duration::from_secs(10))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(430)).await;
        ga.unlock().await.unwrap();
        let relocked = tokio::spawn({
            let a = a.clone();
            async move {
                a.lock_with("L", LockOptions::timeout(Duration::from_secs(6)))
                    .await
            }
        });
        let t = Instant::now();
        match waiter.await.unwrap() {
            Ok(gb) => {
                println!("waiter acquired {:?} after the unlock", t.elapsed());
                if t.elapsed() > Duration::from_secs(2) {
                    stuck += 1;
                }
                gb.unlock().await.unwrap();
            }
            Err(e) => {
                println!("waiter failed {:?} after the unlock: {e}", t.elapsed());
                stuck += 1;
            }
        }
        if let Ok(Ok(g)) = relocked.await {
            g.unlock().await.unwrap();
        }
    }
    println!("{stuck}/{attempts} waiters stuck behind a re-created predecessor key");
    assert_eq!(stuck, 0);
}
