//! Rolling restart (34) and rolling upgrades 3.4 -> 3.5 (35) and 3.5 -> 3.6 (36) of a
//! 3-member cluster under holders in every language. Each test prints its
//! figure line and saves its outcome for the report. Scenarios 35 and 36 build etcd
//! 3.5 and 3.6 (35, 36) with `faults/build-etcd.sh` unless they are cached
//! (`faults/test.sh` builds them in the background first).

use etcdlock_faults::scenarios;

fn run(id: u32) {
    scenarios::run_test(id)
}

#[test]
fn scenario_34_rolling_restart() {
    run(34)
}
#[test]
fn scenario_35_rolling_upgrade() {
    run(35)
}
#[test]
fn scenario_36_rolling_upgrade_3_6() {
    run(36)
}
