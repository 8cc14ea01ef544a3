//! `etcdlock status NAME`, `etcdlock list [PREFIX]` and `etcdlock watch
//! [PREFIX]`: holders and queues of every lock kind, in create_revision order,
//! as a table or JSON. Names are shown escaped (`\n`, `\x1b`, ...) so a name
//! with control characters cannot break a table or a terminal.
use std::time::Duration;

use clap::Args;
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
        Ok(st) if a.json => println!("{}", view::status(&st)),
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
        Ok(l) if a.json => println!("{}", view::list(&a.prefix, &l)),
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
    let mut rx = match etcdlock::bridge::list_changes(&client, &a.prefix).await {
        Ok(rx) => rx,
        Err(e) => {
            eprintln!("etcdlock: cannot watch: {e}");
            return exit_code_for(&e);
        }
    };
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    loop {
        match client.list(&a.prefix).await {
            Ok(l) if a.json => println!("{}", view::list(&a.prefix, &l)),
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

/// `status --json`, `list --json` and `watch --json`: core's records
/// ([`Status`], [`Contender`]) under the CLI's documented key names and
/// units (docs/operations/inspect.md), declared once here as serde views over
/// the record's fields. Core has the one encoding of the records
/// (`etcdlock::records`); this is the CLI's mapping of it, not a second one:
/// each field is the record's, renamed (`kind` -> `contender`,
/// `ttl_remaining` -> `ttl_remaining_s`, `create_revision` ->
/// `fencing_token`), with the CLI's units (hexadecimal lease, tokens and
/// revisions as numbers, the value as text), plus each contender's
/// `position` (holders 0, waiters from 1 in queue order) and `holder`, the
/// first holder.
mod view {
    use etcdlock::{Contender, ContenderKind, Status};
    use serde::{Serialize, Serializer};

    #[derive(Serialize)]
    struct ListView<'a> {
        prefix: &'a str,
        revision: Option<i64>,
        locks: Vec<StatusView<'a>>,
    }

    #[derive(Serialize)]
    struct StatusView<'a> {
        name: &'a str,
        kind: Option<&'static str>,
        revision: i64,
        holder: Option<ContenderView<'a>>,
        holders: Vec<ContenderView<'a>>,
        waiters: Vec<ContenderView<'a>>,
    }

    #[derive(Serialize, Clone)]
    struct ContenderView<'a> {
        position: usize,
        key: &'a str,
        #[serde(rename = "contender", serialize_with = "kind_name")]
        kind: ContenderKind,
        #[serde(rename = "permits", serialize_with = "permits")]
        permit_count: ContenderKind,
        #[serde(serialize_with = "hex")]
        lease_id: i64,
        #[serde(rename = "ttl_remaining_s")]
        ttl_remaining: Option<i64>,
        #[serde(rename = "fencing_token")]
        create_revision: i64,
        age_ms: Option<u64>,
        host: &'a Option<String>,
        pid: Option<u32>,
        language: &'a Option<String>,
        local_waiters: Option<u32>,
        #[serde(serialize_with = "pairs")]
        metadata: &'a [(String, String)],
        foreign: bool,
        #[serde(serialize_with = "text")]
        value: &'a [u8],
    }

    fn contender(c: &Contender, position: usize) -> ContenderView<'_> {
        ContenderView {
            position,
            key: &c.key,
            kind: c.kind,
            permit_count: c.kind,
            lease_id: c.lease_id,
            ttl_remaining: c.ttl_remaining,
            create_revision: c.create_revision,
            age_ms: c.age_ms,
            host: &c.host,
            pid: c.pid,
            language: &c.language,
            local_waiters: c.local_waiters,
            metadata: &c.metadata,
            foreign: c.foreign,
            value: &c.value,
        }
    }

    fn view(st: &Status) -> StatusView<'_> {
        let holders: Vec<_> = st.holders.iter().map(|c| contender(c, 0)).collect();
        StatusView {
            name: &st.name,
            kind: st.kind.map(|k| k.name()),
            revision: st.revision,
            holder: holders.first().cloned(),
            holders,
            waiters: (st.waiters.iter().enumerate())
                .map(|(i, c)| contender(c, i + 1))
                .collect(),
        }
    }

    /// One name's holders and waiters (`status --json`).
    pub fn status(st: &Status) -> String {
        serde_json::to_string(&view(st)).unwrap_or_default()
    }

    /// Every name under a prefix (`list --json`, `watch --json`).
    pub fn list(prefix: &str, l: &[Status]) -> String {
        let v = ListView {
            prefix,
            revision: l.first().map(|s| s.revision),
            locks: l.iter().map(view).collect(),
        };
        serde_json::to_string(&v).unwrap_or_default()
    }

    fn kind_name<S: Serializer>(k: &ContenderKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match k {
            ContenderKind::Exclusive => "exclusive",
            ContenderKind::Reader => "reader",
            ContenderKind::Permit(_) => "permit",
        })
    }

    fn permits<S: Serializer>(k: &ContenderKind, s: S) -> Result<S::Ok, S::Error> {
        match k {
            ContenderKind::Permit(n) => s.serialize_some(n),
            _ => s.serialize_none(),
        }
    }

    fn hex<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{v:x}"))
    }

    fn pairs<S: Serializer>(v: &&[(String, String)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(v.iter().map(|(k, v)| (k, v)))
    }

    fn text<S: Serializer>(v: &&[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&String::from_utf8_lossy(v))
    }
}
