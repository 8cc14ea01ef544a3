#!/usr/bin/env bash
# Build the holder processes of the fault scenarios in Python, Java, Node and
# C, the cheap way (debug native code), and print the variables that point
# the scenarios at them as `export` lines (build output goes to stderr):
#
#   eval "$(faults/holders/build.sh)"     # then run single scenarios or the soak
#
# faults/test.sh runs it. A variable already set is kept (that holder is not
# built). A missing toolchain (python3, java/javac, mvn, node, gcc) is a
# failure, not a skip.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
exec 3>&1 1>&2
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
{
  printf 'export ETCDLOCK_FAULTS_PYTHON=%q ETCDLOCK_FAULTS_PYTHONPATH=%q\n' "$ETCDLOCK_FAULTS_PYTHON" "${ETCDLOCK_FAULTS_PYTHONPATH:-}"
  printf 'export ETCDLOCK_FAULTS_C_HOLDER=%q\n' "$ETCDLOCK_FAULTS_C_HOLDER"
  printf 'export ETCDLOCK_FAULTS_NODE_PATH=%q\n' "$ETCDLOCK_FAULTS_NODE_PATH"
  printf 'export ETCDLOCK_FAULTS_JAVA_CP=%q\n' "$ETCDLOCK_FAULTS_JAVA_CP"
} >&3
