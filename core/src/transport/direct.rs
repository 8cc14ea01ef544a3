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

/// An h2 connection is a future that does all its I/O when polled; whoever
/// holds [`Driver::conn`] polls it. Usually that is the connection's task,
/// woken by the socket, a timer or a stream. But a caller that has just
/// queued a request polls it itself, right away, on its own thread
/// ([`Driver::drive`]): the request is written by the thread that made it.
/// Waking the connection's task instead costs a thread wake-up on the
/// request's path whenever the caller is not a runtime worker (a blocking
/// binding's thread, whose future runs where it was called): an `eventfd`
/// write, then a worker scheduled, before the request leaves.
///
/// Every poll is made with one waker ([`Signal`]), so the socket's and h2's
/// wake-ups always reach the connection's task, whichever thread polled last.
struct Driver {
    conn: Mutex<Option<H2Conn>>,
    signal: Arc<Signal>,
    /// `signal` as a `Waker`, made once.
    waker: std::task::Waker,
    /// The connection has ended: closed by etcd, failed, or dropped by its task.
    closed: AtomicBool,
    /// The peer sent GOAWAY (a load balancer's request or age limit, etcd's
    /// graceful stop, `too_many_pings`), or the connection failed: it takes
    /// no new streams, while the streams already on it run to their end.
    draining: AtomicBool,
    /// Streams open on the connection (a request sent and its answer not yet
    /// dropped). PINGs go out only while one is: etcd (grpc-go, with
    /// `PermitWithoutStream: false`) counts a PING on a connection without
    /// streams as abuse and closes it with GOAWAY `too_many_pings`.
    open_streams: std::sync::atomic::AtomicUsize,
}

/// The waker the h2 connection is always polled with.
struct Signal {
    /// Something happened that the connection must be polled for. Set by
    /// every wake; whoever holds the connection polls until it is clear, and
    /// looks again after letting go (a wake that came as it let go is not lost).
    repoll: AtomicBool,
    /// The connection task's waker.
    task: futures_util::task::AtomicWaker,
}

thread_local! {
    /// The [`Signal`] (by address) of the connection this thread is queuing
    /// frames on, or polling: its wakes from this thread need no task, this
    /// thread polls the connection next.
    static DRIVING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Marks this thread as the next to poll a connection, until dropped.
struct Driving(usize);

impl Driving {
    fn enter(signal: &Arc<Signal>) -> Self {
        Driving(DRIVING.with(|d| d.replace(Arc::as_ptr(signal) as usize)))
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        DRIVING.with(|d| d.set(self.0));
    }
}

impl std::task::Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.repoll.store(true, Ordering::SeqCst);
        if DRIVING.with(|d| d.get()) != Arc::as_ptr(self) as usize {
            self.task.wake();
        }
    }
}

impl Driver {
    fn new(conn: H2Conn) -> Arc<Self> {
        let signal = Arc::new(Signal {
            repoll: AtomicBool::new(true),
            task: Default::default(),
        });
        let waker = std::task::Waker::from(signal.clone());
        Arc::new(Driver {
            conn: Mutex::new(Some(conn)),
            signal,
            waker,
            closed: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            open_streams: Default::default(),
        })
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether new requests must go to another connection.
    fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire) || self.is_closed()
    }

    /// Polls the connection until nothing is left to poll it for, on this
    /// thread, unless another thread is polling it: that one then polls
    /// again for what this thread queued (`repoll` is set).
    fn drive(&self) {
        let _me = Driving::enter(&self.signal);
        let mut cx = Context::from_waker(&self.waker);
        // Polled again only while something new came (a wake from another
        // thread, or from h2 itself) and at most this often: a poll that comes
        // back woken at once (a caller inside a tokio task whose cooperative
        // budget is spent gets Pending and an immediate wake from every
        // socket) or a busy connection (answers and watch events for many
        // streams) must not keep this thread; the connection's task takes over.
        let mut budget = 4u32;
        loop {
            let Ok(mut slot) = self.conn.try_lock() else {
                return;
            };
            while self.signal.repoll.swap(false, Ordering::SeqCst) {
                let Some(conn) = slot.as_mut() else { break };
                if budget == 0 {
                    self.signal.repoll.store(true, Ordering::SeqCst);
                    drop(slot);
                    self.signal.task.wake();
                    return;
                }
                budget -= 1;
                if let Poll::Ready(r) = Pin::new(conn).poll(&mut cx) {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "etcd connection ended");
                    }
                    *slot = None;
                    self.closed.store(true, Ordering::Release);
                    // The connection's task ends too.
                    self.signal.task.wake();
                    break;
                }
            }
            drop(slot);
            if !self.signal.repoll.load(Ordering::SeqCst) || self.is_closed() {
                return;
            }
        }
    }

    /// Drops the connection (every stream on it then fails), from its task.
    fn close(&self) {
        let conn = self.conn.locked().take();
        self.closed.store(true, Ordering::Release);
        drop(conn);
    }
}

