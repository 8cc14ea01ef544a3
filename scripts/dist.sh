#!/usr/bin/env bash
# Builds every installable artifact into dist/, for seven targets, stripped,
# from one version (the workspace's):
#
#   Linux glibc >= 2.17  x86_64, aarch64   (T: x86_64-linux-gnu, aarch64-linux-gnu)
#   Linux musl (Alpine)  x86_64, aarch64   (T: x86_64-linux-musl, aarch64-linux-musl)
#   macOS                x86_64 (10.12+), arm64 (11.0+, ad-hoc signed by zig's linker)
#                                          (T: x86_64-macos, aarch64-macos)
#   Windows x64          x86_64-pc-windows-gnu (T: x86_64-windows)
#
#   etcdlock-V-cp39-abi3-PLATFORM.whl   one abi3 wheel per target (manylinux2014, musllinux_1_2,
#                                       macosx_10_12_x86_64, macosx_11_0_arm64, win_amd64)
#   etcdlock-V.tar.gz                   the sdist (builds with Rust and a C compiler: no protoc)
#   etcdlock-V.tgz                      the npm package: JavaScript and types; its
#                                       optionalDependencies name the platform packages
#   etcdlock-KEY-V.tgz                  one npm package per target with its .node module
#                                       (KEY: linux-x64-gnu, ..., darwin-arm64, win32-x64-gnu)
#   maven/io/etcdlock/...               etcdlock (native/<platform>/ in the jar for all seven,
#                                       chosen at load), etcdlock-spring, etcdlock-test, etcdlock-shedlock, etcdlock-reactor,
#                                       etcdlock-kotlin
#                                       (+ -sources, -javadoc, poms)
#   etcdlock-c-V-T.tar.gz (.zip on Windows)  the shared library (.so.V + .so.MAJOR + .so,
#                                       .dylib, or .dll + import library + .def), the archive,
#                                       header, pkg-config, CMake package, man pages
#   etcdlock-cli-V-T.tar.gz (.zip on Windows)  the etcdlock binary, README.md, LICENSE,
#                                       man page, bash/zsh/fish completions (+ systemd examples on Linux)
#
# The glibc libraries of both architectures come from ONE `cargo zigbuild
# --profile dist` (one feature resolution, each dependency compiled once per
# target, zig links against glibc 2.17 stubs); every other target's from
# scripts/cross.sh (the build the platform tests share); the CLI builds apart
# (its `bench` turns on core's bench feature). It refuses to pack a package
# whose native part is missing, fails if pyproject.toml / package.json / a
# pom names another version, and checks every shipped binary: its format and
# architecture; glibc: no GLIBC_ symbol above 2.17; musl: links musl's libc
# only; Windows: imports system DLLs only; macOS: scripts/inspect_macos.py
# (minimum OS, system libraries only, install name, code signature), one
# line per file. The aarch64 ELF binaries are handled with
# binutils-aarch64-linux-gnu (installed with apt when missing).
#   scripts/dist.sh [--out DIR] [--fast]   (env: CARGO_TARGET_DIR)
#   scripts/dist.sh --prepare        install the tools only (pip, rustup, apt), then stop
#   scripts/dist.sh --build-only     install the tools, build, then stop (no packing)
#   scripts/dist.sh --no-build       pack what an earlier --build-only built
#   --fast: every target is built with scripts/cross.sh's fast profiles (what
#           ./test.sh runs its platform checks on: dev code generation without
#           debug info; macOS with fat LTO), not the release profile (dist: fat
#           LTO, one codegen unit); the same files, packed and checked the same
#           way, for checking, not for release. Six targets: macOS x86_64 is
#           left to releases (arm64 stands for it; see SKIPPED below).
# test.sh runs --prepare, then --build-only --fast in the background at the
# lowest CPU and I/O priority while the other suites run, then --no-build --fast.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/dist
MODE=all XPROFILE=dist
while (($#)); do
  case "$1" in
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --fast) XPROFILE=fast GZIP_LEVEL=1; shift ;;
    --prepare|--build-only|--no-build) MODE=${1#--}; shift ;;
    -h|--help) sed -n '2,44p' "$0"; exit 0 ;;
    *) echo "dist.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
