//! Request and response bodies on a member's connection: what a request has ready, the copy of a streaming request's body, and the answer's body.

use super::*;

/// Polls a request body for what it has ready now: the data so far, and
/// whether the body has ended (a unary call's body always has).
pub(super) fn take_ready(
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
pub(super) async fn pipe(
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
pub(super) struct CancelOnDrop(pub(super) Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// An answer's body: the stream's DATA, then its trailers (gRPC's status).
/// What is read is handed back to the flow-control window at once.
pub(super) struct Answer {
    pub(super) recv: Option<h2::RecvStream>,
    /// The DATA has ended; the trailers are next.
    pub(super) data_ended: bool,
    pub(super) driver: Arc<Driver>,
    /// Counted as open until the answer is dropped.
    pub(super) _open: OpenStream,
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
