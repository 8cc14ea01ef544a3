#!/usr/bin/env bash
# Every language against ONE private etcd in one run (issue 33, item 2):
# builds what it needs in release (with the bench features), starts one etcd,
# then runs back to back: the Rust core's reference (ffi-c/bench/rust
# core_bench: raw Txn+Delete floor and the async core's lock+unlock) before
# and after each language, and each language's existing benchmark (C
# ffi-c/bench/bench.c, Python bindings-python/bench.py blocking + asyncio,
# Node bindings-node/bench.js, Java LockBenchmark). Prints uncontended
# lock+unlock p50 of each as a ratio to the async core and to the floor
# measured right beside it (the core_bench runs before and after it), and to
# the core and floor its own benchmark measured in its own process where it
# has them. Handoff (8 contenders) per language is not measured by the
# bindings' benches yet.
#
#   bench/languages.sh [ITERATIONS=2000] [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
N=2000; BUILD=1
for a in "$@"; do case "$a" in --no-build) BUILD=0;; [0-9]*) N=$a;; *) echo "usage: $0 [ITERATIONS] [--no-build]" >&2; exit 2;; esac; done
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
  MATURIN_PEP517_ARGS="--features bench" "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
      --force-reinstall --no-deps --no-build-isolation ./bindings-python
  (cd bindings-java && mvn -q -B -DskipTests -Dcargo.features=bench install)
fi
WORK=$(mktemp -d)
gcc -std=c11 -O2 -Iinclude -Iffi-c/tests/c ffi-c/bench/bench.c -o "$WORK/bench_c" -L"$REL" -letcdlock -Wl,-rpath,"$REL"
coproc HARNESS { exec "$REL/etcd-harness"; }
read -r line <&"${HARNESS[0]}"
EP=$(python3 -c 'import json,sys; print(",".join(json.loads(sys.argv[1])["endpoints"]))' "$line")
trap 'eval "exec ${HARNESS[1]}>&-"; wait; rm -rf "$WORK"' EXIT
echo "private etcd at $EP, $N iterations each; load: $(uptime)" >&2
OUT="$WORK/results.jsonl"
core() { "$REL/core_bench" "$EP" "$N" | grep -E 'raw_txn_delete|rust_core_async' | sed "s/^{/{\"at\":$1,/" >> "$OUT"; }
emit() { echo "{\"at\":$1,\"metric\":\"$2\",\"p50_ms\":$3,\"own_core_p50_ms\":$4,\"own_floor_p50_ms\":$5}" >> "$OUT"; }

core 0
"$WORK/bench_c" "$EP" "$N" > "$WORK/c.txt"
emit 1 "C (blocking)" "$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "c_abi_blocking" in l][0]["p50_ms"])' "$WORK/c.txt")" null null
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
echo "Python done; load: $(uptime)" >&2
core 2
(cd bindings-node && ETCDLOCK_ENDPOINTS="$EP" node bench.js --iterations "$N") > "$WORK/node.txt"
read -r ND NDCORE NDFLOOR < <(python3 -c '
import json,sys
r=json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])
print(r["node"]["p50"]/1000, r["core"]["p50"]/1000, r["floorRust"]["p50"]/1000)' "$WORK/node.txt")
emit 3 "Node (Promise)" "$ND" "$NDCORE" "$NDFLOOR"
echo "Node done; load: $(uptime)" >&2
core 3
(cd bindings-java && ETCDLOCK_BENCH_ENDPOINTS="$EP" mvn -q -B -pl etcdlock exec:exec -Dexec.executable=java -Dexec.classpathScope=test \
  "-Dexec.args=-cp %classpath io.etcdlock.LockBenchmark $((N / 2))") > "$WORK/java.txt"
read -r JLK JGD JCORE JFLOOR < <(python3 - "$WORK/java.txt" <<'PY'
import re, sys
v = {}
for l in open(sys.argv[1]):
    m = re.match(r"\s+(.*?)\s+p50\s+([\d.]+) us", l)
    if m:
        v[m.group(1)] = float(m.group(2)) / 1000
g = lambda prefix: [x for k, x in v.items() if k.startswith(prefix)][0]
print(g("etcdlock Lock.lock()"), g("etcdlock acquire()"), g("core lock+unlock"), g("raw floor: native"))
PY
)
emit 4 "Java (Lock.lock/unlock)" "$JLK" "$JCORE" "$JFLOOR"
emit 4 "Java (acquire/close guard)" "$JGD" "$JCORE" "$JFLOOR"
echo "Java done; load: $(uptime)" >&2
core 4
echo "load after: $(uptime)" >&2
cp "$OUT" "${LANGUAGES_JSONL:-/dev/null}" 2>/dev/null || true

python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ref = {}
for r in rows:
    if r["metric"] in ("raw_txn_delete", "rust_core_async"):
        ref.setdefault(r["at"], {})[r["metric"]] = r["p50_ms"]
print("| language, uncontended lock+unlock | p50 | / async core beside it | / floor beside it | / core in its own process | / floor in its own process |")
print("|---|---|---|---|---|---|")
for at in sorted(ref):
    print(f"| reference {at}: Rust core async (core_bench) | {ref[at]['rust_core_async']:.3f} ms | 1.00 | {ref[at]['rust_core_async']/ref[at]['raw_txn_delete']:.2f}x | | |")
worst = 0.0
for r in rows:
    if "own_core_p50_ms" not in r:
        continue
    b, a = ref[r["at"] - 1], ref[r["at"]]
    core = (b["rust_core_async"] + a["rust_core_async"]) / 2
    floor = (b["raw_txn_delete"] + a["raw_txn_delete"]) / 2
    own_c = f"{r['p50_ms']/r['own_core_p50_ms']:.2f}x" if r["own_core_p50_ms"] else ""
    own_f = f"{r['p50_ms']/r['own_floor_p50_ms']:.2f}x" if r["own_floor_p50_ms"] else ""
    worst = max(worst, r["p50_ms"] / core)
    print(f"| {r['metric']} | {r['p50_ms']:.3f} ms | **{r['p50_ms']/core:.2f}x** | {r['p50_ms']/floor:.2f}x | {own_c} | {own_f} |")
print(f"\nworst language / async core (mean of the core runs before and after it): {worst:.2f}x (target <= 1.10x)")
PY