# x86_64 first: the man page and completions come from its CLI.
ARCHES=(x86_64 aarch64)
# Built by scripts/cross.sh; the platform checks of ./test.sh build the same.
# (In the order ./test.sh's platform checks use them.)
EXTRA=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl x86_64-pc-windows-gnu x86_64-apple-darwin aarch64-apple-darwin)
# --fast (./test.sh) leaves macOS x86_64 to releases: nothing here runs
# Mach-O, its build differs from arm64's in the architecture and minimum OS
# only (both inspected as shipped by every release), and it was the costliest
# build of a test run (about 440 CPU-s of whole-program LTO for files that are
# only read, on the run's longest path: build, pack, clean room). The arm64
# build stands for both: the same profile, packing and inspection.
SKIPPED=()
if [ "$XPROFILE" = fast ]; then SKIPPED=(x86_64-apple-darwin); fi
kept=() MAC_ARCHES=()
for t in "${EXTRA[@]}"; do
  if [[ " ${SKIPPED[*]} " == *" $t "* ]]; then continue; fi
  kept+=("$t")
  if [[ "$t" == *-apple-darwin ]]; then MAC_ARCHES+=("${t%%-*}"); fi
done
EXTRA=("${kept[@]}")
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
python3 -c 'import lief' 2>/dev/null || python3 -m pip install -q lief   # scripts/inspect_macos.py
for t in "${ARCHES[@]/%/-unknown-linux-gnu}" "${EXTRA[@]}"; do
  rustup target list --installed 2>/dev/null | grep -qx "$t" || { step "rustup target add $t"; rustup target add "$t" >/dev/null; }
