//! `etcdlock`: run a command under a distributed lock, inspect a lock's holder
//! and queue, and benchmark. See `etcdlock --help`.
//!
//! The command line lives in this library so that more than the binary can
//! see its clap definition: `examples/manpage.rs` writes the man pages from
//! [`command`], and the tests walk its subcommands. `src/main.rs` is only the
//! allocator and a call to [`main`].

#[cfg(feature = "bench")]
mod bench;
#[cfg(feature = "bench")]
mod bench_breadth;
#[cfg(feature = "bench")]
mod bench_fleet;
#[cfg(feature = "bench")]
mod bench_recipes;
#[cfg(feature = "bench")]
mod bench_scale;
mod elect;
mod flash;
mod observe;
mod once;
mod report;
mod run;
mod status;
mod sync;
#[cfg(unix)]
mod tree;
#[cfg(windows)]
#[path = "tree_windows.rs"]
mod tree;
mod ui;

use std::time::Duration;

/// The global allocator of this binary, as the benchmarks report it.
#[cfg(feature = "bench")]
pub const ALLOCATOR: &str = "mimalloc v2 (purge delay 0)";

use clap::{Args, CommandFactory, Parser, Subcommand};
use etcdlock::{ClientOptions, ErrorCode};

mod args;
use args::*;
mod help;
use help::*;

/// Exit codes (besides the command's own status, which `run` passes through).
pub mod exit {
    /// Usage error: bad flags, or a value core refuses (every InvalidArgument).
    pub const USAGE: i32 = 2;
    /// Any other etcdlock error (Internal, NotHeld, ...).
    pub const ERROR: i32 = 1;
    /// The lock was lost while the command ran; the command was signalled.
    pub const LOST: i32 = 70;
    /// etcd unreachable.
    pub const UNAVAILABLE: i32 = 69;
    /// Timed out waiting for the lock (`--timeout`), or `--try` found it held.
    pub const TIMEOUT: i32 = 75;
    /// Credentials rejected or permission denied.
    pub const NOPERM: i32 = 77;
    /// Interrupted (Ctrl-C) while waiting; the waiter key was removed.
    pub const INTERRUPTED: i32 = 130;
    /// `leader`: the election has no leader; `release`: no hold with that token.
    pub const NO_LEADER: i32 = 3;
}

#[derive(Parser)]
#[command(name = "etcdlock", version, about = "A correct, fast distributed lock on etcd", after_help = AFTER_HELP)]
struct Cli {
    #[command(flatten)]
    conn: Conn,
    /// How etcdlock's own messages are written to stderr: text, or json (one object per line, for log shippers)
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: observe::LogFormat,
    #[command(subcommand)]
    cmd: Cmd,
}

