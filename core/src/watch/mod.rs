//! One etcd watch stream per client, shared by every wait and every held key
//! (as Go's clientv3 multiplexes its watchers): a watch costs a map entry and a
//! watch id, not a gRPC stream and a task. (A stream per waiter makes 2,000
//! waiters in one process fail with `Unavailable`.)
//!
//! Creates are pipelined; a server answers them in the order sent, which
//! names each watch: etcd >= 3.4 takes the id we choose, while etcd's gRPC
//! proxy numbers watches itself, so ids are translated per stream. A watch starts
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
//!
//! Layer: beside the session, above the transport. It owns the client's
//! one watch stream (opened on the transport's stream door) and the watches
//! on it; guards, the engine and the recipes subscribe through [`Sink`]s.
//! The one other watch stream in core, the election observer's, opens on the
//! same stream door.

use crate::poison::Locked;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::transport::Transport;

mod state;
mod stream;

use state::State;
use stream::Task;

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
    Ended {
        gen: u64,
        member: usize,
        why: String,
    },
    /// Cancel the server's watch `sid` on stream `gen` (swept before created).
    Cancel { gen: u64, sid: i64 },
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
    pub(crate) fn start(
        transport: Arc<Transport>,
        handle: &tokio::runtime::Handle,
        closed: CancellationToken,
    ) -> WatchHub {
        let (tx, rx) = mpsc::unbounded_channel();
        let streams_opened = Arc::new(AtomicU64::new(0));
        let active = Arc::new(AtomicI64::new(0));
        let etcd_watches = Arc::new(AtomicI64::new(0));
        let state = Arc::new(Mutex::new(State::default()));
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
        WatchHub {
            tx,
            deferred,
            state,
            streams_opened,
            active,
            etcd_watches,
        }
    }

    /// Watch `key` for deletes after revision `after` (the owner's last read
    /// of it). The sink's first event is `Created { rev }`: every delete after
    /// `rev` is reported, so an owner whose read was older than `rev` reads
    /// once more to close the gap (`rev == after` when the key's watch already
    /// ran: no read). A delete after `after` that the shared watch already
    /// saw is replayed at once. A new watch starts "now" and is registered
    /// *synced* in etcd; one that starts at a past revision is served by
    /// etcd's 100 ms catch-up loop, whose passes hold the store's lock: a
    /// burst of them would slow every write
    /// (`two_thousand_waiters_on_one_client_are_served_in_fifo_order_on_one_watch_stream`
    /// in core/tests/engine.rs queues such a burst within its deadline). The sink may be called before this returns, on the
    /// caller's thread. Returns the id for [`WatchHub::cancel`].
    pub(crate) fn watch(&self, key: Vec<u8>, after: i64, sink: Sink) -> i64 {
        let mut st = State::lock(&self.state);
        let (sub, create) = st.subscribe(key, after, sink);
        if let Some(wid) = create {
            let _ = self.tx.send(Cmd::Create(wid));
        }
        self.active
            .store(st.sub_key.len() as i64, Ordering::Relaxed);
        self.etcd_watches
            .store(st.entries.len() as i64, Ordering::Relaxed);
        sub
    }

    /// Stop a subscription (idempotent; its sink is not called after this
    /// returns). The key's etcd watch lingers for reuse ([`LINGER`]).
    pub(crate) fn cancel(&self, id: i64) {
        let mut st = State::lock(&self.state);
        if st.unsubscribe(id, Instant::now()) {
            let _ = self.tx.send(Cmd::Sweep);
        }
        self.active
            .store(st.sub_key.len() as i64, Ordering::Relaxed);
    }

    /// Call `who.start()` on the hub's task after [`HELD_WATCH_DELAY`] (plus
    /// up to [`HELD_WATCH_BATCH`]), if it is still alive then. Costs a list
    /// entry: the hub's task is woken only when the list was empty (one
    /// timer serves the whole list).
    pub(crate) fn later(&self, who: std::sync::Weak<dyn Later>) {
        let mut d = self.deferred.locked();
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
        State::lock(&self.state).deleted_after(key, rev)
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