done
apt_missing=()
command -v aarch64-linux-gnu-objcopy >/dev/null || apt_missing+=(binutils-aarch64-linux-gnu)
command -v x86_64-w64-mingw32-gcc >/dev/null || apt_missing+=(mingw-w64)
command -v llvm-objdump >/dev/null || apt_missing+=(llvm)
if ((${#apt_missing[@]})); then
  step "installing ${apt_missing[*]} (apt)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_missing[@]}" >/dev/null ||
    die "cannot install ${apt_missing[*]} (needed to build, strip and inspect the cross-built binaries)"
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
# The CLI builds apart: it turns on tokio's process and signal features and
# links mimalloc, and one cargo build unifies features across packages.
# (binutils per architecture: the host's handle x86_64 only; readelf reads any ELF.)
tool() { # arch name
  if [ "$1" = x86_64 ]; then echo "$2"; else echo "$1-linux-gnu-$2"; fi
}
# (--fast: cross.sh's fast profile, as for every other target)
bin_of() { echo "$CARGO_TARGET_DIR/$1-unknown-linux-gnu/$(bash scripts/cross.sh --profile "$1-unknown-linux-gnu" "$XPROFILE")"; }
# The libraries of both targets in ONE invocation: cargo's job queue then
# overlaps one target's long single-threaded fat-LTO links with the other's
# compiling (on 2 cores: 437 s for both against 411 s for x86_64 alone and 205 s
# for aarch64 alone, measured in turn on one loaded machine).
[ "$MODE" = no-build ] && step "packing what --build-only built"
if [ "$MODE" != no-build ]; then
  targets=(); for a in "${ARCHES[@]}"; do targets+=(--target "$a-unknown-linux-gnu.$GLIBC"); done
  if [ "$XPROFILE" = fast ]; then
    # --fast: glibc Linux like the five other targets. Fat LTO is a
    # single-threaded link per library: 1,150 s of the CI machine's two cores
    # for the glibc libraries, against about 250 s with the fast profile.
    for a in "${ARCHES[@]}"; do
      for what in libs cli; do
        t0=$SECONDS
        step "scripts/cross.sh $a-unknown-linux-gnu fast $what"
        bash scripts/cross.sh "$a-unknown-linux-gnu" fast "$what" >/dev/null
        echo "  built in $((SECONDS - t0)) s"
      done
    done
  else
    for pkgs in "-p etcdlock-ffi -p etcdlock-python -p etcdlock-node -p etcdlock-jni" "-p etcdlock-cli"; do
      t0=$SECONDS
      step "cargo zigbuild --profile dist ${targets[*]} $pkgs"
      # shellcheck disable=SC2086
      ETCDLOCK_SONAME=1 RUSTFLAGS="${RUSTFLAGS:-} -C link-arg=-Wl,--build-id=sha1" \
        cargo zigbuild --quiet --profile dist "${targets[@]}" $pkgs
      echo "  built in $((SECONDS - t0)) s"
    done
  fi
  # Then the targets beyond glibc Linux. ./test.sh's platform checks (run
  # while this builds in the background) build the same through cross.sh: they
  # find them fresh, or build them first, and this build finds them fresh
  # (glibc first: the clean room needs it, and it shares target/cross's
  # build scripts with musl and Windows, which cargo builds one at a time).
  for t in "${EXTRA[@]}"; do
    for what in libs cli; do
      t0=$SECONDS
      step "scripts/cross.sh $t $XPROFILE $what"
      bash scripts/cross.sh "$t" "$XPROFILE" "$what" >/dev/null
      echo "  built in $((SECONDS - t0)) s"
    done
  done
fi
[ "$MODE" = build-only ] && { step "built"; exit 0; }
for a in "${ARCHES[@]}"; do
  for f in etcdlock lib_etcdlock.so libetcdlock_node.so libetcdlock_jni.so; do
    # (.debug_gdb_scripts: rustc's pointer to gdb pretty-printers, in executables built with debug info)
    [ -f "$(bin_of "$a")/$f" ] && "$(tool "$a" strip)" --strip-all -R .debug_gdb_scripts "$(bin_of "$a")/$f"
  done
done
# Where cross.sh left a target's files (the cross outputs are shared with the
# platform checks: everything below strips and signs copies, never them).
xbin() { echo "$CARGO_TARGET_DIR/$1/$(bash scripts/cross.sh --profile "$1" "$XPROFILE")"; }
# A target's name in file names.
short() {
  case "$1" in
    *-unknown-linux-gnu) echo "${1%%-*}-linux-gnu" ;;
    *-unknown-linux-musl) echo "${1%%-*}-linux-musl" ;;
    *-apple-darwin) echo "${1%%-*}-macos" ;;
    x86_64-pc-windows-gnu) echo x86_64-windows ;;
  esac
}
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

