#!/usr/bin/env bash
# The API reference of every language, generated from the sources' doc
# comments into OUT/<language>/ (scripts/docs.sh calls it with the site's
# staging folder, so the pages link to OUT/<language>/index.html):
#   rust/  rustdoc of core (cargo doc --no-deps -p etcdlock)
#   java/  Javadoc of etcdlock, etcdlock-spring, etcdlock-test, etcdlock-shedlock
#          and etcdlock-reactor, one folder each (dist's -javadoc jars when they are
#          newer than the sources, else mvn javadoc:javadoc with no native build)
#   node/  TypeDoc of index.d.ts, prometheus.d.ts, testing.d.ts and fencing.d.ts (scripts/docs-tools/package.json pins it)
#   c/     Doxygen of include/etcdlock.h
#   cli/   the man pages (clap_mangen: cargo run -p etcdlock-cli --example manpage)
#          as HTML (mandoc -Thtml), and as roff
# The Python reference is a page of the site (docs/reference/python.md, mkdocstrings).
# (TypeDoc runs with --skipErrorChecking: the Node suite type-checks index.d.ts with tsc.)
# Usage: scripts/docs_reference.sh OUT
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$(realpath -m "${1:?usage: scripts/docs_reference.sh OUT}")
T=${CARGO_TARGET_DIR:-$ROOT/target}
export PATH="$HOME/.cargo/bin:$PATH"
rm -rf "$OUT"/{rust,java,node,c,cli}
mkdir -p "$OUT"

step() { printf 'docs_reference: %s\n' "$*"; }

step "rust (cargo doc --no-deps -p etcdlock)"
cargo doc --quiet --no-deps -p etcdlock
cp -r "$T/doc" "$OUT/rust"
# rustdoc's root has no index.html: send the reader to the crate.
printf '<!doctype html><meta http-equiv="refresh" content="0; url=etcdlock/index.html"><title>etcdlock (Rust)</title><a href="etcdlock/index.html">etcdlock</a>\n' >"$OUT/rust/index.html"

java_modules=(etcdlock etcdlock-spring etcdlock-test etcdlock-shedlock etcdlock-reactor)
# The -javadoc jars scripts/dist.sh publishes (dist/maven) are this Javadoc:
# when they are newer than every Java source, they are used as they are (the
# test command runs this after the dist suite); otherwise Maven builds it.
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\([^"]*\)".*/\1/p' Cargo.toml)
javadoc_jar() { echo "$ROOT/dist/maven/io/etcdlock/$1/$version/$1-$version-javadoc.jar"; }
from_dist=1
for m in "${java_modules[@]}"; do
  jar=$(javadoc_jar "$m")
  if [ ! -f "$jar" ] || [ -n "$(find "bindings-java/$m/src/main" bindings-java/pom.xml "bindings-java/$m/pom.xml" -newer "$jar" -print -quit)" ]; then
    from_dist=0
  fi
done
mkdir -p "$OUT/java"
if [ "$from_dist" = 1 ]; then
  step "java (Javadoc from the dist/maven -javadoc jars, newer than the sources)"
  for m in "${java_modules[@]}"; do
    mkdir -p "$OUT/java/$m" && (cd "$OUT/java/$m" && unzip -q "$(javadoc_jar "$m")")
  done
else
  step "java (mvn javadoc:javadoc)"
  # -Dcargo.skip/-Dexec.skip: the reference needs the Java sources, not the JNI library.
  (cd bindings-java && mvn -B -q -Dcargo.skip=true -Dexec.skip=true -DskipTests -Ddoclint=none -Dquiet=true \
    -pl "$(IFS=,; echo "${java_modules[*]}")" -am package javadoc:javadoc) >"$T/docs-javadoc.log" 2>&1 ||
    { cat "$T/docs-javadoc.log"; echo "docs_reference: mvn javadoc:javadoc failed" >&2; exit 1; }
  for m in "${java_modules[@]}"; do cp -r "bindings-java/$m/target/reports/apidocs" "$OUT/java/$m"; done
fi
{
  echo '<!doctype html><meta charset="utf-8"><title>etcdlock Java API</title>'
  echo '<h1>etcdlock Java API</h1><ul>'
  for m in "${java_modules[@]}"; do
    [ -f "$OUT/java/$m/index.html" ] || { echo "docs_reference: no Javadoc for $m" >&2; exit 1; }
    echo "<li><a href=\"$m/index.html\">$m</a></li>"
  done
  echo '</ul><p>The Kotlin extensions (etcdlock-kotlin) are described in the Java pages of the guide.</p>'
} >"$OUT/java/index.html"

step "node (TypeDoc)"
(cd scripts/docs-tools && npm ci --silent --no-audit --no-fund)
(cd bindings-node && ../scripts/docs-tools/node_modules/.bin/typedoc --logLevel Warn --disableSources --readme none --skipErrorChecking \
  --name "etcdlock for Node.js" --entryPoints index.d.ts --entryPoints prometheus.d.ts --entryPoints testing.d.ts --entryPoints fencing.d.ts --out "$OUT/node")

step "c (Doxygen)"
mkdir -p "$OUT/c"
doxygen - >/dev/null <<DOXY
PROJECT_NAME = libetcdlock
PROJECT_BRIEF = "etcdlock for C and C++"
INPUT = include/etcdlock.h
OUTPUT_DIRECTORY = $T/doxygen
HTML_OUTPUT = html
GENERATE_LATEX = NO
HAVE_DOT = NO
OPTIMIZE_OUTPUT_FOR_C = YES
EXTRACT_ALL = YES
JAVADOC_AUTOBRIEF = YES
FULL_PATH_NAMES = NO
QUIET = YES
WARN_IF_UNDOCUMENTED = NO
WARN_AS_ERROR = YES
SEARCHENGINE = NO
DOXY
cp -r "$T/doxygen/html/." "$OUT/c/"

step "cli (clap_mangen, mandoc -Thtml)"
mkdir -p "$OUT/cli/man"
cargo run --quiet -p etcdlock-cli --example manpage -- "$OUT/cli/man" >/dev/null
{
  echo '<!doctype html><meta charset="utf-8"><title>etcdlock(1)</title><h1>The etcdlock command: man pages</h1><ul>'
  for page in "$OUT"/cli/man/*.1; do
    name=$(basename "$page" .1)
    mandoc -Thtml -Ofragment "$page" >"$OUT/cli/$name.html.part"
    { echo "<!doctype html><meta charset=\"utf-8\"><title>$name(1)</title>"; cat "$OUT/cli/$name.html.part"; } >"$OUT/cli/$name.html"
    rm "$OUT/cli/$name.html.part"
    echo "<li><a href=\"$name.html\">$name(1)</a> (<a href=\"man/$name.1\">roff</a>)</li>"
  done
  echo '</ul>'
} >"$OUT/cli/index.html"
step "done: $(find "$OUT" -name '*.html' | wc -l) HTML files under $OUT"
