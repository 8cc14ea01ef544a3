#!/usr/bin/env bash
# Run one of the rewritten seed demos against a throw-away etcd (or $ETCDLOCK_ENDPOINTS).
# Usage: bindings-java/demo.sh route1|route2|stock|spring-stock [args...]
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd .. && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
which=${1:-route1}; shift || true
case "$which" in
  route1) main=io.etcdlock.demo.Route1Demo; module=etcdlock-demos ;;
  route2) main=io.etcdlock.demo.Route2Demo; module=etcdlock-demos ;;
  stock) main=io.etcdlock.demo.StockDemo; module=etcdlock-demos ;;
  spring-stock) main=io.etcdlock.demo.spring.SpringStockDemo; module=etcdlock-spring-demo ;;
  *) echo "usage: $0 route1|route2|stock|spring-stock [args...]" >&2; exit 2 ;;
esac
if [ -z "${ETCDLOCK_ENDPOINTS:-}" ]; then
  (cd "$ROOT" && cargo build -q -p etcdlock-testkit)
  export ETCDLOCK_HARNESS="$CARGO_TARGET_DIR/debug/etcd-harness"
fi
mvn -q -B -DskipTests install
mvn -q -B -pl "$module" exec:exec -Dexec.executable=java \
  "-Dexec.args=-Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp %classpath $main $*"
