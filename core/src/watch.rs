//! One etcd watch stream per client, shared by every wait and every held key
//! (as Go's clientv3 multiplexes its watchers): a watch costs a map entry and a
//! watch id, not a gRPC stream and a task. Wave 1 opened a stream per waiter,
//! and 2,000 waiters in one process failed with `Unavailable`.
//!
//! Watches are created with client-chosen ids (etcd >= 3.4), so creates can be
//! pipelined without matching `created` responses in order. A watch starts
//! "now" (synced in etcd) and its owner closes the gap since its last read
//! with one read when `Created` reports a newer revision; the hub remembers the
//! revision after the last event each watch saw, so when the stream breaks (member killed, failover) it is re-created on a
//! healthy member and each watch resumes from there: no missed delete, no
//! duplicate. A watch whose start revision was compacted (or that etcd cancels)
//! reports [`WatchEvent::Reset`] and its owner re-reads the state.
//!
//! Only deletes are watched (`NoPut`): a lock cares about keys going away.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{EventType, WatchFilterType, WatchOptions, WatchResponse};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::transport::Transport;

/// What a watch reports to its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchEvent {
    /// etcd created the watch; `rev` was the store's revision then.
    Created { rev: i64 },
    /// The key was deleted at `rev`.
    Deleted { rev: i64 },
    /// The watch cannot vouch for every delete any more (start revision
    /// compacted, or cancelled by etcd): re-read the key. The watch is gone.
    Reset,
}

/// Called on the hub's task for each event of one watch: keep it short and
/// non-blocking (send on a channel, mark a state).
pub(crate) type Sink = Arc<dyn Fn(WatchEvent) + Send + Sync>;

enum Cmd {
    Add { id: i64, key: Vec<u8>, start_rev: i64, sink: Sink },
    Cancel(i64),
    Resp { gen: u64, resp: WatchResponse },
    Ended { gen: u64, member: usize, why: String },
}

struct Entry {
    key: Vec<u8>,
    /// Where a re-created watch starts: after the last event seen (0 until
    /// etcd said where a watch "from now" started; re-created from now then,
    /// and its owner closes the gap on the new `Created`).
    next_rev: i64,
    sink: Sink,
}

/// The client's watch multiplexer. Cheap handle; the stream lives in one task.
pub(crate) struct WatchHub {
    tx: mpsc::UnboundedSender<Cmd>,
    next_id: AtomicI64,
    streams_opened: Arc<AtomicU64>,
    active: Arc<AtomicI64>,
}

impl WatchHub {
    pub(crate) fn start(transport: Arc<Transport>, handle: &tokio::runtime::Handle, closed: CancellationToken) -> WatchHub {
        let (tx, rx) = mpsc::unbounded_channel();
        let streams_opened = Arc::new(AtomicU64::new(0));
        let active = Arc::new(AtomicI64::new(0));
        let task = Task {
            transport,
            tx: tx.downgrade(),
            entries: HashMap::new(),
            stream: None,
            gen: 0,
            streams_opened: streams_opened.clone(),
            active: active.clone(),
        };
        handle.spawn(task.run(rx, closed));
        WatchHub { tx, next_id: AtomicI64::new(1), streams_opened, active }
    }

    /// Watch `key` for deletes from now on. The sink's first event is
    /// `Created { rev }`: deletes after `rev` are reported, so an owner whose
    /// last read was older than `rev` reads once more to close the gap. Such a
    /// watch is registered *synced* in etcd; one that starts at a past revision
    /// is served by etcd's 100 ms catch-up loop, whose passes hold the store's
    /// lock, and thousands of them in a burst slowed every write (2,000
    /// waiters took 11 s to queue). Returns the id for [`WatchHub::cancel`].
    pub(crate) fn watch(&self, key: Vec<u8>, sink: Sink) -> i64 {
        self.watch_from(key, 0, sink)
    }

