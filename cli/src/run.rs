//! `etcdlock run NAME -- CMD...`
use std::time::{Duration, Instant};

use clap::Args;
use etcdlock::{CancellationToken, Client, ClientOptions, LockOptions};
#[cfg(unix)]
use tokio::signal::unix::{signal, SignalKind};

use crate::{exit, exit_code_for};

#[derive(Args)]
pub struct RunArgs {
    /// Lock name (escapes such as \n and \xHH are decoded)
    #[arg(value_parser = crate::parse_name)]
    pub name: String,
    /// Give up waiting after this long (exit 75): 500ms, 5s, 2m, plain seconds, or inf; the wait includes connecting
    #[arg(long, value_parser = crate::parse_limit)]
    pub timeout: Option<crate::Limit>,
    /// Do not wait: exit 75 at once if the lock is held
    #[arg(long = "try")]
    pub try_only: bool,
    /// Signal sent to the command when the lock is lost (TERM, INT, HUP, KILL, ...)
    #[arg(long, default_value = "TERM")]
    pub signal: String,
    /// Time between a stop signal (or the loss signal) to the command's process group and SIGKILL: 10s, 500ms, or never
    #[arg(long, default_value = "10s", value_parser = crate::parse_limit)]
    pub grace: crate::Limit,
    /// Print the fencing token and key to stderr when acquired
    #[arg(long, short)]
    pub verbose: bool,
    /// Take one of N permits of a semaphore instead of the lock (at most N commands run at once)
    #[arg(long, value_name = "N", conflicts_with = "read")]
    pub permits: Option<u32>,
    /// Take the read side of a read-write lock (shared with other readers; `run` without it is the write side)
    #[arg(long)]
    pub read: bool,
    /// Serve Prometheus metrics of this lock at http://ADDR/metrics (e.g. 127.0.0.1:9464) while running
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Lock-delay: if this run's hold ends because its lease ended (etcdlock
    /// killed, frozen or cut off) rather than by its release, the next holder
    /// gets the lock no earlier than this long after etcd removed the key
    /// (rounded up to whole seconds; not with --permits or --read)
    #[arg(long, value_parser = crate::parse_finite)]
    pub lock_delay: Option<Duration>,
    /// Hold at most this long: then the lock counts as lost (the command gets
    /// --signal) and is released, even if the command still runs
    #[arg(long, value_parser = crate::parse_finite)]
    pub lease_time: Option<Duration>,
    /// Holder metadata KEY=VALUE for `status`/`list` to show (repeatable; at most 1 KB in all)
    #[arg(long = "meta", value_name = "KEY=VALUE", value_parser = crate::parse_meta)]
    pub meta: Vec<(String, String)>,
    /// The command and its arguments
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Signal numbers: the platform's on Unix; on Windows (no signals) Linux's
/// numbers, used only as names (tree.rs ends a job by terminating it).
pub mod sig {
    #[cfg(unix)]
    pub use libc::{
        SIGHUP as HUP, SIGINT as INT, SIGKILL as KILL, SIGQUIT as QUIT, SIGTERM as TERM,
        SIGUSR1 as USR1, SIGUSR2 as USR2,
    };
    #[cfg(not(unix))]
    mod numbers {
        pub const HUP: i32 = 1;
        pub const INT: i32 = 2;
        pub const QUIT: i32 = 3;
        pub const KILL: i32 = 9;
        pub const USR1: i32 = 10;
        pub const USR2: i32 = 12;
        pub const TERM: i32 = 15;
    }
    #[cfg(not(unix))]
    pub use numbers::*;
}

pub fn signal_number(name: &str) -> Option<i32> {
    let n = name.trim_start_matches("SIG").to_ascii_uppercase();
    Some(match n.as_str() {
        "TERM" => sig::TERM,
        "INT" => sig::INT,
        "HUP" => sig::HUP,
        "KILL" => sig::KILL,
        "QUIT" => sig::QUIT,
        "USR1" => sig::USR1,
        "USR2" => sig::USR2,
        other => other.parse().ok()?,
    })
}

pub async fn run(opts: ClientOptions, a: RunArgs) -> i32 {
    let (sig, mut stops) = match prepare(&a.signal) {
        Ok(p) => p,
        Err(code) => return code,
    };
    // --timeout bounds the whole wait, connecting included.
    let started = std::time::Instant::now();
    let timeout = a.timeout.and_then(crate::Limit::duration);
    let mut opts = opts;
    if let Some(t) = timeout {
        opts.connect_timeout = opts.connect_timeout.min(t.max(Duration::from_millis(1)));
    }
    let client = match Client::connect(opts).await {
        Ok(c) => c,
        Err(e) => {
            crate::observe::say(
                "error",
                &e.to_string(),
                serde_json::json!({"code": e.code().name()}),
            );
            return exit_code_for(&e);
        }
    };
    if let Some(addr) = &a.metrics_listen {
        if let Err(e) = crate::observe::serve_metrics(addr, client.clone(), a.name.clone()).await {
            crate::observe::say(
                "error",
                &format!("cannot serve metrics on {addr}: {e}"),
                serde_json::json!({"event": "metrics_failed"}),
            );
            client.close().await;
            return exit::USAGE;
        }
    }
    let cancel = CancellationToken::new();
    let lock_opts = LockOptions {
        timeout: timeout.map(|t| t.saturating_sub(started.elapsed())),
        cancel: Some(cancel.clone()),
        lock_delay: a.lock_delay,
        lease_time: a.lease_time,
        metadata: a.meta.clone(),
        ..LockOptions::default()
    };
    let acquire = async {
        let lock_opts = if a.try_only {
            LockOptions {
                timeout: Some(Duration::ZERO),
                ..lock_opts
            }
        } else {
            lock_opts
        };
        match (a.permits, a.read) {
            (Some(n), _) => client.acquire_permit(&a.name, n, lock_opts).await,
            (None, true) => client.read_lock(&a.name, lock_opts).await,
            (None, false) if a.try_only => client.try_lock_with(&a.name, lock_opts).await,
            (None, false) => client.lock_with(&a.name, lock_opts).await,
        }
    };
    let guard = tokio::select! {
        r = acquire => match r {
            Ok(g) => g,
            Err(e) => {
                crate::observe::say("error", &e.to_string(), serde_json::json!({"code": e.code().name()}));
                client.close().await;
                return exit_code_for(&e);
            }
        },
        _ = stops.recv() => { return interrupted(&client, &cancel, &a.name).await }
    };
    let cmd = Command {
        name: &a.name,
        argv: &a.command,
        env: Vec::new(),
        sig,
        sig_name: &a.signal,
        grace: a.grace,
    };
    run_while_held(client, guard, cmd, a.verbose, &mut stops).await
}

/// What `run`, `elect` and `once` need before they connect: the number of
/// the loss signal named `signal`, and the stop signals' handlers; else the
/// exit code (after saying why).
pub fn prepare(signal: &str) -> Result<(i32, Stops), i32> {
    let Some(sig) = signal_number(signal) else {
        crate::observe::say(
            "error",
            &format!("unknown signal {signal:?}"),
            serde_json::json!({}),
        );
        return Err(exit::USAGE);
    };
    let Some(stops) = Stops::install() else {
        crate::observe::say(
            "error",
            "cannot install signal handlers",
            serde_json::json!({}),
        );
        return Err(exit::ERROR);
    };
    Ok((sig, stops))
}

/// Say why a command failed, close its client (if it has one) and give the
/// error's exit code.
pub async fn failed(client: Option<Client>, e: &etcdlock::Error) -> i32 {
    crate::observe::say(
        "error",
        &e.to_string(),
        serde_json::json!({"code": e.code().name()}),
    );
    if let Some(c) = client {
        c.close().await;
    }
    exit_code_for(e)
}

/// The signals that stop etcdlock: SIGINT, SIGTERM, SIGHUP (an ssh hang-up)
/// and SIGQUIT. While waiting they end the wait; while the command runs they
/// go to its whole process group.
#[cfg(unix)]
pub struct Stops {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Stops {
    pub fn install() -> Option<Stops> {
        Some(Stops {
            int: signal(SignalKind::interrupt()).ok()?,
            term: signal(SignalKind::terminate()).ok()?,
            hup: signal(SignalKind::hangup()).ok()?,
            quit: signal(SignalKind::quit()).ok()?,
        })
    }

