//! Benchmark floors: what etcd itself costs for the requests a lock must make,
//! measured with a raw etcd client and no etcdlock logic. Every benchmark
//! (the CLI's `etcdlock bench` and the C, Python, Node and Java benches)
//! reports its figures as ratios to these, so there is one definition here.
//! Only built with the cargo feature `bench`; not part of the stable API.
//!
//! - [`txn_delete_round`]: the least an uncontended lock + unlock can cost,
//!   two round trips carrying exactly the requests an uncontended etcdlock
//!   acquisition and release send, without its logic: one Txn that puts the
//!   lock key (an owner record as its value) with a lease if absent *and
//!   reads the queue* (the newest keys under the lock's prefix, as etcd's Go
//!   Mutex reads the owner in the same Txn) and counts the name's lock-delay
//!   records, then one Delete returning the deleted key.
//! - [`delete_to_event`]: a Delete sent on one connection until its event
//!   arrives on a synced watch of another connection, the least a handoff
//!   from one holder to the next can cost.

use std::time::{Duration, Instant};

use etcd_client::{EventType, PutOptions, TxnOp, WatchOptions};

use crate::{Error, ErrorCode, Result};

fn unavailable(e: etcd_client::Error) -> Error {
    Error::new(ErrorCode::Unavailable, e.to_string())
}

/// The lock prefix a floor key belongs to: everything up to and including its
/// last `/` (`name/` for a key `name/<lease>`); a key without `/` is its own prefix.
fn prefix_of(key: &[u8]) -> &[u8] {
    match key.iter().rposition(|b| *b == b'/') {
        Some(i) => &key[..=i],
        None => key,
    }
}

/// One round of the Txn+Delete floor on `etcd`: the Txn an uncontended
/// [`crate::Client::lock`] sends (put `key` with `lease`, 0: no lease, if
/// absent; read the newest keys of its prefix, see [`prefix_of`]: everything
/// up to the last `/`; count the lock-delay records of that name), then the
/// Delete its unlock sends. Returns the time both took. (Until 2026-11-25 the
/// Txn read only the first-created key and counted no records, and the unlock
/// was a Txn: docs/operations/benchmarks.md gives runs with either.)
pub async fn txn_delete_round(
    etcd: &mut etcd_client::Client,
    key: impl AsRef<[u8]>,
    lease: i64,
) -> Result<Duration> {
    let key = key.as_ref().to_vec();
    let prefix = prefix_of(&key).to_vec();
    let records =
        crate::engine::delay::Records::of(prefix.strip_suffix(b"/").unwrap_or(&prefix).to_vec());
    let put = TxnOp::put(
        key.clone(),
        crate::names::owner_info(),
        Some(PutOptions::new().with_lease(lease)),
    );
    let t = Instant::now();
    let txn = crate::engine::acquisition::queue_txn(&key, &prefix, put, &records, None);
    etcd.txn(txn).await.map_err(unavailable)?;
    etcd.delete(key, Some(etcd_client::DeleteOptions::new().with_prev_key()))
        .await
        .map_err(unavailable)?;
    Ok(t.elapsed())
}

/// `n` rounds of [`txn_delete_round`] on a connection of its own to
/// `endpoints`, with a lease of its own and the key `bench-floor-<pid>/<lease>`
/// (a lock key's shape), after `n / 10` warm-up rounds. The lease is revoked at the end.
pub async fn txn_delete<S: AsRef<str>>(endpoints: &[S], n: usize) -> Result<Vec<Duration>> {
    let mut etcd = etcd_client::Client::connect(endpoints, None)
        .await
        .map_err(unavailable)?;
    let lease = etcd.lease_grant(30, None).await.map_err(unavailable)?.id();
    let key = format!("bench-floor-{}/{lease:x}", std::process::id());
    let mut out = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let d = txn_delete_round(&mut etcd, &key, lease).await?;
        if i >= n / 10 {
            out.push(d);
        }
    }
    let _ = etcd.lease_revoke(lease).await;
    Ok(out)
}

/// `n` times (after `n / 10` warm-up rounds): put a key, then time a Delete
/// sent on one connection until its DELETE event arrives on a synced watch
/// opened on a second connection to `endpoints`.
pub async fn delete_to_event<S: AsRef<str>>(endpoints: &[S], n: usize) -> Result<Vec<Duration>> {
    delete_to_event_rounds(endpoints, n + n / 10, n / 10, None, Duration::ZERO).await
}