    /// Watch `key` for deletes from revision `start_rev` on (0: from now).
    pub(crate) fn watch_from(&self, key: Vec<u8>, start_rev: i64, sink: Sink) -> i64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let _ = self.tx.send(Cmd::Add { id, key, start_rev: start_rev.max(0), sink });
        id
    }

    /// Stop a watch (idempotent; its sink is not called after the hub sees this).
    pub(crate) fn cancel(&self, id: i64) {
        let _ = self.tx.send(Cmd::Cancel(id));
    }

    /// Watch streams this client has opened so far (one, unless the stream had
    /// to be re-created after a failure).
    pub(crate) fn streams_opened(&self) -> u64 {
        self.streams_opened.load(Ordering::Relaxed)
    }

    /// Watches registered right now.
    pub(crate) fn active(&self) -> i64 {
        self.active.load(Ordering::Relaxed)
    }
}

struct Stream {
    gen: u64,
    member: usize,
    sender: etcd_client::WatchRequestSender,
    reader: tokio::task::JoinHandle<()>,
}

struct Task {
    transport: Arc<Transport>,
    tx: mpsc::WeakUnboundedSender<Cmd>,
    entries: HashMap<i64, Entry>,
    stream: Option<Stream>,
    gen: u64,
    streams_opened: Arc<AtomicU64>,
    active: Arc<AtomicI64>,
}

fn create_opts(id: i64, start_rev: i64) -> WatchOptions {
    WatchOptions::new().with_watch_id(id).with_start_revision(start_rev).with_filters([WatchFilterType::NoPut])
}

