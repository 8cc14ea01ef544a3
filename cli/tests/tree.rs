//! `etcdlock run` and `elect` own their command's whole process tree: real
//! signals, real process groups, real etcd.
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use etcdlock::{Client, ClientOptions, ErrorCode};
use etcdlock_testkit::Etcd;

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

fn alive(pid: i32) -> bool {
    // A zombie is not running: read its state.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(st) => !st
            .rsplit_once(')')
            .map(|(_, r)| r.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

fn kill(pid: u32, sig: i32) {
    unsafe { libc::kill(pid as i32, sig) };
}

/// Start `etcdlock run NAME [extra] -- sh -c SCRIPT`; the script prints its
/// own pid and its background child's pid on one line, which this returns.
fn start(etcd: &Etcd, name: &str, extra: &[&str], script: &str) -> (Child, i32, i32) {
    let mut child = bin()
        .args([
            "--endpoints",
            &etcd.endpoints_csv(),
            "--ttl",
            "2",
            "run",
            name,
        ])
        .args(extra)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pids: Vec<i32> = line
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{line:?}");
    (child, pids[0], pids[1])
}

fn client(etcd: &Etcd, rt: &tokio::runtime::Runtime) -> Client {
    rt.block_on(Client::connect(
        ClientOptions::new(etcd.endpoints()).with_ttl(10),
    ))
    .unwrap()
}

/// try_lock until it succeeds (bounded); each success must find `dead` gone.
fn free_only_after(
    rt: &tokio::runtime::Runtime,
    c: &Client,
    name: &str,
    dead: &[i32],
    within: Duration,
) -> Duration {
    let t0 = Instant::now();
    loop {
        match rt.block_on(c.try_lock(name)) {
            Ok(g) => {
                for pid in dead {
                    assert!(
                        !alive(*pid),
                        "the lock was free while process {pid} of the job still ran"
                    );
                }
                rt.block_on(g.unlock()).unwrap();
                return t0.elapsed();
            }
            Err(e) if e.code() == ErrorCode::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
        assert!(t0.elapsed() < within, "the lock stayed held for {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// The script's background child traps TERM and takes 300 ms to go: the lock
// must stay held until it is gone, not just until `sh` exits.
const SLOW_GRANDCHILD: &str =
    "sh -c 'trap \"sleep 0.3; exit 0\" TERM; while :; do sleep 0.05; done' & echo $$ $!; wait";

#[test]
fn sigterm_and_sighup_stop_the_whole_group_before_the_lock_is_released() {
    let etcd = Etcd::single();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c = client(&etcd, &rt);
    for (sig, name) in [(libc::SIGTERM, "tree-term"), (libc::SIGHUP, "tree-hup")] {
        let (mut child, sh, grandchild) = start(&etcd, name, &[], SLOW_GRANDCHILD);
        assert_eq!(
            rt.block_on(c.try_lock(name)).unwrap_err().code(),
            ErrorCode::WouldBlock
        );
        kill(child.id(), sig);
        let took = free_only_after(&rt, &c, name, &[sh, grandchild], Duration::from_secs(10));
        let st = child.wait().unwrap();
        assert!(!alive(grandchild) && !alive(sh));
        println!(
            "signal {sig}: lock free {took:?} after it, exit {:?}",
            st.code()
        );
        // sh dies of the forwarded signal: 128 + n.
        assert_eq!(st.code(), Some(128 + sig));
    }
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_grace() {
    let etcd = Etcd::single();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c = client(&etcd, &rt);
    let script = "trap '' TERM; sleep 30 & echo $$ $!; wait; wait";
    let (mut child, sh, grandchild) = start(&etcd, "tree-grace", &["--grace", "1"], script);
    let t0 = Instant::now();
    kill(child.id(), libc::SIGTERM);
    let took = free_only_after(
        &rt,
        &c,
        "tree-grace",
        &[sh, grandchild],
        Duration::from_secs(10),
    );
    let st = child.wait().unwrap();
    println!(
        "SIGTERM ignored: SIGKILL after --grace 1; lock free {took:?} after SIGTERM, exit {:?}",
        st.code()
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "killed before the grace ran out"
    );
    assert_eq!(st.code(), Some(128 + libc::SIGKILL));
}

#[test]
fn what_the_command_leaves_behind_is_stopped_before_the_release() {
    let etcd = Etcd::single();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c = client(&etcd, &rt);
    // sh exits at once (status 0); its background child would run on.
    let script =
        "sh -c 'trap \"sleep 0.3; exit 0\" TERM; while :; do sleep 0.05; done' & echo $$ $!";
    let (mut child, sh, grandchild) = start(&etcd, "tree-left", &[], script);
    let took = free_only_after(
        &rt,
        &c,
        "tree-left",
        &[sh, grandchild],
        Duration::from_secs(10),
    );
    assert_eq!(
        child.wait().unwrap().code(),
        Some(0),
        "the command's own status"
    );
    println!("left-behind child stopped; lock free {took:?} after start");
}

#[test]
fn kill_9_of_etcdlock_kills_the_command_and_its_children() {
    if no_supervisor_here("kill_9_of_etcdlock_kills_the_command_and_its_children") {
        return;
    }
    let etcd = Etcd::single();
    // Killed the moment the command has printed (the supervisor knows the
    // command's group before its exec, so no moment is too early), 5 times.
    for round in 0..5 {
        let (mut child, sh, grandchild) = start(
            &etcd,
            &format!("tree-kill9-{round}"),
            &[],
            "sleep 30 & echo $$ $!; wait",
        );
        let t0 = Instant::now();
        kill(child.id(), libc::SIGKILL);
        child.wait().unwrap();
        while alive(sh) || alive(grandchild) {
            assert!(
                t0.elapsed() < Duration::from_secs(2),
                "round {round}: the command outlived etcdlock by {:?}",
                t0.elapsed()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        println!(
            "kill -9 of etcdlock: command and grandchild gone {:?} later",
            t0.elapsed()
        );
    }
}

#[test]
fn an_elected_leaders_command_is_gone_before_the_standby_takes_over() {
    if no_supervisor_here("an_elected_leaders_command_is_gone_before_the_standby_takes_over") {
        return;
    }
    let etcd = Etcd::single();
    let dir = std::env::temp_dir().join(format!("etcdlock-elect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let elect = |value: &str| {
        let mark = dir.join(value);
        bin()
            .args([
                "--endpoints",
                &etcd.endpoints_csv(),
                "--ttl",
                "2",
                "elect",
                "tree-elect",
                value,
                "--",
                "sh",
                "-c",
            ])
            .arg(format!("sleep 30 & echo $$ $! > {}; wait", mark.display()))
            .stdin(Stdio::null())
            .spawn()
            .unwrap()
    };
    let read = |value: &str| -> Option<Vec<i32>> {
        let s = std::fs::read_to_string(dir.join(value)).ok()?;
        let v: Vec<i32> = s
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        (v.len() == 2).then_some(v)
    };
    let mut leader = elect("a");
    let t0 = Instant::now();
    let old = loop {
        if let Some(v) = read("a") {
            break v;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the leader's command never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut standby = elect("b");
    std::thread::sleep(Duration::from_millis(300));
    assert!(read("b").is_none(), "the standby ran while the leader led");
    leader.kill().unwrap();
    leader.wait().unwrap();
    let killed = Instant::now();
    let new = loop {
        if let Some(v) = read("b") {
            break v;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "the standby never took over"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    for pid in old {
        assert!(
            !alive(pid),
            "the old leader's process {pid} still ran when the standby took over"
        );
    }
    println!(
        "standby took over {:?} after kill -9 of the leader (TTL 2 s)",
        killed.elapsed()
    );
    kill(standby.id(), libc::SIGTERM);
    standby.wait().unwrap();
    for pid in new {
        assert!(!alive(pid));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_interactive_command_reads_the_terminal_under_run() {
    // `script` (util-linux) gives etcdlock a pseudo-terminal as its stdin: the
    // command gets the terminal's foreground, so its read does not stop it
    // with SIGTTIN, and etcdlock takes the terminal back after it.
    let etcd = Etcd::single();
    let inner = format!(
        "{} --endpoints {} run tree-tty -- sh -c 'read a; echo got:$a; tty'",
        &bin_path(),
        etcd.endpoints_csv()
    );
    let mut child = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    let mut stdin = child.stdin.take().unwrap();
    let out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for l in BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            lines.push(l.trim().to_string());
        }
        lines
    });
    std::thread::sleep(Duration::from_millis(500));
    use std::io::Write;
    stdin.write_all(b"hello\n").unwrap();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the interactive command hung (stopped on SIGTTIN?)"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stdin);
    let lines = reader.join().unwrap();
    assert!(lines.iter().any(|l| l == "got:hello"), "{lines:?}");
    assert!(
        lines.iter().any(|l| l.starts_with("/dev/pts/")),
        "the command's stdin is the terminal: {lines:?}"
    );
}
