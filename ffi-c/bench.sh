#!/usr/bin/env bash
# Benchmark the C ABI against the Rust core and the raw etcd round trip, on one
# etcd started by the testkit harness, in one run (release builds):
#   raw_txn_delete      plain etcd-client Txn(put-with-lease + range) + Delete: the floor
#   rust_core_async     core lock+unlock awaited inside the runtime
#   rust_core_blocking  core lock+unlock through etcdlock::runtime::block_on per call
#   rust_rt_block_on    core lock+unlock through Runtime::block_on per call (the C ABI's path)
#   c_abi_blocking      etcdlock_lock + etcdlock_unlock + etcdlock_guard_free from C
#   rust_core_handoff / c_abi_handoff  8 contenders, a client each, on one lock:
#                       handoff = next holder's lock returned - previous holder's
#                       unlock call (core: 8 tasks; C: 8 threads), bench/languages.sh's case
# The Rust and C runs alternate for ROUNDS rounds; the table shows the median of
# each measure over the rounds and the ratios. Not asserted by the tests.
#
#   ffi-c/bench.sh [ITERATIONS=2000] [ROUNDS=3]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
iterations="${1:-2000}"
rounds="${2:-3}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
rel="$CARGO_TARGET_DIR/release"
cargo build -q --release -p etcdlock-ffi
# Apart: built together, core's bench feature would reach libetcdlock too.
cargo build -q --release -p etcdlock-ffi-bench
cargo build -q --release -p etcdlock-testkit
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
gcc -std=c11 -O2 -I"$root/include" -I"$here/tests/c" "$here/bench/bench.c" -o "$work/bench_c" -pthread \
    -L"$rel" -letcdlock -Wl,-rpath,"$rel"

coproc HARN { "$rel/etcd-harness"; }
harn_in="${HARN[1]}"
read -r line <&"${HARN[0]}"
ep="$(sed -E 's/.*"endpoints":\["([^"]+)".*/\1/' <<<"$line")"
echo "etcd at $ep; $iterations iterations x $rounds rounds" >&2
for ((r = 1; r <= rounds; r++)); do
    "$rel/core_bench" "$ep" "$iterations" | tee -a "$work/results.jsonl" >&2
    "$work/bench_c" "$ep" "$iterations" | tee -a "$work/results.jsonl" >&2
done
eval "exec ${harn_in}>&-"
wait "$HARN_PID" 2>/dev/null || true

python3 - "$work/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["metric"], []).append(r)
med = {m: (statistics.median(x["p50_ms"] for x in v), statistics.median(x["p99_ms"] for x in v)) for m, v in by.items()}
floor = med["raw_txn_delete"][0]
core = med["rust_core_async"][0]
print("| measure | p50 | p99 | p50 / raw Txn+Delete | p50 / Rust core |")
print("|---|---|---|---|---|")
for m in ["raw_txn_delete", "rust_core_async", "rust_core_blocking", "rust_rt_block_on", "c_abi_blocking"]:
    p50, p99 = med[m]
    print(f"| {m} | {p50:.3f} ms | {p99:.3f} ms | {p50/floor:.2f}x | {p50/core:.3f}x |")
if "c_abi_handoff" in med and "rust_core_handoff" in med:
    h = med["rust_core_handoff"][0]
    for m in ["rust_core_handoff", "c_abi_handoff"]:
        p50, p99 = med[m]
        print(f"| {m} (8 contenders) | {p50:.3f} ms | {p99:.3f} ms | | {p50/h:.3f}x the core's handoff |")
print(json.dumps({"c_over_rust_core_p50": med["c_abi_blocking"][0] / core,
                  "c_over_rust_same_path_p50": med["c_abi_blocking"][0] / med["rust_rt_block_on"][0],
                  "c_over_raw_p50": med["c_abi_blocking"][0] / floor}))
PY
