//! A counting semaphore on the mutex's keys: `permits` holders at once, FIFO.
//! Contenders put `name/<lease hex>` keys exactly as the mutex does; a
//! contender holds a permit when fewer than `permits` direct children older
//! than its key exist. Each waiter watches only the `permits` keys just older
//! than its own, so a release wakes at most `permits` waiters, never the queue
//! (with one permit this is the mutex). Each key's value records the permit
//! count; a contender that finds an older key with another count fails with
//! `InvalidArgument` rather than joining a queue run by other rules.

use std::sync::Arc;

use etcd_client::{GetOptions, KeyValue, SortOrder, SortTarget, Txn, TxnOp};

use crate::client::Client;
use crate::engine::acquisition::{created_at, put_if_absent, vanished, Acquisition};
use crate::engine::pipeline::{acquire, run_detached, Recipe, Request};
use crate::engine::queue::{kvs, revision};
use crate::engine::rule::{Rule, Turn};
use crate::engine::wait::{timeout_because, timeout_err, Pending};
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::guard::Guard;
use crate::names::{is_direct_child, show, KeyInfo, Mode};
use crate::options::LockOptions;
use crate::session::Session;

/// The most permits one semaphore may have (each waiter watches that many keys).
pub const MAX_PERMITS: u32 = 1024;

/// The permit count a key records (`permits` in our value); keys of the
/// mutex, Go's Mutex and etcdctl record none, which means one.
fn permits_of(kv: &KeyValue) -> u32 {
    KeyInfo::of(kv.value()).permits.unwrap_or(1)
}

struct Older {
    mine: bool,
    /// Direct children created before ours, newest first, at most `permits`.
    keys: Vec<(Vec<u8>, u32)>,
    rev: i64,
}

/// The body of [`Client::acquire_permit`].
pub(crate) async fn acquire_permit(
    client: &Client,
    name: &str,
    permits: u32,
    opts: LockOptions,
) -> Result<Guard> {
    if permits == 0 || permits > MAX_PERMITS {
        return Err(Error::invalid(format!(
            "permits must be between 1 and {MAX_PERMITS}, got {permits}"
        )));
    }
    // With one permit this is the mutex (and takes a lock-delay as it does).
    let recipe = match permits {
        1 => Recipe::Lock(crate::meta::LockKind::Semaphore),
        n => Recipe::Permits(n),
    };
    acquire(client, Request::new(name, opts, recipe)).await
}

