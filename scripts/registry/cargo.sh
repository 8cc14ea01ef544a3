#!/usr/bin/env bash
# The Rust crates through a real cargo registry: cargo-http-registry (from
# crates.io) on 127.0.0.1, `cargo package` / `cargo publish` as a release runs
# them, and a fresh project that takes a lock with nothing but `cargo add
# etcdlock`, on a PATH with Rust and a C compiler but no protoc.
#
#   scripts/registry/cargo.sh start   STATE            server on a free port, index in STATE/cargo/; writes STATE/cargo.env, STATE/cargo.pid
#   scripts/registry/cargo.sh check   DIST             cargo package (with its verification build) of every crate we publish, no protoc on PATH
#   scripts/registry/cargo.sh publish DIST STATE       cargo publish --registry etcdlock-local, in dependency order
#   scripts/registry/cargo.sh install STATE ENDPOINTS  cargo new + cargo add etcdlock + cargo run: lock, print the fencing token
#   scripts/registry/cargo.sh stop    STATE            stop the server
#
#   scripts/registry/cargo.sh crates-io [--dry-run]    the release: the same crates, staged the same way, to crates.io
#                                                      (CARGO_REGISTRY_TOKEN; not `cargo publish --workspace` in the
#                                                      checkout, which would publish the full workspace-hack and
#                                                      not vendor/etcd-client)
#
# DIST is accepted for the shape every scripts/registry/<eco>.sh shares and not
# read: crates are packaged from the source tree (cargo publishes sources, not
# files). Env: CARGO_TARGET_DIR (default ./target): the server is installed
# under $CARGO_TARGET_DIR/tools/, and the verification builds of `check`
# and the clean project of `install` share one target dir,
# $CARGO_TARGET_DIR/registry-cargo (same profile, same features: install
# compiles our crates again, now from the registry, but not tokio or tonic).
#
# What is published (dependency order): etcdlock-workspace-hack (the
# cargo-hakari workspace-hack as an empty stub: its hakari section emptied,
# as `cargo hakari disable` writes it; cargo-hakari's publishing docs, method
# B), etcdlock-etcd-client (vendor/etcd-client: etcd-client 0.21.1 with its
# protos compiled ahead), memetcd (core's `mem` feature) and etcdlock (core).
# Both `check` and `publish` work on a staging copy of the tracked files
# (`stage` below) in which the hack is the stub and vendor/etcd-client is a
# workspace member (the checkout keeps it out: no lints or tests of ours), so
# that one multi-package `cargo package` / `cargo publish` orders the four and
# verifies each against the others' packages. For the local registry only,
# the staging copy's dependencies among the four also say `registry =
# "etcdlock-local"`: in a Cargo.toml no `registry` means crates.io, so without
# it the index would send a user's cargo to crates.io for memetcd; with it the
# index records them as crates.io records them on a real release (same
# registry) and tokio & co. as crates.io's.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
CRATES=(etcdlock-workspace-hack etcdlock-etcd-client memetcd etcdlock)
REG=etcdlock-local
SERVER_VERSION=0.1.8
TOOL=$CARGO_TARGET_DIR/tools/cargo-http-registry/bin/cargo-http-registry
SHARED=$CARGO_TARGET_DIR/registry-cargo
# How check's verification builds and install's project build: in one target
# dir, without debug info or incremental caches (what a user's build would
# add to the same code; left out, the two builds cost less and still share).
BUILD_ENV=(CARGO_TARGET_DIR="$SHARED" CARGO_PROFILE_DEV_DEBUG=false CARGO_INCREMENTAL=0)
pflags=()
for c in "${CRATES[@]}"; do pflags+=(-p "$c"); done

die() { echo "cargo.sh: $*" >&2; exit 1; }

# A PATH with Rust (the toolchain's own bin: cargo, rustc, no rustup proxy)
# and everything of /usr/local/bin, /usr/bin, /bin (a C compiler, git, tar)
# except protoc, which must not be needed; fails if protoc is still found.
noprotoc_path() {
  local dir=$1 sysroot d t n
  sysroot=$(rustc --print sysroot)
  mkdir -p "$dir"
  for d in /usr/local/bin /usr/bin /bin; do
    for t in "$d"/*; do
      n=${t##*/}
      case "$n" in protoc*|cargo*|rustc*|rustup|rustdoc) continue ;; esac
      [ -e "$dir/$n" ] || ln -s "$t" "$dir/$n"
    done
  done
  NOPROTOC=$sysroot/bin:$dir
  if PATH=$NOPROTOC command -v protoc >/dev/null; then die "protoc is still on the PATH without it"; fi
  PATH=$NOPROTOC command -v cargo >/dev/null || die "no cargo in $sysroot/bin"
  PATH=$NOPROTOC command -v cc >/dev/null || die "no C compiler (cc) on PATH"
  NOPROTOC_NOTE="PATH without protoc: command -v protoc fails on it (this machine's: $(command -v protoc || echo none)); cargo, rustc and cc on it"
}

