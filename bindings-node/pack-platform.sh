#!/usr/bin/env bash
# Build the native module for one Rust target and write its npm platform
# package (the @napi-rs convention: etcdlock-<key>, `os`/`cpu`/`libc` fields,
# one .node file) into OUTDIR as etcdlock-<key>-<version>.tgz.
#
#   bindings-node/pack-platform.sh TARGET OUTDIR [--profile P] [--no-build]
#
# TARGET: x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu (built against
# glibc 2.17 symbols), x86_64-unknown-linux-musl, aarch64-unknown-linux-musl,
# x86_64-apple-darwin, aarch64-apple-darwin (cargo-zigbuild), or
# x86_64-pc-windows-gnu (rustc + Debian's mingw-w64).
# --profile: cargo profile (default dist, what releases ship), or `fast`
# (what CI builds: scripts/cross.sh says which profile that is per target).
# --no-build: pack what an earlier build of that target and profile left in
# CARGO_TARGET_DIR (e.g. one cargo invocation that built several crates).
# Checks before packing: file format and architecture (`file`), no benchmark
# entry points; ELF gnu: newest GLIBC_ symbol <= 2.17; musl: NEEDED only
# libc; Windows: DLL imports only system DLLs; macOS: minimum OS, code
# signature (arm64 must carry one). Prints the tarball's path last.
# Honours CARGO_TARGET_DIR (default: the workspace's target/).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WS=$(cd "$HERE/.." && pwd)
die() { echo "pack-platform: $*" >&2; exit 1; }

[ $# -ge 2 ] || die "usage: $0 TARGET OUTDIR [--profile P] [--no-build]"
target=$1 out=$2
shift 2
profile=dist build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=${2:?--profile needs a name}; shift 2 ;;
    --no-build) build=0; shift ;;
    *) die "unknown option $1" ;;
  esac
done
triple=${target%%.*} # x86_64-unknown-linux-gnu.2.17 -> x86_64-unknown-linux-gnu
mkdir -p "$out"
out=$(cd "$out" && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$WS/target}
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR=$WS/$TARGET_DIR ;; esac
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$WS/Cargo.toml")
[ -n "$version" ] || die "no version in $WS/Cargo.toml [workspace.package]"

# The platform's key and npm fields, from loader.js (the one table).
platform=$(node -e '
  const p = require(process.argv[1]).PLATFORMS.find((x) => x.target === process.argv[2]);
  if (!p) process.exit(1);
  console.log(JSON.stringify(p));' "$HERE/loader.js" "$triple") ||
  die "no platform in loader.js PLATFORMS builds from $triple"
key=$(node -p 'JSON.parse(process.argv[1]).key' "$platform")

case "$triple" in
  *-linux-gnu | *-linux-musl) lib=libetcdlock_node.so ;;
  *-apple-darwin)
    lib=libetcdlock_node.dylib
    case "$triple" in aarch64-*) minos=11.0 ;; *) minos=10.12 ;; esac ;;
  x86_64-pc-windows-gnu) lib=etcdlock_node.dll ;;
  *) die "unsupported target $triple" ;;
esac
# scripts/cross.sh builds the module with the target's other native parts
# (one command per target and profile for every script; see there for each
# target's flags).
profile=$("$WS/scripts/cross.sh" --profile "$triple" "$profile")
dir=$profile; [ "$profile" = dev ] && dir=debug
src=$TARGET_DIR/$triple/$dir/$lib
if [ "$build" = 1 ]; then
  CARGO_TARGET_DIR=$TARGET_DIR "$WS/scripts/cross.sh" "$triple" "$profile" libs >/dev/null || die "build for $triple failed"
fi
[ -s "$src" ] || die "$src missing (build $triple with profile $profile first, or drop --no-build)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkg=$work/package
mkdir -p "$pkg"
node_file=etcdlock.$key.node
cp "$src" "$pkg/$node_file"
chmod 0755 "$pkg/$node_file"
f=$pkg/$node_file

