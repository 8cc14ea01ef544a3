//! `etcdlock deadlocks [PREFIX]` and `etcdlock history NAME`: core's
//! deadlock report and a lock's history (`Client::deadlocks`,
//! `Client::history`), as text or as core's records in JSON (`--json`).

use std::time::Duration;

use clap::Args;
use etcdlock::records::{Deadlocks, History, HistoryEntry, Party};
use etcdlock::{Client, ClientOptions};

use crate::exit_code_for;
use crate::status::escape;

/// `deadlocks`' exit status when it found a cycle.
pub const CYCLE: i32 = 1;

#[derive(Args)]
pub struct DeadlocksArgs {
    /// Look at the locks whose names start with this (default: all)
    #[arg(default_value = "", value_parser = crate::parse_prefix)]
    pub prefix: String,
    /// Print core's record as JSON instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct HistoryArgs {
    /// Lock name (escapes such as \n and \xHH are decoded)
    #[arg(value_parser = crate::parse_name)]
    pub name: String,
    /// Only the keys queued in this last span (e.g. 1h, 15m; default: as far
    /// back as etcd keeps)
    #[arg(long, value_parser = crate::parse_finite)]
    pub since: Option<Duration>,
    /// Print core's record as JSON instead of text
    #[arg(long)]
    pub json: bool,
}

async fn connect(opts: ClientOptions) -> Result<Client, i32> {
    Client::connect(opts).await.map_err(|e| {
        eprintln!("etcdlock: {e}");
        exit_code_for(&e)
    })
}

fn party(p: &Party) -> String {
    format!("client {}", escape(&p.describe()))
}

/// Print the clients waiting on each other under a prefix; exit 1 if any
/// cycle, 0 if none.
pub async fn deadlocks(opts: ClientOptions, a: DeadlocksArgs) -> i32 {
    let client = match connect(opts).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let r = client.deadlocks(&a.prefix).await;
    client.close().await;
    let d = match r {
        Ok(d) => d,
        Err(e) => {
            eprintln!("etcdlock: {e}");
            return exit_code_for(&e);
        }
    };
    if a.json {
        println!("{}", etcdlock::records::to_json(&d));
    } else {
        print_deadlocks(&d);
    }
    if d.cycles.is_empty() {
        0
    } else {
        CYCLE
    }
}

fn print_deadlocks(d: &Deadlocks) {
    let under = format!(
        "under \"{}\" ({} clients, {} waits; revision {})",
        escape(&d.prefix),
        d.clients,
        d.waits,
        d.revision
    );
    if d.cycles.is_empty() {
        println!("no deadlock {under}");
        return;
    }
    println!("{} deadlock(s) {under}:", d.cycles.len());
    for (i, c) in d.cycles.iter().enumerate() {
        println!("cycle {}:", i + 1);
        for e in &c.edges {
            println!(
                "  {} waits for \"{}\" held by {} (fencing token {})",
                party(&e.waiter),
                escape(&e.name),
                party(&e.holder),
                e.fencing_token
            );
        }
    }
}

/// Print every key queued on a name within etcd's history.
pub async fn history(opts: ClientOptions, a: HistoryArgs) -> i32 {
    let client = match connect(opts).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let r = client.history(&a.name, a.since).await;
    client.close().await;
    match r {
        Ok(h) if a.json => println!("{}", etcdlock::records::to_json(&h)),
        Ok(h) => print_history(&h),
        Err(e) => {
            eprintln!("etcdlock: {e}");
            return exit_code_for(&e);
        }
    }
    0
}

/// `HH:MM:SS.mmm` (UTC) of a wall-clock time in ms since the epoch.
fn clock(ms: u64) -> String {
    let s = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3600 % 24,
        s / 60 % 60,
        s % 60,
        ms % 1000
    )
}

/// `YYYY-MM-DD` (UTC) of a wall-clock time in ms since the epoch.
fn date(ms: u64) -> String {
    // Howard Hinnant's civil_from_days.
    let z = (ms / 86_400_000) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn who(e: &HistoryEntry) -> String {
    match (&e.owner, &e.language) {
        (Some(o), Some(l)) => format!("{} {l}", escape(o)),
        (Some(o), None) => escape(o),
        _ => format!("lease {:x}", e.lease_id),
    }
}

fn opt_clock(ms: Option<u64>) -> String {
    ms.map(clock).unwrap_or_else(|| "-".into())
}

fn print_history(h: &History) {
    let kept = if h.from_revision <= 1 {
        "etcd has compacted none of it".to_string()
    } else {
        format!(
            "etcd compacted the revisions before {} (its --auto-compaction-retention sets how far back it keeps)",
            h.from_revision
        )
    };
    println!(
        "history of \"{}\": {} keys, revisions {} to {}; {kept}",
        escape(&h.name),
        h.entries.len(),
        h.from_revision,
        h.revision
    );
    if h.entries.is_empty() {
        return;
    }
    let first = h
        .entries
        .iter()
        .map(|e| e.queued_ms)
        .min()
        .unwrap_or(h.read_ms);
    println!("times UTC, from {} {}", date(first), clock(first));
    println!(
        "{:>10}  {:<28} {:<12} {:<12} {:<12} {:<11} {:>9} {:>9}",
        "TOKEN", "WHO", "QUEUED", "GRANTED", "ENDED", "HOW", "WAIT_MS", "HOLD_MS"
    );
    for e in &h.entries {
        println!(
            "{:>10}  {:<28} {:<12} {:<12} {:<12} {:<11} {:>9} {:>9}",
            e.fencing_token,
            who(e),
            clock(e.queued_ms),
            opt_clock(e.granted_ms),
            opt_clock(e.ended_ms),
            e.ended,
            e.wait_ms,
            e.hold_ms
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into())
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_and_clocks() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(clock(0), "00:00:00.000");
        // 2024-02-29T23:59:59.999Z
        assert_eq!(date(1_709_251_199_999), "2024-02-29");
        assert_eq!(clock(1_709_251_199_999), "23:59:59.999");
        assert_eq!(date(1_709_251_200_000), "2024-03-01");
    }
}
