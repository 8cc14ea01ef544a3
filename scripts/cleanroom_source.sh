#!/usr/bin/env bash
# A source build on a machine with Rust and a C compiler but no protoc (what a
# platform without a prebuilt artifact has): pip builds the wheel from the
# sdist in dist/ in a fresh venv, on a PATH with no protoc, then the wheel is
# installed and runs lock -> guarded put -> unlock against a real etcd; then
# the Node module from a source checkout (`git archive` of HEAD, what a clone
# has): `npm run build` there, on the same PATH, and the package runs the
# clean room's Node check. Both builds use a cheap profile (opt-level 0, no
# LTO; the point is what they need, not their speed) and one target dir of
# their own (the registry crates compile once), deleted afterwards.
#   scripts/cleanroom_source.sh [--dist DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIST=$ROOT/dist
[ "${1:-}" = --dist ] && DIST=$(realpath "$2")
export PATH="$HOME/.cargo/bin:$PATH"
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\([^"]*\)".*/\1/p' Cargo.toml)
sdist=$DIST/etcdlock-$version.tar.gz
[ -s "$sdist" ] || { echo "cleanroom_source: $sdist missing; run scripts/dist.sh first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The PATH: every tool of the usual folders and cargo's, but no protoc.
clean=$work/bin; mkdir -p "$clean"
for d in "$HOME/.cargo/bin" /usr/local/bin /usr/bin /bin; do
  for t in "$d"/*; do
    n=$(basename "$t")
    case "$n" in protoc*) continue ;; esac
    [ -e "$clean/$n" ] || ln -s "$t" "$clean/$n"
  done
done
ln -sf "$(python3 -c 'import sys; print(sys.executable)')" "$clean/python3"
PATH=$clean command -v protoc >/dev/null && { echo "cleanroom_source: protoc is still on the PATH" >&2; exit 1; }
for t in cargo rustc cc; do PATH=$clean command -v "$t" >/dev/null || { echo "cleanroom_source: $t missing" >&2; exit 1; }; done
cargo build -q -p etcdlock-testkit || exit 1
HARNESS=${CARGO_TARGET_DIR:-$ROOT/target}/debug/etcd-harness
coproc ETCD { "$HARNESS"; }
read -r info <&"${ETCD[0]}"
EP=$(python3 -c 'import json,sys; print(",".join(json.loads(sys.argv[1])["endpoints"]))' "$info")
echo "== Python: pip wheel from the sdist, no protoc on the PATH (etcd at $EP)"
t0=$SECONDS
rc=0
cheap=(CARGO_TARGET_DIR="$work/target" CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_LTO=off
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256 CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_INCREMENTAL=false)
PATH=$clean python3 -m venv "$work/venv" &&
  env -u PROTOC PIP_NO_CACHE_DIR=1 PATH=$clean "${cheap[@]}" \
    "$work/venv/bin/python" -m pip install -q "$sdist" >"$work/pip.log" 2>&1 || rc=$?
if [ $rc -ne 0 ]; then
  tail -30 "$work/pip.log"
  echo "cleanroom_source: FAIL: the sdist did not build without protoc" >&2
  exit 1
fi
out=$(PATH=$clean "$work/venv/bin/python" "$ROOT/scripts/cleanroom_smoke.py" "$EP" cleanroom-source) || { echo "cleanroom_source: FAIL: smoke: $out" >&2; exit 1; }
echo "  ok   python from the sdist without protoc: $out (built in $((SECONDS - t0)) s)"

echo "== Node: npm run build in a source checkout, no protoc on the PATH"
t0=$SECONDS
src=$work/src; mkdir -p "$src"
git -C "$ROOT" archive HEAD | tar -C "$src" -xf -
if ! (cd "$src/bindings-node" && env -u PROTOC PATH=$clean "${cheap[@]}" npm run -s build -- --release >"$work/npm.log" 2>&1); then
  tail -30 "$work/npm.log"
  echo "cleanroom_source: FAIL: the Node module did not build without protoc" >&2
  exit 1
fi
cat >"$work/main.js" <<'JS'
const { Client } = require(process.argv[3]);
(async () => {
  const client = await Client.connect({ endpoints: process.argv[2].split(','), ttl: 10 });
  const lock = await client.lock('cleanroom-source-node', { timeout: 10000 });
  const token = String(lock.fencingToken);
  await lock.put('cleanroom/source-node', token);
  if ((await lock.get('cleanroom/source-node', 'utf8')) !== token) throw new Error('guarded get mismatch');
  await lock.unlock();
  await client.close();
  console.log('ok', token);
})().catch((e) => { console.error(e); process.exit(1); });
JS
out=$(PATH=$clean node "$work/main.js" "$EP" "$src/bindings-node") || { echo "cleanroom_source: FAIL: node smoke: $out" >&2; exit 1; }
echo "  ok   node from a source checkout without protoc: $out ($(cd "$src/bindings-node" && ls etcdlock.*.node), built in $((SECONDS - t0)) s)"
