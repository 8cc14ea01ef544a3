//! The JSON API of `etcdlock ui` (docs/operations/ui.md lists it for
//! scripts), its release guard and its Prometheus metrics.
//!
//! Records are core's (`etcdlock::records`: ids and revisions as decimal
//! strings); errors are `{"error": message, "code": name}` with an HTTP
//! status for the code (400 a bad argument, 403 refused, 404 no such hold,
//! 503 etcd unreachable, 504 timed out, 500 anything else).

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::{ConnectInfo, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use etcdlock::ErrorCode;
use futures_util::Stream;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use super::Shared;
use crate::observe::say;

/// Run-once records read by one `GET /api/once` at most.
const MAX_ONCE: usize = 500;

/// The outcomes of `POST /api/release`, as counted in `/metrics`.
const RELEASE_RESULTS: [&str; 4] = ["released", "no_hold", "refused", "error"];

/// The view's own counters (beside core's, in `/metrics`).
#[derive(Default)]
pub struct UiMetrics {
    releases: [AtomicU64; 4],
    events_served: AtomicU64,
}

/// The query string's parameters, decoded (`+` is a space, `%HH` a byte).
fn query(raw: Option<String>) -> HashMap<String, String> {
    let raw = raw.unwrap_or_default();
    raw.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'+', _, _) => out.push(b' '),
            (b'%', Some(h), Some(l)) => {
                out.push(h << 4 | l);
                i += 2;
            }
            (c, _, _) => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn json_body(status: StatusCode, body: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    json_body(status, json!({"error": message, "code": code}).to_string())
}

/// An etcdlock error as an HTTP answer.
fn failed(e: &etcdlock::Error) -> Response {
    let status = match e.code() {
        ErrorCode::InvalidArgument => StatusCode::BAD_REQUEST,
        ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::AuthFailed | ErrorCode::PermissionDenied => StatusCode::FORBIDDEN,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    refuse(status, e.code().name(), &e.to_string())
}

/// The prefix a request asks for (default: the view's), which must lie
/// within the view's prefix.
fn prefix_of(ui: &Shared, q: &HashMap<String, String>) -> Result<String, Box<Response>> {
    let p = q
        .get("prefix")
        .cloned()
        .unwrap_or_else(|| ui.prefix.clone());
    if !p.starts_with(&ui.prefix) {
        return Err(Box::new(refuse(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            &format!("this view serves the locks under \"{}\" only", ui.prefix),
        )));
    }
    Ok(p)
}

/// `GET /api/config`: the view's prefix and whether releases are allowed.
pub async fn config(State(ui): State<Shared>) -> Response {
    json_body(
        StatusCode::OK,
        json!({"prefix": ui.prefix, "release": ui.release_token.is_some(),
            "version": env!("CARGO_PKG_VERSION")})
        .to_string(),
    )
}

/// `GET /api/locks?prefix=`: core's `Client::list` records, one fresh read.
pub async fn locks(State(ui): State<Shared>, RawQuery(raw): RawQuery) -> Response {
    let prefix = match prefix_of(&ui, &query(raw)) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    match ui.client.list(&prefix).await {
        Ok(l) => json_body(StatusCode::OK, etcdlock::records::list_to_json(&l)),
        Err(e) => failed(&e),
    }
}

/// `GET /api/deadlocks?prefix=`: core's `Client::deadlocks` record.
pub async fn deadlocks(State(ui): State<Shared>, RawQuery(raw): RawQuery) -> Response {
    let prefix = match prefix_of(&ui, &query(raw)) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    match ui.client.deadlocks(&prefix).await {
        Ok(d) => json_body(StatusCode::OK, etcdlock::records::to_json(&d)),
        Err(e) => failed(&e),
    }
}

/// `GET /api/history?name=&since=`: core's `Client::history` record of a
/// name under the view's prefix (`since`: a duration, e.g. `1h`; absent:
/// as far back as etcd keeps).
pub async fn history(State(ui): State<Shared>, RawQuery(raw): RawQuery) -> Response {
    let q = query(raw);
    let name = q.get("name").cloned().unwrap_or_default();
    if name.is_empty() || !name.starts_with(&ui.prefix) {
        return refuse(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            &format!("give name=NAME, a lock under \"{}\"", ui.prefix),
        );
    }
    let since = match q.get("since").filter(|s| !s.is_empty()) {
        Some(s) => match etcdlock::parse_duration("since", s) {
            Ok(d) => Some(d),
            Err(e) => return failed(&e),
        },
        None => None,
    };
    match ui.client.history(&name, since).await {
        Ok(h) => json_body(StatusCode::OK, etcdlock::records::to_json(&h)),
        Err(e) => failed(&e),
    }
}

/// `GET /api/once?prefix=`: the run-once records (jobs) whose names start
/// with the prefix: their keys, then each record (`Client::once_record`).
pub async fn once(State(ui): State<Shared>, RawQuery(raw): RawQuery) -> Response {
    let prefix = match prefix_of(&ui, &query(raw)) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let ns = String::from_utf8_lossy(ui.client.namespace()).into_owned();
    let under = format!("{ns}{}", etcdlock::ONCE_PREFIX);
    let keys = match etcdlock::bridge::raw_keys(&ui.client, &format!("{under}{prefix}")).await {
        Ok(k) => k,
        Err(e) => return failed(&e),
    };
    let names: Vec<String> = keys
        .iter()
        .filter_map(|k| k.strip_prefix(&under).map(str::to_string))
        .take(MAX_ONCE)
        .collect();
    let reads = names.iter().map(|n| ui.client.once_record(n));
    let records = futures_util::future::join_all(reads).await;
    let now = etcdlock::now_ms();
    let mut out = Vec::new();
    for (name, r) in names.iter().zip(records) {
        match r {
            Ok(Some(r)) => out.push(json!({"name": name, "revision": r.revision.to_string(),
                "locked_at_ms": r.locked_at_ms, "lock_until_ms": r.lock_until_ms,
                "locked_by": r.locked_by, "pid": r.pid, "taken": r.is_taken_at(now)})),
            Ok(None) => {}
            Err(e) => return failed(&e),
        }
    }
    json_body(
        StatusCode::OK,
        json!({"now_ms": now, "truncated": keys.len() > MAX_ONCE, "jobs": out}).to_string(),
    )
}

/// `GET /api/events`: the live feed as server-sent events, the current
/// snapshot first (see `feed.rs` for the messages).
pub async fn events(
    State(ui): State<Shared>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    ui.metrics.events_served.fetch_add(1, Ordering::Relaxed);
    let (rx, first) = ui.feed.subscribe();
    let feed = ui.feed.clone();
    let stream = futures_util::stream::unfold(
        (rx, Some(first), feed),
        |(mut rx, first, feed)| async move {
            if let Some(f) = first {
                return Some((Ok(Event::default().data(&*f)), (rx, None, feed)));
            }
            let msg = match rx.recv().await {
                Ok(m) => m,
                // Fallen behind: the whole view again.
                Err(RecvError::Lagged(_)) => feed.snapshot(),
                Err(RecvError::Closed) => return None,
            };
            Some((Ok(Event::default().data(&*msg)), (rx, None, feed)))
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// Whether two secrets are equal, in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token a request carries: `Authorization: Bearer TOKEN`.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

/// `POST /api/release` with `{"name": ..., "token": ...}` (the hold's
/// fencing token, a number or a decimal string): as `etcdlock release NAME
/// --token T`. Refused (403) unless the view runs with `--allow-release` and
/// the request carries its token; every attempt is logged.
pub async fn release(
    State(ui): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let req: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let name = req["name"].as_str().unwrap_or_default().to_string();
    let token = match &req["token"] {
        Value::String(s) => s.trim().parse::<i64>().ok(),
        v => v.as_i64(),
    };
    let log = |level: &str, result: &str, msg: &str| {
        say(
            level,
            &format!(
                "ui: release of \"{}\" (fencing token {}) from {peer}: {msg}",
                crate::status::escape(&name),
                token.map(|t| t.to_string()).unwrap_or_else(|| "?".into())
            ),
            json!({"event": "ui_release", "lock": name, "fencing_token": token,
                "peer": peer.to_string(), "result": result}),
        );
        if let Some(i) = RELEASE_RESULTS.iter().position(|r| *r == result) {
            ui.metrics.releases[i].fetch_add(1, Ordering::Relaxed);
        }
    };
    let Some(want) = ui.release_token.as_deref() else {
        log("warn", "refused", "refused: release is disabled");
        return refuse(
            StatusCode::FORBIDDEN,
            "PermissionDenied",
            "release is disabled: start etcdlock ui with --allow-release and a --release-token",
        );
    };
    if !bearer(&headers).is_some_and(|t| same(t.as_bytes(), want.as_bytes())) {
        log("warn", "refused", "refused: wrong or missing token");
        return refuse(
            StatusCode::FORBIDDEN,
            "PermissionDenied",
            "release refused: the request lacks the view's release token (Authorization: Bearer TOKEN)",
        );
    }
    let Some(token) = token.filter(|_| name.starts_with(&ui.prefix) && !name.is_empty()) else {
        log("warn", "error", "bad request");
        return refuse(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "give {\"name\": NAME under the view's prefix, \"token\": FENCING_TOKEN}",
        );
    };
    match ui.client.release(&name, token).await {
        Ok(true) => {
            log("info", "released", "released");
            json_body(
                StatusCode::OK,
                json!({"released": true, "name": name, "fencing_token": token.to_string()})
                    .to_string(),
            )
        }
        Ok(false) => {
            log("info", "no_hold", "no hold with that token");
            refuse(
                StatusCode::NOT_FOUND,
                "NotHeld",
                "nothing to release: no hold with that token",
            )
        }
        Err(e) => {
            log("warn", "error", &e.to_string());
            failed(&e)
        }
    }
}

/// `GET /metrics`: core's metrics of the view's client, then the view's own.
pub async fn metrics(State(ui): State<Shared>) -> Response {
    let mut out = ui.client.metrics().to_prometheus(&[]);
    let f = &ui.feed;
    let gauge = |out: &mut String, name: &str, kind: &str, help: &str, v: String| {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"
        );
    };
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
    gauge(
        &mut out,
        "etcdlock_ui_browsers",
        "gauge",
        "Pages following the live feed now.",
        f.subscribers().to_string(),
    );
    gauge(
        &mut out,
        "etcdlock_ui_event_streams_total",
        "counter",
        "Live feeds opened by pages.",
        n(&ui.metrics.events_served),
    );
    gauge(
        &mut out,
        "etcdlock_ui_list_reads_total",
        "counter",
        "Reads of the prefix (one per coalesced burst of changes).",
        n(&f.reads),
    );
    gauge(
        &mut out,
        "etcdlock_ui_list_read_errors_total",
        "counter",
        "Reads of the prefix that failed.",
        n(&f.read_errors),
    );
    gauge(
        &mut out,
        "etcdlock_ui_last_read_seconds",
        "gauge",
        "How long the last read of the prefix took.",
        format!("{}", f.last_read_us.load(Ordering::Relaxed) as f64 / 1e6),
    );
    gauge(
        &mut out,
        "etcdlock_ui_locks",
        "gauge",
        "Names under the prefix at the last read.",
        n(&f.locks),
    );
    gauge(
        &mut out,
        "etcdlock_ui_deadlock_cycles",
        "gauge",
        "Deadlock cycles at the last read.",
        n(&f.cycles),
    );
    out.push_str("# HELP etcdlock_ui_release_requests_total Release requests, by outcome.\n");
    out.push_str("# TYPE etcdlock_ui_release_requests_total counter\n");
    for (r, c) in RELEASE_RESULTS.iter().zip(&ui.metrics.releases) {
        let _ = writeln!(
            out,
            "etcdlock_ui_release_requests_total{{result=\"{r}\"}} {}",
            n(c)
        );
    }
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        out,
    )
        .into_response()
}

/// Refuse (403) a request whose Host header is not one the view answers to
/// (see `Ui::hosts`).
pub async fn host_guard(
    State(ui): State<Shared>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if ui.hosts.is_empty() || ui.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        return next.run(req).await;
    }
    refuse(
        StatusCode::FORBIDDEN,
        "PermissionDenied",
        "this view answers to its own address only (Host header)",
    )
}

/// Anything else.
pub async fn not_found() -> Response {
    refuse(StatusCode::NOT_FOUND, "NotFound", "no such page")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_decode_plus_and_percent_escapes() {
        let q = query(Some("prefix=jobs%2Fa+b&name=%E2%9C%93&x".into()));
        assert_eq!(q["prefix"], "jobs/a b");
        assert_eq!(q["name"], "\u{2713}");
        assert_eq!(q["x"], "");
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"s3cret", b"s3cret"));
        assert!(!same(b"s3cret", b"s3cre"));
        assert!(!same(b"s3cret", b"s3creT"));
        assert!(!same(b"", b"x"));
    }
}
