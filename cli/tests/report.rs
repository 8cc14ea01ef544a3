//! `etcdlock deadlocks` and `etcdlock history` against real etcd.
use std::process::Command;
use std::time::{Duration, Instant};

use etcd_client::GetOptions;
use etcdlock::{Client, ClientOptions};
use etcdlock_testkit::Etcd;
use serde_json::Value;

fn etcdlock(etcd: &Etcd, args: &[&str]) -> (i32, String) {
    let bin =
        std::env::var("ETCDLOCK_CLI_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_etcdlock").into());
    let out = Command::new(bin)
        .env_remove("ETCDLOCK_ENDPOINTS")
        .env_remove("ETCDLOCK_NAMESPACE")
        .args(["--endpoints", &etcd.endpoints_csv()])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    (out.status.code().unwrap_or(-1), stdout)
}

/// Poll (20 ms) until `prefix` has `n` keys: the waits run in tasks.
async fn await_count(etcd: &Etcd, prefix: &str, n: i64) {
    let mut c = etcd_client::Client::connect(etcd.endpoints(), None)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = c
            .get(
                prefix,
                Some(GetOptions::new().with_prefix().with_count_only()),
            )
            .await
            .unwrap()
            .count();
        if got == n {
            return;
        }
        assert!(Instant::now() < deadline, "{prefix}: {got} keys, never {n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn deadlocks_names_each_wait_of_a_cycle_and_exits_1() {
    let etcd = Etcd::single();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let connect = || rt.block_on(Client::connect(ClientOptions::new(etcd.endpoints())));
    let (a, b) = (connect().unwrap(), connect().unwrap());
    let _x = rt.block_on(a.lock("dl/x")).unwrap();
    let _y = rt.block_on(b.lock("dl/y")).unwrap();
    let (code, out) = etcdlock(&etcd, &["deadlocks", "dl/"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("no deadlock under \"dl/\""), "{out}");
    // A holds x and waits for y; B holds y and waits for x.
    let a2 = a.clone();
    let _wa = rt.spawn(async move { a2.lock("dl/y").await });
    let b2 = b.clone();
    let _wb = rt.spawn(async move { b2.lock("dl/x").await });
    rt.block_on(await_count(&etcd, "dl/x/", 2));
    rt.block_on(await_count(&etcd, "dl/y/", 2));
    let (code, out) = etcdlock(&etcd, &["deadlocks", "dl/"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("1 deadlock(s) under \"dl/\""), "{out}");
    let waits: Vec<&str> = out.lines().filter(|l| l.contains(" waits for ")).collect();
    assert_eq!(waits.len(), 2, "{out}");
    for name in ["dl/x", "dl/y"] {
        assert!(
            waits.iter().any(|l| l.trim_start().starts_with("client ")
                && l.contains(&format!("waits for \"{name}\" held by client "))
                && l.contains("(rust, lease ")),
            "{name}: {out}"
        );
    }
    let (code, out) = etcdlock(&etcd, &["deadlocks", "dl/", "--json"]);
    assert_eq!(code, 1, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["cycles"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(
        v["cycles"][0]["edges"].as_array().unwrap().len(),
        2,
        "{out}"
    );
    assert!(v["revision"].is_string(), "{out}");
}

#[test]
fn history_lists_every_hold_with_its_token_and_how_it_ended() {
    let etcd = Etcd::single();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c = rt
        .block_on(Client::connect(ClientOptions::new(etcd.endpoints())))
        .unwrap();
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let g = rt.block_on(c.lock("hist/a")).unwrap();
        tokens.push(g.fencing_token());
        rt.block_on(g.unlock()).unwrap();
    }
    let (code, out) = etcdlock(&etcd, &["history", "hist/a"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("history of \"hist/a\": 3 keys, revisions 1 to "),
        "{out}"
    );
    assert!(out.contains("etcd has compacted none of it"), "{out}");
    for t in &tokens {
        assert!(
            out.lines()
                .any(|l| l.starts_with(&format!("{t:>10}  ")) && l.contains(" released ")),
            "token {t}: {out}"
        );
    }
    let (code, out) = etcdlock(&etcd, &["history", "hist/a", "--since", "1h", "--json"]);
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let got: Vec<String> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["fencing_token"].as_str().unwrap().to_string())
        .collect();
    let want: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
    assert_eq!(got, want, "{out}");
    assert!(
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["ended"] == "released"),
        "{out}"
    );
}
