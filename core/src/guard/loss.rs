//! How a hold ends: a lost session, our key deleted or its watch reset, the guard dropped while held (released in the background), the watch on our key started once the hold has lasted a while.

use super::*;

impl Shared {
    /// End the hold as lost; false if it had already ended.
    pub(super) fn mark_lost(&self, loss: Loss) -> bool {
        let changed = self.state.send_if_modified(|s| {
            let ended = end_hold(s, GuardState::Lost(loss));
            if ended {
                // Counted before anyone waiting for the loss is woken (the
                // watch channel wakes them after this closure returns).
                self.client
                    .inner
                    .metrics
                    .hold_ended(self.started, Some(loss.reason));
                self.client.inner.meta.hold_ended(&self.name);
            }
            ended
        });
        if changed {
            tracing::warn!(lock = %self.name, reason = %loss.reason, "lock lost");
            self.detach();
        }
        changed
    }

    /// Stop watching our key and listening to the session: the hold is over.
    pub(super) fn detach(&self) {
        if let Some(id) = self.watch_id.locked().take() {
            self.client.inner.hub.cancel(id);
        }
        if let Some(id) = self.listener.locked().take() {
            self.session.unlisten(id);
        }
    }

    pub(super) fn release_in_background(self: &Arc<Self>) {
        self.releasing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let sh = self.clone();
        self.client.inner.handle.spawn(async move {
            let records = sh.records.locked().clone();
            delete_until_gone(
                &sh.client,
                &sh.session,
                &sh.key,
                Some(sh.token),
                false,
                &records,
            )
            .await;
            sh.session.release_key(&sh.key);
        });
    }
}

impl OnLoss for Shared {
    fn on_loss(&self, loss: Loss) {
        self.mark_lost(loss);
    }
}

impl OwnKeyListener for Shared {
    /// The watch on our key started after the store moved past our
    /// acquisition: read the key once, so a delete in between is not missed.
    fn key_watch_created(&self, rev: i64) {
        if rev <= self.token || self.state.get() != GuardState::Held {
            return;
        }
        let weak = self.weak_self();
        let client = self.client.clone();
        let (key, token) = (self.key.clone(), self.token);
        self.client.inner.handle.spawn(async move {
            let r = client
                .call(None, |mut c| {
                    let k = key.clone();
                    async move {
                        c.get(k, Some(etcd_client::GetOptions::new().with_keys_only()))
                            .await
                    }
                })
                .await;
            if let (Ok(resp), Some(sh)) = (r, weak.upgrade()) {
                if !resp
                    .kvs()
                    .first()
                    .is_some_and(|kv| kv.create_revision() == token)
                {
                    sh.key_deleted();
                }
            }
        });
    }

    /// Our key was deleted: learn whether the lease went with it (revoked or
    /// expired: `LeaseExpired`) or only the key (`KeyDeleted`).
    fn key_deleted(&self) {
        if self.state.get() != GuardState::Held {
            return;
        }
        let (client, session) = (self.client.clone(), self.session.clone());
        let weak = self.weak_self();
        self.client.inner.handle.spawn(async move {
            let reason = why_deleted(&client, &session).await;
            if let Some(sh) = weak.upgrade() {
                sh.mark_lost(loss_now(&sh.session, reason));
            }
        });
    }

    /// The watch on our key was cancelled by etcd (compaction): read the key
    /// and watch again from that read if it is still ours.
    fn key_watch_reset(&self) {
        if self.state.get() != GuardState::Held {
            return;
        }
        let weak = self.weak_self();
        let client = self.client.clone();
        let (key, token) = (self.key.clone(), self.token);
        self.client.inner.handle.spawn(async move {
            let r = client
                .call(None, |mut c| {
                    let k = key.clone();
                    async move { c.get(k, None).await }
                })
                .await;
            let Some(sh) = weak.upgrade() else { return };
            match r {
                Ok(resp)
                    if resp
                        .kvs()
                        .first()
                        .is_some_and(|kv| kv.create_revision() == token) =>
                {
                    let rev = resp.header().map(|h| h.revision()).unwrap_or(token);
                    // The old watch is gone (etcd cancelled it).
                    sh.watch_id.locked().take();
                    sh.watch_own_key(rev);
                }
                Ok(_) => sh.key_deleted(),
                Err(_) => {} // the session's watchdog covers an unreachable etcd
            }
        });
    }
}

impl Shared {
    pub(super) fn weak_self(&self) -> Weak<Shared> {
        self.me.clone()
    }

    /// Watch our key for deletes after `rev` (a read or the acquisition
    /// saw it ours then), while the hold lasts.
    pub(super) fn watch_own_key(&self, rev: i64) {
        let mut slot = self.watch_id.locked();
        // Checked under the slot's lock: a release that ends the hold now
        // (`detach`) takes the id after us and cancels it.
        if slot.is_some() || self.state.get() != GuardState::Held {
            return;
        }
        let (w, rx) = OwnKeyWatch::new();
        let id = self.client.inner.hub.watch(self.key.clone(), rev, w.sink());
        *slot = Some(id);
        drop(slot);
        let as_key: Weak<dyn OwnKeyListener> = self.weak_self();
        w.hand_over(as_key, rx);
    }
}

impl Later for Shared {
    /// Held past [`crate::watch::HELD_WATCH_DELAY`]: watch our key from the
    /// acquisition on (the watch starts "now"; when that is past our token,
    /// [`OwnKeyListener::key_watch_created`] reads the key once).
    fn start(&self) {
        self.watch_own_key(self.token);
    }
}
