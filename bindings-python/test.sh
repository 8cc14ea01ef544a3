#!/usr/bin/env bash
# Build the Python binding and run its whole test suite against real etcd.
# Usage: bindings-python/test.sh   (from anywhere)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
PY="${PYTHON:-python3}"
VENV="${ETCDLOCK_PY_VENV:-$HERE/.venv}"

echo "== etcd harness"
(cd "$ROOT" && cargo build -q -p etcdlock-testkit)
export ETCD_HARNESS="$CARGO_TARGET_DIR/debug/etcd-harness"

echo "== venv $VENV"
export PATH="$VENV/bin:$PATH"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "maturin>=1.16,<2" "pytest>=7" "pytest-timeout" "mypy>=1.8"

# The tests build the dev profile (fast to compile, shares the workspace's
# debug artifacts); set ETCDLOCK_PY_PROFILE=release for an optimized build
# (what a plain `pip install ./bindings-python` does).
PROFILE="${ETCDLOCK_PY_PROFILE:-dev}"
echo "== build + install (pip install ./bindings-python, profile $PROFILE)"
MATURIN_PEP517_ARGS="--profile $PROFILE" \
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps --no-build-isolation "$HERE"

echo "== pytest"
cd "$HERE"
"$VENV/bin/python" -m pytest -p no:cacheprovider -ra "$@" tests
