#!/usr/bin/env bash
# Write the main npm package, etcdlock-<version>.tgz, into OUTDIR: the
# JavaScript, the types and loader.js, no native module; its
# optionalDependencies name one platform package per entry of loader.js
# PLATFORMS (etcdlock-<key>, the same version), which pack-platform.sh writes.
#
#   bindings-node/pack-main.sh OUTDIR
#
# The checkout's package.json has no optionalDependencies (so `npm ci` there
# never asks the registry for them); they are added to the packed copy only,
# as `napi prepublish` does. Prints the tarball's path last.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WS=$(cd "$HERE/.." && pwd)
die() { echo "pack-main: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: $0 OUTDIR"
mkdir -p "$1"
out=$(cd "$1" && pwd)
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$WS/Cargo.toml")
[ -n "$version" ] || die "no version in $WS/Cargo.toml [workspace.package]"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkg=$work/package
mkdir -p "$pkg"
(cd "$HERE" && cp -r package.json README.md index.js index.mjs index.d.ts options.d.ts records.d.ts loader.js fencing.js fencing.mjs fencing.d.ts prometheus.js prometheus.mjs prometheus.d.ts testing.js testing.mjs testing.d.ts lib examples scripts "$pkg/")
cp "$WS/LICENSE" "$pkg/"
rm -f "$pkg"/*.node
node - "$pkg" "$version" <<'JS'
const fs = require('node:fs');
const [dir, version] = process.argv.slice(2);
const file = `${dir}/package.json`;
const pkg = JSON.parse(fs.readFileSync(file, 'utf8'));
if (pkg.version !== version) {
  console.error(`pack-main: bindings-node/package.json has version ${pkg.version}, the workspace ${version}`);
  process.exit(1);
}
const { PLATFORMS } = require(`${dir}/loader.js`);
pkg.optionalDependencies = Object.fromEntries(PLATFORMS.map((p) => [`etcdlock-${p.key}`, version]));
// The packed copy carries no native module: prepack's load() check is for packing a source build.
delete pkg.scripts.prepack;
fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + '\n');
JS
tgz=$(cd "$pkg" && npm pack --silent --ignore-scripts --pack-destination "$out")
! tar -tzf "$out/$tgz" | grep -q '\.node$' || die "$tgz carries a native module"
echo "pack-main: $out/$tgz ($(du -k "$out/$tgz" | cut -f1) kB), optionalDependencies: $(tar -xzOf "$out/$tgz" package/package.json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(Object.keys(JSON.parse(s).optionalDependencies).join(" ")))')" >&2
echo "$out/$tgz"
