#!/usr/bin/env bash
# The Maven rules check must be able to fail: on copies of a dist that passes
# `scripts/registry/maven.sh check`, one defect each (re-summed and re-signed
# where only the rule itself should catch it), and the check must fail naming it.
#   scripts/registry/maven_rules_test.sh DIST     (DIST: a signed dist/ that passes; ~10 s)
set -euo pipefail
M=$(cd "$(dirname "$0")" && pwd)/maven.sh
good=$(realpath "$1")
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\([^"]*\)".*/\1/p' "$(dirname "$0")/../../Cargo.toml")
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
fail=0
resum() { md5sum "$1" | cut -d' ' -f1 >"$1.md5"; sha1sum "$1" | cut -d' ' -f1 >"$1.sha1"; }
fresh() { rm -rf "$t/d"; cp -a "$good" "$t/d"; R=$t/d/maven/io/etcdlock; }
expect() { # what, pattern the FAIL line must show
  local out
  if out=$(bash "$M" check "$t/d" 2>&1); then
    echo "  FAIL $1: the check passed"; fail=1
  elif grep -E '^  FAIL ' <<<"$out" | grep -qE "$2"; then
    echo "  ok   $1: $(grep -E '^  FAIL ' <<<"$out" | grep -E "$2" | head -n 1 | cut -c8-200)"
  else
    echo "  FAIL $1: the check failed, but not on /$2/:"; grep -E '^  FAIL ' <<<"$out" | head -n 3; fail=1
  fi
}
pom() { echo "$R/$1/$version/$1-$version.pom"; }

bash "$M" check "$good" >/dev/null || { echo "maven_rules_test: $good does not pass the check to begin with" >&2; exit 1; }
fresh; python3 - "$(pom etcdlock-bom)" <<'PY'
import re, sys; p = sys.argv[1]; s = open(p).read(); open(p, "w").write(re.sub(r"\s*<scm[ >].*?</scm>", "", s, flags=re.S))
PY
resum "$(pom etcdlock-bom)"; bash "$M" sign "$t/d" >/dev/null
expect "a POM without <scm>" "etcdlock-bom-.*no <scm><url>"
fresh; sed -i 's|<description>.*</description>||' "$(pom etcdlock-parent)"; resum "$(pom etcdlock-parent)"; bash "$M" sign "$t/d" >/dev/null
expect "the parent without <description> (its modules inherit none)" "etcdlock-parent-.*no <description>"
fresh; sed -i 's| child.project.url.inherit.append.path="false"||' "$(pom etcdlock-parent)"; resum "$(pom etcdlock-parent)"; bash "$M" sign "$t/d" >/dev/null
expect "a module's url inherited with its artifactId appended" "<url> inherited as .*/etcdlock-spring"
fresh; python3 - "$(pom etcdlock-test)" <<'PY'
import sys; p = sys.argv[1]; s = open(p).read()
s = s.replace("\n  <dependencies>", "\n  <repositories><repository><id>x</id><url>https://example.invalid/m2</url></repository></repositories>"
              "\n  <dependencies>\n    <dependency><groupId>org.example</groupId><artifactId>x</artifactId><version>1.0-SNAPSHOT</version></dependency>", 1)
open(p, "w").write(s)
PY
resum "$(pom etcdlock-test)"; bash "$M" sign "$t/d" >/dev/null
expect "a POM with <repositories> and a SNAPSHOT dependency" "<repositories> in etcdlock-test.*SNAPSHOT.*org.example:x:1.0-SNAPSHOT"
fresh; rm -r "$R/etcdlock-parent"
expect "the parent POM not published" "parent io.etcdlock:etcdlock-parent:$version is not published"
fresh; rm "$R/etcdlock-reactor/$version/etcdlock-reactor-$version-sources.jar"*
expect "a jar without its -sources.jar" "etcdlock-reactor-$version-sources.jar missing"
fresh; rm "$R/etcdlock-shedlock/$version/etcdlock-shedlock-$version-javadoc.jar"*
expect "a jar without its -javadoc.jar" "etcdlock-shedlock-$version-javadoc.jar missing"
fresh; printf x >>"$R/etcdlock-spring/$version/etcdlock-spring-$version.jar"
expect "a jar changed after it was summed" "etcdlock-spring-$version.jar.sha1 does not match"
fresh; printf x >>"$R/etcdlock-spring/$version/etcdlock-spring-$version.jar"; resum "$R/etcdlock-spring/$version/etcdlock-spring-$version.jar"
expect "a jar changed after it was signed, its sums redone" "etcdlock-spring-$version.jar.asc does not verify"
fresh; rm "$R/etcdlock/$version/etcdlock-$version.jar.asc"
expect "a file without its .asc" "etcdlock-$version.jar.asc missing"
fresh; k=$t/k; mkdir -p "$k"; cp -a "$good" "$k/d"; bash "$M" sign "$k/d" >/dev/null; cp "$k/d/maven-signing-key.asc" "$t/d/"
expect "signatures checked against another key" "does not verify: .*No public key"
echo "maven_rules_test: $([ "$fail" -eq 0 ] && echo "every defect caught" || echo "some defect NOT caught")"
exit "$fail"
