//! 19: a holder whose member is cut off while it holds, one holder per
//! language, each with a waiter on the majority side.

use super::*;

/// What [`drive_waiter`] ends with: the grant and its time, or why none; the
/// last invocation; the codes of the waits that ended early.
type WaiterEnd = (
    Result<(etcdlock::Guard, u64), String>,
    u64,
    Vec<&'static str>,
);

/// A waiter of this process on `lock` (already spawned as `first`, invoked
/// at `first_inv`) driven until it holds or `deadline`: its own session may
/// end while the majority elects a leader (its keep-alives go through that
/// election too): it then fails with LockLost at once, as it must, and waits
/// again. Returns (the grant and its time, or why none; the last invocation;
/// the codes of the waits that ended early).
fn drive_waiter(
    wc: Client,
    lock: &'static str,
    first: tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>,
    first_inv: u64,
    deadline: tokio::time::Instant,
) -> tokio::task::JoinHandle<WaiterEnd> {
    tokio::spawn(async move {
        let (mut waiter, mut winv, mut retries) = (first, first_inv, Vec::new());
        let won = loop {
            match tokio::time::timeout_at(deadline, &mut waiter).await {
                Ok(Ok(Ok(x))) => break Ok(x),
                Ok(Ok(Err(e))) if tokio::time::Instant::now() < deadline => {
                    retries.push(e.code().name());
                    waiter = spawn_waiter(wc.clone(), lock, "mutex");
                    winv = clock_monotonic_ns();
                }
                Ok(Ok(Err(e))) => break Err(e.to_string()),
                Ok(Err(e)) => break Err(e.to_string()),
                Err(_) => {
                    waiter.abort();
                    break Err("no grant within 4xTTL".to_string());
                }
            }
        };
        (won, winv, retries)
    })
}

/// The lock a holder process in `lang` takes in scenario 19 (the in-process
/// Rust holder takes `P`).
fn process_lock(lang: HolderLang) -> &'static str {
    match lang {
        HolderLang::Rust => "P-rust",
        HolderLang::Python => "P-python",
        HolderLang::Java => "P-java",
        HolderLang::Node => "P-node",
        HolderLang::C => "P-c",
    }
}

/// A holder process of scenario 19 after its hold and guarded write, with the
/// waiter queued behind it.
struct ProcHolder {
    lang: HolderLang,
    child: ChildProc,
    token: i64,
    acquired_ns: u64,
    put: crate::GuardedOp,
    waiter: Option<tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>>,
    winv: u64,
}

