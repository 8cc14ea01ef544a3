//! Child processes: holders that re-run the current executable (Rust) or a
//! Python holder, driven by JSON lines on stdin and reporting on stdout, so a
//! scenario can pause or kill a holder without touching its own process.

use super::*;
use etcdlock::poison::Locked;

static CHILD_ARGS: Mutex<Option<Vec<String>>> = Mutex::new(None);

/// Arguments that make the current executable run only the child entry point.
/// The default suits a libtest binary with a `child_holder` test; the soak
/// example sets `[]`.
pub fn set_child_args(args: &[&str]) {
    *CHILD_ARGS.locked() = Some(args.iter().map(|s| s.to_string()).collect());
}

fn child_args() -> Vec<String> {
    CHILD_ARGS.locked().clone().unwrap_or_else(|| {
        [
            "--exact",
            "child_holder",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    })
}

/// A child holder process with its stdout as lines.
pub struct ChildProc {
    child: tokio::process::Child,
    lines: Lines<BufReader<ChildStdout>>,
    /// Lines read but not yet asked for (other tags).
    pub seen: Vec<String>,
}

impl ChildProc {
    /// Spawn the current executable in child mode with `spec` (JSON) and extra env.
    pub fn spawn(spec: serde_json::Value, env: &[(&str, String)]) -> ChildProc {
        let mut cmd = Command::new(std::env::current_exe().expect("current exe"));
        cmd.args(child_args())
            .env(CHILD_ENV, spec.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        // SAFETY: prctl is async-signal-safe; runs in the child before exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("spawn child holder");
        let out = child.stdout.take().expect("child stdout");
        ChildProc {
            child,
            lines: BufReader::new(out).lines(),
            seen: Vec::new(),
        }
    }

    /// Spawn `program args..` as a holder (e.g. the Python holder) with `spec` in [`CHILD_ENV`].
    pub fn spawn_program(
        program: &str,
        args: &[String],
        spec: serde_json::Value,
        env: &[(&str, String)],
    ) -> ChildProc {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env(CHILD_ENV, spec.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        // SAFETY: prctl is async-signal-safe; runs in the child before exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
        let out = child.stdout.take().expect("child stdout");
        ChildProc {
            child,
            lines: BufReader::new(out).lines(),
            seen: Vec::new(),
        }
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.child.id().map(|p| p as i32).unwrap_or(0)
    }

    /// Send a signal.
    pub fn signal(&self, sig: i32) {
        let pid = self.pid();
        if pid > 0 {
            // SAFETY: plain kill(2) on our own child.
            unsafe { libc::kill(pid, sig) };
        }
    }

    /// SIGKILL and reap.
    pub async fn kill9(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait().await;
    }

    /// Wait for the process to exit.
    pub async fn wait(&mut self) {
        let _ = self.child.wait().await;
    }

    /// The next line starting with `tag`, split on whitespace (the tag first).
    /// Other lines are kept in `seen`. Err on timeout or end of output.
    pub async fn expect(&mut self, tag: &str, timeout: Duration) -> Result<Vec<String>, String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .map_err(|_| format!("child: no {tag} line within {timeout:?}"))?
                .map_err(|e| format!("child stdout: {e}"))?
                .ok_or_else(|| format!("child ended before printing {tag}"))?;
            let parts: Vec<String> = line.split_whitespace().map(String::from).collect();
            if parts.first().map(|p| p.as_str()) == Some(tag) {
                return Ok(parts);
            }
            self.seen.push(line);
        }
    }

    /// Every remaining line until the process closes stdout.
    pub async fn rest(&mut self, timeout: Duration) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut out = std::mem::take(&mut self.seen);
        while let Ok(Ok(Some(l))) = tokio::time::timeout_at(deadline, self.lines.next_line()).await
        {
            out.push(l);
        }
        out
    }
}

/// If this process was started as a child (env [`CHILD_ENV`]), run the child
/// role to completion and return true.
pub fn child_main_if_requested() -> bool {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return false;
    };
    let v: serde_json::Value = serde_json::from_str(&spec).expect("child spec");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(child_main(v));
    true
}

/// Take `lock` the way `kind` says: "mutex", "permit" (a 1-permit semaphore),
/// "read" (a read-write lock's reader), "writer" (its writer: the mutex),
/// "campaign" (an election), "many" (`lock` and `lock`2 in one multi-lock).
/// Returns the guard on `lock` and any other guards of the same hold.
pub async fn acquire_kind(
    c: &Client,
    lock: &str,
    kind: &str,
) -> etcdlock::Result<(etcdlock::Guard, Vec<etcdlock::Guard>)> {
    let o = LockOptions::default();
    match kind {
        "permit" => Ok((c.acquire_permit(lock, 1, o).await?, Vec::new())),
        "read" => Ok((c.read_lock(lock, o).await?, Vec::new())),
        "campaign" => Ok((
            c.campaign(lock, format!("pid {}", std::process::id()), o)
                .await?
                .into_guard(),
            Vec::new(),
        )),
        "many" => {
            let second = format!("{lock}2");
            let mut gs = c
                .lock_many(&[lock, second.as_str()], o)
                .await?
                .into_guards();
            let rest = gs.split_off(1);
            Ok((gs.pop().expect("one guard"), rest))
        }
        _ => Ok((c.lock(lock).await?, Vec::new())),
    }
}

