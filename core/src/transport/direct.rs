//! A direct HTTP/2 channel for plain-text (`http://`) members, shaped like
//! Go's gRPC client: the caller writes its own request, and one connection
//! task reads the answers and wakes the callers.
//!
//! etcd-client's own channel is tonic's `balance_channel` (even for one
//! endpoint): a tower `Buffer` whose worker task receives every request over
//! an mpsc queue and passes it on to hyper. hyper's HTTP/2 client then adds
//! two more tasks per request: its dispatch task (which takes the request off
//! another queue and opens the stream) and a spawned task that waits for the
//! response, plus, for every request body not already finished, a spawned task
//! that copies the body; the head, the body and its end went out in three
//! writes (three TCP segments etcd reads one by one). Here a member's client
//! is one [`h2`] connection: the caller's task opens the stream itself, and a
//! unary request's encoded message is already complete when tonic hands it
//! over, so the head and one DATA frame carrying END_STREAM are queued
//! together and leave in one write, made by the caller's own thread
//! ([`Driver`]); the caller's task awaits the response stream directly.
//! Streaming requests (watch, lease keep-alive) get a task that copies their
//! body as it comes. A connection that closed (etcd restarted, keep-alive
//! timed out) is replaced on the next request; what the transport does on
//! errors (per-attempt bounds, member benching) is unchanged. TLS members
//! keep etcd-client's channel.

use crate::poison::Locked;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Body as _, Frame};
use tonic::body::Body;

mod ack;
use ack::*;

mod body;
use body::*;

mod driver;
use driver::*;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Change = tonic::transport::channel::Change<http::Uri, tonic::transport::Endpoint>;
/// etcd-client's `EndpointUpdater` (not exported by name).
type Updater = tokio::sync::mpsc::Sender<Change>;

/// Flow-control windows: hyper's HTTP/2 client defaults (tonic's channel,
/// used for `https://` members, runs with the same).
const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
const CONN_WINDOW: u32 = 5 * 1024 * 1024;
const MAX_FRAME: u32 = 16 * 1024;
const MAX_SEND_BUFFER: usize = 1024 * 1024;
const MAX_HEADER_LIST: u32 = 16 * 1024;

/// What a direct connection is set up with (the transport's connect options).
#[derive(Clone, Debug)]
pub(crate) struct DirectOptions {
    pub connect_timeout: Duration,
    /// A PING goes out this often, with or without calls in flight ...
    pub keep_alive_interval: Duration,
    /// ... and a connection whose PING is not answered within this is closed:
    /// every call on it fails (`Unavailable`) and the next request reconnects.
    pub keep_alive_timeout: Duration,
    /// Closed when the client closes ([`super::Transport::shut`]): the open
    /// connection closes its socket and no new one is made.
    pub closer: Arc<Closer>,
}

/// The direct connections of one transport, closed together: a closed client
/// keeps no socket open, and closing waits until none is.
#[derive(Debug)]
pub(crate) struct Closer {
    closed: tokio_util::sync::CancellationToken,
    /// Connection tasks not yet ended (their sockets still open).
    live: tokio::sync::watch::Sender<usize>,
}

/// One connection task's share of [`Closer::live`], given up when the task
/// ends or is dropped unpolled.
struct Live(Arc<Closer>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.live.send_modify(|n| *n -= 1);
    }
}

impl Closer {
    pub(crate) fn new() -> Arc<Closer> {
        Arc::new(Closer {
            closed: Default::default(),
            live: tokio::sync::watch::channel(0).0,
        })
    }

    fn live(self: &Arc<Self>) -> Live {
        self.live.send_modify(|n| *n += 1);
        Live(self.clone())
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Close every connection and wait (at most `bound`) until their sockets are.
    pub(crate) async fn close(&self, bound: Duration) {
        self.closed.cancel();
        let mut live = self.live.subscribe();
        let _ = tokio::time::timeout(bound, live.wait_for(|n| *n == 0)).await;
    }
}

/// Builds the direct channel for etcd-client (`Client::connect_with_balanced_channel`).
pub(crate) struct Direct {
    pub url: http::Uri,
    pub options: DirectOptions,
}

/// One open HTTP/2 connection: a handle to open streams on, and what drives it.
#[derive(Clone)]
struct Conn {
    send: h2::client::SendRequest<Bytes>,
    driver: Arc<Driver>,
}

type H2Conn = h2::client::Connection<AckWithNext, Bytes>;

/// Whether a request failed because the peer refused its stream unprocessed,
/// so that it may be sent again as it is: a stream above a GOAWAY's last
/// stream id (h2 fails those with the peer's GOAWAY when it arrives; streams
/// at or below it run on, and fail otherwise if the connection ends), or one
/// reset with REFUSED_STREAM (RFC 9113, 8.7: not processed).
fn refused(e: &h2::Error) -> bool {
    (e.is_go_away() && e.is_remote()) || e.reason() == Some(h2::Reason::REFUSED_STREAM)
}

/// Closes the connection when its task ends or is dropped.
struct CloseOnDrop(Arc<Driver>);

impl std::ops::Deref for CloseOnDrop {
    type Target = Driver;

