//! `etcdlock ui`'s HTTP side against real etcd, without a browser (the
//! browser suite is scripts/ui_check.py): the page and its assets, the JSON
//! API, the release guard, the Host check, the metrics.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use etcdlock::{Client, ClientOptions};
use etcdlock_testkit::Etcd;
use serde_json::Value;

const TOKEN: &str = "t0ken";

/// `etcdlock ui ui/` on a free port: the process and its address.
fn start(etcd: &Etcd) -> (Child, String) {
    let bin =
        std::env::var("ETCDLOCK_CLI_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_etcdlock").into());
    let mut child = Command::new(bin)
        .env_remove("ETCDLOCK_NAMESPACE")
        .env("ETCDLOCK_UI_TOKEN", TOKEN)
        .args(["--endpoints", &etcd.endpoints_csv(), "ui", "ui/"])
        .args(["--listen", "127.0.0.1:0", "--allow-release"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim()
        .strip_prefix("etcdlock ui: http://")
        .and_then(|a| a.strip_suffix('/'))
        .unwrap_or_else(|| panic!("first line: {first:?}"))
        .to_string();
    (child, addr)
}

/// One HTTP/1.1 request: (status, body).
fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn the_view_serves_its_page_api_and_metrics_and_guards_release() {
    let etcd = Etcd::single();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let c = rt
        .block_on(Client::connect(ClientOptions::new(etcd.endpoints())))
        .unwrap();
    let g = rt.block_on(c.lock("ui/a")).unwrap();
    let token = g.fencing_token();
    let (mut child, addr) = start(&etcd);

    let (status, page) = http(&addr, "GET", "/", &[], "");
    assert_eq!(status, 200);
    assert!(page.contains("<script src=\"ui.js\"></script>"), "{page}");
    for asset in ["/ui.js", "/ui.css"] {
        assert_eq!(http(&addr, "GET", asset, &[], "").0, 200, "{asset}");
    }
    let (status, body) = http(&addr, "GET", "/api/locks", &[], "");
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v[0]["name"], "ui/a", "{body}");
    assert_eq!(
        v[0]["holders"][0]["fencing_token"],
        token.to_string(),
        "{body}"
    );
    assert_eq!(
        http(&addr, "GET", "/api/locks?prefix=other/", &[], "").0,
        400
    );
    let (status, body) = http(&addr, "GET", "/api/deadlocks", &[], "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["cycles"],
        Value::Array(vec![])
    );
    // A page of another site, through a DNS name rebound to 127.0.0.1.
    assert_eq!(
        http(&addr, "GET", "/api/locks", &[("Host", "evil.example")], "").0,
        403
    );

    let release = format!("{{\"name\":\"ui/a\",\"token\":\"{token}\"}}");
    assert_eq!(http(&addr, "POST", "/api/release", &[], &release).0, 403);
    let wrong = [("Authorization", "Bearer nope")];
    assert_eq!(http(&addr, "POST", "/api/release", &wrong, &release).0, 403);
    let bearer = format!("Bearer {TOKEN}");
    let right = [("Authorization", bearer.as_str())];
    let (status, body) = http(&addr, "POST", "/api/release", &right, &release);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["released"],
        true
    );
    assert!(rt.block_on(c.status("ui/a")).unwrap().holders.is_empty());
    assert_eq!(http(&addr, "POST", "/api/release", &right, &release).0, 404);

    let (status, m) = http(&addr, "GET", "/metrics", &[], "");
    assert_eq!(status, 200);
    for line in [
        "etcdlock_ui_release_requests_total{result=\"refused\"} 2",
        "etcdlock_ui_release_requests_total{result=\"released\"} 1",
        "etcdlock_ui_release_requests_total{result=\"no_hold\"} 1",
    ] {
        assert!(m.lines().any(|l| l == line), "{line} in\n{m}");
    }
    child.kill().unwrap();
    child.wait().unwrap();
}
