//! `etcdlock once NAME --at-most D [--at-least D] -- CMD...`: run a scheduled
//! job on one node only, on core's run-once record (ShedLock's model), the
//! same record Java's `@SchedulerLock` provider, Python's and Node's `once`
//! use: a cron line on every node and a Spring task exclude each other.
use std::time::Duration;

use clap::Args;
use etcdlock::{Client, ClientOptions};

use crate::exit;
use crate::run::{failed, prepare, supervise, Command, Ended};

#[derive(Args)]
pub struct OnceArgs {
    /// Job name (escapes such as \n and \xHH are decoded); the same name as
    /// the `@SchedulerLock`/`once` jobs it must exclude
    #[arg(value_parser = crate::parse_name)]
    pub name: String,
    /// Keep the job taken at most this long from the start (ShedLock's
    /// lockAtMostFor): the record then expires even if this node died. A
    /// command still running then is not stopped, but other nodes may run
    /// the job again: make it longer than the job ever runs
    #[arg(long, value_parser = crate::parse_finite)]
    pub at_most: Duration,
    /// Keep the job taken at least this long from the start, even if the
    /// command ends sooner (ShedLock's lockAtLeastFor: absorbs clock skew
    /// between nodes whose schedules fire at the same time)
    #[arg(long, default_value = "0s", value_parser = crate::parse_finite)]
    pub at_least: Duration,
    /// Exit code when another node has the job (it ran, or runs now): 0, so
    /// a cron line on every node reports success on all of them
    #[arg(long, default_value_t = 0, value_name = "CODE")]
    pub skipped_exit: i32,
    /// Time between a stop signal to the command's process group and SIGKILL: 10s, 500ms, or never
    #[arg(long, default_value = "10s", value_parser = crate::parse_limit)]
    pub grace: crate::Limit,
    /// Print to stderr whether the job was taken (and by whom, when skipped)
    #[arg(long, short)]
    pub verbose: bool,
    /// The command and its arguments
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

pub async fn once(opts: ClientOptions, a: OnceArgs) -> i32 {
    if a.at_least > a.at_most {
        crate::observe::say(
            "error",
            "--at-least must not exceed --at-most",
            serde_json::json!({}),
        );
        return exit::USAGE;
    }
    // No loss to signal (a run-once record has no lease): stop signals go
    // to the command's group as they come.
    let (sig, mut stops) = match prepare("TERM") {
        Ok(p) => p,
        Err(code) => return code,
    };
    let client = match Client::connect(opts).await {
        Ok(c) => c,
        Err(e) => return failed(None, &e).await,
    };
    let hold = match client.once_take(&a.name, a.at_most).await {
        Ok(Some(h)) => h,
        Ok(None) => {
            let by = match client.once_record(&a.name).await {
                Ok(Some(r)) => format!(
                    " (taken by {}:{} until {} ms since the epoch)",
                    r.locked_by, r.pid, r.lock_until_ms
                ),
                _ => String::new(),
            };
            if a.verbose || crate::observe::json() {
                crate::observe::say(
                    "info",
                    &format!("job {} skipped{by}", crate::status::escape(&a.name)),
                    serde_json::json!({"event": "skipped", "job": a.name}),
                );
            }
            client.close().await;
            return a.skipped_exit;
        }
        Err(e) => return failed(Some(client), &e).await,
    };
    if a.verbose || crate::observe::json() {
        crate::observe::say(
            "info",
            &format!(
                "running job {} (record revision {})",
                crate::status::escape(&a.name),
                hold.revision()
            ),
            serde_json::json!({"event": "taken", "job": a.name, "revision": hold.revision()}),
        );
    }
    let cmd = Command {
        name: &a.name,
        argv: &a.command,
        env: vec![
            ("ETCDLOCK_LOCK_NAME", a.name.clone()),
            ("ETCDLOCK_FENCING_TOKEN", hold.revision().to_string()),
        ],
        sig,
        sig_name: "TERM",
        grace: a.grace,
    };
    // No lease holds a run-once record: nothing can take it from the command.
    let (code, ran) = match supervise(cmd, std::future::pending(), &mut stops).await {
        Ended::Exited(code) => (code, true),
        Ended::NotStarted(code) => (code, false),
        Ended::Lost => (exit::LOST, true),
    };
    // A job that did not start frees its record at once; one that ran stays
    // taken until --at-least from its start.
    let at_least = if ran { a.at_least } else { Duration::ZERO };
    if let Err(e) = client.once_finish(&hold, at_least).await {
        crate::observe::say(
            "warn",
            &format!(
                "job {}: its record could not be finished ({e}); it expires {:?} after the start",
                crate::status::escape(&a.name),
                a.at_most
            ),
            serde_json::json!({"event": "finish_failed", "job": a.name, "code": e.code().name()}),
        );
    }
    client.close().await;
    code
}