    fn deref(&self) -> &Driver {
        &self.0
    }
}

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

struct Shared {
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
    options: DirectOptions,
    conn: Mutex<Option<Conn>>,
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

    fn balanced_channel(
        self,
        buffer_size: usize,
    ) -> Result<(etcd_client::Channel, Updater), Self::Error> {
        let bad =
            || etcd_client::Error::InvalidArgs(format!("not an http:// endpoint: {}", self.url));
        let parts = self.url.clone().into_parts();
        let (scheme, authority) = (
            parts.scheme.ok_or_else(bad)?,
            parts.authority.ok_or_else(bad)?,
        );
        let (tx, rx) = tokio::sync::mpsc::channel(buffer_size.max(1));
        let svc = DirectService(Arc::new(Shared {
            scheme,
            authority,
            options: self.options,
            conn: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            _updates: Mutex::new(Some(rx)),
        }));
        Ok((
            etcd_client::Channel::Custom(tower::util::BoxCloneSyncService::new(svc)),
            tx,
        ))
    }
}

impl Shared {
    fn cached(&self) -> Option<Conn> {
        let g = self.conn.locked();
        g.as_ref().filter(|c| !c.driver.is_draining()).cloned()
    }

    /// `conn` takes no new streams (GOAWAY, or a failed connection): the next
    /// request dials a new one at once. Its open streams go on until they end.
    fn retire(&self, conn: &Conn, why: &h2::Error) {
        if !conn.driver.draining.swap(true, Ordering::AcqRel) {
            tracing::debug!(authority = %self.authority, error = %why, "etcd connection takes no new streams; the next request connects again");
        }
        let mut g = self.conn.locked();
        if g.as_ref()
            .is_some_and(|c| Arc::ptr_eq(&c.driver, &conn.driver))
        {
            *g = None;
        }
    }

