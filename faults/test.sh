#!/usr/bin/env bash
# Fault and security suite of etcdlock (short CI profile): checker unit tests,
# the fault scenarios (14 and 15: the recipes; 16-19: partitions between members;
# 26-28: behind etcd grpc-proxy and nginx, close() during a fault; 29-33: TLS runs;
# 34-36: rolling restart and rolling upgrades 3.4 -> 3.5 and 3.5 -> 3.6;
# 37: a fleet of 300 clients under leader kills and a cluster-wide pause,
# its own test binary so that it runs alone), each history also checked by
# porcupine, and the security suite, all against real etcd.
# Prints every scenario's figure line and the totals; exits non-zero on any failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

# Scenario 11 needs libfaketime (Debian package faketime); a missing dependency is a failure, not a skip.
if ! ls /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1 >/dev/null 2>&1; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -q >/dev/null || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q faketime >/dev/null
  else
    echo "libfaketime is missing: apt-get install faketime" >&2
    exit 1
  fi
fi
# Scenarios 16-19 cut traffic between etcd members with nftables rules on lo
# (and a cgroup v2 per member); a missing nft is a failure, not a skip.
if ! command -v nft >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -q >/dev/null || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q nftables >/dev/null
  else
    echo "nft is missing: apt-get install nftables (and run as root)" >&2
    exit 1
  fi
fi
# Scenarios 27 and 32 put nginx (grpc_pass, GOAWAY every 100 requests) between
# the clients and etcd; a missing nginx is a failure, not a skip.
if [ ! -x "${NGINX_BIN:-/usr/sbin/nginx}" ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -q >/dev/null || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light >/dev/null
  else
    echo "nginx is missing: apt-get install nginx-light" >&2
    exit 1
  fi
fi
command -v openssl >/dev/null || { echo "openssl CLI is missing" >&2; exit 1; }

# Scenarios 35 and 36 upgrade clusters 3.4 (Debian's) -> 3.5 and 3.5 -> 3.6: build etcd 3.5
# and 3.6 from the Go module proxy (cached by build-etcd.sh) in the background
# while the holders and the tests build; waited for before the tests run.
etcd_log="$(mktemp)"
( set -e; for v in 3.5.35 3.6.16; do "$here/build-etcd.sh" "$v"; done ) >"$etcd_log" 2>&1 &
etcd_build=$!

# Scenarios 2 and 3 also run with a holder process in Python, Java, Node and
# C, and scenario 19 cuts off holders in all five languages: build each
# binding the cheap way and the holders against it (holders/build.sh; a
# missing toolchain fails the suite).
holder_env="$("$here/holders/build.sh")"
eval "$holder_env"

# The outside checker: porcupine (faults/porcupine, Go), built once under the
# target dir (go's own build cache makes a rebuild of unchanged sources quick).
tdir="${CARGO_TARGET_DIR:-$root/target}"
command -v go >/dev/null || { echo "Go is missing (porcupine checks every history)" >&2; exit 1; }
mkdir -p "$tdir/porcupine"
(cd "$here/porcupine" && go build -o "$tdir/porcupine/etcdlock-porcupine" .)
export ETCDLOCK_FAULTS_PORCUPINE="$tdir/porcupine/etcdlock-porcupine"
rm -rf "$tdir/faults-report/outcomes" "$tdir/faults-history"

cargo test -q -p etcdlock-faults --no-run 2>&1 | grep -E '^(error|warning: unused)' || true
if ! wait "$etcd_build"; then
  cat "$etcd_log" >&2
  echo "building etcd 3.5 / 3.6 for scenarios 35 and 36 failed" >&2
  exit 1
fi
rm -f "$etcd_log"

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
start=$(date +%s)
# Two tests at a time: the scenarios are mostly waiting on timeouts and faults.
set +e
cargo test -p etcdlock-faults --no-fail-fast -- --nocapture --test-threads=2 2>&1 | tee "$log" | grep -E '^(scenario [0-9]+|security:|test result|test .* FAILED|failures:|    [a-z_0-9]+$|thread .* panicked|error)'
status=${PIPESTATUS[0]}
set -e
end=$(date +%s)

acq=$(grep -oE '^scenario .*\[acquisitions=[0-9]+' "$log" | grep -oE '[0-9]+$' | awk '{s+=$1} END {print s+0}')
faults=$(grep -oE ' faults=[0-9]+' "$log" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
viol=$(grep -oE ' violations=[0-9]+ porcupine=' "$log" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
notlin=$(grep -E '^scenario [0-9]+ ' "$log" | grep -vc ' porcupine=ok ' || true)
scen=$(grep -cE '^scenario [0-9]+ ' "$log" || true)
# The report: summary.json and SUMMARY.md under the target dir; the table here.
ETCDLOCK_FAULTS_WALL_SECS=$((end - start)) cargo test -q -p etcdlock-faults --test scenarios -- --ignored write_summary --nocapture 2>/dev/null \
  | grep -E '^(\||report:|Longest)' || echo "the report could not be written" >&2
echo "faults suite: $scen/37 scenario runs (21 scenarios, 2 and 3 also with a Python, Java, Node and C holder; 14 and 15 are the recipes; 16-19 partitions between members, 19 with holders in all five languages; 26-28 behind etcd grpc-proxy, nginx sending GOAWAY, close() during a fault; 29-33 are 7, 5, 6, 27, 28 over TLS; 34 rolling restart, 35 and 36 rolling upgrades 3.4 -> 3.5 and 3.5 -> 3.6; 37 a fleet of 300 clients under a leader kill, a cluster pause and a rolling restart), $acq acquisitions, $faults faults injected, $viol violations, $notlin histories not linearizable (porcupine), $((end - start)) s"
if [ "$status" -ne 0 ]; then
  echo "faults suite FAILED (cargo test exit $status)" >&2
  exit "$status"
fi
if [ "$scen" -ne 37 ] || [ "$viol" -ne 0 ] || [ "$notlin" -ne 0 ] || [ "$acq" -lt 10000 ]; then
  echo "faults suite FAILED: need 37 scenario runs, 0 violations, every history linearizable, >= 10000 acquisitions" >&2
  exit 1
fi
