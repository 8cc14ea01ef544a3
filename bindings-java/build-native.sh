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
PROFILE=${2:-release}; PDIR=$PROFILE; [ "$PROFILE" = dev ] && PDIR=debug
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
case "$T" in
  x86_64-pc-windows-gnu)
    CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc CC_x86_64_pc_windows_gnu=x86_64-w64-mingw32-gcc \
      AR_x86_64_pc_windows_gnu=x86_64-w64-mingw32-ar cargo build --profile "$PROFILE" --target "$T" -p etcdlock-jni ;;
  *-linux-musl)
    var="CARGO_TARGET_$(echo "$T" | tr 'a-z-' 'A-Z_')_RUSTFLAGS"
    env "$var=-C target-feature=-crt-static" cargo-zigbuild build --profile "$PROFILE" --target "$T" -p etcdlock-jni ;;
  *-apple-darwin)
    # An install name of @rpath/<file> instead of the build machine's path (the JVM loads it by path).
    var="CARGO_TARGET_$(echo "$T" | tr 'a-z-' 'A-Z_')_RUSTFLAGS"
    env "$var=-C link-arg=-Wl,-install_name,@rpath/$file" cargo-zigbuild build --profile "$PROFILE" --target "$T" -p etcdlock-jni ;;
  *)
    cargo-zigbuild build --profile "$PROFILE" --target "$T" -p etcdlock-jni ;;
esac
out="$CARGO_TARGET_DIR/$T/$PDIR/$file"
[ -f "$out" ] || { echo "build-native.sh: $out was not built" >&2; exit 1; }
echo "$out -> /native/$folder/$file"
