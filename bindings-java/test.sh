#!/usr/bin/env bash
# Build the JNI library and the Maven modules, then run the whole Java suite
# (JUnit 5 via Surefire) against real etcd started by the testkit harness.
set -euo pipefail
cd "$(dirname "$0")"
HERE=$(pwd)
ROOT=$(cd .. && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
  echo "installing JDK 17 and Maven" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null
fi

# The tests' etcd comes from the harness binary (debug build of the testkit).
(cd "$ROOT" && cargo build -q -p etcdlock-testkit)
export ETCDLOCK_HARNESS="$CARGO_TARGET_DIR/debug/etcd-harness"

log=$(mktemp)
set +e
mvn -B -Detcdlock.harness="$ETCDLOCK_HARNESS" verify 2>&1 | tee "$log" | grep -E "Tests run:|FAIL|ERROR|BUILD|Reactor Summary|SUCCESS" 
status=${PIPESTATUS[0]}
set -e

# One summary line over every module's Surefire reports.
python3 - "$HERE" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
t = f = e = s = 0
for p in glob.glob(sys.argv[1] + "/*/target/surefire-reports/TEST-*.xml"):
    r = ET.parse(p).getroot()
    t += int(r.get("tests", 0)); f += int(r.get("failures", 0)); e += int(r.get("errors", 0)); s += int(r.get("skipped", 0))
print(f"java: {t - f - e - s} passed, {f + e} failed, {s} skipped")
PY
if [ "$status" -ne 0 ]; then
  echo "mvn verify failed (exit $status); full log: $log" >&2
  tail -50 "$log" >&2
fi
exit "$status"
