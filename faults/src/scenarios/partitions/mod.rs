//! Partitions between etcd members (not between a client and a member):
//! a minority leader, an isolated follower rejoining, one-way loss between
//! two members, and a holder whose member is cut off while it holds.
//! Members on 127.0.0.2-4, cut by nftables (see [`crate::partition`]).

use super::*;
use crate::partition::Partitions;

mod follower;
mod holder;
mod member;

pub use follower::client_on_cut_off_follower;
pub use holder::holder_member_partitioned;
pub use member::{isolated_follower, minority_leader, one_way_loss};

struct Cluster {
    _etcd: Etcd,
    parts: Partitions,
    eps: Vec<String>,
}

fn start_cluster() -> Result<Cluster, String> {
    let mut parts = Partitions::prepare(3)?;
    let cfg = parts.config();
    let etcd = blocking(|| Etcd::start(cfg));
    parts.attach(&etcd);
    let eps = etcd.endpoints();
    Ok(Cluster {
        _etcd: etcd,
        parts,
        eps,
    })
}

/// (member id, the leader it knows) of member `ep`, asked directly.
async fn status(ep: &str) -> Option<(u64, u64)> {
    // Generous timeouts: a loaded machine answers late, and a poll that
    // times out only delays the measurement by one round.
    let mut c = tokio::time::timeout(
        Duration::from_millis(1000),
        etcd_client::Client::connect(
            [ep],
            Some(etcd_client::ConnectOptions::new().with_timeout(Duration::from_millis(900))),
        ),
    )
    .await
    .ok()?
    .ok()?;
    let s = tokio::time::timeout(Duration::from_millis(1000), c.status())
        .await
        .ok()?
        .ok()?;
    Some((s.header()?.member_id(), s.leader()))
}

/// The member that `among` agree is the leader (every one of them names the
/// same member, itself one of them), polled until `timeout`.
async fn await_leader(eps: &[String], among: &[usize], timeout: Duration) -> Option<usize> {
    let start = Instant::now();
    loop {
        let mut ids = Vec::new();
        let mut leaders = Vec::new();
        for &i in among {
            if let Some((id, l)) = status(&eps[i]).await {
                ids.push((i, id));
                leaders.push(l);
            }
        }
        if leaders.len() == among.len() && leaders.iter().all(|l| *l == leaders[0] && *l != 0) {
            if let Some((i, _)) = ids.iter().find(|(_, id)| *id == leaders[0]) {
                return Some(*i);
            }
        }
        if start.elapsed() > timeout {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// After the last heal: wait until all members agree on a leader and a read
/// through `rawc` succeeds (a heal may end in one more election), so the
/// resource history can be read.
async fn settle(o: &mut Outcome, eps: &[String], rawc: &mut etcd_client::Client) {
    if await_leader(eps, &[0, 1, 2], Duration::from_secs(10))
        .await
        .is_none()
    {
        o.fail("no leader agreed by all members within 10 s of the last heal");
    }
    let start = Instant::now();
    while rawc.get("\0", None).await.is_err() && start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
