//! A read-write lock on the mutex's keys. Writers are exactly mutex
//! contenders ([`Client::lock`]): they wait for every older key, so a writer,
//! `etcdctl lock`, Go's Mutex and an etcdlock mutex on one name exclude each
//! other and every reader. Readers put keys marked `-r`
//! (`name/<lease hex>-r`) and wait only for the newest older *writer* key, so
//! readers overlap, and a writer queued behind readers gets in before any
//! reader that came after it (FIFO: a stream of readers cannot starve a writer).

use std::time::Duration;

use etcd_client::{GetOptions, SortOrder, SortTarget, Txn, TxnOp};

use crate::client::Client;
use crate::engine::acquisition::{created_at, put_if_absent, Acquisition};
use crate::engine::pipeline;
use crate::engine::queue::{kvs, revision};
use crate::engine::rule::{Rule, Turn};
use crate::engine::wait::{self, cancelled, timeout_because, timeout_err, Pending};
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::guard::Guard;
use crate::names::{is_direct_child, owner_info, show, validate_name, Mode};
use crate::options::LockOptions;
use crate::transport::Bound;

/// The mark at the end of a reader's key.
const READER: &str = "-r";

fn is_writer(prefix: &[u8], key: &[u8]) -> bool {
    is_direct_child(prefix, key) && !key.ends_with(READER.as_bytes())
}

/// The body of [`Client::read_lock`].
pub(crate) async fn read_lock(client: &Client, name: &str, opts: LockOptions) -> Result<Guard> {
    opts.validate()?;
    if opts.lock_delay.is_some_and(|d| !d.is_zero()) {
        return Err(Error::invalid(
            "lock_delay applies to locks and elections, not to read locks",
        ));
    }
    let m = client.inner.metrics.acquiring();
    let _meta = client.meta_wait(name, crate::meta::LockKind::RwLock, &opts.metadata);
    let lease_time = opts.lease_time;
    let r = Box::pin(read_lock_counted(client, name, opts)).await;
    m.finish(&r);
    if let (Ok(g), Some(t)) = (&r, lease_time) {
        g.expire_after(t);
    }
    r
}

pub(crate) async fn read_lock_counted(
    client: &Client,
    name: &str,
    opts: LockOptions,
) -> Result<Guard> {
    validate_name(name)?;
    client.check_open()?;
    let once = opts.timeout == Some(Duration::ZERO);
    let deadline = if once {
        None
    } else {
        opts.timeout
            .and_then(|t| std::time::Instant::now().checked_add(t))
    };
    let bound = if once {
        client.request_bound()
    } else {
        Bound::Wait(deadline)
    };
    let timeout = opts.timeout;
    let cancel = opts.cancel.unwrap_or_default();
    let prefix = crate::engine::keys::prefix(client, name);
    let ctx = |e: Error| e.context(format!("read lock {}", show(name)));
    if once
        && newest_writer(client, &prefix, None)
            .await
            .map_err(ctx)?
            .0
            .is_some()
    {
        return Err(timeout_err(name, timeout));
    }
    let _place = if once {
        None
    } else {
        Some(pipeline::enter_window(client, name, deadline, timeout, &cancel).await?)
    };
    let session = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(cancelled(name)),
        s = client.session_by(bound) => s.map_err(|e| if e.code() == ErrorCode::Timeout { timeout_because(name, timeout, &e) } else { ctx(e) })?,
    };
    let key = session.reserve_key_marked(&prefix, READER);
    let mut pending = Pending::new(client, &session, key.clone());
    let txn = put_if_absent(&key, owner_info(), session.lease);
    let resp = wait::run_detached(client, &mut pending, txn, name, bound, &cancel)
        .await
        .map_err(|e| {
            if e.code() == ErrorCode::Timeout {
                timeout_because(name, timeout, &e)
            } else {
                ctx(e)
            }
        })?;
    let my_rev = created_at(&resp).unwrap_or(0);
    let mode = if once { Mode::Once } else { Mode::Wait };
    let acq = Acquisition {
        what: "read lock",
        ..Acquisition::new(client, name, mode, bound, timeout, &cancel)
    };
    let rule = Readers {
        client,
        name,
        prefix: &prefix,
        key: &key,
        my_rev,
    };
    acq.wait_by(&session, pending, my_rev, &rule, "reader")
        .await
}

