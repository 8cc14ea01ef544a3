//! The outside checker must catch a broken build. A real run against etcd:
//! holder A's lease is revoked (its hold ends), B takes the lock and writes
//! the resource with its token, then A writes its own token. With fencing,
//! etcd refuses A (porcupine: linearizable; our checker: 0 stale writes).
//! In the deliberately broken build (`Workload::unfenced_writes`: the write
//! skips the compare), etcd accepts it: porcupine must say the history is not
//! linearizable, with a visualization, and our checker must count 1 stale write.

use std::collections::BTreeMap;

use etcdlock::runtime::clock_monotonic_ns;
use etcdlock::Client;
use etcdlock_faults::checker::resource_history;
use etcdlock_faults::{
    current_revision, history, opts, raw, resource_write, unique_ns, GuardedOp, Hold, OpResult,
};
use etcdlock_testkit::Etcd;

fn write_op(call: u64, value: i64, r: &etcdlock::Result<()>) -> GuardedOp {
    GuardedOp {
        write: true,
        call_ns: call,
        ret_ns: Some(clock_monotonic_ns()),
        value,
        result: OpResult::of(r),
    }
}

/// One run; returns (porcupine's verdict, stale writes our checker counted).
async fn run(etcd: &Etcd, broken: bool) -> (history::Verdict, usize) {
    let eps = etcd.endpoints();
    let ns = unique_ns(if broken { "broken" } else { "fenced" });
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let o = opts(&eps, &ns, 2, std::time::Duration::from_secs(2));
    let (ca, cb) = (
        Client::connect(o.clone()).await.unwrap(),
        Client::connect(o).await.unwrap(),
    );

    let a_inv = clock_monotonic_ns();
    let ga = ca.lock("L").await.unwrap();
    let a_acq = clock_monotonic_ns();
    let call = clock_monotonic_ns();
    let r = resource_write(&ca, &ga, &ns, "L", broken).await;
    let mut a_ops = vec![write_op(call, ga.fencing_token(), &r)];
    r.unwrap();

    let b_inv = clock_monotonic_ns();
    let waiter = {
        let cb = cb.clone();
        tokio::spawn(async move { cb.lock("L").await })
    };
    // A's hold ends here: the test revokes its lease (as an operator would).
    let a_end = clock_monotonic_ns();
    rawc.lease_revoke(ga.lease_id()).await.unwrap();
    let gb = waiter.await.unwrap().unwrap();
    let b_acq = clock_monotonic_ns();
    let call = clock_monotonic_ns();
    let r = resource_write(&cb, &gb, &ns, "L", false).await;
    let b_ops = vec![write_op(call, gb.fencing_token(), &r)];
    r.unwrap();

    // The stale holder writes after B took over.
    let call = clock_monotonic_ns();
    let stale = resource_write(&ca, &ga, &ns, "L", broken).await;
    a_ops.push(write_op(call, ga.fencing_token(), &stale));
    assert_eq!(stale.is_ok(), broken, "the stale write: {stale:?}");
    let b_end = clock_monotonic_ns();
    gb.unlock().await.unwrap();

    let holds = vec![
        Hold {
            lock: "L".into(),
            token: ga.fencing_token(),
            acquired_ns: a_acq,
            ended_ns: a_end,
            client: "A".into(),
            invoked_ns: a_inv,
            ops: a_ops,
            ..Default::default()
        },
        Hold {
            lock: "L".into(),
            token: gb.fencing_token(),
            acquired_ns: b_acq,
            ended_ns: b_end,
            client: "B".into(),
            invoked_ns: b_inv,
            ops: b_ops,
            ..Default::default()
        },
    ];
    let res: BTreeMap<String, Vec<i64>> = resource_history(&mut rawc, &ns, from).await.unwrap();
    let ours = etcdlock_faults::checker::check_holds(&holds, &res);
    ca.close().await;
    cb.close().await;
    let v = history::check(
        &holds,
        if broken {
            "broken-build"
        } else {
            "fenced-build"
        },
    );
    println!(
        "{} build: porcupine {} ({} ops{}), our checker: {} stale writes accepted, resource tokens {:?}",
        if broken { "broken" } else { "fenced" },
        v.result,
        v.ops,
        v.html.as_ref().map(|p| format!(", {}", p.display())).unwrap_or_default(),
        ours.stale_writes_accepted,
        res.get("L"),
    );
    (v, ours.stale_writes_accepted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn porcupine_catches_a_broken_fencing_build() {
    let etcd = Etcd::single();
    let (v, stale) = run(&etcd, false).await;
    assert_eq!((v.result.as_str(), v.ops, stale), ("ok", 9, 0), "{v:?}");
    let (v, stale) = run(&etcd, true).await;
    assert_eq!(
        (v.result.as_str(), v.ops, stale),
        ("illegal", 9, 1),
        "{v:?}"
    );
    let html = v.html.expect("the visualization of the violation");
    assert!(std::fs::metadata(&html)
        .map(|m| m.len() > 1000)
        .unwrap_or(false));
}