# stage DIR [REGISTRY]: the tracked (and new, unignored) files of the
# checkout in DIR, the workspace-hack emptied to its stub, vendor/etcd-client
# a member; with REGISTRY, the path dependencies among the published crates
# name it.
stage() {
  local dir=$1 reg=${2:-} f
  mkdir -p "$dir"
  git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [ -e "$f" ] && printf '%s\0' "$f"
  done | tar --null -T - -cf - | tar -xf - -C "$dir"
  sed -i '/^### BEGIN HAKARI SECTION/,/^### END HAKARI SECTION/{/^###/!d}' "$dir/workspace-hack/Cargo.toml"
  grep -q '^\[.*dependencies' "$dir/workspace-hack/Cargo.toml" && die "the staged workspace-hack still has dependencies"
  sed -i 's|^exclude = \["vendor/etcd-client"\]|exclude = []|; s|^members = \[|members = ["vendor/etcd-client", |' "$dir/Cargo.toml"
  grep -q '^members = \["vendor/etcd-client", ' "$dir/Cargo.toml" || die "could not make vendor/etcd-client a member of the staged workspace"
  if [ -n "$reg" ]; then
    while IFS= read -r -d '' f; do
      sed -i -E "s/^((memetcd|etcd-client|etcdlock-workspace-hack) = \\{[^}]*version = [^}]*path = [^}]*)\\}/\\1, registry = \"$reg\" }/" "$dir/$f"
    done < <(git ls-files -z '*Cargo.toml')
    grep -q "^memetcd = .*registry = \"$reg\"" "$dir/Cargo.toml" || die "staging: memetcd's line does not name $reg"
    grep -q "^etcdlock-workspace-hack = .*registry = \"$reg\"" "$dir/core/Cargo.toml" || die "staging: core's workspace-hack line does not name $reg"
  fi
}