/// The newest writer key older than ours (or the newest at all, without
/// `mine`; `None`: no writer), and the revision of the read. `LockLost`
/// if our key is gone.
pub(crate) async fn newest_writer(
    client: &Client,
    prefix: &[u8],
    mine: Option<(&[u8], i64)>,
) -> Result<(Option<Vec<u8>>, i64)> {
    const PAGE: i64 = 64;
    let mut below = mine.map(|(_, r)| r).unwrap_or(i64::MAX);
    let mut first = true;
    loop {
        let mut older = GetOptions::new()
            .with_prefix()
            .with_keys_only()
            .with_sort(SortTarget::Create, SortOrder::Descend)
            .with_limit(PAGE);
        if below != i64::MAX {
            older = older.with_max_create_revision(below - 1);
        }
        let mut ops = vec![TxnOp::get(prefix.to_vec(), Some(older))];
        if let (true, Some((k, _))) = (first, mine) {
            ops.push(TxnOp::get(
                k.to_vec(),
                Some(GetOptions::new().with_keys_only()),
            ));
        }
        let txn = Txn::new().and_then(ops);
        let resp = client
            .call(None, |mut c| {
                let t = txn.clone();
                async move { c.txn(t).await }
            })
            .await?;
        let ops = resp.op_responses();
        if first && mine.is_some() && kvs(ops.get(1)).is_empty() {
            return Err(Error::lost(LossReason::KeyDeleted, "our key is gone"));
        }
        first = false;
        let page = kvs(ops.first());
        if let Some(w) = page.iter().find(|kv| is_writer(prefix, kv.key())) {
            return Ok((Some(w.key().to_vec()), revision(&resp)));
        }
        if (page.len() as i64) < PAGE {
            return Ok((None, revision(&resp)));
        }
        below = page.last().map(|kv| kv.create_revision()).unwrap_or(1);
    }
}

/// The read side's rule: a reader holds when no writer key is older than
/// its own, else it waits behind the newest older writer (readers overlap;
/// a writer queued before a reader keeps it out).
struct Readers<'a> {
    client: &'a Client,
    name: &'a str,
    prefix: &'a [u8],
    key: &'a [u8],
    my_rev: i64,
}

impl Rule for Readers<'_> {
    async fn read(&self) -> Result<Turn> {
        let mine = Some((self.key, self.my_rev));
        match newest_writer(self.client, self.prefix, mine).await {
            Ok((writer, rev)) => Ok(Turn {
                rev,
                behind: writer.iter().cloned().collect(),
                blocker: writer,
            }),
            Err(e) if e.code() == ErrorCode::LockLost => Err(e),
            Err(e) => Err(e.context(format!("read lock {}", show(self.name)))),
        }
    }
}

/// A read-write lock as a value: readers share `name`, a writer excludes
/// them ([`Client::read_lock`]; the write side is the mutex of the name).
#[derive(Clone, Debug)]
pub struct RwLock {
    client: Client,
    name: String,
}

impl RwLock {
    /// The read-write lock `name` of `client` (nothing is sent until a call).
    pub fn new(client: &Client, name: impl Into<String>) -> RwLock {
        RwLock {
            client: client.clone(),
            name: name.into(),
        }
    }

    /// The read side: [`Client::read_lock`].
    pub async fn read(&self, opts: LockOptions) -> Result<Guard> {
        read_lock(&self.client, &self.name, opts).await
    }

    /// The write side: [`Client::lock_with`] on the same name.
    pub async fn write(&self, opts: LockOptions) -> Result<Guard> {
        crate::recipes::mutex::lock_with(&self.client, &self.name, opts).await
    }
}
