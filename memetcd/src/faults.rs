//! Faults a test injects into a store: silence (the store answers nothing,
//! as an etcd that hangs), and one client stalled (its requests go
//! unanswered while every other client goes on, as a client cut off from
//! etcd). Time goes on meanwhile: leases expire at their time-to-live and
//! the keys under them are deleted, as on etcd.
//!
//! A request waits at the gate ([`Faults::gate`]) before the store sees it,
//! and is answered when the fault ends (if its caller still waits, as a
//! packet that a healed network delivers late). Watch streams deliver
//! nothing while their connection waits. The connection itself stays open:
//! what goes unanswered is etcd's API, not HTTP/2's pings.
//!
//! A client is known by its lease: a connection that was granted a lease,
//! or carried a keep-alive or a time-to-live question for it, is that
//! lease's client's connection; every request on it waits while the lease
//! is stalled, and so does any request naming the lease on any connection.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

#[derive(Default)]
struct State {
    silent_until: Option<Instant>,
    /// Stalled leases, until when.
    stalled: HashMap<i64, Instant>,
    /// The leases each connection has carried.
    conns: HashMap<SocketAddr, HashSet<i64>>,
}

impl State {
    /// Until when a request on `conn` naming `leases` waits: `None` to go now.
    fn held_until(
        &self,
        conn: Option<SocketAddr>,
        leases: &[i64],
        now: Instant,
    ) -> Option<Instant> {
        let mut until = self.silent_until.filter(|t| *t > now);
        let mut stall = |id: &i64| {
            if let Some(t) = self.stalled.get(id).filter(|t| **t > now) {
                until = Some(until.map_or(*t, |u| u.max(*t)));
            }
        };
        leases.iter().for_each(&mut stall);
        if let Some(ids) = conn.and_then(|c| self.conns.get(&c)) {
            ids.iter().for_each(stall);
        }
        until
    }
}

/// `d` from now; a span past what an instant can hold (`Duration::MAX`) is
/// a century, which no test outlives.
fn from_now(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
}

/// The faults of one store.
pub(crate) struct Faults {
    state: Mutex<State>,
    /// Bumped whenever a fault starts or ends early, for waiting requests to look again.
    changed: tokio::sync::watch::Sender<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            state: Mutex::default(),
            changed: tokio::sync::watch::channel(0).0,
        }
    }
}

impl Faults {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// Tie connection `conn` to the client of lease `id`.
    pub fn note(&self, conn: Option<SocketAddr>, id: i64) {
        if let Some(c) = conn {
            let mut s = self.state();
            if s.conns.get(&c).is_some_and(|ids| ids.contains(&id)) {
                return;
            }
            s.conns.entry(c).or_default().insert(id);
        }
    }

    /// Wait while the store is silent, or the client of `conn` or of any
    /// of `leases` is stalled.
    pub async fn gate(&self, conn: Option<SocketAddr>, leases: &[i64]) {
        let mut changes = self.changed.subscribe();
        loop {
            changes.borrow_and_update();
            let Some(until) = self.state().held_until(conn, leases, Instant::now()) else {
                return;
            };
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                r = changes.changed() => if r.is_err() { return },
            }
        }
    }

    /// The store answers nothing for `d` (from now; zero ends a silence).
    pub fn silence(&self, d: Duration) {
        self.state().silent_until = Some(from_now(d));
        self.bump();
    }

    /// The client of lease `id` gets no answer for `d` (zero ends a stall).
    pub fn stall(&self, id: i64, d: Duration) {
        self.state().stalled.insert(id, from_now(d));
        self.bump();
    }

    /// End every silence and stall now.
    pub fn resume(&self) {
        {
            let mut s = self.state();
            s.silent_until = None;
            s.stalled.clear();
        }
        self.bump();
    }

    /// Forget a lease that is gone (kept small in long tests), unless its
    /// client is stalled: a client cut off stays cut off when its lease
    /// runs out, as over a broken network, until the stall ends.
    pub fn forget(&self, id: i64) {
        let mut s = self.state();
        let now = Instant::now();
        s.stalled.retain(|_, until| *until > now);
        if s.stalled.contains_key(&id) {
            return;
        }
        s.conns.retain(|_, ids| {
            ids.remove(&id);
            !ids.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[tokio::test]
    async fn a_stall_holds_its_clients_connection_and_lease_only() {
        let f = Faults::default();
        let a: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:1001".parse().unwrap();
        f.note(Some(a), 7);
        f.stall(7, 300 * MS);
        let t0 = Instant::now();
        f.gate(Some(b), &[]).await;
        assert!(t0.elapsed() < 100 * MS, "another connection goes on");
        f.gate(Some(a), &[]).await;
        assert!(t0.elapsed() >= 300 * MS, "the client's connection waits");
        f.stall(7, 200 * MS);
        let t1 = Instant::now();
        f.gate(Some(b), &[7]).await;
        assert!(t1.elapsed() >= 200 * MS, "a request naming the lease waits");
    }

    #[tokio::test]
    async fn a_stalled_client_stays_stalled_after_its_lease_is_gone() {
        let f = Faults::default();
        let a: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        f.note(Some(a), 7);
        f.stall(7, 300 * MS);
        f.forget(7);
        let t0 = Instant::now();
        f.gate(Some(a), &[]).await;
        assert!(t0.elapsed() >= 300 * MS, "still stalled");
        f.forget(7);
        let t1 = Instant::now();
        f.gate(Some(a), &[]).await;
        assert!(t1.elapsed() < 100 * MS, "forgotten once the stall ended");
    }

    #[test]
    fn a_span_past_any_instant_is_no_panic() {
        let f = Faults::default();
        f.silence(Duration::MAX);
        f.stall(1, Duration::MAX);
        f.resume();
    }

    #[tokio::test]
    async fn silence_holds_everyone_and_resume_ends_it_early() {
        let f = std::sync::Arc::new(Faults::default());
        f.silence(Duration::from_secs(60));
        let g = f.clone();
        let t0 = Instant::now();
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            g.gate(None, &[]).await;
            let _ = tx.send(());
        });
        assert!(
            tokio::time::timeout(200 * MS, &mut rx).await.is_err(),
            "silent"
        );
        f.resume();
        rx.await.unwrap();
        assert!(t0.elapsed() < Duration::from_secs(10));
    }
}
