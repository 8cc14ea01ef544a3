//! What `run` and `elect` tell an operator: messages on stderr as text or
//! JSON lines (`--log-format json`), and Prometheus metrics over HTTP
//! (`--metrics-listen ADDR`, `GET /metrics`) with core's one list of metric
//! names.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcdlock::Client;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

static JSON: AtomicBool = AtomicBool::new(false);

/// How messages are written: `text` (the default) or `json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `etcdlock: <message>`.
    Text,
    /// One JSON object per line: ts_ms, level, msg and the event's fields.
    Json,
}

/// Choose the format of every later message.
pub fn set_format(f: LogFormat) {
    JSON.store(f == LogFormat::Json, Ordering::Relaxed);
}

/// Whether messages are JSON lines.
pub fn json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// Write one message: `level` (info, warn, error), the text, and fields for
/// machines (`{"lock": ..., "fencing_token": ...}`; shown only in JSON).
pub fn say(level: &str, msg: &str, fields: Value) {
    if json() {
        let ts_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let mut o = json!({"ts_ms": ts_ms, "level": level, "msg": msg});
        if let (Some(o), Value::Object(f)) = (o.as_object_mut(), fields) {
            o.extend(f);
        }
        eprintln!("{o}");
    } else {
        eprintln!("etcdlock: {msg}");
    }
}

/// How long one scrape connection may take to send its request and take the
/// reply: a client that sends nothing (or stalls) is dropped after it. Every
/// connection is served on its own task, so a slow one never delays another.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// The pause after a failed `accept`, as Go's net/http takes it: 5 ms after
/// the first failure, doubling up to 1 s while failures follow each other,
/// back to none after a success. An error such as EMFILE (no file
/// descriptor left) leaves the connection in the backlog, so retrying at
/// once would spin.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    delay: Option<Duration>,
}

impl AcceptBackoff {
    /// The first pause after a failure.
    pub const FIRST: Duration = Duration::from_millis(5);
    /// The longest pause.
    pub const MAX: Duration = Duration::from_secs(1);

    /// An accept failed: how long to wait before the next one.
    pub fn failed(&mut self) -> Duration {
        let d = self.delay.map_or(Self::FIRST, |d| (d * 2).min(Self::MAX));
        self.delay = Some(d);
        d
    }

    /// An accept succeeded: the next failure starts from [`Self::FIRST`].
    pub fn succeeded(&mut self) {
        self.delay = None;
    }
}

/// Serve `client`'s metrics at `http://ADDR/metrics` (labelled with the
/// lock's name) until the process ends. Binding errors are the caller's to
/// report: nothing is served then.
pub async fn serve_metrics(
    addr: &str,
    client: Client,
    lock: String,
) -> std::io::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        let mut backoff = AcceptBackoff::default();
        loop {
            let mut conn = match listener.accept().await {
                Ok((conn, _)) => {
                    backoff.succeeded();
                    conn
                }
                Err(_) => {
                    tokio::time::sleep(backoff.failed()).await;
                    continue;
                }
            };
            let (client, lock) = (client.clone(), lock.clone());
            tokio::spawn(async move {
                let _ =
                    tokio::time::timeout(SCRAPE_TIMEOUT, answer(&mut conn, &client, &lock)).await;
            });
        }
    });
    Ok(local)
}

/// Read one request's head and answer it: the metrics for `GET /metrics`,
/// 404 for anything else.
async fn answer(conn: &mut tokio::net::TcpStream, client: &Client, lock: &str) {
    // The request line is all we read (a scrape is a bare GET).
    let mut buf = vec![0u8; 4096];
    let mut n = 0;
    while n < buf.len() && !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf[n..]).await {
            Ok(0) | Err(_) => return,
            Ok(k) => n += k,
        }
    }
    let head = String::from_utf8_lossy(&buf[..n]);
    let (status, body) = match head.split_whitespace().take(2).collect::<Vec<_>>()[..] {
        ["GET", "/metrics"] => ("200 OK", client.metrics().to_prometheus(&[("lock", lock)])),
        _ => (
            "404 Not Found",
            "only GET /metrics is served here\n".to_string(),
        ),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(reply.as_bytes()).await;
    let _ = conn.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_backoff_doubles_from_5_ms_to_1_s_and_resets_on_success() {
        let mut b = AcceptBackoff::default();
        let ms: Vec<u128> = (0..10).map(|_| b.failed().as_millis()).collect();
        assert_eq!(ms, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.succeeded();
        assert_eq!(b.failed(), AcceptBackoff::FIRST);
    }
}
