#!/usr/bin/env bash
# The recorded public API of each language (api/) against the code, and
# against CHANGELOG.md:
#   1. regenerates each language's record into a temp dir and fails, with the
#      diff, when it differs from api/<lang>/ (a public signature changed
#      without its record);
#   2. fails when api/<lang>/'s hash is not the one CHANGELOG.md's
#      [Unreleased] `API records:` line carries, or differs from the last
#      release's without an [Unreleased] entry for that language.
# Usage: scripts/api_check.sh [--update] [rust|java|python|node|c ...]   (default: all five)
#   --update  rewrites api/<lang>/ and writes its hash into [Unreleased], which
#             it refuses (exit 1) for a language whose API changed unless
#             [Unreleased] has an entry starting "- Rust: " (Java, Python, Node, C).
# What each record is and how it is made: api/README.md. Builds what it needs
# with the suites' builds (CARGO_TARGET_DIR, default target/): rust reuses the
# dependencies `cargo clippy` checked and runs rustdoc on core; java compiles
# the published Maven modules (no native library); c builds
# target/debug/libetcdlock.so as ffi-c/test.sh does (up to date after the C
# suite; built here first, the C suite then finds it built); python and node
# read the files the packages ship. Tools: cargo-public-api's engine (pinned
# below, built into $CARGO_TARGET_DIR/tools/ once), Maven and javap, python3,
# node, gcc, nm, abidw/abidiff (Debian's abigail-tools, installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

update=0
langs=()
for a in "$@"; do
  case "$a" in
    --update) update=1 ;;
    rust|java|python|node|c) langs+=("$a") ;;
    *) echo "usage: scripts/api_check.sh [--update] [rust|java|python|node|c ...]" >&2; exit 2 ;;
  esac
