//! A lock holder process (Rust, Python, Java, Node or C) paused with SIGSTOP or killed with
//! SIGKILL while it holds; a waiter must take over in time and the holder's
//! stale writes must be refused.

use super::*;

pub(super) fn holder_spec(eps: &[String], ns: &str, rounds: u32) -> serde_json::Value {
    json!({"mode": "holder", "endpoints": eps, "ns": ns, "ttl": TTL, "lock": "L", "rounds": rounds})
}

/// The waiter's kind behind a holder of `kind`: a writer behind a reader, else the same kind.
pub(super) fn waiter_kind(kind: &str) -> &str {
    if kind == "read" {
        "writer"
    } else {
        kind
    }
}

pub(super) fn parse_hold(parts: &[String]) -> Option<Hold> {
    Hold::from_json(&parts[1..].join(" "))
}

/// A holder process, a waiter of ours queued behind it, and the fault's moment.
pub(super) struct HolderRound {
    pub(super) waiter: tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>,
    pub(super) token: i64,
    pub(super) acquired_ns: u64,
    pub(super) key: String,
    pub(super) at_ns: u64,
    /// The holder's guarded write under the hold (its `PUT` line).
    pub(super) put: crate::GuardedOp,
}

/// Start of a holder round: the holder has taken `L` (its `HELD` line read) and
/// written under it (its `PUT` line: the write must have been applied); queue a
/// waiter of this process behind it.
pub(super) async fn queue_behind(
    child: &mut ChildProc,
    wc: &Client,
    rawc: &mut etcd_client::Client,
    ns: &str,
    kind: &str,
) -> Result<
    (
        tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>,
        i64,
        u64,
        String,
        crate::GuardedOp,
    ),
    String,
> {
    queue_behind_on(child, wc, rawc, ns, kind, "L").await
}

/// [`queue_behind`] on the lock `lock`.
pub(super) async fn queue_behind_on(
    child: &mut ChildProc,
    wc: &Client,
    rawc: &mut etcd_client::Client,
    ns: &str,
    kind: &str,
    lock: &str,
) -> Result<
    (
        tokio::task::JoinHandle<etcdlock::Result<(etcdlock::Guard, u64)>>,
        i64,
        u64,
        String,
        crate::GuardedOp,
    ),
    String,
> {
    let held = child.expect("HELD", Duration::from_secs(20)).await?;
    let token: i64 = held[1].parse().unwrap_or(0);
    let acquired_ns: u64 = held[2].parse().unwrap_or(0);
    let key = held.get(3).cloned().unwrap_or_default();
    let (name, put) =
        crate::parse_put_line(&child.expect("PUT", Duration::from_secs(10)).await?, token)?;
    if name != "ok" || put.result != crate::OpResult::Ok {
        return Err(format!(
            "the holder's guarded put under a fresh hold failed: {name} ({})",
            put.result.name()
        ));
    }
    let waiter = spawn_waiter(wc.clone(), lock, waiter_kind(kind));
    if await_key_count(rawc, &format!("{ns}{lock}/"), 2, Duration::from_secs(10))
        .await
        .is_none()
    {
        waiter.abort();
        return Err("waiter never queued".into());
    }
    Ok((waiter, token, acquired_ns, key, put))
}

/// The waiter of a round takes the lock within TTL + 1 s of the fault, with a
/// higher token than the holder's.
pub(super) async fn waiter_takes_over(
    r: HolderRound,
    what: &str,
    errs: &mut Vec<String>,
) -> Option<(etcdlock::Guard, u64, u64)> {
    match tokio::time::timeout(Duration::from_secs(TTL as u64 + 10), r.waiter).await {
        Ok(Ok(Ok((g, at)))) => {
            let waited = at.saturating_sub(r.at_ns);
            if waited > TTL_NS + 1_000_000_000 {
                errs.push(format!(
                    "waiter acquired {:.2} s after {what}",
                    secs(waited)
                ));
            }
            if g.fencing_token() <= r.token {
                errs.push(format!(
                    "token {} not above the holder's {}",
                    g.fencing_token(),
                    r.token
                ));
            }
            Some((g, at, waited))
        }
        other => {
            errs.push(format!("waiter did not acquire: {other:?}"));
            None
        }
    }
}

