//! The `etcdlock` command against real etcd.
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use etcd_client::GetOptions;
use etcdlock::{Client, ClientOptions, LockOptions};
use etcdlock_testkit::{etcdctl_bin, Etcd};

/// The etcdlock binary under test: `$ETCDLOCK_CLI_BIN` (e.g. a musl or
/// cross-built one), else the one cargo built for this test.
fn bin_path() -> String {
    std::env::var("ETCDLOCK_CLI_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_etcdlock").to_string())
}

/// Under qemu-user (cli/test-musl.sh's aarch64 run) with no binfmt_misc entry,
/// etcdlock cannot exec itself as the supervisor (the kernel cannot run an
/// aarch64 binary): it says so on stderr and runs without one. The tests of
/// what the supervisor does (and of etcdlock's exact stderr) say they are
/// skipped there; they run natively on glibc and musl.
fn no_supervisor_here(test: &str) -> bool {
    let qemu = std::env::var_os("ETCDLOCK_CLI_QEMU").is_some();
    if qemu {
        eprintln!("{test}: skipped under qemu-user (no binfmt_misc: the supervisor cannot start)");
    }
    qemu
}

fn bin() -> Command {
    let mut c = Command::new(bin_path());
    c.env_remove("ETCDLOCK_ENDPOINTS")
        .env_remove("ETCDLOCK_NAMESPACE");
    c
}

fn count(etcd: &Etcd, prefix: &str) -> usize {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = etcd_client::Client::connect(etcd.endpoints(), None)
            .await
            .unwrap();
        c.get(
            prefix,
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .unwrap()
        .count() as usize
    })
}

/// Poll (20 ms) until `prefix` has `n` keys: these tests drive separate processes.
fn await_count(etcd: &Etcd, prefix: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while count(etcd, prefix) != n {
        assert!(
            Instant::now() < deadline,
            "never saw {n} keys under {prefix}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn run_passes_exit_status_and_environment_through() {
    let etcd = Etcd::single();
    let out = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "run",
            "cli-env",
            "--",
            "sh",
            "-c",
        ])
        .arg("echo \"$ETCDLOCK_FENCING_TOKEN $ETCDLOCK_KEY $ETCDLOCK_LEASE_ID\"; exit 7")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout);
    let parts: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(parts.len(), 3, "{line}");
    assert!(parts[0].parse::<i64>().unwrap() > 0);
    assert_eq!(parts[1], format!("cli-env/{}", parts[2]));
    assert_eq!(
        count(&etcd, "cli-env/"),
        0,
        "released after the command exited"
    );
    // A command that cannot be found: 127, lock released.
    let st = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "run",
            "cli-env",
            "--",
            "/nonexistent/cmd",
        ])
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(127));
    // Unreachable etcd: 69.
    let port = etcdlock_testkit::free_port();
    let st = bin()
        .args([
            "--endpoints",
            &format!("127.0.0.1:{port}"),
            "--connect-timeout",
            "1",
            "run",
            "x",
            "--",
            "true",
        ])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(69));
}

/// Every core option has a flag, and flags follow the one rule: a given flag
/// wins, and a malformed variable for it is ignored.
#[test]
fn every_option_has_a_flag_and_a_given_flag_beats_a_malformed_variable() {
    let etcd = Etcd::single();
    let help = String::from_utf8(bin().arg("--help").output().unwrap().stdout).unwrap();
    for key in etcdlock::OPTION_KEYS {
        let env = format!("ETCDLOCK_{}", key.to_uppercase());
        assert!(
            help.contains(&env),
            "--help names no flag for {key} ({env}):\n{help}"
        );
    }
    let out = bin()
        .env("ETCDLOCK_WATCH_HELD_KEYS", "perhaps")
        .env("ETCDLOCK_REQUEST_TIMEOUT", "soon")
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "--ttl",
            "5",
            "--namespace",
            "flags/",
            "--connect-timeout",
            "2s",
        ])
        .args([
            "--request-timeout",
            "2s",
            "--margin",
            "1s",
            "--watch-held-keys",
            "false",
            "run",
            "all",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Not given: the malformed variable is an error that names it.
    let out = bin()
        .env("ETCDLOCK_WATCH_HELD_KEYS", "perhaps")
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "run",
            "all",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ETCDLOCK_WATCH_HELD_KEYS"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn run_times_out_and_try_reports_held() {
    let etcd = Etcd::single();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c = rt
        .block_on(Client::connect(ClientOptions::new(etcd.endpoints())))
        .unwrap();
    let g = rt.block_on(c.lock("cli-busy")).unwrap();
    let st = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "run",
            "cli-busy",
            "--try",
            "--",
            "true",
        ])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(75));
    let st = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "run",
            "cli-busy",
            // Long enough for connecting to fit in it (--timeout bounds the
            // connect too): under qemu-user on a loaded machine a 0.3 s bound
            // ran out while connecting (exit 69), not while waiting.
            "--timeout",
            "2",
            "--",
            "true",
        ])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(75));
    await_count(&etcd, "cli-busy/", 1);
    rt.block_on(g.unlock()).unwrap();
}

#[test]
fn lost_lock_terminates_the_command() {
    let etcd = Etcd::single();
    let mut child = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "run",
            "cli-lost",
            "--grace",
            "5",
            "--",
            "sh",
            "-c",
        ])
        .arg("trap 'echo got-term; exit 143' TERM; echo started; while true; do sleep 0.05; done")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "started");
    // Revoke the holder's lease from outside.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let revoked_at = Instant::now();
    rt.block_on(async {
        let mut c = etcd_client::Client::connect(etcd.endpoints(), None)
            .await
            .unwrap();
        let r = c
            .get("cli-lost/", Some(GetOptions::new().with_prefix()))
            .await
            .unwrap();
        c.lease_revoke(r.kvs()[0].lease()).await.unwrap();
    });
    let st = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(st.code(), Some(70), "stderr: {err}");
    assert!(
        rest.contains("got-term"),
        "the command got SIGTERM: {rest:?}"
    );
    assert!(err.contains("lost"), "{err}");
    assert!(revoked_at.elapsed() < Duration::from_secs(5));
}

#[test]
fn ctrl_c_while_waiting_removes_the_waiter_key() {
    let etcd = Etcd::single();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c = rt
        .block_on(Client::connect(ClientOptions::new(etcd.endpoints())))
        .unwrap();
    let g = rt.block_on(c.lock("cli-int")).unwrap();
    let child = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "run",
            "cli-int",
            "--",
            "true",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    await_count(&etcd, "cli-int/", 2);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let st = child.wait_with_output().unwrap().status;
    assert_eq!(st.code(), Some(130));
    assert_eq!(count(&etcd, "cli-int/"), 1, "only the holder's key is left");
    rt.block_on(g.unlock()).unwrap();
}

