#!/usr/bin/env bash
# ShedLock's provider suite (net.javacrumbs.shedlock:shedlock-test-support) is not published
# to Maven Central (ShedLock's own pom skips its deploy). Build and install it into ~/.m2 from
# a ShedLock source checkout, at the version the parent pom pins (shedlock.version):
#
#   etcdlock-shedlock/install-test-support.sh /path/to/ShedLock     # a git clone of ShedLock
#
# The checkout must have the tag shedlock-parent-<version>; the module is built by ShedLock's
# own pom from that tag (exported to a temp dir), unmodified.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
SRC=${1:-${SHEDLOCK_SRC:-}}
VER=$(sed -n 's:.*<shedlock.version>\(.*\)</shedlock.version>.*:\1:p' "$HERE/pom.xml" | head -1)
if [ -z "$SRC" ]; then
  echo "usage: $0 SHEDLOCK_SOURCE_CHECKOUT (or SHEDLOCK_SRC=...); version $VER" >&2
  exit 2
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if [ -d "$SRC/.git" ] || git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$SRC" archive "shedlock-parent-$VER" pom.xml shedlock-test-support | tar -x -C "$TMP"
else
  cp -r "$SRC/pom.xml" "$SRC/shedlock-test-support" "$TMP/"   # a plain source tree of that version
fi
mvn -B -q -f "$TMP/shedlock-test-support/pom.xml" -DskipTests -Dspotless.check.skip=true \
  -Dspotless.apply.skip=true -Dgpg.skip -Dmaven.javadoc.skip=true -Dmaven.source.skip=true install
echo "installed net.javacrumbs.shedlock:shedlock-test-support:$VER into ~/.m2"
