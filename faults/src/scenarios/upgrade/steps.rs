//! The steps of a rolling restart or upgrade (scenarios 34-37): each member
//! stopped with SIGTERM and started again, with a new binary for an upgrade,
//! and the etcd builds and versions they use.

use std::path::PathBuf;

use super::*;

/// The etcd binary of `version`, built (or found in the cache) by
/// `faults/build-etcd.sh`.
pub(super) fn etcd_build(version: &str) -> Result<PathBuf, String> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("build-etcd.sh");
    let out = std::process::Command::new(&script)
        .arg(version)
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "build-etcd.sh {version} failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("etcd"))
}

/// (server version, cluster version) that member `i` reports on `/version`.
pub(super) fn versions(etcd: &Etcd, i: usize) -> Option<(String, String)> {
    let m = &etcd.members[i];
    let body = etcdlock_testkit::http_get_at(&m.host, m.client_port, "/version").ok()?;
    let json = body.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or(&body);
    let v: serde_json::Value = serde_json::from_str(json.trim()).ok()?;
    Some((
        v["etcdserver"].as_str()?.to_string(),
        v["etcdcluster"].as_str()?.to_string(),
    ))
}

/// One step of a rolling restart: SIGTERM member `member`, then start it
/// again, with `bin` if given, on the same data dir and ports.
pub(in crate::scenarios) struct Step {
    pub(super) member: usize,
    pub(super) bin: Option<PathBuf>,
    /// After this step, wait until every member reports this cluster version prefix.
    pub(super) cluster_version: Option<&'static str>,
}

impl Step {
    /// Every member of a cluster of `members`, restarted with its own binary, one by one.
    pub(in crate::scenarios) fn restart_each(members: usize) -> Vec<Step> {
        (0..members)
            .map(|member| Step {
                member,
                bin: None,
                cluster_version: None,
            })
            .collect()
    }
}

/// Figures of the steps.
#[derive(Default)]
pub(in crate::scenarios) struct Steps {
    /// Members restarted.
    pub(in crate::scenarios) done: usize,
    /// Of them, the leader when its step began.
    pub(in crate::scenarios) leaders: usize,
    /// The longest SIGTERM-to-exit, ms.
    pub(in crate::scenarios) max_stop_ms: i64,
    /// The longest SIGTERM-to-healthy-with-a-leader, ms.
    pub(in crate::scenarios) max_back_ms: i64,
    pub(super) cluster_versions: Vec<String>,
    /// Each step: (member, SIGTERM, exit, healthy with a leader), CLOCK_MONOTONIC ns
    /// (0: not reached).
    windows: Vec<(usize, u64, u64, u64)>,
}

impl Steps {
    /// Where the instant `ns` falls among the steps, for a failure message:
    /// "during m1's stop (3.20 s after its SIGTERM, it exited 6.41 s after)".
    pub(super) fn when(&self, ns: u64) -> String {
        for &(m, term, exit, back) in &self.windows {
            if ns < term {
                continue;
            }
            if exit == 0 || ns <= exit {
                let exited = if exit == 0 {
                    "it did not exit".to_string()
                } else {
                    format!("it exited {:.2} s after", secs(exit - term))
                };
                return format!(
                    "during m{m}'s stop ({:.2} s after its SIGTERM, {exited})",
                    secs(ns - term)
                );
            }
            if back == 0 || ns <= back {
                return format!(
                    "while m{m} restarted ({:.2} s after its exit)",
                    secs(ns - exit)
                );
            }
        }
        match self.windows.first() {
            Some(&(_, term, _, _)) if ns < term => {
                format!("{:.2} s before the first SIGTERM", secs(term - ns))
            }
            _ => match self.windows.last() {
                Some(&(m, _, _, back)) if back > 0 => {
                    format!("{:.2} s after m{m} was back", secs(ns.saturating_sub(back)))
                }
                _ => "after the steps".into(),
            },
        }
    }
}

/// Run `steps` on `etcd`, one member at a time: SIGTERM, wait for the exit,
/// restart (with the step's binary), wait until the member is healthy, every
/// member agrees on a leader, and (if the step says) the cluster version.
pub(in crate::scenarios) async fn run_steps(
    etcd: &mut Etcd,
    steps: Vec<Step>,
    o: &mut Outcome,
) -> Steps {
    let eps = etcd.endpoints();
    let mut s = Steps::default();
    for st in steps {
        let i = st.member;
        if blocking(|| etcd.leader()) == Some(i) {
            s.leaders += 1;
        }
        let t0 = clock_monotonic_ns();
        s.windows.push((i, t0, 0, 0));
        match blocking(|| etcd.stop(i, Duration::from_secs(20))) {
            Ok(d) => {
                s.max_stop_ms = s.max_stop_ms.max(d.as_millis() as i64);
                if let Some(w) = s.windows.last_mut() {
                    w.2 = t0 + d.as_nanos() as u64;
                }
            }
            Err(e) => o.fail(e),
        }
        if let Some(b) = st.bin {
            etcd.set_bin(i, b);
        }
        let healthy = blocking(|| {
            etcd.restart(i);
            etcd.wait_member_healthy(i, Duration::from_secs(20))
        });
        if let Err(e) = healthy {
            o.fail(format!("m{i} after its restart: {e}"));
            break;
        }
        if etcdlock_testkit::await_leader_among(
            &eps,
            Duration::from_secs(10),
            Duration::from_millis(20),
        )
        .is_none()
        {
            o.fail(format!("no leader agreed after m{i} came back"));
            break;
        }
        let back = clock_monotonic_ns();
        s.max_back_ms = s.max_back_ms.max(ms_between(t0, back));
        if let Some(w) = s.windows.last_mut() {
            w.3 = back;
        }
        s.done += 1;
        if let Some(want) = st.cluster_version {
            // The leader raises the cluster version once every member runs
            // the new one (etcd checks every few seconds).
            let start = Instant::now();
            loop {
                let vs: Vec<_> = (0..etcd.members.len()).map(|m| versions(etcd, m)).collect();
                if vs
                    .iter()
                    .all(|v| v.as_ref().is_some_and(|(_, c)| c.starts_with(want)))
                {
                    s.cluster_versions.push(format!(
                        "{} after {} ms",
                        vs[0].as_ref().map(|v| v.1.clone()).unwrap_or_default(),
                        start.elapsed().as_millis()
                    ));
                    break;
                }
                if start.elapsed() > Duration::from_secs(20) {
                    o.fail(format!("cluster version not {want} within 20 s: {vs:?}"));
                    return s;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        // The restarted member takes clients again before the next goes down.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    s
}
