//! The read-write lock on the mutex's keys (issue 13, core part).

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{client, skip_on_mem, unique_ns};
use etcdlock::{ErrorCode, LockOptions};
use etcdlock_testkit::{etcdctl_bin, Etcd};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_overlap_writers_exclude_everyone() {
    let etcd = Etcd::single();
    let ns = unique_ns("rw");
    let a = client(&etcd, &ns, 10).await;
    let b = client(&etcd, &ns, 10).await;
    // Two readers at once.
    let r1 = a
        .read_lock("doc", LockOptions::timeout(Duration::from_secs(5)))
        .await
        .unwrap();
    let r2 = b
        .read_lock("doc", LockOptions::timeout(Duration::ZERO))
        .await
        .expect("readers share");
    // A writer cannot get in, and writes nothing trying.
    assert_eq!(
        b.try_lock("doc").await.unwrap_err().code(),
        ErrorCode::WouldBlock
    );
    // A writer queues behind the readers; a reader arriving after it waits for it.
    let w = tokio::spawn({
        let b = b.clone();
        async move {
            b.lock_with("doc", LockOptions::timeout(Duration::from_secs(10)))
                .await
        }
    });
    common::await_key_count(&a, &format!("{ns}doc/"), 3).await;
    assert_eq!(
        a.read_lock("doc", LockOptions::timeout(Duration::ZERO))
            .await
            .unwrap_err()
            .code(),
        ErrorCode::Timeout
    );
    let late = tokio::spawn({
        let a = a.clone();
        async move {
            a.read_lock("doc", LockOptions::timeout(Duration::from_secs(10)))
                .await
        }
    });
    common::await_key_count(&a, &format!("{ns}doc/"), 4).await;
    r1.unlock().await.unwrap();
    r2.unlock().await.unwrap();
    let wg = w.await.unwrap().unwrap();
    assert!(
        !late.is_finished() || late.await.is_err(),
        "the late reader must wait for the writer"
    );
    common::await_key_count(&a, &format!("{ns}doc/"), 2).await;
    wg.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_and_writers_mixed_never_overlap_wrongly() {
    let etcd = Etcd::single();
    let ns = unique_ns("rwmix");
    let clients = [client(&etcd, &ns, 10).await, client(&etcd, &ns, 10).await];
    // state: number of readers inside, or -1 while a writer is inside.
    let state = Arc::new(AtomicI64::new(0));
    let max_readers = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (c, state, max_readers) = (clients[t % 2].clone(), state.clone(), max_readers.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..10 {
                if (t + i) % 4 == 0 {
                    let g = c
                        .lock_with("doc", LockOptions::timeout(Duration::from_secs(30)))
                        .await
                        .unwrap();
                    assert_eq!(
                        state.compare_exchange(0, -1, Ordering::SeqCst, Ordering::SeqCst),
                        Ok(0),
                        "writer entered with others inside"
                    );
                    tokio::task::yield_now().await;
                    state.store(0, Ordering::SeqCst);
                    g.unlock().await.unwrap();
                } else {
                    let g = c
                        .read_lock("doc", LockOptions::timeout(Duration::from_secs(30)))
                        .await
                        .unwrap();
                    let n = state.fetch_add(1, Ordering::SeqCst);
                    assert!(n >= 0, "reader entered while a writer was inside");
                    max_readers.fetch_max(n as usize + 1, Ordering::SeqCst);
                    g.get("x").await.unwrap();
                    state.fetch_sub(1, Ordering::SeqCst);
                    g.unlock().await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    println!(
        "max concurrent readers: {}",
        max_readers.load(Ordering::SeqCst)
    );
    assert!(common::keys(&clients[0], &format!("{ns}doc/"))
        .await
        .is_empty());
}

#[tokio::test]
async fn an_etcdctl_lock_holder_excludes_readers() {
    if skip_on_mem("an_etcdctl_lock_holder_excludes_readers") {
        return;
    }
    let etcd = Etcd::single();
    let c = client(&etcd, "", 10).await;
    let mut ctl = Command::new(etcdctl_bin())
        .env("ETCDCTL_API", "3")
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "lock",
            "doc",
            "sleep",
            "30",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    common::await_key_count(&c, "doc/", 1).await;
    assert_eq!(
        c.read_lock("doc", LockOptions::timeout(Duration::ZERO))
            .await
            .unwrap_err()
            .code(),
        ErrorCode::Timeout
    );
    assert_eq!(
        c.read_lock("doc", LockOptions::timeout(Duration::from_millis(300)))
            .await
            .unwrap_err()
            .code(),
        ErrorCode::Timeout
    );
    let _ = ctl.kill();
    let _ = ctl.wait();
    // etcdctl's lease outlives the kill; the reader gets in once it is revoked.
    let lease = c
        .etcd()
        .await
        .unwrap()
        .get("doc/", Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .unwrap()
        .kvs()[0]
        .lease();
    c.etcd().await.unwrap().lease_revoke(lease).await.unwrap();
    let r = c
        .read_lock("doc", LockOptions::timeout(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(r.key().ends_with("-r"));
    r.unlock().await.unwrap();
}
