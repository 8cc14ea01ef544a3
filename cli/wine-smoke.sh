#!/usr/bin/env bash
# Smoke test of the Windows etcdlock.exe under Wine against a private etcd on
# 127.0.0.1 (Debian's etcd, temporary data dir, free ports):
#  1. `etcdlock.exe run NAME -- cmd /c hold.bat` holds NAME: the Linux
#     etcdlock's `run --try NAME` fails (exit 75) while it holds; once the
#     command ends, etcdlock.exe exits 0 and the Linux one acquires.
#  2. kill -9 of etcdlock.exe ends its job (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE):
#     the command's cmd.exe, a Linux process under Wine, is gone within 60 s,
#     and the Linux one acquires the name once etcd expires the dead holder's lease.
# Usage: cli/wine-smoke.sh PATH/TO/etcdlock.exe [PATH/TO/linux/etcdlock]
# Exits 0 when every check passed, 1 otherwise. Every wait is bounded.
set -u
EXE=$(realpath "${1:?usage: $0 etcdlock.exe [linux-etcdlock]}")
LIN=$(realpath "${2:-$(dirname "$0")/../target/debug/etcdlock}")
ETCD=${ETCD_BIN:-/usr/bin/etcd}
export WINEDEBUG=-all
# The Wine prefix with the DLL stand-ins Wine 8 lacks (scripts/wine/setup.sh).
export WINEPREFIX
WINEPREFIX=$(bash "$(dirname "$0")/../scripts/wine/setup.sh") || { echo "wine-smoke: scripts/wine/setup.sh failed" >&2; exit 1; }
# Debian installs the 64-bit loader as /usr/lib/wine/wine64 (wine64 on PATH
# only with the wine64 package's alternatives); $WINE overrides.
WINE=${WINE:-$(command -v wine64 || command -v wine)}
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "wine-smoke: FAIL: $*" >&2; exit 1; }
ok() { echo "wine-smoke: ok: $*"; }
# Wait up to $1 seconds for the command after it to succeed.
await() { local t=$1; shift; local end=$((SECONDS + t)); until "$@"; do ((SECONDS < end)) || return 1; sleep 0.2; done; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cp=$(free_port); pp=$(free_port)
ep=http://127.0.0.1:$cp
"$ETCD" --name s --data-dir "$tmp/etcd" --listen-client-urls "$ep" --advertise-client-urls "$ep" \
    --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
    --initial-cluster "s=http://127.0.0.1:$pp" --log-level error >"$tmp/etcd.log" 2>&1 &
pids+=($!)
await 30 curl -sf "$ep/health" -o /dev/null || fail "etcd did not start: $(tail -5 "$tmp/etcd.log")"
ok "etcd on $ep"

win() { echo "Z:${1//\//\\}"; }
# Sleep ~1 s in cmd: ping waits a second between its two echoes.
cat >"$tmp/hold.bat" <<BAT
@echo off
echo held> $(win "$tmp/held")
:loop
if exist $(win "$tmp/go") goto end
ping -n 2 127.0.0.1 >NUL
goto loop
:end
echo done> $(win "$tmp/done")
BAT
name=wine-smoke-$$
# 1. hold, exclude, release.
"$WINE" "$EXE" --endpoints "$ep" run "$name" -- cmd /c "$(win "$tmp/hold.bat")" >"$tmp/run1.out" 2>&1 &
w1=$!; pids+=($w1)
await 180 test -e "$tmp/held" || fail "the Wine holder's command did not start within 180 s: $(cat "$tmp/run1.out")"
ok "etcdlock.exe runs the command under $name"
"$LIN" --endpoints "$ep" run --try "$name" -- true; rc=$?
[ "$rc" = 75 ] || fail "Linux run --try while etcdlock.exe holds: exit $rc, want 75"
ok "Linux run --try while held: exit 75"
touch "$tmp/go"
await 120 bash -c "! kill -0 $w1 2>/dev/null" || fail "etcdlock.exe did not exit within 120 s after its command ended"
wait "$w1"; rc=$?
[ "$rc" = 0 ] || fail "etcdlock.exe exit $rc, want 0: $(cat "$tmp/run1.out")"
test -e "$tmp/done" || fail "the command did not finish"
"$LIN" --endpoints "$ep" run --try "$name" -- true; rc=$?
[ "$rc" = 0 ] || fail "Linux run --try after release: exit $rc, want 0"
ok "released: etcdlock.exe exit 0, Linux run --try then acquires"

# 2. kill -9 of etcdlock.exe ends its job: the command's cmd.exe (a Linux
# process under Wine, found by its batch file's name) must go with it.
name2=$name-kill
cat >"$tmp/hold2.bat" <<BAT
@echo off
:loop
if exist $(win "$tmp/go2") goto end
ping -n 2 127.0.0.1 >NUL
goto loop
:end
BAT
"$WINE" "$EXE" --endpoints "$ep" run "$name2" -- cmd /c "$(win "$tmp/hold2.bat")" >"$tmp/run2.out" 2>&1 &
w2=$!; pids+=($w2)
await 180 bash -c "pgrep -f '^cmd /c .*hold2[.]bat' >/dev/null" || fail "the second command did not start within 180 s: $(cat "$tmp/run2.out")"
child=$(pgrep -f '^cmd /c .*hold2[.]bat' | head -n 1)
[ -n "$child" ] && [ "$child" != "$w2" ] || fail "no cmd.exe process apart from etcdlock.exe ($child)"
ok "the job's cmd.exe runs as Linux process $child: $(tr '\0' ' ' </proc/"$child"/cmdline | cut -c1-100)"
kill -9 "$w2"
wait "$w2" 2>/dev/null
await 60 bash -c "! kill -0 $child 2>/dev/null" || fail "the job's cmd.exe (pid $child) outlived etcdlock.exe by 60 s"
ok "kill -9 etcdlock.exe: its job's cmd.exe ended with it"
"$LIN" --endpoints "$ep" run --timeout 120 "$name2" -- true; rc=$?
[ "$rc" = 0 ] || fail "Linux run after the killed holder's lease: exit $rc, want 0"
ok "Linux run acquires $name2 after the killed holder's lease ended"
echo "wine-smoke: PASS"
