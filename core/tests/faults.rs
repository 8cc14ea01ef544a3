//! Holders in child processes (SIGKILL, SIGSTOP), etcd restarts, leader loss,
//! and interop with `etcdctl lock`. Child holders re-run this test binary with
//! `ETCDLOCK_CHILD` set, so the child is the same code as the parent.
mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use etcd_client::{Compare, CompareOp, Txn, TxnOp};
use etcdlock::runtime::{clock_monotonic_ns, instant_to_mono_ns};
use etcdlock::{Client, ClientOptions, ErrorCode, LossReason};
use etcdlock_testkit::{etcdctl_bin, Etcd};

/// Child mode: hold a lock and report on stdout. Does nothing in a normal run.
#[test]
fn child_holder() {
    let Ok(spec) = std::env::var("ETCDLOCK_CHILD") else {
        return;
    };
    let v: serde_json::Value = serde_json::from_str(&spec).unwrap();
    let endpoints: Vec<String> = v["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect();
    let ns = v["ns"].as_str().unwrap().to_string();
    let ttl = v["ttl"].as_i64().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let c = Client::connect(
            ClientOptions::new(endpoints)
                .with_ttl(ttl)
                .with_namespace(ns),
        )
        .await
        .unwrap();
        let g = c.lock("held").await.unwrap();
        println!(
            "HELD {} {} {}",
            g.fencing_token(),
            g.key(),
            clock_monotonic_ns()
        );
        let loss = g.wait_lost().await.unwrap();
        println!(
            "LOST {} {} {}",
            loss.reason,
            instant_to_mono_ns(loss.at),
            clock_monotonic_ns()
        );
        let put = g.put("fenced", "stale-write").await;
        println!(
            "PUT {}",
            put.map(|_| "ok".to_string())
                .unwrap_or_else(|e| e.code().to_string())
        );
        // The same compare a guarded op sends, straight to etcd: it must fail there too.
        let mut raw = c.etcd().await.unwrap();
        let txn = Txn::new()
            .when([Compare::create_revision(
                g.key(),
                CompareOp::Equal,
                g.fencing_token(),
            )])
            .and_then([TxnOp::put(
                format!("{}fenced", v["ns"].as_str().unwrap()),
                "stale-raw",
                None,
            )]);
        let r = raw.txn(txn).await.unwrap();
        println!("RAWTXN {}", r.succeeded());
    });
}

fn spawn_holder(etcd: &Etcd, ns: &str, ttl: i64) -> (Child, BufReader<std::process::ChildStdout>) {
    let spec = serde_json::json!({"endpoints": etcd.endpoints(), "ns": ns, "ttl": ttl}).to_string();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_holder",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env("ETCDLOCK_CHILD", spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    (child, out)
}

