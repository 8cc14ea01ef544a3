//! The seeds' two jetcd demos, replayed on etcdlock (blocking API, real threads):
//!
//! - route 1: 3 threads contend for one lock, each holds it for a while;
//! - route 2: 5 threads, each prints "start to lock", "lock successfully",
//!   "start to unlock", "unlock successfully".
//!
//! Unlike the seeds there is no hand-written keep-alive thread, no leaked
//! lease, and each holder prints its fencing token, which strictly increases.
//!
//! Run: `cargo run -p etcdlock --example seed_demo` (starts a private etcd on
//! 127.0.0.1 unless ETCDLOCK_ENDPOINTS is set).
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcdlock::blocking::Client;
use etcdlock::ClientOptions;

fn route(client: &Client, lock: &str, threads: usize, hold: Duration) -> Vec<i64> {
    let tokens = Arc::new(Mutex::new(Vec::new()));
    std::thread::scope(|s| {
        for i in 0..threads {
            let client = client.clone();
            let tokens = tokens.clone();
            s.spawn(move || {
                let me = format!("Thread-{i}");
                println!("[lock]: start to lock. {me}");
                let guard = client
                    .lock(lock, Some(Duration::from_secs(30)))
                    .expect("lock");
                println!(
                    "[lock]: lock successfully. {me} holds {} (fencing token {})",
                    guard.key(),
                    guard.fencing_token()
                );
                tokens.lock().unwrap().push(guard.fencing_token());
                std::thread::sleep(hold); // the critical section of the seed demos
                println!("[unlock]: start to unlock. {me}");
                guard.unlock().expect("unlock");
                println!("[unlock]: unlock successfully. {me}");
            });
        }
    });
    let t = tokens.lock().unwrap().clone();
    t
}

fn main() {
    let _etcd;
    let endpoints: Vec<String> = match std::env::var("ETCDLOCK_ENDPOINTS") {
        Ok(e) if !e.is_empty() => e.split(',').map(String::from).collect(),
        _ => {
            let e = etcdlock_testkit::Etcd::single();
            println!("started a private etcd at {}", e.endpoints_csv());
            let eps = e.endpoints();
            _etcd = e;
            eps
        }
    };
    let ns = format!("seed-demo-{}/", std::process::id());
    let client = Client::connect(ClientOptions::new(endpoints).with_ttl(5).with_namespace(ns))
        .expect("connect");
    println!(
        "connected; lease TTL {} s, kept alive in the background\n",
        client.ttl()
    );

    println!("== route 1: 3 threads contend for lock \"route1\" ==");
    let t1 = route(&client, "route1", 3, Duration::from_millis(300));
    println!("\n== route 2: 5 threads contend for lock \"route2\" ==");
    let t2 = route(&client, "route2", 5, Duration::from_millis(200));

    for (name, t) in [("route 1", &t1), ("route 2", &t2)] {
        assert!(
            t.windows(2).all(|w| w[0] < w[1]),
            "{name}: tokens must strictly increase: {t:?}"
        );
        println!(
            "\n{name}: {} holders, one at a time, fencing tokens strictly increasing: {t:?}",
            t.len()
        );
    }
    client.close().expect("close");
}
