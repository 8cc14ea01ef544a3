#!/usr/bin/env bash
# Benchmark: etcdlock uncontended lock+unlock p50 vs the raw etcd round trip and
# jetcd's Lock client, all in one run on one etcd started by the testkit harness.
# Usage: bindings-java/bench.sh [iterations]
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd .. && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
(cd "$ROOT" && cargo build -q -p etcdlock-testkit)
export ETCDLOCK_HARNESS="$CARGO_TARGET_DIR/debug/etcd-harness"
# The benchmark entry points are in a native library built with the bench feature only.
mvn -q -B -DskipTests -Dcargo.features=bench install
# The newest JDK installed (21+ runs the virtual-thread cases too).
JAVA=java; JOPTS=""
for d in /usr/lib/jvm/*; do
  [ -x "$d/bin/java" ] || continue
  v=$("$d/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  if [ -n "$v" ] && [ "$v" -ge 21 ]; then JAVA=$d/bin/java; JOPTS="-Djdk.virtualThreadScheduler.parallelism=2 --enable-native-access=ALL-UNNAMED"; fi
done
# The full benchmark on the default JDK (jetcd's gRPC stack needs it), then the
# contended cases with virtual threads on the newest JDK, each against its own floor.
mvn -q -B -pl etcdlock exec:exec -Dexec.executable=java -Dexec.classpathScope=test \
  "-Dexec.args=-cp %classpath io.etcdlock.LockBenchmark ${1:-1000}"
if [ -n "$JOPTS" ]; then
  echo
  mvn -q -B -pl etcdlock exec:exec -Dexec.executable="$JAVA" -Dexec.classpathScope=test \
    "-Dexec.args=$JOPTS -cp %classpath io.etcdlock.LockBenchmark ${1:-1000} contended"
fi
