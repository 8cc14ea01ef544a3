//! The lock protocol, wire-compatible with etcd's Go `concurrency.Mutex`,
//! `etcdctl lock` and the v3lock service: lock `N` owns the prefix `N/`; each
//! contender puts one key under it, attached to its session lease; the key with
//! the lowest create_revision holds the lock; everyone else waits for the key
//! created just before its own to be deleted.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{
    Compare, CompareOp, EventType, GetOptions, KeyValue, PutOptions, SortOrder, SortTarget, Txn, TxnOp,
    TxnOpResponse, TxnResponse, WatchFilterType, WatchOptions,
};
use tokio_util::sync::CancellationToken;

use crate::client::{Client, MAX_NAME_LEN};
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::guard::Guard;
use crate::session::Session;

/// Options for one lock acquisition.
#[derive(Debug, Clone, Default)]
pub struct LockOptions {
    /// Give up with `Timeout` after this long (`None`: wait as long as it takes).
    pub timeout: Option<Duration>,
    /// Give up with `Cancelled` when this token is cancelled. (Dropping the
    /// future also cancels; the token is for callers that need the error.)
    pub cancel: Option<CancellationToken>,
}

impl LockOptions {
    /// Wait at most `timeout`.
    pub fn timeout(timeout: Duration) -> Self {
        LockOptions { timeout: Some(timeout), cancel: None }
    }
}

/// etcd's answer to a put on a revoked or expired lease.
const LEASE_NOT_FOUND: &str = "requested lease not found";

pub(crate) fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("lock name is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::invalid(format!(
            "lock name is {} bytes; the limit is {MAX_NAME_LEN}",
            name.len()
        )));
    }
    Ok(())
}

/// Shown in messages: the name, shortened if huge.
pub(crate) fn show(name: &str) -> String {
    if name.len() <= 64 {
        format!("{name:?}")
    } else {
        let mut end = 64;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        format!("{:?}...", &name[..end])
    }
}

