//! The hub's task: one watch stream on a healthy member, (re-)created with
//! every watch resumed after a failure, idle watches swept, deferred owners
//! started.

use crate::poison::Locked;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{EventType, WatchFilterType, WatchOptions, WatchResponse};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::state::{route, Response, State};
use super::{Cmd, Deferred, HELD_WATCH_BATCH, LINGER};
use crate::transport::Transport;

impl Response for WatchResponse {
    fn watch_id(&self) -> i64 {
        WatchResponse::watch_id(self)
    }
    fn created(&self) -> bool {
        WatchResponse::created(self)
    }
    fn canceled(&self) -> bool {
        WatchResponse::canceled(self)
    }
    fn cancel_reason(&self) -> &str {
        WatchResponse::cancel_reason(self)
    }
    fn compact_revision(&self) -> i64 {
        WatchResponse::compact_revision(self)
    }
    fn header_revision(&self) -> i64 {
        self.header().map(|h| h.revision()).unwrap_or(0)
    }
    fn events(&self) -> Vec<(bool, &[u8], i64)> {
        WatchResponse::events(self)
            .iter()
            .filter_map(|ev| {
                ev.kv().map(|kv| {
                    (
                        ev.event_type() == EventType::Delete,
                        kv.key(),
                        kv.mod_revision(),
                    )
                })
            })
            .collect()
    }
}

pub(super) struct Stream {
    gen: u64,
    member: usize,
    sender: etcd_client::WatchRequestSender,
    reader: tokio::task::JoinHandle<()>,
}

pub(super) struct Task {
    pub(super) deferred: Arc<Mutex<Deferred>>,
    pub(super) transport: Arc<Transport>,
    pub(super) tx: mpsc::WeakUnboundedSender<Cmd>,
    pub(super) state: Arc<Mutex<State>>,
    pub(super) stream: Option<Stream>,
    pub(super) gen: u64,
    pub(super) streams_opened: Arc<AtomicU64>,
    pub(super) active: Arc<AtomicI64>,
    pub(super) etcd_watches: Arc<AtomicI64>,
}

fn create_opts(id: i64, start_rev: i64) -> WatchOptions {
    WatchOptions::new()
        .with_watch_id(id)
        .with_start_revision(start_rev)
        .with_filters([WatchFilterType::NoPut])
}

