//! `etcdlock status NAME`, `etcdlock list [PREFIX]` and `etcdlock watch
//! [PREFIX]`: holders and queues of every lock kind, in create_revision order,
//! as a table or JSON. Names are shown escaped (`\n`, `\x1b`, ...) so a name
//! with control characters cannot break a table or a terminal.
use std::time::Duration;

use clap::Args;
use etcd_client::{EventType, WatchOptions};
use etcdlock::{Client, ClientOptions, Contender, Status};

use crate::exit_code_for;

#[derive(Args)]
pub struct StatusArgs {
    /// Lock name (escapes such as \n, \t, \xHH, \u{HHHH} and \\ are decoded)
    #[arg(value_parser = crate::parse_name)]
    pub name: String,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ListArgs {
    /// Show the locks whose names start with this (default: all)
    #[arg(default_value = "", value_parser = crate::parse_prefix)]
    pub prefix: String,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ReleaseArgs {
    /// Lock name (escapes such as \n and \xHH are decoded)
    #[arg(value_parser = crate::parse_name)]
    pub name: String,
    /// The fencing token of the hold to release (`status` shows it); without
    /// it, the current holder's
    #[arg(long)]
    pub token: Option<i64>,
}

/// Free a lock whose holder is wedged: delete the holder's key if it still
/// has the token. Exit 0 when released, 3 when no key has that token (or
/// nobody holds).
pub async fn release(opts: ClientOptions, a: ReleaseArgs) -> i32 {
    let client = match connect(opts).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let token = match a.token {
        Some(t) => Ok(Some(t)),
        None => client
            .status(&a.name)
            .await
            .map(|st| st.holders.first().map(|h| h.create_revision)),
    };
    let r = match token {
        Ok(Some(t)) => client
            .release(&a.name, t)
            .await
            .map(|done| done.then_some(t)),
        Ok(None) => Ok(None),
        Err(e) => Err(e),
    };
    client.close().await;
    match r {
        Ok(Some(t)) => {
            println!("released \"{}\" (fencing token {t})", escape(&a.name));
            0
        }
        Ok(None) => {
            eprintln!(
                "etcdlock: nothing to release: no hold of \"{}\" with that token",
                escape(&a.name)
            );
            crate::exit::NO_LEADER
        }
        Err(e) => {
            eprintln!("etcdlock: {e}");
            exit_code_for(&e)
        }
    }
}

/// A name or key as shown in a table: control characters and backslashes
/// escaped as Rust writes them, everything else as is.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

async fn connect(opts: ClientOptions) -> Result<Client, i32> {
    Client::connect(opts).await.map_err(|e| {
        eprintln!("etcdlock: {e}");
        exit_code_for(&e)
    })
}

pub async fn status(opts: ClientOptions, a: StatusArgs) -> i32 {
    let client = match connect(opts).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let r = client.status(&a.name).await;
    client.close().await;
    match r {
        Ok(st) if a.json => println!("{}", etcdlock::bridge::status_json(&st)),
        Ok(st) => print_status(&st),
        Err(e) => {
            eprintln!("etcdlock: {e}");
            return exit_code_for(&e);
        }
    }
    0
}

pub async fn list(opts: ClientOptions, a: ListArgs) -> i32 {
    let client = match connect(opts).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let r = client.list(&a.prefix).await;
    client.close().await;
    match r {
        Ok(l) if a.json => println!("{}", etcdlock::bridge::list_json(&a.prefix, &l)),
        Ok(l) => print_list(&a.prefix, &l),
        Err(e) => {
            eprintln!("etcdlock: {e}");
            return exit_code_for(&e);
        }
    }
    0
}

/// Follow the locks under a prefix: a new view after every change of their
/// keys or meta records (coalesced over 50 ms), as a redrawn table or one JSON
/// document per line. Runs until interrupted.
pub async fn watch(opts: ClientOptions, a: ListArgs) -> i32 {
    let client = match connect(opts).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let ns = client.namespace().to_vec();
    let mut etcd = match client.etcd().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("etcdlock: {e}");
            return exit_code_for(&e);
        }
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    for sub in [
        a.prefix.clone(),
        format!("{}{}", etcdlock::META_PREFIX, a.prefix),
    ] {
        let mut from = ns.clone();
        from.extend_from_slice(sub.as_bytes());
        let mut s = match etcd
            .watch(from, Some(WatchOptions::new().with_prefix()))
            .await
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!("etcdlock: cannot watch: {e}");
                return crate::exit::UNAVAILABLE;
            }
        };
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Ok(Some(r)) = s.message().await {
                if r.events()
                    .iter()
                    .any(|e| matches!(e.event_type(), EventType::Put | EventType::Delete))
                {
                    let _ = tx.send(());
                }
            }
        });
    }
    drop(tx);
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    loop {
        match client.list(&a.prefix).await {
            Ok(l) if a.json => println!("{}", etcdlock::bridge::list_json(&a.prefix, &l)),
            Ok(l) => {
                if tty {
                    print!("\x1b[H\x1b[2J");
                }
                print_list(&a.prefix, &l);
            }
            Err(e) => eprintln!("etcdlock: {e}"),
        }
        // The next change (a table also refreshes each second for the TTLs).
        let wait = if a.json {
            Duration::MAX
        } else {
            Duration::from_secs(1)
        };
        if let Ok(None) = tokio::time::timeout(wait, rx.recv()).await {
            eprintln!("etcdlock: the watch ended");
            return crate::exit::UNAVAILABLE;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        while rx.try_recv().is_ok() {}
    }
}

