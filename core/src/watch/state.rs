//! The watch hub's bookkeeping, apart from any stream: which keys are
//! watched, by whom, from which revision each watch resumes after a stream
//! breaks, and what each response of etcd means for the owners. Pure, so the
//! resume and compaction rules are tested without etcd.

use crate::poison::Locked;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::{Sink, WatchEvent, LINGER, MAX_IDLE};

/// What the routing needs of one etcd watch response.
pub(super) trait Response {
    fn watch_id(&self) -> i64;
    fn created(&self) -> bool;
    fn canceled(&self) -> bool;
    fn cancel_reason(&self) -> &str;
    fn compact_revision(&self) -> i64;
    fn header_revision(&self) -> i64;
    /// (is a delete, key, mod revision) of each event.
    fn events(&self) -> Vec<(bool, &[u8], i64)>;
}

/// The first of our watch ids: above any id a server numbering a stream's
/// watches itself (from 0) gives, so the two are told apart.
pub(super) const OUR_IDS: i64 = 1 << 40;

/// One etcd watch (one key) and the owners subscribed to it.
pub(super) struct Entry {
    /// The etcd watch id.
    pub(super) wid: i64,
    /// The revision etcd created the watch at: every delete after it is seen.
    pub(super) created: Option<i64>,
    /// The newest delete of the key the watch saw (0: none).
    pub(super) last_del: i64,
    /// Where a re-created watch starts: after the last event seen (0 until
    /// etcd said where a watch "from now" started).
    pub(super) next_rev: i64,
    /// The stream generation its create request was sent on (0: none yet).
    pub(super) sent_gen: u64,
    /// Owners: subscription id -> (revision of the owner's last read, sink).
    pub(super) subs: HashMap<i64, (i64, Sink)>,
    /// When the last owner left (the watch lingers for reuse).
    pub(super) idle_since: Option<Instant>,
}

/// What owners, the stream's reader and the hub's task share. Owners
/// subscribe and leave under the lock without waking any task (an etcd watch
/// that already runs needs no request), and the reader hands each event to
/// its owners directly: one task hop less on every handoff.
pub(super) struct State {
    /// key -> its watch.
    pub(super) entries: HashMap<Vec<u8>, Entry>,
    /// etcd watch id -> key.
    pub(super) by_wid: HashMap<i64, Vec<u8>>,
    /// subscription id -> key.
    pub(super) sub_key: HashMap<i64, Vec<u8>>,
    /// Keys whose watch went idle, oldest first (stale items are skipped).
    pub(super) idle: VecDeque<(Instant, Vec<u8>)>,
    pub(super) idle_count: usize,
    pub(super) next_wid: i64,
    pub(super) next_sub: i64,
    /// The generation of the stream whose events are current (0: none).
    pub(super) gen: u64,
    /// Our watch ids in the order their create requests went out on the
    /// current stream. etcd >= 3.4 takes the id we choose; etcd's gRPC proxy
    /// (and etcd 3.3) ignores it and numbers the stream's watches itself, 0,
    /// 1, ... in the order it reads the creates (while it may answer them
    /// out of order: a watch that joins one the proxy already runs is
    /// answered at once, a new one when etcd answers). Our ids start at
    /// [`OUR_IDS`], so an id below it is the server's number: the index here.
    pub(super) sent_order: Vec<i64>,
    /// Our watch id -> its index in `sent_order`.
    pub(super) sent_index: HashMap<i64, i64>,
    /// Whether the server of the current stream numbers watches itself
    /// (`None` until it answered a create).
    pub(super) numbered: Option<bool>,
    /// Our ids of watches swept before we knew the server's id for them:
    /// cancelled when their create is answered.
    pub(super) orphans: std::collections::HashSet<i64>,
}

impl State {
    pub(super) fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
        m.locked()
    }
}

impl Default for State {
    fn default() -> State {
        State {
            entries: HashMap::new(),
            by_wid: HashMap::new(),
            sub_key: HashMap::new(),
            idle: VecDeque::new(),
            idle_count: 0,
            next_wid: OUR_IDS,
            next_sub: 1,
            gen: 0,
            sent_order: Vec::new(),
            sent_index: HashMap::new(),
            numbered: None,
            orphans: Default::default(),
        }
    }
}

