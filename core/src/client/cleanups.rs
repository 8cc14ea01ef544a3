//! The keys a client is still deleting after abandoned acquisitions.

use crate::poison::Locked;
use std::time::{Duration, Instant};

/// How long a call that gives up (timeout, cancel, error) waits for its key's
/// delete before it returns; the delete goes on in the background after that.
/// A healthy etcd deletes in a few ms; a hung one must not stretch the call
/// past its bound. This client's own `try_lock` on the same name waits for
/// the delete instead ([`Cleanups`]), so it never meets its own ghost.
pub(crate) const CLEANUP_GRACE: Duration = Duration::from_millis(50);

/// The keys this client is still deleting after an abandoned acquisition,
/// counted per lock prefix, so that a `try_lock` (or timeout-zero lock) on the
/// same lock waits for them instead of finding its own ghost (jetcd issue 291).
#[derive(Default)]
pub(crate) struct Cleanups {
    pending: std::sync::Mutex<std::collections::HashMap<Vec<u8>, usize>>,
    done: tokio::sync::Notify,
}

impl Cleanups {
    pub(crate) fn begin(&self, prefix: &[u8]) {
        *self.pending.locked().entry(prefix.to_vec()).or_default() += 1;
    }

    pub(crate) fn end(&self, prefix: &[u8]) {
        let mut m = self.pending.locked();
        if let Some(n) = m.get_mut(prefix) {
            *n -= 1;
            if *n == 0 {
                m.remove(prefix);
            }
        }
        drop(m);
        self.done.notify_waiters();
    }

    /// Returns once no key under `prefix` is being deleted by this client,
    /// or at `until`.
    pub(crate) async fn settled(&self, prefix: &[u8], until: Option<Instant>) {
        loop {
            let notified = self.done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self.pending.locked().contains_key(prefix) {
                return;
            }
            match until {
                Some(u) => {
                    if tokio::time::timeout_at(tokio::time::Instant::from_std(u), notified)
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                None => notified.await,
            }
        }
    }
}

/// One key's entry in [`Cleanups`], ended when the delete is done (or the
/// task that runs it is dropped).
pub(crate) struct CleanupTicket {
    cleanups: std::sync::Arc<Cleanups>,
    prefix: Vec<u8>,
}

impl CleanupTicket {
    pub(crate) fn new(cleanups: &std::sync::Arc<Cleanups>, key: &[u8]) -> CleanupTicket {
        let end = key
            .iter()
            .rposition(|b| *b == b'/')
            .map(|i| i + 1)
            .unwrap_or(0);
        let prefix = key[..end].to_vec();
        cleanups.begin(&prefix);
        CleanupTicket {
            cleanups: cleanups.clone(),
            prefix,
        }
    }
}

impl Drop for CleanupTicket {
    fn drop(&mut self) {
        self.cleanups.end(&self.prefix);
    }
}
