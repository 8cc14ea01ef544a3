//! Deadlocks among clients, from one read of a prefix: [`Client::deadlocks`]
//! (and `etcdlock deadlocks`). The graph and its rule are `waitgraph`'s;
//! this file turns [`Client::list`]'s records into its queues and its cycles
//! back into records.
//!
//! What it sees, and what it cannot: every client that waits on a name has
//! at least one key queued there, so a cycle of clients waiting on each
//! other's holds is in etcd's state, whatever language each client uses.
//! Two threads of one client waiting on each other are not: both wait on
//! the same lease, and etcd cannot tell them apart (the client's own wait
//! graph can; core does not keep one).

use std::collections::HashSet;

use crate::client::Client;
use crate::error::Result;
use crate::records::status::{list_read, Contender, ContenderKind, Status};
use crate::waitgraph::{cycles, Edge, Member, Slot};

/// A client in a cycle: its lease and who it is, from its key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Party {
    /// Its session's lease: the client.
    #[serde(serialize_with = "crate::records::decimal")]
    pub lease_id: i64,
    /// `host:pid`, for etcdlock keys.
    pub owner: Option<String>,
    /// Its host, for etcdlock keys.
    pub host: Option<String>,
    /// Its process id, for etcdlock keys.
    pub pid: Option<u32>,
    /// The language it uses etcdlock from, for etcdlock keys.
    pub language: Option<String>,
}

impl Party {
    fn of(c: &Contender) -> Party {
        Party {
            lease_id: c.lease_id,
            owner: c.owner.clone(),
            host: c.host.clone(),
            pid: c.pid,
            language: c.language.clone(),
        }
    }

    /// `host:pid (language, lease <hex>)`, or `lease <hex>` for a key of
    /// another program.
    pub fn describe(&self) -> String {
        let lease = format!("lease {:x}", self.lease_id);
        match (&self.owner, &self.language) {
            (Some(o), Some(l)) => format!("{o} ({l}, {lease})"),
            (Some(o), None) => format!("{o} ({lease})"),
            _ => lease,
        }
    }
}

/// One wait of a cycle: `waiter` waits in `name` for `holder`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WaitEdge {
    /// The waiting client.
    pub waiter: Party,
    /// The name it waits for.
    pub name: String,
    /// Its queued key (with the namespace).
    pub waiter_key: String,
    /// The client holding `name` that it waits for.
    pub holder: Party,
    /// The holder's key (with the namespace).
    pub holder_key: String,
    /// The holder's fencing token (its key's create_revision).
    #[serde(serialize_with = "crate::records::decimal")]
    pub fencing_token: i64,
    /// The waiter's key's create_revision: when its wait reached etcd.
    #[serde(serialize_with = "crate::records::decimal")]
    pub waiter_revision: i64,
}

/// Clients that wait on each other: each edge's holder is the next edge's
/// waiter, and the last edge's holder is the first edge's waiter.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Cycle {
    /// The waits, in order around the cycle.
    pub edges: Vec<WaitEdge>,
}

impl Cycle {
    /// One line: `A waits for "y" held by B; B waits for "x" held by A`.
    pub fn describe(&self) -> String {
        self.edges
            .iter()
            .map(|e| {
                format!(
                    "{} waits for \"{}\" held by {}",
                    e.waiter.describe(),
                    e.name,
                    e.holder.describe()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The deadlocks under a prefix, as one read saw them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Deadlocks {
    /// The prefix read (empty: the whole namespace).
    pub prefix: String,
    /// The store revision of the read.
    #[serde(serialize_with = "crate::records::decimal")]
    pub revision: i64,
    /// Clients with a key under the prefix.
    pub clients: usize,
    /// Queued keys that wait.
    pub waits: usize,
    /// One cycle per group of clients that wait on each other.
    pub cycles: Vec<Cycle>,
}

/// The queues of `list`'s records, oldest key first, as the graph takes them.
fn queues(list: &[Status]) -> Vec<Vec<(&Contender, Member)>> {
    list.iter()
        .map(|st| {
            let mut q: Vec<(&Contender, Member)> = st
                .holders
                .iter()
                .chain(&st.waiters)
                .map(|c| {
                    let slot = match c.kind {
                        ContenderKind::Exclusive => Slot::Exclusive,
                        ContenderKind::Reader => Slot::Reader,
                        ContenderKind::Permit(n) => Slot::Permit(n),
                    };
                    let m = Member {
                        lease: c.lease_id,
                        rev: c.create_revision,
                        slot,
                    };
                    (c, m)
                })
                .collect();
            q.sort_by_key(|(_, m)| m.rev);
            q
        })
        .collect()
}

/// The cycles among the clients of `list` (records of one read, as
/// [`Client::list`] gives them).
pub fn find_cycles(list: &[Status]) -> Vec<Cycle> {
    let qs = queues(list);
    let members: Vec<Vec<Member>> = qs
        .iter()
        .map(|q| q.iter().map(|(_, m)| *m).collect())
        .collect();
    cycles(&members)
        .into_iter()
        .map(|c| Cycle {
            edges: c.iter().map(|e| edge(list, &qs, e)).collect(),
        })
        .collect()
}

fn edge(list: &[Status], qs: &[Vec<(&Contender, Member)>], e: &Edge) -> WaitEdge {
    let (w, h) = (qs[e.queue][e.waiter].0, qs[e.queue][e.holder].0);
    WaitEdge {
        waiter: Party::of(w),
        name: list[e.queue].name.clone(),
        waiter_key: w.key.clone(),
        holder: Party::of(h),
        holder_key: h.key.clone(),
        fencing_token: h.create_revision,
        waiter_revision: w.create_revision,
    }
}

/// [`Client::deadlocks`].
pub(crate) async fn deadlocks(client: &Client, prefix: &str) -> Result<Deadlocks> {
    let (revision, list) = list_read(client, prefix, false).await?;
    Ok(report(prefix, revision, &list))
}

/// The report of one read's records.
pub(crate) fn report(prefix: &str, revision: i64, list: &[Status]) -> Deadlocks {
    let mut clients = HashSet::new();
    let mut waits = 0;
    for st in list {
        for c in st.holders.iter().chain(&st.waiters) {
            clients.insert(c.lease_id);
        }
        waits += st.waiters.len();
    }
    Deadlocks {
        prefix: prefix.to_string(),
        revision,
        clients: clients.len(),
        waits,
        cycles: find_cycles(list),
    }
}
