//! Who waits for whom, from the queues etcd holds: the one rule of who
//! holds in a queue of keys ([`holds`], which `status` and `list` show), and
//! the client-level wait-for graph whose cycles are deadlocks
//! ([`cycles`], [`cycle_through`]).
//!
//! A node is a client, named by its lease (every key a client queues is on
//! its session's lease). A wait is one queued key that does not hold: it
//! waits for the clients holding its name. A mutex's, an election's, a
//! writer's or a reader's wait needs all of them gone; a semaphore permit's
//! wait needs any one of them (a permit frees when any holder lets go). A
//! client that waits for itself only (two calls of one client on one name)
//! waits for nothing here: only the client can tell its own threads apart.
//!
//! A client can finish when every one of its waits can be served by clients
//! that can finish; the clients that cannot are blocked, and a deadlock is a
//! cycle among them (Holt's reduction of a wait-for graph with AND and OR
//! requests). A client waiting behind a cycle without being on it is
//! blocked too, but is not reported as a cycle.
//!
//! Layer: beside `names`. It reads nothing from etcd and names no type
//! above it: `records/deadlock.rs` (the API and `etcdlock deadlocks`) and
//! the engine's opt-in check (`engine/cycle.rs`) both build their queues
//! from a read of the namespace and ask it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use crate::names::KeyInfo;

/// What a key is in its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// A mutex or election key, or a read-write lock's writer.
    Exclusive,
    /// A read-write lock's reader (`-r` key).
    Reader,
    /// A semaphore permit key, with the semaphore's permit count.
    Permit(u32),
}

impl Slot {
    /// The slot of the key `key` whose value is `value`.
    pub(crate) fn of(key: &[u8], value: &[u8]) -> Slot {
        if key.ends_with(b"-r") {
            return Slot::Reader;
        }
        match KeyInfo::of(value).permits {
            Some(n) if n > 1 => Slot::Permit(n),
            _ => Slot::Exclusive,
        }
    }
}

/// Which keys of a queue (oldest first) hold now: the first exclusive key;
/// every reader with no exclusive key older than it; the oldest `n` permit
/// keys of an `n`-permit semaphore.
pub(crate) fn holds(slots: &[Slot]) -> Vec<bool> {
    let mut writer_seen = false;
    slots
        .iter()
        .enumerate()
        .map(|(older, s)| {
            let h = match s {
                Slot::Reader => !writer_seen,
                Slot::Exclusive => older == 0,
                Slot::Permit(n) => older < *n as usize,
            };
            if *s == Slot::Exclusive {
                writer_seen = true;
            }
            h
        })
        .collect()
}

/// One key of a queue, as the graph needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Member {
    /// Its lease: the client.
    pub(crate) lease: i64,
    /// Its create_revision (a holder's fencing token).
    pub(crate) rev: i64,
    pub(crate) slot: Slot,
}

/// One edge of a cycle: in queue `queue`, the key `waiter` (an index into
/// its members) waits for the key `holder`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Edge {
    pub(crate) queue: usize,
    pub(crate) waiter: usize,
    pub(crate) holder: usize,
}

/// One wait: a queued key that does not hold, and the holders it waits for
/// (other clients only).
struct Wait {
    queue: usize,
    member: usize,
    lease: i64,
    /// (holder's lease, holder's member index).
    holders: Vec<(i64, usize)>,
    /// Any one holder's leaving serves it (a permit); else all must leave.
    any: bool,
}

/// The waits of `queues` (each a name's keys, oldest first) and the leases
/// that are blocked (cannot finish).
struct Graph {
    waits: Vec<Wait>,
    blocked: HashSet<i64>,
}

impl Graph {
    fn new(queues: &[Vec<Member>]) -> Graph {
        let mut waits = Vec::new();
        for (q, members) in queues.iter().enumerate() {
            let slots: Vec<Slot> = members.iter().map(|m| m.slot).collect();
            let held = holds(&slots);
            for (i, m) in members.iter().enumerate() {
                if held[i] {
                    continue;
                }
                let holders: Vec<(i64, usize)> = members
                    .iter()
                    .enumerate()
                    .filter(|(j, h)| held[*j] && h.lease != m.lease)
                    .map(|(j, h)| (h.lease, j))
                    .collect();
                if !holders.is_empty() {
                    waits.push(Wait {
                        queue: q,
                        member: i,
                        lease: m.lease,
                        holders,
                        any: matches!(m.slot, Slot::Permit(_)),
                    });
                }
            }
        }
        let mut by_lease: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
        for (i, w) in waits.iter().enumerate() {
            by_lease.entry(w.lease).or_default().push(i);
        }
        // Holt's reduction: a client finishes when each of its waits can be
        // served by clients that finish; a client with no wait finishes.
        let mut blocked: HashSet<i64> = by_lease.keys().copied().collect();
        loop {
            let freed: Vec<i64> = blocked
                .iter()
                .copied()
                .filter(|l| {
                    by_lease[l].iter().all(|&w| {
                        let w = &waits[w];
                        let free = |(h, _): &(i64, usize)| !blocked.contains(h);
                        if w.any {
                            w.holders.iter().any(free)
                        } else {
                            w.holders.iter().all(free)
                        }
                    })
                })
                .collect();
            if freed.is_empty() {
                break;
            }
            for l in freed {
                blocked.remove(&l);
            }
        }
        Graph { waits, blocked }
    }