# Linked by a program that uses the archive (rustc's native-static-libs for
# etcdlock-ffi on each platform), and the shared library's rpath flag.
syslibs_of() {
  case "$1" in
    *-linux-gnu) echo "-lm -lpthread -ldl" ;;
    # (the musl libraries are built against musl's dynamic libc, -crt-static:
    # the unwinder is libgcc_s; a fully static program takes -lgcc_eh or, with
    # zig cc, -lunwind instead)
    *-linux-musl) echo "-lgcc_s -lc" ;;
    *-apple-darwin) echo "-liconv -lSystem" ;;
    *-windows-gnu) echo "-lkernel32 -ladvapi32 -lntdll -luserenv -lws2_32 -ldbghelp -lbcrypt" ;;
  esac
}
subst() { # template out: @VERSION@ @MAJOR@ @ARCH@ and the platform's library names
  local t=${T:-$a-unknown-linux-gnu} shared props rpath
  case "$t" in
    *-linux-*) shared="lib/libetcdlock.so.$version" props="IMPORTED_SONAME \"libetcdlock.so.$major\"" rpath='-Wl,-rpath,${libdir} ' ;;
    *-apple-darwin) shared=lib/libetcdlock.dylib props='IMPORTED_SONAME "@rpath/libetcdlock.dylib"' rpath='-Wl,-rpath,${libdir} ' ;;
    *-windows-gnu) shared=bin/etcdlock.dll props='IMPORTED_IMPLIB "${_etcdlock_prefix}/lib/libetcdlock.dll.a"' rpath='' ;;
  esac
  local libs; libs=$(syslibs_of "$t")
  local about unpack="tar -xzf etcdlock-c-$version-$(short "$t").tar.gz"
  case "$t" in
    *-linux-gnu) about="Linux $a, glibc 2.17 or newer" ;;
    *-linux-musl) about="Linux $a, musl libc (Alpine)" ;;
    x86_64-apple-darwin) about="macOS 10.12 or newer, x86_64" ;;
    aarch64-apple-darwin) about="macOS 11 or newer, arm64 (Apple silicon)" ;;
    *-windows-gnu) about="Windows 10 or newer, x64"; unpack="unzip etcdlock-c-$version-$(short "$t").zip" ;;
  esac
  sed -e "s|@VERSION@|$version|g" -e "s|@MAJOR@|$major|g" -e "s|@ARCH@|$a|g" -e "s|@SHARED@|$shared|g" \
    -e "s|@PLATFORM@|$about|g" -e "s|@UNPACK@|$unpack|g" \
    -e "s|@SHARED_PROPS@|$props|g" -e "s|@RPATH@|$rpath|g" -e "s|@SYSLIBS@|$libs|g" \
    -e "s|@CMAKE_SYSLIBS@|$(sed -e 's/-l//g' -e 's/ /;/g' <<<"$libs")|g" "$1" >"$2"
}
globals() { readelf -sW "$1" 2>/dev/null | awk '($5 == "GLOBAL" || $5 == "WEAK") && $7 != "UND" {print $8}' | sort -u; }
# Every C tarball's common part: header, pkg-config, CMake, man pages, docs.
c_common() { # dir
  local c=$1
  install -d "$c/include" "$c/lib/pkgconfig" "$c/lib/cmake/etcdlock" "$c/share/etcdlock" "$c/share/man/man3" \
    "$c/share/doc/etcdlock/examples"
  install -m 0644 include/etcdlock.h "$c/include/"
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
}
# Pack DIR's one top-level folder as OUT/NAME.tar.gz, or .zip for Windows.
pack_dir() { # parent name target
  if [[ "$3" == *-windows-gnu ]]; then
    (cd "$1" && python3 -m zipfile -c "$OUT/$2.zip" "$(ls)")
  else
    # (--fast, CI's build: gzip's fastest level; a release packs at its default)
    tar -C "$1" -cf - "$(ls "$1")" | gzip "-${GZIP_LEVEL:-6}" >"$OUT/$2.tar.gz"
  fi
}
# musl: the only library a binary may need is musl's libc.so.
musl_check() { # arch file...
  local a=$1 f n needed; shift
  arch_check "$a" "$@"
  for f in "$@"; do
    needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    for n in $needed; do
      case "$n" in libc.so) ;; *) die "$f needs $n (a musl binary may need musl's libc.so only)" ;; esac
    done
    echo "  $(basename "$f") ($a, musl): NEEDED ${needed:-nothing (static)} ($(du -k "$f" | cut -f1) kB)"
  done
}
libc_check() { # target file...
  local t=$1; shift
  case "$t" in *-gnu) glibc_check "${t%%-*}" "$@" ;; *-musl) musl_check "${t%%-*}" "$@" ;; esac
}
# Windows: a PE32+ x86-64 file importing system DLLs only (no MinGW runtime DLL).
win_check() { # file...
  local f d dlls
  for f in "$@"; do
    [[ "$(file -b "$f")" == PE32+\ executable*x86-64* ]] || die "$f is '$(file -b "$f")', not PE32+ x86-64"
    dlls=$(x86_64-w64-mingw32-objdump -p "$f" | sed -n 's/^\s*DLL Name: //p' | sort -fu | tr '\n' ' ')
    for d in $dlls; do
      case "${d,,}" in
        kernel32.dll | ntdll.dll | advapi32.dll | bcrypt.dll | bcryptprimitives.dll | ws2_32.dll | userenv.dll | \
          msvcrt.dll | api-ms-win-core-*.dll | secur32.dll | crypt32.dll | ole32.dll | oleaut32.dll | shell32.dll | \
          user32.dll | dbghelp.dll | python3.dll | iphlpapi.dll | ncrypt.dll | synchronization.dll) ;;
        *) die "$f imports $d, which is not a system DLL" ;;
      esac
    done
    echo "  $(basename "$f") (windows x86_64): imports $dlls($(du -k "$f" | cut -f1) kB)"
  done
}
# macOS: one line per file from scripts/inspect_macos.py (architecture, minimum
# OS, system libraries only, exports, install name, code signature).
# Exported besides a library's API, by the toolchain: the linker's image
# symbols, Rust's unwinding personality and an std constant, and psm's stack
# switch (stacker, see core's runtime.rs), which LTO cannot internalize.
MACOS_TOOLCHAIN='__mh_dylib_header|___dso_handle|_rust_eh_personality|_rust_psm_[a-z_]+|__RNvNtCs[A-Za-z0-9]+_3std9panicking11EMPTY_PANIC'
mac_check() { # target [inspect_macos.py options] file
  local t=$1 arch; shift
  case "$t" in aarch64-*) arch=arm64 ;; *) arch=x86_64 ;; esac
  python3 scripts/inspect_macos.py "${@:1:$#-1}" "$arch" "${@: -1}" | sed 's/^/  /' ||
    die "${*: -1} fails the macOS inspection"
}

