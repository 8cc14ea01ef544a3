//! Several locks at once, without deadlock and without release-and-retry:
//! every waiter key is created in one Txn, so all of them share one revision,
//! and every client queues in the same order on every lock (Redisson's
//! MultiLock retries; ordering by one revision makes that unnecessary). Each
//! name then waits exactly as the mutex does. Timeout or cancel removes every
//! key; the loss of any one lock is the loss of the whole hold.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{
    Compare, CompareOp, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp, TxnResponse,
};
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::engine::acquisition::Acquisition;
use crate::engine::admission::deadline_of;
use crate::engine::pipeline::{run_detached, Retry};
use crate::engine::queue::{kvs, more, revision, Queue};
use crate::engine::wait::{timeout_err, Pending};
use crate::error::{Error, ErrorCode, Result};
use crate::guard::Guard;
use crate::names::{owner_info, validate_name, Mode};
use crate::options::LockOptions;
use crate::session::{Loss, Session};
use crate::transport::Bound;

/// The most names one multi-lock may take: etcd's default `--max-txn-ops`.
pub const MAX_MULTI: usize = 128;

/// The end of a multi-lock's hold, owned: see [`MultiGuard::lost_signal`].
#[derive(Clone, Debug)]
pub struct MultiLossSignal {
    signals: Vec<(String, crate::guard::LossSignal)>,
}

impl MultiLossSignal {
    /// Resolves when the hold ends: the name and loss of the first lock
    /// lost (losing any one lock is losing the hold), or `None` once every
    /// lock was released.
    pub async fn wait(&mut self) -> Option<(String, Loss)> {
        // An end already known answers at once (a caller's zero timeout
        // gives the tasks below no time to run).
        let mut all_released = true;
        for (name, signal) in &self.signals {
            match signal.state() {
                crate::guard::GuardState::Lost(l) => return Some((name.clone(), l)),
                crate::guard::GuardState::Released => {}
                crate::guard::GuardState::Held => all_released = false,
            }
        }
        if all_released {
            return None;
        }
        let mut set = tokio::task::JoinSet::new();
        for (name, signal) in &self.signals {
            let (name, mut signal) = (name.clone(), signal.clone());
            set.spawn(async move { signal.wait().await.map(|l| (name, l)) });
        }
        while let Some(r) = set.join_next().await {
            if let Ok(Some(lost)) = r {
                return Some(lost);
            }
        }
        None
    }
}

/// Locks held together; see [`Client::lock_many`].
#[derive(Debug)]
pub struct MultiGuard {
    guards: Vec<Guard>,
}

impl MultiGuard {
    /// The guard of each lock, in the order the names were given.
    pub fn guards(&self) -> &[Guard] {
        &self.guards
    }

    /// The guards, to hold and release each lock on its own from now on.
    pub fn into_guards(self) -> Vec<Guard> {
        self.guards
    }

    /// True while every lock is held.
    pub fn is_held(&self) -> bool {
        self.guards.iter().all(Guard::is_held)
    }

    /// Resolves when the hold ends: the name and loss of the first lock
    /// lost, or `None` once unlocked.
    pub async fn wait_lost(&self) -> Option<(String, Loss)> {
        self.lost_signal().wait().await
    }

    /// The end of the hold as an owned value that keeps no lock alive (for a
    /// task or a binding that must not hold the guard): see
    /// [`MultiLossSignal::wait`].
    pub fn lost_signal(&self) -> MultiLossSignal {
        MultiLossSignal {
            signals: self
                .guards
                .iter()
                .map(|g| (g.name().to_string(), g.lost_signal()))
                .collect(),
        }
    }

    /// Whether the keep-alive renewal is failing now. Every lock of a
    /// multi-lock is held on one session, so this is each lock's
    /// [`Guard::renewal`].
    pub fn renewal(&self) -> crate::session::Renewal {
        self.guards
            .first()
            .map(Guard::renewal)
            .unwrap_or(crate::session::Renewal::Ok)
    }

    /// Follow [`MultiGuard::renewal`]'s changes (the session's, as
    /// [`Guard::renewal_changes`]); `None` for a multi-lock of no lock.
    pub fn renewal_changes(&self) -> Option<tokio::sync::watch::Receiver<crate::session::Renewal>> {
        self.guards.first().map(Guard::renewal_changes)
    }