    /// The next stop signal's number.
    pub async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.int.recv() => libc::SIGINT,
            _ = self.term.recv() => libc::SIGTERM,
            _ = self.hup.recv() => libc::SIGHUP,
            _ = self.quit.recv() => libc::SIGQUIT,
        }
    }
}

/// Windows: Ctrl-C, Ctrl-Break and closing the console stop etcdlock. The
/// console delivers the same event to every process attached to it, the
/// job's included, so while the command runs they reach it as well.
#[cfg(windows)]
pub struct Stops {
    c: tokio::signal::windows::CtrlC,
    brk: tokio::signal::windows::CtrlBreak,
    close: tokio::signal::windows::CtrlClose,
}

#[cfg(windows)]
impl Stops {
    pub fn install() -> Option<Stops> {
        Some(Stops {
            c: tokio::signal::windows::ctrl_c().ok()?,
            brk: tokio::signal::windows::ctrl_break().ok()?,
            close: tokio::signal::windows::ctrl_close().ok()?,
        })
    }

    /// The next stop event, as the Unix signal it stands for (Ctrl-C: INT,
    /// Ctrl-Break: QUIT, console closed: HUP).
    pub async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.c.recv() => sig::INT,
            _ = self.brk.recv() => sig::QUIT,
            _ = self.close.recv() => sig::HUP,
        }
    }
}

