//! What `run` and `elect` tell an operator: messages on stderr as text or
//! JSON lines (`--log-format json`), and Prometheus metrics over HTTP
//! (`--metrics-listen ADDR`, `GET /metrics`) with core's one list of metric
//! names.

use std::sync::atomic::{AtomicBool, Ordering};

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
        let ts_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let mut o = json!({"ts_ms": ts_ms, "level": level, "msg": msg});
        if let (Some(o), Value::Object(f)) = (o.as_object_mut(), fields) {
            o.extend(f);
        }
        eprintln!("{o}");
    } else {
        eprintln!("etcdlock: {msg}");
    }
}

/// Serve `client`'s metrics at `http://ADDR/metrics` (labelled with the
/// lock's name) until the process ends. Binding errors are the caller's to
/// report: nothing is served then.
pub async fn serve_metrics(addr: &str, client: Client, lock: String) -> std::io::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else { continue };
            let (client, lock) = (client.clone(), lock.clone());
            tokio::spawn(async move {
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
                    ["GET", "/metrics"] => ("200 OK", client.metrics().to_prometheus(&[("lock", &lock)])),
                    _ => ("404 Not Found", "only GET /metrics is served here\n".to_string()),
                };
                let reply = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    Ok(local)
}
