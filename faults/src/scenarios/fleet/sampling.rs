//! Scenario 37's measurements: a sampler of every hold's validity (a change
//! is a renewal proved by etcd), a latency probe, and the keep-alive
//! interval read from the sampler.

use std::sync::Mutex;

use etcdlock::poison::Locked;
use etcdlock::Guard;

use super::*;

/// Per client, each change of its hold's validity seen by the sampler:
/// (when it was seen, the new `valid_until`), CLOCK_MONOTONIC ns. A change
/// is a renewal proved by etcd.
pub(super) type Renewals = Arc<Mutex<Vec<Vec<(u64, u64)>>>>;

/// Sample every hold's `valid_until` every 20 ms until `stop`.
pub(super) fn spawn_sampler(
    guards: Vec<Arc<Guard>>,
    out: Renewals,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last = vec![0u64; guards.len()];
        while !stop.is_cancelled() {
            let now = clock_monotonic_ns();
            let mut changed = Vec::new();
            for (i, g) in guards.iter().enumerate() {
                let vu = instant_to_mono_ns(g.valid_until());
                if vu != last[i] {
                    last[i] = vu;
                    changed.push((i, vu));
                }
            }
            if !changed.is_empty() {
                let mut seen = out.locked();
                for (i, vu) in changed {
                    seen[i].push((now, vu));
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

/// A probe of etcd's latency as a client sees it: a linearizable read
/// (`Client::ping`) every 50 ms: (start, latency or None on error/timeout), ns.
pub(super) type Probes = Arc<Mutex<Vec<(u64, Option<u64>)>>>;

pub(super) fn spawn_probe(
    c: Client,
    out: Probes,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            let t = clock_monotonic_ns();
            let r = tokio::time::timeout(Duration::from_secs(3), c.ping()).await;
            let lat = match r {
                Ok(Ok(_)) => Some(clock_monotonic_ns() - t),
                _ => None,
            };
            out.locked().push((t, lat));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

/// The keep-alive interval the fleet runs at, measured before any fault
/// (a step across a fault is longer): the median step of `valid_until`
/// between two renewals (each is send time + TTL - margin), once there are
/// 100 steps.
pub(super) fn measured_interval(renewals: &Renewals) -> Option<Duration> {
    let seen = renewals.locked();
    let mut steps: Vec<u64> = seen
        .iter()
        .flat_map(|v| v.windows(2).map(|w| w[1].1.saturating_sub(w[0].1)))
        .filter(|d| *d > 0)
        .collect();
    if steps.len() < 100 {
        return None;
    }
    steps.sort_unstable();
    Some(Duration::from_nanos(steps[steps.len() / 2]))
}

pub(super) fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