/// The older keys around ours, newest first, at most `permits` of them.
async fn read_older(
    client: &Client,
    prefix: &[u8],
    key: &[u8],
    my_rev: i64,
    permits: u32,
) -> Result<Older> {
    let older = GetOptions::new()
        .with_prefix()
        .with_max_create_revision(my_rev - 1)
        .with_sort(SortTarget::Create, SortOrder::Descend);
    let txn = Txn::new().and_then([
        TxnOp::get(key.to_vec(), Some(GetOptions::new().with_keys_only())),
        TxnOp::get(
            prefix.to_vec(),
            Some(older.clone().with_limit(permits as i64)),
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
    let mut window: Vec<KeyValue> = kvs(ops.get(1)).to_vec();
    if window.iter().any(|kv| !is_direct_child(prefix, kv.key())) {
        // Keys of a nested name are in the window: scan them out.
        let p = prefix.to_vec();
        let all = client
            .call(None, |mut c| {
                let (p, o) = (p.clone(), older.clone());
                async move { c.get(p, Some(o)).await }
            })
            .await?;
        window = all
            .kvs()
            .iter()
            .filter(|kv| is_direct_child(prefix, kv.key()))
            .take(permits as usize)
            .cloned()
            .collect();
    }
    Ok(Older {
        mine,
        keys: window
            .iter()
            .map(|kv| (kv.key().to_vec(), permits_of(kv)))
            .collect(),
        rev: revision(&resp),
    })
}

impl Acquisition<'_> {
    /// Take one of `permits` permits on `session`: queue a key carrying the
    /// count, then wait until fewer than `permits` keys are older than ours.
    pub(crate) async fn permit(&self, session: &Arc<Session>, permits: u32) -> Result<Guard> {
        let (client, name, mode) = (self.client, self.name, self.mode);
        let (bound, timeout, cancel) = (self.bound, self.timeout, self.cancel);
        let prefix = self.prefix.clone();
        let ctx = |e: Error| e.context(format!("semaphore {}", show(name)));
        if mode != Mode::Wait {
            // One try writes nothing when every permit is taken.
            let p = prefix.clone();
            let r = client
                .call(Some(bound), |mut c| {
                    let p = p.clone();
                    async move {
                        c.get(
                            p,
                            Some(
                                GetOptions::new()
                                    .with_prefix()
                                    .with_keys_only()
                                    .with_limit(permits as i64),
                            ),
                        )
                        .await
                    }
                })
                .await
                .map_err(ctx)?;
            if r.kvs().len() as u32 >= permits
                && r.kvs().iter().all(|kv| is_direct_child(&prefix, kv.key()))
            {
                return Err(timeout_err(name, timeout));
            }
        }
        let key = session.reserve_key(&prefix);
        let mut pending = Pending::new(client, session, key.clone());
        let value = KeyInfo::permit_value(permits);
        let txn = put_if_absent(&key, value, session.lease);
        let resp = run_detached(client, &mut pending, txn, name, bound, cancel).await;
        self.queued();
        let resp = resp.map_err(|e| {
            if e.code() == ErrorCode::Timeout {
                timeout_because(name, timeout, &e)
            } else {
                ctx(e)
            }
        })?;
        let Some(my_rev) = created_at(&resp) else {
            return Err(vanished());
        };
        let rule = Permits {
            client,
            name,
            prefix: &prefix,
            key: &key,
            my_rev,
            permits,
        };
        self.wait_by(session, pending, my_rev, &rule, "waiter")
            .await
    }
}

/// The semaphore's rule: we hold when fewer than `permits` keys are older
/// than ours, else we wait behind those `permits` keys (a release wakes at
/// most `permits` waiters).
struct Permits<'a> {
    client: &'a Client,
    name: &'a str,
    prefix: &'a [u8],
    key: &'a [u8],
    my_rev: i64,
    permits: u32,
}

impl Rule for Permits<'_> {
    async fn read(&self) -> Result<Turn> {
        let (name, permits) = (self.name, self.permits);
        let older = read_older(self.client, self.prefix, self.key, self.my_rev, permits)
            .await
            .map_err(|e| e.context(format!("semaphore {}", show(name))))?;
        if !older.mine {
            return Err(Error::lost(LossReason::KeyDeleted, "our key is gone"));
        }
        if let Some((k, n)) = older.keys.iter().find(|(_, n)| *n != permits) {
            return Err(Error::invalid(format!(
                "semaphore {}: {} was taken with {n} permit(s), not {permits}",
                show(name),
                String::from_utf8_lossy(k)
            )));
        }
        let behind = if (older.keys.len() as u32) < permits {
            Vec::new()
        } else {
            older.keys.into_iter().map(|(k, _)| k).collect()
        };
        Ok(Turn {
            rev: older.rev,
            behind,
            blocker: None,
        })
    }
}

/// A counting semaphore as a value: `permits` holders of `name` at once
/// ([`Client::acquire_permit`]).
#[derive(Clone, Debug)]
pub struct Semaphore {
    client: Client,
    name: String,
    permits: u32,
}

impl Semaphore {
    /// The semaphore `name` of `client` with `permits` permits (every
    /// process names the same number; nothing is sent until a call).
    pub fn new(client: &Client, name: impl Into<String>, permits: u32) -> Semaphore {
        Semaphore {
            client: client.clone(),
            name: name.into(),
            permits,
        }
    }

    /// Take one permit: [`Client::acquire_permit`].
    pub async fn acquire(&self, opts: LockOptions) -> Result<Guard> {
        acquire_permit(&self.client, &self.name, self.permits, opts).await
    }
}