pub(super) fn errs_to_result(errs: Vec<String>) -> Result<(), String> {
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

/// SIGSTOP the holder process for 2×TTL while a waiter of ours is queued: the
/// waiter must take over within TTL + 1 s with a higher token, and once resumed
/// the holder must report the loss and have its stale writes refused (a guarded
/// put, and a raw compare on its key's create_revision). One holder process
/// serves every round.
pub(super) struct HolderPause<'a> {
    pub(super) lang: HolderLang,
    pub(super) kind: &'static str,
    pub(super) child: ChildProc,
    pub(super) wc: &'a Client,
    pub(super) rawc: &'a mut etcd_client::Client,
    pub(super) checker: &'a Checker,
    pub(super) ns: &'a str,
    pub(super) round: Result<HolderRound, String>,
    pub(super) acquisitions: u64,
    pub(super) done: u32,
    pub(super) max_wait: u64,
    pub(super) reported: u32,
    pub(super) stale_ok: u32,
    pub(super) raw_ok: u32,
    pub(super) min_gap: i64,
}

impl<'a> HolderPause<'a> {
    pub(super) fn new(
        lang: HolderLang,
        kind: &'static str,
        child: ChildProc,
        wc: &'a Client,
        rawc: &'a mut etcd_client::Client,
        checker: &'a Checker,
        ns: &'a str,
    ) -> Self {
        HolderPause {
            lang,
            kind,
            child,
            wc,
            rawc,
            checker,
            ns,
            round: Err("no round".into()),
            acquisitions: 0,
            done: 0,
            max_wait: 0,
            reported: 0,
            stale_ok: 0,
            raw_ok: 0,
            min_gap: i64::MAX,
        }
    }
}

impl Failpoint for HolderPause<'_> {
    fn name(&self) -> &'static str {
        "holder SIGSTOP"
    }
    async fn inject(&mut self, _k: u32) -> Injected {
        match queue_behind(&mut self.child, self.wc, self.rawc, self.ns, self.kind).await {
            Ok((waiter, token, acquired_ns, key, put)) => {
                self.acquisitions += 1;
                let at_ns = clock_monotonic_ns();
                self.child.signal(libc::SIGSTOP);
                self.round = Ok(HolderRound {
                    waiter,
                    token,
                    acquired_ns,
                    key,
                    at_ns,
                    put,
                });
                Injected::new(1, Duration::from_nanos(2 * TTL_NS))
            }
            Err(e) => {
                self.round = Err(e);
                Injected::new(0, Duration::ZERO)
            }
        }
    }
    async fn heal(&mut self, k: u32) -> Result<(), String> {
        let r = std::mem::replace(&mut self.round, Err("no round".into()))?;
        let (stop_ns, token, acquired_ns, key, put) = (
            r.at_ns,
            r.token,
            r.acquired_ns,
            r.key.clone(),
            r.put.clone(),
        );
        let mut errs = Vec::new();
        let took = waiter_takes_over(r, "SIGSTOP", &mut errs).await;
        // Let the holder run into its stale state.
        self.child.signal(libc::SIGCONT);
        let Some((g, at, waited)) = took else {
            return errs_to_result(errs);
        };
        self.acquisitions += 1;
        self.max_wait = self.max_wait.max(waited);
        let lost = self.child.expect("LOST", Duration::from_secs(10)).await;
        let stale = self.child.expect("STALE", Duration::from_secs(10)).await;
        // Rust holders send the raw compare themselves and print their hold (its
        // guarded writes included); for the others the parent sends the same
        // compare with the holder's key and token, and records the hold.
        let (rawtx, hold) = if self.lang == HolderLang::Rust {
            (
                self.child.expect("RAWTXN", Duration::from_secs(20)).await,
                self.child.expect("HOLD", Duration::from_secs(10)).await,
            )
        } else {
            let txn = etcd_client::Txn::new()
                .when([etcd_client::Compare::create_revision(
                    key,
                    etcd_client::CompareOp::Equal,
                    token,
                )])
                .and_then([etcd_client::TxnOp::put(
                    format!("{}{}", self.ns, resource_key("L")),
                    token.to_string(),
                    None,
                )]);
            let r = self
                .rawc
                .txn(txn)
                .await
                .map(|r| vec!["RAWTXN".to_string(), r.succeeded().to_string()])
                .map_err(|e| e.to_string());
            (r, Ok(Vec::new()))
        };
        match (lost, stale, rawtx, hold) {
            (Ok(lost), Ok(stale), Ok(rawtx), Ok(hold)) => {
                self.reported += 1;
                let lost_at: u64 = lost[2].parse().unwrap_or(u64::MAX);
                self.min_gap = self.min_gap.min(ms_between(lost_at, at));
                if stale.get(1).map(|s| s.as_str()) == Some("ok") {
                    self.stale_ok += 1;
                }
                if rawtx[1] == "true" {
                    self.raw_ok += 1;
                }
                if self.lang == HolderLang::Rust {
                    match parse_hold(&hold) {
                        Some(h) => self.checker.record(h),
                        None => errs.push(format!("bad HOLD line {hold:?}")),
                    }
                } else {
                    // The other languages: the hold ends at the last moment is_held
                    // said true; its guarded writes (PUT, STALE) go into the history.
                    let rep: u64 = lost.get(3).and_then(|s| s.parse().ok()).unwrap_or(lost_at);
                    let mut ops = vec![put];
                    match crate::parse_put_line(&stale, token) {
                        Ok((_, op)) => ops.push(op),
                        Err(e) => errs.push(e),
                    }
                    self.checker.record(Hold {
                        lock: "L".into(),
                        token,
                        acquired_ns,
                        ended_ns: lost_at,
                        client: format!("{}-child-round{k}", self.lang.name().to_lowercase()),
                        loss: Some(LossInfo {
                            reason: crate::canonical_loss_reason(&lost[1]),
                            at_ns: lost_at,
                            reported_ns: rep,
                        }),
                        ops,
                        ..Default::default()
                    });
                    if rep <= stop_ns + TTL_NS {
                        errs.push(format!(
                            "the {} holder saw the loss before it was resumed? (its last true {} ms, its false {} ms after SIGSTOP; line {lost:?})",
                            self.lang.name(),
                            ms_between(stop_ns, lost_at),
                            ms_between(stop_ns, rep)
                        ));
                    }
                }
            }
            other => errs.push(format!("resumed holder did not report: {other:?}")),
        }
        if let Err(e) = release(self.checker, g, at, "parent-waiter").await {
            errs.push(e);
        }
        self.done += 1;
        errs_to_result(errs)
    }
}

