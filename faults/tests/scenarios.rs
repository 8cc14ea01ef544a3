//! The fault scenarios against real etcd. Each test prints its pass figure
//! (`scenario N name: ...`). Child holder processes re-run this binary with
//! `ETCDLOCK_FAULTS_CHILD` set; `child_holder` is their entry point.

use etcdlock_faults::scenarios;

/// Child mode entry (does nothing in a normal run).
#[test]
fn child_holder() {
    etcdlock_faults::child_main_if_requested();
}

fn run(id: u32) {
    scenarios::run_test(id)
}

/// Run by faults/test.sh after the scenarios: `summary.json` and `SUMMARY.md`
/// from the outcomes they saved; prints the table.
#[test]
#[ignore]
fn write_summary() {
    let outcomes = etcdlock_faults::report::saved_outcomes();
    let wall = std::env::var("ETCDLOCK_FAULTS_WALL_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0);
    let md = etcdlock_faults::report::write("short", &outcomes, wall);
    println!("{md}");
    println!(
        "report: {}",
        etcdlock_faults::report::report_dir().display()
    );
}

#[test]
fn scenario_01_baseline() {
    run(1)
}
#[test]
fn scenario_02_holder_sigstop() {
    run(2)
}
#[test]
fn scenario_02_holder_sigstop_python() {
    run(12)
}
#[test]
fn scenario_02_holder_sigstop_java() {
    run(20)
}
#[test]
fn scenario_02_holder_sigstop_node() {
    run(21)
}
#[test]
fn scenario_02_holder_sigstop_c() {
    run(22)
}
#[test]
fn scenario_03_holder_kill9() {
    run(3)
}
#[test]
fn scenario_03_holder_kill9_python() {
    run(13)
}
#[test]
fn scenario_03_holder_kill9_java() {
    run(23)
}
#[test]
fn scenario_03_holder_kill9_node() {
    run(24)
}
#[test]
fn scenario_03_holder_kill9_c() {
    run(25)
}
#[test]
fn scenario_04_member_sigstop() {
    run(4)
}
#[test]
fn scenario_05_member_kill_restart() {
    run(5)
}
#[test]
fn scenario_06_leader_change_after_holder_death() {
    run(6)
}
#[test]
fn scenario_07_client_blackholed() {
    run(7)
}
#[test]
fn scenario_08_proxy_delay_and_drop() {
    run(8)
}
#[test]
fn scenario_09_waiters_under_compaction() {
    run(9)
}
#[test]
fn scenario_10_acquire_response_dropped() {
    run(10)
}
#[test]
fn scenario_11_wall_clock_jumps() {
    run(11)
}
#[test]
fn scenario_14_recipes_holder_sigstop() {
    run(14)
}
#[test]
fn scenario_15_recipes_member_kill() {
    run(15)
}
#[test]
fn scenario_26_grpc_proxy() {
    run(26)
}
#[test]
fn scenario_27_grpc_lb_goaway() {
    run(27)
}
#[test]
fn scenario_28_close_during_fault() {
    run(28)
}
#[test]
fn scenario_29_client_blackholed_tls() {
    run(29)
}
#[test]
fn scenario_30_member_kill_restart_tls() {
    run(30)
}
#[test]
fn scenario_31_leader_change_after_holder_death_tls() {
    run(31)
}
#[test]
fn scenario_32_grpc_lb_goaway_tls() {
    run(32)
}
#[test]
fn scenario_33_close_during_fault_tls() {
    run(33)
}
