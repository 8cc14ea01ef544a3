#!/usr/bin/env bash
# Build the JNI library (crate etcdlock-jni) for one Rust target and print where the jar wants it.
#   bindings-java/build-native.sh <rust-target> [cargo-profile]   (profile: release by default)
# Targets and the jar folder each goes to (the etcdlock module's pom copies every one present
# from $CARGO_TARGET_DIR/<target>/<profile dir>/ at generate-resources):
#   x86_64-unknown-linux-gnu   -> /native/linux-x86_64/libetcdlock_jni.so   (cargo; the host build)
#   aarch64-unknown-linux-gnu  -> /native/linux-aarch64/libetcdlock_jni.so
#   x86_64-unknown-linux-musl  -> /native/linux-x86_64-musl/libetcdlock_jni.so
#   aarch64-unknown-linux-musl -> /native/linux-aarch64-musl/libetcdlock_jni.so
#   x86_64-apple-darwin        -> /native/macos-x86_64/libetcdlock_jni.dylib
#   aarch64-apple-darwin       -> /native/macos-aarch64/libetcdlock_jni.dylib
#   x86_64-pc-windows-gnu      -> /native/windows-x86_64/etcdlock_jni.dll
# Linux and macOS targets build with cargo-zigbuild; musl ones with -C target-feature=-crt-static
# (a musl cdylib must link musl dynamically: the JVM already has it loaded; without the flag
# cargo drops the cdylib and builds nothing). Windows builds with mingw-w64's gcc as linker.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:?usage: build-native.sh <rust-target> [cargo-profile]}
PROFILE=${2:-release}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(pwd)/target}"
case "$T" in
  x86_64-unknown-linux-gnu)   folder=linux-x86_64;       file=libetcdlock_jni.so ;;
  aarch64-unknown-linux-gnu)  folder=linux-aarch64;      file=libetcdlock_jni.so ;;
  x86_64-unknown-linux-musl)  folder=linux-x86_64-musl;  file=libetcdlock_jni.so ;;
  aarch64-unknown-linux-musl) folder=linux-aarch64-musl; file=libetcdlock_jni.so ;;
  x86_64-apple-darwin)        folder=macos-x86_64;       file=libetcdlock_jni.dylib ;;
  aarch64-apple-darwin)       folder=macos-aarch64;      file=libetcdlock_jni.dylib ;;
  x86_64-pc-windows-gnu)      folder=windows-x86_64;     file=etcdlock_jni.dll ;;
  *) echo "build-native.sh: unsupported target $T" >&2; exit 2 ;;
esac
# scripts/cross.sh: the one build per target and profile that dist.sh and the
# platform checks share (flags, install names and the other native parts of the target).
dir=$(bash scripts/cross.sh "$T" "$PROFILE" libs | tail -n 1)
out="$dir/$file"
[ -f "$out" ] || { echo "build-native.sh: $out was not built" >&2; exit 1; }
echo "$out -> /native/$folder/$file"
