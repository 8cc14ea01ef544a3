//! Partitions between etcd members (scenarios 16-19): members on 127.0.0.2-4,
//! cut by nftables rules on `lo` (root and nft needed). Each test prints its
//! figure line and saves its outcome for the report.

use etcdlock_faults::scenarios;

fn run(id: u32) {
    scenarios::run_test(id)
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

/// A client on a follower that stops hearing the leader moves to the leader,
/// with etcd's pre-vote off (3.4's default) and on (3.5's).
#[test]
fn a_client_on_a_follower_cut_off_from_the_leader_moves() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    for pre_vote in [false, true] {
        match rt.block_on(scenarios::client_on_cut_off_follower(pre_vote)) {
            Ok(figure) => println!("{figure}"),
            Err(e) => panic!("{e}"),
        }
    }
}

/// Debug aid: cut the leader off and print what each member says.
#[test]
#[ignore]
fn debug_cut() {
    use etcdlock_faults::partition::Partitions;
    use etcdlock_testkit::Etcd;
    let mut parts = Partitions::prepare(3).unwrap();
    let etcd = Etcd::start(parts.config());
    parts.attach(&etcd);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let leader = etcd.leader().unwrap();
    println!("leader {leader}");
    parts.isolate(leader).unwrap();
    for _ in 0..10 {
        std::thread::sleep(std::time::Duration::from_millis(300));
        for (i, m) in etcd.members.iter().enumerate() {
            let out = std::process::Command::new(etcdlock_testkit::etcdctl_bin())
                .env("ETCDCTL_API", "3")
                .args([
                    "--endpoints",
                    &m.endpoint(),
                    "endpoint",
                    "status",
                    "-w",
                    "json",
                    "--command-timeout=500ms",
                ])
                .output()
                .unwrap();
            println!(
                "m{i}: {}",
                String::from_utf8_lossy(&out.stdout)
                    .chars()
                    .take(300)
                    .collect::<String>()
            );
        }
    }
    println!("{}", parts.listing());
}