/// Run `command` while `guard` holds, as the owner of its whole process
/// group (tree.rs): stop signals go to the group; after a loss the group gets
/// `sig`, and after the command exits what is left of it gets SIGTERM; in
/// both cases and after a stop signal, SIGKILL follows `grace` later; the
/// lock is released only once no process of the group is left. Shared by
/// The command `run`, `elect` and `once` start, and how it is stopped.
pub struct Command<'a> {
    /// The lock (or job) name, for messages.
    pub name: &'a str,
    /// The program and its arguments.
    pub argv: &'a [String],
    /// What the command finds in its environment.
    pub env: Vec<(&'static str, String)>,
    /// The signal the process group gets when the hold is lost, and its name.
    pub sig: i32,
    pub sig_name: &'a str,
    /// Time between a stop (or loss) signal and SIGKILL; `Never`: no SIGKILL.
    pub grace: crate::Limit,
}

/// How a supervised command ended.
pub enum Ended {
    /// It exited with this code (128+N: killed by signal N); no process of
    /// its group is left.
    Exited(i32),
    /// The hold was lost: the group got the loss signal and is gone.
    Lost,
    /// It could not be started: exit 127 (not found) or 126.
    NotStarted(i32),
}

/// Run `cmd` in its own process group, which etcdlock owns: stop signals go
/// to the whole group; when `lost` resolves (the hold ended) the group gets
/// `cmd.sig`; what is left of the group when the command exits gets
/// SIGTERM; SIGKILL follows `cmd.grace` later in each case. Returns once no
/// process of the group is left.
pub async fn supervise(
    cmd: Command<'_>,
    lost: impl std::future::Future<Output = etcdlock::LossReason>,
    stops: &mut Stops,
) -> Ended {
    let Command {
        name,
        argv,
        env,
        sig,
        sig_name,
        grace,
    } = cmd;
    // None: never SIGKILL.
    let grace = grace.duration();
    let mut child_cmd = tokio::process::Command::new(&argv[0]);
    child_cmd.args(&argv[1..]).envs(env);
    let prepared = crate::tree::prepare(&mut child_cmd);
    let mut child = match child_cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            prepared.abandon();
            crate::observe::say(
                "error",
                &format!("cannot run {:?}: {e}", argv[0]),
                serde_json::json!({"event": "spawn_failed", "lock": name}),
            );
            return Ended::NotStarted(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            });
        }
    };
    let Some(pid) = child.id().map(|p| p as i32) else {
        prepared.abandon();
        return Ended::NotStarted(exit::ERROR);
    };
    let tree = crate::tree::Tree::started(pid, prepared);
    // After a stop signal: when the group gets SIGKILL.
    let mut kill_at: Option<Instant> = None;
    let left = |kill_at: Option<Instant>| match kill_at {
        Some(t) => Some(t.saturating_duration_since(Instant::now())),
        None => grace,
    };
    tokio::pin!(lost);
    let ended = loop {
        tokio::select! {
            st = child.wait() => {
                let st = st.map(status_code).unwrap_or(exit::ERROR);
                // Nothing the command started runs on without the hold.
                tree.end(Some(sig::TERM), left(kill_at)).await;
                break Ended::Exited(st);
            }
            reason = &mut lost => {
                let kill = grace.map_or("no SIGKILL".to_string(), |g| format!("SIGKILL after {g:?}"));
                let msg = format!(
                    "lock {name:?} was lost ({reason}) while the command ran; sending signal {sig_name} to its process group ({kill})"
                );
                crate::observe::say("warn", &msg, serde_json::json!({"event": "lost", "lock": name, "reason": reason.name(), "signal": sig_name}));
                tree.end(Some(sig), left(kill_at)).await;
                let _ = child.wait().await;
                break Ended::Lost;
            }
            n = stops.recv() => {
                tree.signal(n);
                if kill_at.is_none() {
                    kill_at = grace.and_then(|g| Instant::now().checked_add(g));
                }
            }
            _ = sleep_until_opt(kill_at) => {
                tree.signal(sig::KILL);
                kill_at = None;
            }
        }
    };
    tree.finish();
    ended
}