/// Scenario 19: a holder whose member is cut off while it holds. The
/// holder's client talks only to that member; a waiter talks only to a member
/// of the majority. The holder must see its loss before the waiter acquires.
/// Each round has five holders on that member, one per language: this
/// process (Rust, lock `P`) and a holder process in Python, Java, Node and C
/// (locks `P-python`, ...), each with its own waiter on the majority side.
pub async fn holder_member_partitioned(p: &Profile) -> Outcome {
    let mut o = Outcome::new(19, "holder-member-partitioned");
    o.languages = HolderLang::ALL.iter().map(|l| l.name()).collect();
    let mut cl = match start_cluster() {
        Ok(c) => c,
        Err(e) => {
            o.fail(format!("partition mechanism: {e}"));
            return o;
        }
    };
    let eps = cl.eps.clone();
    let ns = unique_ns("part19");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Arc::new(Checker::new());
    let (mut detect, mut gaps, mut waits, mut waiter_retries) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Per language: (longest loss detection after the cut, smallest gap before the waiter's grant), ms.
    let mut per_lang: BTreeMap<&'static str, (i64, i64)> = BTreeMap::new();
    let mut stale_refused = 0u32;
    'rounds: for round in 0..p.rounds {
        let Some(leader) = await_leader(&eps, &[0, 1, 2], Duration::from_secs(10)).await else {
            o.fail(format!("round {round}: no leader"));
            break;
        };
        // Rounds alternate: the holder's member is the leader, then a follower.
        let x = if round % 2 == 0 {
            leader
        } else {
            (leader + 1) % 3
        };
        let y = (0..3).find(|i| *i != x).unwrap_or(0);
        let o_x = opts(&[eps[x].clone()], &ns, TTL, Duration::from_secs(1));
        let o_y = opts(&[eps[y].clone()], &ns, TTL, Duration::from_secs(1));
        let (Ok(hc), Ok(wc)) = (Client::connect(o_x).await, Client::connect(o_y).await) else {
            o.fail(format!("round {round}: connect"));
            break;
        };
        // The holder processes, all started first (a JVM takes a while), each
        // knowing only member x, then each one's hold, write and waiter.
        let mut children = Vec::new();
        for lang in HolderLang::ALL
            .into_iter()
            .filter(|l| *l != HolderLang::Rust)
        {
            let mut spec = holder_spec(&[eps[x].clone()], &ns, 1);
            spec["lock"] = json!(process_lock(lang));
            spec["request_timeout_ms"] = json!(1000);
            match spawn_holder(lang, spec) {
                Ok(c) => children.push((lang, c)),
                Err(e) => {
                    o.fail(format!("round {round}: {e}"));
                    for (_, mut c) in children {
                        c.kill9().await;
                    }
                    break 'rounds;
                }
            }
        }
        let mut procs = Vec::new();
        for (lang, mut child) in children {
            match queue_behind_on(&mut child, &wc, &mut rawc, &ns, "mutex", process_lock(lang))
                .await
            {
                Ok((waiter, token, acquired_ns, _key, put)) => {
                    o.acquisitions += 1;
                    procs.push(ProcHolder {
                        lang,
                        child,
                        token,
                        acquired_ns,
                        put,
                        waiter: Some(waiter),
                        winv: clock_monotonic_ns(),
                    })
                }
                Err(e) => {
                    o.fail(format!("round {round}: {} holder: {e}", lang.name()));
                    child.kill9().await;
                }
            }
        }
        if !o.passed() {
            for mut h in procs {
                h.child.kill9().await;
            }
            break;
        }
        let inv = clock_monotonic_ns();
        let g = match hc.lock("P").await {
            Ok(g) => g,
            Err(e) => {
                o.fail(format!("round {round}: holder lock: {e}"));
                break;
            }
        };
        let acq = clock_monotonic_ns();
        o.acquisitions += 1;
        let call = clock_monotonic_ns();
        let w = g
            .put(resource_key("P"), g.fencing_token().to_string())
            .await;
        let mut ops = vec![crate::GuardedOp {
            write: true,
            call_ns: call,
            ret_ns: Some(clock_monotonic_ns()),
            value: g.fencing_token(),
            result: crate::OpResult::of(&w),
        }];
        let waiter = spawn_waiter(wc.clone(), "P", "mutex");
        let winv = clock_monotonic_ns();
        if let Err(e) = cl.parts.isolate(x) {
            o.fail(e);
            break;
        }
        o.faults += 1;
        let cut_ns = clock_monotonic_ns();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(4 * TTL as u64);
        let rust_waiter = drive_waiter(wc.clone(), "P", waiter, winv, deadline);
        let proc_waiters: Vec<_> = procs
            .iter_mut()
            .map(|h| {
                drive_waiter(
                    wc.clone(),
                    process_lock(h.lang),
                    h.waiter.take().expect("waiter"),
                    h.winv,
                    deadline,
                )
            })
            .collect();
        let loss = tokio::time::timeout(Duration::from_secs(3 * TTL as u64), g.wait_lost()).await;
        let rep = clock_monotonic_ns();
        let (won, winv, retries) = rust_waiter
            .await
            .unwrap_or_else(|e| (Err(e.to_string()), winv, Vec::new()));
        waiter_retries.extend(retries);
        let (loss_at, lost) = match loss {
            Ok(Some(l)) => (instant_to_mono_ns(l.at), Some(l)),
            _ => (rep, None),
        };
        match &lost {
            Some(_) => detect.push(ms_between(cut_ns, rep)),
            None => o.fail(format!(
                "round {round}: the cut-off holder saw no loss within 3xTTL"
            )),
        }
        // The stale holder's guarded write after the waiter took over: refused.
        let call = clock_monotonic_ns();
        let stale = g
            .put(resource_key("P"), g.fencing_token().to_string())
            .await;
        o.expect(stale.is_err(), || {
            format!("round {round}: the cut-off holder's write was accepted")
        });
        stale_refused += stale.is_err() as u32;
        ops.push(crate::GuardedOp {
            write: true,
            call_ns: call,
            ret_ns: Some(clock_monotonic_ns()),
            value: g.fencing_token(),
            result: crate::OpResult::of(&stale),
        });
        checker.record(Hold {
            lock: "P".into(),
            token: g.fencing_token(),
            acquired_ns: acq,
            ended_ns: loss_at,
            client: format!("holder-m{x}-r{round}"),
            loss: lost.map(|l| LossInfo {
                reason: l.reason.name().into(),
                at_ns: loss_at,
                reported_ns: rep,
            }),
            invoked_ns: inv,
            ops,
        });
        let mut granted = Vec::new();
        match won {
            Ok((gw, at)) => {
                o.acquisitions += 1;
                waits.push(ms_between(cut_ns, at));
                gaps.push(ms_between(loss_at, at));
                let e = per_lang.entry("Rust").or_insert((i64::MIN, i64::MAX));
                *e = (
                    e.0.max(ms_between(cut_ns, rep)),
                    e.1.min(ms_between(loss_at, at)),
                );
                granted.push((gw, at, winv, y));
            }
            Err(e) => o.fail(format!(
                "round {round}: the majority-side waiter did not acquire: {e}"
            )),
        }
        // The holder processes: each saw its loss (the last instant is_held was
        // true, and when it turned false), then tried its stale write.
        for (mut h, w) in procs.into_iter().zip(proc_waiters) {
            let name = h.lang.name();
            let lost = h
                .child
                .expect("LOST", Duration::from_secs(4 * TTL as u64))
                .await;
            let stale = h.child.expect("STALE", Duration::from_secs(10)).await;
            let (won, winv, retries) = w
                .await
                .unwrap_or_else(|e| (Err(e.to_string()), 0, Vec::new()));
            waiter_retries.extend(retries);
            h.child.kill9().await;
            let (lost, stale) = match (lost, stale.and_then(|s| crate::parse_put_line(&s, h.token)))
            {
                (Ok(l), Ok(s)) => (l, s),
                other => {
                    o.fail(format!("round {round}: the {name} holder did not report its loss and stale write: {other:?}"));
                    if let Ok((gw, _)) = won {
                        let _ = gw.unlock().await;
                    }
                    continue;
                }
            };
            let last_true: u64 = lost.get(2).and_then(|s| s.parse().ok()).unwrap_or(u64::MAX);
            let turned: u64 = lost.get(3).and_then(|s| s.parse().ok()).unwrap_or(u64::MAX);
            o.expect(stale.0 != "ok", || {
                format!("round {round}: the cut-off {name} holder's write was accepted")
            });
            stale_refused += (stale.0 != "ok") as u32;
            detect.push(ms_between(cut_ns, turned));
            checker.record(Hold {
                lock: process_lock(h.lang).into(),
                token: h.token,
                acquired_ns: h.acquired_ns,
                ended_ns: last_true,
                client: format!("{}-holder-m{x}-r{round}", name.to_lowercase()),
                loss: Some(LossInfo {
                    reason: crate::canonical_loss_reason(&lost[1]),
                    at_ns: last_true,
                    reported_ns: turned,
                }),
                ops: vec![h.put, stale.1],
                ..Default::default()
            });
            match won {
                Ok((gw, at)) => {
                    o.acquisitions += 1;
                    waits.push(ms_between(cut_ns, at));
                    gaps.push(ms_between(last_true, at));
                    let e = per_lang.entry(name).or_insert((i64::MIN, i64::MAX));
                    *e = (e.0.max(ms_between(cut_ns, turned)), e.1.min(ms_between(last_true, at)));
                    granted.push((gw, at, winv, y));
                }
                Err(e) => o.fail(format!("round {round}: the majority-side waiter behind the {name} holder did not acquire: {e}")),
            }
        }
        for (gw, at, winv, y) in granted {
            let mut h = Hold {
                lock: gw.name().to_string(),
                token: gw.fencing_token(),
                acquired_ns: at,
                client: format!("waiter-m{y}-r{round}"),
                invoked_ns: winv,
                ..Default::default()
            };
            let end = clock_monotonic_ns();
            let l = gw.loss();
            let _ = gw.unlock().await;
            h.ended_ns = l.map(|l| instant_to_mono_ns(l.at).min(end)).unwrap_or(end);
            checker.record(h);
        }
        let _ = cl.parts.heal();
        let _ = g.unlock().await;
        hc.close().await;
        wc.close().await;
    }
    settle(&mut o, &eps, &mut rawc).await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    let (mind, maxd) = (
        gaps.iter().copied().min().unwrap_or(-1),
        detect.iter().copied().max().unwrap_or(-1),
    );
    o.expect(gaps.iter().all(|g| *g > 0), || {
        format!("a waiter acquired before the cut-off holder's loss: gaps {gaps:?} ms")
    });
    let holders = 5 * o.faults as usize;
    o.expect(gaps.len() == holders && detect.len() == holders, || {
        format!(
            "{} grants and {} losses seen of {holders} holds",
            gaps.len(),
            detect.len()
        )
    });
    o.figure = format!(
        "{} rounds (holder's member: leader, follower, ...), 5 holders a round (Rust in-process, Python, Java, Node, C processes): the holders saw their loss <= {maxd} ms after the cut; the majority-side waiters acquired {}-{} ms after the cut, >= {mind} ms after the holder's hold had ended (per language, loss seen <= / gap >= ms: {}; waits that ended early and were retried: {waiter_retries:?}); {stale_refused}/{holders} stale writes refused; {}",
        o.faults,
        waits.iter().copied().min().unwrap_or(-1),
        waits.iter().copied().max().unwrap_or(-1),
        per_lang.iter().map(|(l, (d, g))| format!("{l} {d}/{g}")).collect::<Vec<_>>().join(", "),
        r.summary()
    );
    drop(cl);
    o
}
