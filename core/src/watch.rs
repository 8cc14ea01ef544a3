//! One etcd watch stream per client, shared by every wait and every held key
//! (as Go's clientv3 multiplexes its watchers): a watch costs a map entry and a
//! watch id, not a gRPC stream and a task. (A stream per waiter makes 2,000
//! waiters in one process fail with `Unavailable`.)
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
//!
//! One etcd watch per *key*, shared by every owner interested in that key and
//! kept for a while after the last owner leaves ([`LINGER`]): a client that
//! locks the same name again (its key is the same, `name/<lease hex>`) or waits
//! behind the same peers again reuses a watch etcd already keeps *synced*. A
//! new watch costs etcd a create and a cancel, and one created while a write
//! is in flight is left unsynced, served by a 100 ms catch-up loop: under
//! contention that made one handoff in twenty wait for the loop. Each owner
//! subscribes with the revision of its last read; the hub replays the key's
//! last delete if it came after that read, so sharing never hides a delete.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{EventType, WatchFilterType, WatchOptions, WatchResponse};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::transport::Transport;

/// What a watch reports to its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchEvent {
    /// Every delete after `rev` is reported from now on: an owner whose last
    /// read was older reads once more to close the gap.
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

/// How long an etcd watch outlives its last owner, for the next acquisition
/// (or wait) on the same key to reuse.
pub(crate) const LINGER: Duration = Duration::from_secs(10);
/// At most this many watches linger with no owner; the oldest go first.
pub(crate) const MAX_IDLE: usize = 1024;

/// How long a lock acquired with no wait is held before its key gets a
/// watch ([`WatchHub::later`]; at most [`HELD_WATCH_BATCH`] more). Most
/// holds end sooner, and a hold that ends costs its watch nothing: no
/// create, and no lingering watch that reports the client's own next
/// release back to it (about 3 % of an uncontended lock + unlock). A
/// delete of the key in this time is still reported: the watch starts "now"
/// and its owner reads the key once to close the gap.
pub(crate) const HELD_WATCH_DELAY: Duration = Duration::from_millis(50);

/// The deferred watches start in batches: the hub's task wakes this long
/// after the oldest is due and starts every one due by then, so a watch
/// starts 50 to 60 ms into its hold. Woken at each hold's own due time
/// instead, the task cost a thread wake-up per uncontended lock.
pub(crate) const HELD_WATCH_BATCH: Duration = Duration::from_millis(10);

/// Something that wants a watch a little later ([`WatchHub::later`]).
pub(crate) trait Later: Send + Sync {
    /// Called on the hub's task once the delay is over (keep it short).
    fn start(&self);
}

/// Owners waiting for [`HELD_WATCH_DELAY`] to pass, oldest first.
#[derive(Default)]
struct Deferred {
    list: VecDeque<(Instant, std::sync::Weak<dyn Later>)>,
    /// The hub's task has a timer for the list's front (no wake-up needed).
    armed: bool,
}

enum Cmd {
    /// Send the create request of a new entry's watch.
    Create(i64),
    /// Look at the deferred owners ([`WatchHub::later`]).
    Later,
    /// Cancel idle watches now (too many idle).
    Sweep,
    Ended { gen: u64, member: usize, why: String },
}

/// One etcd watch (one key) and the owners subscribed to it.
struct Entry {
    /// The etcd watch id.
    wid: i64,
    /// The revision etcd created the watch at: every delete after it is seen.
    created: Option<i64>,
    /// The newest delete of the key the watch saw (0: none).
    last_del: i64,
    /// Where a re-created watch starts: after the last event seen (0 until
    /// etcd said where a watch "from now" started).
    next_rev: i64,
    /// The stream generation its create request was sent on (0: none yet).
    sent_gen: u64,
    /// Owners: subscription id -> (revision of the owner's last read, sink).
    subs: HashMap<i64, (i64, Sink)>,
    /// When the last owner left (the watch lingers for reuse).
    idle_since: Option<Instant>,
}

/// What owners, the stream's reader and the hub's task share. Owners
/// subscribe and leave under the lock without waking any task (an etcd watch
/// that already runs needs no request), and the reader hands each event to
/// its owners directly: one task hop less on every handoff.
struct State {
    /// key -> its watch.
    entries: HashMap<Vec<u8>, Entry>,
    /// etcd watch id -> key.
    by_wid: HashMap<i64, Vec<u8>>,
    /// subscription id -> key.
    sub_key: HashMap<i64, Vec<u8>>,
    /// Keys whose watch went idle, oldest first (stale items are skipped).
    idle: VecDeque<(Instant, Vec<u8>)>,
    idle_count: usize,
    next_wid: i64,
    next_sub: i64,
    /// The generation of the stream whose events are current (0: none).
    gen: u64,
}

