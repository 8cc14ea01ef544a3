#!/usr/bin/env bash
# Fleet faults at fleet size (issue 60, item 3): scenario 37 of the fault
# suite (faults/tests/fleet.rs) at each N of --clients, one run each: N
# clients in one process, each its own connection and lease, holding a lock
# of its own (20 names with two waiters queued behind each) on a 3-member
# etcd, through its rounds (leader SIGKILL + restart, every member SIGSTOPped
# past one keep-alive interval, every member restarted one at a time within
# the TTL). Every hold whose lease lived must survive (0 false losses),
# every client renew again within the bound, the waiters be granted in
# order, 0 checker violations and porcupine ok. CI runs N = 300
# (faults/test.sh); ETCDLOCK_FLEET_CLIENTS sets N here.
# Builds the fault suite (the dev profile, dependencies at opt-level 1) and porcupine the way faults/test.sh does.
# Prints, per N: the load average before it, the figure line (on a failure
# it ends in FAILED: and the failures), took:, pass/fail and the load
# average after; exits non-zero if one failed.
# Usage: bench/fleet_faults.sh [--clients 1000,2000,5000]
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=1000,2000,5000
while [ $# -gt 0 ]; do case "$1" in
  --clients) CLIENTS=$2; shift 2;;
  *) echo "usage: $0 [--clients N,N,...]" >&2; exit 2;;
esac; done

# Each client holds a connection (and etcd a stream and a socket for it):
# raise the soft open-files limit to the hard one; etcd's members inherit it.
ulimit -n "$(ulimit -Hn)"
echo "open files limit: $(ulimit -n) (hard $(ulimit -Hn)); $(nproc) cores" >&2

tdir="${CARGO_TARGET_DIR:-$PWD/target}"
command -v go >/dev/null || { echo "Go is missing (porcupine checks every history)" >&2; exit 1; }
mkdir -p "$tdir/porcupine"
(cd faults/porcupine && go build -o "$tdir/porcupine/etcdlock-porcupine" .)
export ETCDLOCK_FAULTS_PORCUPINE="$tdir/porcupine/etcdlock-porcupine"
cargo test -q -p etcdlock-faults --test fleet --no-run 2>&1 | grep -E '^error' && exit 1

failed=0
for n in ${CLIENTS//,/ }; do
  log="$(mktemp)"
  echo "== N=$n $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg)"
  start=$(date +%s)
  set +e
  ETCDLOCK_FLEET_CLIENTS=$n cargo test -q -p etcdlock-faults --test fleet -- --nocapture >"$log" 2>&1
  status=$?
  set -e
  end=$(date +%s)
  # The figure line (printed again in the failed assertion's message) and took:.
  grep -m1 '^scenario 37' "$log" || true
  grep '^took:' "$log" || true
  if [ "$status" -eq 0 ]; then
    echo "N=$n: pass ($((end - start)) s wall; load average after $(cut -d' ' -f1-3 /proc/loadavg))"
  else
    failed=1
    echo "N=$n: FAIL (exit $status, $((end - start)) s wall; load average after $(cut -d' ' -f1-3 /proc/loadavg))"
    # The scenario line above ends in "FAILED: <each failure>"; a panic or
    # a build error shows here.
    grep -E 'panicked|^error' "$log" | head -5 || true
    echo "full log: $log"
    continue
  fi
  rm -f "$log"
done
exit "$failed"