start() {
  local state=$1 api="" i
  [ -d "$state" ] || die "start: $state is not a directory"
  state=$(realpath "$state")
  if [ ! -x "$TOOL" ]; then
    # Unoptimized, no LTO (its release profile is opt-level z, fat LTO, one
    # codegen unit: 220 CPU-s here; this: 126): a test server's speed does
    # not matter, and CI compiles it on every run. Built in a directory of
    # its own (not $CARGO_TARGET_DIR/release), removed after.
    echo "cargo.sh: installing cargo-http-registry $SERVER_VERSION into ${TOOL%/bin/*}"
    CARGO_TARGET_DIR=${TOOL%/bin/*}/build CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_LTO=false \
      CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256 CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_INCREMENTAL=false \
      cargo install -q --locked cargo-http-registry --version "$SERVER_VERSION" --root "${TOOL%/bin/*}"
    rm -rf "${TOOL%/bin/*}/build"
  fi
  mkdir -p "$state/cargo"
  rm -f "$state/cargo/index/config.json"
  # Port 0: the server binds a free port and writes it to the index's config.json.
  setsid "$TOOL" --addr 127.0.0.1:0 "$state/cargo/index" >"$state/cargo/server.log" 2>&1 </dev/null &
  echo $! >"$state/cargo.pid"
  for i in $(seq 1 100); do
    kill -0 "$(cat "$state/cargo.pid")" 2>/dev/null || { cat "$state/cargo/server.log" >&2; die "the registry exited"; }
    if [ -s "$state/cargo/index/config.json" ]; then
      api=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["api"])' "$state/cargo/index/config.json" 2>/dev/null || true)
      [ -n "$api" ] && timeout 10 git ls-remote "$api/git" >/dev/null 2>&1 && break
    fi
    api=""
    sleep 0.1
  done
  [ -n "$api" ] || die "the registry did not answer within 10 s (log: $state/cargo/server.log)"
  case "$api" in http://127.0.0.1:*) ;; *) die "the registry serves on $api, not 127.0.0.1" ;; esac
  # The registry is configured by environment only (nothing written to ~/.cargo).
  # It checks no token; cargo publish wants one for a registry not crates.io.
  cat >"$state/cargo.env" <<EOF
export ETCDLOCK_CARGO_REGISTRY=$REG
export CARGO_REGISTRIES_ETCDLOCK_LOCAL_INDEX=$api/git
export CARGO_REGISTRIES_ETCDLOCK_LOCAL_TOKEN=local-registry-checks-no-token
export CARGO_NET_GIT_FETCH_WITH_CLI=true
EOF
  echo "cargo.sh: cargo-http-registry at $api (index $api/git, pid $(cat "$state/cargo.pid"))"
}

check() {
  local tmp out c crate
  tmp=$TMP
  noprotoc_path "$tmp/bin"
  stage "$tmp/src"
  echo "cargo.sh: check: cargo package ${pflags[*]} (its verification builds each from its .crate alone)"
  echo "cargo.sh: $NOPROTOC_NOTE"
  rm -rf "$SHARED/package"
  if ! out=$(cd "$tmp/src" && env "${BUILD_ENV[@]}" PATH="$NOPROTOC" cargo package "${pflags[@]}" --allow-dirty 2>&1); then
    echo "$out" | grep -vE '^ +(Compiling|Adding|Locking|Downloaded|Updating|Blocking)' | tail -40 >&2
    die "check: cargo package failed"
  fi
  # crates.io's own warnings (a missing description, license, repository) fail here.
  if echo "$out" | grep -B3 -E '^(warning|error)' >&2; then die "check: cargo package warned"; fi
  for c in "${CRATES[@]}"; do
    crate=$(ls "$SHARED/package/$c"-[0-9]*.crate 2>/dev/null | head -1)
    [ -n "$crate" ] || die "check: no .crate for $c"
    echo "  ok   $c: ${crate##*/} packaged and verified"
  done
  crate=$(ls "$SHARED"/package/etcdlock-workspace-hack-*.crate)
  if tar -xzOf "$crate" --wildcards '*/Cargo.toml' | grep -q '^\[.*dependencies'; then
    die "check: the packaged workspace-hack has dependencies (want the empty stub)"
  fi
  echo "  ok   etcdlock-workspace-hack is the empty stub (no dependencies)"
}

publish() {
  local state=$1 tmp
  [ -s "$state/cargo.env" ] || die "publish: $state/cargo.env missing (run start first)"
  # shellcheck source=/dev/null
  . "$state/cargo.env"
  tmp=$TMP
  stage "$tmp/src" "$REG"
  echo "cargo.sh: publish: cargo publish ${pflags[*]} --registry $REG"
  # --no-verify: check built these same sources from their .crate files; the
  # staging copy differs only in its `registry` keys.
  if ! (cd "$tmp/src" && env "${BUILD_ENV[@]}" cargo publish "${pflags[@]}" --registry "$REG" --allow-dirty --no-verify) >"$tmp/log" 2>&1; then
    grep -vE '^ +(Adding|Locking|Packaging|Packaged|Updating)' "$tmp/log" | tail -30 >&2
    die "publish: cargo publish failed"
  fi
  grep -E '^ +(Uploaded|Published) ' "$tmp/log"
  for c in "${CRATES[@]}"; do
    grep -q "\"name\":\"$c\"" -r "$state/cargo/index" --include="$c" || die "publish: $c is not in the index"
  done
  echo "cargo.sh: published ${CRATES[*]} to $REG"
}

