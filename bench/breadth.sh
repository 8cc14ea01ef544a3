#!/usr/bin/env bash
# Breadth: many clients locking many distinct names at once (issue 33, item 3),
# against ONE private etcd in one run: etcd's own write ceiling for the same
# requests (raw Txn+Delete rounds on as many connections, alternating with
# etcdlock in the same process), etcdlock, then etcd's Go concurrency.Mutex
# doing the same. Usage: bench/breadth.sh [--clients N] [--names M] [--duration S] [--repeat R]
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=100; NAMES=1000; DURATION=4; REPEAT=3
while [ $# -gt 0 ]; do case "$1" in
  --clients) CLIENTS=$2; shift 2;; --repeat) REPEAT=$2; shift 2;; --names) NAMES=$2; shift 2;; --duration) DURATION=$2; shift 2;;
  *) echo "usage: $0 [--clients N] [--names M] [--duration S] [--repeat R]" >&2; exit 2;; esac; done
cargo build --quiet --release -p etcdlock-cli --features etcdlock-cli/bench -p etcdlock-testkit
(cd bench/go-mutex && GOFLAGS=-mod=mod go build -o ../../target/release/go-mutex .)
coproc HARNESS { exec target/release/etcd-harness; }
read -r line <&"${HARNESS[0]}"
EP=$(python3 -c 'import json,sys; print(",".join(json.loads(sys.argv[1])["endpoints"]))' "$line")
OUT=$(mktemp)
trap 'eval "exec ${HARNESS[1]}>&-"; wait; rm -f "$OUT"' EXIT
echo "private etcd at $EP; load: $(uptime)" >&2
# REPEAT times: etcdlock (two pairs of etcd-ceiling / etcdlock phases, alternating
# in one process), then Go's Mutex. The machine is shared: every ratio is to
# the ceiling measured right beside it, and the table gives each run.
for r in $(seq "$REPEAT"); do
  target/release/etcdlock --endpoints "$EP" bench --use-endpoints --json --breadth --clients "$CLIENTS" --names "$NAMES" --duration "${DURATION}s" | sed "s/^{/{\"repeat\":$r,/" >> "$OUT"
  target/release/go-mutex -endpoints "$EP" -breadth-clients "$CLIENTS" -breadth-names "$NAMES" -duration "${DURATION}s" | sed "s/^{/{\"repeat\":$r,/" >> "$OUT"
  echo "repeat $r/$REPEAT done; load: $(uptime)" >&2
done
# etcd's ceiling once more after the last Go run, so each Go run has a ceiling on both sides.
target/release/etcdlock --endpoints "$EP" bench --use-endpoints --json --breadth --clients "$CLIENTS" --names "$NAMES" --duration "${DURATION}s" | sed "s/^{/{\"repeat\":$((REPEAT + 1)),/" >> "$OUT"
echo "load after: $(uptime)" >&2
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ceil = [r for r in rows if r["metric"] == "breadth_etcd_ceiling"]
mine = [r for r in rows if r["metric"] == "breadth_etcdlock"]
gos = [r for r in rows if r["metric"] == "go_mutex_breadth"]
def ceil_near(rep):
    # The ceiling phases just before (last of repeat rep) and after (first of repeat rep+1) a Go run.
    b = [r for r in ceil if r["repeat"] == rep][-1:] + [r for r in ceil if r["repeat"] == rep + 1][:1]
    return sum(r["acquisitions_per_s"] for r in b) / len(b)
print(f"| run ({gos[0]['clients']} clients x {gos[0]['names']} names, random, {gos[0]['seconds']:.0f} s phases) | acquisitions/s | etcd's ceiling beside it | ratio | lock p50 / p99 | lock+unlock p50 / p99 | client CPU per acquisition | etcd CPU per acquisition | etcd KV requests per acquisition | errors |")
print("|---|---|---|---|---|---|---|---|---|---|")
def us(v): return "n/a" if v is None else f"{v:.0f} us"
def per(v): return "n/a" if v is None else f"{v:.2f}"
ours_r, go_r = [], []
for rep in sorted({r["repeat"] for r in gos}):
    for r in [m for m in mine if m["repeat"] == rep]:
        c = [x for x in ceil if x["repeat"] == rep and x["round"] == r["round"]][0]
        ours_r.append(r["ratio_to_ceiling"])
        print(f"| etcdlock {rep}.{r['round']} | {r['acquisitions_per_s']:.0f} | {c['acquisitions_per_s']:.0f} (CPU {c['client_cpu_us_per_acquisition']:.0f} us) | **{r['ratio_to_ceiling']:.2f}** | {r['acquire_p50_ms']:.1f} / {r['acquire_p99_ms']:.1f} ms | {r['cycle_p50_ms']:.1f} / {r['cycle_p99_ms']:.1f} ms | {r['client_cpu_us_per_acquisition']:.0f} us | {us(r.get('etcd_cpu_us_per_acquisition'))} (ceiling {us(c.get('etcd_cpu_us_per_acquisition'))}) | {per(r.get('kv_requests_per_acquisition'))} | {r['errors']} |")
    g = [x for x in gos if x["repeat"] == rep][0]
    c = ceil_near(rep)
    go_r.append(g["acquisitions_per_s"] / c)
    print(f"| Go Mutex {rep} | {g['acquisitions_per_s']:.0f} | {c:.0f} (mean of the phases either side) | **{g['acquisitions_per_s']/c:.2f}** | {g['acquire_p50_ms']:.1f} / {g['acquire_p99_ms']:.1f} ms | {g['cycle_p50_ms']:.1f} / {g['cycle_p99_ms']:.1f} ms | {g['client_cpu_us_per_acquisition']:.0f} us | {us(g.get('etcd_cpu_us_per_acquisition'))} | {per(g.get('kv_requests_per_acquisition'))} | {g['errors']} |")
print(f"\netcdlock: median {statistics.median(ours_r):.2f} of etcd's ceiling over {len(ours_r)} phases (target >= 0.70); "
      f"Go's Mutex: median {statistics.median(go_r):.2f} over {len(go_r)} runs")
PY
