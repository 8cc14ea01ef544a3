#!/usr/bin/env bash
# The one command that builds a target's native parts. scripts/dist.sh, the
# platform tests (ffi-c/test-{musl,windows,macos}.sh, the Node, Java and CLI
# smoke tests) and the packing scripts all build through it, so that one
# target and profile is always built with the same flags, environment and
# package set: cargo then finds what another script built fresh instead of
# rebuilding it (a changed RUSTFLAGS or CC_<target> rebuilds every crate).
#
#   scripts/cross.sh TARGET PROFILE libs|cli   prints the output directory last
#   scripts/cross.sh --profile TARGET PROFILE  prints the profile PROFILE names
#
# TARGET   x86_64-unknown-linux-musl  aarch64-unknown-linux-musl
#          x86_64-apple-darwin        aarch64-apple-darwin
#          x86_64-pc-windows-gnu
#          x86_64-unknown-linux-gnu   aarch64-unknown-linux-gnu  (glibc 2.17 symbols)
# PROFILE  a cargo profile (dist: what releases ship), or `fast`: what CI
#          builds (./test.sh's platform checks, dist.sh --fast): `cross` (dev
#          code generation, line tables for etcdlock's crates), `inspect` for
#          macOS (no debug info, whole-program LTO, which is what leaves a
#          dylib exporting the C API only: zig's Mach-O linker ignores rustc's
#          export list).
# libs     the C library (libetcdlock .so/.dylib/.dll + .a), the Python module,
#          the Node module and the JNI library, in one cargo invocation (one
#          feature resolution); `cli` the etcdlock binary, apart (its tokio
#          process and signal features and mimalloc stay out of the libraries).
#
# Per target: musl links musl's libc.so dynamically (-crt-static: a cdylib
# cannot be built against the static CRT; the CLI shares the flag, hence the
# build, and needs /lib/ld-musl-<arch>.so.1, which every Alpine has);
# macOS sets the minimum OS (10.12 x86_64, 11.0 arm64; the install names come
# from each crate's build.rs); Windows links with mingw-w64 (rustc's default
# for windows-gnu) and gives napi's build an empty libnode import archive.
# Env: CARGO_TARGET_DIR (default: the workspace's target/).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
die() { echo "cross.sh: $*" >&2; exit 1; }

resolve_profile() { # target profile
  if [ "$2" = fast ]; then
    case "$1" in *-apple-darwin) echo inspect ;; *) echo cross ;; esac
  else
    echo "$2"
  fi
}
if [ "${1:-}" = --profile ]; then resolve_profile "${2:?}" "${3:?}"; exit 0; fi
[ $# -eq 3 ] || die "usage: cross.sh TARGET PROFILE libs|cli"
target=$1 what=$3
profile=$(resolve_profile "$target" "$2")
case "$what" in
  libs) pkgs=(-p etcdlock-ffi -p etcdlock-python -p etcdlock-node -p etcdlock-jni) ;;
  cli) pkgs=(-p etcdlock-cli) ;;
  *) die "build libs or cli, not '$what'" ;;
esac

# Flags for this target only (not build scripts); RUSTFLAGS would override them.
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS
var=CARGO_TARGET_$(echo "$target" | tr 'a-z-' 'A-Z_')_RUSTFLAGS
flags=()
cargo=(cargo zigbuild) ztarget=$target
case "$target" in
  *-unknown-linux-gnu)
    ztarget=$target.2.17
    # A build id in every binary: dist.sh keys the C library's split debug info by it.
    flags+=(-C link-arg=-Wl,--build-id=sha1) ;;
  *-unknown-linux-musl)
    flags+=(-C target-feature=-crt-static -C link-arg=-Wl,--build-id=sha1) ;;
  x86_64-apple-darwin) export MACOSX_DEPLOYMENT_TARGET=10.12 ;;
  aarch64-apple-darwin) export MACOSX_DEPLOYMENT_TARGET=11.0 ;;
  x86_64-pc-windows-gnu)
    cargo=(cargo build)
    # napi's build script links a windows-gnu addon against a libnode.dll
    # (MSYS2's Node) and fails when it finds none. The module never calls
    # into one (napi's dyn-symbols resolve Node-API from node.exe at load
    # time): an empty import archive satisfies the link and adds no import.
    stub=$CARGO_TARGET_DIR/libnode-stub
    mkdir -p "$stub"
    command -v x86_64-w64-mingw32-gcc >/dev/null || die "mingw-w64 missing (apt install mingw-w64)"
    [ -s "$stub/libnode.a" ] || x86_64-w64-mingw32-ar rcs "$stub/libnode.a"
    : >"$stub/libnode.dll"
    export LIBNODE_PATH=$stub ;;
  *) die "unsupported target $target" ;;
esac
# The C library's SONAME (ELF) carries the major version (ffi-c/build.rs).
export ETCDLOCK_SONAME=1
export "$var=${flags[*]}"

# A fresh machine: the Rust target, zig and cargo-zigbuild (PyPI).
rustup target list --installed 2>/dev/null | grep -qx "$target" || rustup target add "$target" >/dev/null
if [ "${cargo[1]}" = zigbuild ]; then
  python3 -c 'import ziglang' 2>/dev/null || python3 -m pip install -q ziglang
  command -v cargo-zigbuild >/dev/null || python3 -m pip install -q cargo-zigbuild
fi
echo "cross.sh: ${cargo[*]} --profile $profile --target $ztarget ${pkgs[*]} ($var='${flags[*]}')" >&2
# (cargo-zigbuild warns that xcrun is missing: zig brings its own macOS SDK stubs.)
(cd "$ROOT" && "${cargo[@]}" --quiet --profile "$profile" --target "$ztarget" "${pkgs[@]}" 2>&1 |
  grep -vE 'xcrun|macOS SDK' >&2; exit "${PIPESTATUS[0]}") || die "build of $what for $target ($profile) failed"
dir=$profile; [ "$profile" = dev ] && dir=debug
echo "$CARGO_TARGET_DIR/$target/$dir"
