#!/usr/bin/env bash
# Fault and security suite of etcdlock (short CI profile): checker unit tests,
# the fault scenarios (14 and 15: the recipes; 16-19: partitions between members),
# each history also checked by porcupine, and the security suite, all against real etcd.
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
command -v openssl >/dev/null || { echo "openssl CLI is missing" >&2; exit 1; }

# Scenarios 2 and 3 also run with a holder process in Python, on the Python
# binding: build its native module and stage the package under the target dir
# (nothing is written into bindings-python/).
if [ -z "${ETCDLOCK_FAULTS_PYTHON:-}" ]; then
  tdir="${CARGO_TARGET_DIR:-$root/target}"
  stage="$tdir/faults-python"
  # Dev profile: shares the artifacts of bindings-python/test.sh.
  cargo build -q -p etcdlock-python
  rm -rf "$stage" && mkdir -p "$stage/etcdlock"
  cp "$root"/bindings-python/python/etcdlock/*.py "$stage/etcdlock/"
  cp "$tdir/debug/lib_etcdlock.so" "$stage/etcdlock/_etcdlock.abi3.so"
  export ETCDLOCK_FAULTS_PYTHON="${PYTHON:-python3}" ETCDLOCK_FAULTS_PYTHONPATH="$stage"
fi
PYTHONPATH="${ETCDLOCK_FAULTS_PYTHONPATH:-}" "$ETCDLOCK_FAULTS_PYTHON" -c "import etcdlock" \
  || { echo "the Python holder cannot import etcdlock" >&2; exit 1; }

# Scenarios 2 and 3 also run with a holder process in Java, Node and C, and
# scenario 19 cuts off holders in all five languages: build each binding the
# cheap way (debug native code) and the holders against it. A missing
# toolchain (java/javac, mvn, node, gcc) is a failure, not a skip.
tdir="${CARGO_TARGET_DIR:-$root/target}"
holders_start=$(date +%s)
for tool in java javac mvn node gcc; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (the $tool holder of the fault scenarios)" >&2; exit 1; }
done
mkdir -p "$tdir/faults-holders"
# C: holders/c_holder.c against include/etcdlock.h and the debug libetcdlock.so.
if [ -z "${ETCDLOCK_FAULTS_C_HOLDER:-}" ]; then
  cargo build -q -p etcdlock-ffi
  gcc -std=c11 -O1 -Wall -Wextra -Werror -I"$root/include" "$here/holders/c_holder.c" \
    -L"$tdir/debug" -Wl,-rpath,"$tdir/debug" -letcdlock -o "$tdir/faults-holders/c_holder"
  export ETCDLOCK_FAULTS_C_HOLDER="$tdir/faults-holders/c_holder"
fi
# Node: the package in bindings-node with its dev native module (no npm
# dependency is needed at run time), on NODE_PATH as `etcdlock`.
if [ -z "${ETCDLOCK_FAULTS_NODE_PATH:-}" ]; then
  (cd "$root/bindings-node" && node scripts/build.js >/dev/null)
  mkdir -p "$tdir/faults-node" && ln -sfn "$root/bindings-node" "$tdir/faults-node/etcdlock"
  export ETCDLOCK_FAULTS_NODE_PATH="$tdir/faults-node"
fi
NODE_PATH="$ETCDLOCK_FAULTS_NODE_PATH" node -e "require('etcdlock')" \
  || { echo "the Node holder cannot require etcdlock" >&2; exit 1; }
# Java: the etcdlock jar (its JNI library a dev build, carried in the jar as a
# user gets it), slf4j-api beside it, and JavaHolder compiled against the jar.
if [ -z "${ETCDLOCK_FAULTS_JAVA_CP:-}" ]; then
  mvn -B -q -f "$root/bindings-java/pom.xml" -pl etcdlock package \
    -Dcargo.profile=dev -Dcargo.profile.dir=debug -Dcargo.target.dir="$tdir" -DskipTests -Dmaven.test.skip=true
  jar=$(ls "$root"/bindings-java/etcdlock/target/etcdlock-*.jar | grep -v -e sources -e javadoc -e tests | head -1)
  slf4j_version=$(sed -n 's:.*<slf4j.version>\(.*\)</slf4j.version>.*:\1:p' "$root/bindings-java/pom.xml")
  slf4j="$HOME/.m2/repository/org/slf4j/slf4j-api/$slf4j_version/slf4j-api-$slf4j_version.jar"
  [ -f "$slf4j" ] || { echo "slf4j-api $slf4j_version is not in ~/.m2 (the Maven build should have fetched it)" >&2; exit 1; }
  rm -rf "$tdir/faults-java" && mkdir -p "$tdir/faults-java"
  javac -Werror -d "$tdir/faults-java" -cp "$jar" "$here/holders/JavaHolder.java"
  export ETCDLOCK_FAULTS_JAVA_CP="$tdir/faults-java:$jar:$slf4j"
fi
echo "holders: C, Node and Java built in $(( $(date +%s) - holders_start )) s"

# The outside checker: porcupine (faults/porcupine, Go), built once under the
# target dir (go's own build cache makes a rebuild of unchanged sources quick).
tdir="${CARGO_TARGET_DIR:-$root/target}"
command -v go >/dev/null || { echo "Go is missing (porcupine checks every history)" >&2; exit 1; }
mkdir -p "$tdir/porcupine"
(cd "$here/porcupine" && go build -o "$tdir/porcupine/etcdlock-porcupine" .)
export ETCDLOCK_FAULTS_PORCUPINE="$tdir/porcupine/etcdlock-porcupine"
rm -rf "$tdir/faults-report/outcomes" "$tdir/faults-history"

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
start=$(date +%s)
# Two tests at a time: the scenarios are mostly waiting on timeouts and faults.
set +e
cargo test -p etcdlock-faults --release --no-fail-fast -- --nocapture --test-threads=2 2>&1 | tee "$log" | grep -E '^(scenario [0-9]+|security:|test result|test .* FAILED|failures:|    [a-z_0-9]+$|thread .* panicked|error)'
status=${PIPESTATUS[0]}
set -e
end=$(date +%s)

acq=$(grep -oE '^scenario .*\[acquisitions=[0-9]+' "$log" | grep -oE '[0-9]+$' | awk '{s+=$1} END {print s+0}')
faults=$(grep -oE ' faults=[0-9]+' "$log" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
viol=$(grep -oE ' violations=[0-9]+ porcupine=' "$log" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
notlin=$(grep -E '^scenario [0-9]+ ' "$log" | grep -vc ' porcupine=ok ' || true)
scen=$(grep -cE '^scenario [0-9]+ ' "$log" || true)
# The report: summary.json and SUMMARY.md under the target dir; the table here.
ETCDLOCK_FAULTS_WALL_SECS=$((end - start)) cargo test -q -p etcdlock-faults --release --test scenarios -- --ignored write_summary --nocapture 2>/dev/null \
  | grep -E '^(\||report:|Longest)' || echo "the report could not be written" >&2
echo "faults suite: $scen/25 scenario runs (17 scenarios, 2 and 3 also with a Python, Java, Node and C holder; 14 and 15 are the recipes; 16-19 partitions between members, 19 with holders in all five languages), $acq acquisitions, $faults faults injected, $viol violations, $notlin histories not linearizable (porcupine), $((end - start)) s"
if [ "$status" -ne 0 ]; then
  echo "faults suite FAILED (cargo test exit $status)" >&2
  exit "$status"
fi
if [ "$scen" -ne 25 ] || [ "$viol" -ne 0 ] || [ "$notlin" -ne 0 ] || [ "$acq" -lt 10000 ]; then
  echo "faults suite FAILED: need 25 scenario runs, 0 violations, every history linearizable, >= 10000 acquisitions" >&2
  exit 1
fi
