//! The history checker. Every hold of every client (in this process or in a
//! child process) is recorded as `(lock, fencing token, acquired, ended,
//! client, loss)`, with times on `CLOCK_MONOTONIC` (system-wide on Linux, so
//! times from different processes compare). Guarded writes to the resource
//! key of each lock are recorded too, and etcd's own history of the resource
//! keys is read back at the end.
//!
//! Checks:
//! 1. no two hold intervals of one lock overlap;
//! 2. fencing tokens strictly increase per lock, in acquisition order;
//! 3. the resource key of each lock never accepted a token lower than one it
//!    had already accepted (read from etcd's revision history);
//! 4. every loss ended the hold (locally) before another client acquired.

use etcdlock::poison::Locked;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use etcd_client::{EventType, GetOptions, WatchOptions};

/// How a hold ended without unlock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LossInfo {
    /// `LossReason` name.
    pub reason: String,
    /// When the hold ended locally (`Loss::at`), CLOCK_MONOTONIC ns.
    pub at_ns: u64,
    /// When the holder learned of it (the loss was reported), CLOCK_MONOTONIC ns.
    pub reported_ns: u64,
}

/// How a guarded operation ended, as the history records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpResult {
    /// etcd applied it.
    Ok,
    /// etcd refused it (the compare of the holder's key failed).
    Refused,
    /// Not known: an error before or after etcd may have applied it.
    Unknown,
}

impl OpResult {
    /// `ok` / `refused` / `unknown`.
    pub fn name(self) -> &'static str {
        match self {
            OpResult::Ok => "ok",
            OpResult::Refused => "refused",
            OpResult::Unknown => "unknown",
        }
    }
    fn parse(s: &str) -> OpResult {
        match s {
            "ok" => OpResult::Ok,
            "refused" => OpResult::Refused,
            _ => OpResult::Unknown,
        }
    }
    /// The result of a guarded operation: refused only when etcd itself
    /// rejected the compare, unknown for every other error.
    pub fn of<T>(r: &etcdlock::Result<T>) -> OpResult {
        match r {
            Ok(_) => OpResult::Ok,
            Err(e)
                if e.code() == etcdlock::ErrorCode::LockLost
                    && e.to_string().contains("etcd rejected") =>
            {
                OpResult::Refused
            }
            Err(_) => OpResult::Unknown,
        }
    }
}

/// A guarded read or write of the lock's resource key inside a hold, for
/// the porcupine history: times on CLOCK_MONOTONIC, the value is a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardedOp {
    /// A write (guarded put) or a read (guarded get).
    pub write: bool,
    /// Invocation.
    pub call_ns: u64,
    /// Response (`None`: none came; open-ended).
    pub ret_ns: Option<u64>,
    /// The value written, or read (0: the key was absent).
    pub value: i64,
    /// What etcd did.
    pub result: OpResult,
}

/// One hold: the interval in which a client believed it held the lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hold {
    /// Lock name.
    pub lock: String,
    /// Fencing token.
    pub token: i64,
    /// When the acquisition returned, CLOCK_MONOTONIC ns.
    pub acquired_ns: u64,
    /// When the hold ended: unlock called, loss (`Loss::at`), or process killed.
    pub ended_ns: u64,
    /// Who held it.
    pub client: String,
    /// Set if the hold was lost rather than released.
    pub loss: Option<LossInfo>,
    /// When the acquisition was invoked, CLOCK_MONOTONIC ns (0: not recorded).
    pub invoked_ns: u64,
    /// Guarded reads and writes of the resource key during the hold (if recorded).
    pub ops: Vec<GuardedOp>,
}

