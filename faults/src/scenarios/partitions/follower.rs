//! One client on a follower that stops hearing the leader.

use super::*;

/// A client whose requests go to a follower that stops hearing the leader
/// (what the leader sends it is dropped, one way) moves to the leader: a
/// lock and unlock completes within 3 s of the cut, a lock held through it
/// is kept, and the client ends on another member. `pre_vote`: etcd's
/// `--pre-vote`. Off (etcd 3.4's default), the follower campaigns every
/// election timeout in a higher term that its peers, hearing their leader,
/// ignore; on (3.5's default), it names no leader. Either way it still
/// answers its status, as a slow member would, and its requests never
/// complete. Returns the figure line.
pub async fn client_on_cut_off_follower(pre_vote: bool) -> Result<String, String> {
    const BOUND: Duration = Duration::from_secs(3);
    const TTL: i64 = 4;
    let mut parts = Partitions::prepare(3)?;
    let mut cfg = parts.config();
    cfg.extra_args.push(format!("--pre-vote={pre_vote}"));
    let etcd = blocking(|| Etcd::start(cfg));
    parts.attach(&etcd);
    let eps = etcd.endpoints();
    let leader = await_leader(&eps, &[0, 1, 2], Duration::from_secs(10))
        .await
        .ok_or("no leader within 10 s")?;
    let f = (leader + 1) % 3;
    let ns = unique_ns("cutfollower");
    let o = opts(&eps, &ns, TTL, Duration::from_secs(2));
    let mut on_f = None;
    for _ in 0..50 {
        let c = Client::connect(o.clone())
            .await
            .map_err(|e| format!("connect: {e}"))?;
        if c.member_in_use() == eps[f] {
            on_f = Some(c);
            break;
        }
        c.close().await;
    }
    let c = on_f.ok_or("50 clients connected and none uses the follower")?;
    let held = c
        .lock("held")
        .await
        .map_err(|e| format!("lock before the cut: {e}"))?;
    parts.cut(leader, f)?;
    let cut = Instant::now();
    let (mut first, mut cycles, mut errors) = (None, 0, Vec::new());
    // Past the TTL: the held lock's renewals must move too.
    while cut.elapsed() < Duration::from_secs(TTL as u64 + 2) {
        let r = async {
            let g = c.lock("cycled").await?;
            g.unlock().await
        }
        .await;
        match r {
            Ok(()) => {
                first.get_or_insert(cut.elapsed());
                cycles += 1;
            }
            Err(e) => errors.push(format!("{:.1} s: {e}", cut.elapsed().as_secs_f64())),
        }
    }
    let lost = held.loss();
    let in_use = c.member_in_use();
    let _ = held.unlock().await;
    parts.heal()?;
    c.close().await;
    let figure = format!(
        "pre-vote {pre_vote}: first lock+unlock {} ms after the cut, {cycles} in {} s, client on {} (follower {}), held lock {}; errors: {errors:?}",
        first.map_or(-1, |d| d.as_millis() as i64),
        TTL + 2,
        in_use,
        eps[f],
        lost.map_or("kept".to_string(), |l| format!("lost ({})", l.reason)),
    );
    match first {
        Some(d) if d <= BOUND && lost.is_none() && in_use != eps[f] => Ok(figure),
        _ => Err(figure),
    }
}
