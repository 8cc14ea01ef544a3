#!/usr/bin/env bash
# A 64-bit Wine prefix (Windows 10) that runs the Windows (x86_64-pc-windows-gnu) builds of
# etcdlock: Debian's wine (8.0), and bcryptprimitives.dll, which Wine 8 lacks
# and Rust's std needs (see bcryptprimitives.c: a test-only stand-in), and
# api-ms-win-core-synch-l1-2-0.dll (WaitOnAddress) if this Wine has no file of it.
# Prints the prefix's path (WINEPREFIX) on stdout.
#   scripts/wine/setup.sh [PREFIX]      (default: ${WINEPREFIX:-~/.wine-etcdlock})
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prefix=${1:-${WINEPREFIX:-$HOME/.wine-etcdlock}}
if ! command -v wine >/dev/null || ! command -v x86_64-w64-mingw32-gcc >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wine64 mingw-w64) >/dev/null
fi
# The Rust target every Windows build here uses (mingw-w64 links it).
if command -v rustup >/dev/null; then
  rustup target list --installed | grep -qx x86_64-pc-windows-gnu || rustup target add x86_64-pc-windows-gnu >/dev/null
fi
export WINEPREFIX=$prefix WINEARCH=win64 WINEDEBUG=-all
if [ ! -f "$prefix/system.reg" ]; then
  # wineboot complains that wine32 is missing; the 64-bit prefix works without it.
  wine wineboot --init >/dev/null 2>&1 || true
  wineserver -w || true
fi
# Windows 10: what we support, and Node refuses Wine's default (Windows 7).
if ! grep -qs '"Version"="win10"' "$prefix/user.reg"; then
  wine winecfg /v win10 >/dev/null 2>&1 || { echo "wine/setup.sh: winecfg /v win10 failed" >&2; exit 1; }
fi
sys32=$prefix/drive_c/windows/system32
[ -d "$sys32" ] || { echo "wine/setup.sh: no $sys32 after wineboot" >&2; exit 1; }
if [ ! -f "$sys32/bcryptprimitives.dll" ] || [ "$here/bcryptprimitives.c" -nt "$sys32/bcryptprimitives.dll" ]; then
  x86_64-w64-mingw32-gcc -O2 -shared -s -o "$sys32/bcryptprimitives.dll" "$here/bcryptprimitives.c" -ladvapi32
fi
# WaitOnAddress & co. (Rust's std on Windows 8+): forwarded to Wine's kernelbase
# where the Wine build has no api-ms-win-core-synch-l1-2-0.dll of its own.
if [ ! -f "$sys32/api-ms-win-core-synch-l1-2-0.dll" ] &&
  ! ls /usr/lib/*/wine/x86_64-windows/api-ms-win-core-synch-l1-2-0.dll >/dev/null 2>&1; then
  x86_64-w64-mingw32-gcc -shared -nostdlib -Wl,-e,0 -o "$sys32/api-ms-win-core-synch-l1-2-0.dll" \
    "$here/api-ms-win-core-synch-l1-2-0.def"
fi
echo "$prefix"
