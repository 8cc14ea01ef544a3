//! `etcdlock elect NAME VALUE -- CMD...` and `etcdlock leader NAME [--watch]`:
//! leader election on the lock's keys, compatible with `etcdctl elect`.

use clap::Args;
use etcdlock::{
    CancellationToken, Client, ClientOptions, ErrorCode, LeadOptions, Leader, LeaderEvent,
    LeaderLoop, Term,
};

use crate::run::{failed, interrupted, prepare, supervise, Command, Ended, Stops};
use crate::{exit, exit_code_for};

#[derive(Args)]
pub struct ElectArgs {
    /// Election name (`etcdctl elect NAME` takes part in the same election) (escapes such as \n and \xHH are decoded)
    #[arg(value_parser = crate::parse_name)]
    pub name: String,
    /// The value to proclaim while leader
    pub value: String,
    /// Give up campaigning after this long (exit 75): 500ms, 5s, 2m, plain seconds, or inf
    #[arg(long, value_parser = crate::parse_limit)]
    pub timeout: Option<crate::Limit>,
    /// Signal sent to the command when leadership is lost
    #[arg(long, default_value = "TERM")]
    pub signal: String,
    /// Time between a stop signal (or the loss signal) to the command's process group and SIGKILL: 10s, 500ms, or never
    #[arg(long, default_value = "10s", value_parser = crate::parse_limit)]
    pub grace: crate::Limit,
    /// Print the fencing token and key to stderr when elected
    #[arg(long, short)]
    pub verbose: bool,
    /// Serve Prometheus metrics of this election at http://ADDR/metrics (e.g. 127.0.0.1:9464) while running
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Exit 70 after a lost leadership instead of campaigning again (the
    /// command is stopped either way)
    #[arg(long)]
    pub exit_on_loss: bool,
    /// The command to run while leader
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Args)]
pub struct LeaderArgs {
    /// Election name (escapes such as \n and \xHH are decoded)
    #[arg(value_parser = crate::parse_name)]
    pub name: String,
    /// Keep printing the leader as it changes ("-" when there is none) until interrupted
    #[arg(long)]
    pub watch: bool,
}

pub async fn elect(opts: ClientOptions, a: ElectArgs) -> i32 {
    let (sig, mut stops) = match prepare(&a.signal) {
        Ok(p) => p,
        Err(code) => return code,
    };
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
    let lp = match client.leader_loop(
        &a.name,
        &a.value,
        LeadOptions {
            again: !a.exit_on_loss,
            ..LeadOptions::default()
        },
    ) {
        Ok(lp) => lp,
        Err(e) => return failed(Some(client), &e).await,
    };
    // --timeout bounds the first campaign only: once elected, a lost
    // leadership is campaigned for again without a limit.
    let mut first_deadline = a
        .timeout
        .and_then(crate::Limit::duration)
        .and_then(|t| tokio::time::Instant::now().checked_add(t));
    loop {
        let ev = tokio::select! {
            ev = lp.next() => ev,
            _ = stops.recv() => {
                lp.stop();
                drain(&lp).await;
                return interrupted(&client, &CancellationToken::new(), &a.name).await;
            }
            _ = sleep_until_opt(first_deadline) => {
                lp.stop();
                drain(&lp).await;
                crate::observe::say(
                    "error",
                    &format!("not elected leader of {} within the timeout", crate::status::escape(&a.name)),
                    serde_json::json!({"event": "timeout", "lock": a.name}),
                );
                client.close().await;
                return exit::TIMEOUT;
            }
        };
        let term = match ev {
            Some(LeaderEvent::Elected(term)) => term,
            Some(LeaderEvent::CampaignFailed(e)) if e.code() == ErrorCode::Unavailable => {
                crate::observe::say(
                    "warn",
                    &format!("campaign failed ({e}); campaigning again"),
                    serde_json::json!({"event": "campaign_failed", "lock": a.name, "code": e.code().name()}),
                );
                continue;
            }
            Some(LeaderEvent::CampaignFailed(e)) => {
                lp.stop();
                drain(&lp).await;
                return failed(Some(client), &e).await;
            }
            Some(_) => continue,
            None => {
                client.close().await;
                return exit::ERROR;
            }
        };
        first_deadline = None;
        let code = run_term(&a, &lp, &term, sig, &mut stops).await;
        term.end();
        match code {
            Some(code) => {
                // The command ended on its own (or was stopped): resign and exit.
                lp.stop();
                drain(&lp).await;
                client.close().await;
                return code;
            }
            None if a.exit_on_loss => {
                drain(&lp).await;
                client.close().await;
                return exit::LOST;
            }
            None => crate::observe::say(
                "info",
                &format!("campaigning again for {}", crate::status::escape(&a.name)),
                serde_json::json!({"event": "campaigning", "lock": a.name}),
            ),
        }
    }
}

