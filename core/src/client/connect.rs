//! How a client's options become its channel: the endpoints' URLs (the
//! in-process store behind `mem://`, `https://` with TLS, `http://`
//! without) and etcd-client's connect options (timeouts, keep-alive, auth,
//! TLS files read and checked here, so a bad file fails `connect`).

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::options::ClientOptions;

/// The URLs to connect to and etcd-client's options for them.
pub(super) fn channel(opts: &ClientOptions) -> Result<(Vec<String>, etcd_client::ConnectOptions)> {
    let mut co = etcd_client::ConnectOptions::new()
        .with_connect_timeout(opts.connect_timeout)
        .with_keep_alive(Duration::from_secs(5), opts.request_timeout)
        .with_keep_alive_while_idle(true)
        .with_auto_token_refresh(true);
    if let (Some(u), Some(p)) = (&opts.username, &opts.password) {
        co = co.with_user(u.clone(), p.clone());
    }
    let mut urls = opts.endpoints.clone();
    if let Some(Ok(store)) = opts
        .endpoints
        .first()
        .and_then(|e| crate::transport::mem_store(e))
    {
        // The in-process store (validate checked every endpoint names it).
        urls = vec![mem_endpoint(store)?];
    } else if let Some(tls) = &opts.tls {
        let mut t = etcd_client::TlsOptions::new();
        if let Some(ca) = &tls.ca {
            t = t.ca_certificate(etcd_client::Certificate::from_pem(read_pem(ca, "CA")?));
        }
        match (&tls.cert, &tls.key) {
            (Some(c), Some(k)) => {
                t = t.identity(etcd_client::Identity::from_pem(
                    read_pem(c, "cert")?,
                    read_pem(k, "key")?,
                ));
            }
            (None, None) => {}
            _ => return Err(Error::invalid("TLS cert and key go together")),
        }
        if let Some(d) = &tls.domain {
            t = t.domain_name(d.clone());
        }
        co = co.with_tls(t);
        for u in &mut urls {
            if u.starts_with("http://") {
                return Err(Error::invalid(format!(
                    "endpoint {u} is plaintext but TLS options were given"
                )));
            }
            if !u.contains("://") {
                *u = format!("https://{u}");
            }
        }
    } else {
        for u in &mut urls {
            if !u.contains("://") {
                *u = format!("http://{u}");
            }
        }
    }
    Ok((urls, co))
}

fn read_pem(path: &PathBuf, what: &str) -> Result<Vec<u8>> {
    let data = std::fs::read(path).map_err(|e| {
        Error::invalid(format!(
            "cannot read TLS {what} file {}: {e}",
            path.display()
        ))
    })?;
    if !data.windows(10).any(|w| w == b"-----BEGIN") {
        return Err(Error::invalid(format!(
            "TLS {what} file {} is not PEM",
            path.display()
        )));
    }
    Ok(data)
}

/// The loopback URL of the in-process store `store` (`mem://NAME`), started
/// on first use.
#[cfg(feature = "mem")]
fn mem_endpoint(store: &str) -> Result<String> {
    memetcd::endpoint(store)
        .map_err(|e| Error::new(crate::error::ErrorCode::Unavailable, e.to_string()))
}

/// Without the `mem` feature there is no in-process store to start.
#[cfg(not(feature = "mem"))]
fn mem_endpoint(_store: &str) -> Result<String> {
    Err(Error::invalid(
        "mem:// endpoints need etcdlock built with its `mem` feature (the in-process store for unit tests); this build has none",
    ))
}
