#!/usr/bin/env bash
# The Rust code of etcd's protos is generated once and committed
# (vendor/etcd-client/src/rpc/gen/, memetcd/src/gen/), so building etcdlock
# needs Rust and a C compiler only: no protoc (a source build from the sdist,
# the npm package or the Maven modules on any platform).
#
#   scripts/protos.sh --check   regenerate into a temp dir and fail on any difference (test.sh)
#   scripts/protos.sh --write   regenerate in place (after changing a .proto or etcd-client's version)
#
# Needs protoc (apt: protobuf-compiler libprotobuf-dev) for the regeneration only.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:---check}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cargo run -q -p etcdlock-protogen -- "$PWD" "$tmp"
pairs=("$tmp/etcd-client:vendor/etcd-client/src/rpc/gen" "$tmp/memetcd:memetcd/src/gen")
case "$mode" in
  --write)
    for p in "${pairs[@]}"; do rm -rf "${p#*:}"; mkdir -p "${p#*:}"; cp "${p%%:*}"/*.rs "${p#*:}/"; done
    echo "protos.sh: regenerated vendor/etcd-client/src/rpc/gen and memetcd/src/gen" ;;
  --check)
    bad=0
    for p in "${pairs[@]}"; do diff -r "${p%%:*}" "${p#*:}" >/dev/null || { diff -r "${p%%:*}" "${p#*:}" | head -20; bad=1; }; done
    ((bad == 0)) || { echo "protos.sh: the committed code of etcd's protos differs from what protoc generates; run scripts/protos.sh --write" >&2; exit 1; }
    echo "protos.sh: the committed proto code is what protoc generates" ;;
  *) echo "usage: scripts/protos.sh --check|--write" >&2; exit 2 ;;
esac
