#!/usr/bin/env bash
# Build etcd VERSION from the Go module proxy, once: cached in
# ${ETCDLOCK_ETCD_CACHE:-~/.cache/etcdlock-etcd}/v<VERSION>/etcd, and its
# etcdctl beside it when asked for (`with-etcdctl`: faults/compat.sh runs that
# version's etcdctl; the fault suite's upgrade scenarios run only the server,
# and building etcdctl too cost CPU the suite's other builds need).
# Prints the directory. Used by faults/test.sh, faults/compat.sh, core/tests/faults.rs
# and ./test.sh (which starts both versions early, in the background).
#
#   faults/build-etcd.sh 3.6.16 [with-etcdctl]
set -euo pipefail
v="${1:?usage: build-etcd.sh VERSION [with-etcdctl]}"
tools=(etcd)
[ "${2:-}" = with-etcdctl ] && tools+=(etcdctl)
out="${ETCDLOCK_ETCD_CACHE:-$HOME/.cache/etcdlock-etcd}/v$v"
mkdir -p "$out"
# One build at a time per version (./test.sh starts them early in the
# background, and a test or suite may ask at the same time): the second
# waits, then finds it built.
exec 9>"$out.lock"
flock 9
missing=()
for t in "${tools[@]}"; do [ -x "$out/$t" ] || missing+=("$t"); done
if [ "${#missing[@]}" -gt 0 ]; then
  command -v go >/dev/null || { echo "go is needed to build etcd $v" >&2; exit 1; }
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  (
    cd "$work"
    go mod init etcdlock-etcd-build >/dev/null 2>&1
    mkdir -p "$out"
    for t in "${missing[@]}"; do
      case "$t" in etcd) pkg=go.etcd.io/etcd/server/v3 ;; etcdctl) pkg=go.etcd.io/etcd/etcdctl/v3 ;; esac
      GOFLAGS=-mod=mod go get "$pkg@v$v" >/dev/null 2>&1
      # No symbol table or DWARF (-s -w): a shorter link; stack traces keep their names.
      GOFLAGS=-mod=mod go build -trimpath -ldflags="-s -w" -o "$out/$t.tmp" "$pkg"
      mv "$out/$t.tmp" "$out/$t"
    done
  ) >&2
fi
echo "$out"
