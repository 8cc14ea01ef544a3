//! Leader election on the mutex's keys (issue 13, core part): campaign,
//! proclaim, resign, leader, observe with "no leader", and interop with
//! `etcdctl elect` both ways, against real etcd.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{client, skip_on_mem, unique_ns};
use etcdlock::{ErrorCode, LockOptions, LossReason};
use etcdlock_testkit::{etcdctl_bin, Etcd};

#[tokio::test]
async fn campaign_proclaim_resign_and_observe_including_no_leader() {
    let etcd = Etcd::single();
    let ns = unique_ns("elect");
    let a = client(&etcd, &ns, 10).await;
    let b = client(&etcd, &ns, 10).await;
    assert_eq!(a.leader("svc").await.unwrap(), None);
    let mut obs = b.observe("svc").unwrap();
    assert_eq!(obs.next().await.unwrap(), None, "no leader yet");

    let la = a
        .campaign("svc", "node-a", LockOptions::default())
        .await
        .unwrap();
    let seen = obs.next().await.unwrap().expect("a leads");
    assert_eq!(
        (seen.value.as_slice(), seen.revision),
        (&b"node-a"[..], la.fencing_token())
    );

    // b queues behind a; timeout zero is one try.
    assert_eq!(
        b.campaign("svc", "node-b", LockOptions::timeout(Duration::ZERO))
            .await
            .unwrap_err()
            .code(),
        ErrorCode::Timeout
    );
    let bc = tokio::spawn({
        let b = b.clone();
        async move {
            b.campaign(
                "svc",
                "node-b",
                LockOptions::timeout(Duration::from_secs(10)),
            )
            .await
        }
    });
    common::await_key_count(&a, &format!("{ns}svc/"), 2).await;

    la.proclaim("node-a v2").await.unwrap();
    let seen = obs.next().await.unwrap().expect("still a");
    assert_eq!(seen.value, b"node-a v2");
    assert_eq!(a.leader("svc").await.unwrap().unwrap().value, b"node-a v2");

    la.resign().await.unwrap();
    let lb = bc.await.unwrap().unwrap();
    let seen = obs.next().await.unwrap().expect("b leads");
    assert_eq!(seen.value, b"node-b");
    assert!(lb.fencing_token() > la.fencing_token());
    // A resigned leader's proclamation is refused.
    assert_eq!(
        la.proclaim("stale").await.unwrap_err().code(),
        ErrorCode::NotHeld
    );

    lb.resign().await.unwrap();
    assert_eq!(obs.next().await.unwrap(), None, "observe reports no leader");
}

#[tokio::test]
async fn a_leader_whose_key_is_deleted_is_refused_by_etcd() {
    let etcd = Etcd::single();
    let ns = unique_ns("elect-stale");
    let a = client(&etcd, &ns, 10).await;
    let la = a
        .campaign("svc", "a", LockOptions::default())
        .await
        .unwrap();
    a.etcd()
        .await
        .unwrap()
        .delete(la.key(), None)
        .await
        .unwrap();
    let loss = tokio::time::timeout(Duration::from_secs(2), la.wait_lost())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loss.reason, LossReason::KeyDeleted);
    let e = la.proclaim("still me?").await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::LockLost);
    assert_eq!(
        a.leader("svc").await.unwrap(),
        None,
        "the refused proclamation wrote nothing"
    );
}

#[tokio::test]
async fn etcdctl_elect_and_etcdlock_see_each_other() {
    if skip_on_mem("etcdctl_elect_and_etcdlock_see_each_other") {
        return;
    }
    let etcd = Etcd::single();
    let c = client(&etcd, "", 10).await;
    // etcdctl campaigns first and leads.
    let mut ctl = Command::new(etcdctl_bin())
        .env("ETCDCTL_API", "3")
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "elect",
            "jobs",
            "from-etcdctl",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    common::await_key_count(&c, "jobs/", 1).await;
    let l = c.leader("jobs").await.unwrap().expect("etcdctl leads");
    assert_eq!(l.value, b"from-etcdctl");
    assert_eq!(
        c.campaign(
            "jobs",
            "from-etcdlock",
            LockOptions::timeout(Duration::ZERO)
        )
        .await
        .unwrap_err()
        .code(),
        ErrorCode::Timeout
    );
    let waiting = tokio::spawn({
        let c = c.clone();
        async move {
            c.campaign(
                "jobs",
                "from-etcdlock",
                LockOptions::timeout(Duration::from_secs(20)),
            )
            .await
        }
    });
    common::await_key_count(&c, "jobs/", 2).await;
    let _ = ctl.kill();
    let _ = ctl.wait();
    // etcdctl's lease expires (its TTL is 60 s unless revoked; kill -9 skips the
    // revoke), so revoke it the way an operator would.
    c.etcd()
        .await
        .unwrap()
        .lease_revoke(l.lease_id)
        .await
        .unwrap();
    let lead = waiting.await.unwrap().unwrap();
    // etcdctl's observer (`elect -l` runs until killed) sees etcdlock's proclamation.
    let mut obs = Command::new(etcdctl_bin())
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &etcd.endpoints_csv(), "elect", "-l", "jobs"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = obs.stdout.take().unwrap();
    let seen = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        std::io::BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains("from-etcdlock"))
    });
    let seen = tokio::time::timeout(Duration::from_secs(10), seen)
        .await
        .expect("etcdctl elect -l printed our value")
        .unwrap();
    assert!(seen.is_some());
    let _ = obs.kill();
    let _ = obs.wait();
    lead.resign().await.unwrap();
}
