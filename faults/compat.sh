#!/usr/bin/env bash
# Compatibility matrix (not part of every CI run): the core behaviour suite and
# the fault scenarios against etcd 3.4 (Debian's /usr/bin/etcd) and etcd 3.5.x /
# 3.6.x built from the Go module proxy. Builds are cached in
# ${ETCDLOCK_ETCD_CACHE:-~/.cache/etcdlock-etcd}/v<version>/{etcd,etcdctl}.
#
#   faults/compat.sh                      # 3.4 (system), 3.5.35, 3.6.16
#   ETCD_VERSIONS="3.5.35" faults/compat.sh
#   COMPAT_SUITES=core faults/compat.sh   # only the core behaviour suite
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
versions="${ETCD_VERSIONS:-system 3.5.35 3.6.16}"
suites="${COMPAT_SUITES:-core faults}"
cache="${ETCDLOCK_ETCD_CACHE:-$HOME/.cache/etcdlock-etcd}"

build_etcd() {
  "$here/build-etcd.sh" "$1" with-etcdctl >/dev/null
}

cd "$root"
results=()
status=0
for v in $versions; do
  if [ "$v" = system ]; then
    bin=/usr/bin/etcd ctl=/usr/bin/etcdctl
  else
    build_etcd "$v" || { results+=("$v: build failed"); status=1; continue; }
    bin="$cache/v$v/etcd" ctl="$cache/v$v/etcdctl"
  fi
  ver="$("$bin" --version | head -1)"
  for s in $suites; do
    case "$s" in
      core) cmd=(cargo test -p etcdlock --release --no-fail-fast) ;;
      faults) cmd=(cargo test -p etcdlock-faults --release --test scenarios -- --test-threads=2) ;;
      *) echo "unknown suite $s" >&2; exit 2 ;;
    esac
    log="$(mktemp)"
    if ETCD_BIN="$bin" ETCDCTL_BIN="$ctl" "${cmd[@]}" >"$log" 2>&1; then r=pass; else r=FAIL; status=1; fi
    passed=$(grep -oE 'test result: [a-zA-Z]+\. [0-9]+ passed; [0-9]+ failed' "$log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')
    results+=("$ver | $s | $r ($passed)")
    grep -E '^scenario [0-9]+ .*(FAILED|violations=[1-9])|^test .* FAILED$' "$log" || true
    rm -f "$log"
  done
done
echo "compatibility matrix:"
printf '  %s\n' "${results[@]}"
exit $status
