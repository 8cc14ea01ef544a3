#!/usr/bin/env bash
# Build libetcdlock (.so and .a), check include/etcdlock.h for drift, and run the
# C test suite against real etcd: linked against the .so, against the .a, and a
# smaller run under valgrind; tests/c/test_sync.c (acquisition options, latches,
# barriers) and tests/c/test_deadlock.c (deadlocks, detect_deadlock, history)
# each on its own and under valgrind; tests/c/test_mem.c (the mem:// test
# controls, no etcd) on its own and partly under valgrind. Also builds and runs examples/c through an
# installed prefix and pkg-config (examples/c/fence_postgres.c against a private
# PostgreSQL too), and compiles the C blocks of ffi-c/README.md
# and of every docs/**/*.md page (runs the complete programs among them). Last
# line: "N passed, N failed" (the sum of the runs).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TARGET_DIR="$target"
lib="$target/debug"
work="$(mktemp -d "${TMPDIR:-/tmp}/etcdlock-ffi-c.XXXXXX")"
trap 'rm -rf "$work"' EXIT

need() { command -v "$1" >/dev/null 2>&1; }
missing=()
for t in gcc pkg-config valgrind; do need "$t" || missing+=("$t"); done
if ((${#missing[@]})); then
    echo "== installing ${missing[*]}"
    if need apt-get; then
        pkgs=("${missing[@]/gcc/build-essential}")
        (apt-get update -qq && apt-get install -y -qq "${pkgs[@]}") >/dev/null || true
    fi
    for t in "${missing[@]}"; do
        need "$t" || { echo "missing tool: $t"; echo "0 passed, 1 failed"; exit 1; }
    done
fi

echo "== cargo build (libetcdlock.so, libetcdlock.a, etcd-harness)"
cargo build -q -p etcdlock-ffi -p etcdlock-testkit
# The CLI, built apart as it ships: test_once checks `etcdlock once` is
# refused a job the C program holds.
cargo build -q -p etcdlock-cli

echo "== include/etcdlock.h is up to date (tools/cheader --check)"
if ! cargo run -q -p etcdlock-cheader -- --check; then
    echo "0 passed, 1 failed"
    exit 1
fi

# The ```c blocks of ffi-c/README.md and of every page of the site (docs/**/*.md):
# a fragment (<!-- fragment --> before its fence) is compiled inside a
# function; a complete program is also linked here and run against etcd below
# (its output compared with the ```text block after it, if any). One line per
# block names it by page and line and says what happened.
echo "== C blocks of ffi-c/README.md and docs/**/*.md"
readme_pass=0
readme_fail=0
readme_programs=()
# shellcheck disable=SC2046 # one argument per page
readme_list="$(python3 "$here/tests/readme_blocks.py" "$work/readme" ffi-c/README.md $(git ls-files --cached --others --exclude-standard 'docs/*.md' | sort))"
while read -r file kind desc; do
    [ -n "$file" ] || continue
    if [ "$kind" = fragment ]; then
        if gcc -std=c11 -Wall -Wextra -Werror -pedantic -I"$root/include" -c "$file" -o "${file%.c}.o"; then
            echo "ok   $desc (fragment: compiled)"
            readme_pass=$((readme_pass + 1))
        else
            echo "FAIL $desc (fragment: does not compile)"
            readme_fail=$((readme_fail + 1))
        fi
    elif gcc -std=c11 -Wall -Wextra -Werror -pedantic -I"$root/include" "$file" -o "${file%.c}" \
        -L"$lib" -letcdlock -Wl,-rpath,"$lib" -lpthread; then
        readme_programs+=("${file%.c}|$desc")
    else
        echo "FAIL $desc (program: does not compile)"
        readme_fail=$((readme_fail + 1))
    fi
done <<<"$readme_list"

echo "== cargo test -p etcdlock-ffi"
cargo test -q -p etcdlock-ffi 2>&1 | tail -n 3

export ETCDLOCK_HARNESS="$target/debug/etcd-harness"
export ETCDLOCK_CLI_BIN="$target/debug/etcdlock"
cflags=(-std=c11 -Wall -Wextra -Werror -pedantic -g -O1 -I"$root/include" -I"$here/tests/c")
src="$here/tests/c/test_etcdlock.c"
gcc "${cflags[@]}" "$src" -o "$work/test_shared" -L"$lib" -letcdlock -Wl,-rpath,"$lib" -lpthread
gcc "${cflags[@]}" "$src" -o "$work/test_static" "$lib/libetcdlock.a" -lm -lpthread -ldl
# Issue 32's calls (acquisition options, release of a permit, latches and barriers).
gcc "${cflags[@]}" "$here/tests/c/test_sync.c" -o "$work/test_sync" -L"$lib" -letcdlock -Wl,-rpath,"$lib" -lpthread
# Issue 62's calls (deadlocks, detect_deadlock, history).
gcc "${cflags[@]}" "$here/tests/c/test_deadlock.c" -o "$work/test_deadlock" -L"$lib" -letcdlock -Wl,-rpath,"$lib" -lpthread
# Issue 61's test controls of the in-process stores (etcdlock_mem_*).
gcc "${cflags[@]}" "$here/tests/c/test_mem.c" -o "$work/test_mem" -L"$lib" -letcdlock -Wl,-rpath,"$lib" -lpthread
# The static binary must not need libetcdlock.so.
if ldd "$work/test_static" | grep -q libetcdlock; then echo "test_static links libetcdlock.so"; exit 1; fi
# The header compiles as C++ too.
if need g++; then
    echo '#include "etcdlock.h"
int main() { return etcdlock_version_number() > 0 ? 0 : 1; }' >"$work/cxx.cc"
    g++ -std=c++11 -Wall -Werror -I"$root/include" "$work/cxx.cc" -o "$work/cxx" -L"$lib" -letcdlock -Wl,-rpath,"$lib"
    "$work/cxx"
fi

total_pass=0
total_fail=0
run_suite() { # label, command...
    local label="$1"
    shift
    echo "== C suite: $label"
    local out="$work/$label.log" rc=0
    "$@" >"$out" 2>&1 || rc=$?
    cat "$out"
    local last p f
    last="$(tail -n 1 "$out")"
    if [[ "$last" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        p="${BASH_REMATCH[1]}"
        f="${BASH_REMATCH[2]}"
    else
        p=0
        f=1
    fi
    if ((rc != 0 && f == 0)); then f=1; fi
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
}

run_suite shared "$work/test_shared"
run_suite static "$work/test_static"

# valgrind: a smaller run (each test once, 2x20 contention). Definite, indirect
# and possible leaks and every invalid access fail it; see valgrind.supp for the
# suppressions and why each is justified. Forked children are not checked
# (--child-silent-after-fork): the fork test's child deliberately leaks the
# parent's handles, which it must not free; the other children exec at once.
vg=(valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible
    --errors-for-leak-kinds=definite,indirect,possible --num-callers=40 --child-silent-after-fork=yes
    --suppressions="$here/tests/c/valgrind.supp")
# The tests that assert time under etcd faults (leader_faults, renewal:
# resume and renewal-failing bounds of a few hundred ms; lead_partition: a
# cancellation within the TTL, a handover under 1 s) run in the shared and
# static runs only: valgrind slows the library 20-50x, which would test valgrind.
# Connecting (session grant included) gets 30 s instead of 5: the first
# connect of a run pays valgrind's start-up on a loaded machine. The
# client_free stress test runs 5 rounds instead of 20 there.
ETCDLOCK_TEST_THREADS=2 ETCDLOCK_TEST_ITERS=20 ETCDLOCK_TEST_FREE_ROUNDS=5 ETCDLOCK_TEST_SKIP=leader_faults,renewal,lead_partition ETCDLOCK_CONNECT_TIMEOUT=30s \
    run_suite valgrind "${vg[@]}" "$work/test_shared"
run_suite sync "$work/test_sync"
# Under valgrind without the tests that bound hand-over times (lock-delay,
# clean hand-over, lease time): the handles' leak and access checks.
ETCDLOCK_TEST_SKIP=lock_delay_after_kill,lock_delay_clean_unlock,lease_time_and_release_permit \
    run_suite sync-valgrind "${vg[@]}" "$work/test_sync"
# Deadlocks and history, on their own and under valgrind (its bounds are the
# lock calls' own timeouts, far above what valgrind adds).
run_suite deadlock "$work/test_deadlock"
run_suite deadlock-valgrind "${vg[@]}" "$work/test_deadlock"
# The mem:// controls, on in-process stores only (no etcd). Under valgrind
# without the tests that bound a silence or a stall (a loss within the 3 s
# TTL, a grant within 1 s): the handles', key lists' and bad input's checks.
run_suite mem "$work/test_mem"
ETCDLOCK_TEST_SKIP=silence_zero_ends_it,silence_at_risk_then_lost,stall_one_client \
    run_suite mem-valgrind "${vg[@]}" "$work/test_mem"

echo "== install to a prefix, build examples/c with pkg-config, run it"
prefix="$work/prefix"
"$here/install.sh" --prefix "$prefix" --no-build >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror "$root/examples/c/lock_token.c" -o "$work/lock_token" \
    $(pkg-config --cflags --libs etcdlock) -Wl,-rpath,"$prefix/lib"
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror "$root/examples/c/lock_token.c" -o "$work/lock_token_static" \
    $(pkg-config --cflags etcdlock) "$prefix/lib/libetcdlock.a" $(pkg-config --libs-only-l --static etcdlock | sed 's/-letcdlock//')
# The unit test a user writes with the mem:// controls (no etcd): a job that
# stops writing when its lease is expired in the store.
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror "$root/examples/c/job_stops_on_loss.c" -o "$work/job_stops_on_loss" \
    $(pkg-config --cflags --libs etcdlock) -Wl,-rpath,"$prefix/lib" -lpthread
# The header's "Minimal use" snippet, compiled as written (endpoint swapped in at run time).
{
    echo '#include <stdio.h>'
    echo '#include <etcdlock.h>'
    echo 'int main(void) {'
    sed -n '/^ \* Minimal use/,/^ \* Build:/p' "$root/include/etcdlock.h" | sed -n 's/^ \*     //p' |
        sed 's|"http://127.0.0.1:2379"|getenv("ETCDLOCK_ENDPOINTS")|'
    echo 'return 0; }'
} >"$work/header_snippet.c"
gcc -std=c11 -Wall -Wextra -Werror -include stdlib.h "$work/header_snippet.c" -o "$work/header_snippet" \
    $(pkg-config --cflags --libs etcdlock) -Wl,-rpath,"$prefix/lib"
example_ok=1
coproc HARN { "$ETCDLOCK_HARNESS"; }
harn_in="${HARN[1]}"
read -r line <&"${HARN[0]}"
ep="$(sed -E 's/.*"endpoints":\["([^"]+)".*/\1/' <<<"$line")"
for bin in lock_token lock_token_static header_snippet; do
    out="$(ETCDLOCK_ENDPOINTS="$ep" "$work/$bin" example-lock)" || example_ok=0
    echo "$bin: $out"
    [[ "$out" =~ fencing\ token\ [0-9]+ ]] || example_ok=0
done
for prog in ${readme_programs[@]+"${readme_programs[@]}"}; do
    bin="${prog%%|*}"
    desc="${prog#*|}"
    if out="$(ETCDLOCK_ENDPOINTS="$ep" timeout 60 "$bin" 2>"$bin.err")"; then
        if [ -f "$bin.expected" ] && [ "$out" != "$(cat "$bin.expected")" ]; then
            echo "FAIL $desc (program: printed something else than the text block after it)"
            diff <(echo "$out") "$bin.expected" || true
            readme_fail=$((readme_fail + 1))
        elif [ -f "$bin.expected" ]; then
            echo "ok   $desc (program: ran, exit 0, printed its text block)"
            readme_pass=$((readme_pass + 1))
        else
            echo "ok   $desc (program: ran, exit 0)"
            readme_pass=$((readme_pass + 1))
        fi
    else
        echo "FAIL $desc (program: exit $?): $out $(cat "$bin.err")"
        readme_fail=$((readme_fail + 1))
    fi
done
# The conformance table (conformance/cases.json), as real C calls: generated
# into the work dir, compiled, run on its own and under valgrind.
python3 "$here/tests/gen_conformance.py" "$root/conformance/cases.json" "$work/conformance.c"
gcc "${cflags[@]}" "$work/conformance.c" -o "$work/conformance" -L"$lib" -letcdlock -Wl,-rpath,"$lib" -lpthread
run_suite conformance "$work/conformance" "$ep"
run_suite conformance-valgrind "${vg[@]}" "$work/conformance" "$ep"
# Once more on the in-process etcd (mem://conformance): every case but the
# etcd_only ones; etcdctl reaches the store at the URL it writes under
# ETCDLOCK_MEM_URL_DIR.
mkdir -p "$work/mem-urls"
ETCDLOCK_MEM_URL_DIR="$work/mem-urls" run_suite conformance-mem "$work/conformance" mem://conformance
# fork: a program that forks while holding a lock, under valgrind with only the
# suppressions the package ships and without --child-silent-after-fork: the
# child's leak check (the parent's runtime, whose threads the child lacks) must
# be covered by them, and nothing else may be reported in either process.
gcc "${cflags[@]}" "$here/tests/c/fork_child.c" -o "$work/fork_child" -L"$lib" -letcdlock -Wl,-rpath,"$lib"
fork_rc=0
valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible --num-callers=40 \
    --suppressions="$here/dist/etcdlock.supp" "$work/fork_child" "$ep" >"$work/fork_child.log" 2>&1 || fork_rc=$?
if ((fork_rc == 0)); then
    echo "ok   fork under valgrind: the shipped suppressions cover the forked child, nothing else reported"
    total_pass=$((total_pass + 1))
else
    cat "$work/fork_child.log"
    echo "FAIL fork under valgrind with the shipped suppressions (exit $fork_rc)"
    total_fail=$((total_fail + 1))
fi
eval "exec ${harn_in}>&-" # closing its stdin stops etcd
wait "$HARN_PID" 2>/dev/null || true
if ((example_ok)); then
    echo "ok   examples/c/lock_token (shared and static) and the header's snippet"
    total_pass=$((total_pass + 1))
else
    echo "FAIL examples/c/lock_token"
    total_fail=$((total_fail + 1))
fi
if out="$(timeout 60 "$work/job_stops_on_loss" 2>&1)" && [ "$out" = "the job stopped writing: LeaseExpired" ]; then
    echo "ok   examples/c/job_stops_on_loss: $out"
    total_pass=$((total_pass + 1))
else
    echo "FAIL examples/c/job_stops_on_loss: $out"
    total_fail=$((total_fail + 1))
fi

# examples/c/fence_postgres.c: a libpq write fenced with the lock's token, built
# with pkg-config like a user's, run by scripts/fence_scenario.py against a
# private PostgreSQL and etcd it starts and stops: A stopped past its lease, B
# writes, A's late write refused; without the fence, the lost update.
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror -pedantic "$root/examples/c/fence_postgres.c" -o "$work/fence_postgres" \
    $(pkg-config --cflags --libs etcdlock libpq) -Wl,-rpath,"$prefix/lib"
run_suite fence-postgres python3 "$root/scripts/fence_scenario.py" --label c --harness "$ETCDLOCK_HARNESS" -- "$work/fence_postgres"

total_pass=$((total_pass + readme_pass))
total_fail=$((total_fail + readme_fail))

echo "== summary (shared + static + valgrind runs + sync runs + deadlock runs + mem runs + conformance (etcd, valgrind, mem) + examples + PostgreSQL fencing (2) + README blocks)"
echo "$total_pass passed, $total_fail failed"
((total_fail == 0))