done
((${#langs[@]})) || langs=(rust java python node c)

# The Rust lister: cargo-public-api 0.52.0's engine (the public-api crate, which
# reads rustdoc JSON format 57: rustdoc-types 0.57, what stable Rust 1.95's
# rustdoc writes; a newer Rust may need a newer pin), built from
# api/tools/public-api-list (its Cargo.lock) into $CARGO_TARGET_DIR/tools/.
# API_CHECK_CARGO_PUBLIC_API=1 uses `cargo public-api` 0.52.0 itself instead
# (cargo install --locked, ~5 CPU-minutes once per target dir; same output).
PUBLIC_API_VERSION=0.52.0

work=$(mktemp -d "${TMPDIR:-/tmp}/api_check.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The Rust record: cargo public-api's list of rustdoc's JSON for core, built on
# stable (RUSTC_BOOTSTRAP=1 for rustdoc alone, through $RUSTDOC, so that no
# rustc build's fingerprint changes); -s leaves out blanket impls (From<T>,
# Any, ...), auto-trait impls (Send, Sync, Unpin) stay. The mem feature's
# record is what it adds to the default features' list.
gen_rust() {
  local out=$1/rust
  mkdir -p "$out"
  if [ "${API_CHECK_CARGO_PUBLIC_API:-0}" = 1 ]; then
    local root=$CARGO_TARGET_DIR/tools/cargo-public-api-$PUBLIC_API_VERSION
    if [ ! -x "$root/bin/cargo-public-api" ]; then
      echo "api_check: installing cargo-public-api $PUBLIC_API_VERSION into $root" >&2
      cargo install --quiet --locked --root "$root" "cargo-public-api@$PUBLIC_API_VERSION" >&2
    fi
    lister() { "$root/bin/cargo-public-api" --rustdoc-json "$1" -s --color never; }
  else
    cargo build --quiet --locked --manifest-path api/tools/public-api-list/Cargo.toml \
      --target-dir "$CARGO_TARGET_DIR/tools/public-api-list" >&2
    lister() { "$CARGO_TARGET_DIR/tools/public-api-list/debug/public-api-list" "$1"; }
  fi
  local json=$CARGO_TARGET_DIR/doc/etcdlock.json
  rustdoc_json() {
    RUSTDOC="$ROOT/api/tools/rustdoc_bootstrap.sh" cargo rustdoc --quiet -p etcdlock --lib "$@" \
      -- -Z unstable-options --output-format json --cap-lints allow
  }
  # Impls of the auto traits stable Rust cannot name (Freeze, UnsafeUnpin)
  # are left out: they come and go with the toolchain, not with our API.
  unstable='^impl(<[^>]*>)? !?core::marker::(Freeze|UnsafeUnpin) for '
  rustdoc_json
  local format
  format=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["format_version"])' "$json")
  if [ "$format" != 57 ]; then
    echo "api_check: rustdoc wrote JSON format $format; cargo-public-api $PUBLIC_API_VERSION reads 57" \
      "(Rust 1.95): pin the public-api release that reads $format in api/tools/public-api-list" >&2
    return 1
  fi
  lister "$json" | grep -vE "$unstable" > "$out/etcdlock.txt"
  rustdoc_json --features mem
  lister "$json" | grep -vE "$unstable" > "$work/rust-mem.txt"
  grep -vxFf "$out/etcdlock.txt" "$work/rust-mem.txt" > "$out/etcdlock-mem-feature-adds.txt" || true
}

# The Java record: javap over the classes of each published module (what its
# jar carries), compiled here without the native library (-Dcargo.skip, and
# -Dexec.skip for the strip of a library not there). Each module's
# target/classes is emptied first: an incremental compile leaves the class
# file of a deleted source behind, which would hide a removed class.
JAVA_MODULES=(etcdlock etcdlock-spring etcdlock-shedlock etcdlock-reactor etcdlock-kotlin etcdlock-test)
gen_java() {
  local out=$1/java m
  mkdir -p "$out"
  for m in "${JAVA_MODULES[@]}"; do rm -rf "bindings-java/$m/target/classes"; done
  if ! (cd bindings-java && mvn -B -q -DskipTests -Dcargo.skip=true -Dexec.skip=true compile \
    -pl "$(IFS=,; echo "${JAVA_MODULES[*]}")" -am) > "$work/mvn.log" 2>&1; then
    cat "$work/mvn.log" >&2
    return 1
  fi
  for m in "${JAVA_MODULES[@]}"; do
    python3 api/tools/java_api.py "bindings-java/$m/target/classes" > "$out/$m.txt"
  done
}

gen_python() {
  mkdir -p "$1/python"
  python3 api/tools/python_api.py bindings-python/python/etcdlock > "$1/python/etcdlock.txt"
}

gen_node() {
  node api/tools/node_api.js "$1/node"
}

# The C record: the header's declarations (comments and the version macros
# left out: a release changes those), the symbols the shared library exports,
# and libabigail's ABI of those symbols as the header declares them (see
# api/README.md for why the header's DWARF and not the Rust library's).
gen_c() {
  local out=$1/c
  mkdir -p "$out"
  gcc -fpreprocessed -dD -E -P include/etcdlock.h | grep -v '^[[:space:]]*$' |
    grep -v '^#define ETCDLOCK_VERSION_' > "$out/etcdlock.h.txt"
  local so=$CARGO_TARGET_DIR/debug/libetcdlock.so
  # (ffi-c/test.sh's own invocation, so that neither build redoes the other's)
  cargo build --quiet -p etcdlock-ffi -p etcdlock-testkit >&2
  nm -D --defined-only --format=posix "$so" | awk '{print $1, $2}' | sort > "$out/symbols.txt"
  c_abi "$out" "$so"
}

c_abi() {
  local out=$1 so=$2 d=$work/cabi
  command -v abidw >/dev/null || {
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "api_check: installing abigail-tools (abidw, abidiff)" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq abigail-tools >/dev/null
  }
  mkdir -p "$d"
  python3 api/tools/c_abi_stubs.py include/etcdlock.h > "$d/etcdlock_abi.c" 2>/dev/null
  (cd "$d" && gcc -shared -fPIC -g -O0 -fno-eliminate-unused-debug-types -Wno-return-type \
    -I"$ROOT/include" etcdlock_abi.c -o libetcdlock.so)
  abidw --headers-dir include --no-corpus-path --no-comp-dir-path --no-show-locs \
    "$d/libetcdlock.so" > "$out/libetcdlock.abi"
  # The library exports exactly the functions the header declares.
  grep -o "<elf-symbol name='[^']*'" "$out/libetcdlock.abi" | cut -d"'" -f2 | sort > "$d/header.txt"
  awk '$2 == "T" {print $1}' "$out/symbols.txt" | sort > "$d/exported.txt"
  if ! diff "$d/header.txt" "$d/exported.txt" > "$d/exports.diff"; then
    echo "api_check: libetcdlock.so's exported functions (>) are not include/etcdlock.h's (<):" >&2
    sed 's/^/    /' "$d/exports.diff" >&2
    return 1
  fi
}

for lang in "${langs[@]}"; do
  "gen_$lang" "$work/new"
done

declare -A names=([rust]=Rust [java]=Java [python]=Python [node]=Node [c]=C)
status=0
hashes=()
for lang in "${langs[@]}"; do
  if [ "$update" = 1 ]; then
    rm -rf "api/$lang"
    mkdir -p api
    cp -r "$work/new/$lang" "api/$lang"
    echo "api_check: api/$lang/ written ($(find "api/$lang" -type f | wc -l) files)"
  elif ! diff -ru "api/$lang" "$work/new/$lang" > "$work/$lang.diff" 2>&1; then
    echo "api_check: the $lang API differs from its record api/$lang/ (a public signature changed;"
    echo "  if on purpose: add a '- ${names[$lang]}: ...' entry to CHANGELOG.md [Unreleased], then scripts/api_check.sh --update $lang):"
    head -60 "$work/$lang.diff" | sed 's/^/    /'
    [ "$(wc -l < "$work/$lang.diff")" -le 60 ] || echo "    ... ($(wc -l < "$work/$lang.diff") lines)"
    if [ "$lang" = c ] && [ -f api/c/libetcdlock.abi ]; then
      # libabigail's verdict on the ABI change (exit bit 4: incompatible).
      rc=0; abidiff --no-show-locs api/c/libetcdlock.abi "$work/new/c/libetcdlock.abi" > "$work/abidiff.txt" 2>&1 || rc=$?
      if (( rc & 8 )); then echo "  abidiff: an incompatible ABI change:"; elif (( rc & 4 )); then echo "  abidiff: an ABI change (not one libabigail classes as incompatible: review it):"; fi
      head -40 "$work/abidiff.txt" | sed 's/^/    /'
    fi
    status=1
  else
    echo "api_check: $lang API matches api/$lang/"
  fi
  hashes+=("$lang=$(python3 api/tools/changelog_api.py hash "api/$lang")")
done
if [ "$update" = 1 ]; then
  python3 api/tools/changelog_api.py update "${hashes[@]}" || status=1
else
  if python3 api/tools/changelog_api.py check "${hashes[@]}"; then
    echo "api_check: CHANGELOG.md [Unreleased] records each API's hash (${hashes[*]})"
  else
    status=1
  fi
fi
exit $status