rm -rf "$OUT"; mkdir -p "$OUT"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# --- Java: deploy the published modules to the file repository dist/maven
# (scripts/dist_java.sh). Maven (a JVM compiling Java and Kotlin, sources and
# javadoc jars) runs in the background beside the C, CLI, Python and Node
# packing below, which are mostly one core's work; its output is printed
# before the macOS check.
step "Java: mvn deploy to dist/maven, in the background"
# shellcheck source=scripts/dist_java.sh
(source scripts/dist_java.sh) >"$work/java.log" 2>&1 &
java_pid=$!

# --- C: one tarball per target; on Linux (glibc and musl) the same layout
pack_c_elf() { # target bin
  local T=$1 a=${1%%-*} BIN=$2 c soname foreign
  require "$BIN/libetcdlock.so" "the $T C library"; require "$BIN/libetcdlock.a" "the $T C library"
  soname=$("$(tool "$a" objdump)" -p "$BIN/libetcdlock.so" | awk '/SONAME/ {print $2}')
  [ "$soname" = "libetcdlock.so.$major" ] || die "libetcdlock.so ($T) has SONAME '$soname', want libetcdlock.so.$major"
  c=$work/c-$T/etcdlock-$version
  c_common "$c"
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
  [ "$(wc -l <"$work/exports")" -gt 30 ] || die "the $T shared library exports too few etcdlock_ symbols"
  # (zig's lld: binutils' aarch64 ld takes 90 s on an unoptimized archive, lld 2 s)
  python3 -m ziglang ld.lld -r --whole-archive "$BIN/libetcdlock.a" -o "$work/etcdlock.o"
  "$(tool "$a" objcopy)" --keep-global-symbols="$work/exports" --strip-debug "$work/etcdlock.o"
  python3 ffi-c/dist/mkar.py "$c/lib/libetcdlock.a" "$work/etcdlock.o" $(cat "$work/exports")
  foreign=$(globals "$c/lib/libetcdlock.a" | grep -vc '^etcdlock_' || true)
  [ "$foreign" -eq 0 ] || die "libetcdlock.a ($T) still exports $foreign symbols that are not etcdlock_*"
  arch_check "$a" "$work/etcdlock.o"
  echo "  libetcdlock.a ($T): $(globals "$c/lib/libetcdlock.a" | wc -l) global symbols, all etcdlock_* (the build's archive had $(globals "$BIN/libetcdlock.a" | wc -l))"
  libc_check "$T" "$c/lib/libetcdlock.so.$version"
  no_bench "$c/lib/libetcdlock.so.$version" "$c/lib/libetcdlock.a"
  pack_dir "$work/c-$T" "etcdlock-c-$version-$(short "$T")" "$T"
}
# macOS: the dylib as zig's linker signed it (stripping would break the
# signature arm64 requires; the dist profile keeps line tables, dsymutil is
# not here), install name @rpath/libetcdlock.dylib; the archive as rustc made it.
pack_c_macos() { # target bin
  local T=$1 a=${1%%-*} BIN=$2 c
  require "$BIN/libetcdlock.dylib" "the $T C library"; require "$BIN/libetcdlock.a" "the $T C library"
  c=$work/c-$T/etcdlock-$version
  c_common "$c"
  install -m 0755 "$BIN/libetcdlock.dylib" "$c/lib/libetcdlock.dylib"
  install -m 0644 "$BIN/libetcdlock.a" "$c/lib/libetcdlock.a"
  no_bench "$c/lib/libetcdlock.dylib" "$c/lib/libetcdlock.a"
  pack_dir "$work/c-$T" "etcdlock-c-$version-$(short "$T")" "$T"
}
# Windows: bin/etcdlock.dll; lib/libetcdlock.dll.a (MinGW's import library),
# lib/etcdlock.def (its exports: MSVC's `lib /def:etcdlock.def /machine:x64`
# makes etcdlock.lib from it), lib/libetcdlock.a (the archive, MinGW).
pack_c_windows() { # target bin
  local T=$1 a=${1%%-*} BIN=$2 c others
  require "$BIN/etcdlock.dll" "the $T C library"; require "$BIN/libetcdlock.dll.a" "the $T C library"
  c=$work/c-$T/etcdlock-$version
  c_common "$c"
  install -d "$c/bin"
  install -m 0755 "$BIN/etcdlock.dll" "$c/bin/etcdlock.dll"
  x86_64-w64-mingw32-strip --strip-all "$c/bin/etcdlock.dll"
  install -m 0644 "$BIN/libetcdlock.dll.a" "$BIN/libetcdlock.a" "$c/lib/"
  x86_64-w64-mingw32-objdump -p "$c/bin/etcdlock.dll" | sed -n '/\[Ordinal\/Name Pointer\] Table/,/^$/p' |
    sed -n 's/^\s*\[ *[0-9]*\] //p' | sort >"$work/exports"
  others=$(grep -vc '^etcdlock_' "$work/exports" || true)
  [ "$others" -eq 0 ] && [ "$(wc -l <"$work/exports")" -gt 30 ] ||
    die "etcdlock.dll exports $(wc -l <"$work/exports") symbols, $others of them not etcdlock_*"
  { echo "LIBRARY etcdlock.dll"; echo "EXPORTS"; sed 's/^/    /' "$work/exports"; } >"$c/lib/etcdlock.def"
  win_check "$c/bin/etcdlock.dll"
  echo "  etcdlock.dll: exports $(wc -l <"$work/exports") symbols, all etcdlock_* (lib/etcdlock.def lists them)"
  no_bench "$c/bin/etcdlock.dll" "$c/lib/libetcdlock.a"
  pack_dir "$work/c-$T" "etcdlock-c-$version-$(short "$T")" "$T"
}
for a in "${ARCHES[@]}"; do pack_c_elf "$a-unknown-linux-gnu" "$(bin_of "$a")"; done
for T in "${EXTRA[@]}"; do
  step "C: $T ($(bash scripts/cross.sh --profile "$T" "$XPROFILE") profile)"
  case "$T" in
    *-linux-musl) pack_c_elf "$T" "$(xbin "$T")" ;;
    *-apple-darwin) pack_c_macos "$T" "$(xbin "$T")" ;;
    *-windows-gnu) pack_c_windows "$T" "$(xbin "$T")" ;;
  esac
