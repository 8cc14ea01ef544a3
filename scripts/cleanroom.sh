#!/usr/bin/env bash
# Clean-room install test of what scripts/dist.sh put in dist/ (it does not
# rebuild them): for each artifact a fresh venv / npm project / Maven project /
# CMake project, on a PATH with no cargo, rustc or protoc (and for Python, Node
# and Java no C compiler either), installs ONLY from dist/ and runs
# lock -> guarded put -> guarded get -> unlock -> try-lock against a real etcd
# started by the testkit harness; etcdctl then reads the value back. Also: no
# shipped binary needs a GLIBC_ symbol above 2.17, and `auditwheel show`
# accepts the wheel as manylinux2014. And the aarch64 artifacts under
# qemu-user (scripts/cleanroom_arm64.sh): smoke test and conformance table,
# run beside the C and CLI checks (their lines are printed after them).
#   scripts/cleanroom.sh [--dist DIR]      (env: CARGO_TARGET_DIR for the harness)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIST=$ROOT/dist
[ "${1:-}" = --dist ] && DIST=$(realpath "$2")
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\([^"]*\)".*/\1/p' Cargo.toml)
major=${version%%.*}
fail=0; passed=0
ok() { echo "  ok   $*"; passed=$((passed + 1)); }
bad() { echo "  FAIL $*"; fail=$((fail + 1)); }
whl=$DIST/etcdlock-$version-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
for f in "${whl#"$DIST"/}" "etcdlock-$version-cp39-abi3-manylinux_2_17_aarch64.manylinux2014_aarch64.whl" \
  "etcdlock-$version.tar.gz" "etcdlock-$version.tgz" "etcdlock-linux-x64-gnu-$version.tgz" \
  "etcdlock-linux-arm64-gnu-$version.tgz" "etcdlock-c-$version-x86_64-linux-gnu.tar.gz" \
  "etcdlock-c-$version-aarch64-linux-gnu.tar.gz" "etcdlock-cli-$version-x86_64-linux-gnu.tar.gz" \
  "etcdlock-cli-$version-aarch64-linux-gnu.tar.gz" \
  "maven/io/etcdlock/etcdlock/$version/etcdlock-$version.jar" \
  "maven/io/etcdlock/etcdlock-spring/$version/etcdlock-spring-$version.jar" \
  "maven/io/etcdlock/etcdlock-test/$version/etcdlock-test-$version.jar" \
  "maven/io/etcdlock/etcdlock-shedlock/$version/etcdlock-shedlock-$version.jar" \
  "maven/io/etcdlock/etcdlock-reactor/$version/etcdlock-reactor-$version.jar" \
  "maven/io/etcdlock/etcdlock-kotlin/$version/etcdlock-kotlin-$version.jar"; do
  [ -s "$DIST/$f" ] || { echo "cleanroom: $DIST/$f missing; run scripts/dist.sh first" >&2; exit 1; }
done

# The harness is a test tool, built (debug) outside the clean room.
cargo build -q -p etcdlock-testkit || exit 1
HARNESS=$CARGO_TARGET_DIR/debug/etcd-harness
work=$(mktemp -d)
coproc ETCD { "$HARNESS"; }
etcd_w=${ETCD[1]} etcd_pid=$ETCD_PID
# Closing the harness's stdin (the coproc's write end) stops etcd.
cleanup() {
  [ -f "$work/registries/release.ecos" ] && bash scripts/release.sh --stop "$work/registries" >/dev/null 2>&1
  eval "exec $etcd_w>&-"; wait "$etcd_pid" 2>/dev/null; rm -rf "$work"
}
trap cleanup EXIT
read -r info <&"${ETCD[0]}" || { echo "cleanroom: the etcd harness printed nothing" >&2; exit 1; }
EP=$(python3 -c 'import json,sys; print(",".join(json.loads(sys.argv[1])["endpoints"]))' "$info")
echo "etcd at $EP"

# The clean PATH (scripts/cleanpath.sh): NOCC has no compilers, cargo, rustc,
# protoc; WITHCC adds cc, gcc, ld, as, cmake; python3 is the real interpreter.
# shellcheck source=scripts/cleanpath.sh
source scripts/cleanpath.sh
cleanpath "$work" || exit 1
etcdget() { etcdctl --endpoints="$EP" get "$1" --print-value-only; }

echo "== shipped binaries: newest GLIBC_ symbol (want <= 2.17)"
mkdir -p "$work/c" "$work/cli" "$work/whl" "$work/npm"
tar -C "$work/c" -xzf "$DIST/etcdlock-c-$version-x86_64-linux-gnu.tar.gz"
tar -C "$work/cli" -xzf "$DIST/etcdlock-cli-$version-x86_64-linux-gnu.tar.gz"
(cd "$work/whl" && unzip -q "$whl")
tar -C "$work/npm" -xzf "$DIST/etcdlock-linux-x64-gnu-$version.tgz"
unzip -q -o "$DIST/maven/io/etcdlock/etcdlock/$version/etcdlock-$version.jar" 'native/*' -d "$work/jar"
for f in "$work/c/etcdlock-$version/lib/libetcdlock.so.$version" "$work/cli/etcdlock-cli-$version/bin/etcdlock" \
  "$work/whl/etcdlock/_etcdlock.abi3.so" "$work/npm/package/etcdlock.linux-x64-gnu.node" \
  "$work/jar/native/linux-x86_64/libetcdlock_jni.so"; do
  max=$(objdump -T "$f" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
  debug=$(objdump -h "$f" | grep -c '\.debug_')
  if [ "$(printf '%s\n2.17\n' "$max" | sort -V | tail -n 1)" = 2.17 ] && [ "$debug" -eq 0 ]; then
    ok "$(basename "$f"): GLIBC_$max, no debuginfo, $(du -k "$f" | cut -f1) kB"
  else
    bad "$(basename "$f"): GLIBC_$max, $debug debug sections"
  fi
done
if out=$(auditwheel show "$whl" 2>&1) && grep -q 'manylinux_2_17_x86_64' <<<"$out"; then
  ok "auditwheel show: $(tr '\n' ' ' <<<"$out" | grep -o 'consistent with the following platform tag: *"[^"]*"' | head -n 1)"
else
  bad "auditwheel show: $out"
fi

# The registries: what a release publishes, published here with the release's
# commands (scripts/release.sh --local: each registry's own checks, then twine
# upload, npm publish, mvn deploy, cargo publish to local servers on
# 127.0.0.1: pypiserver, Verdaccio, nginx with WebDAV, cargo-http-registry),
# then installed by each ecosystem's ordinary command in a fresh project with
# no Rust, protoc or C compiler (cargo: Rust and a C compiler, no protoc), each
# taking a lock against the etcd above (scripts/registry/<eco>.sh install).
# CLEANROOM_REGISTRIES picks them (default: every scripts/registry/<eco>.sh).
ecos=${CLEANROOM_REGISTRIES:-}
if [ -z "$ecos" ]; then
  for e in pypi npm maven cargo; do [ -f "scripts/registry/$e.sh" ] && ecos=${ecos:+$ecos,}$e; done
fi
echo "== registries ($ecos): scripts/release.sh --local, each registry's checks, then publish with the release's commands"
reg=$work/registries
# Each step bounded (timeout kills its whole process group, the registries it
# started included; --stop below cleans up the rest): a registry, a download
# or a signing step that hangs fails here, with its log, instead of holding
# the test run (release.sh takes about 3 minutes, an install about 1).
if timeout -k 10 1500 bash scripts/release.sh --local "$DIST" "$reg" --keep --only "$ecos" >"$work/release.log" 2>&1; then
  sed 's/^/    /' "$work/release.log"   # each registry's checks and publish, as a release runs them
  ok "release.sh --local: $(grep -c '' "$work/release.log") lines, $(tail -n 1 "$work/release.log")"
  IFS=, read -r -a eco_list <<<"$ecos"
  for e in "${eco_list[@]}"; do
    echo "== $e: install from the local registry with the ordinary command, take a lock (scripts/registry/$e.sh install)"
    rc=0; timeout -k 10 900 bash "scripts/registry/$e.sh" install "$reg" "$EP" >"$work/install-$e.log" 2>&1 || rc=$?
    [ "$rc" -ne 124 ] || echo "  FAIL $e install did not end in 900 s (killed)" >>"$work/install-$e.log"
    cat "$work/install-$e.log"
    n_ok=$(grep -c '^  ok ' "$work/install-$e.log"); n_bad=$(grep -c '^  FAIL ' "$work/install-$e.log")
    passed=$((passed + n_ok)); fail=$((fail + n_bad))
    [ "$rc" -eq 0 ] && [ "$n_ok" -gt 0 ] || bad "$e install: exit $rc, $n_ok ok lines"
  done
else
  bad "release.sh --local ($ecos) (exit $?: 124 is its 1500 s bound)"; tail -n 60 "$work/release.log"
fi
bash scripts/release.sh --stop "$reg" >/dev/null 2>&1 || bad "release.sh --stop"
rm -f "$reg/release.ecos"

echo "== Node: fresh npm project, npm install of the package and this platform's, offline (no cargo, rustc, protoc, cc)"
mkdir -p "$work/nodeapp"
cat >"$work/nodeapp/main.js" <<'JS'
const { Client } = require('etcdlock');
(async () => {
  const client = await Client.connect({ endpoints: process.argv[2].split(','), ttl: 10 });
  const lock = await client.lock('cleanroom-node', { timeout: 10000 });
  const token = String(lock.fencingToken);
  await lock.put('cleanroom/node', token);
  if ((await lock.get('cleanroom/node', 'utf8')) !== token) throw new Error('guarded get mismatch');
  await lock.unlock();
  const again = await client.tryLock('cleanroom-node');
  if (!again) throw new Error('unlock did not release');
  await again.unlock();
  await client.close();
  console.log('ok', token);
})().catch((e) => { console.error(e); process.exit(1); });
JS
if (cd "$work/nodeapp" && PATH=$NOCC npm init -y >/dev/null &&
    PATH=$NOCC npm install --offline --no-audit --no-fund --ignore-scripts=false -s "$DIST/etcdlock-$version.tgz" \
      "$DIST/etcdlock-linux-x64-gnu-$version.tgz") &&
  out=$(cd "$work/nodeapp" && PATH=$NOCC node main.js "$EP") && [ "$(etcdget cleanroom/node)" = "${out#ok }" ] &&
  # The package's import condition: an ES module gets the same Client.
  esm=$(cd "$work/nodeapp" && PATH=$NOCC node --input-type=module -e \
    "import { Client } from 'etcdlock'; import { createRequire } from 'node:module';
     const same = Client === createRequire(import.meta.url)('etcdlock').Client;
     console.log(same ? 'esm ok' : 'esm differs', import.meta.resolve('etcdlock').split('/').pop());") &&
  [ "$esm" = "esm ok index.mjs" ]; then
  ok "node: $out; $esm"
else
  bad "node"
fi

echo "== Java: fresh Maven project, repository = dist/maven, the version from the BOM (no cargo, rustc, protoc, cc)"
# A fresh local repository (plugins hard-linked from ~/.m2, io/etcdlock left out)
# so etcdlock can only come from dist/maven.
m2=$work/m2
if [ -d "$HOME/.m2/repository" ]; then cp -al "$HOME/.m2/repository" "$m2" 2>/dev/null || cp -a "$HOME/.m2/repository" "$m2"; fi
mkdir -p "$m2"; rm -rf "$m2/io/etcdlock"
app=$work/javaapp; mkdir -p "$app/src/main/java/demo"
cat >"$app/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId><artifactId>cleanroom</artifactId><version>1</version>
  <properties><maven.compiler.release>11</maven.compiler.release><project.build.sourceEncoding>UTF-8</project.build.sourceEncoding></properties>
  <repositories><repository><id>etcdlock</id><url>file://$DIST/maven</url></repository></repositories>
  <dependencyManagement><dependencies><dependency><groupId>io.etcdlock</groupId><artifactId>etcdlock-bom</artifactId><version>$version</version><type>pom</type><scope>import</scope></dependency></dependencies></dependencyManagement>
  <dependencies><dependency><groupId>io.etcdlock</groupId><artifactId>etcdlock</artifactId></dependency></dependencies>
  <build><plugins><plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId><version>3.11.0</version></plugin></plugins></build>
</project>
POM
cat >"$app/src/main/java/demo/Main.java" <<'JAVA'
package demo;
import io.etcdlock.EtcdLockClient;
import io.etcdlock.LockGuard;
import java.time.Duration;
public class Main {
  public static void main(String[] args) {
    long token;
    try (EtcdLockClient client = EtcdLockClient.builder().endpoints(args[0].split(",")).ttl(Duration.ofSeconds(10)).build()) {
      LockGuard guard = client.newLock("cleanroom-java").acquire(Duration.ofSeconds(10));
      token = guard.fencingToken();
      guard.put("cleanroom/java", Long.toString(token));
      if (!Long.toString(token).equals(guard.get("cleanroom/java"))) throw new IllegalStateException("guarded get mismatch");
      guard.unlock();
      LockGuard again = client.newLock("cleanroom-java").tryAcquire().orElseThrow(() -> new IllegalStateException("unlock did not release"));
      again.unlock();
    }
    System.out.println("ok " + token);
  }
}
JAVA
if (cd "$app" && PATH=$NOCC mvn -B -q -Dmaven.repo.local="$m2" package dependency:build-classpath -Dmdep.outputFile=cp.txt >"$work/mvn.log" 2>&1) &&
  grep -q "$m2/io/etcdlock/etcdlock/$version/etcdlock-$version.jar" "$app/cp.txt" &&
  out=$(cd "$app" && PATH=$NOCC java -cp "target/classes:$(cat cp.txt)" demo.Main "$EP") && [ "$(etcdget cleanroom/java)" = "${out#ok }" ]; then
  ok "java: $out"
else
  bad "java"; tail -30 "$work/mvn.log"
fi

# The aarch64 half (under qemu-user, one core) runs beside the C and CLI
# checks below (valgrind on the other core); its lines are printed after
# them and counted with the rest. It needs the Node and Java apps above.
arm_log=$work/arm64.log
# shellcheck source=scripts/cleanroom_arm64.sh
(source scripts/cleanroom_arm64.sh) >"$arm_log" 2>&1 &
arm_pid=$!

echo "== C: CMake find_package(etcdlock) and pkg-config from the unpacked tarball (no cargo, rustc, protoc)"
prefix=$work/c/etcdlock-$version
capp=$work/capp; mkdir -p "$capp"
cp examples/c/lock_token.c "$capp/"
cat >"$capp/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.13)
project(cleanroom C)
find_package(etcdlock 0.1 REQUIRED)
add_executable(lock_token lock_token.c)
target_link_libraries(lock_token PRIVATE etcdlock::etcdlock)
add_executable(lock_token_static lock_token.c)
target_link_libraries(lock_token_static PRIVATE etcdlock::etcdlock_static)
CM
if [ "$(readlink "$prefix/lib/libetcdlock.so")" = "libetcdlock.so.$major" ] &&
  [ "$(readlink "$prefix/lib/libetcdlock.so.$major")" = "libetcdlock.so.$version" ]; then
  ok "c: symlinks libetcdlock.so -> .so.$major -> .so.$version"
else
  bad "c: symlinks"
fi
run_c() { # name binary [want NEEDED libetcdlock]
  local out
  if out=$(ETCDLOCK_ENDPOINTS=$EP "$2" "cleanroom-c-$1") && grep -q "fencing token" <<<"$out"; then
    local needed; needed=$(objdump -p "$2" | awk '/NEEDED/ && /etcdlock/ {print $2}')
    if [ "$needed" = "${3:-}" ]; then ok "c/$1: ${out} (NEEDED ${needed:-no libetcdlock})"; else bad "c/$1: NEEDED '$needed', want '${3:-}'"; fi
  else
    bad "c/$1: $out"
  fi
}
if (cd "$capp" && PATH=$WITHCC cmake -S . -B build -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1 &&
    PATH=$WITHCC cmake --build build >>"$work/cmake.log" 2>&1); then
  run_c cmake-shared "$capp/build/lock_token" "libetcdlock.so.$major"
  run_c cmake-static "$capp/build/lock_token_static" ""
else
  bad "c: cmake"; tail -20 "$work/cmake.log"
fi
# The README's link lines, as written.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
if (cd "$capp" && PATH=$WITHCC cc lock_token.c $(pkg-config --cflags --libs etcdlock) -o pc_shared); then
  run_c pkg-config "$capp/pc_shared" "libetcdlock.so.$major"
else bad "c: pkg-config shared link"; fi
if (cd "$capp" && PATH=$WITHCC cc lock_token.c $(pkg-config --static --cflags --libs etcdlock-static) -o pc_static); then
  run_c pkg-config-static "$capp/pc_static" ""
else bad "c: pkg-config static link"; fi
# The package README's program (its ```c block), as written, linked as its README says.
awk '/^```c$/{o=1; next} /^```/{o=0} o' "$prefix/README.md" >"$capp/readme_app.c"
if [ -s "$capp/readme_app.c" ] && (cd "$capp" && PATH=$WITHCC cc readme_app.c $(pkg-config --cflags --libs etcdlock) -o readme_app); then
  run_c readme-program "$capp/readme_app" "libetcdlock.so.$major"
else bad "c: the package README's program"; fi
# Without --static too (the package's Libs carry what std needs).
if (cd "$capp" && PATH=$WITHCC cc lock_token.c $(pkg-config --cflags --libs etcdlock-static) -o pc_static2); then
  run_c pkg-config-static-plain "$capp/pc_static2" ""
else bad "c: pkg-config --libs etcdlock-static (no --static) link"; fi
# The examples the package ships build as its README says: make (pkg-config) and CMake.
ex=$work/examples; cp -r "$prefix/share/doc/etcdlock/examples" "$ex"
if (PATH=$WITHCC make -s -C "$ex" >"$work/make.log" 2>&1); then
  run_c examples-make "$ex/lock_token" "libetcdlock.so.$major"
  run_c examples-make-static "$ex/lock_token_static" ""
else bad "c: the shipped examples' Makefile"; tail -20 "$work/make.log"; fi
if (cd "$ex" && PATH=$WITHCC cmake -S . -B build -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake2.log" 2>&1 &&
    PATH=$WITHCC cmake --build build >>"$work/cmake2.log" 2>&1); then
  run_c examples-cmake "$ex/build/lock_token" "libetcdlock.so.$major"
else bad "c: the shipped examples' CMakeLists.txt"; tail -20 "$work/cmake2.log"; fi
# The static archive exports etcdlock_* only; man pages and debug info are there.
globals() { readelf -sW "$1" 2>/dev/null | awk '($5 == "GLOBAL" || $5 == "WEAK") && $7 != "UND" {print $8}' | sort -u; }
n_foreign=$(globals "$prefix/lib/libetcdlock.a" | grep -vc '^etcdlock_' || true)
n_ours=$(globals "$prefix/lib/libetcdlock.a" | grep -c '^etcdlock_' || true)
if [ "$n_foreign" -eq 0 ] && [ "$n_ours" -gt 30 ]; then ok "c: libetcdlock.a exports $n_ours symbols, all etcdlock_*"; else bad "c: libetcdlock.a exports $n_foreign foreign symbols"; fi
if grep -q '^\.SS etcdlock_client_connect$' "$prefix/share/man/man3/etcdlock.3" &&
  [ -f "$prefix/share/man/man3/etcdlock_lock.3" ]; then ok "c: man 3 etcdlock (and etcdlock_lock.3, ...)"; else bad "c: man pages"; fi
id=$(readelf -n "$prefix/lib/libetcdlock.so.$version" | awk '/Build ID/ {print $3}')
dbg=$prefix/lib/debug/.build-id/${id:0:2}/${id:2}.debug
if [ -n "$id" ] && [ -s "$dbg" ] && readelf -S "$dbg" | grep -q debug_line; then
  ok "c: debug info apart, by build id ($(du -k "$dbg" | cut -f1) kB)"
else bad "c: no debug info for build id '$id'"; fi
if [ -f "$prefix/README.md" ] && ! grep -qi 'needs rust' "$prefix/README.md" && [ -f "$prefix/LICENSE" ]; then
  ok "c: the package's own README and LICENSE"
else bad "c: README/LICENSE"; fi
unset PKG_CONFIG_PATH
if command -v valgrind >/dev/null; then
  cat >"$capp/shutdown.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <etcdlock.h>
int main(void) {
    etcdlock_options o; etcdlock_options_init(&o, sizeof o);
    o.endpoints = getenv("ETCDLOCK_ENDPOINTS"); o.ttl_secs = 10;
    etcdlock_client *c = NULL; etcdlock_guard *g = NULL;
    if (etcdlock_client_connect(&o, &c) || etcdlock_lock(c, "cleanroom-valgrind", 10000, &g)) return 1;
    if (etcdlock_unlock(g)) return 1;
    etcdlock_guard_free(g); etcdlock_client_free(c);
    return etcdlock_shutdown() ? 1 : 0;
}
C
  if (cd "$capp" && PATH=$WITHCC cc shutdown.c -I"$prefix/include" -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -letcdlock -o shutdown) &&
    ETCDLOCK_ENDPOINTS=$EP valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite,possible \
      --suppressions="$prefix/share/etcdlock/etcdlock.supp" "$capp/shutdown" >"$work/valgrind.log" 2>&1; then
    ok "c: valgrind with etcdlock_shutdown() and etcdlock.supp: no definite or possible leaks"
  else
    bad "c: valgrind"; tail -40 "$work/valgrind.log"
  fi
  # A process that forks while it holds a lock: both processes' leak checks
  # (no --child-silent-after-fork), with only the shipped suppressions, on the
  # stripped library (valgrind finds its debug info through .gnu_debuglink).
  if (PATH=$WITHCC cc "$ROOT/ffi-c/tests/c/fork_child.c" -I"$prefix/include" -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" \
        -letcdlock -o "$capp/fork_child") &&
    valgrind -q --error-exitcode=9 --leak-check=full --show-leak-kinds=definite,indirect,possible \
      --errors-for-leak-kinds=definite,indirect,possible \
      --suppressions="$prefix/share/etcdlock/etcdlock.supp" "$capp/fork_child" "$EP" >"$work/valgrind-fork.log" 2>&1; then
    ok "c: valgrind of a program that forks while holding a lock, with etcdlock.supp: nothing reported in parent or child"
  else
    rc=$?
    bad "c: valgrind of a forked child (exit $rc: 9 is valgrind's, others fork_child.c's)"; tail -40 "$work/valgrind-fork.log" 2>&1
  fi
else
  bad "c: valgrind is not installed (scripts/setup.sh installs it)"
fi

echo "== CLI: the tarball's binary (no cargo, rustc, protoc, cc)"
cli_tree=$work/cli/etcdlock-cli-$version
missing=""
for f in README.md LICENSE share/man/man1/etcdlock.1 share/bash-completion/completions/etcdlock \
  share/zsh/site-functions/_etcdlock share/fish/vendor_completions.d/etcdlock.fish \
  share/doc/etcdlock/examples/etcdlock-job.service share/doc/etcdlock/examples/etcdlock-job.timer; do
  [ -s "$cli_tree/$f" ] || missing="$missing $f"
done
if [ -z "$missing" ] && grep -q '^\.TH etcdlock 1' "$cli_tree/share/man/man1/etcdlock.1" &&
  bash -n "$cli_tree/share/bash-completion/completions/etcdlock" &&
  grep -q 'completions' "$cli_tree/share/bash-completion/completions/etcdlock"; then
  ok "cli tarball: README, LICENSE, etcdlock(1), bash/zsh/fish completions, systemd unit and timer"
else
  bad "cli tarball: missing or broken:${missing:- man page or bash completion}"
fi
if out=$(PATH=$NOCC ETCDLOCK_ENDPOINTS=$EP "$work/cli/etcdlock-cli-$version/bin/etcdlock" run cleanroom-cli --timeout 10 -- \
    sh -c 'echo "ok $ETCDLOCK_FENCING_TOKEN"') && [ "${out#ok }" -gt 0 ] 2>/dev/null; then
  ok "cli: etcdlock run printed '$out'"
else
  bad "cli: '$out'"
fi

wait "$arm_pid"; arm_status=$?
cat "$arm_log"
passed=$((passed + $(grep -c '^  ok   ' "$arm_log")))
fail=$((fail + $(grep -c '^  FAIL ' "$arm_log")))
# Each aarch64 check ends in ok or bad: 5 binaries, auditwheel, C shared,
# static and conformance, a smoke test and the conformance table each for
# Python, Node and Java, the CLI. Fewer lines means the half died early.
arm_checks=$(grep -cE '^  (ok   |FAIL )' "$arm_log")
[ "$arm_checks" -ge 16 ] || bad "aarch64: $arm_checks checks reported, 16 expected (exit status $arm_status)"

echo "cleanroom: $passed passed, $fail failed"
[ "$fail" -eq 0 ]
