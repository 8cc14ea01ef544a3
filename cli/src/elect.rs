//! `etcdlock elect NAME VALUE -- CMD...` and `etcdlock leader NAME [--watch]`:
//! leader election on the lock's keys, compatible with `etcdctl elect`.

use clap::Args;
use etcdlock::{CancellationToken, Client, ClientOptions, Leader, LockOptions};

use crate::run::{interrupted, run_while_held, signal_number, Stops};
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
    let Some(sig) = signal_number(&a.signal) else {
        crate::observe::say(
            "error",
            &format!("unknown signal {:?}", a.signal),
            serde_json::json!({}),
        );
        return exit::USAGE;
    };
    let Some(mut stops) = Stops::install() else {
        crate::observe::say(
            "error",
            "cannot install signal handlers",
            serde_json::json!({}),
        );
        return exit::ERROR;
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
    let cancel = CancellationToken::new();
    let lo = LockOptions {
        timeout: a.timeout.and_then(crate::Limit::duration),
        cancel: Some(cancel.clone()),
        ..LockOptions::default()
    };
    let leadership = tokio::select! {
        r = client.campaign(&a.name, &a.value, lo) => match r {
            Ok(l) => l,
            Err(e) => {
                crate::observe::say("error", &e.to_string(), serde_json::json!({"code": e.code().name()}));
                client.close().await;
                return exit_code_for(&e);
            }
        },
        _ = stops.recv() => return interrupted(&client, &cancel, &a.name).await,
    };
    let cmd = crate::run::Command {
        name: &a.name,
        argv: &a.command,
        env: Vec::new(),
        sig,
        sig_name: &a.signal,
        grace: a.grace,
    };
    run_while_held(client, leadership.into_guard(), cmd, a.verbose, &mut stops).await
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