# Strip (a copy; not Mach-O: zig's linker signs it, and stripping would break
# the signature arm64 macOS requires).
case "$triple" in
  *-linux-*) llvm-strip --strip-all -R .debug_gdb_scripts "$f" ;;
  *-windows-gnu) x86_64-w64-mingw32-strip --strip-all "$f" ;;
esac

desc=$(file -b "$f")
case "$triple" in
  x86_64-unknown-linux-*) want='ELF 64-bit LSB shared object, x86-64' ;;
  aarch64-unknown-linux-*) want='ELF 64-bit LSB shared object, ARM aarch64' ;;
  x86_64-apple-darwin) want='Mach-O 64-bit x86_64 dynamically linked shared library' ;;
  aarch64-apple-darwin) want='Mach-O 64-bit arm64 dynamically linked shared library' ;;
  x86_64-pc-windows-gnu) want='PE32+ executable (DLL) * x86-64*' ;;
esac
# shellcheck disable=SC2053
[[ "$desc" == $want* ]] || die "$src is '$desc', not '$want' ($triple)"
echo "pack-platform: $node_file: $desc" >&2

BENCH_NAMES='rawTxnDelete|coreBench|runtimeRoundTrip|rawGrantLease|rawRoundTrip|core_bench'
! strings -a "$f" | grep -qE "$BENCH_NAMES" || die "$src carries benchmark entry points (built with --features bench)"