/// kill -9 of the holder process while a waiter of ours is queued: the waiter
/// must take over within TTL + 1 s with a higher token. A new holder process
/// each round.
pub(super) struct HolderKill<'a> {
    pub(super) lang: HolderLang,
    pub(super) kind: &'static str,
    pub(super) eps: &'a [String],
    pub(super) wc: &'a Client,
    pub(super) rawc: &'a mut etcd_client::Client,
    pub(super) checker: &'a Checker,
    pub(super) ns: &'a str,
    pub(super) round: Result<HolderRound, String>,
    pub(super) acquisitions: u64,
    pub(super) done: u32,
    pub(super) max_wait: u64,
}

impl<'a> HolderKill<'a> {
    pub(super) fn new(
        lang: HolderLang,
        kind: &'static str,
        eps: &'a [String],
        wc: &'a Client,
        rawc: &'a mut etcd_client::Client,
        checker: &'a Checker,
        ns: &'a str,
    ) -> Self {
        HolderKill {
            lang,
            kind,
            eps,
            wc,
            rawc,
            checker,
            ns,
            round: Err("no round".into()),
            acquisitions: 0,
            done: 0,
            max_wait: 0,
        }
    }
}

impl Failpoint for HolderKill<'_> {
    fn name(&self) -> &'static str {
        "holder kill -9"
    }
    async fn inject(&mut self, k: u32) -> Injected {
        let mut spec = holder_spec(self.eps, self.ns, 1);
        spec["kind"] = json!(self.kind);
        let mut child = match spawn_holder(self.lang, spec) {
            Ok(c) => c,
            Err(e) => {
                self.round = Err(e);
                return Injected::new(0, Duration::ZERO);
            }
        };
        match queue_behind(&mut child, self.wc, self.rawc, self.ns, self.kind).await {
            Ok((waiter, token, acquired_ns, key, put)) => {
                self.acquisitions += 1;
                let at_ns = clock_monotonic_ns();
                child.kill9().await;
                self.checker.record(Hold {
                    lock: "L".into(),
                    token,
                    acquired_ns,
                    ended_ns: at_ns,
                    client: format!("{}-child-round{k}", self.lang.name().to_lowercase()),
                    loss: None,
                    ops: vec![put.clone()],
                    ..Default::default()
                });
                self.round = Ok(HolderRound {
                    waiter,
                    token,
                    acquired_ns,
                    key,
                    at_ns,
                    put,
                });
                Injected::new(1, Duration::ZERO)
            }
            Err(e) => {
                child.kill9().await;
                self.round = Err(e);
                Injected::new(0, Duration::ZERO)
            }
        }
    }
    async fn heal(&mut self, _k: u32) -> Result<(), String> {
        let r = std::mem::replace(&mut self.round, Err("no round".into()))?;
        let mut errs = Vec::new();
        if let Some((g, at, waited)) = waiter_takes_over(r, "kill -9", &mut errs).await {
            self.acquisitions += 1;
            self.max_wait = self.max_wait.max(waited);
            if let Err(e) = release(self.checker, g, at, "parent-waiter").await {
                errs.push(e);
            }
            self.done += 1;
        }
        errs_to_result(errs)
    }
}

