#!/usr/bin/env bash
# Builds every language's flash-sale worker (Rust and CLI, C, Python, Node,
# Java) and runs scripts/flash_sale.py, which starts a private etcd, runs the
# sale with the lock and a control sale without it, checks the results, prints
# the table, writes flash_sale.png, and stops etcd.
#
# Usage: scripts/flash_sale.sh [--debug|--release] [flash_sale.py options: --short --stock N --attempts N --langs a,b --require a,b --json PATH --store etcd|postgres]
# With --store postgres the stock is a row of a private PostgreSQL and every
# language's worker writes it with libpq, psycopg, node-postgres, JDBC,
# tokio-postgres (the CLI crate's example flash_pg_worker) or psql, each
# purchase fenced by the hold's token; those workers are built too.
# The cargo profile: `demo` by default (unoptimized, no debug info: the quickest
# build of a fresh clone), `dev` with --debug (shares the test suites' build),
# `release` with --release.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"
PROFILE=demo; PROFILE_DIR=demo
case "${1:-}" in
  --debug) PROFILE=dev; PROFILE_DIR=debug; shift ;;
  --release) PROFILE=release; PROFILE_DIR=release; shift ;;
esac
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$CARGO_TARGET_DIR" in /*) ;; *) CARGO_TARGET_DIR="$ROOT/$CARGO_TARGET_DIR" ;; esac
BIN="$CARGO_TARGET_DIR/$PROFILE_DIR"
OUT="$CARGO_TARGET_DIR/flash"
mkdir -p "$OUT"
t0=$SECONDS
say() { printf '== [%3d s] %s\n' "$((SECONDS - t0))" "$*" >&2; }
cargo_profile=(--profile "$PROFILE")
postgres=0
prev=""
for a in "$@"; do
  [ "$prev" = --store ] && [ "$a" = postgres ] && postgres=1
  [ "$a" = --store=postgres ] && postgres=1
  prev=$a
done

# Steps that mostly download, unpack or run javac (pip, npm, Maven) run in the
# background beside the one cargo invocation that compiles every native crate
# on all cores; the language builds after it find their crate built (Maven's own
# `cargo build -p etcdlock-jni` waits for cargo's lock, then has nothing to do).
# Each background step logs to $OUT/<step>.log, shown if it fails.
started=$SECONDS
bg() { # name command...: run in the background, logging to $OUT/name.log
  local name=$1; shift
  ( "$@" >"$OUT/$name.log" 2>&1 ) &
  eval "pid_$name=$!"
}
wait_for() { # name: wait for bg step `name`; show its log and fail if it failed
  local pid; eval "pid=\$pid_$1"
  if ! wait "$pid"; then echo "flash_sale: step $1 failed; its log:" >&2; cat "$OUT/$1.log" >&2; exit 1; fi
}
[ -x "$OUT/venv/bin/python" ] || python3 -m venv "$OUT/venv"
pip_pkgs=("maturin>=1.16,<2" matplotlib)
[ "$postgres" = 1 ] && pip_pkgs+=("psycopg[binary]>=3.1")
bg pip "$OUT/venv/bin/python" -m pip install -q --disable-pip-version-check "${pip_pkgs[@]}"
# node_modules from before pg joined the devDependencies lacks it: install again then.
bg npm bash -c 'cd "$0/bindings-node" && { { [ -d node_modules ] && node -e "require.resolve(\"pg\")" 2>/dev/null; } ||
  npm ci --no-audit --no-fund --loglevel=error; }' "$ROOT"
# Only the modules the demo runs (not Spring or ShedLock).
# The JNI crate is built in the same cargo invocation as the other libraries
# below; Maven's own cargo step (same profile) waits for cargo's lock, then has
# nothing to do.
bg java bash -c 'cd "$0/bindings-java" && mvn -q -B -DskipTests -Dcargo.profile="$2" -Dcargo.profile.dir="$3" -pl etcdlock-demos -am install &&
  mvn -q -B -pl etcdlock-demos dependency:build-classpath -Dmdep.outputFile="$1"' "$ROOT" "$OUT/java.cp" "$PROFILE" "$PROFILE_DIR"

# The libraries in one invocation (they share one build of core), then the
# CLI apart: it needs core's `bench` feature, and building it with them would
# give them that core too, which each language's own build then redoes without.
say "Rust: harness, libetcdlock, the Node and JNI modules (profile $PROFILE)"
cargo build --quiet "${cargo_profile[@]}" -p etcdlock-testkit -p etcdlock-ffi -p etcdlock-node -p etcdlock-jni
say "Rust: the CLI ($PROFILE)"
cargo build --quiet "${cargo_profile[@]}" -p etcdlock-cli
if [ "$postgres" = 1 ]; then
  say "Rust: the PostgreSQL worker (the CLI crate's example flash_pg_worker)"
  cargo build --quiet "${cargo_profile[@]}" -p etcdlock-cli --example flash_pg_worker
fi

say "C worker"
gcc -O2 -Wall -Wextra -I"$ROOT/include" "$ROOT/examples/c/flash_worker.c" -o "$OUT/flash_worker_c" \
    -L"$BIN" -letcdlock -Wl,-rpath,"$BIN"

if [ "$postgres" = 1 ]; then
  say "C worker on PostgreSQL (libpq)"
  gcc -O2 -Wall -Wextra -I"$ROOT/include" -I"$(pg_config --includedir)" "$ROOT/examples/c/flash_worker_pg.c" \
      -o "$OUT/flash_worker_pg" -L"$BIN" -letcdlock -Wl,-rpath,"$BIN" -lpq
fi

say "Python worker (venv $OUT/venv)"
wait_for pip
export PATH="$OUT/venv/bin:$PATH"  # maturin, for the PEP 517 build
MATURIN_PEP517_ARGS="--profile $PROFILE" "$OUT/venv/bin/python" -m pip install -q --disable-pip-version-check \
    --force-reinstall --no-deps --no-build-isolation "$ROOT/bindings-python"

say "Node worker"
wait_for npm
(cd "$ROOT/bindings-node" && npm run --silent build -- --profile "$PROFILE") >&2

say "Java worker"
wait_for java
say "built in $((SECONDS - started)) s"
export FLASH_JAVA_CP="$ROOT/bindings-java/etcdlock-demos/target/classes:$(cat "$OUT/java.cp")"

export FLASH_BIN_DIR="$BIN" FLASH_C_WORKER="$OUT/flash_worker_c" FLASH_C_PG_WORKER="$OUT/flash_worker_pg" FLASH_PYTHON="$OUT/venv/bin/python"
exec "$OUT/venv/bin/python" "$ROOT/scripts/flash_sale.py" "$@"