#[test]
fn status_shows_an_etcdctl_holder_and_two_etcdlock_waiters_in_order() {
    let etcd = Etcd::single();
    let mut ctl = Command::new(etcdctl_bin())
        .env("ETCDCTL_API", "3")
        .args([
            &format!("--endpoints={}", etcd.endpoints_csv()),
            "lock",
            "cli-status",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut l = String::new();
    BufReader::new(ctl.stdout.take().unwrap())
        .read_line(&mut l)
        .unwrap();
    let ctl_key = l.trim().to_string();
    let w1 = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "run",
            "cli-status",
            "--",
            "true",
        ])
        .spawn()
        .unwrap();
    await_count(&etcd, "cli-status/", 2);
    let w2 = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "run",
            "cli-status",
            "--",
            "true",
        ])
        .spawn()
        .unwrap();
    await_count(&etcd, "cli-status/", 3);
    let out = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "status",
            "cli-status",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["holder"]["key"], ctl_key.as_str());
    assert_eq!(v["holder"]["foreign"], true);
    assert_eq!(v["holder"]["host"], serde_json::Value::Null);
    let waiters = v["waiters"].as_array().unwrap();
    assert_eq!(waiters.len(), 2);
    assert_eq!(waiters[0]["pid"], w1.id(), "{v}");
    assert_eq!(waiters[1]["pid"], w2.id(), "{v}");
    assert_eq!(
        (
            waiters[0]["position"].as_u64(),
            waiters[1]["position"].as_u64()
        ),
        (Some(1), Some(2))
    );
    assert!(waiters[0]["host"].is_string() && waiters[0]["foreign"] == false);
    assert!(waiters[0]["fencing_token"].as_i64() < waiters[1]["fencing_token"].as_i64());
    assert!(waiters[0]["ttl_remaining_s"].as_i64().unwrap() > 0);
    assert!(waiters[0]["age_ms"].as_u64().is_some());
    // The table form names the same keys.
    let table = bin()
        .args(["--endpoints", &etcd.endpoints_csv(), "status", "cli-status"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("1 holding, 2 waiting") && table.contains(&ctl_key),
        "{table}"
    );
    unsafe { libc::kill(ctl.id() as i32, libc::SIGINT) };
    ctl.wait().unwrap();
    for mut w in [w1, w2] {
        assert!(w.wait().unwrap().success());
    }
    await_count(&etcd, "cli-status/", 0);
}

#[test]
fn etcdlock_run_and_etcdctl_lock_exclude_each_other() {
    let etcd = Etcd::single();
    let dir = etcd.dir().join("counter");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("n");
    std::fs::write(&file, "0").unwrap();
    // A non-atomic increment that is only correct under mutual exclusion; the
    // overlap marker catches two holders at once even if the count came out right.
    let script = format!(
        "[ -e {d}/inside ] && echo overlap >> {d}/violations; touch {d}/inside; n=$(cat {f}); sleep 0.02; echo $((n+1)) > {f}; rm {d}/inside",
        d = dir.display(),
        f = file.display()
    );
    let mut kids = Vec::new();
    for i in 0..12 {
        let cmd = if i % 2 == 0 {
            let mut c = bin();
            c.args([
                "--endpoints",
                &etcd.endpoints_csv(),
                "run",
                "cli-mix",
                "--",
                "sh",
                "-c",
                &script,
            ]);
            c
        } else {
            let mut c = Command::new(etcdctl_bin());
            c.env("ETCDCTL_API", "3").args([
                &format!("--endpoints={}", etcd.endpoints_csv()),
                "lock",
                "cli-mix",
                "--",
                "sh",
                "-c",
                &script,
            ]);
            c
        };
        let mut cmd = cmd;
        kids.push(cmd.stdout(Stdio::null()).spawn().unwrap());
    }
    for mut k in kids {
        assert!(k.wait().unwrap().success());
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "12");
    assert!(!dir.join("violations").exists(), "two holders overlapped");
}

