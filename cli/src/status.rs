//! `etcdlock status NAME`: holders and the queue of any lock kind, in create_revision order.
use clap::Args;
use etcdlock::{Client, ClientOptions, ContenderKind, Status};
use serde_json::{json, Value};

use crate::exit_code_for;

#[derive(Args)]
pub struct StatusArgs {
    /// Lock name
    pub name: String,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

pub async fn status(opts: ClientOptions, a: StatusArgs) -> i32 {
    let client = match Client::connect(opts).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("etcdlock: {e}");
            return exit_code_for(&e);
        }
    };
    let r = client.status(&a.name).await;
    client.close().await;
    let v = match r {
        Ok(st) => to_json(&st),
        Err(e) => {
            eprintln!("etcdlock: {e}");
            return exit_code_for(&e);
        }
    };
    if a.json {
        println!("{v}");
        return 0;
    }
    let entries = v["queue"].as_array().cloned().unwrap_or_default();
    if entries.is_empty() {
        println!("lock {:?}: free", a.name);
        return 0;
    }
    let holders = v["holders"].as_array().map(Vec::len).unwrap_or(0);
    println!("lock {:?}: {} holding, {} waiting", a.name, holders, entries.len() - holders);
    println!("{:<10} {:<44} {:<18} {:>8} {:>10} {:>12}  OWNER", "ROLE", "KEY", "LEASE", "TTL", "CREATE_REV", "FOR");
    for e in &entries {
        let for_s = e["for_ms"].as_u64().map(|ms| format!("{:.1}s", ms as f64 / 1000.0)).unwrap_or_else(|| "?".into());
        println!(
            "{:<10} {:<44} {:<18} {:>8} {:>10} {:>12}  {}",
            e["role"].as_str().unwrap_or(""),
            e["key"].as_str().unwrap_or(""),
            e["lease_id"].as_str().unwrap_or(""),
            e["ttl_remaining_s"].as_i64().map(|t| format!("{t}s")).unwrap_or_else(|| "-".into()),
            e["create_revision"],
            for_s,
            e["owner"].as_str().unwrap_or("-"),
        );
    }
    0
}

fn to_json(st: &Status) -> Value {
    let entry = |c: &etcdlock::Contender, role: String| {
        let kind = match c.kind {
            ContenderKind::Exclusive => json!("exclusive"),
            ContenderKind::Reader => json!("reader"),
            ContenderKind::Permit(n) => json!(format!("permit of {n}")),
        };
        json!({
            "role": role,
            "kind": kind,
            "key": c.key,
            "lease_id": format!("{:x}", c.lease_id),
            "ttl_remaining_s": c.ttl_remaining,
            "create_revision": c.create_revision,
            "for_ms": c.age_ms,
            // etcdlock keys carry {"host","pid","since_ms"}; etcdctl and Go Mutex keys do not.
            "owner": c.owner.as_ref().map(|o| format!("etcdlock {o}")).unwrap_or_else(|| "etcdctl/Go Mutex".into()),
            "value": String::from_utf8_lossy(&c.value),
        })
    };
    let holders: Vec<Value> = st.holders.iter().map(|c| entry(c, "holder".into())).collect();
    let waiters: Vec<Value> = st.waiters.iter().enumerate().map(|(i, c)| entry(c, format!("waiter {}", i + 1))).collect();
    let queue: Vec<Value> = holders.iter().chain(waiters.iter()).cloned().collect();
    json!({
        "name": st.name,
        "revision": st.revision,
        "holder": holders.first().cloned(),
        "holders": holders,
        "waiters": waiters,
        "queue": queue,
    })
}
