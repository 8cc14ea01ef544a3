//! `etcdlock status NAME`: the holder and the queue, in create_revision order.
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Args;
use etcd_client::{GetOptions, SortOrder, SortTarget};
use etcdlock::{Client, ClientOptions};
use serde_json::{json, Value};

use crate::{exit, exit_code_for};

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
    let r = collect(&client, &a.name).await;
    client.close().await;
    let v = match r {
        Ok(v) => v,
        Err(e) => {
            eprintln!("etcdlock: {e}");
            return exit::ERROR;
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
    println!("lock {:?}: held, {} waiting", a.name, entries.len() - 1);
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

async fn collect(client: &Client, name: &str) -> Result<Value, etcd_client::Error> {
    let mut etcd = client.etcd();
    let mut prefix = client.namespace().to_vec();
    prefix.extend_from_slice(name.as_bytes());
    prefix.push(b'/');
    let r = etcd
        .get(prefix.clone(), Some(GetOptions::new().with_prefix().with_sort(SortTarget::Create, SortOrder::Ascend)))
        .await?;
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    let mut queue = Vec::new();
    for (i, kv) in r.kvs().iter().enumerate() {
        let ttl = if kv.lease() != 0 {
            etcd.lease_time_to_live(kv.lease(), None).await.ok().map(|t| t.ttl())
        } else {
            None
        };
        // etcdlock keys carry {"host","pid","since_ms"}; etcdctl and Go Mutex keys are empty.
        let info: Option<Value> = serde_json::from_slice(kv.value()).ok();
        let since = info.as_ref().and_then(|v| v["since_ms"].as_u64());
        let owner = info
            .as_ref()
            .map(|v| format!("etcdlock {}:{}", v["host"].as_str().unwrap_or("?"), v["pid"]))
            .unwrap_or_else(|| "etcdctl/Go Mutex".into());
        queue.push(json!({
            "role": if i == 0 { "holder".to_string() } else { format!("waiter {i}") },
            "key": String::from_utf8_lossy(kv.key()),
            "lease_id": format!("{:x}", kv.lease()),
            "ttl_remaining_s": ttl,
            "create_revision": kv.create_revision(),
            "for_ms": since.map(|s| now_ms.saturating_sub(s)),
            "owner": owner,
        }));
    }
    Ok(json!({
        "name": name,
        "prefix": String::from_utf8_lossy(&prefix),
        "revision": r.header().map(|h| h.revision()),
        "holder": queue.first().cloned(),
        "waiters": queue.iter().skip(1).cloned().collect::<Vec<_>>(),
        "queue": queue,
    }))
}