/// One open stream of a connection ([`Driver::open_streams`]), counted from
/// its request until its answer is dropped.
struct OpenStream(Arc<Driver>);

impl OpenStream {
    fn new(driver: &Arc<Driver>) -> OpenStream {
        driver.open_streams.fetch_add(1, Ordering::AcqRel);
        OpenStream(driver.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.open_streams.fetch_sub(1, Ordering::AcqRel);
    }
}

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
        let tcp = AckWithNext {
            io: tcp,
            held: false,
            flush_by: Box::pin(tokio::time::sleep(ACK_HOLD)),
        };
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

/// How long a PING's answer may wait for a request to leave with.
const ACK_HOLD: Duration = Duration::from_millis(20);

/// etcd's gRPC server sends a PING with most answers (it times the round
/// trip to size its flow-control windows), and h2 answers it as soon as it
/// has read the answer: a write of its own on every request's path, before
/// the caller's task runs. Go's client writes its ACK from another goroutine,
/// beside the caller. Here a write that is only a PING ACK is held back
/// (for at most [`ACK_HOLD`]): the caller just woken by the answer usually
/// sends its next request at once, and the ACK leaves in the same write.
struct AckWithNext {
    io: tokio::net::TcpStream,
    held: bool,
    /// Wakes the connection's task to write a held ACK that nothing took along.
    flush_by: Pin<Box<tokio::time::Sleep>>,
}

impl AckWithNext {
    /// A PING frame (type 6) with the ACK flag, on stream 0, 8 bytes of payload.
    const PING_ACK: [u8; 9] = [0, 0, 8, 6, 1, 0, 0, 0, 0];

    /// Whether to hold this write back: a lone PING ACK, held for less than
    /// [`ACK_HOLD`] so far. Any other write takes the held ACK along.
    fn hold(&mut self, lone_ack: bool, cx: &mut Context<'_>) -> bool {
        if lone_ack {
            if !self.held {
                self.held = true;
                self.flush_by
                    .as_mut()
                    .reset(tokio::time::Instant::now() + ACK_HOLD);
            }
            if self.flush_by.as_mut().poll(cx).is_pending() {
                return true;
            }
        }
        self.held = false;
        false
    }

