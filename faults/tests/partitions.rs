//! Partitions between etcd members (scenarios 16-19): members on 127.0.0.2-4,
//! cut by nftables rules on `lo` (root and nft needed). Each test prints its
//! figure line and saves its outcome for the report.

use etcdlock_faults::scenarios::{self, Profile};

fn run(id: u32) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    let o = rt.block_on(scenarios::run(id, &Profile::short()));
    println!("{}", o.line());
    etcdlock_faults::report::save_outcome(&o);
    assert!(o.passed(), "{}", o.line());
}

#[test]
fn scenario_16_minority_leader() {
    run(16)
}
#[test]
fn scenario_17_isolated_follower_rejoins() {
    run(17)
}
#[test]
fn scenario_18_one_way_member_loss() {
    run(18)
}
#[test]
fn scenario_19_holder_member_partitioned() {
    run(19)
}
