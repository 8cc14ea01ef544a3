#!/usr/bin/env bash
# Build the abi3 wheel of the Python binding for one Rust target
# (scripts/cross.sh builds the module with the target's other native parts;
# scripts/pack_wheel.py packs it as maturin would), then check the wheel's
# platform tag and that the extension inside is of the target's format and
# architecture (`file`); for Windows, that the .pyd imports python3.dll (the
# stable ABI) and system DLLs only.
#
# Usage: bindings-python/build-wheel.sh TARGET [--out DIR] [--profile P] [--no-build]
#   TARGET: x86_64-unknown-linux-gnu  aarch64-unknown-linux-gnu
#           x86_64-unknown-linux-musl aarch64-unknown-linux-musl
#           x86_64-apple-darwin       aarch64-apple-darwin
#           x86_64-pc-windows-gnu
#   --out DIR      where the wheel goes (default: target/wheels)
#   --profile P    cargo profile, or `fast` (scripts/cross.sh; default: release)
#   --no-build     pack what an earlier build of that target and profile left
# Prints the wheel's path as its last line. Needs cargo-zigbuild and zig (PyPI:
# ziglang) for the Linux and macOS targets, mingw-w64 for Windows.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"

die() { echo "build-wheel.sh: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: build-wheel.sh TARGET [--out DIR] [--profile P] [--no-build]"
TARGET=$1; shift
OUT="$ROOT/target/wheels"
PROFILE=release BUILD=1
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --profile) PROFILE=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    *) die "unknown argument $1" ;;
  esac
done
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

# target -> the expected wheel tag, the extension's `file` pattern. macOS
# minimums are the Rust targets' own (10.12 x86_64, 11.0 arm64).
case "$TARGET" in
  x86_64-unknown-linux-gnu)   tag='manylinux_2_17_x86_64\.manylinux2014_x86_64'
                              magic='ELF 64-bit LSB shared object, x86-64' ;;
  aarch64-unknown-linux-gnu)  tag='manylinux_2_17_aarch64\.manylinux2014_aarch64'
                              magic='ELF 64-bit LSB shared object, ARM aarch64' ;;
  x86_64-unknown-linux-musl)  tag='musllinux_1_2_x86_64'
                              magic='ELF 64-bit LSB shared object, x86-64' ;;
  aarch64-unknown-linux-musl) tag='musllinux_1_2_aarch64'
                              magic='ELF 64-bit LSB shared object, ARM aarch64' ;;
  x86_64-apple-darwin)        tag='macosx_10_12_x86_64'; MACOSX_DEPLOYMENT_TARGET=10.12
                              magic='Mach-O 64-bit (dynamically linked shared library )?x86_64' ;;
  aarch64-apple-darwin)       tag='macosx_11_0_arm64'; MACOSX_DEPLOYMENT_TARGET=11.0
                              magic='Mach-O 64-bit (dynamically linked shared library )?arm64' ;;
  x86_64-pc-windows-gnu)      tag='win_amd64'
                              magic='PE32\+ executable \(DLL\).*x86-64' ;;
  *) die "unsupported target $TARGET" ;;
esac

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
PROFILE=$("$ROOT/scripts/cross.sh" --profile "$TARGET" "$PROFILE")
dir=$PROFILE; [ "$PROFILE" = dev ] && dir=debug
bin=$CARGO_TARGET_DIR/$TARGET/$dir
[ "$BUILD" = 0 ] || bin=$("$ROOT/scripts/cross.sh" "$TARGET" "$PROFILE" libs | tail -n 1)
case "$TARGET" in
  *-windows-gnu) so=$bin/_etcdlock.dll ;;
  *-apple-darwin) so=$bin/lib_etcdlock.dylib ;;
  *) so=$bin/lib_etcdlock.so ;;
esac
[ -s "$so" ] || die "$so missing (build $TARGET with profile $PROFILE first, or drop --no-build)"
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$ROOT/Cargo.toml")
# The wheel carries a stripped copy (not Mach-O: zig's linker signs it, and
# stripping would break the signature arm64 macOS requires).
strip_dir=$(mktemp -d)
trap 'rm -rf "$strip_dir"' EXIT
cp "$so" "$strip_dir/"; so=$strip_dir/$(basename "$so")
case "$TARGET" in
  *-linux-*) llvm-strip --strip-all -R .debug_gdb_scripts "$so" ;;
  *-windows-gnu) x86_64-w64-mingw32-strip --strip-all "$so" ;;
esac
whl=$(python3 "$ROOT/scripts/pack_wheel.py" "$so" "$version" "$OUT" "$TARGET" | tail -n 1)
name=$(basename "$whl")
[[ "$name" =~ -cp39-abi3-($tag)\.whl$ ]] || die "$name is not tagged /$tag/"

