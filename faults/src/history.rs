//! The outside checker: every hold of a scenario as a history of timed
//! operations (JSON lines), checked by porcupine (`faults/porcupine/`, Go)
//! against the model of a fenced lock guarding a register.
//!
//! Each hold of an exclusive lock (recipe holds named `NAME#..` are left to
//! our own checker) becomes:
//! - `acquire(token)` from its invocation (0 if not recorded) to its return;
//! - its guarded reads and writes of the resource key, with their results;
//! - `held(token)` at the instant the hold ended locally (unlock called,
//!   `Loss::at`, process killed): the holder's own view must not outlive etcd's;
//! - `release(token)` from that instant, open-ended: etcd deletes the key (or
//!   expires the lease) at a time the client does not know, and `unlock` may
//!   finish the delete in the background.
//!
//! The model (per lock): state = (holder token or 0, highest token granted,
//! register value); `acquire` only when free and with a token above every
//! earlier one; a guarded write or read succeeds only for the holder (a read
//! sees the last accepted write) and is refused only for a non-holder; a
//! write whose outcome is unknown may or may not have been applied, and only
//! for the holder; `held` only for the holder; `release` frees the lock if
//! the token still holds it.

use etcdlock::poison::Locked;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use serde_json::json;

use crate::checker::Hold;

/// Where the suite writes its histories, reports and the porcupine binary:
/// `$CARGO_TARGET_DIR` or the workspace's `target/`.
pub fn target_dir() -> PathBuf {
    let t = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    t.canonicalize().unwrap_or(t)
}

/// The history records (one JSON object per operation) of `holds`.
pub fn records(holds: &[Hold]) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for h in holds.iter().filter(|h| !h.lock.contains('#')) {
        let rec = |op: &str, call: u64, ret: Option<u64>, value: i64, result: &str| json!({"lock": h.lock, "client": h.client, "op": op, "call": call, "ret": ret, "token": h.token, "value": value, "result": result});
        let call = if h.invoked_ns > 0 && h.invoked_ns <= h.acquired_ns {
            h.invoked_ns
        } else {
            0
        };
        out.push(rec("acquire", call, Some(h.acquired_ns), 0, "ok"));
        for o in &h.ops {
            let ret = o.ret_ns.filter(|r| *r >= o.call_ns);
            out.push(rec(
                if o.write { "write" } else { "read" },
                o.call_ns,
                ret,
                o.value,
                o.result.name(),
            ));
        }
        let end = h.ended_ns.max(h.acquired_ns);
        out.push(rec("held", end, Some(end), 0, "ok"));
        out.push(rec("release", end, None, 0, "unknown"));
    }
    out
}

/// What porcupine said about one history.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// `ok`, `illegal`, `unknown` (porcupine's time limit) or `error: ...`.
    pub result: String,
    /// Operations checked.
    pub ops: u64,
    /// Locks (partitions).
    pub locks: u64,
    /// Porcupine's own time, ms.
    pub ms: u64,
    /// The history file.
    pub history: PathBuf,
    /// The visualization of a violation.
    pub html: Option<PathBuf>,
}

impl Verdict {
    /// Whether the history is linearizable.
    pub fn ok(&self) -> bool {
        self.result == "ok"
    }
}

/// The porcupine checker binary: `$ETCDLOCK_FAULTS_PORCUPINE` (test.sh builds
/// it), else built once per process with `go build` under the target dir.
pub fn porcupine_bin() -> Result<PathBuf, String> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("ETCDLOCK_FAULTS_PORCUPINE") {
            return Ok(PathBuf::from(p));
        }
        let dir = target_dir().join("porcupine");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let bin = dir.join("etcdlock-porcupine");
        let tmp = dir.join(format!("etcdlock-porcupine.{}", std::process::id()));
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("porcupine");
        let out = Command::new("go")
            .arg("build")
            .arg("-o")
            .arg(&tmp)
            .arg(".")
            .current_dir(&src)
            .output()
            .map_err(|e| format!("go build of faults/porcupine: {e} (is Go installed?)"))?;
        if !out.status.success() {
            return Err(format!(
                "go build of faults/porcupine failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        std::fs::rename(&tmp, &bin).map_err(|e| format!("{}: {e}", bin.display()))?;
        Ok(bin)
    })
    .clone()
}

/// Write `holds` as a history `<target>/faults-history/<name>.jsonl` (a
/// second run of the same name in this process gets `-2`, ...) and check it
/// with porcupine; a violation leaves `<name>.html` beside it.
pub fn check(holds: &[Hold], name: &str) -> Verdict {
    static RUNS: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());
    let dir = target_dir().join("faults-history");
    let n = {
        let mut runs = RUNS.locked();
        let n = runs.entry(name.to_string()).or_insert(0);
        *n += 1;
        *n - 1
    };
    let stem = if n == 0 {
        name.to_string()
    } else {
        format!("{name}-{}", n + 1)
    };
    let history = dir.join(format!("{stem}.jsonl"));
    let mut v = Verdict {
        history: history.clone(),
        ..Default::default()
    };
    match check_file(holds, &dir, &history, &dir.join(format!("{stem}.html"))) {
        Ok(x) => x,
        Err(e) => {
            v.result = format!("error: {e}");
            v
        }
    }
}

