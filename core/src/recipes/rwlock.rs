//! A read-write lock on the mutex's keys. Writers are exactly mutex
//! contenders ([`Client::lock`]): they wait for every older key, so a writer,
//! `etcdctl lock`, Go's Mutex and an etcdlock mutex on one name exclude each
//! other and every reader. Readers put keys marked `-r`
//! (`name/<lease hex>-r`) and wait only for the newest older *writer* key, so
//! readers overlap, and a writer queued behind readers gets in before any
//! reader that came after it (FIFO: a stream of readers cannot starve a writer).

use std::sync::Arc;

use etcd_client::{GetOptions, SortOrder, SortTarget, Txn, TxnOp};

use crate::client::Client;
use crate::engine::acquisition::{created_at, put_if_absent, vanished, Acquisition};
use crate::engine::pipeline::{acquire, run_detached, Recipe, Request};
use crate::engine::queue::{kvs, revision};
use crate::engine::rule::{Rule, Turn};
use crate::engine::wait::{timeout_err, Pending};
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::guard::Guard;
use crate::names::{is_direct_child, owner_info, show, Mode};
use crate::options::LockOptions;
use crate::session::Session;

/// The mark at the end of a reader's key.
const READER: &str = "-r";

fn is_writer(prefix: &[u8], key: &[u8]) -> bool {
    is_direct_child(prefix, key) && !key.ends_with(READER.as_bytes())
}

impl Acquisition<'_> {
    /// The read side on `session` (the pipeline's step for
    /// [`Recipe::Reader`](crate::engine::pipeline::Recipe)): queue a reader
    /// key, then wait by the readers' rule. One try writes nothing while a
    /// writer holds or waits.
    pub(crate) async fn read(&self, session: &Arc<Session>) -> Result<Guard> {
        let (client, name, prefix) = (self.client, self.name, &self.prefix);
        if self.mode != Mode::Wait
            && newest_writer(client, prefix, None)
                .await
                .map_err(|e| self.ctx(e))?
                .0
                .is_some()
        {
            return Err(timeout_err(name, self.timeout));
        }
        let key = session.reserve_key_marked(prefix, READER);
        let mut pending = Pending::new(client, session, key.clone());
        let txn = put_if_absent(&key, owner_info(), session.lease);
        let resp = run_detached(client, &mut pending, txn, name, self.bound, self.cancel).await;
        self.queued();
        let resp = resp.map_err(|e| self.bounded(e))?;
        let my_rev = created_at(&resp).ok_or_else(vanished)?;
        let rule = Readers {
            client,
            name,
            prefix,
            key: &key,
            my_rev,
        };
        self.wait_by(session, pending, my_rev, &rule, "reader")
            .await
    }
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
        acquire(&self.client, Request::new(&self.name, opts, Recipe::Reader)).await
    }

    /// The write side: [`Client::lock_with`] on the same name.
    pub async fn write(&self, opts: LockOptions) -> Result<Guard> {
        acquire(&self.client, Request::new(&self.name, opts, Recipe::MUTEX)).await
    }
}