impl Task {
    pub(super) async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Cmd>,
        closed: CancellationToken,
    ) {
        let mut reopen_at: Option<tokio::time::Instant> = None;
        // When the front of the deferred list is due.
        let mut later_at: Option<tokio::time::Instant> = None;
        let mut backoff = Duration::from_millis(20);
        let mut benched = self.transport.benched_events();
        // Idle watches are swept at this pace (each lingers from LINGER to LINGER * 3 / 2).
        let mut sweep = tokio::time::interval(LINGER / 2);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if self.stream.is_none()
                && reopen_at.is_none()
                && !State::lock(&self.state).entries.is_empty()
            {
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
                _ = sweep.tick() => Cmd::Sweep,
                _ = async { tokio::time::sleep_until(later_at.unwrap_or_else(tokio::time::Instant::now)).await }, if later_at.is_some() => Cmd::Later,
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
                Cmd::Create(wid) => {
                    let Some(s) = self.stream.as_mut() else {
                        continue;
                    };
                    let req = {
                        let mut st = State::lock(&self.state);
                        let st = &mut *st;
                        match st.by_wid.get(&wid).and_then(|k| st.entries.get_mut(k)) {
                            Some(e) if e.sent_gen != s.gen => {
                                e.sent_gen = s.gen;
                                let key = st.by_wid[&wid].clone();
                                let rev = e.next_rev;
                                st.sent(wid);
                                Some((key, rev))
                            }
                            _ => None,
                        }
                    };
                    if let Some((key, rev)) = req {
                        if !send(
                            &mut s.sender,
                            &self.transport,
                            s.member,
                            key,
                            create_opts(wid, rev),
                        )
                        .await
                        {
                            self.drop_stream();
                        }
                    }
                }
                Cmd::Sweep => self.sweep().await,
                Cmd::Cancel { gen, sid } => {
                    if let Some(s) = self.stream.as_mut().filter(|s| s.gen == gen) {
                        let rt = self.transport.request_timeout;
                        if !matches!(
                            tokio::time::timeout(rt, s.sender.cancel(sid)).await,
                            Ok(Ok(()))
                        ) {
                            self.drop_stream();
                        }
                    }
                }
                Cmd::Later => later_at = self.run_deferred(),
                Cmd::Ended { gen, member, why } => {
                    if self.stream.as_ref().map(|s| s.gen) == Some(gen) {
                        tracing::info!(%why, "watch stream ended; re-creating it and resuming every watch");
                        self.transport.fail(member);
                        self.drop_stream();
                        reopen_at = Some(tokio::time::Instant::now() + Duration::from_millis(10));
                    }
                }
            }
        }
        self.drop_stream();
    }

    /// Start the deferred owners whose delay is over; returns when the next is due.
    fn run_deferred(&mut self) -> Option<tokio::time::Instant> {
        let now = Instant::now();
        let mut due = Vec::new();
        let next = {
            let mut d = self.deferred.locked();
            while d.list.front().is_some_and(|(at, _)| *at <= now) {
                if let Some((_, who)) = d.list.pop_front() {
                    due.push(who);
                }
            }
            match d.list.front() {
                Some((at, _)) => Some(tokio::time::Instant::from_std(*at + HELD_WATCH_BATCH)),
                None => {
                    d.armed = false;
                    None
                }
            }
        };
        for who in due {
            if let Some(w) = who.upgrade() {
                w.start();
            }
        }
        next
    }

    /// Cancel the watches that lingered past [`LINGER`] with no owner, and the
    /// oldest idle ones beyond [`MAX_IDLE`].
    async fn sweep(&mut self) {
        let gone = {
            let mut st = State::lock(&self.state);
            let gone = st.sweep(Instant::now());
            self.etcd_watches
                .store(st.entries.len() as i64, Ordering::Relaxed);
            gone
        };
        let rt = self.transport.request_timeout;
        for sid in gone {
            let Some(s) = self.stream.as_mut() else { break };
            if !matches!(
                tokio::time::timeout(rt, s.sender.cancel(sid)).await,
                Ok(Ok(()))
            ) {
                self.drop_stream();
            }
        }
    }

    fn drop_stream(&mut self) {
        if let Some(s) = self.stream.take() {
            s.reader.abort();
            State::lock(&self.state).gen = 0;
        }
    }

    /// Open a stream on a healthy member and (re-)create every watch on it.
    async fn open(&mut self) -> Result<(), String> {
        let rt = self.transport.request_timeout;
        let pinned = self
            .transport
            .stream_door()
            .await
            .map_err(|e| e.to_string())?;
        let member = pinned.member;
        let gen = self.gen + 1;
        let all = State::lock(&self.state).resume(gen);
        if all.is_empty() {
            return Ok(());
        }
        let (first, key, rev) = all[0].clone();
        let mut wc = pinned.watch_client();
        let stream =
            match tokio::time::timeout(rt, wc.watch(key, Some(create_opts(first, rev)))).await {
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
        self.gen = gen;
        self.streams_opened.fetch_add(1, Ordering::Relaxed);
        State::lock(&self.state).gen = gen;
        let (mut sender, mut responses) = stream.split();
        let tx = self.tx.clone();
        let state = self.state.clone();
        let (active, etcd_watches) = (self.active.clone(), self.etcd_watches.clone());
        let reader = tokio::spawn(async move {
            let why = loop {
                match responses.message().await {
                    Ok(Some(resp)) => {
                        let mut st = State::lock(&state);
                        if st.gen != gen {
                            return;
                        }
                        if let Some(sid) = route(&mut st, &resp, &active, &etcd_watches) {
                            if let Some(tx) = tx.upgrade() {
                                let _ = tx.send(Cmd::Cancel { gen, sid });
                            }
                        }
                    }
                    Ok(None) => break "closed by etcd".to_string(),
                    Err(e) => break e.to_string(),
                }
            };
            if let Some(tx) = tx.upgrade() {
                let _ = tx.send(Cmd::Ended { gen, member, why });
            }
        });
        for (wid, key, rev) in all.into_iter().skip(1) {
            if !send(
                &mut sender,
                &self.transport,
                member,
                key,
                create_opts(wid, rev),
            )
            .await
            {
                reader.abort();
                State::lock(&self.state).gen = 0;
                self.transport.fail(member);
                return Err("watch stream stalled while re-creating watches".into());
            }
        }
        self.stream = Some(Stream {
            gen,
            member,
            sender,
            reader,
        });
        Ok(())
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
