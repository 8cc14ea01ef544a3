//! The opt-in deadlock check of a wait ([`crate::LockOptions::detect_deadlock`]):
//! one read of the client's namespace, its queues given to `waitgraph`,
//! and `Deadlock` if our queued key's wait is on a cycle.
//!
//! When: as the key is queued (the wait that closes a cycle is the
//! youngest on it, and its read, made after its key, sees the whole cycle),
//! and each time the key we wait behind changes (a grant can close a cycle
//! too). At the first check only the youngest wait of the cycle fails, so
//! two members checking at once do not both back off.

use std::collections::BTreeMap;

use etcd_client::{GetOptions, KeyValue, SortOrder, SortTarget};

use crate::client::Client;
use crate::error::{Error, ErrorCode, Result};
use crate::names::{lock_name, KeyInfo};
use crate::waitgraph::{cycle_through, Member, Slot};

/// `Ok` unless our key (`my_rev` in `name`) waits on a cycle; `first`: the
/// check made as the key was queued.
pub(crate) async fn check(client: &Client, name: &str, my_rev: i64, first: bool) -> Result<()> {
    let from = client.inner.ns.clone();
    let r = client
        .call(None, |mut c| {
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
