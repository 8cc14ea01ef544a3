//! Time under etcd trouble, in a 3-member cluster: holds and waits ride
//! through a leader kill and a leader hang (SIGSTOP) while their leases live
//! (a new leader extends every lease: etcd #9395), and lock/unlock cycles
//! resume soon after etcd has its new leader. Each test measures etcd's own
//! election beside the client (a raw status probe of every member), so the
//! bound is on what the client adds.
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use etcdlock::{Client, ClientOptions, LockOptions};
use etcdlock_testkit::Etcd;

/// The member id of the leader as member `i` sees it (0: none, or no answer).
async fn leader_seen_by(ep: &str) -> u64 {
    let Ok(Ok(mut c)) = tokio::time::timeout(
        Duration::from_millis(200),
        etcd_client::Client::connect([ep], None),
    )
    .await
    else {
        return 0;
    };
    match tokio::time::timeout(Duration::from_millis(200), c.status()).await {
        Ok(Ok(s)) => s.leader(),
        _ => 0,
    }
}

/// The leader's index and member id.
async fn leader(etcd: &Etcd) -> (usize, u64) {
    for _ in 0..100 {
        for (i, ep) in etcd.endpoints().iter().enumerate() {
            let Ok(mut c) = etcd_client::Client::connect([ep.as_str()], None).await else {
                continue;
            };
            if let Ok(s) = c.status().await {
                if s.leader() != 0 && s.leader() == s.header().map(|h| h.member_id()).unwrap_or(0) {
                    return (i, s.leader());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no leader");
}

/// When a member other than `old_idx` first reports a leader other than `old_id`.
async fn new_leader_at(etcd: &Etcd, old_idx: usize, old_id: u64) -> Instant {
    let eps: Vec<String> = etcd
        .endpoints()
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != old_idx)
        .map(|(_, e)| e)
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for ep in &eps {
            let l = leader_seen_by(ep).await;
            if l != 0 && l != old_id {
                return Instant::now();
            }
        }
        assert!(
            Instant::now() < deadline,
            "etcd elected no new leader in 20 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Lock/unlock cycles on `c` until stopped; the time of every completed cycle
/// (in µs since `t0`) goes to `done`.
fn cycles(
    c: Client,
    t0: Instant,
    done: Arc<AtomicU64>,
    stop: etcdlock::CancellationToken,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut n = 0u64;
        while !stop.is_cancelled() {
            if let Ok(g) = c
                .lock_with("cycle", LockOptions::timeout(Duration::from_secs(10)))
                .await
            {
                if g.unlock().await.is_ok() {
                    n += 1;
                    done.store(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
                }
            }
        }
        n
    })
}

/// A client (TTL `ttl`) whose requests go to the leader.
async fn on_leader(etcd: &Etcd, ns: &str, ttl: i64) -> Client {
    let (li, _) = leader(etcd).await;
    for _ in 0..50 {
        let c = client(etcd, ns, ttl).await;
        if c.member_in_use() == etcd.endpoints()[li] {
            return c;
        }
        c.close().await;
    }
    panic!("50 clients connected and none uses the leader");
}

enum Fault {
    Kill,
    Hang(Duration),
}

/// A holder and a queued waiter (TTL `ttl`), and a client cycling, across
/// `fault` on the leader: the hold and the wait survive, and the cycles
/// resume within `resume_bound` of etcd's new leader.
async fn ride_through(ttl: i64, fault: Fault, resume_bound: Duration) {
    let mut etcd = Etcd::cluster(3);
    let ns = unique_ns("ride");
    // Default options but the TTL: what users run.
    let holder = client(&etcd, &ns, ttl).await;
    let waiter = client(&etcd, &ns, ttl).await;
    // The cycler talks to the leader, the worst case: its request in flight
    // at the fault waits on the member that fails (a client on a follower
    // is answered by it, and moves as soon as the follower names the new
    // leader). Which member a client uses is the first to answer its
    // connect, so clients are connected until one uses the leader.
    let cycler = on_leader(&etcd, &ns, ttl).await;
    let g = holder.lock("held").await.unwrap();
    let w = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.lock("held").await }
    });
    await_key_count(&holder, &format!("{ns}held/"), 2).await;
    let t0 = Instant::now();
    let done = Arc::new(AtomicU64::new(0));
    let stop = etcdlock::CancellationToken::new();
    let cyc = cycles(cycler.clone(), t0, done.clone(), stop.clone());
    // Let a few cycles run first.
    while done.load(Ordering::Relaxed) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (li, lid) = leader(&etcd).await;
    assert_eq!(
        cycler.member_in_use(),
        etcd.endpoints()[li],
        "the cycler left the leader before the fault"
    );
    let fault_at = Instant::now();
    let heal: Option<Duration> = match fault {
        Fault::Kill => {
            tokio::task::block_in_place(|| etcd.kill(li));
            None
        }
        Fault::Hang(d) => {
            etcd.pause(li);
            Some(d)
        }
    };
    let elected = new_leader_at(&etcd, li, lid).await;
    // The first cycle that completes after etcd has its new leader.
    let resumed = loop {
        let at = t0 + Duration::from_micros(done.load(Ordering::Relaxed));
        if at > elected {
            break at;
        }
        assert!(
            elected.elapsed() < Duration::from_secs(15),
            "no lock/unlock cycle completed in 15 s after the new leader"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    // Status answers within its bound (the request timeout, 2 s by default)
    // right after the leader change.
    let asked = Instant::now();
    let st = waiter.status("held").await;
    let took = asked.elapsed();
    assert!(
        st.is_ok() && took <= Duration::from_millis(2300),
        "status right after the new leader: {:?} in {took:?}",
        st.err()
    );
    let election = elected - fault_at;
    let resume = resumed - elected;
    println!(
        "ttl {ttl} s, {}: etcd elected a new leader {:?} after the fault; lock/unlock resumed {:?} after that; status took {took:?}",
        match fault {
            Fault::Kill => "leader killed".to_string(),
            Fault::Hang(d) => format!("leader hung {d:?}"),
        },
        election,
        resume
    );
    if let Some(d) = heal {
        tokio::time::sleep_until(tokio::time::Instant::from_std(fault_at + d)).await;
        etcd.resume(li);
    }
    // Past the point where a session that had stopped renewing at the fault
    // would have ended locally (TTL - margin after its last acknowledgement).
    tokio::time::sleep_until(tokio::time::Instant::from_std(
        fault_at + Duration::from_secs(ttl as u64 + 1),
    ))
    .await;
    assert!(g.is_held(), "the hold was lost: {:?}", g.loss());
    assert!(
        !w.is_finished(),
        "the queued waiter ended: {:?}",
        w.await.unwrap().map(|g| g.fencing_token())
    );
    g.put("still-mine", "yes")
        .await
        .expect("a guarded write after the fault");
    g.unlock().await.unwrap();
    let wg = tokio::time::timeout(Duration::from_secs(5), w)
        .await
        .expect("the waiter acquires after the unlock")
        .unwrap()
        .unwrap();
    assert!(wg.fencing_token() > g.fencing_token());
    wg.unlock().await.unwrap();
    stop.cancel();
    let n = cyc.await.unwrap();
    assert!(n > 0);
    for c in [&holder, &waiter, &cycler] {
        let m = c.metrics();
        assert_eq!(
            m.lost.iter().map(|(_, n)| n).sum::<u64>(),
            0,
            "losses: {:?}",
            m.lost
        );
    }
    assert!(
        resume <= resume_bound,
        "lock/unlock resumed {resume:?} after the new leader (bound {resume_bound:?})"
    );
}

// The target is 0.6 s after the new leader (measured with the cycler on the
// leader: 74-206 ms; before the silent leader was judged against the new
// one's pace, 671-1,036 ms); the test allows 1 s for a loaded 2-core CI
// machine.
const RESUME_BOUND: Duration = Duration::from_millis(1000);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl5_hold_and_wait_survive_a_leader_kill() {
    ride_through(5, Fault::Kill, RESUME_BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl5_hold_and_wait_survive_a_3s_leader_hang() {
    ride_through(5, Fault::Hang(Duration::from_secs(3)), RESUME_BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl10_hold_and_wait_survive_a_5s_leader_hang() {
    ride_through(10, Fault::Hang(Duration::from_secs(5)), RESUME_BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_failing_is_signalled_before_the_loss_and_recovery_after() {
    let etcd = Etcd::single();
    let ns = unique_ns("risk");
    let c = client(&etcd, &ns, 5).await;
    let g = c.lock("held").await.unwrap();
    let mut changes = g.renewal_changes();
    assert_eq!(g.renewal(), etcdlock::Renewal::Ok);
    // Hung for 2.5 s: at TTL 5 s (margin 1 s, keep-alive every 1 s) renewal is
    // failing 1.5 s after the last acknowledgement, and the hold lasts 4 s.
    let paused = Instant::now();
    etcd.pause_for(0, Duration::from_millis(2500));
    tokio::time::timeout(Duration::from_millis(2500), changes.changed())
        .await
        .expect("Failing while etcd is hung")
        .unwrap();
    let etcdlock::Renewal::Failing { valid_until } = *changes.borrow_and_update() else {
        panic!("expected Failing")
    };
    let at = paused.elapsed();
    println!(
        "renewal failing {at:?} after etcd hung; {:?} of validity left",
        valid_until - Instant::now()
    );
    assert!(
        at <= Duration::from_millis(2000),
        "Failing only {at:?} after the hang"
    );
    assert!(valid_until > Instant::now() && g.is_held());
    tokio::time::timeout(Duration::from_secs(3), changes.changed())
        .await
        .expect("Ok once etcd answers")
        .unwrap();
    assert_eq!(*changes.borrow_and_update(), etcdlock::Renewal::Ok);
    println!(
        "renewal recovered {:?} after etcd hung (resumed at 2.5 s)",
        paused.elapsed()
    );
    assert!(g.is_held(), "{:?}", g.loss());
    g.unlock().await.unwrap();
}

/// A lock call that must open a new session while etcd is down retries its
/// lease grant for as long as etcd is away, holding the client's session
/// slot; closing the client ends it with `Closed` at once, and close itself
/// returns within the request timeout (it does not wait for that slot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_a_wait_granting_a_lease_while_etcd_is_down() {
    let mut etcd = Etcd::single();
    let ns = unique_ns("close-grant");
    let o = etcdlock::ClientOptions {
        request_timeout: Duration::from_secs(1),
        ..opts(&etcd, &ns, 2)
    };
    let c = Client::connect(o).await.unwrap();
    let g = c.lock("held").await.unwrap();
    etcd.kill(0);
    // The session ends at its local deadline (TTL 2 s less the margin).
    let lost = tokio::time::timeout(Duration::from_secs(4), g.wait_lost())
        .await
        .expect("the hold ends with etcd down");
    assert!(lost.is_some());
    let waiter = tokio::spawn({
        let c = c.clone();
        async move { c.lock("jobs").await }
    });
    // Not an assertion's wait: time for the call to reach its lease grant
    // (were close first, it would say Closed at once, and this test would
    // prove less, never fail).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "the lock call waits for etcd");
    let t0 = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), c.close())
        .await
        .expect("close returned within 5 s");
    let took = t0.elapsed();
    let r = tokio::time::timeout(Duration::from_millis(700), waiter)
        .await
        .expect("the waiter ended after close")
        .unwrap();
    println!(
        "close took {took:?}; the waiter: {:?}",
        r.as_ref().map(|_| ()).map_err(|e| e.code())
    );
    assert_eq!(r.unwrap_err().code(), etcdlock::ErrorCode::Closed);
    assert!(
        took <= Duration::from_millis(1700),
        "close took {took:?}, its bound is the request timeout (1 s)"
    );
}

/// An observer whose read waits on a hung etcd ends with `Closed` as soon as
/// the client is closed, not when the read's request timeout runs out (the
/// C library's etcdlock_client_free waits for an observer's last call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_an_observer_waiting_for_etcd() {
    let etcd = Etcd::single();
    let ns = unique_ns("close-observe");
    let o = etcdlock::ClientOptions {
        request_timeout: Duration::from_secs(5),
        ..opts(&etcd, &ns, 10)
    };
    let c = Client::connect(o).await.unwrap();
    let mut obs = c.observe("svc").unwrap();
    etcd.pause(0);
    let next = obs.next();
    tokio::pin!(next);
    // One poll: the observer's first read is under way, waiting for etcd.
    tokio::select! {
        biased;
        r = &mut next => panic!("the observer answered while etcd is stopped: {r:?}"),
        _ = std::future::ready(()) => {}
    }
    let closing = tokio::spawn({
        let c = c.clone();
        async move { c.close().await }
    });
    let t0 = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(1), &mut next).await;
    let took = t0.elapsed();
    etcd.resume(0);
    let r = r.unwrap_or_else(|_| {
        panic!("the observer still waited {took:?} after close (its read's bound is 5 s)")
    });
    println!(
        "the observer ended {took:?} after close: {:?}",
        r.as_ref().map_err(|e| e.code())
    );
    assert_eq!(r.unwrap_err().code(), etcdlock::ErrorCode::Closed);
    closing.await.unwrap();
}

/// A plain read in flight when its client closes (a waiter's point read
/// between two watch events, `status`) ends with `Closed` as soon as the
/// connection is shut, not after retrying a closed connection until its
/// request timeout: the conformance case close-while-waiting once took 2 s
/// to end a waiter caught in such a read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_a_read_in_flight() {
    let etcd = Etcd::single();
    let ns = unique_ns("close-read");
    // Lazy: no session, so close only shuts the connection (no revoke to wait for).
    let o = etcdlock::ClientOptions {
        request_timeout: Duration::from_secs(5),
        lazy_connect: true,
        ..opts(&etcd, &ns, 10)
    };
    let c = Client::connect(o).await.unwrap();
    c.status("warm").await.unwrap(); // connected
    etcd.pause(0);
    let read = tokio::spawn({
        let c = c.clone();
        async move { c.status("svc").await }
    });
    // The read is under way, waiting for etcd (its bound is 5 s).
    tokio::task::yield_now().await;
    assert!(
        !read.is_finished(),
        "the read answered while etcd is stopped"
    );
    tokio::time::timeout(Duration::from_secs(1), c.close())
        .await
        .expect("close without a session returns at once");
    let t0 = Instant::now();
    let r = tokio::time::timeout(Duration::from_millis(700), read).await;
    let took = t0.elapsed();
    etcd.resume(0);
    let r = r
        .unwrap_or_else(|_| panic!("the read still waited {took:?} after close (its bound is 5 s)"))
        .unwrap();
    println!(
        "the read ended {took:?} after close: {:?}",
        r.as_ref().map(|_| ())
    );
    assert_eq!(r.unwrap_err().code(), etcdlock::ErrorCode::Closed);
}

/// Range and Txn requests the members of `etcd` have handled so far, together.
fn reads(etcd: &Etcd) -> f64 {
    let handled = |i, m: &str| {
        etcd.metric(
            i,
            "grpc_server_handled_total",
            &[&format!("grpc_method=\"{m}\"")],
        )
    };
    (0..3)
        .map(|i| handled(i, "Range") + handled(i, "Txn"))
        .sum()
}

/// A cluster that stalls as a whole (every member paused: etcd overloaded,
/// or its machines frozen) is waited for, not failed over: a read in flight
/// (`status`) across a 2.2 s stall of all three members is sent once, answered after
/// the resume, and benches no member. Re-sent every member silence instead,
/// as it once was, each client of a loaded fleet added its requests again
/// to etcd's queue until the fleet's sessions ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_across_a_stall_of_every_member_is_sent_once_and_benches_no_one() {
    let etcd = Etcd::cluster(3);
    let ns = unique_ns("stall");
    // TTL 30 s: no keep-alive (nor the read that checks it) in the test's
    // few seconds; a request timeout past the stall.
    let o = ClientOptions {
        request_timeout: Duration::from_secs(6),
        ..opts(&etcd, &ns, 30)
    };
    let c = Client::connect(o).await.unwrap();
    c.status("x").await.unwrap();
    // What one status costs etcd with no stall.
    let before = reads(&etcd);
    c.status("x").await.unwrap();
    let one = reads(&etcd) - before;
    let before = reads(&etcd);
    for i in 0..3 {
        etcd.pause(i);
    }
    let asked = Instant::now();
    let read = tokio::spawn({
        let c = c.clone();
        async move { c.status("x").await }
    });
    // Resumed mid-way through the second round of status questions (the
    // first: 0.5-1.5 s, the second from 2 s), not on its edge.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    for i in 0..3 {
        etcd.resume(i);
    }
    let st = read.await.unwrap();
    assert!(st.is_ok(), "{:?}", st.err());
    let took = asked.elapsed();
    // Whatever the client sent is handled within moments of the resume.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        reads(&etcd) - before,
        one,
        "reads sent (answered after {took:?})"
    );
    assert_eq!(c.metrics().member_failures, 0);
    c.close().await;
}