/// 2. Holder process SIGSTOPped for 2×TTL, repeatedly (holder in any language).
pub async fn holder_sigstop(p: &Profile, lang: HolderLang) -> Outcome {
    let mut o = Outcome::new(
        2,
        match lang {
            HolderLang::Rust => "holder-sigstop",
            HolderLang::Python => "holder-sigstop-python",
            HolderLang::Java => "holder-sigstop-java",
            HolderLang::Node => "holder-sigstop-node",
            HolderLang::C => "holder-sigstop-c",
        },
    );
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("stop");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Checker::new();
    let rounds = p.rounds;
    let child = match spawn_holder(lang, holder_spec(&eps, &ns, rounds)) {
        Ok(c) => c,
        Err(e) => {
            o.fail(e);
            o.figure = "not run".into();
            return o;
        }
    };
    let wc = Client::connect(opts(&eps, &ns, 10, Duration::from_secs(2)))
        .await
        .expect("waiter connect");
    let mut fp = HolderPause::new(lang, "mutex", child, &wc, &mut rawc, &checker, &ns);
    let r = run_rounds(&mut fp, Duration::ZERO, rounds).await;
    o.faults += r.faults;
    o.acquisitions += fp.acquisitions;
    for f in r.failures {
        o.fail(f);
    }
    if o.passed() {
        if let Err(e) = fp.child.expect("DONE", Duration::from_secs(20)).await {
            o.fail(e);
        }
    }
    fp.child.kill9().await;
    let HolderPause {
        done,
        max_wait,
        reported,
        stale_ok,
        raw_ok,
        min_gap,
        ..
    } = fp;
    wc.close().await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.expect(done == rounds, || {
        format!("{done}/{rounds} rounds completed")
    });
    o.expect(stale_ok + raw_ok == 0, || {
        format!("{stale_ok} guarded and {raw_ok} raw stale writes accepted")
    });
    o.expect(reported == rounds, || {
        format!("{reported}/{rounds} losses reported")
    });
    o.figure = format!(
        "{done} rounds, {} stale writes accepted (guarded put {stale_ok}, raw compare {raw_ok}), max waiter acquire {:.2} s after SIGSTOP (TTL {TTL} s, bound {} s), {reported}/{rounds} losses reported, each hold ended >= {} ms before the waiter acquired; {}",
        stale_ok + raw_ok,
        secs(max_wait),
        TTL + 1,
        if min_gap == i64::MAX { 0 } else { min_gap },
        r.summary()
    );
    o
}

/// 3. Holder process kill -9, repeatedly (holder in any language).
pub async fn holder_kill9(p: &Profile, lang: HolderLang) -> Outcome {
    let mut o = Outcome::new(
        3,
        match lang {
            HolderLang::Rust => "holder-kill9",
            HolderLang::Python => "holder-kill9-python",
            HolderLang::Java => "holder-kill9-java",
            HolderLang::Node => "holder-kill9-node",
            HolderLang::C => "holder-kill9-c",
        },
    );
    let etcd = Etcd::single();
    let eps = etcd.endpoints();
    let ns = unique_ns("kill");
    let mut rawc = raw(&eps).await;
    let from = current_revision(&mut rawc).await;
    let checker = Checker::new();
    let wc = Client::connect(opts(&eps, &ns, 10, Duration::from_secs(2)))
        .await
        .expect("waiter connect");
    let mut fp = HolderKill::new(lang, "mutex", &eps, &wc, &mut rawc, &checker, &ns);
    let r = run_rounds(&mut fp, Duration::ZERO, p.rounds).await;
    o.faults += r.faults;
    o.acquisitions += fp.acquisitions;
    for f in r.failures {
        o.fail(f);
    }
    let (done, max_wait) = (fp.done, fp.max_wait);
    wc.close().await;
    let r = finish(&mut o, &checker, &mut rawc, &ns, Some(from)).await;
    o.expect(done == p.rounds, || {
        format!("{done}/{} rounds completed", p.rounds)
    });
    o.figure = format!(
        "{done} rounds, max next-waiter acquire {:.2} s after kill -9 (TTL {TTL} s, bound {} s); {}",
        secs(max_wait),
        TTL + 1,
        r.summary()
    );
    o
}
