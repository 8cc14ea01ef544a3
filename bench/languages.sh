#!/usr/bin/env bash
# Every language against ONE private etcd in one run (issue 33, item 2):
# builds what it needs in release (with the bench features), starts one etcd,
# then runs back to back: the Rust core's reference (ffi-c/bench/rust
# core_bench: raw Txn+Delete floor, the async core's lock+unlock, and the
# 8-contender handoff) before and after each language, and each language's
# existing benchmark (C ffi-c/bench/bench.c, Python bindings-python/bench.py
# blocking + asyncio, Node bindings-node/bench.js, Java LockBenchmark).
#
# Prints two tables. Uncontended: each language's lock+unlock p50 as a ratio
# to the async core and to the floor measured right beside it (the mean of the
# core_bench runs before and after it), and to the core and floor its own
# benchmark measured in its own process where it has them. Handoff: 8
# contenders, each its own client (connection and session), on one lock name,
# each looping lock -> unlock for ITERATIONS acquisitions (after a tenth as
# many as warm-up); handoff = when the next holder's lock call returned minus
# when the previous holder called unlock (one definition, the CLI bench's, in
# core_bench and every binding's bench); its p50 as a ratio to core_bench's
# handoff p50 beside it (C: 8 threads; Python: 8 threads, and 8 tasks on one
# asyncio loop; Node: 8 async loops on one event loop; Java: 8 threads with
# Lock.lock()/unlock()). Java runs without jetcd's cases by default
# (-Detcdlock.bench.jetcd=false: no jetcd client, so no gRPC/Netty threads
# sharing the CPUs); --java-jetcd runs LockBenchmark's jetcd cases too.
#
#   bench/languages.sh [ITERATIONS=2000] [--no-build] [--java-jetcd]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
N=2000; BUILD=1; JETCD=false
for a in "$@"; do case "$a" in --no-build) BUILD=0;; --java-jetcd) JETCD=true;; [0-9]*) N=$a;; *) echo "usage: $0 [ITERATIONS] [--no-build] [--java-jetcd]" >&2; exit 2;; esac; done
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
REL="$CARGO_TARGET_DIR/release"
VENV="${ETCDLOCK_PY_VENV:-$ROOT/bindings-python/.venv}"
if [ "$BUILD" = 1 ]; then
  cargo build -q --release -p etcdlock-testkit
  cargo build -q --release -p etcdlock-ffi
  cargo build -q --release -p etcdlock-ffi-bench
  (cd bindings-node && node scripts/build.js --release --bench >/dev/null)
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.16,<2"
  PATH="$VENV/bin:$PATH" MATURIN_PEP517_ARGS="--features bench" "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
      --force-reinstall --no-deps --no-build-isolation ./bindings-python
  (cd bindings-java && mvn -q -B -DskipTests -Dcargo.features=bench install)
fi
WORK=$(mktemp -d)
gcc -std=c11 -O2 -Iinclude -Iffi-c/tests/c ffi-c/bench/bench.c -o "$WORK/bench_c" -pthread -L"$REL" -letcdlock -Wl,-rpath,"$REL"
coproc HARNESS { exec "$REL/etcd-harness"; }
read -r line <&"${HARNESS[0]}"
EP=$(python3 -c 'import json,sys; print(",".join(json.loads(sys.argv[1])["endpoints"]))' "$line")
trap 'eval "exec ${HARNESS[1]}>&-"; wait; rm -rf "$WORK"' EXIT
echo "private etcd at $EP, $N iterations each; load: $(uptime)" >&2
OUT="$WORK/results.jsonl"
core() { "$REL/core_bench" "$EP" "$N" | grep -E 'raw_txn_delete|rust_core_async|rust_core_handoff|thread_wake' | sed "s/^{/{\"at\":$1,/" >> "$OUT"; }
emit() { echo "{\"at\":$1,\"metric\":\"$2\",\"p50_ms\":$3,\"own_core_p50_ms\":$4,\"own_floor_p50_ms\":$5}" >> "$OUT"; }
# emit_handoff AT LANGUAGE P50_MS P99_MS WAIT_P50_MS ACQUISITIONS_PER_S
emit_handoff() { echo "{\"at\":$1,\"handoff\":\"$2\",\"p50_ms\":$3,\"p99_ms\":$4,\"wait_p50_ms\":$5,\"per_s\":$6}" >> "$OUT"; }