/// Connection options. Each falls back to its `ETCDLOCK_*` variable, and all of
/// them go through core's one parser (`ClientOptions::from_env_and_pairs`): the
/// same keys, duration syntax and precedence as every binding.
#[derive(Args, Clone)]
struct Conn {
    /// etcd endpoints, comma separated [env: ETCDLOCK_ENDPOINTS] [default: http://127.0.0.1:2379]
    #[arg(long, global = true)]
    endpoints: Option<String>,
    /// Lease TTL in seconds [env: ETCDLOCK_TTL] [default: 15]
    #[arg(long, global = true)]
    ttl: Option<String>,
    /// Key namespace prefix [env: ETCDLOCK_NAMESPACE]
    #[arg(long, global = true)]
    namespace: Option<String>,
    /// etcd username [env: ETCDLOCK_USERNAME]
    #[arg(long, global = true)]
    user: Option<String>,
    /// etcd password (prefer the environment variable) [env: ETCDLOCK_PASSWORD]
    #[arg(long, global = true)]
    password: Option<String>,
    /// CA bundle (PEM) [env: ETCDLOCK_TLS_CA]
    #[arg(long = "tls-ca", alias = "ca", global = true)]
    tls_ca: Option<String>,
    /// Client certificate (PEM) [env: ETCDLOCK_TLS_CERT]
    #[arg(long = "tls-cert", alias = "cert", global = true)]
    tls_cert: Option<String>,
    /// Client key (PEM) [env: ETCDLOCK_TLS_KEY; ETCDLOCK_KEY is the lock key `run` exports]
    #[arg(long = "tls-key", alias = "key", global = true)]
    tls_key: Option<String>,
    /// Server name to verify instead of the endpoint's host [env: ETCDLOCK_TLS_DOMAIN]
    #[arg(long = "tls-domain", global = true)]
    tls_domain: Option<String>,
    /// Connect timeout: 5s, 250ms, or seconds [env: ETCDLOCK_CONNECT_TIMEOUT] [default: 5s]
    #[arg(long, global = true)]
    connect_timeout: Option<String>,
    /// Bound on every call that does not wait for the lock (try, release, status), retries and failover included [env: ETCDLOCK_REQUEST_TIMEOUT] [default: 2s]
    #[arg(long, global = true)]
    request_timeout: Option<String>,
    /// Safety margin subtracted from the TTL for local loss detection [env: ETCDLOCK_MARGIN]
    #[arg(long, global = true)]
    margin: Option<String>,
    /// Watch each held key so an outside delete is noticed at once: true/false [env: ETCDLOCK_WATCH_HELD_KEYS] [default: true]
    #[arg(long, global = true)]
    watch_held_keys: Option<String>,
    /// Time between the session's keep-alives [env: ETCDLOCK_KEEPALIVE_INTERVAL] [default: 75 % of the TTL or TTL - margin - 5 s, whichever is shorter (8 s at TTL 15); at small TTLs TTL/3, at most (TTL - margin)/4, at least 250 ms]
    #[arg(long, global = true)]
    keepalive_interval: Option<String>,
    /// Connect on first use, so a command's own timeout (e.g. `run --timeout 60s`) also covers etcd coming up: true/false [env: ETCDLOCK_LAZY_CONNECT] [default: false: fail within the connect timeout]
    #[arg(long, global = true)]
    lazy_connect: Option<String>,
}

