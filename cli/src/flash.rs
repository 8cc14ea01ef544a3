//! `etcdlock flash-worker`: the Rust worker of the cross-language flash sale
//! (scripts/flash_sale.py). Every language's worker follows the same contract:
//!
//! Environment: FLASH_ENDPOINTS, FLASH_LOCK, FLASH_STOCK_KEY, FLASH_SALES_PREFIX,
//! FLASH_ATTEMPTS, FLASH_WORKER_ID, FLASH_NO_LOCK (1 = control run, no lock).
//! Each purchase attempt: take the lock, read the stock, and if it is positive
//! write stock-1 and record the sale under SALES_PREFIX<token>; a plain get then
//! put, safe only under the lock. One JSON line per attempt on stdout:
//! `{"lang","worker","sold","token","wait_ms","stock_before","t_ms"}`.
//!
//! With FLASH_STORE=postgres (`scripts/flash_sale.py --store postgres`) the
//! stock is the row `flash_stock(sku = FLASH_STOCK_KEY)` of PostgreSQL at
//! libpq's PG* variables, and a purchase under the lock is one transaction:
//! read the stock; if positive, fence the write with the hold's token (the
//! `etcdlock_fence` row), write stock-1 and a `flash_sales` row. This binary
//! has no database driver: that store's Rust worker is the example
//! `flash_pg_worker` (cli/examples/flash_pg_worker.rs).
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etcdlock::{Client, ClientOptions};
use serde_json::json;

fn env(k: &str) -> String {
    std::env::var(k).unwrap_or_default()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub async fn worker() -> i32 {
    let endpoints: Vec<String> = env("FLASH_ENDPOINTS")
        .split(',')
        .map(String::from)
        .collect();
    let lock = env("FLASH_LOCK");
    let stock_key = env("FLASH_STOCK_KEY");
    let sales = env("FLASH_SALES_PREFIX");
    let attempts: usize = env("FLASH_ATTEMPTS").parse().unwrap_or(0);
    let id = env("FLASH_WORKER_ID");
    let no_lock = env("FLASH_NO_LOCK") == "1";
    let client = match Client::connect(ClientOptions::new(endpoints.clone())).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rust worker: {e}");
            return 1;
        }
    };
    // The stock and the sales are plain keys a worker reads and writes with
    // its own etcd client, as every language's worker does.
    let mut raw = match etcd_client::Client::connect(endpoints, None).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rust worker: {e}");
            return 1;
        }
    };
    let parse = |v: Option<Vec<u8>>| {
        v.and_then(|v| String::from_utf8(v).ok())
            .and_then(|s| s.trim().parse::<i64>().ok())
            .unwrap_or(0)
    };
    for n in 0..attempts {
        let t = Instant::now();
        let (sold, token, before) = if no_lock {
            // Control run: the same read-then-write with no lock at all.
            let before = parse(
                raw.get(stock_key.clone(), None)
                    .await
                    .ok()
                    .and_then(|r| r.kvs().first().map(|kv| kv.value().to_vec())),
            );
            if before > 0 {
                tokio::time::sleep(Duration::from_millis(1)).await; // business logic between read and write
                let _ = raw
                    .put(stock_key.clone(), (before - 1).to_string(), None)
                    .await;
                let _ = raw
                    .put(format!("{sales}nolock-rust-{id}-{n}"), "rust", None)
                    .await;
            }
            (before > 0, 0, before)
        } else {
            let g = match client.lock(&lock).await {
                Ok(g) => g,
                Err(e) => {
                    eprintln!("rust worker: {e}");
                    return 1;
                }
            };
            let before = match g.get(&stock_key).await {
                Ok(v) => parse(v),
                Err(e) => {
                    eprintln!("rust worker: {e}");
                    return 1;
                }
            };
            let wait = t.elapsed();
            let sold = before > 0;
            if sold {
                if let Err(e) = g.put(&stock_key, (before - 1).to_string()).await {
                    eprintln!("rust worker: {e}");
                    return 1;
                }
                let _ = g
                    .put(format!("{sales}{:020}", g.fencing_token()), "rust")
                    .await;
            }
            let token = g.fencing_token();
            let _ = g.unlock().await;
            println!(
                "{}",
                json!({"lang":"rust","worker":id,"sold":sold,"token":token,"wait_ms":wait.as_secs_f64()*1000.0,"stock_before":before,"t_ms":now_ms()})
            );
            continue;
        };
        println!(
            "{}",
            json!({"lang":"rust","worker":id,"sold":sold,"token":token,"wait_ms":t.elapsed().as_secs_f64()*1000.0,"stock_before":before,"t_ms":now_ms()})
        );
        let _ = sold;
    }
    client.close().await;
    0
}