impl State {
    fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The client's watch multiplexer. Cheap handle; the stream lives in one task.
pub(crate) struct WatchHub {
    tx: mpsc::UnboundedSender<Cmd>,
    deferred: Arc<Mutex<Deferred>>,
    state: Arc<Mutex<State>>,
    streams_opened: Arc<AtomicU64>,
    active: Arc<AtomicI64>,
    etcd_watches: Arc<AtomicI64>,
}

impl WatchHub {
    pub(crate) fn start(transport: Arc<Transport>, handle: &tokio::runtime::Handle, closed: CancellationToken) -> WatchHub {
        let (tx, rx) = mpsc::unbounded_channel();
        let streams_opened = Arc::new(AtomicU64::new(0));
        let active = Arc::new(AtomicI64::new(0));
        let etcd_watches = Arc::new(AtomicI64::new(0));
        let state = Arc::new(Mutex::new(State {
            entries: HashMap::new(),
            by_wid: HashMap::new(),
            sub_key: HashMap::new(),
            idle: VecDeque::new(),
            idle_count: 0,
            next_wid: 1,
            next_sub: 1,
            gen: 0,
        }));
        let deferred = Arc::new(Mutex::new(Deferred::default()));
        let task = Task {
            deferred: deferred.clone(),
            transport,
            tx: tx.downgrade(),
            state: state.clone(),
            stream: None,
            gen: 0,
            streams_opened: streams_opened.clone(),
            active: active.clone(),
            etcd_watches: etcd_watches.clone(),
        };
        handle.spawn(task.run(rx, closed));
        WatchHub { tx, deferred, state, streams_opened, active, etcd_watches }
    }

    /// Watch `key` for deletes after revision `after` (the owner's last read
    /// of it). The sink's first event is `Created { rev }`: every delete after
    /// `rev` is reported, so an owner whose read was older than `rev` reads
    /// once more to close the gap (`rev == after` when the key's watch already
    /// ran: no read). A delete after `after` that the shared watch already
    /// saw is replayed at once. A new watch starts "now" and is registered
    /// *synced* in etcd; one that starts at a past revision is served by
    /// etcd's 100 ms catch-up loop, whose passes hold the store's lock, and
    /// thousands of them in a burst slowed every write (2,000 waiters took
    /// 11 s to queue). The sink may be called before this returns, on the
    /// caller's thread. Returns the id for [`WatchHub::cancel`].
    pub(crate) fn watch(&self, key: Vec<u8>, after: i64, sink: Sink) -> i64 {
        let after = after.max(0);
        let mut st = State::lock(&self.state);
        let sub = st.next_sub;
        st.next_sub += 1;
        if !st.entries.contains_key(&key) {
            let wid = st.next_wid;
            st.next_wid += 1;
            st.by_wid.insert(wid, key.clone());
            st.entries.insert(
                key.clone(),
                Entry { wid, created: None, last_del: 0, next_rev: 0, sent_gen: 0, subs: HashMap::new(), idle_since: None },
            );
            self.etcd_watches.store(st.entries.len() as i64, Ordering::Relaxed);
            let _ = self.tx.send(Cmd::Create(wid));
        }
        let st = &mut *st;
        let Some(e) = st.entries.get_mut(&key) else { unreachable!() };
        if e.idle_since.take().is_some() {
            st.idle_count -= 1;
        }
        if let Some(c) = e.created {
            // The watch already runs: deletes after `c` are all seen, and the
            // newest of them is replayed if it came after the owner's read.
            sink(WatchEvent::Created { rev: c.max(after) });
            if e.last_del > after {
                sink(WatchEvent::Deleted { rev: e.last_del });
            }
        }
        e.subs.insert(sub, (after, sink));
        st.sub_key.insert(sub, key);
        self.active.store(st.sub_key.len() as i64, Ordering::Relaxed);
        sub
    }

