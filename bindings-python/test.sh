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

# CPython's own lock tests (tests/test_cpython_locks.py) come from the
# interpreter's `test` package; Debian ships it separately.
if ! "$PY" -c "import test.lock_tests" >/dev/null 2>&1; then
    v=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    echo "== installing libpython$v-testsuite (CPython's test package)"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "libpython$v-testsuite" >/dev/null || true
fi

echo "== venv $VENV"
export PATH="$VENV/bin:$PATH"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "maturin>=1.16,<2" "pytest>=7" "pytest-timeout" "mypy>=1.8" "prometheus_client>=0.17" "APScheduler>=3.10,<4" \
    "tooz==9.1.0" "testtools" "fixtures" "etcd3gw" "redis" "pymemcache" "sysv_ipc" \
    "opentelemetry-api>=1.20" "opentelemetry-sdk>=1.20" "psycopg[binary]>=3.1"

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

echo "== pytest: asyncio through the portable wake-up (call_soon_threadsafe, as on Windows' Proactor loop)"
ETCDLOCK_PY_ASYNCIO_WAKEUP=threadsafe "$VENV/bin/python" -m pytest -p no:cacheprovider -ra "$@" \
    tests/test_asyncio.py tests/test_cpython_asyncio_locks.py tests/test_leader_loop.py

echo "== pytest: the conformance table on the in-process etcd (mem://)"
# Where the in-process store writes its URL; removed when the run ends.
MEM_URLS=$(mktemp -d)
trap 'rm -rf "$MEM_URLS"' EXIT
ETCDLOCK_MEM_URL_DIR=$MEM_URLS ETCDLOCK_CONFORMANCE_BACKEND=mem "$VENV/bin/python" -m pytest -p no:cacheprovider -ra "$@" tests/test_conformance.py