core 0
"$WORK/bench_c" "$EP" "$N" > "$WORK/c.txt"
emit 1 "C (blocking)" "$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "c_abi_blocking" in l][0]["p50_ms"])' "$WORK/c.txt")" null null
emit_handoff 1 "C (8 threads)" $(python3 -c '
import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if "c_abi_handoff" in l][0]
print(r["p50_ms"], r["p99_ms"], r["wait_p50_ms"], r["acquisitions_per_s"])' "$WORK/c.txt")
echo "C done; load: $(uptime)" >&2
core 1
"$VENV/bin/python" bindings-python/bench.py -n "$N" --endpoints "$EP" > "$WORK/py.txt"
read -r PY AIO PYCORE PYFLOOR < <(python3 - "$WORK/py.txt" <<'PY'
import sys
v = {}
for l in open(sys.argv[1]):
    p = l.split()
    if len(p) >= 3 and p[0] in ("floor", "core", "python", "asyncio"):
        v[p[0]] = float(p[1]) / 1000
print(v["python"], v["asyncio"], v["core"], v["floor"])
PY
)
emit 2 "Python (blocking)" "$PY" "$PYCORE" "$PYFLOOR"
emit 2 "Python (asyncio)" "$AIO" "$PYCORE" "$PYFLOOR"
py_handoff() { python3 - "$WORK/py.txt" "$1" <<'PY'
import sys
for l in open(sys.argv[1]):
    p = l.split()
    if len(p) == 5 and p[0] == sys.argv[2]:
        print(float(p[1]) / 1000, float(p[2]) / 1000, float(p[3]) / 1000, p[4])
PY
}
emit_handoff 2 "Python blocking (8 threads)" $(py_handoff python-handoff)
emit_handoff 2 "Python asyncio (8 tasks, one loop)" $(py_handoff asyncio-handoff)
echo "Python done; load: $(uptime)" >&2
core 2
(cd bindings-node && ETCDLOCK_ENDPOINTS="$EP" node bench.js --iterations "$N") > "$WORK/node.txt"
read -r ND NDCORE NDFLOOR NH50 NH99 NHW NHR < <(python3 -c '
import json,sys
r=json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])
h=r["handoff"]
print(r["node"]["p50"]/1000, r["core"]["p50"]/1000, r["floorRust"]["p50"]/1000, h["p50"]/1000, h["p99"]/1000, h["waitP50"]/1000, h["perSec"])' "$WORK/node.txt")
emit 3 "Node (Promise)" "$ND" "$NDCORE" "$NDFLOOR"
emit_handoff 3 "Node (8 async loops, one event loop)" "$NH50" "$NH99" "$NHW" "$NHR"
echo "Node done; load: $(uptime)" >&2
core 3
(cd bindings-java && ETCDLOCK_BENCH_ENDPOINTS="$EP" mvn -q -B -pl etcdlock exec:exec -Dexec.executable=java -Dexec.classpathScope=test \
  "-Dexec.args=-Detcdlock.bench.jetcd=$JETCD -Detcdlock.bench.handoff=$N -Detcdlock.bench.contendedSeconds=0 -cp %classpath io.etcdlock.LockBenchmark $((N / 2))") > "$WORK/java.txt"
read -r JLK JGD JCORE JFLOOR JH50 JH99 JHW JHR < <(python3 - "$WORK/java.txt" <<'PY'
import re, sys
v = {}
for l in open(sys.argv[1]):
    m = re.match(r"\s+(.*?)\s+p50\s+([\d.]+) us(?:\s+p99\s+([\d.]+) us\s+wait p50\s+([\d.]+) us\s+([\d.]+) acquisitions/s)?", l)
    if m:
        v[m.group(1)] = [float(x) / 1000 for x in m.group(2, 3, 4) if x] + ([float(m.group(5))] if m.group(5) else [])
g = lambda prefix: [x for k, x in v.items() if k.startswith(prefix)][0]
print(g("etcdlock Lock.lock()")[0], g("etcdlock acquire()")[0], g("core lock+unlock")[0], g("raw floor: native")[0], *g("handoff:"))
PY
)
JNOTE=""; [ "$JETCD" = true ] && JNOTE=", jetcd's cases interleaved"
emit 4 "Java (Lock.lock/unlock$JNOTE)" "$JLK" "$JCORE" "$JFLOOR"
emit 4 "Java (acquire/close guard$JNOTE)" "$JGD" "$JCORE" "$JFLOOR"
emit_handoff 4 "Java (8 threads, Lock.lock/unlock)" "$JH50" "$JH99" "$JHW" "$JHR"
echo "Java done; load: $(uptime)" >&2
core 4
echo "load after: $(uptime)" >&2
cp "$OUT" "${LANGUAGES_JSONL:-/dev/null}" 2>/dev/null || true

