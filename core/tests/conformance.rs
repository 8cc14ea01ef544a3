//! The conformance table (conformance/cases.json), run by the Rust core
//! against real etcd, then once more against the in-process etcd
//! (`mem://`, every case not marked `etcd_only`). Every language's suite
//! runs the same table; see conformance/README.md for the steps and how
//! outcomes map to each idiom.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use etcd_client::GetOptions;
use etcdlock::{Client, ClientOptions, Guard, GuardState, LockOptions};
use etcdlock_testkit::Etcd;
use serde_json::Value;

const LANG: &str = "rust";

/// A step's input string: a JSON string, `{"repeat": s, "count": n}`, or an
/// input Rust cannot express (`utf16` lone surrogates, `bytes` that are not
/// UTF-8): `None` (the table lists such cases only for languages that can).
fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) if o.contains_key("repeat") => {
            Some(o["repeat"].as_str()?.repeat(o["count"].as_u64()? as usize))
        }
        _ => None,
    }
}

/// A `names` input: a list of string inputs, or `{"prefix": p, "count": n}` (p0 .. p(n-1)).
fn names(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::Array(a) => a.iter().map(text).collect(),
        Value::Object(o) => {
            let p = o["prefix"].as_str()?;
            Some(
                (0..o["count"].as_u64()?)
                    .map(|i| format!("{p}{i}"))
                    .collect(),
            )
        }
        _ => None,
    }
}

fn outcome<T>(r: &etcdlock::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => format!("{:?}", e.code()),
    }
}

/// Options for a `connect` step, through the one parser every binding uses.
fn connect_opts(
    endpoints: &str,
    ns: &str,
    o: &serde_json::Map<String, Value>,
) -> etcdlock::Result<ClientOptions> {
    let num = |v: &Value| match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let mut pairs: Vec<(String, String)> = vec![
        ("endpoints".into(), endpoints.to_string()),
        ("namespace".into(), ns.into()),
        ("ttl".into(), "10".into()),
    ];
    for (k, v) in o {
        match k.as_str() {
            "endpoints" => {
                let list: Vec<String> = v
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e.as_str().unwrap().to_string())
                    .collect();
                if list.is_empty() {
                    // An empty list: no endpoints at all (from_pairs skips empty values).
                    let mut opts = ClientOptions::from_pairs(
                        pairs.iter().filter(|(k, _)| k != "endpoints").cloned(),
                    )?;
                    opts.endpoints.clear();
                    return Ok(opts);
                }
                pairs.push(("endpoints".into(), list.join(",")));
            }
            "ttl" => pairs.push(("ttl".into(), num(v))),
            "namespace" => pairs.push(("namespace".into(), text(v).expect("namespace"))),
            "margin_ms" => pairs.push(("margin".into(), format!("{}ms", num(v)))),
            "connect_timeout_ms" => pairs.push(("connect_timeout".into(), format!("{}ms", num(v)))),
            "request_timeout_ms" => pairs.push(("request_timeout".into(), format!("{}ms", num(v)))),
            other => panic!("unknown connect option {other}"),
        }
    }
    ClientOptions::from_pairs(pairs)
}

fn timeout(v: Option<&Value>) -> Option<Duration> {
    match v {
        None => None,
        Some(Value::String(s)) if s == "inf" => None,
        Some(v) => Some(Duration::from_millis(
            v.as_u64().expect("a timeout Rust can express"),
        )),
    }
}

/// A step's acquisition options, through the bridge every binding uses
/// (milliseconds; a negative or oversized span is InvalidArgument there).
fn acquire_opts(step: &Value) -> etcdlock::Result<LockOptions> {
    let ms = |k: &str| match step.get(k) {
        Some(Value::String(s)) if s == "NaN" => Some(f64::NAN),
        Some(Value::String(s)) if s == "inf" => Some(f64::INFINITY),
        v => v.and_then(Value::as_f64),
    };
    let metadata = step
        .get("metadata")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), text(v).expect("metadata Rust can express")))
                .collect()
        })
        .unwrap_or_default();
    let extras = etcdlock::bridge::Extras {
        lock_delay: ms("lock_delay_ms"),
        lease_time: ms("lease_time_ms"),
        metadata,
        detect_deadlock: step
            .get("detect_deadlock")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    };
    etcdlock::bridge::acquire_options(ms("timeout_ms"), extras, etcdlock::bridge::Unit::Millis)
}