    /// Stop a subscription (idempotent; its sink is not called after this
    /// returns). The key's etcd watch lingers for reuse ([`LINGER`]).
    pub(crate) fn cancel(&self, id: i64) {
        let mut st = State::lock(&self.state);
        let st = &mut *st;
        let Some(key) = st.sub_key.remove(&id) else { return };
        if let Some(e) = st.entries.get_mut(&key) {
            e.subs.remove(&id);
            if e.subs.is_empty() && e.idle_since.is_none() {
                let now = Instant::now();
                e.idle_since = Some(now);
                st.idle.push_back((now, key));
                st.idle_count += 1;
                if st.idle_count == MAX_IDLE + 1 {
                    let _ = self.tx.send(Cmd::Sweep);
                }
            }
        }
        self.active.store(st.sub_key.len() as i64, Ordering::Relaxed);
    }

    /// Call `who.start()` on the hub's task after [`HELD_WATCH_DELAY`] (plus
    /// up to [`HELD_WATCH_BATCH`]), if it is still alive then. Costs a list
    /// entry: the hub's task is woken only when the list was empty (one
    /// timer serves the whole list).
    pub(crate) fn later(&self, who: std::sync::Weak<dyn Later>) {
        let mut d = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
        d.list.push_back((Instant::now() + HELD_WATCH_DELAY, who));
        if !d.armed {
            d.armed = true;
            let _ = self.tx.send(Cmd::Later);
        }
    }

    /// Whether this client's watch on `key` saw it deleted after revision
    /// `rev`: `Some(true)` if so, `Some(false)` if the watch covers every
    /// revision after `rev` and saw no delete (yet), `None` if no watch of
    /// this client covers them. No request, no subscription.
    pub(crate) fn deleted_after(&self, key: &[u8], rev: i64) -> Option<bool> {
        let st = State::lock(&self.state);
        let e = st.entries.get(key)?;
        if e.last_del > rev {
            return Some(true);
        }
        match e.created {
            Some(c) if c <= rev => Some(false),
            _ => None,
        }
    }

    /// Watch streams this client has opened so far (one, unless the stream had
    /// to be re-created after a failure).
    pub(crate) fn streams_opened(&self) -> u64 {
        self.streams_opened.load(Ordering::Relaxed)
    }

    /// Subscriptions right now (each waiter has two or three, each held lock one).
    pub(crate) fn active(&self) -> i64 {
        self.active.load(Ordering::Relaxed)
    }

    /// Watches registered in etcd right now (one per key, lingering ones included).
    pub(crate) fn etcd_watches(&self) -> i64 {
        self.etcd_watches.load(Ordering::Relaxed)
    }
}

struct Stream {
    gen: u64,
    member: usize,
    sender: etcd_client::WatchRequestSender,
    reader: tokio::task::JoinHandle<()>,
}

struct Task {
    deferred: Arc<Mutex<Deferred>>,
    transport: Arc<Transport>,
    tx: mpsc::WeakUnboundedSender<Cmd>,
    state: Arc<Mutex<State>>,
    stream: Option<Stream>,
    gen: u64,
    streams_opened: Arc<AtomicU64>,
    active: Arc<AtomicI64>,
    etcd_watches: Arc<AtomicI64>,
}

fn create_opts(id: i64, start_rev: i64) -> WatchOptions {
    WatchOptions::new().with_watch_id(id).with_start_revision(start_rev).with_filters([WatchFilterType::NoPut])
}

impl Task {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Cmd>, closed: CancellationToken) {
        let mut reopen_at: Option<tokio::time::Instant> = None;
        // When the front of the deferred list is due.
        let mut later_at: Option<tokio::time::Instant> = None;
        let mut backoff = Duration::from_millis(20);
        let mut benched = self.transport.benched_events();
        // Idle watches are swept at this pace (each lingers LINGER to 1.5 x LINGER).
        let mut sweep = tokio::time::interval(LINGER / 2);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if self.stream.is_none() && reopen_at.is_none() && !State::lock(&self.state).entries.is_empty() {
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
                    let Some(s) = self.stream.as_mut() else { continue };
                    let req = {
                        let mut st = State::lock(&self.state);
                        let st = &mut *st;
                        match st.by_wid.get(&wid).and_then(|k| st.entries.get_mut(k)) {
                            Some(e) if e.sent_gen != s.gen => {
                                e.sent_gen = s.gen;
                                Some((st.by_wid[&wid].clone(), e.next_rev))
                            }
                            _ => None,
                        }
                    };
                    if let Some((key, rev)) = req {
                        if !send(&mut s.sender, &self.transport, s.member, key, create_opts(wid, rev)).await {
                            self.drop_stream();
                        }
                    }
                }
                Cmd::Sweep => self.sweep().await,
                Cmd::Later => later_at = self.run_deferred(),
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