fn who(c: &Contender) -> String {
    if c.foreign {
        return "foreign (etcdctl, Go)".into();
    }
    let mut s = format!(
        "{} pid {}",
        c.host.as_deref().unwrap_or("?"),
        c.pid.map(|p| p.to_string()).unwrap_or_else(|| "?".into())
    );
    if let Some(l) = &c.language {
        s.push(' ');
        s.push_str(l);
    }
    for (k, v) in &c.metadata {
        s.push_str(&format!(" {}={}", escape(k), escape(v)));
    }
    s
}

fn secs(ms: Option<u64>) -> String {
    ms.map(|ms| format!("{:.1}s", ms as f64 / 1000.0))
        .unwrap_or_else(|| "-".into())
}

fn print_status(st: &Status) {
    let kind = st.kind.map(|k| k.name()).unwrap_or("lock");
    if st.holders.is_empty() && st.waiters.is_empty() {
        println!("{kind} \"{}\": free", escape(&st.name));
        return;
    }
    println!(
        "{kind} \"{}\": {} holding, {} waiting",
        escape(&st.name),
        st.holders.len(),
        st.waiters.len()
    );
    println!(
        "{:<8} {:<44} {:<18} {:>6} {:>10} {:>8} {:>6}  OWNER",
        "ROLE", "KEY", "LEASE", "TTL", "TOKEN", "FOR", "LOCAL"
    );
    let rows = st.holders.iter().map(|c| ("holder".to_string(), c)).chain(
        st.waiters
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("#{}", i + 1), c)),
    );
    for (role, c) in rows {
        println!(
            "{:<8} {:<44} {:<18} {:>6} {:>10} {:>8} {:>6}  {}",
            role,
            escape(&c.key),
            format!("{:x}", c.lease_id),
            c.ttl_remaining
                .map(|t| format!("{t}s"))
                .unwrap_or_else(|| "-".into()),
            c.create_revision,
            secs(c.age_ms),
            c.local_waiters
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into()),
            who(c),
        );
    }
}

fn print_list(prefix: &str, l: &[Status]) {
    if l.is_empty() {
        println!("no locks under \"{}\"", escape(prefix));
        return;
    }
    println!(
        "{:<32} {:<9} {:>7} {:>7} {:>10} {:>8}  HOLDER",
        "NAME", "KIND", "HOLDING", "WAITING", "TOKEN", "FOR"
    );
    for st in l {
        // Waiting: keys in etcd, plus what the clients queue locally beyond them.
        // (a client's record counts all its acquisitions of the name, once per lease).
        let by_lease: std::collections::HashMap<i64, u32> = st
            .holders
            .iter()
            .chain(st.waiters.iter())
            .map(|c| (c.lease_id, c.local_waiters.unwrap_or(0)))
            .collect();
        let local: u32 = by_lease.values().sum();
        let waiting = st.waiters.len().max(local as usize);
        let h = st.holders.first();
        println!(
            "{:<32} {:<9} {:>7} {:>7} {:>10} {:>8}  {}",
            escape(&st.name),
            st.kind.map(|k| k.name()).unwrap_or("-"),
            st.holders.len(),
            waiting,
            h.map(|c| c.create_revision.to_string())
                .unwrap_or_else(|| "-".into()),
            secs(h.and_then(|c| c.age_ms)),
            h.map(who).unwrap_or_else(|| "-".into()),
        );
    }
}
