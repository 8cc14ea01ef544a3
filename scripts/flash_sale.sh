#!/usr/bin/env bash
# Builds every language's flash-sale worker (Rust and CLI, C, Python, Node,
# Java) and runs scripts/flash_sale.py, which starts a private etcd, runs the
# sale with the lock and a control sale without it, checks the results, prints
# the table, writes flash_sale.png, and stops etcd.
#
# Usage: scripts/flash_sale.sh [--debug] [flash_sale.py options: --short --stock N --attempts N --langs a,b --require a,b]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"
PROFILE=release
if [ "${1:-}" = "--debug" ]; then PROFILE=debug; shift; fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$CARGO_TARGET_DIR" in /*) ;; *) CARGO_TARGET_DIR="$ROOT/$CARGO_TARGET_DIR" ;; esac
BIN="$CARGO_TARGET_DIR/$PROFILE"
OUT="$CARGO_TARGET_DIR/flash"
mkdir -p "$OUT"
say() { printf '== %s\n' "$*" >&2; }
cargo_profile=(); [ "$PROFILE" = release ] && cargo_profile=(--release)

say "Rust: CLI, harness, libetcdlock ($PROFILE)"
cargo build --quiet "${cargo_profile[@]}" -p etcdlock-cli -p etcdlock-testkit -p etcdlock-ffi

say "C worker"
gcc -O2 -Wall -Wextra -I"$ROOT/include" "$ROOT/examples/c/flash_worker.c" -o "$OUT/flash_worker_c" \
    -L"$BIN" -letcdlock -Wl,-rpath,"$BIN"

say "Python worker (venv $OUT/venv)"
[ -x "$OUT/venv/bin/python" ] || python3 -m venv "$OUT/venv"
export PATH="$OUT/venv/bin:$PATH"  # maturin, for the PEP 517 build
"$OUT/venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.16,<2" matplotlib
py_profile=release; [ "$PROFILE" = debug ] && py_profile=dev
MATURIN_PEP517_ARGS="--profile $py_profile" "$OUT/venv/bin/python" -m pip install -q --disable-pip-version-check \
    --force-reinstall --no-deps --no-build-isolation "$ROOT/bindings-python"

say "Node worker"
(cd "$ROOT/bindings-node" && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } \
    && if [ "$PROFILE" = release ]; then npm run --silent build:release; else npm run --silent build; fi) >&2

say "Java worker"
(cd "$ROOT/bindings-java" && mvn -q -B -DskipTests install \
    && mvn -q -B -pl etcdlock-demos dependency:build-classpath -Dmdep.outputFile="$OUT/java.cp") >&2
export FLASH_JAVA_CP="$ROOT/bindings-java/etcdlock-demos/target/classes:$(cat "$OUT/java.cp")"

export FLASH_BIN_DIR="$BIN" FLASH_C_WORKER="$OUT/flash_worker_c" FLASH_PYTHON="$OUT/venv/bin/python"
exec "$OUT/venv/bin/python" "$ROOT/scripts/flash_sale.py" "$@"