/// One term: run the command while leader. `Some(code)` when the command
/// ended (its code), `None` when leadership was lost (the command's group got
/// --signal and is gone).
async fn run_term(
    a: &ElectArgs,
    lp: &LeaderLoop,
    term: &Term,
    sig: i32,
    stops: &mut Stops,
) -> Option<i32> {
    let l = term.leadership();
    if a.verbose || crate::observe::json() {
        crate::observe::say(
            "info",
            &format!(
                "leader of {} (key {}, fencing token {})",
                crate::status::escape(&a.name),
                l.key(),
                l.fencing_token()
            ),
            serde_json::json!({"event": "acquired", "lock": a.name, "key": l.key(), "fencing_token": l.fencing_token()}),
        );
    }
    let cmd = Command {
        name: &a.name,
        argv: &a.command,
        env: vec![
            ("ETCDLOCK_FENCING_TOKEN", l.fencing_token().to_string()),
            ("ETCDLOCK_KEY", l.key().to_string()),
            ("ETCDLOCK_LEASE_ID", format!("{:x}", l.lease_id())),
            ("ETCDLOCK_LOCK_NAME", a.name.clone()),
        ],
        sig,
        sig_name: &a.signal,
        grace: a.grace,
    };
    let lost = async {
        loop {
            match lp.next().await {
                Some(LeaderEvent::Lost(loss)) => return loss.reason,
                Some(LeaderEvent::RenewalFailing) => crate::observe::say(
                    "warn",
                    &format!(
                        "leadership of {}: keep-alives are failing",
                        crate::status::escape(&a.name)
                    ),
                    serde_json::json!({"event": "renewal_failing", "lock": a.name}),
                ),
                Some(_) => {}
                None => return std::future::pending().await,
            }
        }
    };
    match supervise(cmd, lost, stops).await {
        Ended::Exited(code) | Ended::NotStarted(code) => Some(code),
        Ended::Lost => None,
    }
}

/// Every event left, up to Stopped.
async fn drain(lp: &LeaderLoop) {
    while let Some(ev) = lp.next().await {
        if let LeaderEvent::Elected(t) = ev {
            t.end();
        }
    }
}

async fn sleep_until_opt(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

fn line(l: &Option<Leader>) -> String {
    match l {
        Some(l) => format!(
            "{}\t{}\t{}",
            String::from_utf8_lossy(&l.value),
            String::from_utf8_lossy(&l.key),
            l.revision
        ),
        None => "-".into(),
    }
}

pub async fn leader(opts: ClientOptions, a: LeaderArgs) -> i32 {
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
    if !a.watch {
        let r = client.leader(&a.name).await;
        client.close().await;
        return match r {
            Ok(l) => {
                println!("{}", line(&l));
                if l.is_some() {
                    0
                } else {
                    exit::NO_LEADER
                }
            }
            Err(e) => {
                crate::observe::say(
                    "error",
                    &e.to_string(),
                    serde_json::json!({"code": e.code().name()}),
                );
                exit_code_for(&e)
            }
        };
    }
    let mut obs = match client.observe(&a.name) {
        Ok(o) => o,
        Err(e) => {
            crate::observe::say(
                "error",
                &e.to_string(),
                serde_json::json!({"code": e.code().name()}),
            );
            return exit_code_for(&e);
        }
    };
    #[cfg(unix)]
    let mut sigint = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
    {
        Ok(s) => s,
        Err(_) => return exit::ERROR,
    };
    #[cfg(windows)]
    let mut sigint = match tokio::signal::windows::ctrl_c() {
        Ok(s) => s,
        Err(_) => return exit::ERROR,
    };
    loop {
        tokio::select! {
            r = obs.next() => match r {
                Ok(l) => println!("{}", line(&l)),
                Err(e) => {
                    crate::observe::say("error", &e.to_string(), serde_json::json!({"code": e.code().name()}));
                    client.close().await;
                    return exit_code_for(&e);
                }
            },
            _ = sigint.recv() => {
                client.close().await;
                return 0;
            }
        }
    }
}
