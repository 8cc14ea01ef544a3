#!/usr/bin/env bash
# The C library on Windows x64, as far as this Linux machine can take it:
# etcdlock.dll built for x86_64-pc-windows-gnu with mingw-w64, checked (only
# etcdlock_* exported, only system DLLs imported), then the header's "Minimal
# use" snippet and examples/c/lock_token.c built with mingw-w64 and run under
# Wine (scripts/wine/setup.sh) against a real etcd on 127.0.0.1, excluding a
# Linux client on the same name. Last line: "N passed, N failed".
#   ffi-c/test-windows.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target"
work="$(mktemp -d "${TMPDIR:-/tmp}/etcdlock-win.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export WINEPREFIX; WINEPREFIX="$(bash "$root/scripts/wine/setup.sh")"
export WINEDEBUG=-all
# mingw-w64 links (rustc's default for this target) and compiles ring's C;
# scripts/cross.sh builds it as dist.sh and the other Windows checks do.
lib="$(bash "$root/scripts/cross.sh" x86_64-pc-windows-gnu "${ETCDLOCK_CROSS_PROFILE:-fast}" libs | tail -n 1)"
cargo build -q -p etcdlock-testkit -p etcdlock-cli
pass=0 fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
dump="$(x86_64-w64-mingw32-objdump -p "$lib/etcdlock.dll")"
exports="$(sed -n '/\[Ordinal\/Name Pointer\] Table/,/^$/p' <<<"$dump" | sed -n 's/^\s*\[ *[0-9]*\] //p')"
others="$(grep -v '^etcdlock_' <<<"$exports" || true)"
if [ -z "$others" ]; then ok "etcdlock.dll exports $(wc -l <<<"$exports") symbols, all etcdlock_*"; else bad "etcdlock.dll exports others: $(head -3 <<<"$others")"; fi
imports="$(sed -n 's/^\s*DLL Name: //p' <<<"$dump" | tr 'A-Z' 'a-z' | sort -u | tr '\n' ' ')"
nonsys="$(tr ' ' '\n' <<<"$imports" | grep -vxE 'kernel32.dll|ntdll.dll|ws2_32.dll|advapi32.dll|userenv.dll|bcrypt.dll|bcryptprimitives.dll|msvcrt.dll|api-ms-win-core-synch-l1-2-0.dll|' || true)"
if [ -z "$nonsys" ]; then ok "etcdlock.dll imports system DLLs only: $imports"; else bad "etcdlock.dll imports $nonsys"; fi
cp "$lib/etcdlock.dll" "$work/"
{
  echo '#include <stdio.h>'
  echo '#include <stdlib.h>'
  echo '#include <etcdlock.h>'
  echo 'int main(void) {'
  sed -n '/^ \* Minimal use/,/^ \* Build:/p' "$root/include/etcdlock.h" | sed -n 's/^ \*     //p' |
    sed 's|"http://127.0.0.1:2379"|getenv("ETCDLOCK_ENDPOINTS")|'
  echo 'return 0; }'
} >"$work/snippet.c"
mingw=(x86_64-w64-mingw32-gcc -std=c11 -Wall -Wextra -Werror -I"$root/include")
"${mingw[@]}" "$work/snippet.c" -o "$work/snippet.exe" -L"$lib" -letcdlock
"${mingw[@]}" "$root/examples/c/lock_token.c" -o "$work/lock_token.exe" -L"$lib" -letcdlock
coproc HARN { "$target/debug/etcd-harness"; }
read -r line <&"${HARN[0]}"
ep="$(sed -E 's/.*"endpoints":\["([^"]+)".*/\1/' <<<"$line")"
cli="$target/debug/etcdlock"
cd "$work"
if out="$(ETCDLOCK_ENDPOINTS="$ep" timeout 120 wine snippet.exe 2>&1)" && [[ "$out" =~ ^fencing\ token\ [0-9]+ ]]; then
  ok "header snippet under Wine: $out"
else
  bad "header snippet under Wine: $out"
fi
if out="$(ETCDLOCK_ENDPOINTS="$ep" timeout 120 wine lock_token.exe win-example 2>&1)" && [[ "$out" =~ fencing\ token\ [0-9]+ ]]; then
  ok "examples/c/lock_token.c under Wine: $out"
else
  bad "examples/c/lock_token.c under Wine: $out"
fi
# Exclusion across the two OSes: a Linux client holds the name; the Windows
# program's lock waits (it is bounded by the example's own timeout: fails),
# and after the Linux hold ends, it takes the lock.
"$cli" --endpoints "$ep" run win-shared -- sleep 3 >/dev/null 2>&1 &
linux=$!
held=""
for _ in $(seq 100); do # until the Linux client holds (status exits 0 when held)
  held="$("$cli" --endpoints "$ep" status win-shared 2>&1)" && break
  sleep 0.05
done
t0=$SECONDS
out="$(ETCDLOCK_ENDPOINTS="$ep" timeout 120 wine lock_token.exe win-shared 2>&1)" && rc=0 || rc=$?
wait "$linux" || true
if ((rc == 0)) && ((SECONDS - t0 >= 1)) && [[ "$out" =~ fencing\ token\ [0-9]+ ]]; then
  ok "Windows lock_token.exe waited $((SECONDS - t0)) s for the Linux holder, then held: $out"
else
  bad "cross-OS exclusion: rc $rc after $((SECONDS - t0)) s: $out (status while the Linux client held: $held)"
fi
cd "$root"
exec {HARN[1]}>&-
wait "$HARN_PID" 2>/dev/null || true
echo "$pass passed, $fail failed"
((fail == 0))