    /// Start the deferred owners whose delay is over; returns when the next is due.
    fn run_deferred(&mut self) -> Option<tokio::time::Instant> {
        let now = Instant::now();
        let mut due = Vec::new();
        let next = {
            let mut d = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
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
        let now = Instant::now();
        let mut gone = Vec::new();
        {
            let mut st = State::lock(&self.state);
            let st = &mut *st;
            while let Some((since, key)) = st.idle.front().cloned() {
                let current = st.entries.get(&key).is_some_and(|e| e.idle_since == Some(since) && e.subs.is_empty());
                if !current {
                    st.idle.pop_front();
                    continue;
                }
                if since + LINGER > now && st.idle_count <= MAX_IDLE {
                    break;
                }
                st.idle.pop_front();
                st.idle_count -= 1;
                if let Some(e) = st.entries.remove(&key) {
                    st.by_wid.remove(&e.wid);
                    if e.sent_gen != 0 {
                        gone.push(e.wid);
                    }
                }
            }
            self.etcd_watches.store(st.entries.len() as i64, Ordering::Relaxed);
        }
        let rt = self.transport.request_timeout;
        for wid in gone {
            let Some(s) = self.stream.as_mut() else { break };
            if !matches!(tokio::time::timeout(rt, s.sender.cancel(wid)).await, Ok(Ok(()))) {
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
        let (member, client) = self.transport.stream_client().await.map_err(|e| e.to_string())?;
        let gen = self.gen + 1;
        let mut all: Vec<(i64, Vec<u8>, i64)> = {
            let mut st = State::lock(&self.state);
            st.entries
                .iter_mut()
                .map(|(k, e)| {
                    e.sent_gen = gen;
                    (e.wid, k.clone(), e.next_rev)
                })
                .collect()
        };
        if all.is_empty() {
            return Ok(());
        }
        all.sort_unstable_by_key(|(wid, _, _)| *wid);
        let (first, key, rev) = all[0].clone();
        let mut wc = client.watch_client();
        let stream = match tokio::time::timeout(rt, wc.watch(key, Some(create_opts(first, rev)))).await {
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
                        route(&mut st, resp, &active, &etcd_watches);
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
            if !send(&mut sender, &self.transport, member, key, create_opts(wid, rev)).await {
                reader.abort();
                State::lock(&self.state).gen = 0;
                self.transport.fail(member);
                return Err("watch stream stalled while re-creating watches".into());
            }
        }
        self.stream = Some(Stream { gen, member, sender, reader });
        Ok(())
    }
}

/// Hand one response of the stream to the owners of its watch.
fn route(st: &mut State, resp: WatchResponse, active: &AtomicI64, etcd_watches: &AtomicI64) {
    let wid = resp.watch_id();
    let Some(key) = st.by_wid.get(&wid) else { return };
    let Some(entry) = st.entries.get_mut(key) else { return };
    let header_rev = resp.header().map(|h| h.revision()).unwrap_or(0);
    if resp.created() && !resp.canceled() && entry.created.is_none() {
        // First creation (a re-created watch resumes from `next_rev`: no gap,
        // nothing to tell its owners).
        if entry.next_rev == 0 {
            entry.next_rev = header_rev + 1;
        }
        entry.created = Some(header_rev);
        for (after, sink) in entry.subs.values() {
            sink(WatchEvent::Created { rev: header_rev.max(*after) });
        }
    }
    for ev in resp.events() {
        let Some(kv) = ev.kv() else { continue };
        entry.next_rev = entry.next_rev.max(kv.mod_revision() + 1);
        if ev.event_type() == EventType::Delete && kv.key() == key.as_slice() {
            let rev = kv.mod_revision();
            entry.last_del = entry.last_del.max(rev);
            for (after, sink) in entry.subs.values() {
                if rev > *after {
                    sink(WatchEvent::Deleted { rev });
                }
            }
        }
    }
    if resp.canceled() || resp.compact_revision() > 0 {
        tracing::debug!(wid, reason = resp.cancel_reason(), compact = resp.compact_revision(), "watch cancelled by etcd");
        let key = key.clone();
        st.by_wid.remove(&wid);
        if let Some(e) = st.entries.remove(&key) {
            if e.idle_since.is_some() {
                st.idle_count -= 1;
            }
            for sub in e.subs.keys() {
                st.sub_key.remove(sub);
            }
            active.store(st.sub_key.len() as i64, Ordering::Relaxed);
            etcd_watches.store(st.entries.len() as i64, Ordering::Relaxed);
            for (_, sink) in e.subs.into_values() {
                sink(WatchEvent::Reset);
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