fn read_line_starting(out: &mut BufReader<std::process::ChildStdout>, tag: &str) -> Vec<String> {
    loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "child ended before printing {tag}"
        );
        let parts: Vec<String> = line.split_whitespace().map(String::from).collect();
        if parts.first().map(|p| p.as_str()) == Some(tag) {
            return parts;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_holder_next_waiter_acquires_within_ttl_plus_1s() {
    let etcd = Etcd::single();
    let ns = unique_ns("kill");
    let ttl = 3;
    let (mut child, mut out) = spawn_holder(&etcd, &ns, ttl);
    let held = tokio::task::block_in_place(|| read_line_starting(&mut out, "HELD"));
    let child_token: i64 = held[1].parse().unwrap();
    let c = client(&etcd, &ns, ttl).await;
    let waiter = tokio::spawn({
        let c = c.clone();
        async move { c.lock("held").await.map(|g| (g, Instant::now())) }
    });
    await_key_count(&c, &format!("{ns}held/"), 2).await;
    let killed_at = Instant::now();
    child.kill().unwrap();
    child.wait().unwrap();
    let (g, at) = waiter.await.unwrap().unwrap();
    let waited = at - killed_at;
    println!("next waiter acquired {waited:?} after SIGKILL (TTL {ttl} s)");
    assert!(
        waited <= Duration::from_secs(ttl as u64 + 1),
        "waited {waited:?}"
    );
    assert!(g.fencing_token() > child_token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_holder_learns_of_loss_before_the_waiter_acquires_and_its_write_is_rejected() {
    let etcd = Etcd::single();
    let ns = unique_ns("stop");
    let ttl = 2;
    let (mut child, mut out) = spawn_holder(&etcd, &ns, ttl);
    let held = tokio::task::block_in_place(|| read_line_starting(&mut out, "HELD"));
    let child_key = held[2].clone();
    let c = client(&etcd, &ns, 10).await;
    let waiter = tokio::spawn({
        let c = c.clone();
        async move {
            let g = c.lock("held").await.unwrap();
            let at = clock_monotonic_ns();
            g.put("fenced", format!("written by token {}", g.fencing_token()))
                .await
                .unwrap();
            (g, at)
        }
    });
    await_key_count(&c, &format!("{ns}held/"), 2).await;
    unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) };
    let (g, acquired_ns) = waiter.await.unwrap();
    // The waiter got the lock only because the stopped holder's lease expired.
    assert!(keys(&c, &format!("{ns}held/"))
        .await
        .iter()
        .all(|(k, _)| k != &child_key));
    unsafe { libc::kill(child.id() as i32, libc::SIGCONT) };
    let lost = tokio::task::block_in_place(|| read_line_starting(&mut out, "LOST"));
    let put = tokio::task::block_in_place(|| read_line_starting(&mut out, "PUT"));
    let raw = tokio::task::block_in_place(|| read_line_starting(&mut out, "RAWTXN"));
    child.wait().unwrap();
    let lost_at: u64 = lost[2].parse().unwrap();
    println!(
        "holder's hold ended locally {} ms before the waiter acquired ({})",
        (acquired_ns as i64 - lost_at as i64) / 1_000_000,
        lost[1]
    );
    assert!(
        lost_at < acquired_ns,
        "loss at {lost_at} must precede the waiter's acquisition at {acquired_ns}"
    );
    // Paused past its TTL, the holder asks etcd why before it reports: the
    // lease is gone there (the waiter holds the lock), so LeaseExpired.
    assert_eq!(lost[1], "LeaseExpired", "{lost:?}");
    assert_eq!(put[1], "LockLost");
    assert_eq!(
        raw[1], "false",
        "etcd must reject the stale holder's compare"
    );
    let mut etcd_c = c.etcd().await.unwrap();
    let v = etcd_c.get(format!("{ns}fenced"), None).await.unwrap();
    assert_eq!(
        v.kvs()[0].value(),
        format!("written by token {}", g.fencing_token()).as_bytes()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_node_restart_within_ttl_keeps_the_hold() {
    let mut etcd = Etcd::single();
    let ns = unique_ns("restart");
    let c = Client::connect(opts(&etcd, &ns, 10).with_request_timeout(Duration::from_secs(2)))
        .await
        .unwrap();
    let g = c.lock("r").await.unwrap();
    tokio::task::block_in_place(|| {
        etcd.kill(0);
        etcd.restart(0);
        etcd.wait_member_healthy(0, Duration::from_secs(10))
            .unwrap();
    });
    // Guarded write goes through after the restart (retries cover the reconnect).
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        match g.put("after-restart", "ok").await {
            Ok(()) => break,
            Err(e) if e.code() == ErrorCode::Unavailable && Instant::now() < deadline => continue,
            Err(e) => panic!("guarded put after restart: {e}"),
        }
    }
    assert!(g.is_held());
    assert_eq!(g.loss(), None);
    // Still exclusive: another client cannot take it.
    let other = client(&etcd, &ns, 10).await;
    assert_eq!(
        other.try_lock("r").await.unwrap_err().code(),
        ErrorCode::WouldBlock
    );
    g.unlock().await.unwrap();
    other.try_lock("r").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_in_three_node_cluster_lock_operations_resume() {
    let mut etcd = Etcd::cluster(3);
    let ns = unique_ns("leader");
    let c = Client::connect(opts(&etcd, &ns, 10).with_request_timeout(Duration::from_secs(2)))
        .await
        .unwrap();
    let g = c.lock("before").await.unwrap();
    let leader = tokio::task::block_in_place(|| etcd.leader()).expect("a leader");
    tokio::task::block_in_place(|| etcd.kill(leader));
    let killed = Instant::now();
    let mut resumed = None;
    for i in 0..20 {
        let name = format!("after-{i}");
        match c
            .lock_with(
                &name,
                etcdlock::LockOptions::timeout(Duration::from_secs(5)),
            )
            .await
        {
            Ok(g2) => {
                g2.put("k", "v").await.unwrap();
                g2.unlock().await.unwrap();
                if resumed.is_none() {
                    resumed = Some(killed.elapsed());
                }
                if i >= 5 {
                    break;
                }
            }
            Err(e) => assert!(
                matches!(e.code(), ErrorCode::Unavailable | ErrorCode::Timeout),
                "{e}"
            ),
        }
    }
    let resumed = resumed.expect("lock operations resumed after the leader was killed");
    println!("lock operations resumed {resumed:?} after killing the leader");
    assert!(resumed < Duration::from_secs(10));
    // The hold taken before the failover survived it.
    assert!(g.is_held());
    g.put("still-mine", "yes").await.unwrap();
}

fn etcdctl_lock(etcd: &Etcd, ns: &str, name: &str) -> Child {
    Command::new(etcdctl_bin())
        .env("ETCDCTL_API", "3")
        .args([
            format!("--endpoints={}", etcd.endpoints_csv()),
            "lock".into(),
            format!("{ns}{name}"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_lock_and_etcdlock_exclude_each_other_in_both_orders() {
    let etcd = Etcd::single();
    let ns = unique_ns("etcdctl");
    // etcdctl uses the raw name; our client has no namespace here and locks the same full name.
    let c = Client::connect(ClientOptions::new(etcd.endpoints()).with_ttl(10))
        .await
        .unwrap();
    let name = format!("{ns}shared");
    let prefix = format!("{name}/");

    // 1. etcdctl holds first.
    let mut ctl = etcdctl_lock(&etcd, "", &name);
    let mut ctl_out = BufReader::new(ctl.stdout.take().unwrap());
    let ctl_key = tokio::task::block_in_place(|| {
        let mut l = String::new();
        ctl_out.read_line(&mut l).unwrap();
        l.trim().to_string()
    });
    assert!(ctl_key.starts_with(&prefix), "etcdctl printed {ctl_key:?}");
    assert_eq!(
        c.try_lock(&name).await.unwrap_err().code(),
        ErrorCode::WouldBlock
    );
    let waiter = tokio::spawn({
        let c = c.clone();
        let name = name.clone();
        async move { c.lock(&name).await.unwrap() }
    });
    await_key_count(&c, &prefix, 2).await;
    assert!(!waiter.is_finished());
    unsafe { libc::kill(ctl.id() as i32, libc::SIGINT) };
    let ctl_exit = tokio::task::block_in_place(|| ctl.wait().unwrap());
    let g = waiter.await.unwrap();
    assert!(ctl_exit.success() || ctl_exit.code().is_some() || ctl_exit.signal().is_some());
    // We were queued behind etcdctl's key (or it was gone by the time we read).
    assert!(
        g.waited_on().iter().all(|k| k == &ctl_key),
        "{:?}",
        g.waited_on()
    );
    assert_eq!(keys(&c, &prefix).await, vec![(g.key(), g.fencing_token())]);

    // 2. etcdlock holds first: etcdctl waits until we unlock.
    let mut ctl = etcdctl_lock(&etcd, "", &name);
    await_key_count(&c, &prefix, 2).await;
    let ks = keys(&c, &prefix).await;
    assert_eq!(
        ks[0].0,
        g.key(),
        "we still hold the lock while etcdctl waits"
    );
    let mut ctl_out = BufReader::new(ctl.stdout.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut l = String::new();
        ctl_out.read_line(&mut l).unwrap();
        (l.trim().to_string(), Instant::now())
    });
    let unlocked_at = Instant::now();
    g.unlock().await.unwrap();
    let (ctl_key2, ctl_acquired) = tokio::task::block_in_place(|| reader.join().unwrap());
    assert!(ctl_key2.starts_with(&prefix));
    assert!(ctl_acquired >= unlocked_at);
    unsafe { libc::kill(ctl.id() as i32, libc::SIGINT) };
    tokio::task::block_in_place(|| ctl.wait().unwrap());
    await_key_count(&c, &prefix, 0).await;
    let _ = LossReason::KeyDeleted;
}

/// An unlock sent to a member that is paused reaches etcd late: the member
/// reads the request when it resumes (gRPC's deadline counts from then, and
/// the cancel that follows it races the handler), long after the call moved to
/// another member, returned, and this session took the same lock again. That
/// late delete must not remove the new hold (the faults suite caught it as two
/// holders of one lock, scenario 4). The unlock is a plain delete; an attempt
/// of it whose outcome was never learnt retires the key name for the session,
/// so the next hold is a key the late delete cannot touch, and a clean unlock
/// (the last one here) frees its name for reuse as before. The member paused
/// is the leader, where a client's requests go; it rejoins as a follower and
/// forwards what it read to the new leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_unlock_from_a_paused_member_never_deletes_the_next_hold() {
    let etcd = Etcd::cluster(3);
    let eps = etcd.endpoints();
    let mut late = 0;
    for round in 0..4 {
        let leader = tokio::task::block_in_place(|| etcd.leader()).expect("a leader");
        let ordered: Vec<String> = (0..3).map(|k| eps[(leader + k) % 3].clone()).collect();
        let ns = unique_ns("lateunlock");
        let opts = ClientOptions::new(ordered)
            .with_ttl(10)
            .with_namespace(&ns)
            .with_request_timeout(Duration::from_secs(5));
        let c = Client::connect(opts).await.unwrap();
        let g1 = c.lock("x").await.unwrap();
        tokio::task::block_in_place(|| etcd.pause(leader));
        let t = Instant::now();
        g1.unlock().await.unwrap();
        let unlock_took = t.elapsed();
        let g2 = c.lock("x").await.unwrap();
        assert!(g2.fencing_token() > g1.fencing_token());
        // The first attempt went to the paused leader: its outcome is unknown,
        // so the name is not made again while that copy may land.
        assert_ne!(
            g2.key(),
            g1.key(),
            "round {round}: the key of an unlock still in flight was re-used"
        );
        etcd.resume(leader);
        // A write through the old leader once it answers again: it read the
        // old request before this one, so once this write is applied the old
        // request has been applied or dropped.
        let mut raw_old = etcd_client::Client::connect([eps[leader].as_str()], None)
            .await
            .unwrap();
        let sentinel = loop {
            match tokio::time::timeout(
                Duration::from_secs(2),
                raw_old.put(format!("{ns}sentinel"), "1", None),
            )
            .await
            {
                Ok(Ok(r)) => break r.header().unwrap().revision(),
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let alive = c
            .etcd()
            .await
            .unwrap()
            .get(g2.key(), None)
            .await
            .unwrap()
            .kvs()
            .first()
            .map(|kv| kv.create_revision());
        late += usize::from(alive.is_none());
        println!(
            "round {round}: unlock via the paused leader took {unlock_took:?}; sentinel at rev {sentinel}; key now {alive:?}"
        );
        assert_eq!(
            alive,
            Some(g2.fencing_token()),
            "round {round}: the late unlock deleted the next hold's key"
        );
        assert!(g2.is_held());
        g2.put("k", "v").await.unwrap();
        g2.unlock().await.unwrap();
        // A clean unlock frees its key name: the next hold re-uses it (and its
        // watch); the retired one stays out of use.
        let g3 = c.lock("x").await.unwrap();
        assert_eq!(
            g3.key(),
            g2.key(),
            "round {round}: a cleanly released key was not re-used"
        );
        g3.unlock().await.unwrap();
        c.close().await;
    }
    assert_eq!(late, 0);
}

/// The default keep-alive interval leaves a hold room to survive what a
/// cluster does to it (issue 60): at TTL 5 s (a keep-alive every second) and
/// at the default TTL 15 s (every 8 s, 5 s of room after each), a hold lives
/// through its etcd leader killed and, once that member is back, through the
/// new leader hung for 3 s (the other two elect a leader meanwhile). After each fault, once a hold not renewed since would have ended
/// locally, the hold must still be held, unreported as lost, exclusive, and
/// its guarded write accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_survives_a_leader_kill_and_a_3s_leader_hang_at_ttl_5_and_15() {
    for ttl in [5, 15] {
        let mut etcd = Etcd::cluster(3);
        let ns = unique_ns("survive");
        let c = Client::connect(opts(&etcd, &ns, ttl).with_request_timeout(Duration::from_secs(2)))
            .await
            .unwrap();
        let g = c.lock("held").await.unwrap();
        let other = client(&etcd, &ns, ttl).await;
        for fault in ["leader killed", "leader hung 3 s"] {
            let leader = tokio::task::block_in_place(|| {
                let until = Instant::now() + Duration::from_secs(20);
                loop {
                    if let Some(l) = etcd.leader() {
                        return l;
                    }
                    assert!(
                        Instant::now() < until,
                        "ttl {ttl}: no leader before {fault}"
                    );
                    std::thread::sleep(Duration::from_millis(50));
                }
            });
            let at = Instant::now();
            tokio::task::block_in_place(|| match fault {
                "leader killed" => etcd.kill(leader),
                _ => etcd.pause_for(leader, Duration::from_secs(3)),
            });
            // A hold not renewed since before the fault ends locally by
            // then + TTL - margin (the default margin: TTL/5, at most 2 s).
            let margin = Duration::from_millis((ttl as u64 * 200).min(2000));
            let over = at + Duration::from_secs(ttl as u64) - margin + Duration::from_millis(300);
            tokio::time::sleep_until(over.into()).await;
            assert_eq!(g.loss(), None, "ttl {ttl}, {fault}");
            assert!(g.is_held(), "ttl {ttl}, {fault}");
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                match g.put("still-mine", fault).await {
                    Ok(()) => break,
                    Err(e) if e.code() == ErrorCode::Unavailable && Instant::now() < deadline => {}
                    Err(e) => panic!("ttl {ttl}, {fault}: guarded put: {e}"),
                }
            }
            assert_eq!(
                other.try_lock("held").await.unwrap_err().code(),
                ErrorCode::WouldBlock,
                "ttl {ttl}, {fault}"
            );
            println!("ttl {ttl}: the hold survived: {fault}");
            if fault == "leader killed" {
                // Three members again before the hang: with one dead, a hung
                // second one would leave no quorum at all (not a leader hang).
                tokio::task::block_in_place(|| {
                    etcd.restart(leader);
                    etcd.wait_member_healthy(leader, Duration::from_secs(20))
                        .unwrap();
                });
            }
        }
        g.unlock().await.unwrap();
        c.close().await;
        other.close().await;
    }
}

/// etcd 3.5 (the fault suite's `faults/build-etcd.sh`, which builds it from
/// the Go module proxy once and caches it): unlike Debian's 3.4, which exits
/// at once on SIGTERM, it stops its gRPC server gracefully first.
fn etcd_35() -> std::path::PathBuf {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../faults/build-etcd.sh");
    let out = Command::new(&script)
        .arg("3.5.35")
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(out.status.success(), "build-etcd.sh 3.5.35 failed");
    std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("etcd")
}

/// Make member `i` a follower: if it leads, move the leadership to the next
/// member (etcd's MoveLeader) and wait until every member agrees.
async fn make_follower(etcd: &Etcd, i: usize) {
    let eps = etcd.endpoints();
    if tokio::task::block_in_place(|| etcd.leader()) != Some(i) {
        return;
    }
    let to = (i + 1) % eps.len();
    let mut raw = etcd_client::Client::connect([eps[i].clone()], None)
        .await
        .unwrap();
    let members = raw.member_list().await.unwrap();
    let id = members
        .members()
        .iter()
        .find(|m| m.client_urls().iter().any(|u| *u == eps[to]))
        .map(|m| m.id())
        .unwrap();
    raw.move_leader(id).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::task::block_in_place(|| etcd.leader()) != Some(to) {
        assert!(
            Instant::now() < deadline,
            "m{to} did not take the leadership"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A member of etcd 3.5 or later stopping gracefully (SIGTERM, as in a
/// rolling restart or upgrade) sends GOAWAY and closes its listener, and
/// then for seconds (up to its request timeout, 7 s by default) still
/// answers the keep-alive stream already open on it, but no new request:
/// the reads that prove the renewals are refused. The session leaves such a
/// member at its first refused read: at TTL 2 s (0.4 s margin, a keep-alive
/// every 0.4 s), three times, the member the client is on is made a
/// follower (no election follows its stop, in which no member could renew
/// a lease) and stopped; the hold lives through it and its renewal never
/// falls behind. Before, the session kept renewing on the stopping member
/// with no proof until its renewal was reported failing and, under load,
/// until the hold ended while etcd kept its lease (the rolling upgrade of
/// the fault suite, scenario 36, lost a hold 1 run in 7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_at_ttl_2_lives_through_its_member_stopping_gracefully() {
    if mem_backend() {
        eprintln!("graceful member stops need the real etcd; not run on mem://");
        return;
    }
    let bin = tokio::task::block_in_place(etcd_35);
    let mut etcd = Etcd::start(etcdlock_testkit::Config {
        members: 3,
        bin: Some(bin),
        ..Default::default()
    });
    let ns = unique_ns("graceful");
    let c = Client::connect(opts(&etcd, &ns, 2).with_request_timeout(Duration::from_secs(1)))
        .await
        .unwrap();
    let g = c.lock("held").await.unwrap();
    // Every time the renewal fell behind, with the hold's time left then.
    let behind = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut changes = g.renewal_changes();
    let seen = behind.clone();
    let watching = tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let r = *changes.borrow_and_update();
            if let etcdlock::Renewal::Failing { valid_until } = r {
                let left = valid_until.saturating_duration_since(Instant::now());
                seen.lock().unwrap().push(left);
            }
        }
    });
    let eps = etcd.endpoints();
    let mut stops = Vec::new();
    for round in 0..3 {
        let on = c.member_in_use();
        // The member the client is on, not a stand-in: stopping another
        // would test nothing.
        let i = eps
            .iter()
            .position(|e| *e == on)
            .unwrap_or_else(|| panic!("round {round}: the client is on {on}, not one of {eps:?}"));
        make_follower(&etcd, i).await;
        // Renewals settle on the new leader before the stop.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let before = behind.lock().unwrap().len();
        let took = tokio::task::block_in_place(|| {
            let took = etcd.stop(i, Duration::from_secs(20)).unwrap();
            etcd.restart(i);
            etcd.wait_member_healthy(i, Duration::from_secs(20))
                .unwrap();
            took
        });
        let fell = behind.lock().unwrap().len() - before;
        stops.push(format!(
            "m{i} in {took:?}, the client on it, renewal fell behind {fell} times"
        ));
        assert!(g.is_held(), "lost while m{i} stopped: {:?}", g.loss());
        // The restarted member takes clients again before the next goes down.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("stopped: {}", stops.join("; "));
    assert_eq!(g.loss(), None);
    g.put("after-the-stops", "ok").await.unwrap();
    g.unlock().await.unwrap();
    watching.abort();
    let behind = behind.lock().unwrap().clone();
    assert!(
        behind.is_empty(),
        "the renewal fell behind {} times (time left then: {behind:?}); stopped: {}",
        behind.len(),
        stops.join("; ")
    );
    c.close().await;
}
