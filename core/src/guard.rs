//! A held lock.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Compare, CompareOp, DeleteOptions, EventType, TxnOp, TxnOpResponse, WatchFilterType, WatchOptions};
use tokio::sync::watch;

use crate::client::Client;
use crate::error::{Error, ErrorCode, LossReason, Result};
use crate::mutex::{delete_key_until_gone, retry, show};
use crate::session::{Loss, Session};

/// Where a guard stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardState {
    /// We hold the lock.
    Held,
    /// Released by `unlock` (or drop).
    Released,
    /// The hold ended without `unlock`.
    Lost(Loss),
}

struct Shared {
    client: Client,
    session: Arc<Session>,
    name: String,
    key: Vec<u8>,
    token: i64,
    waited_on: Vec<Vec<u8>>,
    state: watch::Sender<GuardState>,
}

/// A held lock: its key, lease, fencing token, loss notification, guarded
/// operations and `unlock`. Dropping a guard that is still held releases the
/// lock in the background. All methods take `&self`, so a guard can be shared
/// (e.g. in an `Arc`) by the bindings.
pub struct Guard {
    shared: Arc<Shared>,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("name", &self.shared.name)
            .field("key", &self.key())
            .field("fencing_token", &self.shared.token)
            .field("state", &*self.shared.state.borrow())
            .finish()
    }
}

impl Guard {
    pub(crate) fn new(
        client: Client,
        session: Arc<Session>,
        name: &str,
        key: Vec<u8>,
        token: i64,
        rev: i64,
        waited_on: Vec<Vec<u8>>,
    ) -> Guard {
        let (state, _) = watch::channel(GuardState::Held);
        let shared = Arc::new(Shared { client, session, name: name.to_string(), key, token, waited_on, state });
        let weak = Arc::downgrade(&shared);
        let s = shared.clone();
        let mut state_rx = s.state.subscribe();
        let session = s.session.clone();
        let watch_key = s.client.inner.watch_held_keys;
        let etcd = s.client.inner.etcd.clone();
        let key = s.key.clone();
        let key_watch_delay = Duration::from_millis((s.session.ttl as u64 * 100).min(250));
        drop(s);
        // The monitor: the guard ends when the session is lost or our key is deleted.
        shared.client.inner.handle.spawn(async move {
            let released = async {
                while *state_rx.borrow_and_update() == GuardState::Held {
                    if state_rx.changed().await.is_err() {
                        return;
                    }
                }
            };
            let reason = tokio::select! {
                _ = released => return,
                l = session.wait_lost() => l,
                _ = async {
                    // Most holds are short; start the key watch only for holds that
                    // outlive a short delay. It starts at the acquisition revision, so
                    // a delete during the delay is still seen.
                    tokio::time::sleep(key_watch_delay).await;
                    watch_deleted(etcd, key, token, rev).await
                }, if watch_key => Loss { reason: LossReason::KeyDeleted, at: Instant::now() },
            };
            if let Some(sh) = weak.upgrade() {
                sh.mark_lost(reason);
            }
        });
        Guard { shared }
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Our key in etcd (with the namespace), e.g. `orders/694d7a3e4b2c8f05`.
    pub fn key(&self) -> String {
        String::from_utf8_lossy(&self.shared.key).into_owned()
    }

    /// Our key as bytes.
    pub fn key_bytes(&self) -> &[u8] {
        &self.shared.key
    }

    /// The keys this acquisition waited on, in order: each is the key created
    /// just before ours that was still present (empty if uncontended). Handy for
    /// diagnosing queues; the tests use it to prove there is no herd.
    pub fn waited_on(&self) -> Vec<String> {
        self.shared.waited_on.iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect()
    }

    /// The session's lease id.
    pub fn lease_id(&self) -> i64 {
        self.shared.session.lease
    }

    /// The fencing token: our key's create_revision. It strictly increases from
    /// one holder of a lock to the next; hand it to resources that can reject
    /// writes from a stale holder.
    pub fn fencing_token(&self) -> i64 {
        self.shared.token
    }

    /// True while the lock is held: not unlocked, not reported lost, and inside
    /// the local validity window (checked against the monotonic clock now, so it
    /// turns false on time even if no task has run yet).
    pub fn is_held(&self) -> bool {
        *self.shared.state.borrow() == GuardState::Held && self.shared.session.alive()
    }

    /// The current state.
    pub fn state(&self) -> GuardState {
        let st = *self.shared.state.borrow();
        if st == GuardState::Held && !self.shared.session.alive() {
            // The watchdog has not run yet; report what it will.
            let reason = self.shared.session.loss().map(|l| l.reason).unwrap_or(LossReason::ConnectionLost);
            self.shared.mark_lost(Loss { reason, at: Instant::now().min(self.shared.session.deadline()) });
            return *self.shared.state.borrow();
        }
        st
    }

    /// How the hold ended, if it was lost.
    pub fn loss(&self) -> Option<Loss> {
        match self.state() {
            GuardState::Lost(l) => Some(l),
            _ => None,
        }
    }

    /// The instant at which the hold ends locally unless another keep-alive is
    /// acknowledged before then.
    pub fn valid_until(&self) -> Instant {
        self.shared.session.deadline()
    }

    /// Resolves when the hold ends: `Some(loss)` if it was lost, `None` if it
    /// was released by `unlock`.
    pub async fn wait_lost(&self) -> Option<Loss> {
        let mut rx = self.shared.state.subscribe();
        let session = self.shared.session.clone();
        loop {
            match *rx.borrow_and_update() {
                GuardState::Held => {}
                GuardState::Released => return None,
                GuardState::Lost(l) => return Some(l),
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return None },
                l = session.wait_lost() => { self.shared.mark_lost(l); }
            }
        }
    }

