#!/usr/bin/env bash
# Entry point for CI and developers: install the JS dev dependencies, build the
# native module and the etcd test harness, run the whole `node --test` suite
# against real etcd processes. Honours CARGO_TARGET_DIR (default: workspace target/).
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
WORKSPACE=$(cd .. && pwd)

command -v node >/dev/null || { echo "test.sh: node is required (>= 18)" >&2; exit 1; }
echo "test.sh: node $(node --version), npm $(npm --version)"

# devDependencies (typescript, @types/node) for the tsc check.
if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error; else npm install --no-audit --no-fund --loglevel=error; fi

# Native module (debug build: the tests do not need speed) and the etcd harness.
npm run --silent build
(cd "$WORKSPACE" && cargo build -q -p etcdlock-testkit)
TARGET=${CARGO_TARGET_DIR:-$WORKSPACE/target}
case "$TARGET" in /*) ;; *) TARGET=$WORKSPACE/$TARGET ;; esac
export ETCD_HARNESS=$TARGET/debug/etcd-harness
[ -x "$ETCD_HARNESS" ] || { echo "test.sh: $ETCD_HARNESS missing" >&2; exit 1; }

# One file at a time: each starts its own etcd; the process tests spawn 4 workers.
LOG=$(mktemp)
# Where the in-process store writes its URL in the mem:// conformance run.
MEM_URLS=$(mktemp -d)
trap 'rm -rf "$LOG" "$MEM_URLS"' EXIT
set +e
node --test --test-force-exit --test-concurrency=1 --test-reporter=spec test/*.test.js test/*.test.mjs 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
set -e
pass=$(sed -n 's/^ℹ pass \([0-9]*\)$/\1/p' "$LOG" | tail -1)
fail=$(sed -n 's/^ℹ fail \([0-9]*\)$/\1/p' "$LOG" | tail -1)
echo "node --test: ${pass:-0} passed, ${fail:-0} failed"
[ "$rc" -eq 0 ] || exit "$rc"

echo "== the conformance table on the in-process etcd (mem://)"
ETCDLOCK_MEM_URL_DIR=$MEM_URLS ETCDLOCK_CONFORMANCE_BACKEND=mem node --test --test-force-exit --test-concurrency=1 --test-reporter=spec test/conformance.test.js
