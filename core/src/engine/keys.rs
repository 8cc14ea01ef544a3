//! Helpers on a lock's keys that only the engine uses: a name's prefix and
//! the read of the queue around our key (the helpers on our own key, shared
//! with the guard, are in guard/keys.rs).

use etcd_client::{GetOptions, SortOrder, SortTarget, Txn, TxnOp};

use crate::client::Client;
use crate::engine::queue::{kvs, more, revision, Contender, Queue, OLDER_READ};
use crate::error::Result;
use crate::names::is_direct_child;

/// The prefix `name/` in the client's namespace: a lock's keys are under it.
pub(crate) fn prefix(client: &Client, name: &str) -> Vec<u8> {
    let mut prefix = client.ns_key(name.as_bytes());
    prefix.push(b'/');
    prefix
}

/// Read the queue around our key in one Txn: our key, and the newest
/// [`OLDER_READ`] keys older than ours (the predecessor, whether it is the
/// only one, i.e. the holder, and, when that is all of them, the whole queue). Keys of nested names are skipped by a full scan in the
/// rare case that they show up.
pub(crate) async fn read_queue(
    client: &Client,
    prefix: &[u8],
    key: &[u8],
    my_rev: i64,
) -> Result<Queue> {
    let older = || {
        GetOptions::new()
            .with_prefix()
            .with_keys_only()
            .with_max_create_revision(my_rev - 1)
    };
    let txn = Txn::new().and_then([
        TxnOp::get(key.to_vec(), Some(GetOptions::new().with_keys_only())),
        TxnOp::get(
            prefix.to_vec(),
            Some(
                older()
                    .with_sort(SortTarget::Create, SortOrder::Descend)
                    .with_limit(OLDER_READ),
            ),
        ),
    ]);
    let resp = client
        .call(None, |mut c| {
            let t = txn.clone();
            async move { c.txn(t).await }
        })
        .await?;
    let ops = resp.op_responses();
    let mine = kvs(ops.first())
        .first()
        .is_some_and(|kv| kv.create_revision() == my_rev);
    let newest = kvs(ops.get(1));
    let rev = revision(&resp);
    if newest.iter().all(|kv| is_direct_child(prefix, kv.key())) {
        let older: Vec<Contender> = newest.iter().map(Contender::of).collect();
        return Ok(Queue::of_older(mine, &older, !more(ops.get(1)), rev));
    }
    let p = prefix.to_vec();
    let all = client
        .call(None, |mut c| {
            let p = p.clone();
            async move {
                c.get(
                    p,
                    Some(older().with_sort(SortTarget::Create, SortOrder::Ascend)),
                )
                .await
            }
        })
        .await?;
    let older: Vec<Contender> = all
        .kvs()
        .iter()
        .rev()
        .filter(|kv| is_direct_child(prefix, kv.key()))
        .map(Contender::of)
        .collect();
    Ok(Queue::of_older(mine, &older, true, rev))
}