install() {
  local state=$1 endpoints=$2 tmp app out lock c fail=0
  [ -s "$state/cargo.env" ] || die "install: $state/cargo.env missing (run start first)"
  # shellcheck source=/dev/null
  . "$state/cargo.env"
  tmp=$TMP
  noprotoc_path "$tmp/bin"
  echo "cargo.sh: install: $NOPROTOC_NOTE"
  app=$tmp/app
  run() { (cd "$app" && env "${BUILD_ENV[@]}" PATH="$NOPROTOC" "$@") >>"$tmp/log" 2>&1; }
  if ! (cd "$tmp" && PATH=$NOPROTOC cargo new -q --vcs none --bin app) ||
    ! run cargo add etcdlock --registry "$REG" ||
    ! run cargo add tokio --features macros,rt-multi-thread; then
    tail -20 "$tmp/log"
    echo "  FAIL cargo: cargo new / cargo add etcdlock --registry $REG"
    return 1
  fi
  cat >"$app/src/main.rs" <<'EOF'
use etcdlock::{Client, ClientOptions, LockOptions};
use std::time::Duration;

#[tokio::main]
async fn main() -> etcdlock::Result<()> {
    let endpoints = std::env::args().nth(1).expect("usage: app ENDPOINTS");
    let client = Client::connect(ClientOptions::new(endpoints.split(','))).await?;
    let guard = client
        .lock_with("cleanroom-cargo", LockOptions::timeout(Duration::from_secs(10)))
        .await?;
    assert!(guard.is_held());
    println!("ok {}", guard.fencing_token());
    guard.unlock().await?;
    client.close().await;
    Ok(())
}
EOF
  if out=$(cd "$app" && env "${BUILD_ENV[@]}" PATH="$NOPROTOC" cargo run -q -- "$endpoints" 2>>"$tmp/log") &&
    [[ $out =~ ^ok\ [1-9][0-9]*$ ]]; then
    echo "  ok   cargo: cargo add etcdlock --registry $REG, cargo run (no protoc on PATH): lock taken, fencing token ${out#ok }"
  else
    tail -30 "$tmp/log"
    echo "  FAIL cargo: cargo run of a project with etcdlock from $REG (printed: ${out:-nothing})"
    fail=1
  fi
  # Each crate of ours came from the local registry (memetcd with the `mem`
  # feature a unit test turns on: resolved, not built; check built it), and
  # crates.io's etcd-client (whose build runs protoc) is nowhere.
  lock=$app/Cargo.lock
  (cd "$app" && PATH=$NOPROTOC cargo tree -q --features etcdlock/mem -e normal --prefix none >"$tmp/tree" 2>>"$tmp/log") || true
  for c in "${CRATES[@]}"; do
    if grep -q "^$c v[0-9.]* (registry \`$REG\`)" "$tmp/tree"; then
      :
    else
      echo "  FAIL cargo: $c is not in the project's tree from registry $REG: $(grep "^$c v" "$tmp/tree" | head -1)"
      fail=1
    fi
  done
  if grep -q '^name = "etcd-client"$' "$lock"; then
    echo "  FAIL cargo: crates.io's etcd-client (needs protoc) is in the project's Cargo.lock"
    fail=1
  fi
  ((fail == 0)) && echo "  ok   cargo: ${CRATES[*]} resolve from $REG (memetcd with --features etcdlock/mem); tokio & co. from crates.io"
  return $fail
}

# The release: crates.io (CARGO_REGISTRY_TOKEN from the environment), the
# staging copy as it is (no registry keys), cargo publish's own verification
# on the PATH without protoc.
crates_io() {
  local flags=("$@")
  noprotoc_path "$TMP/bin"
  stage "$TMP/src"
  echo "cargo.sh: crates-io: cargo publish ${pflags[*]} ${flags[*]}"
  (cd "$TMP/src" && env "${BUILD_ENV[@]}" PATH="$NOPROTOC" cargo publish "${pflags[@]}" --allow-dirty "${flags[@]}") ||
    die "crates-io: cargo publish failed"
}

stop() {
  local state=$1 pid i
  [ -s "$state/cargo.pid" ] || return 0
  pid=$(cat "$state/cargo.pid")
  kill "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  rm -f "$state/cargo.pid"
  echo "cargo.sh: registry stopped (pid $pid)"
}

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cmd=${1:-}
case "$cmd" in
  start) [ $# = 2 ] || die "usage: $0 start STATE"; start "$2" ;;
  check) [ $# = 2 ] || die "usage: $0 check DIST"; check ;;
  publish) [ $# = 3 ] || die "usage: $0 publish DIST STATE"; publish "$(realpath "$3")" ;;
  install) [ $# = 3 ] || die "usage: $0 install STATE ENDPOINTS"; install "$(realpath "$2")" "$3" ;;
  stop) [ $# = 2 ] || die "usage: $0 stop STATE"; stop "$2" ;;
  crates-io) [ $# = 1 ] || [ "$*" = "crates-io --dry-run" ] || die "usage: $0 crates-io [--dry-run]"; crates_io "${@:2}" ;;
  *) die "usage: $0 start STATE | check DIST | publish DIST STATE | install STATE ENDPOINTS | stop STATE | crates-io [--dry-run]" ;;
esac
