#!/usr/bin/env bash
# etcdlock vs etcd's own Go concurrency.Mutex, against ONE private etcd in one run.
# Usage: bench/compare.sh [--duration SECONDS] [--iterations N] [--pairs P [--ab-tonic]]
# --pairs P: P alternating pairs (etcdlock, then Go) of the uncontended
# measurement only, each etcdlock run beside its own Txn+Delete floor; prints
# every pair and the median ratio etcdlock / Go. --ab-tonic adds a third run
# per pair: etcdlock with etcd-client's own channel (ETCDLOCK_TONIC_CHANNEL=1)
# instead of the direct HTTP/2 channel (AB_ENV="VAR=value ..." in the
# environment: that variant instead, shown in the same column).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=15; ITER=1000; PAIRS=0; AB=0
while [ $# -gt 0 ]; do case "$1" in
  --duration) DURATION=$2; shift 2;; --iterations) ITER=$2; shift 2;;
  --pairs) PAIRS=$2; shift 2;; --ab-tonic) AB=1; shift;;
  *) echo "usage: $0 [--duration S] [--iterations N]" >&2; exit 2;; esac; done
if [ -z "${NO_BUILD:-}" ]; then  # NO_BUILD=1: use the binaries already in target/release
  cargo build --quiet --release -p etcdlock-cli --features etcdlock-cli/bench -p etcdlock-testkit
  (cd bench/go-mutex && GOFLAGS=-mod=mod go build -o ../../target/release/go-mutex .)
fi
coproc HARNESS { exec target/release/etcd-harness; }
read -r line <&"${HARNESS[0]}"
EP=$(python3 -c 'import json,sys; print(",".join(json.loads(sys.argv[1])["endpoints"]))' "$line")
trap 'eval "exec ${HARNESS[1]}>&-"; wait' EXIT
echo "private etcd at $EP; load: $(uptime)" >&2
if [ "$PAIRS" -gt 0 ]; then
  OUT=$(mktemp)
  for p in $(seq "$PAIRS"); do
    target/release/etcdlock --endpoints "$EP" bench --use-endpoints --json --iterations "$ITER" --duration 0.2s --contenders 1 --distinct 1 \
      | grep -E '"floor_txn_delete"|"uncontended_lock_unlock"' | sed "s/^{/{\"pair\":$p,\"side\":\"direct\",/" >> "$OUT"
    if [ -n "${AB_ENV:-}" ]; then
      env $AB_ENV target/release/etcdlock --endpoints "$EP" bench --use-endpoints --json --iterations "$ITER" --duration 0.2s --contenders 1 --distinct 1 \
        | grep -E '"floor_txn_delete"|"uncontended_lock_unlock"' | sed "s/^{/{\"pair\":$p,\"side\":\"tonic\",/" >> "$OUT"
    elif [ "$AB" = 1 ]; then
      ETCDLOCK_TONIC_CHANNEL=1 target/release/etcdlock --endpoints "$EP" bench --use-endpoints --json --iterations "$ITER" --duration 0.2s --contenders 1 --distinct 1 \
        | grep -E '"floor_txn_delete"|"uncontended_lock_unlock"' | sed "s/^{/{\"pair\":$p,\"side\":\"tonic\",/" >> "$OUT"
    fi
    target/release/go-mutex -endpoints "$EP" -iterations "$ITER" -contenders 1 -duration 200ms \
      | grep go_mutex_uncontended | sed "s/^{/{\"pair\":$p,\"side\":\"go\",/" >> "$OUT"
    echo "pair $p/$PAIRS; load: $(uptime)" >&2
  done
  python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