    /// Put `key` = `value` (namespaced like the locks) only while every lock
    /// is held: etcd applies it in one Txn that compares every key's
    /// create_revision, so a multi-lock that lost any of its locks is
    /// refused (`LockLost`, and the locks found lost report it). The key may
    /// not be under any of the locks' prefixes (`InvalidArgument`).
    pub async fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        crate::guard::put_all(&self.guards, key.as_ref(), value.as_ref()).await
    }

    /// Get `key` only while every lock is held (see [`MultiGuard::put`]).
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        crate::guard::get_all(&self.guards, key.as_ref()).await
    }

    /// Delete `key` only while every lock is held; true if it existed.
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        crate::guard::delete_all(&self.guards, key.as_ref()).await
    }

    /// Release every lock, all at once (one round trip, not one per name);
    /// the first error in name order is returned after all were tried.
    pub async fn unlock(&self) -> Result<()> {
        let mut futs: Vec<_> = self.guards.iter().map(|g| Box::pin(g.unlock())).collect();
        let mut results: Vec<Option<Result<()>>> = futs.iter().map(|_| None).collect();
        std::future::poll_fn(|cx| {
            let mut pending = false;
            for (f, r) in futs.iter_mut().zip(results.iter_mut()) {
                if r.is_none() {
                    match f.as_mut().poll(cx) {
                        std::task::Poll::Ready(v) => *r = Some(v),
                        std::task::Poll::Pending => pending = true,
                    }
                }
            }
            if pending {
                std::task::Poll::Pending
            } else {
                std::task::Poll::Ready(())
            }
        })
        .await;
        results
            .into_iter()
            .flatten()
            .find_map(Result::err)
            .map_or(Ok(()), Err)
    }
}

/// The body of [`Client::lock_many`].
pub(crate) async fn lock_many(
    client: &Client,
    names: &[&str],
    opts: LockOptions,
) -> Result<MultiGuard> {
    let m = client.inner.metrics.acquiring();
    let r = Box::pin(lock_many_counted(client, names, opts)).await;
    m.finish(&r);
    r
}

pub(crate) async fn lock_many_counted(
    client: &Client,
    names: &[&str],
    opts: LockOptions,
) -> Result<MultiGuard> {
    check_many(names, &opts)?;
    client.check_open()?;
    // The pipeline's steps (pipeline.rs), with no admission: the names'
    // keys go in at once, in one Txn.
    let once = opts.timeout == Some(Duration::ZERO);
    let mode = if once { Mode::Once } else { Mode::Wait };
    let deadline = deadline_of(mode, opts.timeout);
    let bound = if once {
        client.request_bound()
    } else {
        Bound::Wait(deadline)
    };
    // A child token: a failed wait cancels its siblings, never the caller's token.
    let cancel = opts
        .cancel
        .as_ref()
        .map(|c| c.child_token())
        .unwrap_or_default();
    let label = names.join(",");
    let acq = Acquisition::new(client, &label, mode, bound, opts.timeout, &cancel);
    // With the puts, read each prefix's three newest keys (as the mutex's
    // own Txn does), so a name whose queue the read tells needs no second
    // round trip; only while the Txn stays within etcd's default
    // --max-txn-ops (two ops per name).
    let with_reads = 2 * names.len() <= MAX_MULTI;
    let mut retry = Retry::default();
    let (session, keys, pending, resp) = loop {
        let session = acq.session().await?;
        let keys: Vec<Vec<u8>> = names
            .iter()
            .map(|n| session.reserve_key(&crate::engine::keys::prefix(client, n)))
            .collect();
        let mut pending = Pending::new(client, &session, keys[0].clone());
        pending.extra = keys[1..].to_vec();
        let txn = many_txn(client, names, &keys, session.lease, with_reads);
        let r = run_detached(client, &mut pending, txn, &label, bound, &cancel)
            .await
            .map_err(|e| acq.bounded(e));
        if let Some(r) = retry.after(&acq, &session, 0, r) {
            break (session, keys, pending, r?);
        }
    };
    if !resp.succeeded() {
        pending.abandon().await;
        return Err(Error::new(
            ErrorCode::Internal,
            "lock_many: a fresh key already existed",
        ));
    }
    let my_rev = revision(&resp);
    let known = known_queues(client, names, &keys, &resp, with_reads, my_rev);
    let uncertain = pending.uncertain();
    pending.disarm();
    // One Pending per key from here on: each name waits on its own.
    let mut set = tokio::task::JoinSet::new();
    for (i, ((name, key), known)) in names.iter().zip(keys).zip(known).enumerate() {
        let w = NameWait {
            client: client.clone(),
            session: session.clone(),
            name: name.to_string(),
            key,
            my_rev,
            uncertain,
            once,
            timeout: if once {
                Some(Duration::ZERO)
            } else {
                opts.timeout
            },
            deadline,
            cancel: cancel.clone(),
            detect_deadlock: opts.detect_deadlock,
        };
        set.spawn(async move { (i, w.run(known).await) });
    }
    gather(set, names.len(), &cancel, once, &label, opts.timeout).await
}