impl Conn {
    fn options(&self) -> Result<ClientOptions, etcdlock::Error> {
        if self
            .endpoints
            .as_deref()
            .is_some_and(|e| e.split(',').all(|p| p.trim().is_empty()))
        {
            return Err(etcdlock::Error::new(
                ErrorCode::InvalidArgument,
                "--endpoints is empty; give at least one endpoint (e.g. http://127.0.0.1:2379)",
            ));
        }
        let pairs = [
            ("endpoints", &self.endpoints),
            ("ttl", &self.ttl),
            ("namespace", &self.namespace),
            ("username", &self.user),
            ("password", &self.password),
            ("tls_ca", &self.tls_ca),
            ("tls_cert", &self.tls_cert),
            ("tls_key", &self.tls_key),
            ("tls_domain", &self.tls_domain),
            ("connect_timeout", &self.connect_timeout),
            ("request_timeout", &self.request_timeout),
            ("margin", &self.margin),
            ("watch_held_keys", &self.watch_held_keys),
            ("keepalive_interval", &self.keepalive_interval),
            ("lazy_connect", &self.lazy_connect),
        ];
        ClientOptions::from_env_and_pairs(
            pairs
                .iter()
                .filter_map(|(k, v)| v.as_ref().map(|v| (*k, v.as_str()))),
        )
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Wait for the lock, run a command while holding it, release when it exits.
    ///
    /// The command gets ETCDLOCK_LOCK_NAME, ETCDLOCK_FENCING_TOKEN, ETCDLOCK_KEY
    /// and ETCDLOCK_LEASE_ID in its environment, and runs in its own process group, which etcdlock
    /// owns: SIGTERM, SIGINT, SIGHUP and SIGQUIT go to the whole group; if the
    /// lock is lost the group gets --signal; what is left of the group when the
    /// command exits gets SIGTERM; in each case SIGKILL follows --grace seconds
    /// later, and the lock is released only once no process of the group is
    /// left. If etcdlock itself dies (even kill -9), a supervisor kills the
    /// group at once. A lost lock exits 70.
    #[command(after_help = RUN_HELP)]
    Run(run::RunArgs),
    /// Show a lock's holders and waiting queue, for every kind (mutex, semaphore,
    /// read-write lock, election; etcdlock, etcdctl and Go keys alike).
    #[command(after_help = STATUS_HELP)]
    Status(status::StatusArgs),
    /// List every lock, election, semaphore and read-write lock under a prefix:
    /// kind, holder (host, pid, language, fencing token, for how long) and how
    /// many wait, including the waiters each client queues locally.
    #[command(after_help = LIST_HELP)]
    List(status::ListArgs),
    /// Follow `list` live: a table redrawn on every change, or with --json one
    /// JSON document per change. Runs until interrupted.
    #[command(after_help = WATCH_HELP)]
    Watch(status::ListArgs),
    /// Free a lock whose holder is wedged: delete the hold with that fencing
    /// token (default: the current holder's); the holder learns it lost the
    /// lock. Exit 3 when there is no such hold.
    #[command(after_help = RELEASE_HELP)]
    Release(status::ReleaseArgs),
    /// Open a count-down latch shared by processes: --count-down lowers it by
    /// one, --wait waits for zero (exit 75 after --timeout); prints the count.
    #[command(after_help = LATCH_HELP)]
    Latch(sync::LatchArgs),
    /// Arrive at a barrier and wait for all --parties (exit 75 after
    /// --timeout); prints this party's arrival index.
    #[command(after_help = BARRIER_HELP)]
    Barrier(sync::BarrierArgs),
    /// Campaign for leadership and run a command while leader: on a loss its
    /// process group gets --signal (as `run` does) and etcdlock campaigns
    /// again (--exit-on-loss: exit 70 instead); when the command exits,
    /// etcdlock resigns and exits with its status. `etcdctl elect NAME` takes
    /// part in the same election.
    #[command(after_help = ELECT_HELP)]
    Elect(elect::ElectArgs),
    /// Run a scheduled job on one node only (ShedLock's model: a cron line on
    /// every node): take the job's run-once record for --at-most, run the
    /// command, keep the record --at-least from the start. When another node
    /// has the job, exit --skipped-exit (0) without running it. The same
    /// record as Java's @SchedulerLock and the Python and Node `once`, so
    /// they exclude each other. The command gets ETCDLOCK_LOCK_NAME and
    /// ETCDLOCK_FENCING_TOKEN (the record's revision: higher for every take).
    #[command(after_help = ONCE_HELP)]
    Once(once::OnceArgs),
    /// Find clients waiting on each other under a prefix (a deadlock), from one
    /// read of etcd: each cycle, client by client. Exit 1: a cycle; 0: none.
    #[command(after_help = DEADLOCKS_HELP)]
    Deadlocks(report::DeadlocksArgs),
    /// A lock's history from etcd's MVCC history: each key queued on it (who, token,
    /// queued/granted/ended, how it ended), as far back as etcd keeps (it says).
    #[command(after_help = HISTORY_HELP)]
    History(report::HistoryArgs),
    /// Serve a live web view of the locks under a prefix, its JSON API and /metrics;
    /// read-only unless --allow-release. The first line on stdout is its URL.
    /// Runs until interrupted (exit 0); exit 2 on a bad flag or address.
    #[command(after_help = UI_HELP)]
    Ui(ui::UiArgs),
    /// Print the leader of an election (value, key, revision), or "-" and exit 3
    /// when there is none; --watch follows it.
    #[command(after_help = LEADER_HELP)]
    Leader(elect::LeaderArgs),
    /// Benchmark against floors measured in the same run (starts its own etcd unless --use-endpoints).
    /// In builds with the CLI's `bench` feature only (benchmark code and the test
    /// harness do not ship): `cargo run --release -p etcdlock-cli --features bench -- bench`.
    #[command(after_help = BENCH_HELP)]
    #[cfg(feature = "bench")]
    Bench {
        /// Iterations for the latency measurements
        #[arg(long, default_value_t = 2000)]
        iterations: usize,
        /// Contenders on one lock
        #[arg(long, default_value_t = 8)]
        contenders: usize,
        /// How long the contention runs (e.g. 15s; finite)
        #[arg(long, default_value = "15s", value_parser = parse_finite)]
        duration: Duration,
        /// Distinct locks held at once on one session
        #[arg(long, default_value_t = 1000)]
        distinct: usize,
        /// Measure only N waiters on one lock, one client (errors, FIFO order, RSS per waiter, drain rate)
        #[arg(long, value_name = "N")]
        waiters: Option<usize>,
        /// Measure only N distinct locks held at once on one session (errors, RSS per lock, leases in etcd)
        #[arg(long, value_name = "N")]
        held: Option<usize>,
        /// Measure only N distinct locks taken in ONE burst on one session (all N lock
        /// calls at once; RSS per lock after the burst settles, errors)
        #[arg(long, value_name = "N")]
        burst: Option<usize>,
        /// Measure only breadth: --clients clients locking random names of --names
        /// distinct ones for --duration, alternating with etcd's write ceiling for the
        /// same requests (raw Txn+Delete on as many connections)
        #[arg(long)]
        breadth: bool,
        /// Clients for --breadth (each its own connection and session)
        #[arg(long, default_value_t = 100)]
        clients: usize,
        /// Distinct lock names for --breadth
        #[arg(long, default_value_t = 1000)]
        names: usize,
        /// One process of a client fleet (bench/fleet.sh drives it over stdin/stdout):
        /// --clients clients (each its own connection and session, the global --ttl)
        /// holding --locks locks each, --fleet-waiters more queued; --clients 0: the probe
        #[arg(long)]
        fleet: bool,
        /// Locks each fleet client holds
        #[arg(long, default_value_t = 10)]
        locks: usize,
        /// Lock calls queued on names the fleet holds (each by another client)
        #[arg(long, default_value_t = 0)]
        fleet_waiters: usize,
        /// Prefix of the fleet's lock names (distinct per process)
        #[arg(long, default_value = "fleet-")]
        fleet_prefix: String,
        /// Clients whose keep-alive gaps the fleet samples
        #[arg(long, default_value_t = 100)]
        fleet_sample: usize,
        /// The probe's pace (--fleet --clients 0)
        #[arg(long, default_value = "50ms", value_parser = parse_finite)]
        probe_pace: Duration,
        /// Measure the recipes instead: election failover (resign, kill -9), a 3-permit
        /// semaphore, a read-write lock with 7 readers and 1 writer, multi-lock pairs
        #[arg(long)]
        recipes: bool,
        /// Use --endpoints instead of starting a private etcd
        #[arg(long)]
        use_endpoints: bool,
        /// Print only JSON lines
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell
    /// (e.g. `etcdlock completions bash > /etc/bash_completion.d/etcdlock`).
    #[command(after_help = COMPLETIONS_HELP)]
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print the etcdlock(1) man page (roff), as the release tarball installs it.
    #[command(hide = true)]
    Man,
    /// The supervisor `run` and `elect` start before a command: SIGKILLs the
    /// command's process group if etcdlock dies (stdin: the pipe on which the
    /// command writes its group before exec and etcdlock ends the job).
    #[command(hide = true)]
    Supervise,
    /// The Rust worker of the cross-language flash-sale demo (configured by FLASH_* variables).
    #[command(hide = true)]
    FlashWorker,
}

/// The clap definition of the whole command line, as `--help`, the shell
/// completions and the man pages are generated from.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Write the man pages into `dir`: `etcdlock.1`, and `etcdlock-SUB.1` for
/// every subcommand `--help` lists (hidden ones have none). Returns the
/// files written. `cargo run -p etcdlock-cli --example manpage -- DIR` runs it.
pub fn write_man_pages(dir: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut top = command().disable_help_subcommand(true);
    top.build(); // names each subcommand `etcdlock-SUB`
    let source = format!("etcdlock {}", env!("CARGO_PKG_VERSION"));
    let mut pages = vec![top.clone()];
    pages.extend(top.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    pages
        .into_iter()
        .map(|cmd| {
            clap_mangen::Man::new(cmd)
                .source(source.clone())
                .manual("etcdlock manual")
                .generate_to(dir)
        })
        .collect()
}

/// Whether a panic message reports a failed write with EPIPE: std's print
/// macros show the I/O error as `Broken pipe (os error 32)`, `expect` on a
/// write (clap_complete) as `Os { .., kind: BrokenPipe, .. }`.
fn is_broken_pipe(msg: &str) -> bool {
    msg.contains("Broken pipe") || msg.contains("BrokenPipe")
}

/// Whether standard output is a pipe or socket whose reader is gone (a
/// write to it fails with EPIPE): `poll` reports POLLERR (a pipe on Linux)
/// or POLLHUP for it. Unix only: elsewhere a write to a closed pipe fails
/// with an error (no signal), so no such check is needed.
#[cfg(not(unix))]
fn stdout_reader_gone() -> bool {
    false
}

#[cfg(unix)]
fn stdout_reader_gone() -> bool {
    let mut p = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

/// The exit code of an etcdlock error. Every `InvalidArgument` core reports
/// is about a value given on the command line (a flag, a variable, a name),
/// so it is a usage error (2), as clap's own refusals are.
pub fn exit_code_for(e: &etcdlock::Error) -> i32 {
    match e.code() {
        ErrorCode::InvalidArgument => exit::USAGE,
        ErrorCode::Timeout | ErrorCode::WouldBlock => exit::TIMEOUT,
        ErrorCode::Unavailable => exit::UNAVAILABLE,
        ErrorCode::AuthFailed | ErrorCode::PermissionDenied => exit::NOPERM,
        ErrorCode::LockLost => exit::LOST,
        ErrorCode::Cancelled => exit::INTERRUPTED,
        _ => exit::ERROR,
    }
}

/// The whole of `etcdlock`: parse the arguments, run the subcommand, exit
/// with its code. Never returns.
pub fn main() -> ! {
    // ETCDLOCK_LOG=debug shows core's own events (as JSON lines when --log-format json).
    let filter = tracing_subscriber::EnvFilter::try_from_env("ETCDLOCK_LOG")
        .unwrap_or_else(|_| "off".into());
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let args: Vec<String> = std::env::args().collect();
    let json_logs = args.iter().any(|a| a == "--log-format=json")
        || args
            .windows(2)
            .any(|w| w[0] == "--log-format" && w[1] == "json");
    if json_logs {
        fmt.json().init();
    } else {
        fmt.init();
    }
    // No panic reaches a user as a backtrace: one line, exit 1.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        // Every print of every subcommand ends here when its reader has gone
        // (`etcdlock list | head -1`): std's print macros and clap's
        // generators panic on the EPIPE error (Rust ignores SIGPIPE). That is
        // a normal end for a command-line tool: exit 0, say nothing.
        if is_broken_pipe(&msg) && stdout_reader_gone() {
            std::process::exit(0);
        }
        eprintln!(
            "etcdlock: internal error: {msg} ({})",
            info.location().map(|l| l.to_string()).unwrap_or_default()
        );
        std::process::exit(exit::ERROR);
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            e.exit()
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            e.exit()
        }
        Err(e) => {
            // One line, as every other etcdlock usage error: the first of clap's.
            let text = e.render().to_string();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("bad arguments");
            eprintln!("etcdlock: {}", first.trim_start_matches("error: "));
            std::process::exit(exit::USAGE);
        }
    };
    // Generated from the same clap definition as --help; they need no etcd
    // and no options, so they answer before either is looked at.
    match cli.cmd {
        Cmd::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "etcdlock",
                &mut std::io::stdout(),
            );
            std::process::exit(0);
        }
        Cmd::Supervise => std::process::exit(tree::supervisor_main()),
        Cmd::Man => {
            let code = match clap_mangen::Man::new(command()).render(&mut std::io::stdout()) {
                Ok(()) => 0,
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
                Err(e) => {
                    eprintln!("etcdlock: {e}");
                    exit::ERROR
                }
            };
            std::process::exit(code);
        }
        _ => {}
    }
    observe::set_format(cli.log_format);
    // ETCDLOCK_CLI_RUNTIME=current: one thread for everything (A/B of the
    // runtime layout in benchmarks; `bench` without --use-endpoints needs the
    // default multi-thread runtime).
    let current = std::env::var_os("ETCDLOCK_CLI_RUNTIME").is_some_and(|v| v == "current");
    // ETCDLOCK_WORKER_THREADS (1..=64) sizes it as it does the bindings' runtime.
    let workers = std::env::var("ETCDLOCK_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| (1..=64).contains(n));
    let built = if current {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        if let Some(n) = workers {
            b.worker_threads(n);
        }
        b.enable_all().build()
    };
    let rt = match built {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("etcdlock: cannot start runtime: {e}");
            std::process::exit(exit::ERROR);
        }
    };
    let opts = match cli.conn.options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("etcdlock: {e}");
            std::process::exit(exit::USAGE);
        }
    };
    let code = rt.block_on(async move {
        match cli.cmd {
            Cmd::Run(a) => run::run(opts.clone(), a).await,
            Cmd::Status(a) => status::status(opts.clone(), a).await,
            Cmd::List(a) => status::list(opts.clone(), a).await,
            Cmd::Watch(a) => status::watch(opts.clone(), a).await,
            Cmd::Release(a) => status::release(opts.clone(), a).await,
            Cmd::Latch(a) => sync::latch(opts.clone(), a).await,
            Cmd::Barrier(a) => sync::barrier(opts.clone(), a).await,
            Cmd::Elect(a) => elect::elect(opts.clone(), a).await,
            Cmd::Once(a) => once::once(opts.clone(), a).await,
            Cmd::Leader(a) => elect::leader(opts.clone(), a).await,
            Cmd::Ui(a) => ui::ui(opts.clone(), a).await,
            Cmd::Deadlocks(a) => report::deadlocks(opts.clone(), a).await,
            Cmd::History(a) => report::history(opts.clone(), a).await,
            Cmd::FlashWorker => flash::worker().await,
            Cmd::Completions { .. } | Cmd::Man | Cmd::Supervise => 0, // answered before the runtime started
            #[cfg(feature = "bench")]
            Cmd::Bench {
                iterations,
                contenders,
                duration,
                distinct,
                waiters,
                held,
                burst,
                breadth,
                clients,
                names,
                fleet,
                locks,
                fleet_waiters,
                fleet_prefix,
                fleet_sample,
                probe_pace,
                recipes,
                use_endpoints,
                json,
            } => {
                if fleet {
                    // Against the given endpoints, with the global options (--ttl).
                    let a = bench_fleet::FleetArgs {
                        clients,
                        locks,
                        waiters: fleet_waiters,
                        prefix: fleet_prefix,
                        sample: fleet_sample,
                        probe_pace,
                    };
                    return bench_fleet::run(opts.clone(), a).await;
                }
                bench::run(bench::BenchArgs {
                    endpoints: use_endpoints.then(|| opts.endpoints.clone()),
                    iterations: iterations.max(10),
                    contenders: contenders.max(1),
                    duration: duration.max(Duration::from_millis(100)),
                    distinct,
                    waiters,
                    held,
                    burst,
                    breadth: breadth.then_some((clients.max(1), names.max(1))),
                    recipes,
                    json_only: json,
                })
                .await
            }
        }
    });
    rt.shutdown_timeout(Duration::from_millis(200));
    std::process::exit(code);
}
