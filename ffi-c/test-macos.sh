#!/usr/bin/env bash
# The C library for macOS (x86_64 and arm64), built here with zig
# (cargo-zigbuild) and inspected, not run: nothing on this Linux machine runs
# Mach-O. scripts/inspect_macos.py checks each dylib's architecture, minimum
# macOS (10.12 / 11.0), linked libraries (the system's only), exports (the C
# API, plus the toolchain's few: see TOOLCHAIN), install name
# (@rpath/libetcdlock.dylib) and, for arm64, its ad-hoc code signature.
#   ffi-c/test-macos.sh [--profile P] [x86_64|aarch64 ...]
#     (profile default: fast, i.e. inspect: scripts/cross.sh; dist.sh ships dist;
#     arches default: both. ./test.sh inspects aarch64 only, as its dist.sh
#     --fast builds: see SKIPPED in scripts/dist.sh)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target"
profile=fast
[ "${1:-}" = --profile ] && { profile=$2; shift 2; }
arches=("$@"); ((${#arches[@]})) || arches=(x86_64 aarch64)
python3 -c 'import ziglang' 2>/dev/null || python3 -m pip install -q ziglang
command -v cargo-zigbuild >/dev/null || python3 -m pip install -q cargo-zigbuild
python3 -c 'import lief' 2>/dev/null || python3 -m pip install -q lief
# Exported besides the C API, by the toolchain: the linker's image symbols,
# Rust's unwinding personality and an std constant, and psm's stack switch
# (stacker, see core's runtime.rs), which LTO cannot internalize (assembly).
TOOLCHAIN='__mh_dylib_header|___dso_handle|_rust_eh_personality|_rust_psm_[a-z_]+|__RNvNtCs[A-Za-z0-9]+_3std9panicking11EMPTY_PANIC'
rc=0
for a in "${arches[@]}"; do
  t=$a-apple-darwin
  rustup target list --installed | grep -qx "$t" || rustup target add "$t" >/dev/null
  case $a in x86_64) min=10.12 arch=x86_64 ;; aarch64) min=11.0 arch=arm64 ;; esac
  dir=$(bash scripts/cross.sh "$t" "$profile" libs | tail -n 1) || { rc=1; continue; }
  python3 scripts/inspect_macos.py --exports "_etcdlock_[a-z0-9_]+|$TOOLCHAIN" \
    --install-name @rpath/libetcdlock.dylib "$arch" "$dir/libetcdlock.dylib" || rc=1
done
exit $rc