    /// A receiver that sees every state change (for bindings that push events).
    pub fn subscribe(&self) -> watch::Receiver<GuardState> {
        self.shared.state.subscribe()
    }

    fn check_held(&self) -> Result<()> {
        match self.state() {
            GuardState::Held => Ok(()),
            GuardState::Released => {
                Err(Error::new(ErrorCode::NotHeld, format!("lock {} was already released by this handle", show(&self.shared.name))))
            }
            GuardState::Lost(l) => Err(Error::lost(
                l.reason,
                format!("lock {} was lost ({})", show(&self.shared.name), l.reason),
            )),
        }
    }

    /// Release the lock: delete our key. Idempotent (a second call is `Ok`).
    /// If etcd is unreachable the delete is retried in the background until the
    /// lease would have expired anyway, and `Ok` is returned. Returns `LockLost`
    /// if the hold had already been lost, so the caller learns that its critical
    /// section may not have been protected to the end.
    pub async fn unlock(&self) -> Result<()> {
        let prev = *self.shared.state.borrow();
        match prev {
            GuardState::Released => return Ok(()),
            GuardState::Lost(_) | GuardState::Held => {}
        }
        let was = self.state();
        self.shared.state.send_if_modified(|s| {
            if *s == GuardState::Held {
                *s = GuardState::Released;
                true
            } else {
                false
            }
        });
        let sh = self.shared.clone();
        let del = async move {
            let client = sh.client.clone();
            let key = sh.key.clone();
            let r = retry(&client, |mut c| {
                let k = key.clone();
                async move { c.delete(k, None).await }
            })
            .await;
            match r {
                Ok(_) => sh.session.release_key(&sh.key),
                Err(e) => {
                    tracing::warn!(lock = %sh.name, error = %e, "unlock could not reach etcd; retrying in the background");
                    let sh2 = sh.clone();
                    let _ = client.inner.handle.spawn(async move {
                        delete_key_until_gone(&sh2.client, &sh2.session, &sh2.key).await;
                        sh2.session.release_key(&sh2.key);
                    });
                }
            }
        };
        if self.shared.client.is_closed() {
            // Closing revoked the lease; the key is gone with it.
        } else {
            del.await;
        }
        match was {
            GuardState::Lost(l) => Err(Error::lost(
                l.reason,
                format!("lock {} had been lost before unlock ({})", show(&self.shared.name), l.reason),
            )),
            _ => Ok(()),
        }
    }

    /// A data key under the lock's own prefix would join the lock's queue (etcd's
    /// layout counts every key under `name/`) and block the next acquisition.
    fn data_key(&self, key: &[u8]) -> Result<Vec<u8>> {
        let k = self.shared.client.ns_key(key);
        let lock_prefix_len = self.shared.key.iter().rposition(|b| *b == b'/').map(|i| i + 1).unwrap_or(0);
        if key.is_empty() {
            return Err(Error::invalid("guarded operation on an empty key"));
        }
        if k.starts_with(&self.shared.key[..lock_prefix_len]) {
            return Err(Error::invalid(format!(
                "key {:?} is under the lock's own prefix {:?}; keep data beside the lock, not inside it",
                String::from_utf8_lossy(key).chars().take(64).collect::<String>(),
                String::from_utf8_lossy(&self.shared.key[..lock_prefix_len]),
            )));
        }
        Ok(k)
    }

