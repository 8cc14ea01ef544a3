//! Scenario 37, a fleet on one 3-member cluster (issue 60, item 3, the part
//! that runs in CI): a few hundred clients in this process, each with its
//! own `Client` (connection and lease), each holding a lock of its own, some
//! names with two waiters queued behind their holder; then the etcd leader
//! is killed (SIGKILL) and restarted, the whole cluster is paused
//! (SIGSTOP of every member) past one keep-alive interval and continued,
//! and every member is restarted (SIGTERM, start, healthy) one at a time
//! within the TTL.
//! After each fault every hold must still be held and still be in etcd
//! under its live lease (checked against etcd), every client must be back to
//! renewing within a bound, and the waiters must still be queued; after the
//! storm they are granted in queue order.

use std::sync::Mutex;

use etcdlock::Guard;

use super::*;
use crate::{release_and_record_ops, GuardedOp, OpResult};

mod queues;
mod sampling;
mod storm;

use queues::Queues;
use storm::{
    measured_interval, spawn_probe, spawn_sampler, FleetStorm, Probes, Renewals, StormFleet,
};

/// Clients in the fleet (each its own connection and lease) at the CI
/// size; `ETCDLOCK_FLEET_CLIENTS` sets another ([`fleet_clients`]).
pub const FLEET_CLIENTS: usize = 300;

/// The fleet's size: `ETCDLOCK_FLEET_CLIENTS` if set (at least the
/// `3 * FLEET_QUEUES` clients the queues need), else [`FLEET_CLIENTS`].
pub fn fleet_clients() -> Result<usize, String> {
    match std::env::var("ETCDLOCK_FLEET_CLIENTS") {
        Err(_) => Ok(FLEET_CLIENTS),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n >= 3 * FLEET_QUEUES => Ok(n),
            _ => Err(format!(
                "ETCDLOCK_FLEET_CLIENTS={v:?}: want a number of clients >= {}",
                3 * FLEET_QUEUES
            )),
        },
    }
}

/// Names with a queue: held by client `j`, waited for by clients
/// `FLEET_QUEUES + j` (first) and `2 * FLEET_QUEUES + j` (second).
pub const FLEET_QUEUES: usize = 20;

/// The fleet's lease TTL, seconds. With the default margin (TTL/5, at most
/// 2 s) a hold ends locally TTL - margin = 18 s after its last proven
/// renewal was sent, and one is sent every keep-alive interval
/// ([`FLEET_KEEPALIVE`], 4.5 s, up to a tenth early): a client
/// whose last renewal was sent an interval before the cluster stops for the
/// interval + 1 s has 18 - 2 x interval - 1 s (8 s now, at least 3.7 s) to
/// get one through once it runs again (the catch-up has taken up to 6.2 s
/// on a loaded machine: faults/README.md). A leader election (etcd's own;
/// up to 5 s on a loaded 2-core machine) plus the failover fits with more
/// to spare.
pub const FLEET_TTL: i64 = 20;

/// The fleet's keep-alive interval, set (the default at TTL 20 s is 13 s,
/// which leaves 5 s after each renewal: etcdlock's default trades stall
/// tolerance for fewer messages, see docs/concepts/time.md). A fleet that
/// must live through a stall of every member longer than one interval sets
/// one that leaves room for the stall: here TTL - margin - 2 x interval - 1 s
/// = 8 s. It is also what the old default (min(TTL/3, (TTL - margin)/4))
/// gave at this TTL.
pub const FLEET_KEEPALIVE: Duration = Duration::from_millis(4500);

/// The options of every client of the fleet (and its probe).
fn fleet_opts(eps: &[String], ns: &str) -> etcdlock::ClientOptions {
    let mut o = opts(eps, ns, FLEET_TTL, Duration::from_secs(2));
    o.keepalive_interval = Some(FLEET_KEEPALIVE);
    o
}

/// How long after etcd is back (a leader elected again, or the members
/// continued) every client must have renewed, on top of one keep-alive
/// interval (a client whose renewal was not due yet renews when it is due;
/// one that was due retries at once, on another member if its own is gone).
/// That is at the CI size; a larger fleet's catch-up after a fault takes
/// longer: 1 ms more per client beyond [`FLEET_CLIENTS`] ([`renew_slack`]).
pub const FLEET_RENEW_SLACK: Duration = Duration::from_secs(3);

/// The renewal slack of a fleet of `n` clients.
pub fn renew_slack(n: usize) -> Duration {
    FLEET_RENEW_SLACK + Duration::from_millis(n.saturating_sub(FLEET_CLIENTS) as u64)
}

/// The clients join over this long at the CI size, one every 10 ms, as a
/// fleet's instances start at different times: their keep-alives are out
/// of phase (a fault that leaves them in phase shows in the next round's
/// figure). A larger fleet joins at the same rate ([`join_spread`]).
pub const FLEET_JOIN_SPREAD: Duration = Duration::from_secs(3);

