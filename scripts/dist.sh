#!/usr/bin/env bash
# Builds every installable artifact into dist/, for x86_64 and aarch64 Linux
# with glibc 2.17 or newer, stripped, from one version (the workspace's):
#
#   etcdlock-V-cp39-abi3-manylinux_2_17_{x86_64,aarch64}.manylinux2014_{x86_64,aarch64}.whl,
#                                       etcdlock-V.tar.gz (sdist)
#   etcdlock-V.tgz                      npm package with the prebuilt linux-x64-gnu and
#                                       linux-arm64-gnu modules (loader.js picks by process.arch)
#   maven/io/etcdlock/...               etcdlock (native/linux-x86_64/ and native/linux-aarch64/
#                                       in the jar, chosen at load), etcdlock-spring,
#                                       etcdlock-shedlock (+ -sources, -javadoc, poms)
#   etcdlock-c-V-{x86_64,aarch64}-linux-gnu.tar.gz  lib/libetcdlock.so.V (+ .so.MAJOR, .so), .a,
#                                       header, pkg-config, CMake package, valgrind suppressions
#   etcdlock-cli-V-x86_64-linux-gnu.tar.gz  bin/etcdlock, README.md, LICENSE, man page,
#                                       bash/zsh/fish completions, a systemd unit + timer example
#
# Every library of both targets comes from ONE `cargo zigbuild --profile dist`
# (one feature resolution, each dependency compiled once per target, zig links
# against glibc 2.17 stubs); the CLI builds apart (x86_64 only). It refuses to pack a package
# whose native part is missing, fails if pyproject.toml / package.json / a pom
# names another version, and checks that no shipped binary needs a GLIBC_
# symbol above 2.17 and that each is built for the architecture it is filed
# under. The aarch64 binaries are handled with binutils-aarch64-linux-gnu
# (installed with apt when missing).
#   scripts/dist.sh [--out DIR]      (env: CARGO_TARGET_DIR)
#   scripts/dist.sh --prepare        install the tools only (pip, rustup, apt), then stop
#   scripts/dist.sh --build-only     install the tools, build, then stop (no packing)
#   scripts/dist.sh --no-build       pack what an earlier --build-only built
# test.sh runs --prepare, then --build-only in the background at the lowest
# CPU and I/O priority while the other suites run, then --no-build.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/dist
MODE=all
while (($#)); do
  case "$1" in
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --prepare|--build-only|--no-build) MODE=${1#--}; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "dist.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
# x86_64 first: the CLI, the man page and completions come from its build.
ARCHES=(x86_64 aarch64)
GLIBC=2.17
started=$SECONDS
die() { echo "dist.sh: $*" >&2; exit 1; }
step() { printf '[dist %4ss] %s\n' "$((SECONDS - started))" "$*"; }

# --- tools (PyPI: zig itself, cargo-zigbuild, auditwheel, maturin for the sdist)
missing=()
python3 -c 'import ziglang' 2>/dev/null || missing+=(ziglang)
command -v cargo-zigbuild >/dev/null || missing+=(cargo-zigbuild)
command -v auditwheel >/dev/null || missing+=(auditwheel)
command -v maturin >/dev/null || missing+=("maturin>=1.16,<2")
if ((${#missing[@]})); then
  step "installing ${missing[*]} (pip)"
  python3 -m pip install -q "${missing[@]}"
fi
for a in "${ARCHES[@]}"; do
  rustup target list --installed 2>/dev/null | grep -qx "$a-unknown-linux-gnu" || {
    step "rustup target add $a-unknown-linux-gnu"; rustup target add "$a-unknown-linux-gnu" >/dev/null; }
done
if ! command -v aarch64-linux-gnu-objcopy >/dev/null; then
  step "installing binutils-aarch64-linux-gnu (apt)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq binutils-aarch64-linux-gnu >/dev/null ||
    die "cannot install binutils-aarch64-linux-gnu (needed to strip and split the aarch64 binaries)"
fi

# --- one version
[ "$MODE" = prepare ] && { step "tools ready"; exit 0; }

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\([^"]*\)".*/\1/p' Cargo.toml)
[ -n "$version" ] || die "no version in Cargo.toml [workspace.package]"
major=${version%%.*}
bad=0
pyver=$(sed -n 's/^version = "\([^"]*\)".*/\1/p' bindings-python/pyproject.toml)
if [ -n "$pyver" ] && [ "$pyver" != "$version" ]; then
  echo "dist.sh: bindings-python/pyproject.toml has version $pyver, the workspace $version" >&2; bad=1
fi
nodever=$(node -p 'require("./bindings-node/package.json").version')
[ "$nodever" = "$version" ] || { echo "dist.sh: bindings-node/package.json has version $nodever, the workspace $version" >&2; bad=1; }
for pom in bindings-java/pom.xml bindings-java/*/pom.xml; do
  # The project's own version, or its parent's when it inherits it.
  v=$(python3 - "$pom" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = {"m": "http://maven.apache.org/POM/4.0.0"}
r = ET.parse(sys.argv[1]).getroot()
v = r.find("m:version", ns)
if v is None: v = r.find("m:parent/m:version", ns)
print(v.text if v is not None else "")
PY
)
  case "$v" in "$version"|"$version-SNAPSHOT") ;; *) echo "dist.sh: $pom has version $v, the workspace $version" >&2; bad=1 ;; esac
done
((bad == 0)) || die "versions disagree; fix them before packing"
step "etcdlock $version -> $OUT"

# --- one build of every native part, for glibc 2.17
# Line tables and a build id in every binary: the C library's debug information
# ships apart (lib/debug/.build-id/), everything is stripped before packing.
# The CLI builds apart: its `etcdlock bench` turns on core's bench feature, and
# one cargo build unifies features, which would put the benchmark code into the
# libraries' core too.
# (binutils per architecture: the host's handle x86_64 only; readelf reads any ELF.)
tool() { # arch name
  if [ "$1" = x86_64 ]; then echo "$2"; else echo "$1-linux-gnu-$2"; fi
}
bin_of() { echo "$CARGO_TARGET_DIR/$1-unknown-linux-gnu/dist"; }
# The libraries of both targets in ONE invocation: cargo's job queue then
# overlaps one target's long single-threaded fat-LTO links with the other's
# compiling (on 2 cores: 437 s for both against 411 s for x86_64 alone and 205 s
# for aarch64 alone, measured in turn on one loaded machine).
targets=(); for a in "${ARCHES[@]}"; do targets+=(--target "$a-unknown-linux-gnu.$GLIBC"); done
[ "$MODE" = no-build ] && step "packing what --build-only built"
for pkgs in "-p etcdlock-ffi -p etcdlock-python -p etcdlock-node -p etcdlock-jni" "-p etcdlock-cli"; do
  [ "$MODE" = no-build ] && break
  t0=$SECONDS
  if [ "$pkgs" = "-p etcdlock-cli" ]; then targets=(--target "x86_64-unknown-linux-gnu.$GLIBC"); fi
  step "cargo zigbuild --profile dist ${targets[*]} $pkgs"
  # shellcheck disable=SC2086
  ETCDLOCK_SONAME=1 RUSTFLAGS="${RUSTFLAGS:-} -C link-arg=-Wl,--build-id=sha1" \
    cargo zigbuild --quiet --profile dist "${targets[@]}" $pkgs
  echo "  built in $((SECONDS - t0)) s"
done
[ "$MODE" = build-only ] && { step "built"; exit 0; }
for a in "${ARCHES[@]}"; do
  for f in etcdlock lib_etcdlock.so libetcdlock_node.so libetcdlock_jni.so; do
    # (.debug_gdb_scripts: rustc's pointer to gdb pretty-printers, in executables built with debug info)
    [ -f "$(bin_of "$a")/$f" ] && "$(tool "$a" strip)" --strip-all -R .debug_gdb_scripts "$(bin_of "$a")/$f"
  done
done
require() { [ -s "$1" ] || die "refusing to pack $2: its native part $1 is missing"; }
# readelf's name of each architecture's e_machine.
machine_of() { case "$1" in x86_64) echo "Advanced Micro Devices X86-64" ;; aarch64) echo "AArch64" ;; esac; }
arch_check() { # arch file...
  local a=$1 f m; shift
  for f in "$@"; do
    m=$(readelf -h "$f" | sed -n 's/^ *Machine: *//p' | head -n 1)
    [ "$m" = "$(machine_of "$a")" ] || die "$f is built for '$m', filed under $a"
  done
}

# Move a binary's debug information to DIR/.build-id/xx/rest.debug (where gdb
# looks, keyed by the build id) and strip the binary. The binary also names it
# in a .gnu_debuglink, found through .debug/<name>.debug beside the binary (a
# link to the build-id file): valgrind looks there, not by build id, and its
# suppressions for a forked child (etcdlock.supp) need the function names.
split_debug() { # arch binary dir
  local a=$1 id dir name; shift
  id=$(readelf -n "$1" | awk '/Build ID/ {print $3}')
  [ -n "$id" ] || die "$1 has no build id"
  install -d "$2/.build-id/${id:0:2}"
  "$(tool "$a" objcopy)" --only-keep-debug --compress-debug-sections "$1" "$2/.build-id/${id:0:2}/${id:2}.debug"
  "$(tool "$a" strip)" --strip-all -R .debug_gdb_scripts "$1"
  dir=$(dirname "$1"); name=$(basename "$1")
  install -d "$dir/.debug"
  ln -sfn "$(realpath --relative-to="$dir/.debug" "$2/.build-id/${id:0:2}/${id:2}.debug")" "$dir/.debug/$name.debug"
  (cd "$dir" && "$(tool "$a" objcopy)" --add-gnu-debuglink=".debug/$name.debug" "$name")
  echo "  $(basename "$1"): build id $id, debug info $(du -k "$2/.build-id/${id:0:2}/${id:2}.debug" | cut -f1) kB apart"
}

# No shipped binary may need a glibc symbol version above 2.17.
glibc_check() { # arch file...
  local a=$1 f max; shift
  arch_check "$a" "$@"
  for f in "$@"; do
    max=$("$(tool "$a" objdump)" -T "$f" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
    if [ -n "$max" ] && [ "$(printf '%s\n%s\n' "$max" "$GLIBC" | sort -V | tail -n 1)" != "$GLIBC" ]; then
      die "$f needs GLIBC_$max (> $GLIBC)"
    fi
    echo "  $(basename "$f") ($a): newest GLIBC_ symbol ${max:-none} ($(du -k "$f" | cut -f1) kB)"
  done
}

# No published library carries a benchmark entry point: they exist only in
# builds with a binding's `bench` feature (bench.py, bench.js, bench.sh).
BENCH_NAMES='bench_floor|_raw_floor|_core_bench|rawTxnDelete|coreBench|runtimeRoundTrip|rawGrantLease|rawRoundTrip|core_bench'
no_bench() {
  local f n
  for f in "$@"; do
    n=$(strings -a "$f" | grep -cE "$BENCH_NAMES" || true)
    [ "$n" -eq 0 ] || die "$f carries benchmark code: $(strings -a "$f" | grep -E "$BENCH_NAMES" | head -3 | tr '\n' ' ')"
  done
  echo "  no benchmark entry points in: $(for f in "$@"; do basename "$f"; done | tr '\n' ' ')"
}

rm -rf "$OUT"; mkdir -p "$OUT"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# --- C: one tarball per architecture, the same layout
pack_c() { # arch
  local a=$1 BIN c soname foreign
  BIN=$(bin_of "$a")
  require "$BIN/libetcdlock.so" "the $a C library"; require "$BIN/libetcdlock.a" "the $a C library"
  soname=$("$(tool "$a" objdump)" -p "$BIN/libetcdlock.so" | awk '/SONAME/ {print $2}')
  [ "$soname" = "libetcdlock.so.$major" ] || die "libetcdlock.so ($a) has SONAME '$soname', want libetcdlock.so.$major"
  c=$work/c-$a/etcdlock-$version
  install -d "$c/include" "$c/lib/pkgconfig" "$c/lib/cmake/etcdlock" "$c/share/etcdlock" "$c/share/man/man3" \
    "$c/share/doc/etcdlock/examples"
  install -m 0644 include/etcdlock.h "$c/include/"
  install -m 0755 "$BIN/libetcdlock.so" "$c/lib/libetcdlock.so.$version"
  split_debug "$a" "$c/lib/libetcdlock.so.$version" "$c/lib/debug"
  ln -s "libetcdlock.so.$version" "$c/lib/libetcdlock.so.$major"
  ln -s "libetcdlock.so.$major" "$c/lib/libetcdlock.so"
  # The archive exports etcdlock_* only: its objects become one (ld -r) in which
  # every other global symbol (Rust's std, ring, compiler builtins) is made
  # local, so a program that links another Rust static library does not clash.
  # (readelf, not nm or ar: binutils' nm and ar load LLVM's gold plugin, which
  # aborts on that object; ffi-c/dist/mkar.py writes the archive.)
  readelf --dyn-syms -W "$c/lib/libetcdlock.so.$version" | awk '$7 != "UND" && $8 ~ /^etcdlock_/ {print $8}' | sort -u >"$work/exports"
  [ "$(wc -l <"$work/exports")" -gt 30 ] || die "the $a shared library exports too few etcdlock_ symbols"
  "$(tool "$a" ld)" -r --whole-archive "$BIN/libetcdlock.a" -o "$work/etcdlock.o"
  "$(tool "$a" objcopy)" --keep-global-symbols="$work/exports" --strip-debug "$work/etcdlock.o"
  python3 ffi-c/dist/mkar.py "$c/lib/libetcdlock.a" "$work/etcdlock.o" $(cat "$work/exports")
  foreign=$(globals "$c/lib/libetcdlock.a" | grep -vc '^etcdlock_' || true)
  [ "$foreign" -eq 0 ] || die "libetcdlock.a ($a) still exports $foreign symbols that are not etcdlock_*"
  arch_check "$a" "$work/etcdlock.o"
  echo "  libetcdlock.a ($a): $(globals "$c/lib/libetcdlock.a" | wc -l) global symbols, all etcdlock_* (the build's archive had $(globals "$BIN/libetcdlock.a" | wc -l))"
  subst ffi-c/dist/etcdlock.pc.in "$c/lib/pkgconfig/etcdlock.pc"
  subst ffi-c/dist/etcdlock-static.pc.in "$c/lib/pkgconfig/etcdlock-static.pc"
  subst ffi-c/dist/etcdlockConfig.cmake "$c/lib/cmake/etcdlock/etcdlockConfig.cmake"
  subst ffi-c/dist/etcdlockConfigVersion.cmake "$c/lib/cmake/etcdlock/etcdlockConfigVersion.cmake"
  install -m 0644 ffi-c/dist/etcdlock.supp "$c/share/etcdlock/etcdlock.supp"
  subst ffi-c/dist/README.md "$c/README.md"
  install -m 0644 "$c/README.md" "$c/share/doc/etcdlock/README.md"
  install -m 0644 LICENSE "$c/LICENSE"
  install -m 0644 examples/c/lock_token.c ffi-c/dist/examples/Makefile ffi-c/dist/examples/CMakeLists.txt "$c/share/doc/etcdlock/examples/"
  python3 ffi-c/dist/man3.py include/etcdlock.h "$version" "$c/share/man/man3" | sed 's/^/  /'
  glibc_check "$a" "$c/lib/libetcdlock.so.$version"
  no_bench "$c/lib/libetcdlock.so.$version" "$c/lib/libetcdlock.a"
  tar -C "$work/c-$a" -czf "$OUT/etcdlock-c-$version-$a-linux-gnu.tar.gz" "etcdlock-$version"
}
globals() { readelf -sW "$1" 2>/dev/null | awk '($5 == "GLOBAL" || $5 == "WEAK") && $7 != "UND" {print $8}' | sort -u; }
subst() { # template out (in pack_c: @ARCH@ is its architecture)
  sed -e "s|@VERSION@|$version|g" -e "s|@MAJOR@|$major|g" -e "s|@ARCH@|$a|g" "$1" >"$2"
}
for a in "${ARCHES[@]}"; do pack_c "$a"; done

# --- CLI (x86_64)
BIN=$(bin_of x86_64)
require "$BIN/etcdlock" "the CLI"
glibc_check x86_64 "$BIN/etcdlock"
cli=$work/etcdlock-cli-$version
install -d "$cli/bin"; install -m 0755 "$BIN/etcdlock" "$cli/bin/etcdlock"
# What an operator installs beside the binary, generated from the binary
# itself (the same clap definition as --help): the man page and completions.
install -m 0644 cli/README.md "$cli/README.md"
install -m 0644 LICENSE "$cli/LICENSE"
install -d "$cli/share/man/man1" "$cli/share/bash-completion/completions" "$cli/share/zsh/site-functions" \
  "$cli/share/fish/vendor_completions.d" "$cli/share/doc/etcdlock/examples"
"$BIN/etcdlock" man > "$cli/share/man/man1/etcdlock.1"
"$BIN/etcdlock" completions bash > "$cli/share/bash-completion/completions/etcdlock"
"$BIN/etcdlock" completions zsh > "$cli/share/zsh/site-functions/_etcdlock"
"$BIN/etcdlock" completions fish > "$cli/share/fish/vendor_completions.d/etcdlock.fish"
install -m 0644 cli/dist/etcdlock-job.service cli/dist/etcdlock-job.timer "$cli/share/doc/etcdlock/examples/"
tar -C "$work" -czf "$OUT/etcdlock-cli-$version-x86_64-linux-gnu.tar.gz" "etcdlock-cli-$version"

# --- Python: one abi3 wheel per architecture from the modules built above, and the sdist
for a in "${ARCHES[@]}"; do
  so=$(bin_of "$a")/lib_etcdlock.so
  require "$so" "the $a Python wheel"
  glibc_check "$a" "$so"
  no_bench "$so"
  whl=$(python3 scripts/pack_wheel.py "$so" "$version" "$OUT" "$a")
  auditwheel show "$whl" | tr '\n' ' ' | grep -q "manylinux_2_17_$a" ||
    die "auditwheel does not accept $whl as manylinux2014: $(auditwheel show "$whl")"
done
(cd bindings-python && maturin sdist --out "$OUT" >/dev/null 2>&1) || die "maturin sdist failed"

# --- Node: the package with the prebuilt modules next to index.js, named as
# loader.js looks them up (process.arch: x64, arm64)
n=$work/node
mkdir -p "$n"
cp -r bindings-node/{package.json,README.md,index.js,index.d.ts,loader.js,prometheus.js,prometheus.d.ts,lib,examples,scripts} "$n/"
for a in "${ARCHES[@]}"; do
  so=$(bin_of "$a")/libetcdlock_node.so
  require "$so" "the npm package ($a)"
  glibc_check "$a" "$so"
  no_bench "$so"
  case "$a" in x86_64) node_arch=x64 ;; aarch64) node_arch=arm64 ;; esac
  install -m 0755 "$so" "$n/etcdlock.linux-$node_arch-gnu.node"
done
(cd "$n" && npm pack --silent --pack-destination "$OUT" >/dev/null) || die "npm pack failed"

# --- Java: deploy the published modules to the file repository dist/maven.
# The pom copies CARGO_TARGET_DIR/release/ into native/linux-x86_64/ and
# CARGO_TARGET_DIR/aarch64-unknown-linux-gnu/release/ into native/linux-aarch64/
# (the folders NativeLibrary picks from os.arch).
j=$work/java
mkdir -p "$j" "$work/native/release"
tar -C bindings-java --exclude=./target --exclude='./*/target' -cf - . | tar -C "$j" -xf -
for a in "${ARCHES[@]}"; do
  so=$(bin_of "$a")/libetcdlock_jni.so
  require "$so" "the Maven jar ($a)"
  glibc_check "$a" "$so"
  no_bench "$so"
  if [ "$a" = x86_64 ]; then
    install -m 0755 "$so" "$work/native/release/libetcdlock_jni.so"
  else
    install -D -m 0755 "$so" "$work/native/$a-unknown-linux-gnu/release/libetcdlock_jni.so"
  fi
done
# The checkout's poms say $version-SNAPSHOT between releases; the artifacts are $version.
find "$j" -name pom.xml -exec sed -i "s|<version>$version-SNAPSHOT</version>|<version>$version</version>|" {} +
(cd "$j" && mvn -B -q -Pdist deploy -pl etcdlock,etcdlock-spring,etcdlock-shedlock -am -DskipTests \
  -Dcargo.skip=true -Dcargo.target.dir="$work/native" -Detcdlock.dist.url="file://$OUT/maven") ||
  die "mvn deploy to $OUT/maven failed"
jar=$OUT/maven/io/etcdlock/etcdlock/$version/etcdlock-$version.jar
listing=$(unzip -l "$jar")   # (not piped into grep -q: pipefail would see unzip's SIGPIPE)
for a in "${ARCHES[@]}"; do
  grep -q "native/linux-$a/libetcdlock_jni.so" <<<"$listing" || die "$jar carries no linux-$a native library"
done
srcjar=${jar%.jar}-sources.jar
! unzip -l "$srcjar" | grep -q '\.so$' || die "$srcjar carries a native library"

step "done"
(cd "$OUT" && find . -type f \( -name '*.whl' -o -name '*.tar.gz' -o -name '*.tgz' -o -name '*.jar' -o -name '*.pom' \) \
  -printf '%8k kB  %p\n' | sort -k3)