/// One name of a [`lock_many`] after the shared Txn: its key (created at
/// `my_rev`) waits on its own, with its own Pending.
struct NameWait {
    client: Client,
    session: Arc<Session>,
    name: String,
    key: Vec<u8>,
    my_rev: i64,
    uncertain: bool,
    once: bool,
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    cancel: CancellationToken,
    detect_deadlock: bool,
}

impl NameWait {
    /// This name's guard: at once when its queue (`known` from the Txn's
    /// read, else read now) has no key before ours, else after its turn.
    async fn run(self, known: Option<Queue>) -> Result<Guard> {
        let (c, s, name) = (&self.client, &self.session, self.name.as_str());
        let (key, my_rev) = (&self.key, self.my_rev);
        let mut p = Pending::new(c, s, key.clone());
        if self.uncertain {
            p.mark_uncertain();
        }
        let prefix = crate::engine::keys::prefix(c, name);
        let queue = match known {
            Some(q) => q,
            None => match crate::engine::keys::read_queue(c, &prefix, key, my_rev).await {
                Ok(q) => q,
                Err(e) => {
                    p.abandon().await;
                    return Err(e);
                }
            },
        };
        if queue.pred.is_none() {
            return Ok(crate::engine::acquisition::held(
                c,
                name,
                s,
                p,
                my_rev,
                Vec::new(),
                None,
            ));
        }
        if self.once {
            p.abandon().await;
            return Err(timeout_err(name, self.timeout));
        }
        let bound = Bound::Wait(self.deadline);
        let acq = Acquisition {
            detect_deadlock: self.detect_deadlock,
            ..Acquisition::new(c, name, Mode::Wait, bound, self.timeout, &self.cancel)
        };
        acq.wait_turn(s, p, my_rev, queue).await
    }
}

/// [`lock_many`]'s arguments: the options it takes, and 1 to
/// [`MAX_MULTI`] distinct valid names.
fn check_many(names: &[&str], opts: &LockOptions) -> Result<()> {
    opts.validate()?;
    if opts.lock_delay.is_some_and(|d| !d.is_zero())
        || opts.lease_time.is_some()
        || !opts.metadata.is_empty()
    {
        return Err(Error::invalid("lock_many takes a timeout and a cancel token only (no lock_delay, lease_time or metadata)"));
    }
    if names.is_empty() || names.len() > MAX_MULTI {
        return Err(Error::invalid(format!(
            "lock_many takes 1 to {MAX_MULTI} names, got {}",
            names.len()
        )));
    }
    let mut seen = HashSet::new();
    for n in names {
        validate_name(n)?;
        if !seen.insert(*n) {
            return Err(Error::invalid(format!("lock_many: {n:?} is listed twice")));
        }
    }
    Ok(())
}

/// The one Txn that puts every key at once (each only if absent), and with
/// `with_reads` reads each name's newest keys.
fn many_txn(
    client: &Client,
    names: &[&str],
    keys: &[Vec<u8>],
    lease: i64,
    with_reads: bool,
) -> Txn {
    let value = owner_info();
    let newest = || {
        GetOptions::new()
            .with_prefix()
            .with_keys_only()
            .with_sort(SortTarget::Create, SortOrder::Descend)
            .with_limit(3)
    };
    let mut ops: Vec<TxnOp> = keys
        .iter()
        .map(|k| {
            TxnOp::put(
                k.clone(),
                value.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )
        })
        .collect();
    if with_reads {
        ops.extend(
            names
                .iter()
                .map(|n| TxnOp::get(crate::engine::keys::prefix(client, n), Some(newest()))),
        );
    }
    Txn::new()
        .when(
            keys.iter()
                .map(|k| Compare::create_revision(k.clone(), CompareOp::Equal, 0))
                .collect::<Vec<_>>(),
        )
        .and_then(ops)
}

