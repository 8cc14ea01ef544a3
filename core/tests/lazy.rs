//! `lazy_connect`: a client made while etcd is down or hung returns at once;
//! `ping` says Unavailable within the request timeout; each call is bounded
//! by its own deadline (a lock call by its timeout, try_lock by the request
//! timeout) and succeeds as soon as etcd answers within it. Without the
//! option, connect still fails fast within the connect timeout.
mod common;

use std::time::{Duration, Instant};

use common::*;
use etcdlock::{Client, ErrorCode, LockOptions};
use etcdlock_testkit::Etcd;

/// Slack over a bound for scheduling on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(700);

fn lazy(etcd: &Etcd, ns: &str) -> etcdlock::ClientOptions {
    let mut o = opts(etcd, ns, 5)
        .with_request_timeout(Duration::from_secs(1))
        .with_connect_timeout(Duration::from_secs(1));
    o.lazy_connect = true;
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_etcd_down_a_lazy_client_starts_and_each_call_keeps_its_deadline() {
    let mut etcd = Etcd::single();
    let ns = unique_ns("lazy-down");
    etcd.kill(0);

    // Without the option: Unavailable within the connect timeout.
    let t = Instant::now();
    let mut eager = lazy(&etcd, &ns);
    eager.lazy_connect = false;
    let e = Client::connect(eager).await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Unavailable, "{e}");
    eprintln!("etcd down: eager connect failed in {:?}", t.elapsed());
    assert!(
        t.elapsed() < Duration::from_secs(1) + SLACK,
        "eager connect took {:?}",
        t.elapsed()
    );

    let t = Instant::now();
    let c = Client::connect(lazy(&etcd, &ns))
        .await
        .expect("a lazy connect does not need etcd");
    assert!(
        t.elapsed() < Duration::from_millis(200),
        "lazy connect took {:?}",
        t.elapsed()
    );

    let t = Instant::now();
    let e = c.ping().await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Unavailable, "{e}");
    eprintln!(
        "etcd down: lazy connect ok, ping Unavailable in {:?}",
        t.elapsed()
    );
    assert!(
        t.elapsed() < Duration::from_secs(1) + SLACK,
        "ping took {:?}",
        t.elapsed()
    );

    let t = Instant::now();
    let e = c.try_lock("job").await.unwrap_err();
    assert_eq!(e.code(), ErrorCode::Unavailable, "{e}");
    eprintln!("etcd down: try_lock {:?} in {:?}", e.code(), t.elapsed());
    assert!(
        t.elapsed() < Duration::from_secs(1) + SLACK,
        "try_lock took {:?}",
        t.elapsed()
    );

    let t = Instant::now();
    let e = c
        .lock_with("job", LockOptions::timeout(Duration::from_millis(1500)))
        .await
        .unwrap_err();
    assert!(
        matches!(e.code(), ErrorCode::Timeout | ErrorCode::Unavailable),
        "{e}"
    );
    eprintln!("etcd down: lock(1.5 s) {:?} in {:?}", e.code(), t.elapsed());
    assert!(
        t.elapsed() < Duration::from_millis(1500) + SLACK,
        "lock(1.5 s) took {:?}",
        t.elapsed()
    );

    // A lock call waiting while etcd comes back is granted within its deadline.
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move {
            let r = c
                .lock_with("job", LockOptions::timeout(Duration::from_secs(15)))
                .await;
            (r, Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let back = tokio::task::spawn_blocking(move || {
        etcd.restart(0);
        (etcd, Instant::now())
    })
    .await
    .unwrap();
    let (etcd, up_at) = back;
    let (r, at) = waiter.await.unwrap();
    let g = r.expect("granted once etcd is back");
    eprintln!(
        "etcd back: the waiting lock call granted {:?} after",
        at.saturating_duration_since(up_at)
    );
    assert!(
        at.saturating_duration_since(up_at) < Duration::from_secs(3),
        "granted {:?} after etcd was back",
        at - up_at
    );
    assert!(g.fencing_token() > 0);
    c.ping().await.expect("ping once etcd is back");
    g.unlock().await.unwrap();
    c.close().await;
    drop(etcd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_etcd_hung_a_lazy_client_starts_and_a_lock_call_keeps_its_timeout() {
    let etcd = Etcd::single();
    let ns = unique_ns("lazy-hung");
    etcd.pause(0);
    let t = Instant::now();
    let c = Client::connect(lazy(&etcd, &ns))
        .await
        .expect("a lazy connect does not need etcd");
    assert!(
        t.elapsed() < Duration::from_millis(200),
        "lazy connect took {:?}",
        t.elapsed()
    );
    let t = Instant::now();
    let e = c
        .lock_with("job", LockOptions::timeout(Duration::from_millis(1500)))
        .await
        .unwrap_err();
    assert!(
        matches!(e.code(), ErrorCode::Timeout | ErrorCode::Unavailable),
        "{e}"
    );
    assert!(
        t.elapsed() < Duration::from_millis(1500) + SLACK,
        "lock(1.5 s) took {:?}",
        t.elapsed()
    );
    eprintln!("etcd hung: lock(1.5 s) {:?} in {:?}", e.code(), t.elapsed());
    etcd.resume(0);
    let g = c
        .lock_with("job", LockOptions::timeout(Duration::from_secs(5)))
        .await
        .expect("granted after resume");
    g.unlock().await.unwrap();
    c.close().await;
}

#[test]
fn lazy_connect_is_an_option_like_any_other() {
    let o = etcdlock::ClientOptions::from_pairs([("lazy_connect", "true")]).unwrap();
    assert!(o.lazy_connect);
    assert!(!etcdlock::ClientOptions::default().lazy_connect);
    let e = etcdlock::ClientOptions::from_pairs([("lazy_connect", "soon")]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
    assert!(e.message().contains("lazy_connect"), "{e}");
    assert_eq!(
        etcdlock::bridge::option_key("lazyConnect"),
        Some("lazy_connect")
    );
}

/// The raw handle (`Client::etcd`) of a lazy client that has not reached
/// etcd yet connects on demand, within the request timeout: Unavailable
/// while etcd is down, a working handle once it is up, Closed for a client
/// closed before it ever connected. Never a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_raw_handle_of_a_lazy_client_connects_on_demand() {
    let mut etcd = Etcd::single();
    let ns = unique_ns("lazy-raw");
    etcd.kill(0);
    let c = Client::connect(lazy(&etcd, &ns))
        .await
        .expect("a lazy connect does not need etcd");
    let t = Instant::now();
    let Err(e) = c.etcd().await else {
        panic!("a raw handle with etcd down")
    };
    assert_eq!(e.code(), ErrorCode::Unavailable, "{e}");
    eprintln!("etcd down: etcd() {:?} in {:?}", e.code(), t.elapsed());
    assert!(
        t.elapsed() < Duration::from_secs(1) + SLACK,
        "etcd() took {:?}",
        t.elapsed()
    );
    let etcd = tokio::task::spawn_blocking(move || {
        etcd.restart(0);
        etcd
    })
    .await
    .unwrap();
    let mut raw = c.etcd().await.expect("connects once etcd is up");
    raw.put(format!("{ns}raw"), "v", None).await.unwrap();
    assert_eq!(
        raw.get(format!("{ns}raw"), None).await.unwrap().kvs()[0].value(),
        b"v"
    );
    c.close().await;

    let never = Client::connect(lazy(&etcd, &ns)).await.unwrap();
    never.close().await;
    let Err(e) = never.etcd().await else {
        panic!("a raw handle of a closed client")
    };
    assert_eq!(e.code(), ErrorCode::Closed, "{e}");
}
