#![allow(dead_code)]
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use etcd_client::GetOptions;
use etcdlock::{Client, ClientOptions};
use etcdlock_testkit::Etcd;

static NS: AtomicU64 = AtomicU64::new(0);

/// A namespace unique to this test run and call.
pub fn unique_ns(tag: &str) -> String {
    format!(
        "t-{}-{}-{}/",
        tag,
        std::process::id(),
        NS.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether the suite runs against the in-process etcd (`mem://tests`)
/// instead of the harness's: `ETCDLOCK_TEST_BACKEND=mem`. Tests of etcdctl
/// interop (etcdctl talks to the harness's etcd) return early then. (test.sh runs the
/// suites that never stop or pause etcd a second time so).
pub fn mem_backend() -> bool {
    std::env::var("ETCDLOCK_TEST_BACKEND").is_ok_and(|b| b == "mem")
}

/// True (after saying so) when a test that needs the real etcd should not
/// run: the mem backend is selected.
pub fn skip_on_mem(test: &str) -> bool {
    if mem_backend() {
        eprintln!("{test}: etcdctl interop needs the real etcd; not run on mem://");
    }
    mem_backend()
}

pub fn opts(etcd: &Etcd, ns: &str, ttl: i64) -> ClientOptions {
    // One in-process store per harness etcd, so a test sees only its own
    // revisions, as it does on its own etcd.
    let store = || {
        format!(
            "mem://tests-{}",
            etcd.endpoints()[0].rsplit(':').next().unwrap_or_default()
        )
    };
    let endpoints = if mem_backend() {
        vec![store()]
    } else {
        etcd.endpoints()
    };
    ClientOptions::new(endpoints)
        .with_ttl(ttl)
        .with_namespace(ns)
}

pub async fn client(etcd: &Etcd, ns: &str, ttl: i64) -> Client {
    Client::connect(opts(etcd, ns, ttl)).await.expect("connect")
}

/// Keys under `prefix` (raw, un-namespaced), sorted by create revision.
pub async fn keys(c: &Client, prefix: &str) -> Vec<(String, i64)> {
    let mut etcd = c.etcd().await.unwrap();
    let r = etcd
        .get(
            prefix,
            Some(GetOptions::new().with_prefix().with_sort(
                etcd_client::SortTarget::Create,
                etcd_client::SortOrder::Ascend,
            )),
        )
        .await
        .expect("get prefix");
    r.kvs()
        .iter()
        .map(|kv| {
            (
                String::from_utf8_lossy(kv.key()).into_owned(),
                kv.create_revision(),
            )
        })
        .collect()
}

/// Wait (by watching, not sleeping) until `prefix` holds exactly `n` keys:
/// one watch on the prefix, a re-count after each batch of events.
pub async fn await_key_count(c: &Client, prefix: &str, n: usize) {
    let mut etcd = c.etcd().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let r = etcd
        .get(
            prefix,
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .expect("count");
    if r.count() as usize == n {
        return;
    }
    let rev = r.header().unwrap().revision();
    let mut w = etcd
        .watch(
            prefix,
            Some(
                etcd_client::WatchOptions::new()
                    .with_prefix()
                    .with_start_revision(rev + 1),
            ),
        )
        .await
        .expect("watch");
    loop {
        let ev = tokio::time::timeout_at(deadline, w.message()).await;
        assert!(ev.is_ok(), "timed out waiting for {n} keys under {prefix}");
        let r = etcd
            .get(
                prefix,
                Some(GetOptions::new().with_prefix().with_count_only()),
            )
            .await
            .expect("count");
        if r.count() as usize == n {
            return;
        }
    }
}

/// How many writes landed under `prefix` (raw) after revision `since`:
/// etcd's history replayed by a watch, ended by a sentinel key put under the
/// prefix (then removed), so no sleep decides when to stop looking. Writes
/// elsewhere (the meta records beside the locks) do not count.
pub async fn writes_under(c: &Client, prefix: &str, since: i64) -> usize {
    let mut etcd = c.etcd().await.unwrap();
    let sentinel = format!("{prefix}~end");
    etcd.put(sentinel.as_str(), "", None)
        .await
        .expect("sentinel");
    let mut w = etcd
        .watch(
            prefix,
            Some(
                etcd_client::WatchOptions::new()
                    .with_prefix()
                    .with_start_revision(since + 1),
            ),
        )
        .await
        .expect("watch");
    let mut n = 0;
    'outer: while let Some(r) = w.message().await.expect("watch message") {
        for ev in r.events() {
            if ev.kv().map(|kv| kv.key()) == Some(sentinel.as_bytes()) {
                break 'outer;
            }
            n += 1;
        }
    }
    etcd.delete(sentinel.as_str(), None)
        .await
        .expect("sentinel delete");
    n
}
