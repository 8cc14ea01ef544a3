#!/usr/bin/env bash
# Memory footprint of etcdlock as users install it (from dist/, built by
# scripts/dist.sh): RSS a process gains by importing etcdlock, then by
# connecting and holding one lock, in Python, Node and the JVM (for the JVM,
# with the 32 MB heap pre-touched into the baseline, so the figure is native
# memory: the library, its runtime threads, JNI, class metadata and JIT, not
# heap pages the measurement dirties). Target: <= 8 MB each for import + one
# held lock. Prints a markdown table and one JSON line per language.
#   bench/footprint.sh [--dist DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIST=$ROOT/dist
[ "${1:-}" = --dist ] && DIST=$(realpath "$2")
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\([^"]*\)".*/\1/p' Cargo.toml)
cargo build -q -p etcdlock-testkit
work=$(mktemp -d)
coproc ETCD { "$CARGO_TARGET_DIR/debug/etcd-harness"; }
etcd_w=${ETCD[1]} etcd_pid=$ETCD_PID
trap 'eval "exec $etcd_w>&-"; wait "$etcd_pid" 2>/dev/null; rm -rf "$work"' EXIT
read -r info <&"${ETCD[0]}"
EP=$(python3 -c 'import json,sys; print(",".join(json.loads(sys.argv[1])["endpoints"]))' "$info")
LIMIT_KB=$((8 * 1024))
rows=()

# Each probe prints: "<baseline kB> <after import kB> <holding one lock kB>".
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --no-index --find-links "$DIST" --only-binary :all: etcdlock
py=$("$work/venv/bin/python" - "$EP" <<'PY'
import gc, sys
def rss():
    for l in open("/proc/self/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])
gc.collect(); base = rss()
import etcdlock
gc.collect(); imp = rss()
client = etcdlock.Client(endpoints=sys.argv[1].split(","), ttl=10)
guard = client.acquire("footprint-python", timeout=10)
gc.collect(); held = rss()
guard.unlock(); client.close()
print(base, imp, held)
PY
)
rows+=("python $py")

mkdir -p "$work/node" && (cd "$work/node" && npm init -y >/dev/null && npm install --offline --no-audit --no-fund -s "$DIST/etcdlock-$version.tgz")
node_out=$(cd "$work/node" && node --expose-gc - "$EP" <<'JS'
const fs = require('node:fs');
const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]);
(async () => {
  global.gc(); const base = rss();
  const { Client } = require('etcdlock');
  global.gc(); const imp = rss();
  const client = await Client.connect({ endpoints: process.argv[2].split(','), ttl: 10 });
  const lock = await client.lock('footprint-node', { timeout: 10000 });
  global.gc(); const held = rss();
  await lock.unlock(); await client.close();
  console.log(base, imp, held);
})();
JS
)
rows+=("node $node_out")

jar=$DIST/maven/io/etcdlock/etcdlock/$version/etcdlock-$version.jar
slf4j=$(find "$HOME/.m2/repository/org/slf4j/slf4j-api" -name 'slf4j-api-*.jar' | sort | tail -n 1)
mkdir -p "$work/java"
cat >"$work/java/Footprint.java" <<'JAVA'
import io.etcdlock.EtcdLockClient;
import io.etcdlock.LockGuard;
import java.nio.file.*;
import java.time.Duration;
public class Footprint {
  static long rss() throws Exception {
    for (String l : Files.readAllLines(Paths.get("/proc/self/status")))
      if (l.startsWith("VmRSS:")) return Long.parseLong(l.replaceAll("[^0-9]", ""));
    return -1;
  }
  static long settled() throws Exception { System.gc(); Thread.sleep(200); return rss(); }
  public static void main(String[] a) throws Exception {
    // Warm the JDK classes the measurement itself uses, so they are in the baseline.
    Duration.ofSeconds(1); String.join(",", a); settled();
    long base = settled();
    Class.forName("io.etcdlock.NativeLibrary").getDeclaredMethod("load").invoke(null);
    long imp = settled();
    try (EtcdLockClient c = EtcdLockClient.builder().endpoints(a[0].split(",")).ttl(Duration.ofSeconds(10)).build();
         LockGuard g = c.newLock("footprint-java").acquire(Duration.ofSeconds(10))) {
      long held = settled();
      System.out.println(base + " " + imp + " " + held);
    }
  }
}
JAVA
javac -d "$work/java" -cp "$jar:$slf4j" "$work/java/Footprint.java"
java_out=$(java -Xms32m -Xmx32m -XX:+UseSerialGC -XX:+AlwaysPreTouch -cp "$work/java:$jar:$slf4j" Footprint "$EP" 2>/dev/null | tail -n 1)
rows+=("jvm $java_out")

echo "| language | baseline RSS | + import | + connect and hold one lock | total added | <= 8 MB |"
echo "|---|---|---|---|---|---|"
status=0
for r in "${rows[@]}"; do
  set -- $r
  lang=$1 base=$2 imp=$3 held=$4
  added=$((held - base))
  verdict=yes; [ "$added" -le "$LIMIT_KB" ] || { verdict=NO; status=1; }
  printf '| %s | %.1f MB | %+.1f MB | %+.1f MB | %.1f MB | %s |\n' "$lang" "$(bc -l <<<"$base/1024")" \
    "$(bc -l <<<"($imp-$base)/1024")" "$(bc -l <<<"($held-$imp)/1024")" "$(bc -l <<<"$added/1024")" "$verdict"
  jsonl+=("{\"bench\":\"footprint\",\"language\":\"$lang\",\"baseline_kb\":$base,\"import_kb\":$((imp - base)),\"hold_kb\":$((held - imp)),\"added_kb\":$added}")
done
printf '%s\n' "${jsonl[@]}"
exit $status
