#!/usr/bin/env bash
# The CLI on musl (Alpine): the CLI's own test suites (cli/tests/cli.rs and
# tree.rs: run, elect, once-style runs, status, list, the process tree and its
# signals, exit codes) run against the musl etcdlock binary that
# scripts/dist.sh ships (scripts/cross.sh's build), through
# ETCDLOCK_CLI_BIN: x86_64 natively (Debian's musl loader), aarch64 under
# qemu-user (both are static-pie: zig links musl's libc into the CLI).
#   cli/test-musl.sh [x86_64|aarch64 ...]     (default: both)
# ETCDLOCK_CROSS_PROFILE: the cargo profile of the musl build (default fast).
# Under qemu every instruction is emulated: there the suites run single-threaded
# and the tests that measure a deadline in tens of milliseconds are left to
# the native runs (ETCDLOCK_CLI_QEMU tells them; see cli/tests/).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
arches=("$@"); ((${#arches[@]})) || arches=(x86_64 aarch64)
command -v musl-gcc >/dev/null || {
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  ($SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq musl musl-tools) >/dev/null
}
work="$(mktemp -d "${TMPDIR:-/tmp}/etcdlock-cli-musl.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The test binaries themselves are the host's (glibc): they only spawn the CLI.
cargo test -q -p etcdlock-cli --no-run 2>/dev/null
rc=0
for a in "${arches[@]}"; do
  t=$a-unknown-linux-musl
  bin="$(bash scripts/cross.sh "$t" "${ETCDLOCK_CROSS_PROFILE:-fast}" cli | tail -n 1)/etcdlock"
  desc=$(file -b "$bin")
  echo "== $t: $desc"
  # zig links the CLI static-pie (musl's libc inside: runs on any Linux,
  # Alpine, distroless or scratch), though cross.sh builds the target with
  # -crt-static for the libraries' sake; a dynamic one needs musl's loader.
  case "$desc" in
    *static-pie\ linked* | *"interpreter /lib/ld-musl-$a.so.1"*) ;;
    *) echo "not a musl program: $desc"; exit 1 ;;
  esac
  extra=()
  if [ "$a" = x86_64 ]; then
    ETCDLOCK_CLI_BIN=$bin
    [ "$("$bin" --version)" = "etcdlock $(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\([^"]*\)".*/\1/p' Cargo.toml)" ]
  else
    command -v qemu-aarch64-static >/dev/null || {
      SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
      ($SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq qemu-user-static) >/dev/null
    }
    [[ "$desc" == *static-pie\ linked* ]] || { echo "the aarch64 CLI is not static: qemu would need a musl sysroot"; exit 1; }
    # The tests exec ETCDLOCK_CLI_BIN: a wrapper that runs the aarch64 binary under qemu.
    ETCDLOCK_CLI_BIN=$work/etcdlock-aarch64
    # exec: the test's child is qemu itself, so a test that kills the CLI
    # kills it (a wrapper in between, such as timeout, once left qemu running
    # with the test's pipe open, and the test waited for its end).
    printf '#!/bin/sh\nexec qemu-aarch64-static %s "$@"\n' "$bin" >"$ETCDLOCK_CLI_BIN"
    chmod +x "$ETCDLOCK_CLI_BIN"
    "$ETCDLOCK_CLI_BIN" --version
    export ETCDLOCK_CLI_QEMU=1
    extra=(-- --test-threads=1)
    echo "(under qemu the 3 tests of the supervisor skip themselves: no binfmt_misc to exec it)"
  fi
  export ETCDLOCK_CLI_BIN
  # Bounded as a whole (timeout stops the process group: cargo, the tests and
  # what they started): a hung test fails this run with its log.
  if timeout -k 10 1200 cargo test -q --no-fail-fast -p etcdlock-cli --test cli --test tree "${extra[@]}" >"$work/$a.log" 2>&1; then
    echo "musl $a: $(grep -E '^test result' "$work/$a.log" | awk '{p+=$4; f+=$6; i+=$8} END {print p " passed, " f " failed, " i " ignored"}')"
  else
    rc=1
    tail -n 60 "$work/$a.log"
    echo "musl $a: FAILED"
  fi
  unset ETCDLOCK_CLI_QEMU
done
exit $rc