case "$triple" in
  *-linux-gnu)
    max=$(llvm-objdump -T "$f" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
    [ "$(printf '%s\n2.17\n' "${max:-0}" | sort -V | tail -n 1)" = 2.17 ] || die "$src needs GLIBC_$max (> 2.17)"
    echo "pack-platform: newest GLIBC_ symbol ${max:-none}" >&2 ;;
  *-linux-musl)
    needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    for n in $needed; do
      case "$n" in libc.so | libc.musl-*.so.1) ;; *) die "$src needs $n (only musl's libc is everywhere)" ;; esac
    done
    echo "pack-platform: NEEDED $needed" >&2 ;;
  *-windows-gnu)
    # Every Windows (8.1+) carries these; no MinGW runtime (libgcc_s,
    # libwinpthread) and no node/libnode DLL.
    dlls=$(x86_64-w64-mingw32-objdump -p "$f" | sed -n 's/^\s*DLL Name: //p' | sort -fu | tr '\n' ' ')
    for d in $dlls; do
      case "${d,,}" in
        kernel32.dll | ntdll.dll | advapi32.dll | bcrypt.dll | bcryptprimitives.dll | ws2_32.dll | userenv.dll | \
          msvcrt.dll | api-ms-win-core-*.dll | secur32.dll | crypt32.dll | ole32.dll | shell32.dll | user32.dll) ;;
        *) die "$src imports $d, not a system DLL" ;;
      esac
    done
    exports=$(x86_64-w64-mingw32-objdump -p "$f" | sed -n '/\[Ordinal\/Name Pointer\] Table/,/^$/p' | sed -n 's/^\s*\[ *[0-9]*\] //p' | tr '\n' ' ')
    case "$exports" in *napi_register_module_v1*) ;; *) die "$src does not export napi_register_module_v1" ;; esac
    echo "pack-platform: imports $dlls; exports $exports" >&2 ;;
  *-apple-darwin)
    heads=$(llvm-objdump --macho --private-headers "$f")
    minos_seen=$(awk '/cmd LC_BUILD_VERSION/ {b=1} b && /minos/ {print $2; exit}' <<<"$heads")
    [ -n "$minos_seen" ] || minos_seen=$(awk '/cmd LC_VERSION_MIN_MACOSX/ {b=1} b && /version/ {print $2; exit}' <<<"$heads")
    [ "$minos_seen" = "$minos" ] || die "$src has minimum macOS '$minos_seen', not $minos"
    signed=no
    grep -q 'cmd LC_CODE_SIGNATURE' <<<"$heads" && signed=yes
    [ "$signed" = yes ] || [ "${triple%%-*}" = x86_64 ] || die "$src carries no code signature (arm64 macOS refuses to load it)"
    id=$(llvm-objdump --macho --dylib-id "$f" | tail -n +2)
    [ "$id" = "@rpath/$node_file" ] || [ "$build" = 0 ] || die "$src has install name $id, not @rpath/$node_file"
    libs=$(llvm-objdump --macho --dylibs-used "$f" | tail -n +2 | awk '{print $1}' | grep -vxF "$id" | tr '\n' ' ')
    for l in $libs; do
      case "$l" in /usr/lib/* | /System/Library/*) ;; *) die "$src links $l, not a system library" ;; esac
    done
    llvm-objdump --macho --exports-trie "$f" | grep -q '_napi_register_module_v1$' || die "$src does not export napi_register_module_v1"
    # zig's Mach-O linker ignores rustc's -exported_symbols_list: every global
    # Rust symbol stays in the export trie (harmless under the two-level
    # namespace, where each image binds to its own definitions).
    nexp=$(llvm-objdump --macho --exports-trie "$f" | tail -n +2 | wc -l)
    echo "pack-platform: minimum macOS $minos_seen, code signature: $signed, install name $id, links $libs; exports $nexp symbols" >&2 ;;
esac

node - "$platform" "$version" "$pkg" "$node_file" "$HERE/package.json" <<'JS'
const fs = require('node:fs');
const [platform, version, dir, file, mainJson] = process.argv.slice(2);
const p = JSON.parse(platform);
const main = JSON.parse(fs.readFileSync(mainJson, 'utf8'));
const windows = p.target.endsWith('-windows-gnu');
const pkg = {
  name: `etcdlock-${p.key}`,
  version,
  description: `The native module of etcdlock for ${p.about} (Rust target ${p.target}). Installed by the etcdlock package as an optional dependency; not for direct use.`,
  main: file,
  files: [file, 'README.md'],
  os: [p.os],
  cpu: [p.cpu],
  ...(p.libc ? { libc: [p.libc] } : {}),
  license: main.license,
  // The main package's source links: npm publish --provenance checks
  // `repository` against the repository the workflow runs in.
  homepage: main.homepage,
  bugs: main.bugs,
  repository: main.repository,
  engines: main.engines,
};
fs.writeFileSync(`${dir}/package.json`, JSON.stringify(pkg, null, 2) + '\n');
const lines = [
  `# ${pkg.name}`,
  '',
  `The native module of [etcdlock](https://www.npmjs.com/package/etcdlock) ${version} for ${p.about},`,
  `built from the Rust target \`${p.target}\`. The \`etcdlock\` package lists it as an`,
  'optional dependency and npm installs it only on a matching machine (`os`, `cpu`' + (p.libc ? ', `libc`' : '') + ').',
  'Install `etcdlock`, not this package.',
];
if (windows)
  lines.push(
    '',
    'This is a MinGW-w64 (`windows-gnu`) build, loaded by the official `node.exe`',
    '(an MSVC build) like any other addon: it looks up Node-API in the host process',
    'when it loads (no link against `node.lib` or a `libnode.dll`), imports only',
    'system DLLs (KERNEL32, ntdll, ADVAPI32, bcrypt, bcryptprimitives, WS2_32,',
    'USERENV, msvcrt, api-ms-win-core-*) and passes no C runtime object across',
    'the boundary. It needs Windows 10 or later (Windows Server 2016 or later).'
  );
fs.writeFileSync(`${dir}/README.md`, lines.join('\n') + '\n');
JS
cp "$WS/LICENSE" "$pkg/LICENSE"
tgz=$(cd "$pkg" && npm pack --silent --ignore-scripts --pack-destination "$out")
listing=$(tar -tzf "$out/$tgz" | sort | tr '\n' ' ')
[ "$listing" = "package/LICENSE package/README.md package/$node_file package/package.json " ] ||
  die "$tgz holds $listing"
echo "pack-platform: $out/$tgz ($(du -k "$out/$tgz" | cut -f1) kB; $node_file $(du -k "$f" | cut -f1) kB)" >&2
echo "$out/$tgz"
