//! Every member of a 3-member cluster restarted one by one with SIGTERM
//! (34), and the binaries replaced member by member 3.4 -> 3.5 (35) and
//! 3.5 -> 3.6 (36),
//! while a holder in every language holds, a waiter waits behind each, a
//! workload locks and a prober times every call against its bound.

use std::path::PathBuf;

use super::*;

mod steps;
use steps::{etcd_build, versions};
pub(super) use steps::{run_steps, Step};

/// The versions of the rolling upgrade after Debian's 3.4 (built from the Go
/// module proxy by `faults/build-etcd.sh`; `faults/test.sh` builds them in
/// the background while the rest builds).
pub const UPGRADE_VERSIONS: [&str; 2] = ["3.5.35", "3.6.16"];

/// The etcd the upgrade starts from: Debian's 3.4.
const ETCD_34: &str = "/usr/bin/etcd";

/// How much past its bound a call may return (scheduling on a loaded machine).
const BOUND_SLACK_MS: i64 = 250;

/// The prober: lock (timeout 2 s), guarded put, unlock (request timeout 1 s)
/// in a loop, each call timed against its bound; every hold to the checker.
async fn prober(
    c: Client,
    checker: Arc<Checker>,
    stop: CancellationToken,
) -> (u64, i64, i64, Vec<String>, BTreeMap<String, u64>) {
    let lock_bound = Duration::from_secs(2);
    let (mut n, mut max_lock, mut max_other, mut over, mut errs) =
        (0u64, 0i64, 0i64, Vec::new(), BTreeMap::new());
    while !stop.is_cancelled() {
        let inv = clock_monotonic_ns();
        let r = c.lock_with("B", LockOptions::timeout(lock_bound)).await;
        let acq = clock_monotonic_ns();
        let ms = ms_between(inv, acq);
        max_lock = max_lock.max(ms);
        if ms > 2000 + BOUND_SLACK_MS {
            over.push(format!("lock {ms} ms (bound 2000)"));
        }
        let g = match r {
            Ok(g) => g,
            Err(e) => {
                *errs.entry(format!("lock {}", e.code().name())).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        n += 1;
        let call = clock_monotonic_ns();
        let w = g
            .put(resource_key("B"), g.fencing_token().to_string())
            .await;
        let ret = clock_monotonic_ns();
        let result = crate::OpResult::of(&w);
        if let Err(e) = &w {
            *errs.entry(format!("put {}", e.code().name())).or_default() += 1;
        }
        let ops = vec![crate::GuardedOp {
            write: true,
            call_ns: call,
            ret_ns: (result != crate::OpResult::Unknown).then_some(ret),
            value: g.fencing_token(),
            result,
        }];
        let end = clock_monotonic_ns();
        let before = g.loss();
        let u = g.unlock().await;
        let unl = ms_between(end, clock_monotonic_ns());
        let loss = before.or_else(|| if u.is_err() { g.loss() } else { None });
        if let Err(e) = &u {
            *errs
                .entry(format!("unlock {}", e.code().name()))
                .or_default() += 1;
        }
        for (what, ms) in [("put", ms_between(call, ret)), ("unlock", unl)] {
            max_other = max_other.max(ms);
            if ms > 1000 + BOUND_SLACK_MS {
                over.push(format!("{what} {ms} ms (bound 1000)"));
            }
        }
        checker.record(Hold {
            lock: "B".into(),
            token: g.fencing_token(),
            acquired_ns: acq,
            ended_ns: loss
                .map(|l| instant_to_mono_ns(l.at).min(end))
                .unwrap_or(end),
            client: "prober".into(),
            loss: loss.map(|l| LossInfo {
                reason: l.reason.name().into(),
                at_ns: instant_to_mono_ns(l.at),
                reported_ns: end,
            }),
            invoked_ns: inv,
            ops,
        });
    }
    c.close().await;
    (n, max_lock, max_other, over, errs)
}

/// The lock a holder in `lang` takes.
fn lock_of(lang: HolderLang) -> String {
    format!("U-{}", lang.name().to_lowercase())
}

/// A holder process with its waiter.
struct Proc {
    lang: HolderLang,
    child: ChildProc,
    token: i64,
    acquired_ns: u64,
    key: String,
    put: crate::GuardedOp,
    waiter: tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>,
    /// The loss the holder reported (its `LOST` line), and its stale write
    /// after it (`STALE`), if it printed them.
    lost: Option<(LossInfo, Option<crate::GuardedOp>)>,
}

/// A holder process's `LOST <reason> <last true> <turned false>` line as the
/// history records it: the hold ended at the last instant the binding said
/// it was held.
fn loss_of_line(parts: &[String]) -> Option<LossInfo> {
    let at_ns: u64 = parts.get(2)?.parse().ok()?;
    let reported_ns: u64 = parts.get(3)?.parse().ok()?;
    Some(LossInfo {
        reason: crate::canonical_loss_reason(parts.get(1)?),
        at_ns,
        reported_ns,
    })
}

/// 34 and 35: holders in every language (this process in Rust, processes in
/// Python, Java, Node and C, each on its own lock, every client with all
/// endpoints) hold through `steps`; a waiter of this process is queued
/// behind each; a workload and the prober run beside. Afterwards: every
/// hold kept (no loss reported, its key and token unchanged in etcd), then
/// the holders end (the processes by kill -9, the Rust one by unlock) and
/// each waiter takes over with a higher token.
async fn rolling(
    p: &Profile,
    id: u32,
    name: &'static str,
    start_bin: Option<PathBuf>,
    steps: impl FnOnce() -> Result<Vec<Step>, String>,
) -> Outcome {
    let _ = p;
    let mut o = Outcome::new(id, name);
    o.languages = HolderLang::ALL.iter().map(|l| l.name()).collect();
    let steps = match blocking(steps) {
        Ok(s) => s,
        Err(e) => {
            o.fail(e);
            return o;
        }
    };
    let cfg = etcdlock_testkit::Config {
        members: 3,
        bin: start_bin,
        ..Default::default()
    };
    let mut etcd = blocking(|| Etcd::start(cfg));
    let eps = etcd.endpoints();
    let first_version = versions(&etcd, 0).map(|v| v.0).unwrap_or_default();
    let ns = unique_ns(&format!("roll{id}"));
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Arc::new(Checker::new());
    let conn = |rt: u64| Client::connect(opts(&eps, &ns, TTL, Duration::from_millis(rt)));
    let (Ok(hc), Ok(wc), Ok(pc)) = (conn(1000).await, conn(1000).await, conn(1000).await) else {
        o.fail("connect");
        return o;
    };
    // The holder processes first (a JVM takes a while), then each one's waiter.
    let mut children = Vec::new();
    for lang in HolderLang::ALL
        .into_iter()
        .filter(|l| *l != HolderLang::Rust)
    {
        let mut spec = holder_spec(&eps, &ns, 1);
        spec["lock"] = json!(lock_of(lang));
        spec["request_timeout_ms"] = json!(1000);
        match spawn_holder(lang, spec) {
            Ok(c) => children.push((lang, c)),
            Err(e) => o.fail(e),
        }
    }
    let mut procs = Vec::new();
    for (lang, mut child) in children {
        match queue_behind_on(&mut child, &wc, &mut rawc, &ns, "mutex", &lock_of(lang)).await {
            Ok((waiter, token, acquired_ns, key, put)) => procs.push(Proc {
                lang,
                child,
                token,
                acquired_ns,
                key,
                put,
                waiter,
                lost: None,
            }),
            Err(e) => {
                o.fail(format!("{} holder: {e}", lang.name()));
                child.kill9().await;
            }
        }
    }
    let rlock = lock_of(HolderLang::Rust);
    let inv = clock_monotonic_ns();
    let g = match hc.lock(&rlock).await {
        Ok(g) => g,
        Err(e) => {
            o.fail(format!("Rust holder: {e}"));
            return o;
        }
    };
    let racq = clock_monotonic_ns();
    let call = clock_monotonic_ns();
    let w = g
        .put(resource_key(&rlock), g.fencing_token().to_string())
        .await;
    let mut rops = vec![crate::GuardedOp {
        write: true,
        call_ns: call,
        ret_ns: Some(clock_monotonic_ns()),
        value: g.fencing_token(),
        result: crate::OpResult::of(&w),
    }];
    let rwaiter = spawn_waiter(wc.clone(), &rlock, "mutex");
    if await_key_count(
        &mut rawc,
        &format!("{ns}{rlock}/"),
        2,
        Duration::from_secs(10),
    )
    .await
    .is_none()
    {
        o.fail("the Rust holder's waiter never queued");
    }
    o.acquisitions += 1 + procs.len() as u64;
    // The workload and the prober.
    let counters = Arc::new(Counters::default());
    let mut wl = members::cluster_workload(eps.clone(), &ns);
    (wl.clients, wl.locks) = (4, 2);
    let (wstop, wh) = start_workload(wl, checker.clone(), counters.clone());
    let pstop = CancellationToken::new();
    let ph = tokio::spawn(prober(pc, checker.clone(), pstop.clone()));
    tokio::time::sleep(Duration::from_millis(500)).await;

    let t0 = Instant::now();
    let s = run_steps(&mut etcd, steps, &mut o).await;
    let took = t0.elapsed();
    o.faults = s.done as u64;
    tokio::time::sleep(Duration::from_millis(500)).await;
    wstop.cancel();
    pstop.cancel();
    let _ = wh.await;
    let (probes, max_lock, max_other, over, perrs) = ph.await.unwrap_or_default();
    o.acquisitions += counters.acquisitions.load(Ordering::Relaxed) + probes;
    let wl_losses = counters.losses.load(Ordering::Relaxed);
    o.expect(wl_losses == 0, || {
        format!("{wl_losses} workload holds lost")
    });
    o.expect(over.is_empty(), || {
        format!("calls past their bound: {over:?}")
    });
    o.expect(probes > 0, || "the prober acquired nothing".into());

    // Every hold kept: no loss seen, its key still there with its token.
    let keys = keys_under(&mut rawc, &ns).await.unwrap_or_default();
    let kept = |key: &str, token: i64| {
        keys.iter()
            .any(|(k, rev, _)| (k == key || *k == format!("{ns}{key}")) && *rev == token)
    };
    // A loss a holder reports is recorded as a loss (its hold ends at the loss,
    // not at the kill below), and fails the scenario with what was lost, when,
    // and whether etcd still had the holder's key after the steps (its lease
    // alive: a loss the client declared while etcd kept the hold) or not (its
    // lease expired: a session lost locally is renewed no more, so this does
    // not say whether etcd kept it until the loss).
    let mut held = 0;
    let rloss = g.loss();
    let rkept = kept(&g.key(), g.fencing_token());
    if g.is_held() && rloss.is_none() && rkept {
        held += 1;
    } else {
        let when = rloss
            .map(|l| s.when(instant_to_mono_ns(l.at)))
            .unwrap_or_default();
        o.fail(format!(
            "the Rust holder lost its hold: {rloss:?} {when}; its key {} in etcd after the steps",
            if rkept {
                "still there with its token (etcd still kept its lease)"
            } else {
                "gone"
            }
        ));
    }
    for pr in &mut procs {
        let lost = pr.child.expect("LOST", Duration::from_millis(100)).await;
        let on_etcd = kept(&pr.key, pr.token);
        match lost {
            Ok(line) => {
                // The stale write the holder tries after its loss belongs to its hold.
                let stale = match pr.child.expect("STALE", Duration::from_secs(5)).await {
                    Ok(st) => crate::parse_put_line(&st, pr.token).ok().map(|(_, op)| op),
                    Err(_) => None,
                };
                let loss = loss_of_line(&line);
                o.fail(format!(
                    "the {} holder (token {}) reported its hold lost: {} {}; its key {} in etcd after the steps (line {line:?})",
                    pr.lang.name(),
                    pr.token,
                    loss.as_ref().map(|l| l.reason.as_str()).unwrap_or("?"),
                    loss.as_ref().map(|l| s.when(l.at_ns)).unwrap_or_default(),
                    // A session lost locally is renewed no more: its lease
                    // expires a TTL later whether or not etcd kept it until the loss.
                    if on_etcd { "still there with its token (etcd still kept its lease)" } else { "gone (its lease expired, at the latest a TTL after the loss)" }
                ));
                match loss {
                    Some(l) => pr.lost = Some((l, stale)),
                    None => o.fail(format!("malformed LOST line from the {} holder: {line:?}", pr.lang.name())),
                }
            }
            Err(_) if on_etcd => held += 1,
            Err(_) => o.fail(format!(
                "the {} holder (token {}) reported no loss but its key is gone from etcd after the steps",
                pr.lang.name(),
                pr.token
            )),
        }
    }
    let call = clock_monotonic_ns();
    let w = g
        .put(resource_key(&rlock), g.fencing_token().to_string())
        .await;
    o.expect(w.is_ok(), || {
        format!("the Rust holder's guarded write after the steps: {w:?}")
    });
    rops.push(crate::GuardedOp {
        write: true,
        call_ns: call,
        ret_ns: Some(clock_monotonic_ns()),
        value: g.fencing_token(),
        result: crate::OpResult::of(&w),
    });

    // The holders end; each waiter takes over.
    let mut waiters = Vec::new();
    for mut pr in procs {
        let end = clock_monotonic_ns();
        pr.child.kill9().await;
        // A holder that reported a loss held until the loss; one that did
        // not, until its kill.
        let mut ops = vec![pr.put];
        let (ended_ns, loss) = match pr.lost {
            Some((l, stale)) => {
                ops.extend(stale);
                (l.at_ns.min(end), Some(l))
            }
            None => (end, None),
        };
        checker.record(Hold {
            lock: lock_of(pr.lang),
            token: pr.token,
            acquired_ns: pr.acquired_ns,
            ended_ns,
            client: format!("{}-holder", pr.lang.name().to_lowercase()),
            loss,
            ops,
            ..Default::default()
        });
        waiters.push((pr.lang, pr.token, end, pr.waiter));
    }
    let end = clock_monotonic_ns();
    let rloss = g.loss();
    let _ = g.unlock().await;
    checker.record(Hold {
        lock: rlock.clone(),
        token: g.fencing_token(),
        acquired_ns: racq,
        ended_ns: rloss
            .map(|l| instant_to_mono_ns(l.at).min(end))
            .unwrap_or(end),
        client: "rust-holder".into(),
        loss: rloss.map(|l| LossInfo {
            reason: l.reason.name().into(),
            at_ns: instant_to_mono_ns(l.at),
            reported_ns: end,
        }),
        invoked_ns: inv,
        ops: rops,
    });
    waiters.push((HolderLang::Rust, g.fencing_token(), end, rwaiter));
    let mut max_take = 0i64;
    let mut granted = 0;
    for (lang, token, end, w) in waiters {
        match tokio::time::timeout(Duration::from_secs(TTL as u64 + 10), w).await {
            Ok(Ok(Ok((gw, at)))) => {
                granted += 1;
                o.acquisitions += 1;
                let ms = ms_between(end, at);
                max_take = max_take.max(ms);
                o.expect(ms <= TTL * 1000 + 1000, || format!("the waiter behind the {} holder took {ms} ms after its end (bound TTL + 1 s)", lang.name()));
                o.expect(gw.fencing_token() > token, || {
                    format!(
                        "the waiter behind the {} holder got token {} <= {token}",
                        lang.name(),
                        gw.fencing_token()
                    )
                });
                if let Err(e) = release(
                    &checker,
                    gw,
                    at,
                    &format!("waiter-{}", lang.name().to_lowercase()),
                )
                .await
                {
                    o.fail(e);
                }
            }
            other => o.fail(format!(
                "the waiter behind the {} holder: {other:?}",
                lang.name()
            )),
        }
    }
    hc.close().await;
    wc.close().await;
    let last_version = versions(&etcd, 0)
        .map(|v| format!("{} (cluster {})", v.0, v.1))
        .unwrap_or_default();
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.expect(r.losses == 0, || {
        // Which holds, why and when (the holders' own losses are named above too).
        let lost: Vec<String> = checker
            .holds()
            .iter()
            .filter_map(|h| {
                let l = h.loss.as_ref()?;
                Some(format!(
                    "{} on {} (token {}): {} {}",
                    h.client,
                    h.lock,
                    h.token,
                    l.reason,
                    s.when(l.at_ns)
                ))
            })
            .collect();
        format!(
            "{} holds lost (every lease should live through the steps): {}",
            r.losses,
            lost.join("; ")
        )
    });
    let lost_calls: u64 = perrs
        .iter()
        .filter(|(k, _)| k.ends_with("LockLost"))
        .map(|(_, n)| n)
        .sum();
    o.expect(lost_calls == 0, || {
        format!("prober calls ended LockLost: {perrs:?}")
    });
    o.expect(held == 5 && granted == 5, || {
        format!("{held}/5 holds kept, {granted}/5 waiters granted")
    });
    o.figure = format!(
        "{} members stopped with SIGTERM and restarted one by one ({} the leader; etcd {first_version} -> {last_version}{}) in {:.1} s: stop <= {} ms, healthy with a leader <= {} ms after the SIGTERM; {held}/5 holders (Rust, Python, Java, Node, C) kept their holds (no loss, key and token unchanged), then {granted}/5 waiters took over <= {max_take} ms after the holder ended; prober: {probes} locks, calls <= {max_lock} ms (lock, bound 2000) / <= {max_other} ms (put, unlock, bound 1000), errors {perrs:?}; workload: {} acquisitions, {wl_losses} losses, errors: {}; {} acquisitions; {}",
        s.done,
        s.leaders,
        if s.cluster_versions.is_empty() { String::new() } else { format!(", cluster version {}", s.cluster_versions.join(", ")) },
        took.as_secs_f64(),
        s.max_stop_ms,
        s.max_back_ms,
        counters.acquisitions.load(Ordering::Relaxed),
        counters.errors_summary(),
        o.acquisitions,
        r.summary()
    );
    drop(etcd);
    o
}

/// Scenario 34: every member restarted one by one with SIGTERM (graceful).
pub async fn rolling_restart(p: &Profile) -> Outcome {
    rolling(p, 34, "rolling-restart", None, || Ok(Step::restart_each(3))).await
}

/// Scenario 35: a rolling upgrade 3.4 (Debian's) -> 3.5, member by member, until the
/// cluster version is 3.5.
pub async fn rolling_upgrade(p: &Profile) -> Outcome {
    upgrade(p, 35, "rolling-upgrade-3.4-3.5", None, UPGRADE_VERSIONS[0]).await
}

/// Scenario 36: a rolling upgrade 3.5 -> 3.6 of a cluster created on 3.5 (3.6 needs the
/// whole cluster at 3.5 first). A cluster created on 3.4 and upgraded to
/// 3.5.35 breaks when its first member starts 3.6.16: see the README.
pub async fn rolling_upgrade_36(p: &Profile) -> Outcome {
    upgrade(
        p,
        36,
        "rolling-upgrade-3.5-3.6",
        Some(UPGRADE_VERSIONS[0]),
        UPGRADE_VERSIONS[1],
    )
    .await
}

/// A rolling upgrade from `from` (None: Debian's 3.4) to `to`.
async fn upgrade(
    p: &Profile,
    id: u32,
    name: &'static str,
    from: Option<&'static str>,
    to: &'static str,
) -> Outcome {
    let start = match from.map(etcd_build).transpose() {
        Ok(b) => b.unwrap_or_else(|| PathBuf::from(ETCD_34)),
        Err(e) => {
            let mut o = Outcome::new(id, name);
            o.fail(e);
            return o;
        }
    };
    rolling(p, id, name, Some(start), move || {
        let bin = etcd_build(to)?;
        let minor = if to.starts_with("3.5") { "3.5" } else { "3.6" };
        Ok((0..3)
            .map(|member| Step {
                member,
                bin: Some(bin.clone()),
                cluster_version: (member == 2).then_some(minor),
            })
            .collect())
    })
    .await
}
