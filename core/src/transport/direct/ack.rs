//! The socket under a member's connection: a lone PING ACK waits briefly for the next request to leave with it.

use super::*;

/// How long a PING's answer may wait for a request to leave with.
pub(super) const ACK_HOLD: Duration = Duration::from_millis(20);

/// etcd's gRPC server sends a PING with most answers (it times the round
/// trip to size its flow-control windows), and h2 answers it as soon as it
/// has read the answer: a write of its own on every request's path, before
/// the caller's task runs. Go's client writes its ACK from another goroutine,
/// beside the caller. Here a write that is only a PING ACK is held back
/// (for at most [`ACK_HOLD`]): the caller just woken by the answer usually
/// sends its next request at once, and the ACK leaves in the same write.
pub(super) struct AckWithNext {
    pub(super) io: tokio::net::TcpStream,
    pub(super) held: bool,
    /// Wakes the connection's task to write a held ACK that nothing took along.
    pub(super) flush_by: Pin<Box<tokio::time::Sleep>>,
    /// How long a lone ACK is held: [`ACK_HOLD`] (tests choose their own).
    pub(super) hold_for: Duration,
}

impl AckWithNext {
    pub(super) fn new(io: tokio::net::TcpStream) -> Self {
        Self::holding(io, ACK_HOLD)
    }

    pub(super) fn holding(io: tokio::net::TcpStream, hold_for: Duration) -> Self {
        AckWithNext {
            io,
            held: false,
            flush_by: Box::pin(tokio::time::sleep(hold_for)),
            hold_for,
        }
    }

    /// A PING frame (type 6) with the ACK flag, on stream 0, 8 bytes of payload.
    pub(super) const PING_ACK: [u8; 9] = [0, 0, 8, 6, 1, 0, 0, 0, 0];

    /// Whether to hold this write back: a lone PING ACK, held for less than
    /// `hold_for` so far. Any other write takes the held ACK along.
    pub(super) fn hold(&mut self, lone_ack: bool, cx: &mut Context<'_>) -> bool {
        if lone_ack {
            if !self.held {
                self.held = true;
                self.flush_by
                    .as_mut()
                    .reset(tokio::time::Instant::now() + self.hold_for);
            }
            if self.flush_by.as_mut().poll(cx).is_pending() {
                return true;
            }
        }
        self.held = false;
        false
    }

    pub(super) fn is_ack(b: &[u8]) -> bool {
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