fn say(line: String) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A guarded put of the holder's token to the lock's resource key, printed as
/// `<tag> <ok|error code> <call mono ns> <return mono ns> <ok|refused|unknown>`
/// (the holder line protocol, the same in every language).
async fn guarded_put_line(tag: &str, g: &etcdlock::Guard, lock: &str) -> GuardedOp {
    let call = clock_monotonic_ns();
    let r = g
        .put(checker::resource_key(lock), g.fencing_token().to_string())
        .await;
    let ret = clock_monotonic_ns();
    let result = OpResult::of(&r);
    let name = r
        .map(|_| "ok".to_string())
        .unwrap_or_else(|e| e.code().to_string());
    say(format!("{tag} {name} {call} {ret} {}", result.name()));
    // An outcome not known is open-ended in the history, as the workload records it.
    GuardedOp {
        write: true,
        call_ns: call,
        ret_ns: (result != OpResult::Unknown).then_some(ret),
        value: g.fencing_token(),
        result,
    }
}

/// A loss reason as a holder in any language names it (`LeaseExpired`,
/// Java's `LEASE_EXPIRED`, ...) in core's spelling (`LeaseExpired`); anything
/// else unchanged.
pub fn canonical_loss_reason(s: &str) -> String {
    let flat: String = s
        .rsplit('.')
        .next()
        .unwrap_or(s)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    [
        "LeaseExpired",
        "KeyDeleted",
        "ConnectionLost",
        "ClientClosed",
    ]
    .into_iter()
    .find(|r| r.to_ascii_lowercase() == flat)
    .map(String::from)
    .unwrap_or_else(|| s.to_string())
}

/// Parse a `PUT` / `STALE` line of the holder protocol (the tag first) into the
/// guarded write it reports: (the binding's result name, the write).
pub fn parse_put_line(parts: &[String], token: i64) -> Result<(String, GuardedOp), String> {
    let bad = || {
        format!(
            "malformed {} line from a holder: {parts:?}",
            parts.first().map(|s| s.as_str()).unwrap_or("?")
        )
    };
    if parts.len() < 5 {
        return Err(bad());
    }
    let call: u64 = parts[2].parse().map_err(|_| bad())?;
    let ret: u64 = parts[3].parse().map_err(|_| bad())?;
    let result = match parts[4].as_str() {
        "ok" => OpResult::Ok,
        "refused" => OpResult::Refused,
        "unknown" => OpResult::Unknown,
        _ => return Err(bad()),
    };
    if ret < call {
        return Err(bad());
    }
    let ret_ns = (result != OpResult::Unknown).then_some(ret);
    Ok((
        parts[1].clone(),
        GuardedOp {
            write: true,
            call_ns: call,
            ret_ns,
            value: token,
            result,
        },
    ))
}