impl State {
    /// Subscribe `sink` to deletes of `key` after revision `after` (see
    /// [`super::WatchHub::watch`]): the subscription id, and the new etcd
    /// watch id to create when the key had no watch yet. A watch that
    /// already runs tells the sink at once where it starts and replays the
    /// key's newest delete if it came after `after`.
    pub(super) fn subscribe(&mut self, key: Vec<u8>, after: i64, sink: Sink) -> (i64, Option<i64>) {
        let after = after.max(0);
        let sub = self.next_sub;
        self.next_sub += 1;
        let mut create = None;
        if !self.entries.contains_key(&key) {
            let wid = self.next_wid;
            self.next_wid += 1;
            self.by_wid.insert(wid, key.clone());
            self.entries.insert(
                key.clone(),
                Entry {
                    wid,
                    created: None,
                    last_del: 0,
                    next_rev: 0,
                    sent_gen: 0,
                    subs: HashMap::new(),
                    idle_since: None,
                },
            );
            create = Some(wid);
        }
        let Some(e) = self.entries.get_mut(&key) else {
            unreachable!()
        };
        if e.idle_since.take().is_some() {
            self.idle_count -= 1;
        }
        if let Some(c) = e.created {
            sink(WatchEvent::Created { rev: c.max(after) });
            if e.last_del > after {
                sink(WatchEvent::Deleted { rev: e.last_del });
            }
        }
        e.subs.insert(sub, (after, sink));
        self.sub_key.insert(sub, key);
        (sub, create)
    }

    /// End subscription `id` (idempotent). The key's watch lingers; true when
    /// too many linger and a sweep is due now.
    pub(super) fn unsubscribe(&mut self, id: i64, now: Instant) -> bool {
        let Some(key) = self.sub_key.remove(&id) else {
            return false;
        };
        let Some(e) = self.entries.get_mut(&key) else {
            return false;
        };
        e.subs.remove(&id);
        if e.subs.is_empty() && e.idle_since.is_none() {
            e.idle_since = Some(now);
            self.idle.push_back((now, key));
            self.idle_count += 1;
            return self.idle_count == MAX_IDLE + 1;
        }
        false
    }

    /// See [`super::WatchHub::deleted_after`].
    pub(super) fn deleted_after(&self, key: &[u8], rev: i64) -> Option<bool> {
        let e = self.entries.get(key)?;
        if e.last_del > rev {
            return Some(true);
        }
        match e.created {
            Some(c) if c <= rev => Some(false),
            _ => None,
        }
    }

    /// Every watch to (re-)create on a new stream of generation `gen`, as
    /// (watch id, key, start revision), oldest watch first: each resumes
    /// after the last event it saw, so no delete is missed or repeated.
    pub(super) fn resume(&mut self, gen: u64) -> Vec<(i64, Vec<u8>, i64)> {
        let mut all: Vec<(i64, Vec<u8>, i64)> = self
            .entries
            .iter_mut()
            .map(|(k, e)| {
                e.sent_gen = gen;
                (e.wid, k.clone(), e.next_rev)
            })
            .collect();
        all.sort_unstable_by_key(|(wid, _, _)| *wid);
        self.sent_order.clear();
        self.sent_index.clear();
        self.numbered = None;
        self.orphans.clear();
        for (wid, _, _) in &all {
            self.sent(*wid);
        }
        all
    }

    /// The create request of watch `wid` is being sent on the current stream.
    pub(super) fn sent(&mut self, wid: i64) {
        self.sent_index.insert(wid, self.sent_order.len() as i64);
        self.sent_order.push(wid);
    }

    /// Which of our watches a response for the server's watch `sid` is for
    /// (`None`: none we know), and, when it answers the create of a watch
    /// swept meanwhile, that it must be cancelled.
    fn ours(&mut self, sid: i64, created: bool) -> (Option<i64>, bool) {
        let wid = if sid >= OUR_IDS {
            Some(sid)
        } else if sid >= 0 {
            self.sent_order.get(sid as usize).copied()
        } else {
            None
        };
        if created && sid >= 0 {
            self.numbered = Some(sid < OUR_IDS);
        }
        let orphan = created && wid.is_some_and(|w| self.orphans.remove(&w));
        (wid, orphan)
    }

    /// The server's id of our watch `wid` on the current stream, once known.
    fn server_id(&self, wid: i64) -> Option<i64> {
        match self.numbered? {
            false => Some(wid),
            true => self.sent_index.get(&wid).copied(),
        }
    }