/// The queue of each name that the Txn's reads tell (`None`: read it).
fn known_queues(
    client: &Client,
    names: &[&str],
    keys: &[Vec<u8>],
    resp: &TxnResponse,
    with_reads: bool,
    my_rev: i64,
) -> Vec<Option<Queue>> {
    let ops = if with_reads {
        resp.op_responses()
    } else {
        Vec::new()
    };
    names
        .iter()
        .zip(keys)
        .enumerate()
        .map(|(i, (n, k))| {
            if with_reads {
                Queue::from_newest(
                    &crate::engine::keys::prefix(client, n),
                    k,
                    my_rev,
                    kvs(ops.get(keys.len() + i)),
                    !more(ops.get(keys.len() + i)),
                )
            } else {
                None
            }
        })
        .collect()
}

/// Gather the waits of [`lock_many`]: every guard, or the first failure
/// (the other waits cancelled, the guards taken released).
async fn gather(
    mut set: tokio::task::JoinSet<(usize, Result<Guard>)>,
    n: usize,
    cancel: &CancellationToken,
    once: bool,
    label: &str,
    timeout: Option<Duration>,
) -> Result<MultiGuard> {
    let mut guards: Vec<Option<Guard>> = (0..n).map(|_| None).collect();
    let mut failure: Option<Error> = None;
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, Ok(g))) => guards[i] = Some(g),
            Ok((_, Err(e))) => {
                if failure.is_none() {
                    failure = Some(e);
                    // Stop the other waits (dropping a wait removes its key).
                    cancel.cancel();
                }
            }
            Err(e) => {
                failure.get_or_insert(Error::new(
                    ErrorCode::Internal,
                    format!("lock_many: a wait failed: {e}"),
                ));
                cancel.cancel();
            }
        }
    }
    if let Some(e) = failure {
        for g in guards.into_iter().flatten() {
            let _ = g.unlock().await;
        }
        return Err(if once && e.code() == ErrorCode::Timeout {
            timeout_err(label, timeout)
        } else {
            e
        });
    }
    Ok(MultiGuard {
        guards: guards.into_iter().flatten().collect(),
    })
}

/// A multi-lock as a value: every one of `names` at once, or none
/// ([`Client::lock_many`]).
#[derive(Clone, Debug)]
pub struct MultiLock {
    client: Client,
    names: Vec<String>,
}

impl MultiLock {
    /// The multi-lock of `names` of `client` (nothing is sent until a call).
    pub fn new<S: Into<String>>(client: &Client, names: impl IntoIterator<Item = S>) -> MultiLock {
        MultiLock {
            client: client.clone(),
            names: names.into_iter().map(Into::into).collect(),
        }
    }

    /// Take them all: [`Client::lock_many`].
    pub async fn lock(&self, opts: LockOptions) -> Result<MultiGuard> {
        let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        lock_many(&self.client, &names, opts).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_bad_set_of_names_is_refused_before_any_request() {
        let mut o = crate::options::ClientOptions::new(["127.0.0.1:1"]);
        o.lazy_connect = true;
        let c = Client::connect(o).await.unwrap();
        let many: Vec<String> = (0..=MAX_MULTI).map(|i| format!("n{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let cases: [(&[&str], LockOptions, &str); 5] = [
            (&[], LockOptions::default(), "takes 1 to 128 names, got 0"),
            (&many, LockOptions::default(), "got 129"),
            (
                &["a", "b", "a"],
                LockOptions::default(),
                "\"a\" is listed twice",
            ),
            (&["a", ""], LockOptions::default(), "lock name is empty"),
            (
                &["a"],
                LockOptions {
                    lease_time: Some(Duration::from_secs(5)),
                    ..Default::default()
                },
                "takes a timeout and a cancel token only",
            ),
        ];
        for (names, opts, says) in cases {
            let e = c.lock_many(names, opts).await.unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
            assert!(e.message().contains(says), "{e}");
        }
        c.close().await;
        let e = c
            .lock_many(&["a"], LockOptions::default())
            .await
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::Closed, "{e}");
    }
}