async fn child_main(v: serde_json::Value) {
    let endpoints: Vec<String> = v["endpoints"]
        .as_array()
        .expect("endpoints")
        .iter()
        .map(|e| e.as_str().unwrap_or_default().to_string())
        .collect();
    let ns = v["ns"].as_str().unwrap_or_default().to_string();
    let ttl = v["ttl"].as_i64().unwrap_or(2);
    // TLS: the CA that signs etcd's certificate (the "holder" mode only).
    let tls_ca = v["tls_ca"].as_str().map(std::path::PathBuf::from);
    match v["mode"].as_str().unwrap_or("holder") {
        "holder" => {
            let lock = v["lock"].as_str().unwrap_or("L").to_string();
            let rounds = v["rounds"].as_u64().unwrap_or(1);
            let id = format!("child{}", std::process::id());
            let rt = Duration::from_millis(v["request_timeout_ms"].as_u64().unwrap_or(2000));
            let c = Client::connect(with_ca(opts(&endpoints, &ns, ttl, rt), tls_ca.as_deref()))
                .await
                .expect("child connect");
            // The recipe the hold is taken with (the guard is always the one on `lock`).
            let kind = v["kind"].as_str().unwrap_or("mutex").to_string();
            for _ in 0..rounds {
                let (g, _others) = acquire_kind(&c, &lock, &kind).await.expect("child lock");
                let acq = clock_monotonic_ns();
                say(format!("HELD {} {} {}", g.fencing_token(), acq, g.key()));
                let put = guarded_put_line("PUT", &g, &lock).await;
                let Some(loss) = g.wait_lost().await else {
                    continue;
                };
                let rep = clock_monotonic_ns();
                let at = instant_to_mono_ns(loss.at);
                say(format!("LOST {} {} {}", loss.reason, at, rep));
                // The stale holder tries to write anyway: the guarded put must fail.
                let stale = guarded_put_line("STALE", &g, &lock).await;
                // And the same compare sent straight to etcd must fail there too.
                let mut raw = loop {
                    match c.etcd().await {
                        Ok(r) => break r,
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                };
                let txn = etcd_client::Txn::new()
                    .when([etcd_client::Compare::create_revision(
                        g.key(),
                        etcd_client::CompareOp::Equal,
                        g.fencing_token(),
                    )])
                    .and_then([etcd_client::TxnOp::put(
                        format!("{ns}{}", checker::resource_key(&lock)),
                        g.fencing_token().to_string(),
                        None,
                    )]);
                let raw_ok = loop {
                    match raw.txn(txn.clone()).await {
                        Ok(r) => break r.succeeded(),
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                };
                say(format!("RAWTXN {raw_ok}"));
                let h = Hold {
                    lock: lock.clone(),
                    token: g.fencing_token(),
                    acquired_ns: acq,
                    ended_ns: at,
                    client: id.clone(),
                    loss: Some(LossInfo {
                        reason: loss.reason.name().into(),
                        at_ns: at,
                        reported_ns: rep,
                    }),
                    ops: vec![put, stale],
                    ..Default::default()
                };
                say(format!("HOLD {}", h.to_json()));
            }
            c.close().await;
            say("DONE".into());
        }
        "workload" => {
            let secs = v["secs"].as_f64().unwrap_or(5.0);
            let mut w = Workload::new(endpoints.clone(), &ns);
            w.clients = v["clients"].as_u64().unwrap_or(2) as usize;
            w.locks = v["locks"].as_u64().unwrap_or(2) as usize;
            w.ttl = ttl;
            w.hold = Duration::from_millis(v["hold_ms"].as_u64().unwrap_or(10));
            w.client_prefix = format!("child{}-c", std::process::id());
            let checker = Arc::new(Checker::new());
            let counters = Arc::new(Counters::default());
            let stop = CancellationToken::new();
            // One long hold across the whole run, checked every 50 ms.
            let long = {
                let (endpoints, ns, stop) = (endpoints.clone(), ns.clone(), stop.clone());
                tokio::spawn(async move {
                    let c = Client::connect(opts(&endpoints, &ns, ttl, Duration::from_secs(2)))
                        .await
                        .expect("connect");
                    let g = c.lock("long").await.expect("long lock");
                    let mut checks = 0u64;
                    let mut lost = String::from("none");
                    while !stop.is_cancelled() {
                        checks += 1;
                        if !g.is_held() {
                            lost = g
                                .loss()
                                .map(|l| l.reason.name().to_string())
                                .unwrap_or_else(|| "not-held".into());
                            break;
                        }
                        if checks % 20 == 0 {
                            if let Err(e) = g.put("long-res", checks.to_string()).await {
                                lost = format!("put-{}", e.code());
                                break;
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    let _ = g.unlock().await;
                    c.close().await;
                    (checks, lost)
                })
            };
            let wall = {
                let stop = stop.clone();
                tokio::spawn(async move {
                    while !stop.is_cancelled() {
                        let wall_ms = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map(|d| d.as_millis() as i64)
                            .unwrap_or(0);
                        say(format!("WALL {wall_ms} {}", clock_monotonic_ns()));
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                })
            };
            let timer = {
                let stop = stop.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
                    stop.cancel();
                })
            };
            w.run(checker.clone(), counters.clone(), stop.clone()).await;
            let _ = timer.await;
            let _ = wall.await;
            let (checks, lost) = long.await.unwrap_or((0, "panicked".into()));
            for h in checker.holds() {
                say(format!("HOLD {}", h.to_json()));
            }
            say(format!("LONG {checks} {lost}"));
            say(format!(
                "DONE {} {} {}",
                counters.acquisitions.load(Ordering::Relaxed),
                counters.losses.load(Ordering::Relaxed),
                counters.errors_summary().replace(' ', ",")
            ));
        }
        other => panic!("unknown child mode {other}"),
    }
}

// ---------------------------------------------------------------------------
// Holders in other languages

/// The language of a holder process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderLang {
    /// This executable re-run in child mode.
    Rust,
    /// `holders/python_holder.py` on the Python binding.
    Python,
    /// `holders/JavaHolder.java` on the Java binding (the etcdlock jar).
    Java,
    /// `holders/node_holder.js` on the Node binding.
    Node,
    /// `holders/c_holder.c` on the C API (`libetcdlock.so`).
    C,
}

impl HolderLang {
    /// Every language, Rust first.
    pub const ALL: [HolderLang; 5] = [
        HolderLang::Rust,
        HolderLang::Python,
        HolderLang::Java,
        HolderLang::Node,
        HolderLang::C,
    ];

    /// The language's name as the report lists it.
    pub fn name(self) -> &'static str {
        match self {
            HolderLang::Rust => "Rust",
            HolderLang::Python => "Python",
            HolderLang::Java => "Java",
            HolderLang::Node => "Node",
            HolderLang::C => "C",
        }
    }
}

/// The value of `var`, or an error saying how to get it (a missing holder
/// language is a failure, not a skip).
fn holder_env(var: &str, what: &str) -> Result<String, String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Ok(v),
        _ => Err(format!("{var} is not set: the {what} holder needs it (faults/holders/build.sh builds the holders and prints it; faults/test.sh sets it)")),
    }
}

