#!/usr/bin/env bash
# The native runs of .github/workflows/ci.yml (macOS arm64, macOS x86_64,
# Windows x64; runs on Linux too): builds each native library for this
# machine and runs, for each language, the conformance table
# (conformance/cases.json) and the core of its suite, against real etcd that
# the testkit harness (target/debug/etcd-harness) starts on 127.0.0.1.
#
#   scripts/ci_native.sh [rust] [c] [python] [node] [java]   (default: all five)
#
# etcd: `etcd` and `etcdctl` on PATH, or ETCD_BIN / ETCDCTL_BIN (what the
# testkit reads; the Python and Node suites run `etcdctl` from PATH). ci.yml
# downloads etcd's release archive for the runner's OS and puts it on PATH.
# Portable bash (macOS's bash 3.2, Git Bash on Windows): no coproc, no
# mapfile, no apt; the tools it needs (cargo, a C compiler, python3, node,
# mvn) are the runner's. Why not the languages' own test.sh: they install
# with apt and run valgrind, the CPython test package, PostgreSQL and a JDK
# 21 toolchain file from /usr/lib/jvm, all Debian's.
#
# What runs, per language (each one line "ok ..." or "FAIL ..."; last line
# "N passed, N failed"):
#   rust    cargo test -p etcdlock --lib --test conformance --test lock
#   c       the conformance table generated as C (ffi-c/tests/gen_conformance.py)
#           and examples/c/lock_token.c, linked against libetcdlock; on Windows
#           (no POSIX spawn there) lock_token.c only, built with MinGW's gcc
#           against the x86_64-pc-windows-gnu etcdlock.dll (what releases ship)
#   python  pytest tests/test_conformance.py tests/test_lock.py (a venv, the
#           binding built with pip as a user builds it from source)
#   node    node --test test/conformance.test.js test/lock.test.js
#   java    mvn test -Dtest=ConformanceTest,LockBehaviourTest (module etcdlock)
# On Linux this runs here as on a runner; macOS and Windows have only run it
# in GitHub's runners (nothing here runs Mach-O or PE natively).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$CARGO_TARGET_DIR" in /*|[A-Za-z]:*) ;; *) CARGO_TARGET_DIR=$ROOT/$CARGO_TARGET_DIR ;; esac
LANGS=${*:-rust c python node java}

case "$(uname -s)" in
  Linux) OS=linux ;;
  Darwin) OS=macos ;;
  MINGW*|MSYS*|CYGWIN*) OS=windows ;;
  *) echo "ci_native.sh: unknown OS $(uname -s)" >&2; exit 2 ;;
esac
EXE=""; [ "$OS" = windows ] && EXE=.exe
# A path as the native (non-MSYS) programs on Windows take it: C:/a/b.
native() { if [ "$OS" = windows ]; then cygpath -m "$1"; else echo "$1"; fi; }
PY=${PYTHON:-python3}
[ "$OS" = windows ] && ! command -v "$PY" >/dev/null && PY=python

pass=0 fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
step() { echo "== [$OS] $*"; }
# in_dir DIR CMD...: CMD run in DIR (a subshell: the counters above stay in this one).
in_dir() { (cd "$1" && shift && "$@"); }
# run LABEL CMD...: one ok/FAIL line for the command's exit status.
run() {
  local label=$1; shift
  if "$@"; then ok "$label"; else bad "$label (exit $?)"; fi
}

command -v "${ETCD_BIN:-etcd}" >/dev/null || { echo "ci_native.sh: no etcd (put it on PATH or set ETCD_BIN)"; echo "0 passed, 1 failed"; exit 1; }
step "etcd: $("${ETCD_BIN:-etcd}" --version | head -n 1); cargo build -p etcdlock-testkit (the harness)"
cargo build -q -p etcdlock-testkit
HARNESS=$CARGO_TARGET_DIR/debug/etcd-harness$EXE
export ETCD_HARNESS ETCDLOCK_HARNESS
ETCD_HARNESS=$(native "$HARNESS"); ETCDLOCK_HARNESS=$ETCD_HARNESS

# One etcd for the C programs, through the harness: its stdin is this
# script's fd 3 (a process substitution, which bash 3.2 and Git Bash have);
# closing fd 3 stops etcd. The endpoint is the first line it prints.
EP="" HOUT=""
etcd_start() {
  HOUT=$(mktemp)
  exec 3> >("$HARNESS" >"$HOUT")
  local i
  for i in $(seq 1 300); do
    EP=$(sed -n 's/.*"endpoints":\["\([^"]*\)".*/\1/p' "$HOUT" | head -n 1)
    [ -n "$EP" ] && return 0
    sleep 0.1
  done
  echo "etcd-harness printed no endpoint in 30 s" >&2
  return 1
}
etcd_stop() { exec 3>&-; sleep 1; rm -f "$HOUT"; }

lang_rust() {
  step "rust: cargo test -p etcdlock --lib --test conformance --test lock"
  run "rust: unit tests, the conformance table (etcd and mem://) and the lock tests" \
    cargo test -q -p etcdlock --lib --test conformance --test lock
}

