#!/usr/bin/env bash
# Breadth: many clients locking many distinct names at once (issue 33, item 3),
# against ONE private etcd in one run: etcd's own write ceiling for the same
# requests (raw Txn+Delete rounds on as many connections, alternating with
# etcdlock in the same process), etcdlock, then etcd's Go concurrency.Mutex
# doing the same. Usage: bench/breadth.sh [--clients N] [--names M] [--duration S]
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=100; NAMES=1000; DURATION=10
while [ $# -gt 0 ]; do case "$1" in
  --clients) CLIENTS=$2; shift 2;; --names) NAMES=$2; shift 2;; --duration) DURATION=$2; shift 2;;
  *) echo "usage: $0 [--clients N] [--names M] [--duration S]" >&2; exit 2;; esac; done
cargo build --quiet --release -p etcdlock-cli -p etcdlock-testkit
(cd bench/go-mutex && GOFLAGS=-mod=mod go build -o ../../target/release/go-mutex .)
coproc HARNESS { exec target/release/etcd-harness; }
read -r line <&"${HARNESS[0]}"
EP=$(python3 -c 'import json,sys; print(",".join(json.loads(sys.argv[1])["endpoints"]))' "$line")
trap 'eval "exec ${HARNESS[1]}>&-"; wait' EXIT
echo "private etcd at $EP; load: $(uptime)" >&2
OURS=$(target/release/etcdlock --endpoints "$EP" bench --use-endpoints --json --breadth --clients "$CLIENTS" --names "$NAMES" --duration "${DURATION}s")
GO=$(target/release/go-mutex -endpoints "$EP" -breadth-clients "$CLIENTS" -breadth-names "$NAMES" -duration "${DURATION}s")
# etcd's ceiling once more after Go, so Go has a ceiling beside it too.
AFTER=$(target/release/etcdlock --endpoints "$EP" bench --use-endpoints --json --breadth --clients "$CLIENTS" --names "$NAMES" --duration "${DURATION}s")
echo "load after: $(uptime)" >&2
python3 - "$OURS" "$GO" "$AFTER" <<'PY'
import json, sys
def rows(blob): return [json.loads(l) for l in blob.splitlines() if l.startswith("{")]
ours, go, after = rows(sys.argv[1]), rows(sys.argv[2]), rows(sys.argv[3])
ceil = [r for r in ours + after if r["metric"] == "breadth_etcd_ceiling"]
mine = [r for r in ours + after if r["metric"] == "breadth_etcdlock"]
g = go[0]
c = sum(r["acquisitions_per_s"] for r in ceil) / len(ceil)
print(f"| measure ({g['clients']} clients x {g['names']} names, random) | acquisitions/s | of etcd's ceiling | lock p50 / p99 | lock+unlock p50 / p99 | client CPU per acquisition | errors |")
print("|---|---|---|---|---|---|---|")
for r in ceil:
    print(f"| etcd's ceiling: raw Txn+Delete | {r['acquisitions_per_s']:.0f} | 1.00 | | {r['cycle_p50_ms']:.2f} / {r['cycle_p99_ms']:.2f} ms | {r['client_cpu_us_per_acquisition']:.0f} us | {r['errors']} |")
for r in mine:
    print(f"| etcdlock (round {r['round']}) | {r['acquisitions_per_s']:.0f} | **{r['ratio_to_ceiling']:.2f}** (the ceiling beside it) | {r['acquire_p50_ms']:.2f} / {r['acquire_p99_ms']:.2f} ms | {r['cycle_p50_ms']:.2f} / {r['cycle_p99_ms']:.2f} ms | {r['client_cpu_us_per_acquisition']:.0f} us | {r['errors']} |")
print(f"| Go concurrency.Mutex | {g['acquisitions_per_s']:.0f} | {g['acquisitions_per_s']/c:.2f} (mean ceiling {c:.0f}/s) | {g['acquire_p50_ms']:.2f} / {g['acquire_p99_ms']:.2f} ms | {g['cycle_p50_ms']:.2f} / {g['cycle_p99_ms']:.2f} ms | {g['client_cpu_us_per_acquisition']:.0f} us | {g['errors']} |")
m = sum(r["acquisitions_per_s"] for r in mine) / len(mine)
print(f"\netcdlock mean {m:.0f}/s = {m/c:.2f} of the mean ceiling (target >= 0.70), {m/g['acquisitions_per_s']:.2f}x Go's Mutex")
PY
