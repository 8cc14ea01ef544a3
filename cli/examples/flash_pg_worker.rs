//! The Rust worker of the cross-language flash sale on PostgreSQL
//! (`scripts/flash_sale.py --store postgres`): the contract of
//! `etcdlock flash-worker` (cli/src/flash.rs: FLASH_* variables in, one JSON
//! line per attempt out) with the stock in a row of PostgreSQL (libpq's PG*
//! variables). Each purchase takes the lock, then runs one transaction: read
//! the stock, and if positive fence the write with the hold's token (the
//! database refuses a token older than one it has seen), write stock-1 and a
//! sale row. An example of the CLI crate so that tokio-postgres stays a
//! dev-dependency: `cargo build -p etcdlock-cli --example flash_pg_worker`.
use std::error::Error;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use etcdlock::{Client, ClientOptions};
use serde_json::json;
use tokio_postgres::{NoTls, Transaction};

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

fn env(k: &str) -> String {
    std::env::var(k).unwrap_or_default()
}

/// Admit this transaction's write to `resource` for a holder with `token`:
/// moves the resource's fence row to the token unless it holds a newer one
/// (the row stays locked until the transaction ends); an error names the newer token.
async fn fence(tx: &Transaction<'_>, resource: &str, token: i64) -> Res<()> {
    let moved = tx
        .execute(
            "INSERT INTO etcdlock_fence AS f (resource, token) VALUES ($1, $2) \
             ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token",
            &[&resource, &token],
        )
        .await?;
    if moved == 1 {
        return Ok(());
    }
    let newest: i64 = tx
        .query_one(
            "SELECT token FROM etcdlock_fence WHERE resource = $1",
            &[&resource],
        )
        .await?
        .get(0);
    Err(format!("token {token} is older than {newest}, the newest written for {resource}").into())
}

/// One purchase in one transaction; the stock before it.
async fn purchase(
    db: &mut tokio_postgres::Client,
    sku: &str,
    lock: &str,
    token: i64,
    worker: &str,
) -> Res<i64> {
    let tx = db.transaction().await?;
    let before: i64 = tx
        .query_opt("SELECT stock FROM flash_stock WHERE sku = $1", &[&sku])
        .await?
        .map_or(0, |row| row.get(0));
    if before > 0 {
        fence(&tx, lock, token).await?;
        tx.execute(
            "UPDATE flash_stock SET stock = $1 WHERE sku = $2",
            &[&(before - 1), &sku],
        )
        .await?;
        tx.execute(
            "INSERT INTO flash_sales (token, lang, worker) VALUES ($1, 'rust', $2)",
            &[&token, &worker],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(before)
}

async fn run() -> Res<()> {
    let endpoints: Vec<String> = env("FLASH_ENDPOINTS")
        .split(',')
        .map(String::from)
        .collect();
    let (lock, sku, id) = (
        env("FLASH_LOCK"),
        env("FLASH_STOCK_KEY"),
        env("FLASH_WORKER_ID"),
    );
    let attempts: usize = env("FLASH_ATTEMPTS").parse()?;
    let client = Client::connect(ClientOptions::new(endpoints)).await?;
    let mut pg = tokio_postgres::Config::new();
    pg.host(env("PGHOST"))
        .port(env("PGPORT").parse()?)
        .user(env("PGUSER"))
        .dbname(env("PGDATABASE"));
    let (mut db, connection) = pg.connect(NoTls).await?;
    tokio::spawn(connection);
    for _ in 0..attempts {
        let t = Instant::now();
        let guard = client.lock(&lock).await?;
        let wait = t.elapsed();
        let token = guard.fencing_token();
        let before = purchase(&mut db, &sku, &lock, token, &id).await;
        let _ = guard.unlock().await;
        let before = before?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
        println!(
            "{}",
            json!({"lang":"rust","worker":id,"sold":before > 0,"token":token,"wait_ms":wait.as_secs_f64()*1000.0,
                   "stock_before":before,"t_ms":now})
        );
    }
    client.close().await;
    Ok(())
}

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("rust worker: {e}");
        std::process::exit(1);
    }
}