python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ref = {}
for r in rows:
    if r.get("metric") in ("raw_txn_delete", "rust_core_async", "rust_core_handoff", "thread_wake"):
        ref.setdefault(r["at"], {})[r["metric"]] = r
beside = lambda at, m: (ref[at - 1][m]["p50_ms"] + ref[at][m]["p50_ms"]) / 2
print("| language, uncontended lock+unlock | p50 | / async core beside it | / floor beside it | / core in its own process | / floor in its own process |")
print("|---|---|---|---|---|---|")
for at in sorted(ref):
    c, f = ref[at]["rust_core_async"]["p50_ms"], ref[at]["raw_txn_delete"]["p50_ms"]
    print(f"| reference {at}: Rust core async (core_bench) | {c:.3f} ms | 1.00 | {c/f:.2f}x | | |")
worst = 0.0
for r in rows:
    if "own_core_p50_ms" not in r:
        continue
    core, floor = beside(r["at"], "rust_core_async"), beside(r["at"], "raw_txn_delete")
    own_c = f"{r['p50_ms']/r['own_core_p50_ms']:.2f}x" if r["own_core_p50_ms"] else ""
    own_f = f"{r['p50_ms']/r['own_floor_p50_ms']:.2f}x" if r["own_floor_p50_ms"] else ""
    worst = max(worst, r["p50_ms"] / core)
    print(f"| {r['metric']} | {r['p50_ms']:.3f} ms | **{r['p50_ms']/core:.2f}x** | {r['p50_ms']/floor:.2f}x | {own_c} | {own_f} |")
print()
print("| 8 contenders (a client each), one lock: handoff | handoff p50 | / core handoff beside it | handoff p99 | lock wait p50 | acquisitions/s |")
print("|---|---|---|---|---|---|")
for at in sorted(ref):
    h = ref[at]["rust_core_handoff"]
    print(f"| reference {at}: Rust core, 8 tasks (core_bench) | {h['p50_ms']:.3f} ms | 1.00 | {h['p99_ms']:.3f} ms | {h['wait_p50_ms']:.3f} ms | {h['acquisitions_per_s']:.0f} |")
worst_h = 0.0
for r in rows:
    if "handoff" not in r:
        continue
    core = beside(r["at"], "rust_core_handoff")
    worst_h = max(worst_h, r["p50_ms"] / core)
    print(f"| {r['handoff']} | {r['p50_ms']:.3f} ms | **{r['p50_ms']/core:.2f}x** | {r['p99_ms']:.3f} ms | {r['wait_p50_ms']:.3f} ms | {float(r['per_s']):.0f} |")
wakes = sorted(ref[at]["thread_wake"]["p50_ms"] * 1000 for at in ref if "thread_wake" in ref[at])
if wakes:
    print(f"\none thread waking another on this machine (core_bench thread_wake, each reference run): p50 {', '.join(f'{w:.1f}' for w in wakes)} us;")
    print("a binding's call pays at least one per completion (uncontended lock+unlock: two; handoff: one, into a busy machine), the core's tasks none")
    w = wakes[len(wakes) // 2]
    for r in rows:
        if "own_core_p50_ms" in r:
            extra = (r["p50_ms"] - beside(r["at"], "rust_core_async")) * 1000
            print(f"  {r['metric']}: {extra:+.0f} us over the core per lock+unlock = {extra / w:.1f} wake-ups")
        elif "handoff" in r:
            extra = (r["p50_ms"] - beside(r["at"], "rust_core_handoff")) * 1000
            print(f"  {r['handoff']} handoff: {extra:+.0f} us over the core = {extra / w:.1f} wake-ups")
print(f"\nworst language / async core, uncontended p50 (mean of the core runs before and after it): {worst:.2f}x (target <= 1.10x)")
print(f"worst language / core, 8-contender handoff p50 (mean of the core runs before and after it): {worst_h:.2f}x (target <= 1.10x)")
PY