impl Hold {
    /// One JSON line (the child-process protocol).
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "lock": self.lock, "token": self.token, "acq": self.acquired_ns, "end": self.ended_ns,
            "client": self.client,
            "loss": self.loss.as_ref().map(|l| serde_json::json!({"reason": l.reason, "at": l.at_ns, "rep": l.reported_ns})),
            "inv": self.invoked_ns,
            "ops": self.ops.iter().map(|o| serde_json::json!([o.write, o.call_ns, o.ret_ns, o.value, o.result.name()])).collect::<Vec<_>>(),
        })
        .to_string()
    }

    /// Parse [`Hold::to_json`].
    pub fn from_json(s: &str) -> Option<Hold> {
        let v: serde_json::Value = serde_json::from_str(s).ok()?;
        Some(Hold {
            lock: v["lock"].as_str()?.to_string(),
            token: v["token"].as_i64()?,
            acquired_ns: v["acq"].as_u64()?,
            ended_ns: v["end"].as_u64()?,
            client: v["client"].as_str()?.to_string(),
            loss: v["loss"].as_object().map(|l| LossInfo {
                reason: l["reason"].as_str().unwrap_or("").to_string(),
                at_ns: l["at"].as_u64().unwrap_or(0),
                reported_ns: l["rep"].as_u64().unwrap_or(0),
            }),
            invoked_ns: v["inv"].as_u64().unwrap_or(0),
            ops: v["ops"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|o| {
                            Some(GuardedOp {
                                write: o[0].as_bool()?,
                                call_ns: o[1].as_u64()?,
                                ret_ns: o[2].as_u64(),
                                value: o[3].as_i64()?,
                                result: OpResult::parse(o[4].as_str()?),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

/// What the checker found.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Holds checked.
    pub holds: usize,
    /// Holds that ended in a loss.
    pub losses: usize,
    /// Losses by reason (`LossReason` name).
    pub loss_reasons: BTreeMap<String, usize>,
    /// Guarded resource writes in etcd's history.
    pub resource_writes: usize,
    /// Overlapping intervals (released holds).
    pub overlaps: usize,
    /// Tokens out of order.
    pub token_regressions: usize,
    /// Resource writes etcd accepted with a token lower than one it had accepted before.
    pub stale_writes_accepted: usize,
    /// Losses whose local end came after another client's acquisition.
    pub late_losses: usize,
    /// Human-readable descriptions (first 20).
    pub details: Vec<String>,
}

impl Report {
    /// Total violations.
    pub fn violations(&self) -> usize {
        self.overlaps + self.token_regressions + self.stale_writes_accepted + self.late_losses
    }

    /// `holds=.. losses=.. writes=.. violations=..` for figure lines.
    pub fn summary(&self) -> String {
        format!(
            "{} holds, {} losses{}, {} guarded writes, {} violations (overlaps {}, token regressions {}, stale writes accepted {}, late loss reports {})",
            self.holds,
            self.losses,
            if self.loss_reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.loss_reasons.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "))
            },
            self.resource_writes,
            self.violations(),
            self.overlaps,
            self.token_regressions,
            self.stale_writes_accepted,
            self.late_losses
        )
    }

    fn note(&mut self, s: String) {
        if self.details.len() < 20 {
            self.details.push(s);
        }
    }
}

/// Collects holds; thread-safe.
#[derive(Default)]
pub struct Checker {
    holds: Mutex<Vec<Hold>>,
}

impl Checker {
    /// A new, empty checker.
    pub fn new() -> Checker {
        Checker::default()
    }

    /// Record one hold.
    pub fn record(&self, h: Hold) {
        self.holds.locked().push(h);
    }

    /// Every hold so far.
    pub fn holds(&self) -> Vec<Hold> {
        self.holds.locked().clone()
    }

    /// Number of holds so far.
    pub fn len(&self) -> usize {
        self.holds.locked().len()
    }

    /// Whether no hold was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Check the holds, and the resource history (`lock -> accepted tokens in
    /// revision order`, see [`resource_history`]).
    pub fn check(&self, resource: &BTreeMap<String, Vec<i64>>) -> Report {
        check_holds(&self.holds(), resource)
    }
}

/// The checks, on a plain list (unit-testable).
pub fn check_holds(holds: &[Hold], resource: &BTreeMap<String, Vec<i64>>) -> Report {
    let mut r = Report {
        holds: holds.len(),
        ..Default::default()
    };
    let mut by_lock: HashMap<&str, Vec<&Hold>> = HashMap::new();
    let mut shared: HashMap<&str, Vec<&Hold>> = HashMap::new();
    for h in holds {
        match h.lock.split_once('#') {
            Some((base, _)) => shared.entry(base).or_default().push(h),
            None => by_lock.entry(h.lock.as_str()).or_default().push(h),
        }
        if let Some(l) = &h.loss {
            r.losses += 1;
            *r.loss_reasons.entry(l.reason.clone()).or_default() += 1;
        }
    }
    for (lock, mut hs) in by_lock {
        hs.sort_by_key(|h| (h.acquired_ns, h.token));
        // Intervals: each acquisition must come after the end of every earlier hold.
        let mut latest: Option<&Hold> = None;
        for (i, h) in hs.iter().enumerate() {
            if let Some(p) = latest {
                if h.acquired_ns < p.ended_ns {
                    let by = Duration::from_nanos(p.ended_ns - h.acquired_ns);
                    if let Some(l) = &p.loss {
                        r.late_losses += 1;
                        r.note(format!(
                            "lock {lock}: {} (token {}) acquired {by:?} before the lost hold of {} (token {}, {}, held {:?}, reported {:?} after it ended) ended locally",
                            h.client,
                            h.token,
                            p.client,
                            p.token,
                            l.reason,
                            Duration::from_nanos(p.ended_ns.saturating_sub(p.acquired_ns)),
                            Duration::from_nanos(l.reported_ns.saturating_sub(p.ended_ns)),
                        ));
                    } else {
                        r.overlaps += 1;
                        r.note(format!(
                            "lock {lock}: {} (token {}) acquired {by:?} before {} (token {}) released",
                            h.client, h.token, p.client, p.token
                        ));
                    }
                }
            }
            if latest.map(|p| h.ended_ns > p.ended_ns).unwrap_or(true) {
                latest = Some(h);
            }
            if i > 0 && h.token <= hs[i - 1].token {
                r.token_regressions += 1;
                r.note(format!(
                    "lock {lock}: token {} of {} not above token {} of {}",
                    h.token,
                    h.client,
                    hs[i - 1].token,
                    hs[i - 1].client
                ));
            }
        }
    }
    for (base, hs) in shared {
        check_shared(&mut r, base, &hs);
    }
    for (lock, tokens) in resource {
        r.resource_writes += tokens.len();
        let mut max = i64::MIN;
        for t in tokens {
            if *t < max {
                r.stale_writes_accepted += 1;
                r.note(format!(
                    "resource of lock {lock}: etcd accepted token {t} after token {max}"
                ));
            }
            max = max.max(*t);
        }
    }
    r
}

/// Holds of the recipes that share a name, recorded as `NAME#pN` (a permit of
/// an N-permit semaphore), `NAME#r` (a read-write lock's reader) or `NAME#w`
/// (its writer): at no moment more than N permits, and a writer never beside
/// another holder. Each breach counts as an overlap.
fn check_shared(r: &mut Report, base: &str, hs: &[&Hold]) {
    // (time, start?, kind) with ends before starts at the same instant.
    let mut ev: Vec<(u64, bool, &str, &Hold)> = Vec::new();
    for h in hs {
        let kind = h.lock.split_once('#').map(|(_, k)| k).unwrap_or("");
        ev.push((h.acquired_ns, true, kind, h));
        ev.push((h.ended_ns.max(h.acquired_ns), false, kind, h));
    }
    ev.sort_by_key(|(t, start, _, _)| (*t, *start));
    let (mut readers, mut writers, mut permits) = (0i64, 0i64, 0i64);
    for (_, start, kind, h) in ev {
        let d = if start { 1 } else { -1 };
        match kind {
            "r" => readers += d,
            "w" => writers += d,
            k if k.starts_with('p') => permits += d,
            _ => {}
        }
        if !start {
            continue;
        }
        let cap: i64 = kind
            .strip_prefix('p')
            .and_then(|n| n.parse().ok())
            .unwrap_or(i64::MAX);
        let bad = writers > 1 || (writers > 0 && readers > 0) || permits > cap;
        if bad {
            r.overlaps += 1;
            r.note(format!(
                "{base}: {} ({}, token {}) acquired with {readers} readers, {writers} writers, {permits} permits holding",
                h.client, h.lock, h.token
            ));
        }
    }
}

/// The resource key that the workload writes for lock `lock` (namespaced by the client).
pub fn resource_key(lock: &str) -> String {
    format!("res/{lock}")
}

/// etcd's history of every resource key under `{ns}res/` since revision `from_rev`:
/// lock name -> tokens in the order etcd accepted them (the value of each put
/// is the writer's token). Reads the history with a watch from `from_rev`, so it
/// needs the history to be uncompacted.
pub async fn resource_history(
    etcd: &mut etcd_client::Client,
    ns: &str,
    from_rev: i64,
) -> Result<BTreeMap<String, Vec<i64>>, String> {
    let prefix = format!("{ns}res/");
    let cur = etcd
        .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
        .await
        .map_err(|e| format!("read resources: {e}"))?;
    let last_rev = cur
        .kvs()
        .iter()
        .map(|kv| kv.mod_revision())
        .max()
        .unwrap_or(0);
    let mut out: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    if last_rev < from_rev {
        return Ok(out);
    }
    let mut stream = etcd
        .watch(
            prefix.as_str(),
            Some(
                WatchOptions::new()
                    .with_prefix()
                    .with_start_revision(from_rev),
            ),
        )
        .await
        .map_err(|e| format!("watch resources: {e}"))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let msg = tokio::time::timeout_at(deadline, stream.message())
            .await
            .map_err(|_| "resource history: timed out".to_string())?
            .map_err(|e| format!("resource history: {e}"))?
            .ok_or("resource history: watch closed")?;
        if msg.compact_revision() > 0 {
            return Err(format!(
                "resource history compacted at {}",
                msg.compact_revision()
            ));
        }
        let mut done = false;
        for ev in msg.events() {
            let Some(kv) = ev.kv() else { continue };
            if ev.event_type() == EventType::Put {
                let key = String::from_utf8_lossy(kv.key()).into_owned();
                let lock = key[prefix.len()..].to_string();
                let tok: i64 = String::from_utf8_lossy(kv.value())
                    .parse()
                    .map_err(|_| format!("resource {key}: not a token"))?;
                out.entry(lock).or_default().push(tok);
            }
            if kv.mod_revision() >= last_rev {
                done = true;
            }
        }
        if done {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(lock: &str, token: i64, a: u64, e: u64, lost: bool) -> Hold {
        Hold {
            lock: lock.into(),
            token,
            acquired_ns: a,
            ended_ns: e,
            client: format!("c{token}"),
            loss: lost.then(|| LossInfo {
                reason: "ConnectionLost".into(),
                at_ns: e,
                reported_ns: e,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn clean_history_passes() {
        let r = check_holds(
            &[
                h("a", 1, 0, 10, false),
                h("a", 5, 11, 20, true),
                h("b", 2, 5, 30, false),
            ],
            &BTreeMap::new(),
        );
        assert_eq!(r.violations(), 0, "{r:?}");
        assert_eq!(r.losses, 1);
    }

    #[test]
    fn each_violation_is_caught() {
        let r = check_holds(
            &[h("a", 1, 0, 10, false), h("a", 2, 5, 20, false)],
            &BTreeMap::new(),
        );
        assert_eq!((r.overlaps, r.violations()), (1, 1));
        let r = check_holds(
            &[h("a", 1, 0, 10, true), h("a", 2, 5, 20, false)],
            &BTreeMap::new(),
        );
        assert_eq!((r.late_losses, r.violations()), (1, 1));
        let r = check_holds(
            &[h("a", 3, 0, 10, false), h("a", 2, 11, 20, false)],
            &BTreeMap::new(),
        );
        assert_eq!((r.token_regressions, r.violations()), (1, 1));
        let mut res = BTreeMap::new();
        res.insert("a".to_string(), vec![1, 3, 3, 2, 4]);
        let r = check_holds(&[], &res);
        assert_eq!((r.stale_writes_accepted, r.resource_writes), (1, 5));
    }

    #[test]
    fn shared_holds_are_checked_by_their_kind() {
        // Two permits of a 2-permit semaphore at once: fine; a third: a breach.
        let ok = [
            h("s#p2", 1, 0, 10, false),
            h("s#p2", 2, 1, 10, false),
            h("s#p2", 3, 10, 20, false),
        ];
        assert_eq!(check_holds(&ok, &BTreeMap::new()).violations(), 0);
        let bad = [
            h("s#p2", 1, 0, 10, false),
            h("s#p2", 2, 1, 10, false),
            h("s#p2", 3, 5, 20, false),
        ];
        assert_eq!(check_holds(&bad, &BTreeMap::new()).overlaps, 1);
        // Readers overlap; a writer beside a reader or a writer is a breach.
        let ok = [
            h("r#r", 1, 0, 10, false),
            h("r#r", 2, 1, 10, false),
            h("r#w", 3, 10, 20, false),
        ];
        assert_eq!(check_holds(&ok, &BTreeMap::new()).violations(), 0);
        let bad = [h("r#r", 1, 0, 10, false), h("r#w", 3, 5, 20, false)];
        assert_eq!(check_holds(&bad, &BTreeMap::new()).overlaps, 1);
        let bad = [h("r#w", 1, 0, 10, false), h("r#r", 3, 5, 20, false)];
        assert_eq!(check_holds(&bad, &BTreeMap::new()).overlaps, 1);
        let bad = [h("r#w", 1, 0, 10, false), h("r#w", 3, 5, 20, false)];
        assert_eq!(check_holds(&bad, &BTreeMap::new()).overlaps, 1);
    }

    #[test]
    fn hold_json_round_trips() {
        let x = h("a/b", 7, 1, 2, true);
        assert_eq!(Hold::from_json(&x.to_json()), Some(x));
        let y = h("a", 7, 1, 2, false);
        assert_eq!(Hold::from_json(&y.to_json()), Some(y));
    }
}
