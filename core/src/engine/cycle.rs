//! The opt-in deadlock check of a wait ([`crate::LockOptions::detect_deadlock`]):
//! one read of the client's namespace, its queues given to `waitgraph`,
//! and `Deadlock` if our queued key's wait is on a cycle.
//!
//! When: as the key is queued (the wait that closes a cycle is the
//! youngest on it, and its read, made after its key, sees the whole cycle),
//! each time the key we wait behind changes (a grant can close a cycle
//! too), and now and then while the wait goes on ([`CycleWatch`]: after 1,
//! 2, 4 s, then every 5 s), for a cycle closed by a wait that did not opt
//! in. At the first check only the youngest wait of the cycle fails, and a
//! later check fails only on a cycle it has seen twice in a row, so the
//! member that closed a cycle backs off first, and two members checking at
//! once rarely both do.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use etcd_client::{GetOptions, KeyValue, SortOrder, SortTarget};

use crate::client::Client;
use crate::error::{Error, ErrorCode, Result};
use crate::names::{lock_name, KeyInfo};
use crate::transport::Bound;
use crate::waitgraph::{cycle_through, Member, Slot};

/// The deadlock checks of one opted-in wait.
pub(crate) struct CycleWatch<'a> {
    name: &'a str,
    my_rev: i64,
    /// The wait's deadline: a check never runs past it.
    deadline: Option<Instant>,
    /// The keys waited behind at the last check (`None`: none yet).
    behind: Option<Vec<Vec<u8>>>,
    /// The next check while the wait goes on, and the pause after it.
    next: Instant,
    pause: Duration,
    /// The last of those checks saw us on a cycle.
    seen: bool,
}

impl<'a> CycleWatch<'a> {
    pub(crate) fn new(name: &'a str, my_rev: i64, deadline: Option<Instant>) -> CycleWatch<'a> {
        CycleWatch {
            name,
            my_rev,
            deadline,
            behind: None,
            next: Instant::now() + Duration::from_secs(1),
            pause: Duration::from_secs(1),
            seen: false,
        }
    }

    /// A turn says we wait behind `behind`: check if that changed (the
    /// first check: as the key was queued). `Some`: fail with it.
    pub(crate) async fn on_turn(&mut self, client: &Client, behind: &[Vec<u8>]) -> Option<Error> {
        if self.behind.as_deref() == Some(behind) {
            return None;
        }
        let first = self.behind.is_none();
        self.behind = Some(behind.to_vec());
        check(client, self.name, self.my_rev, first, self.deadline)
            .await
            .err()
    }

    /// When the next check while waiting is due.
    pub(crate) fn due(&self) -> Instant {
        self.next
    }

    /// The check while waiting: `Some` when a cycle through our wait was
    /// there at this check and the one before.
    pub(crate) async fn recheck(&mut self, client: &Client) -> Option<Error> {
        self.pause = (self.pause * 2).min(Duration::from_secs(5));
        self.next = Instant::now() + self.pause;
        match check(client, self.name, self.my_rev, false, self.deadline).await {
            Err(e) if e.code() == ErrorCode::Deadlock && self.seen => Some(e),
            Err(e) => {
                self.seen = e.code() == ErrorCode::Deadlock;
                None
            }
            Ok(()) => {
                self.seen = false;
                None
            }
        }
    }
}

/// `Ok` unless our key (`my_rev` in `name`) waits on a cycle; `first`: the
/// check made as the key was queued. An error other than `Deadlock`: the
/// read failed, or would have run past `deadline` (the wait goes on as it
/// is, and ends by its deadline).
pub(crate) async fn check(
    client: &Client,
    name: &str,
    my_rev: i64,
    first: bool,
    deadline: Option<Instant>,
) -> Result<()> {
    let from = client.inner.ns.clone();
    let end = client.request_bound().end().unwrap_or_else(Instant::now);
    let end = deadline.map_or(end, |d| d.min(end));
    let r = client
        .call(Some(Bound::Request(end)), |mut c| {
            let from = from.clone();
            let o = GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Create, SortOrder::Ascend);
            async move { c.get(from, Some(o)).await }
        })
        .await?;
    let ns = client.inner.ns.len();
    let mut names: BTreeMap<&[u8], Vec<&KeyValue>> = BTreeMap::new();
    for kv in r.kvs().iter().filter(|kv| kv.lease() != 0) {
        if let Some(n) = lock_name(&kv.key()[ns..]) {
            names.entry(n).or_default().push(kv);
        }
    }
    let keyed: Vec<(&[u8], &Vec<&KeyValue>)> = names.iter().map(|(n, v)| (*n, v)).collect();
    let queues: Vec<Vec<Member>> = keyed
        .iter()
        .map(|(_, kvs)| {
            kvs.iter()
                .map(|kv| Member {
                    lease: kv.lease(),
                    rev: kv.create_revision(),
                    slot: Slot::of(kv.key(), kv.value()),
                })
                .collect()
        })
        .collect();
    let Some(q) = keyed.iter().position(|(n, _)| *n == name.as_bytes()) else {
        return Ok(());
    };
    let Some(m) = queues[q].iter().position(|m| m.rev == my_rev) else {
        return Ok(());
    };
    let Some(path) = cycle_through(&queues, q, m) else {
        return Ok(());
    };
    let youngest = path
        .iter()
        .map(|e| queues[e.queue][e.waiter].rev)
        .max()
        .unwrap_or(my_rev);
    if first && youngest != my_rev {
        return Ok(());
    }
    let who = |q: usize, i: usize| {
        let kv = keyed[q].1[i];
        let info = KeyInfo::of(kv.value());
        let lease = format!("lease {:x}", kv.lease());
        match (info.host, info.pid, info.language) {
            (Some(h), Some(p), Some(l)) => format!("{h}:{p} ({l}, {lease})"),
            _ => lease,
        }
    };
    let cycle: Vec<String> = path
        .iter()
        .map(|e| {
            format!(
                "{} waits for \"{}\" held by {}",
                who(e.queue, e.waiter),
                String::from_utf8_lossy(keyed[e.queue].0),
                who(e.queue, e.holder)
            )
        })
        .collect();
    Err(Error::new(
        ErrorCode::Deadlock,
        format!(
            "lock \"{name}\": waiting would close a cycle of clients waiting on each other: {}",
            cycle.join("; ")
        ),
    ))
}