/// Run `op` with the request timeout, retrying transient unavailability with
/// bounded backoff (etcd-client fails over to the next endpoint on retry).
pub(crate) async fn retry<T, F, Fut>(client: &Client, mut op: F) -> Result<T>
where
    F: FnMut(etcd_client::Client) -> Fut,
    Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
{
    let rt = client.inner.request_timeout;
    let give_up = Instant::now() + rt * 2;
    let mut backoff = Duration::from_millis(25);
    loop {
        client.check_open()?;
        let err = match tokio::time::timeout(rt, op(client.inner.etcd.clone())).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => Error::from_etcd(e, &client.inner.endpoints),
            Err(_) => Error::new(
                ErrorCode::Unavailable,
                format!("etcd at {}: no answer within {rt:?}", client.inner.endpoints),
            ),
        };
        if err.code() != ErrorCode::Unavailable || Instant::now() + backoff >= give_up {
            return Err(err);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

fn first_kv(r: &TxnOpResponse) -> Option<&KeyValue> {
    match r {
        TxnOpResponse::Get(g) => g.kvs().first(),
        _ => None,
    }
}

fn revision(r: &TxnResponse) -> i64 {
    r.header().map(|h| h.revision()).unwrap_or(0)
}

/// A waiter's key. If the acquisition is abandoned (timeout, cancel, error, or
/// the future dropped) the key is deleted by a task with its own deadline and
/// retries, so a late waiter never blocks the queue (jetcd issue 291).
struct Waiter {
    client: Client,
    session: Arc<Session>,
    key: Vec<u8>,
    armed: bool,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let client = self.client.clone();
        let session = self.session.clone();
        let key = std::mem::take(&mut self.key);
        let _ = client.inner.handle.clone().spawn(async move {
            delete_key_until_gone(&client, &session, &key).await;
            session.release_key(&key);
        });
    }
}

/// Delete one of our keys, retrying until it is gone or our lease (and with it
/// the key) is gone anyway.
pub(crate) async fn delete_key_until_gone(client: &Client, session: &Session, key: &[u8]) {
    let rt = client.inner.request_timeout;
    let mut backoff = Duration::from_millis(50);
    loop {
        let mut kv = client.inner.etcd.kv_client();
        match tokio::time::timeout(rt, kv.delete(key.to_vec(), None)).await {
            Ok(Ok(_)) => return,
            Ok(Err(e)) => tracing::debug!(error = %Error::from_etcd(e, &client.inner.endpoints), "deleting lock key; retrying"),
            Err(_) => tracing::debug!("deleting lock key timed out; retrying"),
        }
        if session.loss().is_some() && Instant::now() > session.deadline() + Duration::from_secs(session.ttl as u64) {
            // The lease has certainly expired on the server; the key went with it.
            return;
        }
        if client.is_closed() {
            return;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

impl Client {
    /// Wait for the lock `name` and hold it. Waiters are served in the order they
    /// arrived (create_revision). Dropping the future cancels the wait and removes
    /// the waiter's key.
    ///
    /// ```no_run
    /// # async fn demo() -> etcdlock::Result<()> {
    /// let client = etcdlock::Client::connect(etcdlock::ClientOptions::new(["127.0.0.1:2379"])).await?;
    /// let guard = client.lock("orders").await?;
    /// guard.put("stock", "299").await?; // applied by etcd only while we hold the lock
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self, name: &str) -> Result<Guard> {
        self.lock_with(name, LockOptions::default()).await
    }

    /// [`Client::lock`] with a timeout and/or a cancellation token.
    pub async fn lock_with(&self, name: &str, opts: LockOptions) -> Result<Guard> {
        self.acquire(name, opts, false).await
    }

    /// Take the lock if it is free; `WouldBlock` if someone holds it or waits for
    /// it. Leaves no key behind when it fails.
    pub async fn try_lock(&self, name: &str) -> Result<Guard> {
        self.acquire(name, LockOptions::default(), true).await
    }

    async fn acquire(&self, name: &str, opts: LockOptions, try_only: bool) -> Result<Guard> {
        validate_name(name)?;
        self.check_open()?;
        let started = Instant::now();
        let deadline = opts.timeout.map(|t| tokio::time::Instant::from_std(started + t));
        let cancel = opts.cancel.unwrap_or_default();
        let session = tokio::select! {
            s = self.session() => s?,
            _ = sleep_opt(deadline) => return Err(timeout_err(name, opts.timeout)),
            _ = cancel.cancelled() => return Err(Error::new(ErrorCode::Cancelled, format!("lock {} cancelled", show(name)))),
        };
        let closed = self.inner.closed.clone();
        let mut session = session;
        let mut attempts = 0;
        loop {
            let r = tokio::select! {
                biased;
                r = self.acquire_on(name, session.clone(), try_only) => r,
                _ = sleep_opt(deadline) => Err(timeout_err(name, opts.timeout)),
                _ = cancel.cancelled() => Err(Error::new(ErrorCode::Cancelled, format!("lock {} cancelled while waiting", show(name)))),
                l = session.wait_lost() => Err(if l.reason == LossReason::ClientClosed {
                    Error::new(ErrorCode::Closed, format!("lock {}: the client was closed while waiting", show(name)))
                } else {
                    Error::lost(l.reason, format!("lock {}: the session ended while waiting ({})", show(name), l.reason))
                }),
                _ = closed.cancelled() => Err(Error::new(ErrorCode::Closed, format!("lock {}: the client was closed while waiting", show(name)))),
            };
            // Closing revokes the lease, which deletes our waiter key: whichever of
            // the watch event and the close signal wins, the caller sees Closed.
            let r = match r {
                Err(e) if self.inner.closed.is_cancelled() && e.code() != ErrorCode::Closed => Err(Error::new(
                    ErrorCode::Closed,
                    format!("lock {}: the client was closed while waiting", show(name)),
                )),
                r => r,
            };
            // The lease vanished (revoked, or expired while we were cut off) before we
            // queued: nothing of ours is in the queue, so take a fresh session and retry.
            match r {
                Err(e) if e.message().contains(LEASE_NOT_FOUND) && attempts < 3 => {
                    attempts += 1;
                    session.mark_lost(LossReason::LeaseExpired);
                    session = tokio::select! {
                        s = self.session() => s?,
                        _ = sleep_opt(deadline) => return Err(timeout_err(name, opts.timeout)),
                        _ = cancel.cancelled() => return Err(Error::new(ErrorCode::Cancelled, format!("lock {} cancelled", show(name)))),
                    };
                }
                r => return r,
            }
        }
    }

    async fn acquire_on(&self, name: &str, session: Arc<Session>, try_only: bool) -> Result<Guard> {
        let mut prefix = self.ns_key(name.as_bytes());
        prefix.push(b'/');
        let key = session.reserve_key(&prefix);
        let mut waiter = Waiter { client: self.clone(), session: session.clone(), key: key.clone(), armed: true };

        // One round trip when uncontended: create our key and read the holder.
        let owner = TxnOp::get(
            prefix.clone(),
            Some(GetOptions::new().with_prefix().with_sort(SortTarget::Create, SortOrder::Ascend).with_limit(1)),
        );
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.clone(), owner_info(), Some(PutOptions::new().with_lease(session.lease))), owner.clone()])
            .or_else([TxnOp::get(key.clone(), None), owner]);
        let resp = retry(self, |mut c| {
            let t = txn.clone();
            async move { c.txn(t).await }
        })
        .await
        .map_err(|e| e.context(format!("lock {}", show(name))))?;
        let ops = resp.op_responses();
        let my_rev = if resp.succeeded() {
            revision(&resp)
        } else {
            ops.first().and_then(first_kv).map(|kv| kv.create_revision()).unwrap_or(0)
        };
        if my_rev == 0 {
            return Err(Error::lost(LossReason::KeyDeleted, format!("lock {}: our key vanished while acquiring", show(name))));
        }
        let holder_rev = ops.get(1).and_then(first_kv).map(|kv| kv.create_revision());
        if holder_rev == Some(my_rev) {
            waiter.armed = false;
            return Ok(Guard::new(self.clone(), session, name, key, my_rev, revision(&resp), Vec::new()));
        }
        if try_only {
            waiter.armed = false;
            let c = self.clone();
            let k = key.clone();
            let _ = retry(&c, |mut etcd| {
                let k = k.clone();
                async move { etcd.delete(k, None).await }
            })
            .await;
            session.release_key(&key);
            return Err(Error::new(ErrorCode::WouldBlock, format!("lock {} is held", show(name))));
        }

        // Wait for every key created before ours to go, watching only the newest
        // of them (no thundering herd). Each pass is one read that also confirms
        // our own key still exists (etcd issue 11456).
        let mut backoff = Duration::from_millis(25);
        let mut waited_on: Vec<Vec<u8>> = Vec::new();
        loop {
            let check = Txn::new().and_then([
                TxnOp::get(key.clone(), None),
                TxnOp::get(
                    prefix.clone(),
                    Some(
                        GetOptions::new()
                            .with_prefix()
                            .with_sort(SortTarget::Create, SortOrder::Descend)
                            .with_max_create_revision(my_rev - 1)
                            .with_limit(1),
                    ),
                ),
            ]);
            let resp = retry(self, |mut c| {
                let t = check.clone();
                async move { c.txn(t).await }
            })
            .await
            .map_err(|e| e.context(format!("lock {}", show(name))))?;
            let ops = resp.op_responses();
            if ops.first().and_then(first_kv).is_none() {
                return Err(match session.loss() {
                    Some(l) => Error::lost(l.reason, format!("lock {}: the session ended while waiting", show(name))),
                    None => Error::lost(LossReason::KeyDeleted, format!("lock {}: our waiter key was deleted", show(name))),
                });
            }
            let read_rev = revision(&resp);
            let Some((pred, pred_rev)) = ops.get(1).and_then(first_kv).map(|kv| (kv.key().to_vec(), kv.create_revision())) else {
                waiter.armed = false;
                return Ok(Guard::new(self.clone(), session, name, key, my_rev, read_rev, waited_on));
            };
            tracing::trace!(lock = name, pred = %String::from_utf8_lossy(&pred), "waiting for predecessor");
            if waited_on.last() != Some(&pred) {
                waited_on.push(pred.clone());
            }
            match self.wait_deleted(&pred, pred_rev, read_rev, &key).await {
                Ok(()) => backoff = Duration::from_millis(25),
                Err(e) if e.code() == ErrorCode::Unavailable => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                Err(e) => return Err(e.context(format!("lock {}", show(name)))),
            }
        }
    }

    /// Resolve once `key`, as created at `create_rev` (it existed at `read_rev`),
    /// is deleted. Key names repeat (a client that unlocks and locks again puts
    /// the same lease-hex key), so "still there" means "same create_revision":
    /// a waiter that mistook its predecessor's new incarnation for the old one
    /// would wait behind a key that waits behind it.
    ///
    /// A watch whose start revision is at or below the store's current revision
    /// is "unsynced" in etcd and is served by a 100 ms catch-up loop; that tick
    /// caps Go's Mutex at ~80 handoffs/s. So the watch starts at the current
    /// revision (synced, events pushed at once), and if the store moved between
    /// our read and the watch's creation, one get closes the gap.
    ///
    /// The same watch stream also watches our own key (`mine`): if it is deleted
    /// (lease revoked, an operator, session expiry) the waiter fails at once with
    /// `LockLost` instead of waiting for its predecessor to leave (etcd issue 19597).
    pub(crate) async fn wait_deleted(&self, key: &[u8], create_rev: i64, read_rev: i64, mine: &[u8]) -> Result<()> {
        let ep = &self.inner.endpoints;
        let rt = self.inner.request_timeout;
        let mut wc = self.inner.etcd.watch_client();
        let opts = WatchOptions::new().with_filters([WatchFilterType::NoPut]);
        let mut stream = match tokio::time::timeout(rt, wc.watch(key.to_vec(), Some(opts))).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(Error::from_etcd(e, ep)),
            Err(_) => return Err(Error::new(ErrorCode::Unavailable, format!("etcd at {ep}: watch not created within {rt:?}"))),
        };
        let own = WatchOptions::new().with_filters([WatchFilterType::NoPut]);
        stream.watch(mine.to_vec(), Some(own)).await.map_err(|e| Error::from_etcd(e, ep))?;
        let classify = |r: &etcd_client::WatchResponse| -> Option<Result<()>> {
            for e in r.events() {
                if e.event_type() != EventType::Delete {
                    continue;
                }
                match e.kv().map(|kv| kv.key()) {
                    Some(k) if k == mine => {
                        return Some(Err(Error::lost(LossReason::KeyDeleted, "our waiter key was deleted while waiting")))
                    }
                    Some(k) if k == key => return Some(Ok(())),
                    _ => {}
                }
            }
            None
        };
        let created = match tokio::time::timeout(rt, stream.message()).await {
            Ok(Ok(Some(r))) => r,
            Ok(Ok(None)) => return Err(Error::new(ErrorCode::Unavailable, format!("etcd at {ep}: watch stream closed"))),
            Ok(Err(e)) => return Err(Error::from_etcd(e, ep)),
            Err(_) => return Err(Error::new(ErrorCode::Unavailable, format!("etcd at {ep}: watch not created within {rt:?}"))),
        };
        if let Some(r) = classify(&created) {
            return r;
        }
        let created_rev = created.header().map(|h| h.revision()).unwrap_or(i64::MAX);
        // One read of both keys: is the predecessor (as created) gone, is ours still there?
        let pred_gone = || async {
            let txn = Txn::new().and_then([
                TxnOp::get(key.to_vec(), Some(GetOptions::new().with_keys_only())),
                TxnOp::get(mine.to_vec(), Some(GetOptions::new().with_keys_only())),
            ]);
            let mut kv = self.inner.etcd.kv_client();
            let r = tokio::time::timeout(rt, kv.txn(txn))
                .await
                .map_err(|_| Error::new(ErrorCode::Unavailable, format!("etcd at {ep}: no answer within {rt:?}")))?
                .map_err(|e| Error::from_etcd(e, ep))?;
            let ops = r.op_responses();
            if ops.get(1).and_then(first_kv).is_none() {
                return Err(Error::lost(LossReason::KeyDeleted, "our waiter key was deleted while waiting"));
            }
            Ok::<bool, Error>(ops.first().and_then(first_kv).map(|kv| kv.create_revision()) != Some(create_rev))
        };
        // The store moved between our read and the watch's creation: the
        // predecessor may already be gone. (Our own key vanishing in that window
        // is caught by the first poll below.)
        if created_rev != read_rev && pred_gone().await? {
            return Ok(());
        }
        // etcd turns start revision 0 into "current + 1" *before* it registers the
        // watch; a write landing in between makes the watch unsynced, and then its
        // first events wait for the 100 ms catch-up loop (seen as a ~1% tail of
        // 70-100 ms handoffs). After that loop's first pass the watch is synced, so
        // a few reads spread over the first ~100 ms close that window.
        let mut polls = [5u64, 10, 20, 40, 40].into_iter();
        let mut next_poll = polls.next().map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
        loop {
            tokio::select! {
                msg = stream.message() => match msg {
                    Ok(Some(r)) => {
                        if let Some(out) = classify(&r) {
                            return out;
                        }
                        if r.canceled() {
                            return Err(Error::new(ErrorCode::Unavailable, format!("etcd at {ep}: watch cancelled: {}", r.cancel_reason())));
                        }
                    }
                    Ok(None) => return Err(Error::new(ErrorCode::Unavailable, format!("etcd at {ep}: watch stream closed"))),
                    Err(e) => return Err(Error::from_etcd(e, ep)),
                },
                _ = sleep_opt(next_poll) => {
                    if pred_gone().await? {
                        tracing::trace!("predecessor gone before its event arrived (unsynced watch)");
                        return Ok(());
                    }
                    next_poll = polls.next().map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
                }
            }
        }
    }
}

/// The value stored in our lock key: who we are and since when (wall clock, for
/// `etcdlock status`). Go's Mutex and etcdctl store an empty value and ignore
/// values, so this stays wire-compatible.
fn owner_info() -> String {
    use std::sync::OnceLock;
    static HOST: OnceLock<String> = OnceLock::new();
    let host = HOST.get_or_init(|| {
        let mut buf = [0u8; 256];
        // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
        let ok = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } == 0;
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        let h = if ok { String::from_utf8_lossy(&buf[..end]).into_owned() } else { String::new() };
        h.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-').take(64).collect()
    });
    let since_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("{{\"host\":\"{host}\",\"pid\":{},\"since_ms\":{since_ms}}}", std::process::id())
}


async fn sleep_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

fn timeout_err(name: &str, t: Option<Duration>) -> Error {
    Error::new(ErrorCode::Timeout, format!("lock {} not acquired within {:?}", show(name), t.unwrap_or_default()))
}