done
unset T

# --- CLI: one per target. The man page and completions come from the x86_64
# glibc binary (the same clap definition as --help on every platform).
HOSTCLI=$(bin_of x86_64)/etcdlock
require "$HOSTCLI" "the CLI"
pack_cli() { # target binary
  local T=$1 a=${1%%-*} exe=$2 cli name=etcdlock
  [[ "$T" == *-windows-gnu ]] && name=etcdlock.exe
  require "$exe" "the $T CLI"
  cli=$work/cli-$T/etcdlock-cli-$version
  install -d "$cli/bin"; install -m 0755 "$exe" "$cli/bin/$name"
  case "$T" in
    *-linux-gnu) "$(tool "$a" strip)" --strip-all -R .debug_gdb_scripts "$cli/bin/$name"; glibc_check "$a" "$cli/bin/$name" ;;
    *-linux-musl) "$(tool "$a" strip)" --strip-all -R .debug_gdb_scripts "$cli/bin/$name"; musl_check "$a" "$cli/bin/$name" ;;
    *-windows-gnu) x86_64-w64-mingw32-strip --strip-all "$cli/bin/$name"; win_check "$cli/bin/$name" ;;
    *-apple-darwin) ;;   # (inspected below, from the packed file)
  esac
  # The CLI ships without its `bench` feature: no benchmark code, no test harness.
  no_bench "$cli/bin/$name"
  if strings -a "$cli/bin/$name" | grep -qE 'etcdlock_testkit|testkit/src/'; then die "$T CLI carries the test harness"; fi
  # What an operator installs beside the binary, generated from the binary
  # itself (the same clap definition as --help): the man page and completions.
  install -m 0644 cli/README.md "$cli/README.md"
  install -m 0644 LICENSE "$cli/LICENSE"
  install -d "$cli/share/man/man1" "$cli/share/bash-completion/completions" "$cli/share/zsh/site-functions" \
    "$cli/share/fish/vendor_completions.d"
  "$HOSTCLI" man > "$cli/share/man/man1/etcdlock.1"
  "$HOSTCLI" completions bash > "$cli/share/bash-completion/completions/etcdlock"
  "$HOSTCLI" completions zsh > "$cli/share/zsh/site-functions/_etcdlock"
  "$HOSTCLI" completions fish > "$cli/share/fish/vendor_completions.d/etcdlock.fish"
  if [[ "$T" == *-linux-* ]]; then
    install -d "$cli/share/doc/etcdlock/examples"
    install -m 0644 cli/dist/etcdlock-job.service cli/dist/etcdlock-job.timer "$cli/share/doc/etcdlock/examples/"
  fi
  pack_dir "$work/cli-$T" "etcdlock-cli-$version-$(short "$T")" "$T"
}
for a in "${ARCHES[@]}"; do pack_cli "$a-unknown-linux-gnu" "$(bin_of "$a")/etcdlock"; done
for T in "${EXTRA[@]}"; do
  exe=$(xbin "$T")/etcdlock; [[ "$T" == *-windows-gnu ]] && exe=$exe.exe
  pack_cli "$T" "$exe"