/// `run` and `elect`: run `cmd` while `guard` holds (see [`supervise`]); the
/// command gets ETCDLOCK_LOCK_NAME, ETCDLOCK_FENCING_TOKEN, ETCDLOCK_KEY and
/// ETCDLOCK_LEASE_ID. The lock is released once no process of the group is
/// left; a lost lock exits 70.
pub async fn run_while_held(
    client: Client,
    guard: etcdlock::Guard,
    mut cmd: Command<'_>,
    verbose: bool,
    stops: &mut Stops,
) -> i32 {
    let name = cmd.name;
    let fields = serde_json::json!({"event": "acquired", "lock": name, "key": guard.key(), "fencing_token": guard.fencing_token()});
    if verbose || crate::observe::json() {
        let msg = format!(
            "holding {} (key {}, fencing token {})",
            crate::status::escape(name),
            guard.key(),
            guard.fencing_token()
        );
        crate::observe::say("info", &msg, fields);
    }
    cmd.env.extend([
        ("ETCDLOCK_FENCING_TOKEN", guard.fencing_token().to_string()),
        ("ETCDLOCK_KEY", guard.key().to_string()),
        ("ETCDLOCK_LEASE_ID", format!("{:x}", guard.lease_id())),
        ("ETCDLOCK_LOCK_NAME", name.to_string()),
    ]);
    let lost = async {
        match guard.wait_lost().await {
            Some(loss) => loss.reason,
            // Released: not while the command runs.
            None => std::future::pending().await,
        }
    };
    let code = match supervise(cmd, lost, stops).await {
        Ended::Exited(code) | Ended::NotStarted(code) => code,
        Ended::Lost => exit::LOST,
    };
    // The group is gone: only now may someone else take the lock.
    let _ = guard.unlock().await;
    if crate::observe::json() {
        crate::observe::say(
            "info",
            &format!("released {}", crate::status::escape(name)),
            serde_json::json!({"event": "released", "lock": name, "exit": code}),
        );
    }
    client.close().await;
    code
}

async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
        None => std::future::pending().await,
    }
}

pub async fn interrupted(client: &Client, cancel: &CancellationToken, name: &str) -> i32 {
    cancel.cancel();
    // Closing revokes the lease: the waiter key goes with it, at once.
    client.close().await;
    crate::observe::say(
        "warn",
        &format!("interrupted while waiting for {name:?}; waiter key removed"),
        serde_json::json!({"event": "interrupted", "lock": name}),
    );
    exit::INTERRUPTED
}

/// The command's exit status as etcdlock's exit code: its code, or 128+N if
/// signal N killed it (Unix). On Windows every process ends with a code.
fn status_code(st: std::process::ExitStatus) -> i32 {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
    }
    #[cfg(not(unix))]
    {
        st.code().unwrap_or(exit::ERROR)
    }
}
