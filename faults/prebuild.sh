#!/usr/bin/env bash
# Builds what faults/test.sh builds before its scenarios and that no other
# suite builds: etcd 3.5 and 3.6 from the Go module proxy (faults/build-etcd.sh,
# cached) and the suite's release build (`cargo test -p etcdlock-faults
# --release --no-run`, target/release, which nothing else in ./test.sh builds).
# Compiling only: no apt, no etcd started, nothing run.
#
# ./test.sh runs it first in its background job at nice 19 (before the dist
# build), so that these builds use the cores the suites before the fault
# suite leave idle instead of the fault suite's own minutes. faults/test.sh
# still runs the same commands: with this done they find everything built
# (cargo's fingerprints, build-etcd.sh's cache); while it is still running,
# they wait for it (cargo's lock on target/release, build-etcd.sh's flock).
# The same command and environment as faults/test.sh's, or cargo would see
# other fingerprints and build again.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/.."
export PATH="$HOME/.cargo/bin:$PATH"
start=$SECONDS
rc=0
if command -v go >/dev/null; then
  "$here/build-etcd.sh" --upgrades || rc=1
fi
echo "faults/prebuild.sh: etcd 3.5 / 3.6 ready after $((SECONDS - start)) s"
cargo test -q -p etcdlock-faults --release --no-run || rc=1
echo "faults/prebuild.sh: release build done after $((SECONDS - start)) s (exit $rc)"
exit "$rc"
