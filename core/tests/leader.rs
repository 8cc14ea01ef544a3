//! The leader loop (`Client::leader_loop`): three candidates, one task at a
//! time (counted through guarded writes), the partitioned leader's task
//! cancelled within the TTL, a new leader's task started, resign on stop
//! handing over in under a second, campaigning again after the task returns.

mod common;

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{client, skip_on_mem, unique_ns};
use etcdlock::{Client, ClientOptions, LeadOptions, LeaderEvent, LeaderLoop, LossReason};
use etcdlock_testkit::{grpc_proxy, Etcd};

/// What the tasks of every candidate saw: tasks running now (never above 1),
/// terms started, and each start's fencing token (strictly increasing).
#[derive(Default)]
struct Tasks {
    running: AtomicUsize,
    most: AtomicUsize,
    started: Mutex<Vec<(usize, i64, Instant)>>,
    cancelled: Mutex<Vec<(usize, Instant)>>,
    writes: AtomicI64,
}

/// Run candidate `who`'s loop: its task counts itself running, writes its
/// fencing token through the leadership (refused by etcd once lost), and
/// returns when its term is cancelled.
fn candidate(lp: Arc<LeaderLoop>, who: usize, tasks: Arc<Tasks>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        lp.run(
            |term| {
                let tasks = tasks.clone();
                async move {
                    let n = tasks.running.fetch_add(1, Ordering::SeqCst) + 1;
                    tasks.most.fetch_max(n, Ordering::SeqCst);
                    let token = term.leadership().fencing_token();
                    tasks
                        .started
                        .lock()
                        .unwrap()
                        .push((who, token, Instant::now()));
                    if term
                        .leadership()
                        .put("leader-writes", token.to_string())
                        .await
                        .is_ok()
                    {
                        tasks.writes.fetch_add(1, Ordering::SeqCst);
                    }
                    term.cancelled().cancelled().await;
                    tasks.cancelled.lock().unwrap().push((who, Instant::now()));
                    tasks.running.fetch_sub(1, Ordering::SeqCst);
                }
            },
            |_| {},
        )
        .await
    })
}

/// The loop's next event, within 10 s.
async fn next_or_end(lp: &LeaderLoop) -> Option<LeaderEvent> {
    tokio::time::timeout(Duration::from_secs(10), lp.next())
        .await
        .expect("no leader-loop event within 10 s")
}

async fn next(lp: &LeaderLoop) -> LeaderEvent {
    next_or_end(lp).await.expect("the loop stopped")
}