    /// Drop the watches that lingered past [`LINGER`] with no owner, and the
    /// oldest idle ones beyond [`MAX_IDLE`]; the server's watch ids to cancel.
    pub(super) fn sweep(&mut self, now: Instant) -> Vec<i64> {
        let mut gone = Vec::new();
        while let Some((since, key)) = self.idle.front().cloned() {
            let current = self
                .entries
                .get(&key)
                .is_some_and(|e| e.idle_since == Some(since) && e.subs.is_empty());
            if !current {
                self.idle.pop_front();
                continue;
            }
            if since + LINGER > now && self.idle_count <= MAX_IDLE {
                break;
            }
            self.idle.pop_front();
            self.idle_count -= 1;
            if let Some(e) = self.entries.remove(&key) {
                self.by_wid.remove(&e.wid);
                if e.sent_gen != 0 {
                    match self.server_id(e.wid) {
                        Some(sid) => gone.push(sid),
                        // Not created yet: cancelled once the server answers.
                        None => {
                            self.orphans.insert(e.wid);
                        }
                    }
                }
            }
        }
        gone
    }
}

/// Hand one response of the stream to the owners of its watch. Returns the
/// server's id of a watch to cancel now (one swept before it was created).
pub(super) fn route(
    st: &mut State,
    resp: &impl Response,
    active: &AtomicI64,
    etcd_watches: &AtomicI64,
) -> Option<i64> {
    let sid = resp.watch_id();
    let (wid, orphan) = st.ours(sid, resp.created());
    if orphan {
        return Some(sid);
    }
    let wid = wid?;
    let key = st.by_wid.get(&wid)?;
    let entry = st.entries.get_mut(key)?;
    let header_rev = resp.header_revision();
    if resp.created() && !resp.canceled() && entry.created.is_none() {
        // First creation (a re-created watch resumes from `next_rev`: no gap,
        // nothing to tell its owners).
        if entry.next_rev == 0 {
            entry.next_rev = header_rev + 1;
        }
        entry.created = Some(header_rev);
        for (after, sink) in entry.subs.values() {
            sink(WatchEvent::Created {
                rev: header_rev.max(*after),
            });
        }
    }
    for (deleted, ev_key, mod_rev) in resp.events() {
        entry.next_rev = entry.next_rev.max(mod_rev + 1);
        if deleted && ev_key == key.as_slice() {
            let rev = mod_rev;
            entry.last_del = entry.last_del.max(rev);
            for (after, sink) in entry.subs.values() {
                if rev > *after {
                    sink(WatchEvent::Deleted { rev });
                }
            }
        }
    }
    if resp.canceled() || resp.compact_revision() > 0 {
        tracing::debug!(
            wid,
            reason = resp.cancel_reason(),
            compact = resp.compact_revision(),
            "watch cancelled by etcd"
        );
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
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Default)]
    struct Resp {
        wid: i64,
        created: bool,
        canceled: bool,
        compact: i64,
        rev: i64,
        events: Vec<(bool, Vec<u8>, i64)>,
    }

    impl Response for Resp {
        fn watch_id(&self) -> i64 {
            self.wid
        }
        fn created(&self) -> bool {
            self.created
        }
        fn canceled(&self) -> bool {
            self.canceled
        }
        fn cancel_reason(&self) -> &str {
            ""
        }
        fn compact_revision(&self) -> i64 {
            self.compact
        }
        fn header_revision(&self) -> i64 {
            self.rev
        }
        fn events(&self) -> Vec<(bool, &[u8], i64)> {
            self.events
                .iter()
                .map(|(d, k, r)| (*d, k.as_slice(), *r))
                .collect()
        }
    }

    type Seen = Arc<Mutex<Vec<WatchEvent>>>;

    fn sink() -> (Sink, Seen) {
        let seen: Seen = Default::default();
        let s = seen.clone();
        (Arc::new(move |ev| s.lock().unwrap().push(ev)), seen)
    }

    fn counters() -> (AtomicI64, AtomicI64) {
        (AtomicI64::new(0), AtomicI64::new(0))
    }

    fn del(key: &str, rev: i64) -> (bool, Vec<u8>, i64) {
        (true, key.as_bytes().to_vec(), rev)
    }

    #[test]
    fn a_watch_resumes_after_the_last_event_it_saw() {
        let mut st = State::default();
        let (a, c) = counters();
        let (s, seen) = sink();
        let (_, wid) = st.subscribe(b"l/k".to_vec(), 40, s);
        let wid = wid.expect("a new key gets a new watch");
        // Created "now" at revision 50: the owner read at 40 is told to close the gap.
        route(
            &mut st,
            &Resp {
                wid,
                created: true,
                rev: 50,
                ..Default::default()
            },
            &a,
            &c,
        );
        assert_eq!(st.resume(1), vec![(wid, b"l/k".to_vec(), 51)]);
        route(
            &mut st,
            &Resp {
                wid,
                created: true,
                rev: 52,
                ..Default::default()
            },
            &a,
            &c,
        );
        // Events of other keys under the watch still advance its resume point.
        route(
            &mut st,
            &Resp {
                wid,
                rev: 60,
                events: vec![(false, b"l/k".to_vec(), 57), del("l/k", 58)],
                ..Default::default()
            },
            &a,
            &c,
        );
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                WatchEvent::Created { rev: 50 },
                WatchEvent::Deleted { rev: 58 }
            ]
        );
        // The stream breaks: the watch is re-created from 59, so 58 is not repeated
        // and nothing after it is missed; its creation is no news to the owner.
        assert_eq!(st.resume(2), vec![(wid, b"l/k".to_vec(), 59)]);
        route(
            &mut st,
            &Resp {
                wid,
                created: true,
                rev: 70,
                ..Default::default()
            },
            &a,
            &c,
        );
        assert_eq!(seen.lock().unwrap().len(), 2);
        assert_eq!(st.deleted_after(b"l/k", 57), Some(true));
        assert_eq!(
            st.deleted_after(b"l/k", 58),
            Some(false),
            "covered since 50, no delete after 58"
        );
        assert_eq!(st.deleted_after(b"l/k", 49), Some(true));
        assert_eq!(st.deleted_after(b"l/other", 1), None, "no watch covers it");
    }

    #[test]
    fn a_compacted_start_revision_resets_every_owner_and_drops_the_watch() {
        let mut st = State::default();
        let (a, c) = counters();
        let (s1, seen1) = sink();
        let (s2, seen2) = sink();
        let (sub1, wid) = st.subscribe(b"l/k".to_vec(), 10, s1);
        let wid = wid.unwrap();
        let (_, again) = st.subscribe(b"l/k".to_vec(), 12, s2);
        assert_eq!(again, None, "one etcd watch per key");
        route(
            &mut st,
            &Resp {
                wid,
                created: true,
                rev: 20,
                ..Default::default()
            },
            &a,
            &c,
        );
        // The stream was re-created from a revision etcd has compacted.
        route(
            &mut st,
            &Resp {
                wid,
                canceled: true,
                compact: 30,
                rev: 35,
                ..Default::default()
            },
            &a,
            &c,
        );
        assert_eq!(seen1.lock().unwrap().last(), Some(&WatchEvent::Reset));
        assert_eq!(seen2.lock().unwrap().last(), Some(&WatchEvent::Reset));
        assert!(st.entries.is_empty() && st.sub_key.is_empty() && st.by_wid.is_empty());
        assert_eq!(
            (a.load(Ordering::Relaxed), c.load(Ordering::Relaxed)),
            (0, 0)
        );
        assert!(
            st.resume(3).is_empty(),
            "nothing to resume: the owners re-read and watch again"
        );
        assert!(
            !st.unsubscribe(sub1, Instant::now()),
            "ending a reset subscription is a no-op"
        );
        assert_eq!(st.deleted_after(b"l/k", 25), None);
    }

    #[test]
    fn a_shared_watch_replays_the_newest_delete_after_the_owners_read() {
        let mut st = State::default();
        let (a, c) = counters();
        let (s1, _) = sink();
        let (sub1, wid) = st.subscribe(b"l/k".to_vec(), 5, s1);
        let wid = wid.unwrap();
        route(
            &mut st,
            &Resp {
                wid,
                created: true,
                rev: 8,
                events: vec![],
                ..Default::default()
            },
            &a,
            &c,
        );
        route(
            &mut st,
            &Resp {
                wid,
                rev: 9,
                events: vec![del("l/k", 9)],
                ..Default::default()
            },
            &a,
            &c,
        );
        // A second owner whose read (7) predates that delete learns of it at once.
        let (s2, seen2) = sink();
        st.subscribe(b"l/k".to_vec(), 7, s2);
        assert_eq!(
            *seen2.lock().unwrap(),
            vec![
                WatchEvent::Created { rev: 8 },
                WatchEvent::Deleted { rev: 9 }
            ]
        );
        // One whose read already saw it is told nothing old.
        let (s3, seen3) = sink();
        st.subscribe(b"l/k".to_vec(), 9, s3);
        assert_eq!(*seen3.lock().unwrap(), vec![WatchEvent::Created { rev: 9 }]);
        // Owners leave; the watch lingers, then is swept.
        let t = Instant::now();
        for sub in st.sub_key.keys().copied().collect::<Vec<_>>() {
            st.unsubscribe(sub, t);
        }
        assert!(!st.unsubscribe(sub1, t));
        assert!(st.sweep(t).is_empty(), "lingers for reuse");
        st.resume(1); // sent on a stream: sweeping it must cancel it in etcd
        route(
            &mut st,
            &Resp {
                wid,
                created: true,
                rev: 10,
                ..Default::default()
            },
            &a,
            &c,
        );
        assert_eq!(st.sweep(t + LINGER), vec![wid]);
        assert!(st.entries.is_empty());
    }

    /// etcd's gRPC proxy ignores the ids we choose and numbers the watches of
    /// a stream itself (0, 1, ...) in the order it reads the creates, but may
    /// answer them out of order: every response is routed by that number,
    /// and a sweep cancels the proxy's id.
    #[test]
    fn watches_numbered_by_the_server_are_routed_by_create_order() {
        let mut st = State::default();
        let (a, c) = counters();
        let (s1, seen1) = sink();
        let (s2, seen2) = sink();
        let (sub1, w1) = st.subscribe(b"l/a".to_vec(), 5, s1);
        let (_, w2) = st.subscribe(b"l/b".to_vec(), 5, s2);
        let (w1, w2) = (w1.unwrap(), w2.unwrap());
        assert_eq!(
            st.resume(1),
            vec![(w1, b"l/a".to_vec(), 0), (w2, b"l/b".to_vec(), 0)]
        );
        // The proxy calls them 0 and 1, and answers the second create first.
        route(
            &mut st,
            &Resp {
                wid: 1,
                created: true,
                rev: 8,
                ..Default::default()
            },
            &a,
            &c,
        );
        route(
            &mut st,
            &Resp {
                wid: 0,
                created: true,
                rev: 9,
                ..Default::default()
            },
            &a,
            &c,
        );
        route(
            &mut st,
            &Resp {
                wid: 1,
                rev: 10,
                events: vec![del("l/b", 10)],
                ..Default::default()
            },
            &a,
            &c,
        );
        assert_eq!(*seen1.lock().unwrap(), vec![WatchEvent::Created { rev: 9 }]);
        assert_eq!(
            *seen2.lock().unwrap(),
            vec![
                WatchEvent::Created { rev: 8 },
                WatchEvent::Deleted { rev: 10 }
            ]
        );
        // A response for an id the server never gave us is nobody's.
        route(
            &mut st,
            &Resp {
                wid: 7,
                rev: 11,
                events: vec![del("l/a", 11)],
                ..Default::default()
            },
            &a,
            &c,
        );
        assert_eq!(seen1.lock().unwrap().len(), 1);
        // Swept: the proxy's id is cancelled.
        let t = Instant::now();
        st.unsubscribe(sub1, t);
        assert_eq!(st.sweep(t + LINGER), vec![0]);
        // A member that takes our ids is told ours.
        let mut st = State::default();
        let (s3, _) = sink();
        let (sub3, w3) = st.subscribe(b"l/c".to_vec(), 5, s3);
        let w3 = w3.unwrap();
        st.resume(1);
        st.unsubscribe(sub3, t);
        assert!(
            st.sweep(t + LINGER).is_empty(),
            "not answered yet: no id to cancel"
        );
        assert_eq!(
            route(
                &mut st,
                &Resp {
                    wid: w3,
                    created: true,
                    rev: 12,
                    ..Default::default()
                },
                &a,
                &c
            ),
            Some(w3),
            "cancelled once answered"
        );
    }
}