done

# --- Python: one abi3 wheel per target from the modules built above, and the sdist
for a in "${ARCHES[@]}"; do
  so=$(bin_of "$a")/lib_etcdlock.so
  require "$so" "the $a Python wheel"
  glibc_check "$a" "$so"
  no_bench "$so"
  whl=$(python3 scripts/pack_wheel.py "$so" "$version" "$OUT" "$a")
  auditwheel show "$whl" | tr '\n' ' ' | grep -q "manylinux_2_17_$a" ||
    die "auditwheel does not accept $whl as manylinux2014: $(auditwheel show "$whl")"
done
for T in "${EXTRA[@]}"; do
  # (build-wheel.sh packs a stripped copy and checks the module for its platform.)
  whl=$(bash bindings-python/build-wheel.sh "$T" --profile "$XPROFILE" --no-build --out "$OUT" 2> >(sed 's/^/  /' >&2) | tail -n 1)
  python3 -m zipfile -l "$whl" | grep -o 'etcdlock/_etcdlock[^ ]*' >"$work/ext" && no_bench "$(xbin "$T")/$(case "$T" in
    *-windows-gnu) echo _etcdlock.dll ;; *-apple-darwin) echo lib_etcdlock.dylib ;; *) echo lib_etcdlock.so ;; esac)"
  echo "  $(basename "$whl"): $(cat "$work/ext")"
done
(cd bindings-python && maturin sdist --out "$OUT" >/dev/null 2>&1) || die "maturin sdist failed"

