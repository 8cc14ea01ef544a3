#!/usr/bin/env bash
# Fault and security suite of etcdlock (short CI profile): checker unit tests,
# the 11 fault scenarios and the security suite, all against real etcd.
# Prints every scenario's figure line and the totals; exits non-zero on any failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

# Scenario 11 needs libfaketime (Debian package faketime); a missing dependency is a failure, not a skip.
if ! ls /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1 >/dev/null 2>&1; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q faketime >/dev/null
  else
    echo "libfaketime is missing: apt-get install faketime" >&2
    exit 1
  fi
fi
command -v openssl >/dev/null || { echo "openssl CLI is missing" >&2; exit 1; }

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
start=$(date +%s)
# Two tests at a time: the scenarios are mostly waiting on timeouts and faults.
cargo test -p etcdlock-faults --release -- --nocapture --test-threads=2 2>&1 | tee "$log" | grep -E '^(scenario [0-9]+|security:|test result|test .* FAILED|failures:|    [a-z_0-9]+$|thread .* panicked)' || true
status=${PIPESTATUS[0]}
end=$(date +%s)

acq=$(grep -oE '^scenario .*\[acquisitions=[0-9]+' "$log" | grep -oE '[0-9]+$' | awk '{s+=$1} END {print s+0}')
faults=$(grep -oE ' faults=[0-9]+' "$log" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
viol=$(grep -oE ' violations=[0-9]+\]' "$log" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
scen=$(grep -cE '^scenario [0-9]+ ' "$log" || true)
echo "faults suite: $scen/11 scenarios, $acq acquisitions, $faults faults injected, $viol violations, $((end - start)) s"
if [ "$status" -ne 0 ]; then
  echo "faults suite FAILED (cargo test exit $status)" >&2
  exit "$status"
fi
if [ "$scen" -ne 11 ] || [ "$viol" -ne 0 ] || [ "$acq" -lt 10000 ]; then
  echo "faults suite FAILED: need 11 scenarios, 0 violations, >= 10000 acquisitions" >&2
  exit 1
fi