/// How long a fleet of `n` clients takes to join: one every 10 ms.
pub fn join_spread(n: usize) -> Duration {
    FLEET_JOIN_SPREAD * n as u32 / FLEET_CLIENTS as u32
}

/// One client of the fleet: its lock `own-NNN` and the guarded writes of
/// that hold (one after the acquisition, one after every fault).
struct Member {
    client: Client,
    own: Arc<Guard>,
    invoked: u64,
    acquired: u64,
    ops: Vec<GuardedOp>,
}

fn own_name(i: usize) -> String {
    format!("own-{i:03}")
}

fn queue_name(j: usize) -> String {
    format!("q{j:02}")
}

fn client_name(i: usize) -> String {
    format!("fleet-c{i:03}")
}

/// A guarded write of the lock's resource key with the hold's token, timed for porcupine.
async fn guarded_write(g: &Guard) -> GuardedOp {
    guarded_write_why(g).await.0
}

/// [`guarded_write`], with the error's (code, message) if it failed.
async fn guarded_write_why(g: &Guard) -> (GuardedOp, Option<(&'static str, String)>) {
    let call = clock_monotonic_ns();
    let r = g
        .put(resource_key(g.name()), g.fencing_token().to_string())
        .await;
    let result = OpResult::of(&r);
    let op = GuardedOp {
        write: true,
        call_ns: call,
        ret_ns: (result != OpResult::Unknown).then(clock_monotonic_ns),
        value: g.fencing_token(),
        result,
    };
    (op, r.err().map(|e| (e.code().name(), e.to_string())))
}

/// Connect client `i` and take its own lock; retried until `deadline`.
async fn join_fleet(
    eps: Vec<String>,
    ns: String,
    i: usize,
    counters: Arc<Counters>,
    deadline: Instant,
) -> Result<Member, String> {
    let o = fleet_opts(&eps, &ns);
    let client = loop {
        match Client::connect(o.clone()).await {
            Ok(c) => break c,
            Err(e) if Instant::now() < deadline => {
                counters.err(e.code());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(format!("{} connect: {e}", client_name(i))),
        }
    };
    loop {
        let invoked = clock_monotonic_ns();
        match client
            .lock_with(&own_name(i), LockOptions::timeout(Duration::from_secs(5)))
            .await
        {
            Ok(g) => {
                let acquired = clock_monotonic_ns();
                let own = Arc::new(g);
                let op = guarded_write(&own).await;
                return Ok(Member {
                    client,
                    own,
                    invoked,
                    acquired,
                    ops: vec![op],
                });
            }
            Err(e) if Instant::now() < deadline => {
                counters.err(e.code());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(format!("{} lock: {e}", client_name(i))),
        }
    }
}

/// Scenario 37: a fleet of [`fleet_clients`] clients under leader kills, a
/// cluster-wide pause and a rolling restart.
pub async fn fleet_faults(p: &Profile) -> Outcome {
    let mut o = Outcome::new(37, "fleet-faults");
    let n = match fleet_clients() {
        Ok(n) => n,
        Err(e) => {
            o.fail(e);
            return o;
        }
    };
    let mut etcd = Etcd::cluster(3);
    let eps = etcd.endpoints();
    let ns = unique_ns("fleet");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Arc::new(Checker::new());
    let counters = Arc::new(Counters::default());
    let started = Instant::now();

    // The fleet: every client connects and takes its own lock, one every
    // 10 ms (at most 50 at a time), each within 30 s of its turn.
    let sem = Arc::new(tokio::sync::Semaphore::new(50));
    let spread = join_spread(n);
    let deadline = Instant::now() + spread + Duration::from_secs(30);
    let mut set = tokio::task::JoinSet::new();
    for i in 0..n {
        let (eps, ns, counters, sem) = (eps.clone(), ns.clone(), counters.clone(), sem.clone());
        set.spawn(async move {
            tokio::time::sleep(spread * i as u32 / n as u32).await;
            let _permit = sem.acquire_owned().await;
            (i, join_fleet(eps, ns, i, counters, deadline).await)
        });
    }
    let mut slots: Vec<Option<Member>> = (0..n).map(|_| None).collect();
    while let Some(r) = set.join_next().await {
        match r {
            Ok((i, Ok(m))) => slots[i] = Some(m),
            Ok((_, Err(e))) => o.fail(e),
            Err(e) => o.fail(format!("a fleet client's task: {e}")),
        }
    }
    if slots.iter().any(Option::is_none) {
        o.fail("not every fleet client joined");
        for m in slots.into_iter().flatten() {
            m.client.close().await;
        }
        return o;
    }
    let mut members: Vec<Member> = slots.into_iter().flatten().collect();
    let joined_ms = started.elapsed().as_millis();
    let mut on_member: BTreeMap<String, usize> = BTreeMap::new();
    for m in &members {
        *on_member.entry(m.client.member_in_use()).or_default() += 1;
    }
    let queues = Queues::form(&members, &mut rawc, &ns, &mut o).await;
    let setup_ms = started.elapsed().as_millis();

    let stop = CancellationToken::new();
    let renewals: Renewals = Arc::new(Mutex::new(vec![Vec::new(); n]));
    let sampler = spawn_sampler(
        members.iter().map(|m| m.own.clone()).collect(),
        renewals.clone(),
        stop.clone(),
    );
    let probe_client = Client::connect(fleet_opts(&eps, &ns))
        .await
        .expect("probe connect");
    let probes: Probes = Arc::new(Mutex::new(Vec::new()));
    let prober = spawn_probe(probe_client.clone(), probes.clone(), stop.clone());

    let mut storm_rounds = Vec::new();
    // Until enough renewals were seen to measure the interval.
    let wait_until = Instant::now() + Duration::from_secs(FLEET_TTL as u64 / 2);
    let mut measured = measured_interval(&renewals);
    while measured.is_none() && Instant::now() < wait_until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        measured = measured_interval(&renewals);
    }
    o.expect(measured.is_some(), || {
        "the keep-alive interval could not be measured (too few renewals)".into()
    });
    let interval = measured.unwrap_or_default();
    if o.passed() && queues.complete() {
        let fleet = StormFleet {
            ns: &ns,
            members: &mut members,
            queues: &queues,
            renewals: renewals.clone(),
            probes: probes.clone(),
            interval,
        };
        let mut fp = FleetStorm::new(&mut etcd, &mut rawc, fleet);
        // One round of each fault at the CI profile (3), the leader kill
        // again at the soak's.
        let rounds = run_rounds(&mut fp, Duration::ZERO, p.rounds.clamp(3, 4)).await;
        o.faults = rounds.faults;
        o.failures.extend(rounds.failures);
        storm_rounds = std::mem::take(&mut fp.done);
    }
    stop.cancel();
    let _ = sampler.await;
    let _ = prober.await;

    // After the storm: every queue handed over in its order.
    let (order_ok, max_handoff_ms) = queues.grant_in_order(&checker, &counters, &mut o).await;
    o.expect(order_ok == FLEET_QUEUES, || {
        format!("{order_ok}/{FLEET_QUEUES} queues granted in queue order after the storm")
    });

    // Every own hold ends with an unlock (all at once, as a fleet's
    // instances would); then the clients close.
    let mut releasing = tokio::task::JoinSet::new();
    for (i, m) in members.iter_mut().enumerate() {
        let ops = std::mem::take(&mut m.ops);
        let (checker, counters, own) = (checker.clone(), counters.clone(), m.own.clone());
        let span = (m.invoked, m.acquired);
        releasing.spawn(async move {
            release_and_record_ops(
                &checker,
                &counters,
                own_name(i),
                &own,
                span,
                clock_monotonic_ns(),
                &client_name(i),
                ops,
            )
            .await
        });
    }
    while releasing.join_next().await.is_some() {}
    let mut closing = tokio::task::JoinSet::new();
    for m in members {
        closing.spawn(async move { m.client.close().await });
    }
    while closing.join_next().await.is_some() {}
    probe_client.close().await;

    // The resource history through a fresh connection (the observer's may
    // still point at a member that was killed).
    if let Ok(c) = etcd_client::Client::connect(etcd.endpoints(), None).await {
        rawc = c;
    }
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.acquisitions = (n + 3 * FLEET_QUEUES) as u64;
    let lost = counters.losses.load(Ordering::Relaxed);
    o.expect(lost == 0, || {
        format!("{lost} holds ended lost at the unlock")
    });
    let rounds_ok = storm_rounds.len();
    o.expect(rounds_ok >= 3, || {
        format!("only {rounds_ok} fault rounds ran")
    });
    let on_members = on_member
        .iter()
        .map(|(ep, n)| format!("{n} on :{}", ep.rsplit(':').next().unwrap_or(ep)))
        .collect::<Vec<_>>()
        .join(", ");
    o.figure = format!(
        "{n} clients (own connection and lease each; {on_members}), TTL {FLEET_TTL} s, keep-alive interval {} ms (measured), {} held locks + {} queued waiters, joined in {joined_ms} ms, set up in {setup_ms} ms; {}; renewal bound interval + {} ms; {order_ok}/{FLEET_QUEUES} queues granted in order after the storm, handoff <= {max_handoff_ms} ms; {}; errors: {}",
        interval.as_millis(),
        n + FLEET_QUEUES,
        2 * FLEET_QUEUES,
        storm_rounds
            .iter()
            .enumerate()
            .map(|(k, r)| format!("round {}: {}", k + 1, r.line()))
            .collect::<Vec<_>>()
            .join("; "),
        renew_slack(n).as_millis(),
        r.summary(),
        counters.errors_summary()
    );
    o
}
