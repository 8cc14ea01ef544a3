#!/usr/bin/env bash
# Runs every test suite against real etcd processes the harnesses start on
# 127.0.0.1 (free ports, temp dirs) and stop. No mocks of etcd anywhere.
# Installs what a fresh machine lacks first (scripts/setup.sh), then:
#   Rust core + CLI + harness, C ABI, Python, Node, Java, the fault suite,
#   the cross-language flash sale in its short mode, and the release artifacts
#   (scripts/dist.sh) installed in a clean room with no Rust, protoc or C
#   compiler (scripts/cleanroom.sh).
# Every suite runs even if an earlier one failed; the exit status is 1 if any failed.
# ETCDLOCK_SUITES=core,c,... runs a subset.
set -uo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
bash scripts/setup.sh || exit 1
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

# `dist` builds the release artifacts for glibc 2.17, x86_64 and aarch64 (one
# zig build of the libraries for both targets and one of the x86_64 CLI, ~8-12
# min on 2 cores) and installs each in a clean room, the aarch64 ones under
# qemu-user (~2.5 min); ETCDLOCK_SUITES=dist runs it alone.
SUITES=${ETCDLOCK_SUITES:-core,c,python,node,java,faults,flash,dist}
passed=(); failed=()
suite() {
  local key=$1 name=$2; shift 2
  case ",$SUITES," in *",$key,"*) ;; *) return 0 ;; esac
  printf '\n==== %s ====\n' "$name"
  local start=$SECONDS
  if "$@"; then
    passed+=("$name ($((SECONDS - start)) s)")
  else
    failed+=("$name ($((SECONDS - start)) s)")
    printf '==== FAILED: %s\n' "$name"
  fi
}

suite core "Rust core, CLI and harness (cargo test)" \
  cargo test --quiet -p etcdlock -p etcdlock-testkit -p etcdlock-cli
# The same suites once more on the in-process etcd (mem://): every test that
# never stops, pauses or inspects etcd itself (etcdctl interop tests return
# early there). The conformance table's mem run is part of the suite above.
suite core "Rust core on the in-process etcd (ETCDLOCK_TEST_BACKEND=mem)" \
  env ETCDLOCK_TEST_BACKEND=mem cargo test --quiet -p etcdlock --test lock --test semaphore \
    --test election --test rwlock --test multi --test once --test list --test metrics --test peers
suite core "Rust lints (cargo clippy --workspace --all-targets -D warnings)" \
  cargo clippy --quiet --workspace --all-targets -- -D warnings
# The bindings' benchmark entry points exist only with their bench feature
# (never in a published artifact); lint them so they do not rot.
suite core "Rust lints of the benchmark builds (--features bench)" \
  cargo clippy --quiet -p etcdlock-python -p etcdlock-node -p etcdlock-jni \
    --features etcdlock-python/bench,etcdlock-node/bench,etcdlock-jni/bench -- -D warnings
suite core "README code blocks: each one and what checks it (scripts/readme_blocks.py)" \
  python3 scripts/readme_blocks.py
suite core "Rust seed demo (route 1, route 2)" \
  cargo run --quiet -p etcdlock --example seed_demo
suite c "C ABI (ffi-c/test.sh)" bash ffi-c/test.sh
suite python "Python (bindings-python/test.sh)" bash bindings-python/test.sh
suite node "Node (bindings-node/test.sh)" bash bindings-node/test.sh
suite java "Java (bindings-java/test.sh)" bash bindings-java/test.sh
suite faults "Faults and security (faults/test.sh)" bash faults/test.sh
suite flash "Cross-language flash sale, short mode" \
  scripts/flash_sale.sh --debug --short --require rust,cli,c,python,node,java
suite dist "Installable artifacts (scripts/dist.sh) and their clean-room install (scripts/cleanroom.sh)" \
  bash -c 'bash scripts/dist.sh && bash scripts/cleanroom.sh'

echo
echo "==== summary"
for s in "${passed[@]}"; do echo "  ok    $s"; done
for s in "${failed[@]}"; do echo "  FAIL  $s"; done
echo "suites: ${#passed[@]} passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
