//! The store as the gRPC services share it: one Mvcc behind a lock, and the response header of a member.

use super::*;

/// The store and what wakes its watchers and its lease reaper.
pub(crate) struct Store {
    m: Mutex<Mvcc>,
    pub member_id: u64,
    /// The current revision, for watch streams to wake on.
    pub rev_tx: tokio::sync::watch::Sender<i64>,
    /// A lease was granted (its expiry may be the earliest).
    pub lease_added: tokio::sync::Notify,
    /// What a test made go wrong ([`crate::faults`]).
    pub faults: crate::faults::Faults,
}

impl Store {
    pub fn new(member_id: u64, seed: i64) -> Store {
        Store {
            m: Mutex::new(Mvcc::new(seed)),
            member_id,
            rev_tx: tokio::sync::watch::channel(1).0,
            lease_added: tokio::sync::Notify::new(),
            faults: Default::default(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Mvcc> {
        self.m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `f` on the store; wake watchers if it wrote. Returns the result
    /// and the header for it.
    pub fn with<T>(
        &self,
        f: impl FnOnce(&mut Mvcc) -> Result<T, Status>,
    ) -> Result<(T, pb::ResponseHeader), Status> {
        let mut m = self.lock();
        let before = m.rev;
        let r = f(&mut m)?;
        let rev = m.rev;
        drop(m);
        if rev != before {
            self.rev_tx.send_replace(rev);
        }
        Ok((r, self.header(rev)))
    }

    /// End lease `id` now, as its time-to-live would: its keys go at one
    /// revision. False if there is no such lease.
    pub fn expire(&self, id: i64) -> bool {
        let gone = self.with(|m| m.revoke(id)).is_ok();
        self.faults.forget(id);
        gone
    }

    pub fn header(&self, rev: i64) -> pb::ResponseHeader {
        pb::ResponseHeader {
            cluster_id: CLUSTER_ID,
            member_id: self.member_id,
            revision: rev,
            raft_term: 2,
        }
    }

    /// Revoke leases as they expire, each at its own revision (as etcd's
    /// leader does, one revoke request per lease). Runs for the store's life.
    pub async fn reap(self: std::sync::Arc<Self>) {
        loop {
            let next = self.lock().leases.values().map(|l| l.expiry).min();
            let until = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                _ = self.lease_added.notified() => continue,
            }
            let now = Instant::now();
            let _ = self.with(|m| {
                let mut due: Vec<(Instant, i64)> = m
                    .leases
                    .iter()
                    .filter(|(_, l)| l.expiry <= now)
                    .map(|(id, l)| (l.expiry, *id))
                    .collect();
                due.sort();
                for (_, id) in due {
                    m.revoke(id)?;
                    self.faults.forget(id);
                }
                Ok(())
            });
        }
    }
}