    /// The edges out of each blocked client: (wait, holder lease, holder
    /// member) for each blocked holder it waits for.
    fn edges(&self) -> HashMap<i64, Vec<(usize, i64, usize)>> {
        let mut out: HashMap<i64, Vec<(usize, i64, usize)>> = HashMap::new();
        for (i, w) in self.waits.iter().enumerate() {
            if !self.blocked.contains(&w.lease) {
                continue;
            }
            for &(h, m) in &w.holders {
                if self.blocked.contains(&h) {
                    out.entry(w.lease).or_default().push((i, h, m));
                }
            }
        }
        for v in out.values_mut() {
            v.sort_unstable();
        }
        out
    }

    /// The shortest path of edges from client `from` to client `to` among
    /// the blocked clients (breadth first), if any.
    fn path(
        &self,
        edges: &HashMap<i64, Vec<(usize, i64, usize)>>,
        from: i64,
        to: i64,
    ) -> Option<Vec<Edge>> {
        let mut prev: HashMap<i64, (i64, Edge)> = HashMap::new();
        let mut seen: HashSet<i64> = HashSet::from([from]);
        let mut todo = VecDeque::from([from]);
        while let Some(at) = todo.pop_front() {
            for &(w, h, m) in edges.get(&at).map(Vec::as_slice).unwrap_or(&[]) {
                let wait = &self.waits[w];
                let e = Edge {
                    queue: wait.queue,
                    waiter: wait.member,
                    holder: m,
                };
                if h == to {
                    let mut path = vec![e];
                    let mut cur = at;
                    while cur != from {
                        let (p, pe) = prev[&cur];
                        path.push(pe);
                        cur = p;
                    }
                    path.reverse();
                    return Some(path);
                }
                if seen.insert(h) {
                    prev.insert(h, (at, e));
                    todo.push_back(h);
                }
            }
        }
        None
    }
}

/// The clients reachable from `from` along `edges` (itself included).
fn reach(edges: &HashMap<i64, Vec<(usize, i64, usize)>>, from: i64) -> HashSet<i64> {
    let mut seen = HashSet::from([from]);
    let mut todo = vec![from];
    while let Some(at) = todo.pop() {
        for &(_, to, _) in edges.get(&at).map(Vec::as_slice).unwrap_or(&[]) {
            if seen.insert(to) {
                todo.push(to);
            }
        }
    }
    seen
}

/// One cycle per group of clients that wait on each other (each strongly
/// connected group of blocked clients), each the shortest cycle through
/// the group's lowest lease, edges in order (each edge's holder is the
/// next edge's waiter; the last edge's holder is the first's waiter).
/// Sorted, so two reads of the same state give the same answer.
pub(crate) fn cycles(queues: &[Vec<Member>]) -> Vec<Vec<Edge>> {
    let g = Graph::new(queues);
    let edges = g.edges();
    let mut reverse: HashMap<i64, Vec<(usize, i64, usize)>> = HashMap::new();
    for (from, out) in &edges {
        for &(w, to, m) in out {
            reverse.entry(to).or_default().push((w, *from, m));
        }
    }
    let mut done: BTreeSet<i64> = BTreeSet::new();
    let mut out = Vec::new();
    let mut starts: Vec<i64> = g.blocked.iter().copied().collect();
    starts.sort_unstable();
    for start in starts {
        if done.contains(&start) {
            continue;
        }
        if let Some(path) = g.path(&edges, start, start) {
            // The whole group: reached from `start` and reaching it.
            let fwd = reach(&edges, start);
            let back = reach(&reverse, start);
            done.extend(fwd.intersection(&back).copied());
            out.push(path);
        }
    }
    out
}

