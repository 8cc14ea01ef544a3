#!/usr/bin/env bash
# Build etcd VERSION (and etcdctl) from the Go module proxy, once: cached in
# ${ETCDLOCK_ETCD_CACHE:-~/.cache/etcdlock-etcd}/v<VERSION>/{etcd,etcdctl}.
# Prints the directory. Used by faults/test.sh and faults/compat.sh.
#
#   faults/build-etcd.sh 3.6.16
set -euo pipefail
v="${1:?usage: build-etcd.sh VERSION}"
out="${ETCDLOCK_ETCD_CACHE:-$HOME/.cache/etcdlock-etcd}/v$v"
if ! { [ -x "$out/etcd" ] && [ -x "$out/etcdctl" ]; }; then
  command -v go >/dev/null || { echo "go is needed to build etcd $v" >&2; exit 1; }
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  (
    cd "$work"
    go mod init etcdlock-etcd-build >/dev/null 2>&1
    GOFLAGS=-mod=mod go get "go.etcd.io/etcd/server/v3@v$v" "go.etcd.io/etcd/etcdctl/v3@v$v" >/dev/null 2>&1
    mkdir -p "$out"
    GOFLAGS=-mod=mod go build -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3
    GOFLAGS=-mod=mod go build -o "$out/etcdctl.tmp" go.etcd.io/etcd/etcdctl/v3
    mv "$out/etcd.tmp" "$out/etcd"
    mv "$out/etcdctl.tmp" "$out/etcdctl"
  ) >&2
fi
echo "$out"
