#!/usr/bin/env bash
# The C library on musl (Alpine): libetcdlock built for x86_64-unknown-linux-musl
# (shared, linked to musl's libc.so) and aarch64-unknown-linux-musl (static),
# the C suite and the conformance table compiled against it with musl's own
# compilers, run against real etcd: x86_64 natively (Debian's musl loader),
# aarch64 under qemu-user (one static binary, no sysroot needed).
#   ffi-c/test-musl.sh [x86_64|aarch64 ...]     (default: both)
# Last line: "N passed, N failed" (the sum of the runs).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target"
arches=("$@"); ((${#arches[@]})) || arches=(x86_64 aarch64)
work="$(mktemp -d "${TMPDIR:-/tmp}/etcdlock-musl.XXXXXX")"
trap 'rm -rf "$work"' EXIT
need_apt=()
command -v musl-gcc >/dev/null || need_apt+=(musl-tools musl-dev)
command -v qemu-aarch64-static >/dev/null || need_apt+=(qemu-user-static)
if ((${#need_apt[@]})); then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}") >/dev/null
fi
for a in "${arches[@]}"; do
  rustup target list --installed | grep -qx "$a-unknown-linux-musl" || rustup target add "$a-unknown-linux-musl" >/dev/null
done
python3 -c 'import ziglang' 2>/dev/null || python3 -m pip install -q ziglang
command -v cargo-zigbuild >/dev/null || python3 -m pip install -q cargo-zigbuild
cargo build -q -p etcdlock-testkit
export ETCDLOCK_HARNESS="$target/debug/etcd-harness"
# Timing under etcd faults is the glibc runs' business (ffi-c/test.sh); here: the libc.
export ETCDLOCK_TEST_SKIP=leader_faults,renewal ETCDLOCK_TEST_ITERS=100
pass=0 fail=0
run() { # label command...
  local label=$1 out rc=0; shift
  out="$work/$label.log"
  # Bounded (a run takes under 2 minutes, also under qemu): a hung process
  # fails its run, with its log, instead of holding the test run.
  timeout -k 10 900 "$@" >"$out" 2>&1 || rc=$?
  if [ "$rc" -eq 124 ]; then tail -n 30 "$out"; echo "$label: did not end in 900 s (killed)" >>"$out"; fi
  local last; last="$(tail -n 1 "$out")"
  if [[ "$last" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]] && ((rc == 0 || BASH_REMATCH[2] > 0)); then
    pass=$((pass + BASH_REMATCH[1])); fail=$((fail + BASH_REMATCH[2]))
  else
    fail=$((fail + 1))
  fi
  grep -E '^(FAIL|  FAIL)' "$out" || true
  echo "musl $label: $last (exit $rc)"
}
cflags=(-std=c11 -Wall -Wextra -Werror -pedantic -g -O1 -I"$root/include" -I"$here/tests/c")
python3 "$here/tests/gen_conformance.py" "$root/conformance/cases.json" "$work/conformance.c"
coproc HARN { "$ETCDLOCK_HARNESS"; }
read -r line <&"${HARN[0]}"
ep="$(sed -E 's/.*"endpoints":\["([^"]+)".*/\1/' <<<"$line")"
for a in "${arches[@]}"; do
  t=$a-unknown-linux-musl
  # (scripts/cross.sh: the build dist.sh and the Node, Python and Java checks
  # share; it links musl's libc.so dynamically, gives the library its SONAME
  # libetcdlock.so.<major>, which programs record, hence the link to it.)
  lib="$(bash "$root/scripts/cross.sh" "$t" "${ETCDLOCK_CROSS_PROFILE:-fast}" libs | tail -n 1)"
  major="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\([0-9]*\)\..*/\1/p' "$root/Cargo.toml")"
  ln -sfn libetcdlock.so "$lib/libetcdlock.so.$major"
  if [ "$a" = x86_64 ]; then
    readelf -d "$lib/libetcdlock.so" | grep NEEDED
    for prog in test_etcdlock test_sync; do
      musl-gcc "${cflags[@]}" "$here/tests/c/$prog.c" -o "$work/$prog-$a" -L"$lib" -letcdlock -Wl,-rpath,"$lib" -lpthread
    done
    musl-gcc "${cflags[@]}" "$work/conformance.c" -o "$work/conformance-$a" -L"$lib" -letcdlock -Wl,-rpath,"$lib" -lpthread
    file "$work/test_etcdlock-$a" | grep -q 'interpreter /lib/ld-musl-x86_64.so.1' || { echo "not a musl program"; exit 1; }
    run "$a-suite" "$work/test_etcdlock-$a"
    run "$a-sync" "$work/test_sync-$a"
    run "$a-conformance" "$work/conformance-$a" "$ep"
  else
    zcc=(python3 -m ziglang cc -target "$a-linux-musl" -static)
    "${zcc[@]}" "${cflags[@]}" "$here/tests/c/test_etcdlock.c" -o "$work/test_etcdlock-$a" "$lib/libetcdlock.a" -lunwind
    "${zcc[@]}" "${cflags[@]}" "$work/conformance.c" -o "$work/conformance-$a" "$lib/libetcdlock.a" -lunwind
    file "$work/conformance-$a" | grep -q 'ARM aarch64.*statically linked' || { file "$work/conformance-$a"; exit 1; }
    run "$a-conformance" qemu-aarch64-static "$work/conformance-$a" "$ep"
    # loss_after_sigstop re-executes the test binary as its holder process,
    # which needs binfmt_misc to route an aarch64 exec to qemu (not set up here).
    ETCDLOCK_TEST_SKIP=$ETCDLOCK_TEST_SKIP,loss_after_sigstop run "$a-suite" qemu-aarch64-static "$work/test_etcdlock-$a"
  fi
done
exec {HARN[1]}>&-
wait "$HARN_PID" 2>/dev/null || true
echo "$pass passed, $fail failed"
((fail == 0))