lang_c() {
  local work; work=$(mktemp -d)
  if [ "$OS" = windows ]; then
    # The C library as releases ship it for Windows (MinGW's ABI): rustc's
    # windows-gnu target, linked by the runner's MinGW-w64 gcc.
    step "c: cargo build -p etcdlock-ffi --target x86_64-pc-windows-gnu; gcc examples/c/lock_token.c"
    rustup target add x86_64-pc-windows-gnu >/dev/null 2>&1 || true
    # (a MinGW whose gcc has no target prefix: link and compile ring's C with it)
    if ! command -v x86_64-w64-mingw32-gcc >/dev/null && command -v gcc >/dev/null; then
      export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=gcc CC_x86_64_pc_windows_gnu=gcc AR_x86_64_pc_windows_gnu=ar
    fi
    cargo build -q -p etcdlock-ffi --target x86_64-pc-windows-gnu || { bad "c: build etcdlock.dll"; return; }
    local lib=$CARGO_TARGET_DIR/x86_64-pc-windows-gnu/debug
    gcc -std=c11 -Wall -Wextra -Werror -Iinclude examples/c/lock_token.c -o "$work/lock_token.exe" \
      "$lib/libetcdlock.dll.a" || { bad "c: lock_token.c does not compile"; return; }
    cp "$lib/etcdlock.dll" "$work/"
    etcd_start || { bad "c: etcd"; return; }
    local out; out=$(ETCDLOCK_ENDPOINTS=$EP "$work/lock_token.exe" example-lock 2>&1) || true
    etcd_stop
    case "$out" in *"fencing token "[0-9]*) ok "c: examples/c/lock_token.c on etcdlock.dll: $out" ;; *) bad "c: lock_token: $out" ;; esac
    rm -rf "$work"
    return
  fi
  step "c: cargo build -p etcdlock-ffi; the conformance table as C; examples/c/lock_token.c"
  cargo build -q -p etcdlock-ffi || { bad "c: build libetcdlock"; return; }
  local lib=$CARGO_TARGET_DIR/debug cc=${CC:-cc}
  "$PY" ffi-c/tests/gen_conformance.py conformance/cases.json "$work/conformance.c"
  local flags=(-std=c11 -Wall -Wextra -Werror -pedantic -g -O1 -Iinclude -Iffi-c/tests/c)
  "$cc" "${flags[@]}" "$work/conformance.c" -o "$work/conformance" \
    -L"$lib" -letcdlock -Wl,-rpath,"$lib" -lpthread || { bad "c: the conformance program does not compile"; return; }
  "$cc" -std=c11 -Wall -Wextra -Werror -Iinclude examples/c/lock_token.c -o "$work/lock_token" \
    -L"$lib" -letcdlock -Wl,-rpath,"$lib" || { bad "c: lock_token.c does not compile"; return; }
  etcd_start || { bad "c: etcd"; return; }
  local out rc=0
  out=$("$work/conformance" "$EP" 2>&1) || rc=$?
  echo "$out" | tail -n 3
  if [ "$rc" -eq 0 ]; then ok "c: the conformance table ($(echo "$out" | tail -n 1))"; else bad "c: the conformance table (exit $rc)"; fi
  out=$(ETCDLOCK_ENDPOINTS=$EP "$work/lock_token" example-lock 2>&1) || true
  case "$out" in *"fencing token "[0-9]*) ok "c: examples/c/lock_token.c: $out" ;; *) bad "c: lock_token: $out" ;; esac
  etcd_stop
  rm -rf "$work"
}

lang_python() {
  local venv=$CARGO_TARGET_DIR/native-py vpy
  step "python: venv $venv, pip install ./bindings-python (dev profile), pytest"
  [ -d "$venv" ] || "$PY" -m venv "$venv"
  vpy=$venv/bin/python; [ "$OS" = windows ] && vpy=$venv/Scripts/python.exe
  "$vpy" -m pip install -q --disable-pip-version-check "maturin>=1.16,<2" "pytest>=7" pytest-timeout ||
    { bad "python: pip install maturin pytest"; return; }
  MATURIN_PEP517_ARGS="--profile dev" "$vpy" -m pip install -q --disable-pip-version-check --force-reinstall \
    --no-deps --no-build-isolation ./bindings-python || { bad "python: pip install ./bindings-python"; return; }
  run "python: pytest tests/test_conformance.py tests/test_lock.py" \
    in_dir bindings-python "$vpy" -m pytest -q -p no:cacheprovider tests/test_conformance.py tests/test_lock.py
}

lang_node() {
  step "node $(node --version): npm ci, npm run build, node --test"
  in_dir bindings-node npm ci --no-audit --no-fund --loglevel=error && in_dir bindings-node npm run --silent build ||
    { bad "node: npm ci / build"; return; }
  run "node: node --test test/conformance.test.js test/lock.test.js" \
    in_dir bindings-node node --test --test-concurrency=1 test/conformance.test.js test/lock.test.js
}

lang_java() {
  step "java: mvn test -Dtest=ConformanceTest,LockBehaviourTest (the JNI library: cargo, dev profile)"
  local props=(-Dcargo.profile=dev -Dcargo.profile.dir=debug "-Detcdlock.harness=$ETCD_HARNESS")
  # The jar carries target/debug's library only under native/linux-x86_64:
  # elsewhere the tests load the one cargo built through the override.
  case "$OS" in
    macos) props+=("-Detcdlock.library.path=$CARGO_TARGET_DIR/debug/libetcdlock_jni.dylib") ;;
    windows) props+=("-Detcdlock.library.path=$(native "$CARGO_TARGET_DIR/debug/etcdlock_jni.dll")") ;;
  esac
  run "java: ConformanceTest and LockBehaviourTest" \
    in_dir bindings-java mvn -B -q -Dstyle.color=never -pl etcdlock -am "${props[@]}" -Dtest=ConformanceTest,LockBehaviourTest \
      -Dsurefire.failIfNoSpecifiedTests=false test
}

for l in $LANGS; do
  case "$l" in
    rust|c|python|node|java) "lang_$l" ;;
    *) echo "ci_native.sh: unknown language $l (rust c python node java)" >&2; exit 2 ;;
  esac
done
echo "== ci_native ($OS): $LANGS"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
