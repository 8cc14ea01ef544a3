//! The examples and notes each subcommand's `--help` shows after its flags
//! (and so its man page).

pub(crate) const AFTER_HELP: &str = "\
Examples:
  etcdlock run nightly-report -- ./report.sh --full
  etcdlock --endpoints http://10.0.0.5:2379 run stock --timeout 5 -- python deduct.py
  etcdlock status stock --json
  etcdlock list jobs/                                       # every lock under jobs/
  etcdlock watch --json                                     # every change, as JSON lines
  etcdlock run transcode --permits 3 -- ./transcode.sh      # at most 3 at once
  etcdlock run report --read -- ./read-only-report.sh       # shared with other readers
  etcdlock elect scheduler \"$HOSTNAME\" -- ./scheduler     # run while leader
  etcdlock leader scheduler --watch

Environment (the same names every etcdlock binding reads):
  ETCDLOCK_ENDPOINTS  ETCDLOCK_TTL  ETCDLOCK_NAMESPACE  ETCDLOCK_USERNAME  ETCDLOCK_PASSWORD
  ETCDLOCK_TLS_CA  ETCDLOCK_TLS_CERT  ETCDLOCK_TLS_KEY  ETCDLOCK_TLS_DOMAIN
  ETCDLOCK_CONNECT_TIMEOUT  ETCDLOCK_REQUEST_TIMEOUT  ETCDLOCK_MARGIN  ETCDLOCK_WATCH_HELD_KEYS
  Flags override variables key by key. `run` and `elect` export ETCDLOCK_LOCK_NAME,
  ETCDLOCK_FENCING_TOKEN, ETCDLOCK_KEY (the lock key) and ETCDLOCK_LEASE_ID to their
  command; `once` exports ETCDLOCK_LOCK_NAME and ETCDLOCK_FENCING_TOKEN.

Exit codes:
  run passes the command's exit status through (128+N if killed by signal N).
  1 error  2 usage (bad flags or values)  3 no leader (leader)  69 etcd unavailable  70 lock lost while the command ran
  75 timed out waiting (or --try found it held)  77 auth/permission  130 interrupted";

/// What `run` and `elect` put in the command's environment (run.rs and
/// elect.rs set exactly these), for their `--help`.
macro_rules! hold_env {
    () => {
        "\
The command's environment gets (besides what etcdlock was given):
  ETCDLOCK_LOCK_NAME      the name, as given
  ETCDLOCK_FENCING_TOKEN  the hold's fencing token (its key's create
                          revision): higher for every new holder, so
                          pass it to what the command writes to
  ETCDLOCK_KEY            the hold's key in etcd (NAME/<lease in hex>)
  ETCDLOCK_LEASE_ID       the session's lease, in hex
"
    };
}

// Every subcommand's --help (and man page) ends with examples; the ones that
// run a command first name what they put in its environment
// (tests/help.rs checks both for every subcommand). Lines fit a man page
// (72 columns), comments on lines of their own.
pub(crate) const RUN_HELP: &str = concat!(
    hold_env!(),
    "
Examples:
  etcdlock run nightly-report -- ./report.sh --full
  # exit 75 after waiting 5 s, or at once if held:
  etcdlock run stock --timeout 5s -- ./deduct.sh
  etcdlock run nightly-report --try -- ./report.sh
  # at most 3 at once; shared with other readers:
  etcdlock run transcode --permits 3 -- ./transcode.sh
  etcdlock run report --read -- ./report.sh"
);
pub(crate) const ELECT_HELP: &str = concat!(
    hold_env!(),
    "
Examples:
  # campaign again after a loss; or exit 70:
  etcdlock elect scheduler \"$HOSTNAME\" -- ./scheduler
  etcdlock elect scheduler \"$HOSTNAME\" --exit-on-loss -- ./scheduler"
);
pub(crate) const ONCE_HELP: &str = "\
The command's environment gets (besides what etcdlock was given):
  ETCDLOCK_LOCK_NAME      the job's name, as given
  ETCDLOCK_FENCING_TOKEN  the run-once record's revision: higher for
                          every take

Examples:
  etcdlock once nightly-report --at-most 30m --at-least 1m -- ./report.sh
  # the job of @SchedulerLock(name = \"nightly-report\"):
  etcdlock once shedlock/nightly-report --at-most 30m -- ./report.sh";
pub(crate) const STATUS_HELP: &str = "\
Examples:
  etcdlock status nightly-report
  etcdlock status nightly-report --json";
pub(crate) const LIST_HELP: &str = "\
Examples:
  etcdlock list
  etcdlock list jobs/ --json";
pub(crate) const WATCH_HELP: &str = "\
Examples:
  etcdlock watch jobs/
  # one JSON document per change:
  etcdlock watch --json";
pub(crate) const DEADLOCKS_HELP: &str = "\
Exit status: 0 no cycle, 1 a cycle (printed), 2 usage, 69 etcd unreachable,
75 timed out, 77 permission denied; any other error 1, with a message on stderr.

Examples:
  etcdlock deadlocks jobs/
  # in a script: exit 1 when clients wait on each other
  etcdlock deadlocks --json > cycles.json || echo deadlock";
pub(crate) const HISTORY_HELP: &str = "\
Examples:
  etcdlock history nightly-report --since 1h
  # core's record (tokens and revisions as decimal strings):
  etcdlock history nightly-report --json";
pub(crate) const UI_HELP: &str = "\
Examples:
  etcdlock ui jobs/
  # any free port (the URL is the first line on stdout):
  etcdlock ui --listen 127.0.0.1:0
  # let the page release a wedged hold; each request carries the token:
  etcdlock ui --allow-release --release-token \"$(cat /etc/etcdlock/ui-token)\"
  # scripts: curl -s 'http://127.0.0.1:7379/api/locks?prefix=jobs/'";
pub(crate) const RELEASE_HELP: &str = "\
Examples:
  # status shows the holder's fencing token; release only that hold:
  etcdlock status nightly-report
  etcdlock release nightly-report --token 4711";
pub(crate) const LATCH_HELP: &str = "\
Examples:
  # in each of 3 workers, then in the process that waits:
  etcdlock latch shards --count 3 --count-down
  etcdlock latch shards --count 3 --wait --timeout 60s";
pub(crate) const BARRIER_HELP: &str = "\
Examples:
  # in each of 3 processes:
  etcdlock barrier start --parties 3 --timeout 30s";
pub(crate) const LEADER_HELP: &str = "\
Examples:
  etcdlock leader scheduler
  etcdlock leader scheduler --watch";
pub(crate) const COMPLETIONS_HELP: &str = "\
Examples:
  etcdlock completions bash > /etc/bash_completion.d/etcdlock
  etcdlock completions zsh > ~/.zfunc/_etcdlock";
#[cfg(feature = "bench")]
pub(crate) const BENCH_HELP: &str = "\
Examples:
  cargo run --release -p etcdlock-cli --features bench -- bench
  etcdlock bench --recipes";