    fn is_ack(b: &[u8]) -> bool {
        b.len() == 17 && b[..9] == Self::PING_ACK
    }
}

impl tokio::io::AsyncRead for AckWithNext {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for AckWithNext {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.hold(Self::is_ack(buf), cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let mut parts = bufs.iter().filter(|b| !b.is_empty());
        let lone_ack = matches!((parts.next(), parts.next()), (Some(b), None) if Self::is_ack(b));
        if self.hold(lone_ack, cx) {
            return Poll::Pending;
        }
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Polls a request body for what it has ready now: the data so far, and
/// whether the body has ended (a unary call's body always has).
fn take_ready(
    body: &mut Body,
    cx: &mut Context<'_>,
    data: &mut BytesMut,
) -> Poll<Result<bool, BoxError>> {
    loop {
        match Pin::new(&mut *body).poll_frame(cx) {
            Poll::Pending => return Poll::Ready(Ok(false)),
            Poll::Ready(None) => return Poll::Ready(Ok(true)),
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e.into())),
            Poll::Ready(Some(Ok(frame))) => {
                // A gRPC client sends no trailers; anything but data is dropped.
                if let Ok(d) = frame.into_data() {
                    data.extend_from_slice(&d);
                }
            }
        }
    }
}

/// Copies a streaming request's body onto its stream (`first`, then the
/// rest as the body yields it) until the body ends, fails, or the stream is
/// reset. Each chunk waits for the peer's flow-control window (h2 would
/// otherwise buffer whatever is sent, without limit, for a peer that stopped
/// reading), and the body is read only once it has gone.
async fn pipe(
    first: Bytes,
    mut body: Body,
    mut stream: h2::SendStream<Bytes>,
    cancel: tokio::sync::oneshot::Receiver<()>,
) {
    let mut cancel = Some(cancel);
    let mut chunk = first;
    loop {
        while !chunk.is_empty() {
            stream.reserve_capacity(chunk.len());
            let room = poll_fn(|cx| {
                if stream.poll_reset(cx).is_ready() {
                    return Poll::Ready(None);
                }
                stream.poll_capacity(cx)
            })
            .await;
            match room {
                Some(Ok(n)) if n > 0 => {
                    let part = chunk.split_to(n.min(chunk.len()));
                    if stream.send_data(part, false).is_err() {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                None | Some(Err(_)) => return,
            }
        }
        let next = poll_fn(|cx| {
            if stream.poll_reset(cx).is_ready() {
                return Poll::Ready(None);
            }
            if let Some(rx) = cancel.as_mut() {
                match Pin::new(rx).poll(cx) {
                    // The caller gave up before the answer's head came.
                    Poll::Ready(Ok(())) => return Poll::Ready(None),
                    // Its head came: from now on the answer's reader decides.
                    Poll::Ready(Err(_)) => cancel = None,
                    Poll::Pending => {}
                }
            }
            Pin::new(&mut body).poll_frame(cx).map(Some)
        })
        .await;
        match next {
            None => return stream.send_reset(h2::Reason::CANCEL),
            Some(None) => {
                let _ = stream.send_data(Bytes::new(), true);
                return;
            }
            Some(Some(Err(e))) => {
                tracing::debug!(error = %e, "request body failed");
                return stream.send_reset(h2::Reason::CANCEL);
            }
            Some(Some(Ok(frame))) => {
                if let Ok(d) = frame.into_data() {
                    chunk = d;
                }
            }
        }
    }
}

/// Tells a streaming request's body pipe that the caller dropped the call
/// before the answer's head came (the pipe then resets the stream).
struct CancelOnDrop(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// An answer's body: the stream's DATA, then its trailers (gRPC's status).
/// What is read is handed back to the flow-control window at once.
struct Answer {
    recv: Option<h2::RecvStream>,
    /// The DATA has ended; the trailers are next.
    data_ended: bool,
    driver: Arc<Driver>,
    /// Counted as open until the answer is dropped.
    _open: OpenStream,
}

impl http_body::Body for Answer {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        let this = &mut *self;
        let Some(recv) = this.recv.as_mut() else {
            return Poll::Ready(None);
        };
        if !this.data_ended {
            match recv.poll_data(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(d))) => {
                    let _ = recv.flow_control().release_capacity(d.len());
                    return Poll::Ready(Some(Ok(Frame::data(d))));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => this.data_ended = true,
            }
        }
        match recv.poll_trailers(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(Some(t))) => Poll::Ready(Some(Ok(Frame::trailers(t)))),
            Poll::Ready(Ok(None)) => Poll::Ready(None),
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.recv.as_ref().map_or(true, |r| r.is_end_stream())
    }
}

impl Drop for Answer {
    /// The last reference to a finished stream going away wakes the
    /// connection (to free the stream); an unfinished one queues its reset.
    /// This thread does that work itself, as for a request.
    fn drop(&mut self) {
        let recv = self.recv.take();
        {
            let _me = Driving::enter(&self.driver.signal);
            drop(recv);
        }
        if self.driver.signal.repoll.load(Ordering::SeqCst) {
            self.driver.drive();
        }
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

    async fn pair() -> (AckWithNext, tokio::net::TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = tokio::net::TcpStream::connect(l.local_addr().unwrap())
            .await
            .unwrap();
        let (b, _) = l.accept().await.unwrap();
        (
            AckWithNext {
                io: a,
                held: false,
                flush_by: Box::pin(tokio::time::sleep(ACK_HOLD)),
            },
            b,
        )
    }

    fn poll_write(w: &mut AckWithNext, bufs: &[&[u8]]) -> Poll<usize> {
        let slices: Vec<_> = bufs.iter().map(|b| std::io::IoSlice::new(b)).collect();
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        Pin::new(w)
            .poll_write_vectored(&mut cx, &slices)
            .map(|r| r.unwrap())
    }

    /// A lone PING ACK waits for the next write and leaves with it; an ACK
    /// that nothing follows leaves alone once ACK_HOLD has passed.
    #[tokio::test(start_paused = true)]
    async fn a_ping_ack_waits_for_the_next_write_at_most_ack_hold() {
        let (mut w, mut peer) = pair().await;
        assert!(
            poll_write(&mut w, &[&ACK]).is_pending(),
            "a lone ACK is held"
        );
        assert!(
            poll_write(&mut w, &[&ACK]).is_pending(),
            "and held again when h2 retries it"
        );
        // h2 retries with what it has buffered since: the ACK and the next frame.
        assert_eq!(poll_write(&mut w, &[&ACK, &OTHER]), Poll::Ready(30));
        let mut buf = [0u8; 64];
        assert_eq!(peer.read(&mut buf).await.unwrap(), 30);
        // Nothing follows this one: it goes once ACK_HOLD has passed.
        assert!(poll_write(&mut w, &[&ACK]).is_pending());
        tokio::time::advance(ACK_HOLD - Duration::from_millis(1)).await;
        assert!(
            poll_write(&mut w, &[&ACK]).is_pending(),
            "held until ACK_HOLD"
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(poll_write(&mut w, &[&ACK]), Poll::Ready(17));
        assert_eq!(peer.read(&mut buf).await.unwrap(), 17);
        // Other writes are never held, and plain writes are checked too.
        assert_eq!(poll_write(&mut w, &[&OTHER]), Poll::Ready(13));
        let waker = futures_util::task::noop_waker();
        assert!(Pin::new(&mut w)
            .poll_write(&mut Context::from_waker(&waker), &ACK)
            .is_pending());
        w.write_all(&OTHER).await.unwrap();
    }
}
