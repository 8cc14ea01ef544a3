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
mvn -q -B -DskipTests install
mvn -q -B -pl etcdlock exec:exec -Dexec.executable=java -Dexec.classpathScope=test \
  "-Dexec.args=-cp %classpath io.etcdlock.LockBenchmark ${1:-1000}"