#[test]
fn permits_read_side_elect_leader_and_status_of_every_kind() {
    let etcd = Etcd::single();
    let ep = etcd.endpoints_csv();
    // Two of two permits held by commands that wait for a file; a third waits.
    let dir = tempdir();
    let gate = dir.join("go");
    let hold = |name: &str, extra: &[&str]| {
        let mut c = bin();
        c.args(["--endpoints", &ep, "run", name])
            .args(extra)
            .args(["--", "sh", "-c"]);
        c.arg(format!(
            "while [ ! -e {} ]; do sleep 0.02; done",
            gate.display()
        ));
        c.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut p1 = hold("pool", &["--permits", "2"]);
    let mut p2 = hold("pool", &["--permits", "2"]);
    await_count(&etcd, "pool/", 2);
    let st = bin()
        .args([
            "--endpoints",
            &ep,
            "run",
            "pool",
            "--permits",
            "2",
            "--try",
            "--",
            "true",
        ])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(75), "a third permit is not free");
    let out = bin()
        .args(["--endpoints", &ep, "status", "pool", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["holders"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(
        (
            v["holders"][0]["contender"].as_str(),
            v["holders"][0]["permits"].as_u64()
        ),
        (Some("permit"), Some(2))
    );
    assert_eq!(v["kind"], "semaphore");

    // Readers share; status shows both as holders.
    let mut r1 = hold("doc", &["--read"]);
    let mut r2 = hold("doc", &["--read"]);
    await_count(&etcd, "doc/", 2);
    let out = bin()
        .args(["--endpoints", &ep, "status", "doc", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["holders"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["holders"][1]["contender"], "reader");
    assert_eq!(v["kind"], "rwlock");
    let st = bin()
        .args(["--endpoints", &ep, "run", "doc", "--try", "--", "true"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(75), "a writer is excluded by readers");

    // No leader yet: "-" and exit 3. Then elect runs its command while leader.
    let out = bin()
        .args(["--endpoints", &ep, "leader", "sched"])
        .output()
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        ),
        (Some(3), "-".to_string())
    );
    let mut leader = bin();
    leader.args([
        "--endpoints",
        &ep,
        "elect",
        "sched",
        "node-1",
        "--",
        "sh",
        "-c",
    ]);
    leader.arg(format!(
        "while [ ! -e {} ]; do sleep 0.02; done",
        gate.display()
    ));
    let mut leader = leader
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    await_count(&etcd, "sched/", 1);
    let out = bin()
        .args(["--endpoints", &ep, "leader", "sched"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("node-1\tsched/"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // `etcdctl elect -l` is not needed here: core's tests cover etcdctl interop.
    let mut watch = bin()
        .args(["--endpoints", &ep, "leader", "sched", "--watch"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    assert!(lines.next().unwrap().unwrap().starts_with("node-1\t"));

    std::fs::write(&gate, b"").unwrap();
    for c in [&mut p1, &mut p2, &mut r1, &mut r2, &mut leader] {
        assert!(c.wait().unwrap().success());
    }
    assert_eq!(
        lines.next().unwrap().unwrap(),
        "-",
        "the watcher sees the leader go"
    );
    unsafe { libc::kill(watch.id() as i32, libc::SIGINT) };
    assert!(watch.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "etcdlock-cli-{}-{}",
        std::process::id(),
        etcdlock_testkit::free_port()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `etcdlock bench` (short) prints every row, with the handoff measured against
/// both Delete->event floors (idle, and beside the contenders), and leaves no
/// key behind. (`etcdlock bench` exists with the CLI's `bench` feature only.)
#[cfg(feature = "bench")]
#[test]
fn bench_reports_every_row_and_leaves_nothing_behind() {
    let etcd = Etcd::single();
    let out = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "bench",
            "--use-endpoints",
            "--json",
        ])
        .args([
            "--iterations",
            "40",
            "--duration",
            "2",
            "--distinct",
            "5",
            "--contenders",
            "3",
        ])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    let rows: std::collections::HashMap<String, serde_json::Value> =
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{l}: {e}"))
            })
            .map(|r| (r["metric"].as_str().unwrap().to_string(), r))
            .collect();
    for m in [
        "floor_txn_delete",
        "floor_delete_to_event",
        "uncontended_lock_unlock",
        "contended",
        "distinct_locks_one_session",
    ] {
        assert!(rows.contains_key(m), "no {m} row in {rows:?}");
    }
    assert_eq!(rows["uncontended_lock_unlock"]["n"], 40);
    assert_eq!(rows["floor_txn_delete"]["n"], 40);
    let c = &rows["contended"];
    assert!(c["acquisitions"].as_u64().unwrap() > 3, "{c}");
    // The probe beside the contenders made rounds every 10 ms for 2 s (10 are warm-up).
    assert!(c["loaded_event_floor_n"].as_u64().unwrap() >= 20, "{c}");
    assert!(
        c["handoff_ratio_to_loaded_event_floor"].as_f64().unwrap() > 0.0,
        "{c}"
    );
    let d = &rows["distinct_locks_one_session"];
    assert_eq!(
        (
            d["held"].as_u64(),
            d["errors"].as_u64(),
            d["leases"].as_u64()
        ),
        (Some(5), Some(0), Some(1)),
        "{d}"
    );
    assert_eq!(
        count(&etcd, "etcdlock-bench-"),
        0,
        "the bench left keys behind"
    );
    assert_eq!(count(&etcd, "bench-"), 0, "the floors left keys behind");
}

#[test]
fn completions_and_the_man_page_come_from_the_binary() {
    for (shell, marker) in [
        ("bash", "_etcdlock()"),
        ("zsh", "#compdef etcdlock"),
        ("fish", "complete -c etcdlock"),
    ] {
        let out = bin().args(["completions", shell]).output().unwrap();
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains(marker) && text.contains("run") && text.contains("status"),
            "{shell}: {text}"
        );
    }
    let out = bin().arg("man").output().unwrap();
    assert!(out.status.success());
    let man = String::from_utf8(out.stdout).unwrap();
    assert!(
        man.contains(".TH etcdlock 1") && man.contains("completions"),
        "{man}"
    );
    // A shell clap does not know is a usage error, exit 2, one line.
    let out = bin().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Every bad argument is a usage error: exit 2, one line on stderr, no panic.
#[test]
fn bad_arguments_exit_2_with_one_line() {
    let cases: &[&[&str]] = &[
        &["run", "x", "--timeout", "nan", "--", "true"],
        &["run", "x", "--timeout", "-1", "--", "true"],
        &["run", "x", "--timeout", "1e20", "--", "true"],
        &["run", "x", "--timeout", "5x", "--", "true"],
        &["run", "x", "--timeout", "", "--", "true"],
        &["run", "x", "--grace", "nan", "--", "true"],
        &["run", "x", "--grace", "-2", "--", "true"],
        &["run", "x", "--signal", "NOPE", "--", "true"],
        &["run", "x"],
        &["elect", "e", "v", "--timeout", "inf2", "--", "true"],
        &["elect", "e", "v", "--grace", "1e400", "--", "true"],
        &["bench", "--duration", "inf"],
        &["bench", "--duration", "nan"],
        &["--endpoints", "", "run", "x", "--", "true"],
        &["--endpoints", " , ", "status", "x"],
        &["--ttl", "1.5", "run", "x", "--", "true"],
        &["--request-timeout", "inf", "status", "x"],
        &["--connect-timeout", "-5", "status", "x"],
        &["no-such-command"],
        &["status", ""],
        &["status", "bad\\x"],
        &["status", "bad\\u{d800}"],
        &["run", "bad\\u{zz}", "--", "true"],
        &["completions"],
    ];
    for args in cases {
        let out = bin()
            .args(*args)
            .env("ETCDLOCK_ENDPOINTS", "127.0.0.1:1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: exit {:?}, stderr {err}",
            out.status.code()
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err:?}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// Durations take core's syntax everywhere, and inf/never where no limit makes sense.
#[test]
fn durations_take_one_syntax_and_inf_where_it_makes_sense() {
    let etcd = Etcd::single();
    for args in [
        &[
            "run",
            "d",
            "--timeout",
            "5s",
            "--grace",
            "500ms",
            "--",
            "true",
        ][..],
        &[
            "run",
            "d",
            "--timeout",
            "inf",
            "--grace",
            "never",
            "--",
            "true",
        ],
        &["run", "d", "--timeout", "2.5", "--", "true"],
        &["elect", "d-e", "v", "--timeout", "1m", "--", "true"],
    ] {
        let out = bin()
            .args(["--endpoints", &etcd.endpoints_csv()])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `list` and `watch` show every kind under a prefix, with etcdctl holders as
/// foreign and the local queue of a client with 1,000 waiters.
#[test]
fn list_and_watch_show_every_kind_and_the_local_queues() {
    let etcd = Etcd::single();
    let eps = etcd.endpoints_csv();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // This process: a held mutex and 1,000 waiters behind it in a second client.
    let (a, b) = rt.block_on(async {
        let o = ClientOptions::new(etcd.endpoints());
        (
            Client::connect(o.clone()).await.unwrap(),
            Client::connect(o).await.unwrap(),
        )
    });
    let held = rt.block_on(a.lock("fleet/orders")).unwrap();
    let waiters: Vec<_> = (0..1000)
        .map(|_| {
            let b = b.clone();
            rt.spawn(async move { b.lock("fleet/orders").await?.unlock().await })
        })
        .collect();
    // Other processes: a CLI waiter on it, a leader, a semaphore holder, a
    // reader with a writer queued, an etcdctl holder, and a name with a newline.
    let sleeper = |args: &[&str]| {
        bin()
            .args(["--endpoints", &eps])
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut procs = vec![
        sleeper(&["run", "fleet/orders", "--", "true"]),
        sleeper(&["elect", "fleet/leader", "node-a", "--", "sleep", "30"]),
        sleeper(&["run", "fleet/sem", "--permits", "3", "--", "sleep", "30"]),
        sleeper(&["run", "fleet/rw", "--read", "--", "sleep", "30"]),
        sleeper(&["run", "fleet/odd\\nname", "--", "sleep", "30"]),
    ];
    await_count(&etcd, "fleet/rw/", 1);
    procs.push(sleeper(&["run", "fleet/rw", "--", "true"]));
    let mut ctl = Command::new(etcdctl_bin())
        .env("ETCDCTL_API", "3")
        .args([&format!("--endpoints={eps}"), "lock", "fleet/ctl"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    BufReader::new(ctl.stdout.take().unwrap())
        .read_line(&mut String::new())
        .unwrap();
    await_count(&etcd, "fleet/rw/", 2);
    await_count(&etcd, "fleet/orders/", 4); // holder, two local waiters of b, the CLI waiter
                                            // Until every meta record is written (each within ~200 ms of its use).
    let deadline = Instant::now() + Duration::from_secs(10);
    let v = loop {
        let out = bin()
            .args(["--endpoints", &eps, "list", "fleet/", "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let locks = v["locks"].as_array().unwrap();
        let known = locks.iter().filter(|l| !l["kind"].is_null()).count();
        let local = locks
            .iter()
            .flat_map(|l| l["waiters"].as_array().unwrap())
            .any(|w| w["local_waiters"] == 1000);
        if (known == 5 && local) || Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let lock = |n: &str| {
        v["locks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == n)
            .cloned()
            .unwrap_or_else(|| panic!("{n} in {v}"))
    };
    let names: Vec<&str> = v["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "fleet/ctl",
            "fleet/leader",
            "fleet/odd\nname",
            "fleet/orders",
            "fleet/rw",
            "fleet/sem"
        ]
    );
    let orders = lock("fleet/orders");
    assert_eq!(orders["kind"], "mutex");
    assert_eq!(orders["holder"]["pid"], std::process::id());
    assert_eq!(orders["holder"]["fencing_token"], held.fencing_token());
    assert_eq!(orders["waiters"].as_array().unwrap().len(), 3);
    assert!(
        orders["waiters"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["local_waiters"] == 1000)
            .count()
            == 2,
        "{orders}"
    );
    assert_eq!(lock("fleet/leader")["kind"], "election");
    assert_eq!(lock("fleet/leader")["holder"]["value"], "node-a");
    assert_eq!(lock("fleet/sem")["kind"], "semaphore");
    assert_eq!(lock("fleet/sem")["holder"]["permits"], 3);
    assert_eq!(lock("fleet/rw")["kind"], "rwlock");
    assert_eq!(lock("fleet/rw")["holder"]["contender"], "reader");
    assert_eq!(lock("fleet/rw")["waiters"][0]["contender"], "exclusive");
    assert_eq!(lock("fleet/ctl")["holder"]["foreign"], true);
    assert!(lock("fleet/ctl")["kind"].is_null());
    // The table shows the odd name escaped, on one line, and the local queue.
    let out = bin()
        .args(["--endpoints", &eps, "list", "fleet/"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(table.lines().count(), 7, "{table}");
    assert!(table.contains("fleet/odd\\nname"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("fleet/orders") && l.contains("1001")),
        "{table}"
    );
    // The escaped name is accepted back.
    let out = bin()
        .args(["--endpoints", &eps, "status", "fleet/odd\\nname", "--json"])
        .output()
        .unwrap();
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["holders"].as_array().unwrap().len(), 1, "{st}");
    // watch --json: a document now, and another when the leader resigns.
    let mut w = bin()
        .args(["--endpoints", &eps, "watch", "fleet/leader", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(w.stdout.take().unwrap()).lines();
    let first: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["locks"][0]["holder"]["value"], "node-a");
    unsafe { libc::kill(procs[1].id() as i32, libc::SIGTERM) };
    let gone = loop {
        let v: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        if v["locks"].as_array().unwrap().is_empty() {
            break v;
        }
    };
    assert_eq!(gone["prefix"], "fleet/leader");
    w.kill().unwrap();
    w.wait().unwrap();
    // Clean up.
    unsafe { libc::kill(ctl.id() as i32, libc::SIGINT) };
    ctl.wait().unwrap();
    rt.block_on(held.unlock()).unwrap();
    for t in waiters {
        rt.block_on(t).unwrap().unwrap();
    }
    for mut p in procs {
        unsafe { libc::kill(p.id() as i32, libc::SIGTERM) };
        p.wait().unwrap();
    }
    rt.block_on(async {
        a.close().await;
        b.close().await;
    });
    await_count(&etcd, "fleet/", 0);
}

/// `--metrics-listen` serves Prometheus text a real parser reads, and
/// `--log-format json` writes one JSON object per line.
#[test]
fn run_serves_metrics_and_logs_json() {
    if no_supervisor_here("run_serves_metrics_and_logs_json") {
        return;
    }
    let etcd = Etcd::single();
    let dir = tempdir();
    let gate = dir.join("go");
    let port = etcdlock_testkit::free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut run = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "--log-format",
            "json",
            "run",
            "metered",
            "--metrics-listen",
            &addr,
            "--",
            "sh",
            "-c",
        ])
        .arg(format!(
            "while [ ! -e {} ]; do sleep 0.02; done",
            gate.display()
        ))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(run.stderr.take().unwrap()).lines();
    let acquired: serde_json::Value =
        serde_json::from_str(&stderr.next().unwrap().unwrap()).unwrap();
    assert_eq!(
        (
            acquired["event"].as_str(),
            acquired["lock"].as_str(),
            acquired["level"].as_str()
        ),
        (Some("acquired"), Some("metered"), Some("info"))
    );
    assert!(
        acquired["fencing_token"].as_i64().unwrap() > 0 && acquired["ts_ms"].as_u64().is_some()
    );
    let scrape = |path: &str| {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let reply = scrape("/metrics");
    assert!(
        reply.starts_with("HTTP/1.1 200 OK\r\n") && reply.contains("text/plain; version=0.0.4"),
        "{reply}"
    );
    let body = reply.split("\r\n\r\n").nth(1).unwrap();
    let parsed = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string())))
        .expect("valid exposition text");
    let value = |name: &str, label: Option<(&str, &str)>| {
        parsed
            .samples
            .iter()
            .find(|s| {
                s.metric == name
                    && s.labels.get("lock") == Some("metered")
                    && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v))
            })
            .map(|s| s.value.clone())
            .unwrap_or_else(|| panic!("{name} {label:?} in {body}"))
    };
    assert_eq!(
        value("etcdlock_held", None),
        prometheus_parse::Value::Gauge(1.0)
    );
    assert_eq!(
        value("etcdlock_waiting", None),
        prometheus_parse::Value::Gauge(0.0)
    );
    assert_eq!(
        value("etcdlock_lost_total", Some(("reason", "KeyDeleted"))),
        prometheus_parse::Value::Counter(0.0)
    );
    match value("etcdlock_acquire_seconds", Some(("result", "acquired"))) {
        prometheus_parse::Value::Histogram(h) => {
            assert_eq!(h.last().map(|b| b.count), Some(1.0), "{h:?}")
        }
        v => panic!("not a histogram: {v:?}"),
    }
    for m in etcdlock::METRICS {
        assert!(
            parsed.docs.contains_key(m.prometheus),
            "{} documented",
            m.prometheus
        );
    }
    assert!(scrape("/").starts_with("HTTP/1.1 404"));
    std::fs::write(&gate, b"").unwrap();
    assert!(run.wait().unwrap().success());
    let released: serde_json::Value =
        serde_json::from_str(&stderr.next().unwrap().unwrap()).unwrap();
    assert_eq!(
        (released["event"].as_str(), released["exit"].as_i64()),
        (Some("released"), Some(0))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `release` frees a wedged holder by its fencing token; the holder's
/// command is told (exit 70) and the next waiter runs.
#[test]
fn release_frees_a_wedged_holder_by_token() {
    let etcd = Etcd::single();
    let eps = etcd.endpoints_csv();
    let mut wedged = bin()
        .args([
            "--endpoints",
            &eps,
            "run",
            "wedge",
            "--grace",
            "1s",
            "--",
            "sleep",
            "60",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    await_count(&etcd, "wedge/", 1);
    let out = bin()
        .args(["--endpoints", &eps, "status", "wedge", "--json"])
        .output()
        .unwrap();
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let token = st["holder"]["fencing_token"].as_i64().unwrap();
    let out = bin()
        .args([
            "--endpoints",
            &eps,
            "release",
            "wedge",
            "--token",
            &(token + 1).to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "no hold has that token");
    let out = bin()
        .args([
            "--endpoints",
            &eps,
            "release",
            "wedge",
            "--token",
            &token.to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("fencing token {token}")));
    assert_eq!(
        wedged.wait().unwrap().code(),
        Some(70),
        "the holder learns it lost the lock"
    );
    await_count(&etcd, "wedge/", 0);
    let out = bin()
        .args(["--endpoints", &eps, "release", "wedge"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "nobody holds");
}

/// `--lazy-connect true`: a command started while etcd is down reaches it within its own
/// timeout (a boot script need not order the lock after etcd); without it the command fails
/// at once with the Unavailable exit status.
#[test]
fn lazy_connect_lets_a_command_wait_for_etcd_within_its_timeout() {
    let mut etcd = Etcd::single();
    let ep = etcd.endpoints_csv();
    etcd.kill(0);
    let eager = bin()
        .args([
            "--endpoints",
            &ep,
            "--connect-timeout",
            "500ms",
            "run",
            "lazy",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_ne!(
        eager.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&eager.stderr)
    );
    let t = std::time::Instant::now();
    let child = bin()
        .args([
            "--endpoints",
            &ep,
            "--lazy-connect",
            "true",
            "run",
            "lazy",
            "--timeout",
            "20s",
            "--",
            "true",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    etcd.restart(0);
    let up = t.elapsed();
    let out = child.wait_with_output().unwrap();
    let took = t.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        took < up + Duration::from_secs(3),
        "ran {took:?} after start, etcd was up at {up:?}"
    );
    let bad = bin()
        .args(["--endpoints", &ep, "--lazy-connect", "soon", "status", "x"])
        .output()
        .unwrap();
    assert_eq!(
        bad.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// Issue 32 in Rust with a real SIGKILL: `etcdlock run --lock-delay 3s`
/// (TTL 2 s) holds; it is killed with SIGKILL (its supervisor kills the
/// command's group); a waiter gets the lock no earlier than 3 s after etcd
/// removed the key, and no later than TTL + delay + 1 s (headroom) + slack
/// after the kill. The holder's metadata shows in `status --json`.
#[test]
fn lock_delay_outlasts_a_holder_killed_with_sigkill() {
    let etcd = Etcd::single();
    let ep = etcd.endpoints_csv();
    let mut holder = bin()
        .args([
            "--endpoints",
            &ep,
            "--ttl",
            "2",
            "run",
            "cli-delay",
            "--lock-delay",
            "3s",
            "--meta",
            "app=billing",
            "-v",
            "--",
            "sleep",
            "60",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    await_count(&etcd, "cli-delay/", 1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let c = rt
        .block_on(Client::connect(
            ClientOptions::new(etcd.endpoints()).with_ttl(10),
        ))
        .unwrap();
    // The metadata reaches the meta record ~100 ms into the hold.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let out = bin()
            .args(["--endpoints", &ep, "status", "cli-delay", "--json"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if v["holder"]["metadata"]["app"] == "billing" {
            break;
        }
        assert!(Instant::now() < deadline, "no metadata in status: {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let token = rt.block_on(c.status("cli-delay")).unwrap().holders[0].create_revision;
    let c2 = c.clone();
    let waiter = rt.spawn(async move {
        let g = c2
            .lock_with(
                "cli-delay",
                etcdlock::LockOptions::timeout(Duration::from_secs(20)),
            )
            .await;
        (g, Instant::now())
    });
    // The waiter queued (2 keys), then SIGKILL.
    await_count(&etcd, "cli-delay/", 2);
    let killed = Instant::now();
    holder.kill().unwrap();
    holder.wait().unwrap();
    let mut gone = None;
    while gone.is_none() {
        let st = rt.block_on(c.status("cli-delay")).unwrap();
        if !st
            .holders
            .iter()
            .chain(st.waiters.iter())
            .any(|h| h.create_revision == token)
        {
            gone = Some(Instant::now());
        }
        assert!(
            killed.elapsed() < Duration::from_secs(6),
            "the killed holder's key never expired"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (g, at) = rt.block_on(waiter).unwrap();
    let g = g.unwrap();
    let (after_gone, after_kill) = (at - gone.unwrap(), at - killed);
    eprintln!("lock-delay 3 s, TTL 2 s: key gone {:?} after SIGKILL, granted {after_gone:?} after that ({after_kill:?} after the kill)", gone.unwrap() - killed);
    assert!(
        after_gone >= Duration::from_millis(2950),
        "granted {after_gone:?} after the key went (lock-delay 3 s)"
    );
    assert!(
        after_kill < Duration::from_secs(2 + 3 + 1 + 2),
        "granted {after_kill:?} after the kill"
    );
    rt.block_on(g.unlock()).unwrap();
    rt.block_on(c.close());
}

/// `etcdlock latch` and `etcdlock barrier` between processes.
#[test]
fn latch_and_barrier_commands_between_processes() {
    let etcd = Etcd::single();
    let ep = etcd.endpoints_csv();
    let run = |args: &[&str]| {
        bin()
            .args(["--endpoints", &ep, "--ttl", "2"])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let waiter = run(&[
        "latch",
        "cli-l",
        "--count",
        "2",
        "--wait",
        "--timeout",
        "20s",
    ]);
    let downs: Vec<_> = (0..2)
        .map(|_| run(&["latch", "cli-l", "--count", "2", "--count-down"]))
        .collect();
    for d in downs {
        assert!(d.wait_with_output().unwrap().status.success());
    }
    let out = waiter.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    let parties: Vec<_> = (0..3)
        .map(|_| run(&["barrier", "cli-b", "--parties", "3", "--timeout", "20s"]))
        .collect();
    let mut idx: Vec<u32> = parties
        .into_iter()
        .map(|p| {
            let o = p.wait_with_output().unwrap();
            assert!(o.status.success());
            String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
        })
        .collect();
    idx.sort();
    assert_eq!(idx, vec![0, 1, 2]);
    // A lone party times out: exit 75.
    let st = bin()
        .args([
            "--endpoints",
            &ep,
            "--ttl",
            "2",
            "barrier",
            "cli-b2",
            "--parties",
            "2",
            "--timeout",
            "300ms",
        ])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(75));
    // A bad count is InvalidArgument, a usage error: exit 2, one line on stderr.
    let out = bin()
        .args(["--endpoints", &ep, "latch", "cli-l0", "--count", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("count must be between 1"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every process closed: the keys go within the TTL.
    let deadline = Instant::now() + Duration::from_secs(6);
    while count(&etcd, "cli-") != 0 {
        if Instant::now() >= deadline {
            let out = Command::new(etcdctl_bin())
                .args(["--endpoints", &ep, "get", "--prefix", "cli-", "--keys-only"])
                .output()
                .unwrap();
            let leases = Command::new(etcdctl_bin())
                .args(["--endpoints", &ep, "lease", "list"])
                .output()
                .unwrap();
            panic!(
                "latch/barrier keys left: {:?} leases {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&leases.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `watch` on a client with `--lazy-connect true` reaches etcd on its first
/// use (it takes the raw etcd handle before anything else) and prints its
/// first view; no panic.
#[test]
fn watch_with_lazy_connect_connects_on_first_use() {
    let etcd = Etcd::single();
    let mut child = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "--lazy-connect",
            "true",
            "watch",
            "lazy-watch/",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| {
        panic!(
            "first view {line:?} ({e}); exit {:?}, stderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(v["locks"].as_array().map(Vec::len), Some(0), "{v}");
}

/// Standard output is a pipe whose reader has gone (`etcdlock ... | true`):
/// every command that prints ends with exit 0 and nothing on stderr. The
/// read end is closed before the command starts, so its first write fails
/// with EPIPE every time.
#[test]
fn a_closed_stdout_pipe_ends_every_printing_command_with_exit_0() {
    let etcd = Etcd::single();
    let eps = etcd.endpoints_csv();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c = rt
        .block_on(Client::connect(ClientOptions::new(etcd.endpoints())))
        .unwrap();
    let g = rt.block_on(c.lock("piped/held")).unwrap();
    let cases: &[&[&str]] = &[
        &["completions", "bash"],
        &["completions", "zsh"],
        &["man"],
        &["--endpoints", &eps, "list"],
        &["--endpoints", &eps, "list", "--json"],
        &["--endpoints", &eps, "list", "piped/", "--json"],
        &["--endpoints", &eps, "watch", "--json"],
        &["--endpoints", &eps, "watch"],
        &["--endpoints", &eps, "status", "piped/held"],
        &["--endpoints", &eps, "status", "piped/held", "--json"],
        &[
            "--endpoints",
            &eps,
            "latch",
            "piped/latch",
            "--count",
            "2",
            "--count-down",
        ],
        &[
            "--endpoints",
            &eps,
            "barrier",
            "piped/barrier",
            "--parties",
            "1",
        ],
        &["--endpoints", &eps, "release", "piped/held"],
    ];
    for args in cases {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = bin()
            .args(*args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!((out.status.code(), err.as_ref()), (Some(0), ""), "{args:?}");
    }
    // The same through a shell, as a user types it (`true` may exit before
    // or after the write: exit 0 either way).
    for cmd in [
        "completions bash",
        &format!("--endpoints {eps} list --json"),
    ] {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!("\"$0\" {cmd} | true; echo \"${{PIPESTATUS[0]}}\""))
            .arg(bin_path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            (String::from_utf8_lossy(&out.stdout).trim(), err.as_ref()),
            ("0", ""),
            "{cmd} | true"
        );
    }
    drop(g);
    rt.block_on(c.close());
}

/// `list` and `watch` without a prefix show every lock under the client's
/// namespace (the help shows `[PREFIX]` as optional).
#[test]
fn list_and_watch_without_a_prefix_show_every_lock_of_the_namespace() {
    let etcd = Etcd::single();
    let eps = etcd.endpoints_csv();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (ns, plain) = rt.block_on(async {
        let o = ClientOptions::new(etcd.endpoints());
        (
            Client::connect(o.clone().with_namespace("team/"))
                .await
                .unwrap(),
            Client::connect(o).await.unwrap(),
        )
    });
    let held = [
        // With metadata, so that each hold has a meta record (a plain one has none).
        rt.block_on(ns.lock_with("alpha", LockOptions::default().with_metadata("job", "a")))
            .unwrap(),
        rt.block_on(ns.lock_with("beta/x", LockOptions::default().with_metadata("job", "b")))
            .unwrap(),
        rt.block_on(plain.lock("other")).unwrap(),
    ];
    // The namespaced client's meta records are written (they are not locks, seen from the root).
    await_count(&etcd, &format!("team/{}", etcdlock::META_PREFIX), 2);
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["locks"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_string())
            .collect()
    };
    for (namespace, want) in [
        (None, &["other", "team/alpha", "team/beta/x"][..]),
        (Some("team/"), &["alpha", "beta/x"][..]),
    ] {
        let base = |args: &[&str]| {
            let mut c = bin();
            c.args(["--endpoints", &eps]);
            if let Some(n) = namespace {
                c.args(["--namespace", n]);
            }
            c.args(args);
            c
        };
        let out = base(&["list", "--json"]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{namespace:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            names(&serde_json::from_slice(&out.stdout).unwrap()),
            want,
            "list --json, namespace {namespace:?}"
        );
        let out = base(&["list"]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{namespace:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let table = String::from_utf8_lossy(&out.stdout);
        assert_eq!(table.lines().count(), 1 + want.len(), "{table}");
        for n in want {
            assert!(table.lines().any(|l| l.starts_with(n)), "{n} in\n{table}");
        }
        let mut w = base(&["watch", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(w.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let _ = w.kill();
        let out = w.wait_with_output().unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!(
                "watch {line:?} ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_eq!(names(&v), want, "watch --json, namespace {namespace:?}");
    }
    for g in held {
        rt.block_on(g.unlock()).unwrap();
    }
}

/// A value core refuses is a usage error like a value clap refuses: exit 2,
/// one line, whether core sees it before connecting (TTL, endpoints) or at
/// the call (permits, a 100 KB name).
#[test]
fn values_core_refuses_exit_2_like_every_usage_error() {
    let etcd = Etcd::single();
    let eps = etcd.endpoints_csv();
    let long = "n".repeat(100 * 1024);
    let cases: &[&[&str]] = &[
        &["--ttl", "99999999999", "run", "x", "--", "true"],
        &["--ttl", "0", "run", "x", "--", "true"],
        &["--endpoints", "ftp://h:1", "run", "x", "--", "true"],
        &["--endpoints", "http://h:99999", "status", "x"],
        &["--endpoints", "", "status", "x"],
        &[
            "--endpoints",
            &eps,
            "run",
            "x",
            "--permits",
            "2000",
            "--",
            "true",
        ],
        &["--endpoints", &eps, "run", &long, "--", "true"],
        &["--endpoints", &eps, "status", &long],
        &[
            "--endpoints",
            &eps,
            "--tls-ca",
            "/nonexistent/ca.pem",
            "status",
            "x",
        ],
    ];
    for args in cases {
        let out = bin().args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let shown: Vec<&str> = args
            .iter()
            .map(|a| if a.len() > 40 { "<100 KB>" } else { a })
            .collect();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{shown:?}: stderr {}",
            err.chars().take(300).collect::<String>()
        );
        assert_eq!(err.lines().count(), 1, "{shown:?}: not one line");
        assert!(
            err.contains("InvalidArgument") || err.contains("empty"),
            "{shown:?}: {}",
            err.chars().take(300).collect::<String>()
        );
    }
    assert_eq!(count(&etcd, "x/"), 0, "nothing was written");
}

/// The `/metrics` listener: a client that connects and sends nothing is
/// dropped after the scrape timeout (5 s) and never delays another scrape.
/// Out of file descriptors (the child's RLIMIT_NOFILE lowered with prlimit
/// to its highest open descriptor + 1, every hole below filled by silent
/// clients, one more connection waiting in the backlog), accept fails with
/// EMFILE: the listener backs off instead of retrying at once (a spin would
/// burn about a core), and serves again once descriptors are free.
#[test]
fn metrics_listener_drops_silent_clients_and_backs_off_on_emfile() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    let etcd = Etcd::single();
    let dir = tempdir();
    let gate = dir.join("go");
    let addr = format!("127.0.0.1:{}", etcdlock_testkit::free_port());
    let mut run = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "--log-format",
            "json",
            "run",
            "scraped",
            "--metrics-listen",
            &addr,
            "--",
            "sh",
            "-c",
        ])
        .arg(format!(
            "while [ ! -e {} ]; do sleep 0.02; done",
            gate.display()
        ))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(run.stderr.take().unwrap()).lines();
    let acquired = stderr.next().unwrap().unwrap();
    assert!(acquired.contains("\"acquired\""), "{acquired}");
    let scrape = || {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };

    // A silent client: another scrape answers meanwhile; it is dropped after 5 s.
    let silent = TcpStream::connect(&addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let t = Instant::now();
    let reply = scrape();
    assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "a scrape beside a silent client took {:?}",
        t.elapsed()
    );
    let r = (&silent).read(&mut [0u8; 1]);
    let dropped = t.elapsed();
    eprintln!("silent client: {r:?} after {dropped:?}");
    assert!(
        matches!(r, Ok(0)),
        "the silent client was not dropped: {r:?} after {dropped:?}"
    );
    assert!(
        dropped >= Duration::from_millis(4500) && dropped < Duration::from_secs(8),
        "dropped after {dropped:?}"
    );

    // EMFILE.
    let pid = run.id() as libc::pid_t;
    let fds = || -> Vec<u64> {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect()
    };
    let cpu_ms = || -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let f: Vec<&str> = s[s.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        ticks * 1000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64
    };
    let top = *fds().iter().max().unwrap();
    let limit = (top + 1) as usize;
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    assert_eq!(
        unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) },
        0
    );
    let low = libc::rlimit {
        rlim_cur: limit as u64,
        rlim_max: old.rlim_max,
    };
    assert_eq!(
        unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &low, std::ptr::null_mut()) },
        0,
        "{}",
        std::io::Error::last_os_error()
    );
    // Silent clients until every descriptor below the limit is taken (a
    // descriptor freed meanwhile is one more hole), then two more that wait.
    let mut held: Vec<TcpStream> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(4);
    loop {
        let open = fds().len();
        if open >= limit {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the holes were never filled: {open} of {limit} open"
        );
        held.extend((open..limit).map(|_| TcpStream::connect(&addr).unwrap()));
        let until = Instant::now() + Duration::from_millis(200);
        while fds().len() < limit && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    held.extend((0..2).map(|_| TcpStream::connect(&addr).unwrap()));
    let (c0, t0) = (cpu_ms(), Instant::now());
    std::thread::sleep(Duration::from_millis(1500));
    let (used, window) = (cpu_ms() - c0, t0.elapsed());
    eprintln!(
        "EMFILE: {used} ms of CPU in {window:?} ({} silent clients, {limit} descriptors open)",
        held.len()
    );
    assert!(
        used < 150,
        "accept spun on EMFILE: {used} ms of CPU in {window:?}"
    );
    assert_eq!(
        unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &old, std::ptr::null_mut()) },
        0
    );
    drop(held);
    let reply = scrape();
    assert!(
        reply.starts_with("HTTP/1.1 200 OK"),
        "after EMFILE: {reply}"
    );

    std::fs::write(&gate, b"").unwrap();
    assert!(run.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shipped CLI has no in-process store (core's `mem` feature is off): a
/// `mem://` endpoint is a usage error that says so, not a hang or a panic.
#[test]
fn a_mem_endpoint_is_refused_by_the_cli_with_the_reason() {
    let out = bin()
        .args(["--endpoints", "mem://", "list"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("`mem` feature"), "{err}");
}

/// `once`: a job runs on one node only, on core's run-once record (the one
/// Java's `@SchedulerLock` provider and Python's and Node's `once` take):
/// while one `once` runs, another `once` and a core client's `once_take`
/// of the same name are refused; `--at-least` keeps it taken after the
/// command ends; a job that did not start frees its record at once.
#[test]
fn once_runs_a_job_on_one_node_and_shares_the_record_with_core() {
    let etcd = Etcd::single();
    let dir = tempdir();
    let (started, go) = (dir.join("started"), dir.join("go"));
    let once = |args: &[&str]| {
        let mut c = bin();
        c.args(["--endpoints", &etcd.endpoints_csv(), "once"])
            .args(args);
        c
    };
    let first = once(&["nightly", "--at-most", "60s", "--", "sh", "-c"])
        .arg(format!(
            "echo \"$ETCDLOCK_LOCK_NAME $ETCDLOCK_FENCING_TOKEN\"; touch {}; \
             while [ ! -e {} ]; do sleep 0.02; done; exit 5",
            started.display(),
            go.display()
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the first job never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Another node: skipped, without running its command.
    let out = once(&["nightly", "--at-most", "60s", "-v", "--", "touch"])
        .arg(dir.join("second-ran"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("skipped") && err.contains("taken by"), "{err}");
    assert!(!dir.join("second-ran").exists());
    let st = once(&[
        "nightly",
        "--at-most",
        "60s",
        "--skipped-exit",
        "3",
        "--",
        "true",
    ])
    .status()
    .unwrap();
    assert_eq!(st.code(), Some(3));
    // Core's run-once, as every language's binding calls it: refused too.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let core_take = || {
        rt.block_on(async {
            let c = etcdlock::Client::connect(etcdlock::ClientOptions::new(etcd.endpoints()))
                .await
                .unwrap();
            let h = c
                .once_take("nightly", Duration::from_secs(60))
                .await
                .unwrap();
            if let Some(h) = &h {
                assert!(c.once_finish(h, Duration::ZERO).await.unwrap());
            }
            c.close().await;
            h.is_some()
        })
    };
    assert!(!core_take(), "core took a job the CLI runs");
    // The command's exit code; the record is deleted (no --at-least).
    std::fs::write(&go, b"").unwrap();
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(5));
    let line = String::from_utf8_lossy(&out.stdout);
    let parts: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(parts.len(), 2, "{line}");
    assert_eq!(parts[0], "nightly");
    assert!(parts[1].parse::<i64>().unwrap() > 0, "{line}");
    assert!(core_take(), "the record outlived the job");
    // --at-least: taken after the command ended.
    let st = once(&[
        "nightly",
        "--at-most",
        "60s",
        "--at-least",
        "60s",
        "--",
        "true",
    ])
    .status()
    .unwrap();
    assert_eq!(st.code(), Some(0));
    let st = once(&[
        "nightly",
        "--at-most",
        "60s",
        "--skipped-exit",
        "3",
        "--",
        "true",
    ])
    .status()
    .unwrap();
    assert_eq!(st.code(), Some(3), "--at-least kept the job taken");
    // A command that cannot start: 127, and the record is freed at once.
    let st = once(&[
        "other",
        "--at-most",
        "60s",
        "--at-least",
        "60s",
        "--",
        "/nonexistent/cmd",
    ])
    .stderr(Stdio::null())
    .status()
    .unwrap();
    assert_eq!(st.code(), Some(127));
    let st = once(&["other", "--at-most", "60s", "--", "true"])
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0));
    // Usage errors: 2.
    let st = once(&["x", "--at-most", "1s", "--at-least", "2s", "--", "true"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(2));
    let st = once(&["x", "--", "true"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(2), "--at-most is required");
}

/// `elect` is a leader loop: a lost leadership stops the command and
/// etcdlock campaigns again (a new term, a higher fencing token, the command
/// run again); the command's own exit ends it with its status;
/// `--exit-on-loss` exits 70 on the first loss instead.
#[test]
fn elect_campaigns_again_after_a_loss_unless_told_not_to() {
    let etcd = Etcd::single();
    let eps = etcd.endpoints_csv();
    let dir = tempdir();
    let (log, gate) = (dir.join("terms"), dir.join("gate"));
    let script = format!(
        "echo \"$ETCDLOCK_FENCING_TOKEN\" >> {}; while [ ! -e {} ]; do sleep 0.02; done; exit 4",
        log.display(),
        gate.display()
    );
    let terms = || -> Vec<i64> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect()
    };
    let await_terms = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while terms().len() < n {
            assert!(
                Instant::now() < deadline,
                "term {n} never ran: {:?}",
                terms()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let release = |token: i64| {
        let st = bin()
            .args([
                "--endpoints",
                &eps,
                "release",
                "svc",
                "--token",
                &token.to_string(),
            ])
            .status()
            .unwrap();
        assert_eq!(st.code(), Some(0));
    };
    let mut leader = bin()
        .args([
            "--endpoints",
            &eps,
            "elect",
            "svc",
            "node-1",
            "--grace",
            "2s",
            "--",
            "sh",
            "-c",
        ])
        .arg(&script)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    await_terms(1);
    release(terms()[0]);
    await_terms(2);
    let t = terms();
    assert!(t[1] > t[0], "{t:?}");
    std::fs::write(&gate, b"").unwrap();
    assert_eq!(
        leader.wait().unwrap().code(),
        Some(4),
        "the command's status"
    );
    assert_eq!(terms().len(), 2, "no term after the command exited");
    await_count(&etcd, "svc/", 0);

    std::fs::remove_file(&gate).unwrap();
    std::fs::remove_file(&log).unwrap();
    let mut once = bin()
        .args([
            "--endpoints",
            &eps,
            "elect",
            "svc",
            "node-1",
            "--exit-on-loss",
            "--",
            "sh",
            "-c",
        ])
        .arg(&script)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    await_terms(1);
    release(terms()[0]);
    assert_eq!(once.wait().unwrap().code(), Some(70));
    assert_eq!(terms().len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