/// A Python interpreter that can `import etcdlock`, and the PYTHONPATH it needs:
/// `$ETCDLOCK_FAULTS_PYTHON` / `$ETCDLOCK_FAULTS_PYTHONPATH` (set by test.sh),
/// else the Python binding's venv (`bindings-python/.venv`).
pub fn python_with_etcdlock() -> Result<(String, Option<String>), String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates: Vec<(String, Option<String>)> = match std::env::var("ETCDLOCK_FAULTS_PYTHON") {
        Ok(py) => vec![(py, std::env::var("ETCDLOCK_FAULTS_PYTHONPATH").ok())],
        Err(_) => vec![(
            root.join("bindings-python/.venv/bin/python")
                .display()
                .to_string(),
            None,
        )],
    };
    for (py, path) in candidates {
        let mut cmd = std::process::Command::new(&py);
        cmd.args(["-c", "import etcdlock"]);
        if let Some(p) = &path {
            cmd.env("PYTHONPATH", p);
        }
        if cmd.output().map(|o| o.status.success()).unwrap_or(false) {
            return Ok((py, path));
        }
    }
    Err("no Python with the etcdlock binding (run faults/test.sh, or set ETCDLOCK_FAULTS_PYTHON / ETCDLOCK_FAULTS_PYTHONPATH)".into())
}

/// Spawn a holder in `lang` with the `holder` spec.
pub fn spawn_holder(lang: HolderLang, spec: serde_json::Value) -> Result<ChildProc, String> {
    match lang {
        HolderLang::Rust => Ok(ChildProc::spawn(spec, &[])),
        HolderLang::Python => {
            let (py, path) = python_with_etcdlock()?;
            let script =
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("holders/python_holder.py");
            let env: Vec<(&str, String)> =
                path.map(|p| vec![("PYTHONPATH", p)]).unwrap_or_default();
            Ok(ChildProc::spawn_program(
                &py,
                &[script.display().to_string()],
                spec,
                &env,
            ))
        }
        HolderLang::Java => {
            // $ETCDLOCK_FAULTS_JAVA_CP: JavaHolder's classes, the etcdlock jar and slf4j-api.
            let cp = holder_env("ETCDLOCK_FAULTS_JAVA_CP", "Java")?;
            let java = std::env::var("ETCDLOCK_FAULTS_JAVA").unwrap_or_else(|_| "java".into());
            // Quick start (C1 only, serial GC): the holder does little but wait.
            let args: Vec<String> = [
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-Dslf4j.internal.verbosity=ERROR",
                "-cp",
                &cp,
                "JavaHolder",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            Ok(ChildProc::spawn_program(&java, &args, spec, &[]))
        }
        HolderLang::Node => {
            // $ETCDLOCK_FAULTS_NODE_PATH: a folder whose `etcdlock` is the Node package.
            let path = holder_env("ETCDLOCK_FAULTS_NODE_PATH", "Node")?;
            let node = std::env::var("ETCDLOCK_FAULTS_NODE").unwrap_or_else(|_| "node".into());
            let script =
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("holders/node_holder.js");
            Ok(ChildProc::spawn_program(
                &node,
                &[script.display().to_string()],
                spec,
                &[("NODE_PATH", path)],
            ))
        }
        HolderLang::C => {
            // $ETCDLOCK_FAULTS_C_HOLDER: holders/c_holder.c built against libetcdlock.so.
            let bin = holder_env("ETCDLOCK_FAULTS_C_HOLDER", "C")?;
            Ok(ChildProc::spawn_program(&bin, &[], spec, &[]))
        }
    }
}