/// etcd's own count of the keys under `prefix`.
async fn count_keys(c: &Client, prefix: &str) -> i64 {
    c.etcd()
        .await
        .unwrap()
        .get(
            prefix,
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .unwrap()
        .count()
}

fn state(g: &Guard) -> &'static str {
    match g.state() {
        GuardState::Held => "held",
        GuardState::Released => "released",
        GuardState::Lost(_) => "lost",
    }
}

struct ResumeOnDrop(Option<etcdlock::MemStore>);

impl Drop for ResumeOnDrop {
    fn drop(&mut self) {
        if let Some(st) = &self.0 {
            st.resume();
        }
    }
}

/// Run one case against `shared` (the harness's etcd), or with `None`
/// against the in-process store `mem://conformance`.
async fn run_case(shared: Option<&Etcd>, case: &Value) {
    let id = case["id"].as_str().unwrap();
    // A case that hangs or kills etcd gets an etcd of its own.
    // On mem://, a store of its own, which the `etcd` and `mem` ops act on.
    let wants_private = case.get("etcd").and_then(Value::as_str) == Some("private");
    let mem = shared.is_none();
    let store = mem.then(|| {
        let name = if wants_private {
            format!("conf-{id}")
        } else {
            MEM["mem://".len()..].to_string()
        };
        etcdlock::MemStore::open(&name).expect("a mem store")
    });
    let mut private = (wants_private && !mem).then(Etcd::single);
    // A case that fails mid-silence leaves its store answering for the next.
    let _resume = ResumeOnDrop(store.clone());
    let ns = common::unique_ns(&format!("conf-{id}"));
    let mut clients: HashMap<String, Client> = HashMap::new();
    let mut guards: HashMap<String, Guard> = HashMap::new();
    let mut multis: HashMap<String, etcdlock::MultiGuard> = HashMap::new();
    let mut latches: HashMap<String, etcdlock::Latch> = HashMap::new();
    let mut barriers: HashMap<String, etcdlock::Barrier> = HashMap::new();
    // `relock`: each (lock, owner)'s handles, latest last, as names in
    // `guards`; owners numbered in order of first use.
    let mut handles: HashMap<(String, String), Vec<String>> = HashMap::new();
    let mut owners: HashMap<String, u64> = HashMap::new();
    // Calls started with `"background": true`, awaited by `join`.
    let mut calls: HashMap<String, tokio::task::JoinHandle<etcdlock::Result<Guard>>> =
        HashMap::new();
    for (i, step) in case["steps"].as_array().unwrap().iter().enumerate() {
        let op = step["op"].as_str().unwrap();
        let who = step
            .get("client")
            .and_then(Value::as_str)
            .unwrap_or("a")
            .to_string();
        let expect = step
            .get("expect_rust")
            .or_else(|| step.get("expect"))
            .cloned()
            .unwrap_or(Value::Null);
        let want = |got: &str| {
            let w = match &expect {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            assert_eq!(
                got, w,
                "case {id} step {i} ({op}): got {got}, the table says {w}"
            );
        };
        if let (true, Some(st)) = (op == "etcd" || op == "mem", store.as_ref()) {
            // On mem://, the controls reproduce a hung etcd (silence).
            let ms = step.get("for_ms").and_then(Value::as_u64);
            let guard = || &guards[step["guard"].as_str().unwrap()];
            match step["action"].as_str().unwrap() {
                "pause" | "silence" => st.silence(Duration::from_millis(ms.unwrap_or(3_600_000))),
                "resume" => st.resume(),
                "expire" => assert!(st.expire_lease(guard().lease_id())),
                "stall" => st.stall(guard().lease_id(), Duration::from_millis(ms.unwrap())),
                other => {
                    panic!("case {id}: {other} has no mem:// equivalent: mark the case etcd_only")
                }
            }
            continue;
        }
        assert!(
            op != "mem",
            "case {id}: a mem op in an etcd run: mark the case mem_only"
        );
        if op == "etcd" {
            let e = private
                .as_mut()
                .unwrap_or_else(|| panic!("case {id}: the etcd op needs \"etcd\": \"private\""));
            match (
                step["action"].as_str().unwrap(),
                step.get("for_ms").and_then(Value::as_u64),
            ) {
                ("pause", Some(ms)) => e.pause_for(0, Duration::from_millis(ms)),
                ("pause", None) => e.pause(0),
                ("resume", _) => e.resume(0),
                ("kill", _) => e.kill(0),
                (other, _) => panic!("case {id}: unknown etcd action {other}"),
            }
            continue;
        }
        let etcd = match (private.as_ref().or(shared), &store) {
            (Some(e), _) => e.endpoints().join(","),
            (None, Some(st)) => st.endpoint(),
            (None, None) => MEM.to_string(),
        };
        let etcd = etcd.as_str();
        let started = Instant::now();
        if op != "connect" && !clients.contains_key(&who) {
            let c = Client::connect(connect_opts(etcd, &ns, &Default::default()).unwrap())
                .await
                .expect("connect");
            clients.insert(who.clone(), c);
        }
        match op {
            "connect" => {
                let o = step["options"].as_object().unwrap();
                let r = match connect_opts(etcd, &ns, o) {
                    Ok(opts) => Client::connect(opts).await,
                    Err(e) => Err(e),
                };
                want(&outcome(&r));
                if let Ok(c) = r {
                    clients.insert(who, c);
                }
            }
            "lock" if step.get("background").and_then(Value::as_bool) == Some(true) => {
                let c = clients[&who].clone();
                let name = text(&step["name"]).expect("a name Rust can express");
                let opts = acquire_opts(step).expect("a background lock's options are valid");
                let var = step["as"]
                    .as_str()
                    .expect("a background call names itself with `as`");
                calls.insert(
                    var.into(),
                    tokio::spawn(async move { c.lock_with(&name, opts).await }),
                );
            }
            "join" => {
                let var = step["call"].as_str().unwrap();
                let r = calls
                    .remove(var)
                    .unwrap_or_else(|| panic!("case {id}: no background call {var}"))
                    .await
                    .expect("the call's task");
                want(&outcome(&r));
                if let Ok(g) = r {
                    guards.insert(var.into(), g);
                }
            }
            "lock" | "try_lock" => {
                let c = &clients[&who];
                let name = text(&step["name"]).expect("a name Rust can express");
                let r = if op == "lock" {
                    match acquire_opts(step) {
                        Ok(o) => c.lock_with(&name, o).await,
                        Err(e) => Err(e),
                    }
                } else {
                    c.try_lock(&name).await
                };
                let got = match &r {
                    Err(e) if op == "try_lock" && e.code() == etcdlock::ErrorCode::WouldBlock => {
                        "would_block".into()
                    }
                    r => outcome(r),
                };
                want(&got);
                if let (Ok(g), Some(var)) = (r, step.get("as").and_then(Value::as_str)) {
                    guards.insert(var.into(), g);
                }
            }
            "relock" => {
                let c = &clients[&who];
                let name = text(&step["name"]).expect("a name Rust can express");
                let lock = step["lock"].as_str().unwrap().to_string();
                let owner = step.get("owner").and_then(Value::as_str).unwrap_or("main");
                let next = owners.len() as u64 + 1;
                let id = *owners.entry(owner.to_string()).or_insert(next);
                let r = match acquire_opts(step) {
                    Ok(o) => c.lock_reentrant(&name, id, o).await,
                    Err(e) => Err(e),
                };
                want(&outcome(&r));
                if let Ok(g) = r {
                    let var = match step.get("as").and_then(Value::as_str) {
                        Some(v) => v.to_string(),
                        None => format!("#relock{i}"),
                    };
                    guards.insert(var.clone(), g);
                    handles.entry((lock, owner.into())).or_default().push(var);
                }
            }
            "unlock" if step.get("lock").is_some() => {
                let lock = step["lock"].as_str().unwrap().to_string();
                let owner = step.get("owner").and_then(Value::as_str).unwrap_or("main");
                let var = handles
                    .get_mut(&(lock, owner.into()))
                    .and_then(Vec::pop)
                    .unwrap_or_else(|| panic!("case {id} step {i}: {owner} holds no handle"));
                want(&outcome(&guards[&var].unlock().await));
            }
            "unlock" => {
                let var = step["guard"].as_str().unwrap();
                match multis.get(var) {
                    Some(m) => want(&outcome(&m.unlock().await)),
                    None => want(&outcome(&guards[var].unlock().await)),
                }
            }
            "acquire_permit" | "read_lock" | "campaign" => {
                let c = &clients[&who];
                let name = text(&step["name"]).expect("a name Rust can express");
                let opts = match acquire_opts(step) {
                    Ok(o) => o,
                    Err(e) => {
                        want(&outcome::<()>(&Err(e)));
                        continue;
                    }
                };
                let r = match op {
                    "acquire_permit" => {
                        c.acquire_permit(&name, step["permits"].as_u64().unwrap() as u32, opts)
                            .await
                    }
                    "read_lock" => c.read_lock(&name, opts).await,
                    _ => c
                        .campaign(&name, text(&step["value"]).expect("value"), opts)
                        .await
                        .map(|l| l.into_guard()),
                };
                want(&outcome(&r));
                if let (Ok(g), Some(var)) = (r, step.get("as").and_then(Value::as_str)) {
                    guards.insert(var.into(), g);
                }
            }
            "lock_many" => {
                let c = &clients[&who];
                let list = names(&step["names"]).expect("names Rust can express");
                let refs: Vec<&str> = list.iter().map(String::as_str).collect();
                let opts = LockOptions {
                    timeout: timeout(step.get("timeout_ms")),
                    ..LockOptions::default()
                };
                let r = c.lock_many(&refs, opts).await;
                want(&outcome(&r));
                if let (Ok(m), Some(var)) = (r, step.get("as").and_then(Value::as_str)) {
                    multis.insert(var.into(), m);
                }
            }
            "proclaim" => {
                let g = &guards[step["guard"].as_str().unwrap()];
                want(&outcome(
                    &g.set_value(text(&step["value"]).expect("value")).await,
                ));
            }
            "leader" => {
                let c = &clients[&who];
                let got = match c.leader(&text(&step["name"]).unwrap()).await {
                    Ok(Some(l)) => String::from_utf8(l.value).unwrap(),
                    Ok(None) => "null".into(),
                    r => outcome(&r),
                };
                want(&got);
            }
            "put" | "get" | "delete" => {
                let g = &guards[step["guard"].as_str().unwrap()];
                let key = text(&step["key"]).expect("key");
                let got = match op {
                    "put" => outcome(&g.put(&key, text(&step["value"]).expect("value")).await),
                    "delete" => outcome(&g.delete(&key).await),
                    _ => match g.get(&key).await {
                        Ok(Some(v)) => String::from_utf8(v).unwrap(),
                        Ok(None) => "null".into(),
                        r => outcome(&r),
                    },
                };
                want(&got);
            }
            "close" => {
                clients[&who].close().await;
                want("ok");
            }
            "state" => want(state(&guards[step["guard"].as_str().unwrap()])),
            "keys" => {
                let c = &clients[&who];
                let prefix = format!("{ns}{}/", text(&step["name"]).unwrap());
                let mut n = count_keys(c, &prefix).await;
                if step.get("await").and_then(Value::as_bool) == Some(true) {
                    // Until the count is the table's (the step's within_ms bounds the wait).
                    let until = started
                        + Duration::from_millis(
                            step["within_ms"]
                                .as_u64()
                                .expect("an awaited keys step has within_ms"),
                        );
                    while expect.as_i64() != Some(n) && Instant::now() < until {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        n = count_keys(c, &prefix).await;
                    }
                }
                want(&n.to_string());
            }
            "delete_outside" => {
                let mut raw = clients.values().next().unwrap().etcd().await.unwrap();
                let prefix = format!("{ns}{}/", text(&step["name"]).unwrap());
                raw.delete(
                    prefix,
                    Some(etcd_client::DeleteOptions::new().with_prefix()),
                )
                .await
                .unwrap();
            }
            "await_lost" => {
                let g = &guards[step["guard"].as_str().unwrap()];
                let within = Duration::from_millis(step["within_ms"].as_u64().unwrap());
                let start = Instant::now();
                let loss = tokio::time::timeout(within, g.wait_lost()).await;
                let loss = loss.unwrap_or_else(|_| {
                    panic!("case {id} step {i}: no loss reported within {within:?}")
                });
                let reason = loss
                    .map(|l| format!("{:?}", l.reason))
                    .unwrap_or_else(|| "released".into());
                assert!(start.elapsed() <= within);
                want(&reason);
            }
            "token_order" => {
                let (a, b) = (
                    &guards[step["first"].as_str().unwrap()],
                    &guards[step["second"].as_str().unwrap()],
                );
                want(if a.fencing_token() < b.fencing_token() {
                    "ok"
                } else {
                    "tokens not increasing"
                });
            }
            "token_same" => {
                let (a, b) = (
                    &guards[step["first"].as_str().unwrap()],
                    &guards[step["second"].as_str().unwrap()],
                );
                want(if a.fencing_token() == b.fencing_token() {
                    "ok"
                } else {
                    "tokens differ"
                });
            }
            "status" => {
                let c = &clients[&who];
                want(&outcome(&c.status(&text(&step["name"]).unwrap()).await));
            }
            "deadlocks" => {
                let c = &clients[&who];
                let prefix = text(&step["prefix"]).unwrap_or_default();
                match c.deadlocks(&prefix).await {
                    Ok(d) => want(&d.cycles.len().to_string()),
                    r => want(&outcome(&r)),
                }
            }
            "history" => {
                let c = &clients[&who];
                match c.history(&text(&step["name"]).unwrap(), None).await {
                    Ok(h) => {
                        let ended: Vec<&str> = h.entries.iter().map(|e| e.ended).collect();
                        want(&serde_json::to_string(&ended).unwrap());
                    }
                    r => want(&outcome(&r)),
                }
            }
            "release" => {
                let c = &clients[&who];
                let g = &guards[step["guard"].as_str().unwrap()];
                let token = g.fencing_token()
                    + step
                        .get("token_offset")
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                let got = match c.release(&text(&step["name"]).unwrap(), token).await {
                    Ok(b) => b.to_string(),
                    r => outcome(&r),
                };
                want(&got);
            }
            "latch" => {
                let c = &clients[&who];
                let name = text(&step["name"]).unwrap();
                // Rust's count is a u64: a negative count is not expressible.
                let r = c
                    .latch(
                        &name,
                        step["count"].as_u64().expect("a count Rust can express"),
                    )
                    .await;
                want(&outcome(&r));
                if let (Ok(l), Some(var)) = (r, step.get("as").and_then(Value::as_str)) {
                    latches.insert(var.into(), l);
                }
            }
            "count_down" => want(&outcome(
                &latches[step["latch"].as_str().unwrap()].count_down().await,
            )),
            "latch_count" => {
                let got = match latches[step["latch"].as_str().unwrap()].count().await {
                    Ok(n) => n.to_string(),
                    r => outcome(&r),
                };
                want(&got);
            }
            "latch_wait" => want(&outcome(
                &latches[step["latch"].as_str().unwrap()]
                    .wait(timeout(step.get("timeout_ms")))
                    .await,
            )),
            "barrier" => {
                let c = &clients[&who];
                let name = text(&step["name"]).unwrap();
                let r = c
                    .barrier(&name, step["parties"].as_u64().unwrap() as u32)
                    .await;
                want(&outcome(&r));
                if let (Ok(b), Some(var)) = (r, step.get("as").and_then(Value::as_str)) {
                    barriers.insert(var.into(), b);
                }
            }
            "barrier_wait" => want(&outcome(
                &barriers[step["barrier"].as_str().unwrap()]
                    .wait(timeout(step.get("timeout_ms")))
                    .await,
            )),
            other => panic!("case {id}: unknown op {other}"),
        }
        let took = started.elapsed();
        if let Some(ms) = step.get("within_ms").and_then(Value::as_u64) {
            assert!(
                took <= Duration::from_millis(ms),
                "case {id} step {i} ({op}): took {took:?}, the table allows {ms} ms"
            );
        }
        if let Some(ms) = step.get("at_least_ms").and_then(Value::as_u64) {
            assert!(
                took >= Duration::from_millis(ms),
                "case {id} step {i} ({op}): took {took:?}, the table wants at least {ms} ms"
            );
        }
    }
    for c in clients.values() {
        c.close().await;
    }
}

/// The in-process store the `mem` run uses.
const MEM: &str = "mem://conformance";

/// Run every case listed for Rust, against etcd or (`mem`) the in-process
/// store, which skips exactly the cases marked `etcd_only`.
async fn table(mem: bool) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../conformance/cases.json");
    let table: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let etcd = (!mem).then(Etcd::single);
    let mut ran = 0;
    let cases = table["cases"].as_array().unwrap();
    let listed = |c: &Value| {
        c.get("langs")
            .and_then(Value::as_array)
            .map_or(true, |l| l.iter().any(|x| x == LANG))
    };
    let only = |c: &Value, k: &str| c.get(k).and_then(Value::as_bool) == Some(true);
    let skip = |c: &Value| {
        if mem {
            only(c, "etcd_only")
        } else {
            only(c, "mem_only")
        }
    };
    for case in cases {
        if !listed(case) || skip(case) {
            continue;
        }
        run_case(etcd.as_ref(), case).await;
        ran += 1;
    }
    let expected = cases.iter().filter(|c| listed(c) && !skip(c)).count();
    assert_eq!(ran, expected);
    let backend = if mem { " (mem)" } else { "" };
    println!(
        "conformance: {ran} of {} cases ran for {LANG}{backend}",
        cases.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_table() {
    table(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_table_mem() {
    table(true).await;
}