fn check_file(holds: &[Hold], dir: &Path, history: &Path, html: &Path) -> Result<Verdict, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut text = String::new();
    for r in records(holds) {
        text.push_str(&r.to_string());
        text.push('\n');
    }
    std::fs::write(history, text).map_err(|e| format!("{}: {e}", history.display()))?;
    let _ = std::fs::remove_file(html);
    let bin = porcupine_bin()?;
    let out = Command::new(&bin)
        .arg("-html")
        .arg(html)
        .arg(history)
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line: serde_json::Value = serde_json::from_str(stdout.trim()).map_err(|_| {
        format!(
            "porcupine said {stdout:?} {:?}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    Ok(Verdict {
        result: line["result"]
            .as_str()
            .unwrap_or("error: no result")
            .to_string(),
        ops: line["ops"].as_u64().unwrap_or(0),
        locks: line["locks"].as_u64().unwrap_or(0),
        ms: line["ms"].as_u64().unwrap_or(0),
        history: history.to_path_buf(),
        html: line["html"].as_str().map(PathBuf::from),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::{GuardedOp, LossInfo, OpResult};

    fn w(call: u64, value: i64, result: OpResult) -> GuardedOp {
        GuardedOp {
            write: true,
            call_ns: call,
            ret_ns: Some(call + 1),
            value,
            result,
        }
    }
    fn r(call: u64, value: i64) -> GuardedOp {
        GuardedOp {
            write: false,
            call_ns: call,
            ret_ns: Some(call + 1),
            value,
            result: OpResult::Ok,
        }
    }
    fn hold(
        client: &str,
        token: i64,
        inv: u64,
        acq: u64,
        end: u64,
        ops: Vec<GuardedOp>,
        lost: bool,
    ) -> Hold {
        Hold {
            lock: "L".into(),
            token,
            acquired_ns: acq,
            ended_ns: end,
            client: client.into(),
            loss: lost.then(|| LossInfo {
                reason: "LeaseExpired".into(),
                at_ns: end,
                reported_ns: end + 5,
            }),
            invoked_ns: inv,
            ops,
        }
    }

    /// A clean history: A holds, loses (its release open-ended), B waits and
    /// takes over, reads A's write, writes; A's late write is refused by etcd.
    fn clean() -> Vec<Hold> {
        vec![
            hold(
                "a",
                5,
                100,
                110,
                200,
                vec![
                    r(120, 0),
                    w(130, 5, OpResult::Ok),
                    w(250, 5, OpResult::Refused),
                ],
                true,
            ),
            hold(
                "b",
                9,
                105,
                240,
                300,
                vec![r(260, 5), w(270, 9, OpResult::Ok)],
                false,
            ),
            // An unknown write that was in fact applied, then read back.
            hold(
                "c",
                12,
                301,
                310,
                400,
                vec![w(320, 12, OpResult::Unknown), r(330, 12)],
                false,
            ),
        ]
    }

    #[test]
    fn porcupine_accepts_a_clean_history() {
        let v = check(&clean(), "unit-clean");
        assert_eq!(v.result, "ok", "{v:?}");
        assert_eq!((v.ops, v.locks), (16, 1));
    }

    #[test]
    fn porcupine_rejects_a_stale_write_accepted() {
        let mut h = clean();
        // The doctored history: etcd accepted A's write after B acquired.
        h[0].ops[2].result = OpResult::Ok;
        let v = check(&h, "unit-stale-write");
        assert_eq!(v.result, "illegal", "{v:?}");
        let html = v.html.expect("a visualization");
        assert!(
            std::fs::metadata(&html)
                .map(|m| m.len() > 1000)
                .unwrap_or(false),
            "{}",
            html.display()
        );
    }

    #[test]
    fn porcupine_rejects_each_broken_promise() {
        // A read that does not see the last accepted write.
        let mut h = clean();
        h[1].ops[0].value = 0;
        assert_eq!(check(&h, "unit-stale-read").result, "illegal");
        // Two holders: B acquired before A's hold ended locally.
        let mut h = clean();
        h[1].acquired_ns = 150;
        h[1].ops.clear();
        assert_eq!(check(&h, "unit-overlap").result, "illegal");
        // Tokens that do not rise.
        let mut h = clean();
        h[1].token = 4;
        h[1].ops.clear();
        assert_eq!(check(&h, "unit-token").result, "illegal");
        // The holder refused by etcd while it still held.
        let mut h = clean();
        h[1].ops[1].result = OpResult::Refused;
        assert_eq!(check(&h, "unit-refused-holder").result, "illegal");
    }

    #[test]
    fn recipe_holds_are_left_to_our_checker() {
        let mut h = hold("a", 5, 0, 10, 20, vec![], false);
        h.lock = "S#p2".into();
        assert!(records(&[h]).is_empty());
    }
}