tmp=$(mktemp -d)
trap 'rm -rf "$strip_dir" "$tmp"' EXIT
python3 -m zipfile -e "$whl" "$tmp"
# The extras pyproject.toml declares reach the wheel's metadata.
grep -qx 'Provides-Extra: prometheus' "$tmp"/etcdlock-*.dist-info/METADATA &&
  grep -qx 'Requires-Dist: prometheus_client>=0.17; extra == "prometheus"' "$tmp"/etcdlock-*.dist-info/METADATA ||
  die "$name: METADATA does not declare the prometheus extra"
ext=$(find "$tmp/etcdlock" -maxdepth 1 -name '_etcdlock*' \( -name '*.so' -o -name '*.pyd' \))
[ "$(echo "$ext" | wc -l)" -eq 1 ] && [ -n "$ext" ] || die "$name: expected one extension module, found: $ext"
desc=$(file -b "$ext")
echo "$name: $(basename "$ext"): $desc" >&2
[[ "$desc" =~ $magic ]] || die "$name: extension is '$desc', expected /$magic/"

case "$TARGET" in
  *-linux-musl)
    # A musl extension needs musl's libc.so and nothing of glibc.
    needed=$(readelf -d "$ext" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    echo "$name: NEEDED: $needed" >&2
    [[ " $needed " == *" libc.so "* ]] || die "$name: does not link musl's libc.so ($needed)"
    [[ "$needed" != *libc.so.6* && "$needed" != *libgcc_s* ]] || die "$name: links glibc libraries ($needed)"
    # Where musl's loader is at hand (Debian's musl), let it relocate the
    # module: the only symbols it may miss are Python's C API (the
    # interpreter provides them), never libc's.
    ld=/lib/ld-musl-${TARGET%%-*}.so.1
    if [ -x "$ld" ] && [ "${TARGET%%-*}" = "$(uname -m)" ]; then
      missing=$({ "$ld" --list "$ext" 2>&1 || true; } | sed -n 's/.*: \([^ ]*\): symbol not found/\1/p')
      other=$(echo "$missing" | grep -v '^_\?Py' || true)
      [ -z "$other" ] || die "$name: musl cannot resolve: $other"
      echo "$name: musl loader: $(echo "$missing" | wc -l) unresolved symbols, all Python's C API" >&2
    fi ;;
  *-apple-darwin)
    # Minimum OS and an (ad-hoc) code signature, which arm64 macOS requires.
    if command -v llvm-objdump >/dev/null; then
      hdr=$(llvm-objdump --macho --private-headers "$ext")
      minos=$(echo "$hdr" | awk '/LC_BUILD_VERSION/{b=1} b&&/minos/{print $2; exit}')
      [ -n "$minos" ] || minos=$(echo "$hdr" | awk '/LC_VERSION_MIN_MACOSX/{b=1} b&&/version/{print $2; exit}')
      echo "$name: minimum macOS $minos; LC_CODE_SIGNATURE: $(echo "$hdr" | grep -c LC_CODE_SIGNATURE)" >&2
      [ "$minos" = "$MACOSX_DEPLOYMENT_TARGET" ] || die "$name: minimum macOS $minos, expected $MACOSX_DEPLOYMENT_TARGET"
      [ "$TARGET" != aarch64-apple-darwin ] || echo "$hdr" | grep -q LC_CODE_SIGNATURE ||
        die "$name: arm64 module without a code signature"
    fi ;;
  *-linux-gnu)
    needed=$(readelf -d "$ext" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    echo "$name: NEEDED: $needed" >&2 ;;
  *-pc-windows-gnu)
    # abi3: python3.dll, never python3X.dll; no mingw runtime DLL (libgcc_s,
    # libwinpthread, libstdc++) that a python.org install does not have.
    dlls=$(x86_64-w64-mingw32-objdump -p "$ext" | sed -n 's/.*DLL Name: //p' | tr '\n' ' ')
    echo "$name: DLL imports: $dlls" >&2
    for d in $dlls; do
      case "${d,,}" in
        python3.dll|kernel32.dll|ntdll.dll|advapi32.dll|ws2_32.dll|userenv.dll|bcrypt.dll|bcryptprimitives.dll|\
        msvcrt.dll|api-ms-win-*.dll|crypt32.dll|secur32.dll|ole32.dll|oleaut32.dll|shell32.dll|user32.dll|iphlpapi.dll|\
        ncrypt.dll|synchronization.dll|ucrtbase.dll) ;;
        *) die "$name: imports $d, which is not python3.dll nor a system DLL" ;;
      esac
    done
    [[ " ${dlls,,} " == *" python3.dll "* ]] || die "$name: does not import python3.dll ($dlls)" ;;
esac
echo "$whl"
