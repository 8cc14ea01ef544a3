//! A direct HTTP/2 channel for plain-text (`http://`) members: each request
//! goes from the caller's task straight to hyper's connection task, as Go's
//! gRPC client hands a request to its one writer goroutine.
//!
//! etcd-client's own channel is tonic's `balance_channel` (even for one
//! endpoint): a tower `Buffer` whose worker task receives every request over
//! an mpsc queue and passes it on to the connection task, one more task
//! wake-up (often a thread hand-off) per request each way than needed. Here
//! a member's client is one HTTP/2 connection; the channel clones hyper's
//! `SendRequest` and sends on it. A connection that closed (etcd restarted,
//! keep-alive timed out) is replaced on the next request; what the transport
//! does on errors (per-attempt bounds, member benching) is unchanged.
//! TLS members keep etcd-client's channel.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tonic::body::Body;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Change = tonic::transport::channel::Change<http::Uri, tonic::transport::Endpoint>;
/// etcd-client's `EndpointUpdater` (not exported by name).
type Updater = tokio::sync::mpsc::Sender<Change>;

/// What a direct connection is set up with (the transport's connect options).
#[derive(Clone, Debug)]
pub(crate) struct DirectOptions {
    pub connect_timeout: Duration,
    pub keep_alive_interval: Duration,
    pub keep_alive_timeout: Duration,
}

/// Builds the direct channel for etcd-client (`Client::connect_with_balanced_channel`).
pub(crate) struct Direct {
    pub url: http::Uri,
    pub options: DirectOptions,
}

struct Shared {
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
    options: DirectOptions,
    conn: Mutex<Option<SendRequest<Body>>>,
    /// One connect at a time.
    connecting: tokio::sync::Mutex<()>,
    /// etcd-client tells a balanced channel its endpoints over this queue; the
    /// direct channel has its one member already, so it only keeps the queue open.
    _updates: Mutex<Option<tokio::sync::mpsc::Receiver<Change>>>,
}

#[derive(Clone)]
struct DirectService(Arc<Shared>);

impl etcd_client::BalancedChannelBuilder for Direct {
    type Error = etcd_client::Error;

    fn balanced_channel(self, buffer_size: usize) -> Result<(etcd_client::Channel, Updater), Self::Error> {
        let bad = || etcd_client::Error::InvalidArgs(format!("not an http:// endpoint: {}", self.url));
        let parts = self.url.clone().into_parts();
        let (scheme, authority) = (parts.scheme.ok_or_else(bad)?, parts.authority.ok_or_else(bad)?);
        let (tx, rx) = tokio::sync::mpsc::channel(buffer_size.max(1));
        let svc = DirectService(Arc::new(Shared {
            scheme,
            authority,
            options: self.options,
            conn: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            _updates: Mutex::new(Some(rx)),
        }));
        Ok((etcd_client::Channel::Custom(tower::util::BoxCloneSyncService::new(svc)), tx))
    }
}

impl Shared {
    fn cached(&self) -> Option<SendRequest<Body>> {
        let g = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        g.as_ref().filter(|s| !s.is_closed()).cloned()
    }

    async fn sender(&self) -> Result<SendRequest<Body>, BoxError> {
        if let Some(s) = self.cached() {
            return Ok(s);
        }
        let _one = self.connecting.lock().await;
        if let Some(s) = self.cached() {
            return Ok(s);
        }
        let addr = self.authority.as_str().to_string();
        let tcp = tokio::time::timeout(self.options.connect_timeout, tokio::net::TcpStream::connect(addr))
            .await
            .map_err(|_| format!("connecting to {} timed out", self.authority))??;
        tcp.set_nodelay(true)?;
        let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .keep_alive_interval(self.options.keep_alive_interval)
            .keep_alive_timeout(self.options.keep_alive_timeout)
            .keep_alive_while_idle(true)
            .handshake(TokioIo::new(tcp))
            .await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "etcd connection ended");
            }
        });
        *self.conn.lock().unwrap_or_else(|p| p.into_inner()) = Some(send.clone());
        Ok(send)
    }
}

impl tower::Service<http::Request<Body>> for DirectService {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let shared = self.0.clone();
        Box::pin(async move {
            let (mut parts, body) = req.into_parts();
            // tonic's generated clients send the path only; HTTP/2 needs :scheme and :authority.
            let mut uri = std::mem::take(&mut parts.uri).into_parts();
            uri.scheme = Some(shared.scheme.clone());
            uri.authority = Some(shared.authority.clone());
            parts.uri = http::Uri::from_parts(uri)?;
            let mut send = shared.sender().await?;
            send.ready().await?;
            let resp = send.send_request(http::Request::from_parts(parts, body)).await?;
            Ok(resp.map(Body::new))
        })
    }
}