impl Task {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Cmd>, closed: CancellationToken) {
        let mut reopen_at: Option<tokio::time::Instant> = None;
        let mut backoff = Duration::from_millis(20);
        let mut benched = self.transport.benched_events();
        loop {
            if self.stream.is_none() && !self.entries.is_empty() && reopen_at.is_none() {
                match self.open().await {
                    Ok(()) => backoff = Duration::from_millis(20),
                    Err(why) => {
                        tracing::debug!(%why, "watch stream not opened; retrying");
                        reopen_at = Some(tokio::time::Instant::now() + backoff);
                        backoff = (backoff * 2).min(Duration::from_secs(1));
                    }
                }
            }
            let cmd = tokio::select! {
                c = rx.recv() => match c { Some(c) => c, None => break },
                _ = async { tokio::time::sleep_until(reopen_at.unwrap_or_else(tokio::time::Instant::now)).await }, if reopen_at.is_some() => {
                    reopen_at = None;
                    continue;
                }
                _ = closed.cancelled() => break,
                r = benched.changed() => {
                    if r.is_err() { break; }
                    // A request or the keep-alive found our stream's member failing:
                    // move the stream now rather than when HTTP/2 keep-alive notices.
                    if let Some(s) = &self.stream {
                        if self.transport.is_benched(s.member) && self.transport.members_len() > 1 {
                            tracing::debug!("the watch stream's member was benched; moving the stream");
                            self.drop_stream();
                        }
                    }
                    continue;
                }
            };
            match cmd {
                Cmd::Add { id, key, start_rev, sink } => {
                    if let Some(s) = self.stream.as_mut() {
                        if !send(&mut s.sender, &self.transport, s.member, key.clone(), create_opts(id, start_rev)).await {
                            self.drop_stream();
                        }
                    }
                    self.entries.insert(id, Entry { key, next_rev: start_rev, sink });
                    self.active.store(self.entries.len() as i64, Ordering::Relaxed);
                }
                Cmd::Cancel(id) => {
                    if self.entries.remove(&id).is_some() {
                        self.active.store(self.entries.len() as i64, Ordering::Relaxed);
                        if let Some(s) = self.stream.as_mut() {
                            let rt = self.transport.request_timeout;
                            if !matches!(tokio::time::timeout(rt, s.sender.cancel(id)).await, Ok(Ok(()))) {
                                self.drop_stream();
                            }
                        }
                    }
                }
                Cmd::Resp { gen, resp } => {
                    if self.stream.as_ref().map(|s| s.gen) == Some(gen) {
                        self.route(resp);
                    }
                }
                Cmd::Ended { gen, member, why } => {
                    if self.stream.as_ref().map(|s| s.gen) == Some(gen) {
                        tracing::debug!(%why, "watch stream ended; re-creating it and resuming every watch");
                        self.transport.fail(member);
                        self.drop_stream();
                        reopen_at = Some(tokio::time::Instant::now() + Duration::from_millis(10));
                    }
                }
            }
        }
        self.drop_stream();
    }

    fn drop_stream(&mut self) {
        if let Some(s) = self.stream.take() {
            s.reader.abort();
        }
    }

    /// Open a stream on a healthy member and (re-)create every watch on it.
    async fn open(&mut self) -> Result<(), String> {
        let rt = self.transport.request_timeout;
        let (member, client) = self.transport.stream_client().await.map_err(|e| e.to_string())?;
        let mut ids: Vec<i64> = self.entries.keys().copied().collect();
        ids.sort_unstable();
        let first = ids[0];
        let e = &self.entries[&first];
        let mut wc = client.watch_client();
        let stream = match tokio::time::timeout(rt, wc.watch(e.key.clone(), Some(create_opts(first, e.next_rev)))).await {
            Ok(Ok(s)) => s,
            Ok(Err(err)) => {
                self.transport.fail(member);
                return Err(err.to_string());
            }
            Err(_) => {
                self.transport.fail(member);
                return Err("watch stream not opened within the request timeout".into());
            }
        };
        self.gen += 1;
        self.streams_opened.fetch_add(1, Ordering::Relaxed);
        let gen = self.gen;
        let (mut sender, mut responses) = stream.split();
        let tx = self.tx.clone();
        let reader = tokio::spawn(async move {
            let why = loop {
                match responses.message().await {
                    Ok(Some(resp)) => match tx.upgrade() {
                        Some(tx) => {
                            if tx.send(Cmd::Resp { gen, resp }).is_err() {
                                return;
                            }
                        }
                        None => return,
                    },
                    Ok(None) => break "closed by etcd".to_string(),
                    Err(e) => break e.to_string(),
                }
            };
            if let Some(tx) = tx.upgrade() {
                let _ = tx.send(Cmd::Ended { gen, member, why });
            }
        });
        for id in ids.into_iter().skip(1) {
            let Some(e) = self.entries.get(&id) else { continue };
            let (key, rev) = (e.key.clone(), e.next_rev);
            if !send(&mut sender, &self.transport, member, key, create_opts(id, rev)).await {
                reader.abort();
                self.transport.fail(member);
                return Err("watch stream stalled while re-creating watches".into());
            }
        }
        self.stream = Some(Stream { gen, member, sender, reader });
        Ok(())
    }

    fn route(&mut self, resp: WatchResponse) {
        let id = resp.watch_id();
        let Some(entry) = self.entries.get_mut(&id) else { return };
        let header_rev = resp.header().map(|h| h.revision()).unwrap_or(0);
        if resp.created() && !resp.canceled() {
            if entry.next_rev == 0 {
                entry.next_rev = header_rev + 1;
            }
            (entry.sink)(WatchEvent::Created { rev: header_rev });
        }
        for ev in resp.events() {
            let Some(kv) = ev.kv() else { continue };
            entry.next_rev = entry.next_rev.max(kv.mod_revision() + 1);
            if ev.event_type() == EventType::Delete && kv.key() == entry.key.as_slice() {
                (entry.sink)(WatchEvent::Deleted { rev: kv.mod_revision() });
            }
        }
        if resp.canceled() || resp.compact_revision() > 0 {
            tracing::debug!(id, reason = resp.cancel_reason(), compact = resp.compact_revision(), "watch cancelled by etcd");
            if let Some(e) = self.entries.remove(&id) {
                self.active.store(self.entries.len() as i64, Ordering::Relaxed);
                (e.sink)(WatchEvent::Reset);
            }
        }
    }
}

/// Send one create request, bounded by the request timeout. On failure the
/// stream is considered broken (the caller drops it; the reader reports the end).
async fn send(
    sender: &mut etcd_client::WatchRequestSender,
    transport: &Transport,
    member: usize,
    key: Vec<u8>,
    opts: WatchOptions,
) -> bool {
    match tokio::time::timeout(transport.request_timeout, sender.watch(key, Some(opts))).await {
        Ok(Ok(())) => true,
        _ => {
            transport.fail(member);
            false
        }
    }
}
