//! Scenario 37's queues: names held by one client with two waiters of two
//! other clients queued behind, in a known order; after the storm each is
//! handed over and must go to its waiters in that order.

use etcdlock::Guard;

use super::*;

/// A waiter's lock call: its guard and when it was granted.
pub(super) type Waiter = tokio::task::JoinHandle<etcdlock::Result<(Guard, u64)>>;

/// [`FLEET_QUEUES`] names: `q{j}` held by client `j`, client `Q + j` queued
/// first behind it and client `2Q + j` second.
pub(super) struct Queues {
    /// The holders' guards, by name.
    pub(super) guards: Vec<Arc<Guard>>,
    acquired: Vec<u64>,
    /// The waiters: every name's first, then every name's second.
    pub(super) waiters: Vec<Waiter>,
}

impl Queues {
    /// Take the names and queue the waiters (the seconds only once every
    /// first is in etcd); check etcd holds each queue in that order.
    pub(super) async fn form(
        members: &[Member],
        rawc: &mut etcd_client::Client,
        ns: &str,
        o: &mut Outcome,
    ) -> Queues {
        let mut q = Queues {
            guards: Vec::new(),
            acquired: Vec::new(),
            waiters: Vec::new(),
        };
        for (j, m) in members.iter().enumerate().take(FLEET_QUEUES) {
            match m.client.lock(&queue_name(j)).await {
                Ok(g) => {
                    q.acquired.push(clock_monotonic_ns());
                    q.guards.push(Arc::new(g));
                }
                Err(e) => {
                    o.fail(format!("{} lock {}: {e}", client_name(j), queue_name(j)));
                    return q;
                }
            }
        }
        for rank in 1..=2 {
            for j in 0..FLEET_QUEUES {
                let c = members[rank * FLEET_QUEUES + j].client.clone();
                let name = queue_name(j);
                q.waiters.push(tokio::spawn(async move {
                    let g = c.lock(&name).await?;
                    Ok((g, clock_monotonic_ns()))
                }));
            }
            let queued = await_key_count(
                rawc,
                &format!("{ns}q"),
                (rank + 1) * FLEET_QUEUES,
                Duration::from_secs(10),
            )
            .await;
            if queued.is_none() {
                o.fail(format!("the rank {rank} waiters did not all queue"));
                return q;
            }
        }
        // By create revision: the holder, then the first and the second waiter.
        let mut in_order = 0;
        if let Ok(keys) = keys_under(rawc, &format!("{ns}q")).await {
            for j in 0..FLEET_QUEUES {
                let prefix = format!("{ns}{}/", queue_name(j));
                let leases: Vec<i64> = keys
                    .iter()
                    .filter(|(k, _, _)| k.starts_with(&prefix))
                    .map(|(_, _, l)| *l)
                    .collect();
                let want: Vec<i64> = [j, FLEET_QUEUES + j, 2 * FLEET_QUEUES + j]
                    .iter()
                    .map(|&i| members[i].own.lease_id())
                    .collect();
                in_order += (leases == want) as usize;
            }
        }
        o.expect(in_order == FLEET_QUEUES, || {
            format!("{in_order}/{FLEET_QUEUES} queues in etcd in the order they were made")
        });
        q
    }

    /// Whether every name has its holder and both waiters.
    pub(super) fn complete(&self) -> bool {
        self.guards.len() == FLEET_QUEUES && self.waiters.len() == 2 * FLEET_QUEUES
    }

    /// Each holder unlocks; the first waiter must be granted (not the
    /// second), write, unlock; then the second. Every hold recorded.
    /// Returns the names handed over in queue order with rising tokens, and
    /// the longest handoff (unlock call to the next grant), ms.
    pub(super) async fn grant_in_order(
        mut self,
        checker: &Checker,
        counters: &Counters,
        o: &mut Outcome,
    ) -> (usize, u64) {
        let (mut in_order, mut max_handoff) = (0, 0u64);
        if !self.complete() {
            return (0, 0);
        }
        let mut second: Vec<Waiter> = self.waiters.drain(FLEET_QUEUES..).collect();
        let mut first: Vec<Waiter> = std::mem::take(&mut self.waiters);
        for j in 0..FLEET_QUEUES {
            let (h, w1, w2) = (&self.guards[j], &mut first[j], &mut second[j]);
            let released = clock_monotonic_ns();
            if let Err(e) = release_ref(checker, h, self.acquired[j], &client_name(j)).await {
                o.fail(e);
            }
            let granted = tokio::time::timeout(Duration::from_secs(10), async {
                tokio::select! {
                    biased;
                    r = &mut *w1 => (1, r),
                    r = &mut *w2 => (2, r),
                }
            })
            .await;
            let (g1, at1) = match granted {
                Ok((1, Ok(Ok(x)))) => x,
                Ok((rank, Ok(Ok(_)))) => {
                    o.fail(format!(
                        "{}: waiter {rank} was granted first, not the first in the queue",
                        queue_name(j)
                    ));
                    continue;
                }
                other => {
                    o.fail(format!(
                        "{}: no waiter granted within 10 s of the unlock: {other:?}",
                        queue_name(j)
                    ));
                    continue;
                }
            };
            max_handoff = max_handoff.max(ms_between(released, at1).max(0) as u64);
            let t1 = g1.fencing_token();
            let op = guarded_write(&g1).await;
            let released1 = clock_monotonic_ns();
            let first_name = client_name(FLEET_QUEUES + j);
            release_and_record_ops(
                checker,
                counters,
                queue_name(j),
                &g1,
                (0, at1),
                released1,
                &first_name,
                vec![op],
            )
            .await;
            match tokio::time::timeout(Duration::from_secs(10), &mut *w2).await {
                Ok(Ok(Ok((g2, at2)))) => {
                    max_handoff = max_handoff.max(ms_between(released1, at2).max(0) as u64);
                    let t2 = g2.fencing_token();
                    let op = guarded_write(&g2).await;
                    let second_name = client_name(2 * FLEET_QUEUES + j);
                    release_and_record_ops(
                        checker,
                        counters,
                        queue_name(j),
                        &g2,
                        (0, at2),
                        clock_monotonic_ns(),
                        &second_name,
                        vec![op],
                    )
                    .await;
                    in_order += (h.fencing_token() < t1 && t1 < t2) as usize;
                }
                other => o.fail(format!(
                    "{}: second waiter not granted within 10 s: {other:?}",
                    queue_name(j)
                )),
            }
        }
        (in_order, max_handoff)
    }
}
