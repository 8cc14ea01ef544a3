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
# The CLI, built apart as it ships: the ShedLock module's CliOnceTest runs
# `etcdlock once` against a @SchedulerLock job.
(cd "$ROOT" && cargo build -q -p etcdlock-cli)
# The JNI layer's own unit tests (handles: a stale or mistyped one is a typed error).
(cd "$ROOT" && cargo test -q -p etcdlock-jni --lib)
# The Python client of CrossLanguageDeadlockTest (a Java and a Python client deadlock) is
# built by the Maven build itself (etcdlock module, execution build-python-venv): the Python
# binding in a venv of this run's target, $CARGO_TARGET_DIR/java-python.
export ETCDLOCK_HARNESS="$CARGO_TARGET_DIR/debug/etcd-harness"

# Virtual threads need a JDK >= 21 (the library itself targets Java 11): the Spring demo's
# virtual-thread test finds one through Maven's toolchains, as a user's build would. Declare
# every installed JDK in a toolchains file of this run (~/.m2 is left alone) and require the
# test to run (a missing JDK fails the suite; it is not skipped). These machines ship Temurin 25.
JDK21=""
jdks() {
  for d in /usr/lib/jvm/*; do
    [ -x "$d/bin/java" ] && [ ! -L "$d" ] || continue
    v=$("$d/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
    [ -n "$v" ] && echo "$v $d"
  done
  return 0
}
while read -r v d; do [ "$v" -ge 21 ] && JDK21=$d; done < <(jdks)
if [ -z "$JDK21" ]; then
  echo "installing a JDK >= 21 for the virtual-thread check" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-21-jdk-headless >/dev/null 2>&1 || true
  while read -r v d; do [ "$v" -ge 21 ] && JDK21=$d; done < <(jdks)
fi
mkdir -p "$CARGO_TARGET_DIR"
TOOLCHAINS="$CARGO_TARGET_DIR/java-toolchains.xml"
{
  echo '<?xml version="1.0" encoding="UTF-8"?>'
  echo '<toolchains>'
  jdks | while read -r v d; do
    printf '  <toolchain><type>jdk</type><provides><version>%s</version></provides><configuration><jdkHome>%s</jdkHome></configuration></toolchain>\n' "$v" "$d"
  done
  echo '</toolchains>'
} > "$TOOLCHAINS"
# Count only this run: with -fae a module skipped after a failure would leave old reports.
rm -rf ./*/target/surefire-reports
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
# The suite loads a dev build of the JNI library, as the Python and Node suites
# load theirs: it shares the dependency builds of the Rust suites, where a
# release build from a fresh target took 5 of the suite's 7 minutes in CI.
# The jar users get is the release build (scripts/dist.sh, tested in the clean room).
# ETCDLOCK_JAVA_PROFILE=release runs it on the optimized build.
profile=${ETCDLOCK_JAVA_PROFILE:-dev}; profile_dir=$profile; [ "$profile" = dev ] && profile_dir=debug
mvn -B -fae --toolchains "$TOOLCHAINS" -Dcargo.profile="$profile" -Dcargo.profile.dir="$profile_dir" -Detcdlock.toolchains="$TOOLCHAINS" -Detcdlock.require-jdk21=true \
  -Detcdlock.harness="$ETCDLOCK_HARNESS" -Detcdlock.cli="$CARGO_TARGET_DIR/debug/etcdlock" verify 2>&1 | tee "$log" | grep -E "Tests run:|FAIL|ERROR|BUILD|Reactor Summary|SUCCESS|^conformance: [0-9]+ of |^cross-language deadlock:|^detectDeadlock:" 
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
# ShedLock's provider suite on its own line (its one skip is the suite's @Disabled fuzz test,
# run by EtcdLockProviderFuzzTest instead).
python3 - "$HERE" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
t = f = e = s = 0
for p in glob.glob(sys.argv[1] + "/etcdlock-shedlock/target/surefire-reports/TEST-*.xml"):
    r = ET.parse(p).getroot()
    t += int(r.get("tests", 0)); f += int(r.get("failures", 0)); e += int(r.get("errors", 0)); s += int(r.get("skipped", 0))
print(f"shedlock module (of the above): tests run {t}, failures {f}, errors {e}, skipped {s}")
PY
if [ "$status" -ne 0 ]; then
  echo "mvn verify failed (exit $status); full log: $log" >&2
  tail -50 "$log" >&2
fi

if [ -z "$JDK21" ]; then
  echo "vthreads: 0 passed, 1 failed (no JDK >= 21 found or installable)"
  exit 1
fi
cp=$(ls "$HERE"/etcdlock/target/etcdlock-*-SNAPSHOT.jar | grep -v -- -tests | grep -v -- -sources | grep -v -- -javadoc | head -1)
slf4j=$(find "$HOME/.m2/repository/org/slf4j/slf4j-api" -name 'slf4j-api-*.jar' | sort | tail -1)
set +e
"$JDK21/bin/java" -Djdk.virtualThreadScheduler.parallelism=2 -Djdk.virtualThreadScheduler.maxPoolSize=2 \
  --enable-native-access=ALL-UNNAMED -cp "$cp:$slf4j" "$HERE/etcdlock/src/test/jdk21/VirtualThreadsCheck.java"
vstatus=$?
set -e
[ "$status" -eq 0 ] && status=$vstatus
exit "$status"
