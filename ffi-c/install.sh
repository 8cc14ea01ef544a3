#!/usr/bin/env bash
# Install libetcdlock: include/etcdlock.h, lib/libetcdlock.so.V (+ .so.MAJOR,
# .so symlinks), lib/libetcdlock.a (debuginfo stripped) and
# lib/pkgconfig/etcdlock.pc under a prefix.
#
#   ffi-c/install.sh [--prefix DIR] [--debug] [--no-build]
#
# --prefix   where to install (default /usr/local)
# --debug    install the debug build instead of the release build
# --no-build install what is already built (the test suite uses this)
# Honours CARGO_TARGET_DIR and DESTDIR (for packaging).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
prefix=/usr/local
profile=release
build=1
while (($#)); do
    case "$1" in
        --prefix) prefix="$2"; shift 2 ;;
        --prefix=*) prefix="${1#--prefix=}"; shift ;;
        --debug) profile=debug; shift ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
target="${CARGO_TARGET_DIR:-$root/target}"
if ((build)); then
    if [ "$profile" = release ]; then
        (cd "$root" && cargo build --release -p etcdlock-ffi)
    else
        (cd "$root" && cargo build -p etcdlock-ffi)
    fi
fi
libdir="$target/$profile"
if [ ! -f "$libdir/libetcdlock.so" ] && [ "$profile" = release ] && ((build == 0)); then
    libdir="$target/debug" # --no-build falls back to whatever was built
fi
for f in libetcdlock.so libetcdlock.a; do
    [ -f "$libdir/$f" ] || { echo "missing $libdir/$f; build first" >&2; exit 1; }
done
version="$(sed -nE 's/^version = "([^"]+)".*/\1/p' "$root/Cargo.toml" | head -n 1)"
dest="${DESTDIR:-}$prefix"
install -d "$dest/include" "$dest/lib/pkgconfig"
install -m 0644 "$root/include/etcdlock.h" "$dest/include/etcdlock.h"
major="${version%%.*}"
# The library's SONAME is libetcdlock.so.<major> (ffi-c/build.rs): install the
# file under its full version with the usual symlinks, without debuginfo.
install -m 0755 "$libdir/libetcdlock.so" "$dest/lib/libetcdlock.so.$version"
ln -sfn "libetcdlock.so.$version" "$dest/lib/libetcdlock.so.$major"
ln -sfn "libetcdlock.so.$major" "$dest/lib/libetcdlock.so"
install -m 0644 "$libdir/libetcdlock.a" "$dest/lib/libetcdlock.a"
if command -v strip >/dev/null 2>&1; then
    strip --strip-debug "$dest/lib/libetcdlock.so.$version" "$dest/lib/libetcdlock.a"
fi
sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" "$here/etcdlock.pc.in" >"$dest/lib/pkgconfig/etcdlock.pc"
echo "installed etcdlock $version ($profile) under $dest"
echo "build with: cc app.c \$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs etcdlock)"