/// The cycle that the wait of member `member` of queue `queue` closes, if
/// it is on one: that wait's edge to a holder, then the way back from the
/// holder to the waiter.
pub(crate) fn cycle_through(
    queues: &[Vec<Member>],
    queue: usize,
    member: usize,
) -> Option<Vec<Edge>> {
    let g = Graph::new(queues);
    let me = queues.get(queue)?.get(member)?.lease;
    if !g.blocked.contains(&me) {
        return None;
    }
    let edges = g.edges();
    for &(w, h, m) in edges.get(&me)? {
        let wait = &g.waits[w];
        if wait.queue != queue || wait.member != member {
            continue;
        }
        if let Some(back) = g.path(&edges, h, me) {
            let mut path = vec![Edge {
                queue,
                waiter: member,
                holder: m,
            }];
            path.extend(back);
            return Some(path);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(lease: i64, rev: i64) -> Member {
        Member {
            lease,
            rev,
            slot: Slot::Exclusive,
        }
    }

    fn p(lease: i64, rev: i64, n: u32) -> Member {
        Member {
            lease,
            rev,
            slot: Slot::Permit(n),
        }
    }

    #[test]
    fn the_holding_rule_of_each_kind() {
        use Slot::*;
        assert_eq!(holds(&[Exclusive, Exclusive]), [true, false]);
        assert_eq!(
            holds(&[Reader, Reader, Exclusive, Reader]),
            [true, true, false, false]
        );
        assert_eq!(
            holds(&[Permit(2), Permit(2), Permit(2)]),
            [true, true, false]
        );
        assert_eq!(holds(&[]), Vec::<bool>::new());
    }

    #[test]
    fn two_clients_each_holding_what_the_other_waits_for_are_one_cycle() {
        // x: A holds, B waits; y: B holds, A waits.
        let q = vec![vec![m(1, 10), m(2, 13)], vec![m(2, 11), m(1, 12)]];
        let c = cycles(&q);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].len(), 2);
        // Lowest lease first: A (1) waits in y for B, B waits in x for A.
        assert_eq!(
            c[0],
            vec![
                Edge {
                    queue: 1,
                    waiter: 1,
                    holder: 0
                },
                Edge {
                    queue: 0,
                    waiter: 1,
                    holder: 0
                }
            ]
        );
        assert!(cycle_through(&q, 0, 1).is_some());
        assert!(cycle_through(&q, 1, 1).is_some());
        assert!(
            cycle_through(&q, 0, 0).is_none(),
            "a holder's key closes nothing"
        );
    }

    #[test]
    fn a_chain_a_client_waiting_on_itself_and_a_waiter_behind_a_cycle_are_not_cycles() {
        // A waits for B, B waits for C, C waits for nothing.
        let chain = vec![vec![m(2, 1), m(1, 5)], vec![m(3, 2), m(2, 6)]];
        assert!(cycles(&chain).is_empty());
        // One client's two calls on one name.
        assert!(cycles(&[vec![m(1, 1), m(1, 2)]]).is_empty());
        // A and B deadlocked; C waits for A: one cycle, C not on it.
        let q = vec![vec![m(1, 1), m(2, 4), m(3, 5)], vec![m(2, 2), m(1, 3)]];
        let c = cycles(&q);
        assert_eq!(c.len(), 1);
        assert!(c[0].iter().all(|e| q[e.queue][e.waiter].lease != 3));
        assert!(cycle_through(&q, 0, 2).is_none());
    }

    #[test]
    fn a_permit_waiter_is_served_by_any_holder_that_can_finish() {
        // s (2 permits): A and C hold, B waits; x: B holds, A waits. C can
        // finish and free a permit for B: no deadlock.
        let q = vec![
            vec![p(1, 1, 2), p(3, 2, 2), p(2, 5, 2)],
            vec![m(2, 3), m(1, 4)],
        ];
        assert!(cycles(&q).is_empty());
        // C also waits for B: every permit holder is blocked.
        let mut q2 = q.clone();
        q2.push(vec![m(2, 6), m(3, 7)]);
        assert_eq!(cycles(&q2).len(), 1);
    }

    #[test]
    fn multi_locks_queued_in_one_txn_never_wait_on_each_other() {
        // A's keys (rev 1) are older than B's (rev 2) in both names.
        let q = vec![vec![m(1, 1), m(2, 2)], vec![m(1, 1), m(2, 2)]];
        assert!(cycles(&q).is_empty());
        // B holds y first, then waits in a multi-lock on {x, y} behind A,
        // which waits for B's y: a cycle.
        let q = vec![vec![m(1, 1), m(2, 3)], vec![m(2, 0), m(1, 1), m(2, 3)]];
        assert_eq!(cycles(&q).len(), 1);
    }
}
