//! `etcdlock ui [PREFIX] --listen ADDR`: a live web view of every lock under
//! a prefix, served by the CLI (docs/operations/ui.md).
//!
//! - `feed`: one watch of the prefix and one `Client::list` per coalesced
//!   burst of changes, fanned out to every browser over server-sent events;
//! - `api`: the JSON API (`/api/...`), the release guard and `/metrics`;
//! - the page: `cli/assets/ui.{html,js,css}`, embedded in the binary (no
//!   build step, no CDN: it works offline).
//!
//! Read-only by default: releasing a hold from the page needs
//! `--allow-release` and the operator's token (`--release-token` or
//! `ETCDLOCK_UI_TOKEN`) in each request, and every attempt is logged.

mod api;
mod feed;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderValue};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;
use clap::Args;
use etcdlock::{Client, ClientOptions};
use serde_json::json;

use crate::exit;
use crate::observe::say;

/// The address `etcdlock ui` listens on without `--listen`.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7379";

#[derive(Args)]
pub struct UiArgs {
    /// Show the locks whose names start with this (default: all)
    #[arg(default_value = "", value_parser = crate::parse_prefix)]
    pub prefix: String,
    /// Address to serve the view on (port 0: any free port). The first line
    /// on stdout is the URL served
    #[arg(long, default_value = DEFAULT_LISTEN)]
    pub listen: String,
    /// Let the page release a hold (as `etcdlock release`); each request must
    /// carry the --release-token
    #[arg(long)]
    pub allow_release: bool,
    /// The token a release request must carry (header `Authorization: Bearer
    /// TOKEN`) [env: ETCDLOCK_UI_TOKEN]
    #[arg(long, env = "ETCDLOCK_UI_TOKEN", hide_env_values = true)]
    pub release_token: Option<String>,
    /// At most one read of the prefix per this long while changes stream in
    #[arg(long, default_value = "150ms", value_parser = crate::parse_finite)]
    pub coalesce: Duration,
}

/// What every handler shares.
pub struct Ui {
    pub client: Client,
    pub prefix: String,
    /// The token a release must carry; `None`: releases are refused.
    pub release_token: Option<String>,
    pub feed: Arc<feed::Feed>,
    pub metrics: api::UiMetrics,
    /// On a loopback address: the Host headers a request may carry (the
    /// address, `localhost` and `[::1]` with the port), so that a page of
    /// another site cannot read the view through a DNS name rebound to
    /// 127.0.0.1. Empty: any (an address the operator chose to expose).
    pub hosts: Vec<String>,
}

type Shared = Arc<Ui>;

const HTML: &str = include_str!("../assets/ui.html");
const JS: &str = include_str!("../assets/ui.js");
const CSS: &str = include_str!("../assets/ui.css");

fn asset(kind: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(kind)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
}

fn router(ui: Shared) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", HTML) }),
        )
        .route(
            "/ui.js",
            get(|| async { asset("text/javascript; charset=utf-8", JS) }),
        )
        .route(
            "/ui.css",
            get(|| async { asset("text/css; charset=utf-8", CSS) }),
        )
        .route("/api/config", get(api::config))
        .route("/api/locks", get(api::locks))
        .route("/api/once", get(api::once))
        .route("/api/deadlocks", get(api::deadlocks))
        .route("/api/history", get(api::history))
        .route("/api/events", get(api::events))
        .route("/api/release", post(api::release))
        .route("/metrics", get(api::metrics))
        .fallback(api::not_found)
        .layer(axum::middleware::from_fn_with_state(
            ui.clone(),
            api::host_guard,
        ))
        .with_state(ui)
}

/// Whether `addr` is a loopback address (a name that is not an address
/// counts as not).
fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// Serve the view until interrupted.
pub async fn ui(opts: ClientOptions, a: UiArgs) -> i32 {
    let release_token = match (a.allow_release, a.release_token.as_deref()) {
        (true, Some(t)) if !t.is_empty() => Some(t.to_string()),
        (true, _) => {
            eprintln!(
                "etcdlock: --allow-release needs --release-token TOKEN (or ETCDLOCK_UI_TOKEN)"
            );
            return exit::USAGE;
        }
        (false, _) => None,
    };
    let listener = match tokio::net::TcpListener::bind(&a.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("etcdlock: cannot listen on {}: {e}", a.listen);
            return exit::USAGE;
        }
    };
    let local = match listener.local_addr() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("etcdlock: cannot listen on {}: {e}", a.listen);
            return exit::ERROR;
        }
    };
    if !is_loopback(&local) {
        say(
            "warn",
            &format!("serving on {local}, beyond this host: anyone who reaches it sees every lock under the prefix"),
            json!({"listen": local.to_string()}),
        );
    }
    let client = match Client::connect(opts).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("etcdlock: {e}");
            return crate::exit_code_for(&e);
        }
    };
    let feed = feed::Feed::new(&a.prefix);
    tokio::spawn(feed.clone().run(client.clone(), a.coalesce));
    let ui = Arc::new(Ui {
        client: client.clone(),
        prefix: a.prefix.clone(),
        release_token,
        feed,
        metrics: api::UiMetrics::default(),
        hosts: if is_loopback(&local) {
            let port = local.port();
            vec![
                local.to_string(),
                format!("localhost:{port}"),
                format!("127.0.0.1:{port}"),
                format!("[::1]:{port}"),
            ]
        } else {
            Vec::new()
        },
    });
    // The first line on stdout: the URL (scripts and tests read it).
    println!("etcdlock ui: http://{local}/");
    say(
        "info",
        &format!(
            "serving the locks under \"{}\" on http://{local}/ (release {})",
            crate::status::escape(&a.prefix),
            if ui.release_token.is_some() {
                "allowed with the token"
            } else {
                "disabled"
            }
        ),
        json!({"listen": local.to_string(), "prefix": a.prefix, "release": ui.release_token.is_some()}),
    );
    let app = router(ui).into_make_service_with_connect_info::<SocketAddr>();
    // Interrupted: stop at once (the event streams of open pages never end
    // by themselves, so a graceful shutdown would wait for them).
    let served = tokio::select! {
        r = axum::serve(listener, app) => r,
        _ = tokio::signal::ctrl_c() => Ok(()),
    };
    client.close().await;
    match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("etcdlock: the server failed: {e}");
            exit::ERROR
        }
    }
}