async fn await_started(tasks: &Tasks, n: usize, within: Duration) -> (usize, i64, Instant) {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = tasks.started.lock().unwrap().get(n - 1) {
            return *s;
        }
        assert!(Instant::now() < deadline, "term {n} never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_candidates_one_task_at_a_time_across_a_partition_and_a_stop() {
    if skip_on_mem("three_candidates_one_task_at_a_time_across_a_partition_and_a_stop") {
        return;
    }
    let etcd = Etcd::single();
    let ns = unique_ns("leader-loop");
    let ttl = 3;
    // Candidate 0 reaches etcd through a proxy: pausing it partitions 0 alone.
    let proxy = grpc_proxy(&etcd.endpoints());
    let c0 = Client::connect(
        ClientOptions::new([proxy.endpoint()])
            .with_ttl(ttl)
            .with_namespace(&ns),
    )
    .await
    .unwrap();
    let c1 = client(&etcd, &ns, ttl).await;
    let c2 = client(&etcd, &ns, ttl).await;
    let tasks = Arc::new(Tasks::default());
    let l0 = Arc::new(c0.leader_loop("svc", "c0", LeadOptions::default()).unwrap());
    let r0 = candidate(l0.clone(), 0, tasks.clone());
    let first = await_started(&tasks, 1, Duration::from_secs(10)).await;
    assert_eq!(first.0, 0);
    let l1 = Arc::new(c1.leader_loop("svc", "c1", LeadOptions::default()).unwrap());
    let l2 = Arc::new(c2.leader_loop("svc", "c2", LeadOptions::default()).unwrap());
    let r1 = candidate(l1.clone(), 1, tasks.clone());
    let r2 = candidate(l2.clone(), 2, tasks.clone());

    // Partition the leader: its task is cancelled within the TTL (at the
    // local loss deadline, before etcd expires its lease), and only then
    // does another candidate's task start.
    let cut = Instant::now();
    proxy.pause();
    let second = await_started(&tasks, 2, Duration::from_secs(3 * ttl as u64)).await;
    let (who, at) = tasks.cancelled.lock().unwrap()[0];
    assert_eq!(who, 0);
    assert!(
        at.duration_since(cut) < Duration::from_secs(ttl as u64),
        "the partitioned leader's task ran {:?} past the cut",
        at.duration_since(cut)
    );
    assert!(
        at < second.2,
        "the next task started before the old one was cancelled"
    );
    assert!(
        second.0 != 0 && second.1 > first.1,
        "{second:?} after {first:?}"
    );
    eprintln!(
        "partition: old task cancelled {:?} after the cut, next task started {:?} after it (TTL {ttl} s)",
        at.duration_since(cut),
        second.2.duration_since(cut)
    );
    proxy.resume();

    // Resign on stop hands over in under a second.
    let leader = if second.0 == 1 { &l1 } else { &l2 };
    let stopped = Instant::now();
    leader.stop();
    let third = await_started(&tasks, 3, Duration::from_secs(5)).await;
    assert!(
        third.2.duration_since(stopped) < Duration::from_secs(1),
        "handover took {:?}",
        third.2.duration_since(stopped)
    );
    assert!(third.1 > second.1);
    eprintln!(
        "stop: next task started {:?} after stop()",
        third.2.duration_since(stopped)
    );

    for l in [&l0, &l1, &l2] {
        l.stop();
    }
    for r in [r0, r1, r2] {
        tokio::time::timeout(Duration::from_secs(10), r)
            .await
            .expect("a loop did not stop")
            .unwrap();
    }
    assert_eq!(
        tasks.most.load(Ordering::SeqCst),
        1,
        "two tasks ran at once"
    );
    let starts = tasks.started.lock().unwrap().len();
    assert!(starts >= 3, "{starts} terms");
    // Every task that started wrote through its leadership, except possibly
    // the partitioned one if its write was cut off (it started before).
    assert!(tasks.writes.load(Ordering::SeqCst) >= starts as i64 - 1);
    for c in [c0, c1, c2] {
        c.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_returns_resigns_and_the_loop_campaigns_again_unless_told_not_to() {
    let etcd = Etcd::single();
    let ns = unique_ns("leader-again");
    let c = client(&etcd, &ns, 10).await;
    let lp = c.leader_loop("svc", "me", LeadOptions::default()).unwrap();
    let mut tokens = Vec::new();
    let mut events = Vec::new();
    while tokens.len() < 3 {
        match next(&lp).await {
            LeaderEvent::Elected(term) => {
                tokens.push(term.leadership().fencing_token());
                term.end();
            }
            LeaderEvent::Resigned => events.push("resigned"),
            LeaderEvent::Leader(_) | LeaderEvent::RenewalRecovered => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert_eq!(events, ["resigned", "resigned"]);
    lp.stop();
    let mut tail = Vec::new();
    while let Some(ev) = next_or_end(&lp).await {
        match ev {
            LeaderEvent::Elected(t) => t.end(),
            LeaderEvent::Stopped => tail.push("stopped"),
            _ => {}
        }
    }
    assert_eq!(tail.last(), Some(&"stopped"));
    assert!(c.leader("svc").await.unwrap().is_none(), "stop resigned");

    // again = false: one term, then the loop stops by itself.
    let once = c
        .leader_loop(
            "svc",
            "once",
            LeadOptions {
                again: false,
                ..LeadOptions::default()
            },
        )
        .unwrap();
    let mut terms = 0;
    let mut stopped = false;
    while let Some(ev) = next_or_end(&once).await {
        match ev {
            LeaderEvent::Elected(t) => {
                terms += 1;
                t.end();
            }
            LeaderEvent::Stopped => stopped = true,
            _ => {}
        }
    }
    assert_eq!((terms, stopped), (1, true));
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_term_reports_its_reason_and_who_leads_next() {
    let etcd = Etcd::single();
    let ns = unique_ns("leader-lost");
    let a = client(&etcd, &ns, 10).await;
    let b = client(&etcd, &ns, 10).await;
    let la = a.leader_loop("svc", "a", LeadOptions::default()).unwrap();
    let term = loop {
        if let LeaderEvent::Elected(t) = next(&la).await {
            break t;
        }
    };
    let lb = b.leader_loop("svc", "b", LeadOptions::default()).unwrap();
    // An operator frees the lock: a's term is lost (KeyDeleted), b leads,
    // and a's observer reports b (before or after the loss).
    let token = term.leadership().fencing_token();
    assert!(b.release("svc", token).await.unwrap());
    let (mut lost, mut saw_b) = (false, false);
    while !(lost && saw_b) {
        match next(&la).await {
            LeaderEvent::Lost(loss) => {
                assert_eq!(loss.reason, LossReason::KeyDeleted);
                assert!(term.cancelled().is_cancelled());
                lost = true;
            }
            LeaderEvent::Leader(Some(l)) => saw_b |= l.value == b"b",
            LeaderEvent::Leader(None) | LeaderEvent::RenewalRecovered => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let tb = loop {
        if let LeaderEvent::Elected(t) = next(&lb).await {
            break t;
        }
    };
    assert!(tb.leadership().fencing_token() > token);
    term.end();
    tb.end();
    la.stop();
    lb.stop();
    a.close().await;
    b.close().await;
}

/// A loop whose stop token is cancelled already never campaigns: its only
/// event is `Stopped` (a Node `AbortSignal` aborted before `lead`). A token
/// cancelled later stops the loop as `stop()` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_whose_stop_token_is_cancelled_never_campaigns() {
    let etcd = Etcd::single();
    let ns = unique_ns("leader-stop-token");
    let c = client(&etcd, &ns, 10).await;
    for i in 0..50 {
        let stop = etcdlock::CancellationToken::new();
        stop.cancel();
        let opts = LeadOptions {
            stop: Some(stop),
            ..LeadOptions::default()
        };
        let lp = c.leader_loop(&format!("svc{i}"), "me", opts).unwrap();
        let mut events = Vec::new();
        while let Some(ev) = next_or_end(&lp).await {
            match ev {
                LeaderEvent::Leader(_) => {}
                other => events.push(format!("{other:?}")),
            }
        }
        assert_eq!(events, ["Stopped"], "loop {i}");
    }
    let stop = etcdlock::CancellationToken::new();
    let opts = LeadOptions {
        stop: Some(stop.clone()),
        ..LeadOptions::default()
    };
    let lp = c.leader_loop("svc", "me", opts).unwrap();
    let LeaderEvent::Elected(term) = next_elected(&lp).await else {
        unreachable!()
    };
    stop.cancel();
    term.cancelled().cancelled().await;
    term.end();
    let mut tail = Vec::new();
    while let Some(ev) = next_or_end(&lp).await {
        match ev {
            LeaderEvent::Leader(_) => {}
            other => tail.push(format!("{other:?}")),
        }
    }
    assert_eq!(tail, ["Resigned", "Stopped"]);
    c.close().await;
}

/// The next `Elected`, skipping who-leads, renewal and resign events.
async fn next_elected(lp: &LeaderLoop) -> LeaderEvent {
    loop {
        match next(lp).await {
            ev @ LeaderEvent::Elected(_) => return ev,
            LeaderEvent::Leader(_) | LeaderEvent::RenewalRecovered | LeaderEvent::Resigned => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// A task that returns at once does not make the loop campaign in a tight
/// loop: one election per `retry` at most.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_returns_at_once_campaigns_once_per_retry() {
    let etcd = Etcd::single();
    let ns = unique_ns("leader-retry");
    let c = client(&etcd, &ns, 10).await;
    let retry = Duration::from_millis(500);
    let opts = LeadOptions {
        retry,
        ..LeadOptions::default()
    };
    let lp = c.leader_loop("svc", "me", opts).unwrap();
    let mut at = Vec::new();
    while at.len() < 4 {
        if let LeaderEvent::Elected(t) = next_elected(&lp).await {
            at.push(Instant::now());
            t.end();
        }
    }
    let took = at[3] - at[0];
    eprintln!("4 elections of a task that returns at once took {took:?} (retry {retry:?})");
    // Three pauses of `retry`, less the events' delivery jitter.
    assert!(took >= Duration::from_millis(1300), "{took:?}");
    lp.stop();
    while next_or_end(&lp).await.is_some() {}
    c.close().await;
}
