//! A fleet of a few hundred clients on one 3-member cluster under a leader
//! kill and a cluster-wide pause (scenario 37). Its own test binary, so that
//! `faults/test.sh` runs it alone (no other scenario's etcd beside it on the
//! two cores). Prints its figure line and saves its outcome for the report.

use etcdlock_faults::scenarios;

#[test]
fn scenario_37_fleet_faults() {
    scenarios::run_test(37)
}