# --- Node: the main package (JavaScript, types, loader.js; optionalDependencies
# on the platform packages) and one platform package per target, each with its
# module (bindings-node/pack-platform.sh checks it for its platform)
bash bindings-node/pack-main.sh "$OUT" >/dev/null || die "npm pack of the main package failed"
for a in "${ARCHES[@]}"; do
  so=$(bin_of "$a")/libetcdlock_node.so
  require "$so" "the npm package ($a)"
  glibc_check "$a" "$so"
  no_bench "$so"
  bash bindings-node/pack-platform.sh "$a-unknown-linux-gnu" "$OUT" --profile "$XPROFILE" --no-build 2> >(sed 's/^/  /' >&2) >/dev/null ||
    die "npm platform package for $a-unknown-linux-gnu failed"
done
for T in "${EXTRA[@]}"; do
  bash bindings-node/pack-platform.sh "$T" "$OUT" --profile "$XPROFILE" --no-build 2> >(sed 's/^/  /' >&2) >/dev/null ||
    die "npm platform package for $T failed"
done
expected=$(( $(node -p 'require("./bindings-node/loader.js").PLATFORMS.length') - ${#SKIPPED[@]} ))
got=$(ls "$OUT"/etcdlock-*-"$version".tgz | grep -vc "/etcdlock-$version.tgz" || true)
[ "$got" = "$expected" ] || die "$got npm platform packages in $OUT, loader.js names $expected (less ${#SKIPPED[@]} left out: ${SKIPPED[*]})"

step "Java: waiting for mvn deploy"
java_status=0; wait "$java_pid" || java_status=$?
cat "$work/java.log"
[ "$java_status" -eq 0 ] || die "the Java packing failed (exit $java_status)"
jar=$OUT/maven/io/etcdlock/etcdlock/$version/etcdlock-$version.jar

# --- macOS: every Mach-O file as shipped, taken back out of its package
step "macOS: every shipped Mach-O file (scripts/inspect_macos.py)${SKIPPED:+; left out (--fast): ${SKIPPED[*]}}"
for a in "${MAC_ARCHES[@]}"; do
  T=$a-apple-darwin d=$work/macos-$a s=$(short "$a-apple-darwin")
  case "$a" in x86_64) key=darwin-x64 wtag=macosx_10_12_x86_64 ;; aarch64) key=darwin-arm64 wtag=macosx_11_0_arm64 ;; esac
  mkdir -p "$d/c" "$d/cli" "$d/npm" "$d/whl" "$d/jar"
  tar -C "$d/c" -xzf "$OUT/etcdlock-c-$version-$s.tar.gz"
  mac_check "$T" --exports "_etcdlock_[a-z0-9_]+|$MACOS_TOOLCHAIN" --install-name @rpath/libetcdlock.dylib \
    "$d/c/etcdlock-$version/lib/libetcdlock.dylib"
  tar -C "$d/cli" -xzf "$OUT/etcdlock-cli-$version-$s.tar.gz"
  mac_check "$T" "$d/cli/etcdlock-cli-$version/bin/etcdlock"
  tar -C "$d/npm" -xzf "$OUT/etcdlock-$key-$version.tgz"
  mac_check "$T" --install-name "@rpath/etcdlock.$key.node" "$d/npm/package/etcdlock.$key.node"
  (cd "$d/whl" && unzip -q "$OUT/etcdlock-$version-cp39-abi3-$wtag.whl")
  mac_check "$T" --install-name @rpath/_etcdlock.abi3.so "$d/whl/etcdlock/_etcdlock.abi3.so"
  unzip -q "$jar" "native/macos-$a/libetcdlock_jni.dylib" -d "$d/jar"
  mac_check "$T" --install-name @rpath/libetcdlock_jni.dylib "$d/jar/native/macos-$a/libetcdlock_jni.dylib"
done

step "done"
(cd "$OUT" && find . -type f \( -name '*.whl' -o -name '*.tar.gz' -o -name '*.tgz' -o -name '*.zip' -o -name '*.jar' -o -name '*.pom' \) \
  -printf '%8k kB  %p\n' | sort -k3)