    async fn conn(&self) -> Result<Conn, BoxError> {
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        let _one = self.connecting.lock().await;
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        if self.options.closer.closed.is_cancelled() {
            return Err("the client was closed".into());
        }
        let addr = self.authority.as_str().to_string();
        let tcp = tokio::time::timeout(
            self.options.connect_timeout,
            tokio::net::TcpStream::connect(addr),
        )
        .await
        .map_err(|_| format!("connecting to {} timed out", self.authority))??;
        tcp.set_nodelay(true)?;
        let tcp = AckWithNext::new(tcp);
        let handshake = h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONN_WINDOW)
            .max_frame_size(MAX_FRAME)
            .max_send_buffer_size(MAX_SEND_BUFFER)
            .max_header_list_size(MAX_HEADER_LIST)
            .enable_push(false)
            .handshake::<_, Bytes>(tcp);
        let (send, mut conn) = tokio::time::timeout(self.options.connect_timeout, handshake)
            .await
            .map_err(|_| format!("HTTP/2 handshake with {} timed out", self.authority))??;
        let (every, within) = (
            self.options.keep_alive_interval,
            self.options.keep_alive_timeout,
        );
        let mut pings = conn.ping_pong();
        let driver = Driver::new(conn);
        let task = driver.clone();
        let live = self.options.closer.live();
        tokio::spawn(async move {
            let _live = live;
            // However the task ends (the connection ended, its keep-alive
            // failed, or its runtime shut down and dropped the task), the
            // connection goes with it: every stream on it fails and the next
            // request connects again.
            let task = CloseOnDrop(task);
            let keep_alive = async {
                let Some(pings) = pings.as_mut() else {
                    return std::future::pending().await;
                };
                loop {
                    tokio::time::sleep(every).await;
                    if task.open_streams.load(Ordering::Acquire) == 0 {
                        continue;
                    }
                    match tokio::time::timeout(within, pings.ping(h2::Ping::opaque())).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => return format!("keep-alive ping failed: {e}"),
                        Err(_) => return format!("keep-alive ping unanswered for {within:?}"),
                    }
                }
            };
            let driven = poll_fn(|cx| {
                task.signal.task.register(cx.waker());
                task.drive();
                if task.is_closed() {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            });
            // Dropping the connection (keep-alive timed out) fails every
            // stream on it (h2 signals end of stream to each).
            tokio::select! {
                () = driven => {}
                why = keep_alive => tracing::debug!(why, "etcd connection closed"),
                () = _live.0.closed.cancelled() => tracing::debug!("etcd connection closed with its client"),
            }
        });
        let c = Conn { send, driver };
        *self.conn.locked() = Some(c.clone());
        Ok(c)
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
            let (mut parts, mut body) = req.into_parts();
            // tonic's generated clients send the path only; HTTP/2 needs :scheme and :authority.
            let mut uri = std::mem::take(&mut parts.uri).into_parts();
            uri.scheme = Some(shared.scheme.clone());
            uri.authority = Some(shared.authority.clone());
            parts.uri = http::Uri::from_parts(uri)?;
            let mut data = BytesMut::new();
            let ended = poll_fn(|cx| take_ready(&mut body, cx, &mut data)).await?;
            let data = data.freeze();
            let mut body = Some(body);
            // A request goes out at most twice: again, on a new connection,
            // when the first found its connection draining or the peer
            // refused its stream unprocessed (a GOAWAY that crossed it).
            let mut again = true;
            loop {
                let conn = shared.conn().await?;
                let send = match conn.send.clone().ready().await {
                    Ok(send) => send,
                    Err(e) => {
                        shared.retire(&conn, &e);
                        if std::mem::take(&mut again) {
                            continue;
                        }
                        return Err(e.into());
                    }
                };
                let head = head_of(&parts);
                let streaming = if ended { None } else { body.take() };
                match send_on(&conn, send, head, data.clone(), streaming) {
                    Ok((answer, guard, open)) => match answer.await {
                        Ok(resp) => {
                            if let Some(mut g) = guard {
                                g.0.take(); // dropped unsent: the pipe goes on
                            }
                            let driver = conn.driver.clone();
                            return Ok(resp.map(|recv| {
                                Body::new(Answer {
                                    recv: Some(recv),
                                    data_ended: false,
                                    driver,
                                    _open: open,
                                })
                            }));
                        }
                        // Sent again only when nothing of it was lost: a
                        // streaming request's body went to the refused stream.
                        Err(e) if refused(&e) && ended => {
                            shared.retire(&conn, &e);
                            if std::mem::take(&mut again) {
                                continue;
                            }
                            return Err(e.into());
                        }
                        Err(e) => return Err(e.into()),
                    },
                    Err((e, unsent)) => {
                        // Refused before anything left: the body is whole.
                        body = body.or(unsent);
                        shared.retire(&conn, &e);
                        if std::mem::take(&mut again) {
                            continue;
                        }
                        return Err(e.into());
                    }
                }
            }
        })
    }
}

type Sent = (h2::client::ResponseFuture, Option<CancelOnDrop>, OpenStream);

/// A request's head, for one attempt. h2 drops a request's extensions before
/// sending, so they are not copied.
fn head_of(parts: &http::request::Parts) -> http::Request<()> {
    let mut r = http::Request::new(());
    *r.method_mut() = parts.method.clone();
    *r.uri_mut() = parts.uri.clone();
    *r.version_mut() = parts.version;
    *r.headers_mut() = parts.headers.clone();
    r
}