    async fn guarded(&self, op: TxnOp) -> Result<TxnOpResponse> {
        self.check_held()?;
        let sh = &self.shared;
        let txn = etcd_client::Txn::new()
            .when([Compare::create_revision(sh.key.clone(), CompareOp::Equal, sh.token)])
            .and_then([op]);
        let resp = retry(&sh.client, |mut c| {
            let t = txn.clone();
            async move { c.txn(t).await }
        })
        .await
        .map_err(|e| e.context(format!("lock {}", show(&sh.name))))?;
        if !resp.succeeded() {
            if *sh.state.borrow() == GuardState::Released {
                // Raced our own unlock: the key is gone because we released it.
                return Err(Error::new(ErrorCode::NotHeld, format!("lock {} was released by this handle", show(&sh.name))));
            }
            sh.mark_lost(Loss { reason: LossReason::KeyDeleted, at: Instant::now() });
            return Err(Error::lost(
                LossReason::KeyDeleted,
                format!("lock {}: etcd rejected the guarded operation; the lock is no longer held", show(&sh.name)),
            ));
        }
        resp.op_responses()
            .into_iter()
            .next()
            .ok_or_else(|| Error::new(ErrorCode::Internal, "guarded operation returned no result"))
    }

    /// Put `key` = `value` (namespaced like the lock) only while we hold the
    /// lock: etcd applies it in a Txn that compares our key's create_revision.
    pub async fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let k = self.data_key(key.as_ref())?;
        self.guarded(TxnOp::put(k, value.as_ref().to_vec(), None)).await.map(|_| ())
    }

    /// Get `key` only while we hold the lock.
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let k = self.data_key(key.as_ref())?;
        match self.guarded(TxnOp::get(k, None)).await? {
            TxnOpResponse::Get(g) => Ok(g.kvs().first().map(|kv| kv.value().to_vec())),
            _ => Err(Error::new(ErrorCode::Internal, "unexpected response to a guarded get")),
        }
    }

    /// Delete `key` only while we hold the lock; true if it existed.
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let k = self.data_key(key.as_ref())?;
        match self.guarded(TxnOp::delete(k, None::<DeleteOptions>)).await? {
            TxnOpResponse::Delete(d) => Ok(d.deleted() > 0),
            _ => Err(Error::new(ErrorCode::Internal, "unexpected response to a guarded delete")),
        }
    }

    /// The client this guard came from.
    pub fn client(&self) -> &Client {
        &self.shared.client
    }
}

impl Shared {
    fn mark_lost(&self, loss: Loss) {
        let changed = self.state.send_if_modified(|s| {
            if *s == GuardState::Held {
                *s = GuardState::Lost(loss);
                true
            } else {
                false
            }
        });
        if changed {
            tracing::warn!(lock = %self.name, reason = %loss.reason, "lock lost");
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let st = *self.shared.state.borrow();
        if let GuardState::Lost(_) = st {
            // Our key is gone (or dies with the lost session); free the name for reuse.
            self.shared.session.release_key(&self.shared.key);
        }
        if st != GuardState::Held || self.shared.client.is_closed() {
            return;
        }
        self.shared.state.send_replace(GuardState::Released);
        let sh = self.shared.clone();
        let _ = self.shared.client.inner.handle.spawn(async move {
            delete_key_until_gone(&sh.client, &sh.session, &sh.key).await;
            sh.session.release_key(&sh.key);
        });
    }
}

/// Resolve when our key (create_revision `token`) is deleted after revision
/// `rev`. If the watch breaks, one read settles whether the key is still ours
/// and the watch resumes right after that read; pends forever while etcd is
/// unreachable (the session's watchdog covers that case).
async fn watch_deleted(etcd: etcd_client::Client, key: Vec<u8>, token: i64, rev: i64) {
    let mut backoff = Duration::from_millis(100);
    let mut from = rev + 1;
    loop {
        let mut wc = etcd.watch_client();
        let opts = WatchOptions::new().with_start_revision(from).with_filters([WatchFilterType::NoPut]);
        if let Ok(mut stream) = wc.watch(key.clone(), Some(opts)).await {
            while let Ok(Some(r)) = stream.message().await {
                if r.events().iter().any(|e| e.event_type() == EventType::Delete) {
                    return;
                }
                if r.canceled() || r.compact_revision() > 0 {
                    break;
                }
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
        let mut kv = etcd.kv_client();
        if let Ok(resp) = kv.get(key.clone(), None).await {
            match resp.kvs().first() {
                Some(kv) if kv.create_revision() == token => {
                    from = resp.header().map(|h| h.revision() + 1).unwrap_or(from);
                }
                _ => return,
            }
        }
    }
}
