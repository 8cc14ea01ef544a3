//! The connection's driver: whoever queued a request polls the connection itself, on its own thread.

use super::*;

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
pub(super) struct Driver {
    pub(super) conn: Mutex<Option<H2Conn>>,
    pub(super) signal: Arc<Signal>,
    /// `signal` as a `Waker`, made once.
    pub(super) waker: std::task::Waker,
    /// The connection has ended: closed by etcd, failed, or dropped by its task.
    pub(super) closed: AtomicBool,
    /// The peer sent GOAWAY (a load balancer's request or age limit, etcd's
    /// graceful stop, `too_many_pings`), or the connection failed: it takes
    /// no new streams, while the streams already on it run to their end.
    pub(super) draining: AtomicBool,
    /// Streams open on the connection (a request sent and its answer not yet
    /// dropped). PINGs go out only while one is: etcd (grpc-go, with
    /// `PermitWithoutStream: false`) counts a PING on a connection without
    /// streams as abuse and closes it with GOAWAY `too_many_pings`.
    pub(super) open_streams: std::sync::atomic::AtomicUsize,
}

/// The waker the h2 connection is always polled with.
pub(super) struct Signal {
    /// Something happened that the connection must be polled for. Set by
    /// every wake; whoever holds the connection polls until it is clear, and
    /// looks again after letting go (a wake that came as it let go is not lost).
    pub(super) repoll: AtomicBool,
    /// The connection task's waker.
    pub(super) task: futures_util::task::AtomicWaker,
}

thread_local! {
    /// The [`Signal`] (by address) of the connection this thread is queuing
    /// frames on, or polling: its wakes from this thread need no task, this
    /// thread polls the connection next.
    static DRIVING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Marks this thread as the next to poll a connection, until dropped.
pub(super) struct Driving(pub(super) usize);

impl Driving {
    pub(super) fn enter(signal: &Arc<Signal>) -> Self {
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
    pub(super) fn new(conn: H2Conn) -> Arc<Self> {
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

    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether new requests must go to another connection.
    pub(super) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire) || self.is_closed()
    }

    /// Polls the connection until nothing is left to poll it for, on this
    /// thread, unless another thread is polling it: that one then polls
    /// again for what this thread queued (`repoll` is set).
    pub(super) fn drive(&self) {
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
    pub(super) fn close(&self) {
        let conn = self.conn.locked().take();
        self.closed.store(true, Ordering::Release);
        drop(conn);
    }
}

/// One open stream of a connection ([`Driver::open_streams`]), counted from
/// its request until its answer is dropped.
pub(super) struct OpenStream(pub(super) Arc<Driver>);

impl OpenStream {
    pub(super) fn new(driver: &Arc<Driver>) -> OpenStream {
        driver.open_streams.fetch_add(1, Ordering::AcqRel);
        OpenStream(driver.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.open_streams.fetch_sub(1, Ordering::AcqRel);
    }
}