get = lambda p, side, m: [r for r in rows if r["pair"] == p and r["side"] == side and r["metric"] == m]
pairs = sorted({r["pair"] for r in rows})
ab = any(r["side"] == "tonic" for r in rows)
print("| pair | etcdlock p50 | its Txn+Delete floor | Go Mutex p50 | etcdlock / Go |" + (" etcdlock, tonic channel p50 / Go | its floor |" if ab else ""))
print("|---|---|---|---|---|" + ("---|---|" if ab else ""))
rs, rt = [], []
for p in pairs:
    u, f = get(p, "direct", "uncontended_lock_unlock")[0], get(p, "direct", "floor_txn_delete")[0]
    g = get(p, "go", "go_mutex_uncontended_lock_unlock")[0]
    rs.append(u["p50_ms"] / g["p50_ms"])
    line = f"| {p} | {u['p50_ms']:.3f} ms | {f['p50_ms']:.3f} ms ({u['p50_ms']/f['p50_ms']:.2f}x) | {g['p50_ms']:.3f} ms | **{rs[-1]:.2f}** |"
    if ab:
        t, tf = get(p, "tonic", "uncontended_lock_unlock")[0], get(p, "tonic", "floor_txn_delete")[0]
        rt.append(t["p50_ms"] / g["p50_ms"])
        line += f" {t['p50_ms']:.3f} ms = {rt[-1]:.2f} | {tf['p50_ms']:.3f} ms ({t['p50_ms']/tf['p50_ms']:.2f}x) |"
    print(line)
print(f"\nmedian etcdlock / Go over {len(rs)} pairs: {statistics.median(rs):.3f} (target <= 0.95)" +
      (f"; with etcd-client's channel: {statistics.median(rt):.3f}" if ab else ""))
PY
  rm -f "$OUT"
  exit 0
fi
OURS=$(target/release/etcdlock --endpoints "$EP" bench --use-endpoints --json --iterations "$ITER" --duration "$DURATION" --distinct 1000)
GO=$(target/release/go-mutex -endpoints "$EP" -iterations "$ITER" -duration "${DURATION}s")
python3 - "$OURS" "$GO" <<'PY'
import json, sys
rows = {}
for blob in sys.argv[1:]:
    for l in blob.splitlines():
        if l.startswith("{"):
            r = json.loads(l); rows[r["metric"]] = r
f, e = rows["floor_txn_delete"], rows["floor_delete_to_event"]
u, c = rows["uncontended_lock_unlock"], rows["contended"]
gu, gc = rows["go_mutex_uncontended_lock_unlock"], rows["go_mutex_contended"]
print("| measure | etcdlock | Go concurrency.Mutex | floor |")
print("|---|---|---|---|")
print(f"| uncontended lock+unlock p50 | {u['p50_ms']:.3f} ms ({u['p50_ms']/f['p50_ms']:.2f}x; target <= 1.05x) | {gu['p50_ms']:.3f} ms ({gu['p50_ms']/f['p50_ms']:.2f}x) | Txn+Delete {f['p50_ms']:.3f} ms |")
print(f"| uncontended lock+unlock p99 | {u['p99_ms']:.3f} ms | {gu['p99_ms']:.3f} ms | {f['p99_ms']:.3f} ms |")
print(f"| {c['contenders']} contenders: handoff p50 | {c['handoff_p50_ms']:.3f} ms ({c['handoff_p50_ms']/e['p50_ms']:.1f}x; target <= 1.5x) | {gc['handoff_p50_ms']:.3f} ms ({gc['handoff_p50_ms']/e['p50_ms']:.1f}x) | Delete->event {e['p50_ms']:.3f} ms |")
if c.get("loaded_event_floor_p50_ms"):
    print(f"| {c['contenders']} contenders: handoff p50 vs the floor measured beside them | {c['handoff_ratio_to_loaded_event_floor']:.2f}x | | Delete->event under the same load {c['loaded_event_floor_p50_ms']:.3f} ms |")
print(f"| {c['contenders']} contenders: handoff p99 | {c['handoff_p99_ms']:.3f} ms | {gc['handoff_p99_ms']:.3f} ms | {e['p99_ms']:.3f} ms |")
print(f"| {c['contenders']} contenders: acquisitions/s | {c['acquisitions_per_s']:.0f} ({c['acquisitions_per_s']/gc['acquisitions_per_s']:.1f}x Go; target >= 10x) | {gc['acquisitions_per_s']:.0f} | |")
print(f"| {c['contenders']} contenders: wait p50 / p99 | {c['wait_p50_ms']:.1f} / {c['wait_p99_ms']:.1f} ms | {gc['wait_p50_ms']:.1f} / {gc['wait_p99_ms']:.1f} ms | |")
d = rows["distinct_locks_one_session"]
print(f"| {d['locks']} distinct locks on one session | acquire all {d['acquire_all_ms']:.0f} ms, release all {d['release_all_ms']:.0f} ms, {d['leases']} lease | | |")
PY