/// Queues a request on `conn` and writes it from this thread: a unary one
/// (`streaming` = `None`, `data` its whole message) as its head and one DATA
/// frame carrying END_STREAM, which leave in one write; a streaming one as
/// its head and `data` so far, the rest copied by a task as the body yields
/// it. On failure, nothing was sent, and a streaming body comes back.
fn send_on(
    conn: &Conn,
    mut send: h2::client::SendRequest<Bytes>,
    head: http::Request<()>,
    data: Bytes,
    streaming: Option<Body>,
) -> Result<Sent, (h2::Error, Option<Body>)> {
    let queued = {
        // This thread writes what it queues here (drive, below).
        let _me = Driving::enter(&conn.driver.signal);
        match streaming {
            None => send
                .send_request(head, data.is_empty())
                .and_then(|(answer, mut stream)| {
                    let open = OpenStream::new(&conn.driver);
                    if !data.is_empty() {
                        // Bounded by the message (etcd takes at most its
                        // request size limit): h2 sends it as the peer's
                        // window allows.
                        stream.send_data(data, true)?;
                    }
                    Ok((answer, None, open))
                })
                .map_err(|e| (e, None)),
            Some(body) => match send.send_request(head, false) {
                Err(e) => Err((e, Some(body))),
                Ok((answer, mut stream)) => {
                    let open = OpenStream::new(&conn.driver);
                    let mut rest = data;
                    if !rest.is_empty() {
                        // The first message leaves with the head when the
                        // window has room for it (a new stream's usually has).
                        stream.reserve_capacity(rest.len());
                        if stream.capacity() >= rest.len()
                            && stream.send_data(rest.clone(), false).is_ok()
                        {
                            rest = Bytes::new();
                        }
                    }
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    tokio::spawn(pipe(rest, body, stream, rx));
                    Ok((answer, Some(CancelOnDrop(Some(tx))), open))
                }
            },
        }
    };
    conn.driver.drive();
    queued
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

    const ACK: [u8; 17] = [0, 0, 8, 6, 1, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    /// A WINDOW_UPDATE frame on stream 0.
    const OTHER: [u8; 13] = [0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 1, 0];

    async fn pair(hold_for: Duration) -> (AckWithNext, tokio::net::TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = tokio::net::TcpStream::connect(l.local_addr().unwrap())
            .await
            .unwrap();
        let (b, _) = l.accept().await.unwrap();
        (AckWithNext::holding(a, hold_for), b)
    }

    fn poll_write(w: &mut AckWithNext, bufs: &[&[u8]]) -> Poll<usize> {
        let slices: Vec<_> = bufs.iter().map(|b| std::io::IoSlice::new(b)).collect();
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        Pin::new(w)
            .poll_write_vectored(&mut cx, &slices)
            .map(|r| r.unwrap())
    }

    /// A lone PING ACK waits for the next write and leaves with it. The hold
    /// here outlasts the test: nothing below depends on the clock.
    #[tokio::test]
    async fn a_ping_ack_waits_for_the_next_write() {
        let (mut w, mut peer) = pair(Duration::from_secs(3600)).await;
        assert!(
            poll_write(&mut w, &[&ACK]).is_pending(),
            "a lone ACK is held"
        );
        let due = w.flush_by.deadline();
        assert!(
            poll_write(&mut w, &[&ACK]).is_pending(),
            "and held again when h2 retries it"
        );
        assert_eq!(
            w.flush_by.deadline(),
            due,
            "a retry does not move its due time"
        );
        // h2 retries with what it has buffered since: the ACK and the next frame.
        assert_eq!(poll_write(&mut w, &[&ACK, &OTHER]), Poll::Ready(30));
        let mut buf = [0u8; 64];
        assert_eq!(peer.read(&mut buf).await.unwrap(), 30);
        // Other writes are never held, and plain writes are checked too.
        assert_eq!(poll_write(&mut w, &[&OTHER]), Poll::Ready(13));
        let waker = futures_util::task::noop_waker();
        assert!(Pin::new(&mut w)
            .poll_write(&mut Context::from_waker(&waker), &ACK)
            .is_pending());
        w.write_all(&OTHER).await.unwrap();
    }

    /// An ACK that nothing follows is due to leave alone exactly its hold
    /// after it was first held, and leaves then.
    #[tokio::test]
    async fn a_lone_ping_ack_leaves_when_its_hold_has_passed() {
        let hold = Duration::from_millis(50);
        let (mut w, mut peer) = pair(hold).await;
        let before = tokio::time::Instant::now();
        assert!(poll_write(&mut w, &[&ACK]).is_pending());
        let after = tokio::time::Instant::now();
        let due = w.flush_by.deadline();
        assert!(
            due >= before + hold && due <= after + hold,
            "due {:?} after the write, the hold is {hold:?}",
            due - before
        );
        tokio::time::sleep_until(due).await;
        assert_eq!(poll_write(&mut w, &[&ACK]), Poll::Ready(17));
        let mut buf = [0u8; 64];
        assert_eq!(peer.read(&mut buf).await.unwrap(), 17);
    }
}