/// [`delete_to_event`] while something else loads the machine: a round every
/// `pace` (plus the round itself) until `until`, after 10 warm-up rounds. A
/// benchmark runs it beside its contenders to measure the handoff's floor
/// under the same load; the pace keeps the probe's own writes a small share.
pub async fn delete_to_event_until<S: AsRef<str>>(
    endpoints: &[S],
    until: Instant,
    pace: Duration,
) -> Result<Vec<Duration>> {
    delete_to_event_rounds(endpoints, usize::MAX, 10, Some(until), pace).await
}

async fn delete_to_event_rounds<S: AsRef<str>>(
    endpoints: &[S],
    rounds: usize,
    warm_up: usize,
    until: Option<Instant>,
    pace: Duration,
) -> Result<Vec<Duration>> {
    let mut writer = etcd_client::Client::connect(endpoints, None)
        .await
        .map_err(unavailable)?;
    let mut watcher = etcd_client::Client::connect(endpoints, None)
        .await
        .map_err(unavailable)?;
    static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let probe = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let key = format!("bench-event-{}-{probe}", std::process::id());
    let mut stream = watcher
        .watch(key.clone(), Some(WatchOptions::new()))
        .await
        .map_err(unavailable)?;
    let closed = || Error::new(ErrorCode::Unavailable, "the floor's watch stream ended");
    stream
        .message()
        .await
        .map_err(unavailable)?
        .ok_or_else(closed)?; // created
    let mut out = Vec::new();
    for i in 0..rounds {
        if until.is_some_and(|u| Instant::now() >= u) {
            break;
        }
        if !pace.is_zero() {
            tokio::time::sleep(pace).await;
        }
        writer
            .put(key.clone(), "x", None)
            .await
            .map_err(unavailable)?;
        loop {
            let m = stream
                .message()
                .await
                .map_err(unavailable)?
                .ok_or_else(closed)?;
            if !m.events().is_empty() {
                break;
            }
        }
        let t = Instant::now();
        writer
            .delete(key.clone(), None)
            .await
            .map_err(unavailable)?;
        loop {
            let m = stream
                .message()
                .await
                .map_err(unavailable)?
                .ok_or_else(closed)?;
            if m.events()
                .iter()
                .any(|e| e.event_type() == EventType::Delete)
            {
                break;
            }
        }
        if i >= warm_up {
            out.push(t.elapsed());
        }
    }
    Ok(out)
}

/// `n` uncontended lock + unlock rounds of the core itself on `client` (no
/// binding in the loop), each timed: the reference a binding's own figure is
/// compared with to see what the binding adds.
pub async fn lock_unlock(client: &crate::Client, name: &str, n: usize) -> Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let g = client.lock(name).await?;
        g.unlock().await?;
        out.push(t.elapsed());
    }
    Ok(out)
}

/// The Txn+Delete floor and the core's uncontended lock + unlock on `client`,
/// measured in alternating blocks of 50 rounds (after warm-up rounds of
/// both), so both see the same machine: on a shared 2-core machine the floor
/// drifted 20 % between two back-to-back runs of 2,000 rounds. Returns
/// (floor, ours), `n` samples each.
pub async fn interleaved<S: AsRef<str>>(
    endpoints: &[S],
    client: &crate::Client,
    name: &str,
    n: usize,
) -> Result<(Vec<Duration>, Vec<Duration>)> {
    let mut etcd = etcd_client::Client::connect(endpoints, None)
        .await
        .map_err(unavailable)?;
    let lease = etcd.lease_grant(30, None).await.map_err(unavailable)?.id();
    let key = format!("bench-floor-{}/{lease:x}", std::process::id());
    let (mut floor, mut ours) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n / 10 {
        txn_delete_round(&mut etcd, &key, lease).await?;
        lock_unlock(client, name, 1).await?;
    }
    while floor.len() < n {
        let block = 50.min(n - floor.len());
        for _ in 0..block {
            floor.push(txn_delete_round(&mut etcd, &key, lease).await?);
        }
        ours.extend(lock_unlock(client, name, block).await?);
    }
    let _ = etcd.lease_revoke(lease).await;
    Ok((floor, ours))
}

#[cfg(test)]
mod tests {
    use super::prefix_of;

    #[test]
    fn prefix_is_up_to_the_last_slash() {
        assert_eq!(prefix_of(b"name/1a2b"), b"name/");
        assert_eq!(prefix_of(b"a/b/k"), b"a/b/");
        assert_eq!(prefix_of(b"plain"), b"plain");
        assert_eq!(prefix_of(b"dir/"), b"dir/");
    }
}
