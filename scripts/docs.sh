#!/usr/bin/env bash
# Builds the documentation site into target/site/ (open target/site/index.html).
#
#   scripts/docs.sh           the whole site: pages, diagrams, charts, and the
#                             API reference of every language, then the checks
#                             of scripts/docs_check.py in headless Chromium, and
#                             scripts/docs_versions.sh (versioned docs with mike)
#   scripts/docs.sh --quick   pages, diagrams and charts only (the reference
#                             folders hold a placeholder), no browser check:
#                             what an author runs after editing a page
#
# Pages are docs/**.md (the nav is mkdocs.yml). They are copied to a staging
# folder (target/site-src) with what is generated beside them: the diagrams
# (docs/diagrams/*.puml rendered to SVG by PlantUML) and the charts
# (scripts/charts.py); the API reference (scripts/docs_reference.sh) joins
# the built site after. `mkdocs build --strict` fails on a
# broken link or anchor. The code blocks of the pages are run by the language
# suites (scripts/readme_blocks.py lists each block and what runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
quick=0
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    *) echo "usage: scripts/docs.sh [--quick]" >&2; exit 2 ;;
  esac
done
T=${CARGO_TARGET_DIR:-$ROOT/target}
SRC=$T/site-src
SITE=$T/site
export ETCDLOCK_SITE_SRC=$SRC ETCDLOCK_SITE_DIR=$SITE

# The generator, pinned (docs/requirements.txt), in its own venv.
venv=$T/docs-venv
stamp=$venv/.requirements
if ! cmp -s docs/requirements.txt "$stamp" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r docs/requirements.txt
  cp docs/requirements.txt "$stamp"
fi

# PlantUML (the MIT-licensed build), from Maven Central, checked against its SHA-1.
PLANTUML_VERSION=1.2026.10
jar=$T/tools/plantuml-mit-$PLANTUML_VERSION.jar
if [ ! -f "$jar" ]; then
  mkdir -p "$T/tools"
  url=https://repo1.maven.org/maven2/net/sourceforge/plantuml/plantuml-mit/$PLANTUML_VERSION/plantuml-mit-$PLANTUML_VERSION.jar
  curl -fsSL -o "$jar.part" "$url"
  want=$(curl -fsSL "$url.sha1" | cut -c1-40)
  got=$(sha1sum "$jar.part" | cut -c1-40)
  [ "$want" = "$got" ] || { echo "docs.sh: $url: SHA-1 $got, Maven Central says $want" >&2; exit 1; }
  mv "$jar.part" "$jar"
fi

rm -rf "$SRC"
mkdir -p "$SRC"
(cd docs && tar --exclude=requirements.txt --exclude='*.puml' -cf - .) | (cd "$SRC" && tar -xf -)
# The changelog page is the repository's CHANGELOG.md (pymdownx.snippets
# includes it; mkdocs.yml). A checkout without one gets a page that says so,
# and this script says it too.
if [ ! -f CHANGELOG.md ]; then
  echo "docs.sh: no CHANGELOG.md at the repository root: the changelog page says so" >&2
  printf '# Changelog\n\nThis build had no CHANGELOG.md at the repository root.\n' > "$SRC/changelog.md"
fi

# Diagrams: every docs/diagrams/*.puml becomes diagrams/<name>.svg.
if compgen -G "docs/diagrams/*.puml" >/dev/null; then
  mkdir -p "$SRC/diagrams"
  java -Djava.awt.headless=true -jar "$jar" -tsvg -failfast2 -o "$SRC/diagrams" docs/diagrams/*.puml
fi
# The live web view's screenshots (docs/operations/ui.md), from the browser
# suite's last run (scripts/ui_check.sh writes $T/site-shots/); without one, a
# placeholder image that says how to make them.
mkdir -p "$SRC/operations/ui"
for shot in ui-desktop.png ui-phone.png ui-lock.png; do
  if [ -f "$T/site-shots/$shot" ]; then
    cp "$T/site-shots/$shot" "$SRC/operations/ui/$shot"
  else
    "$venv/bin/python" - "$SRC/operations/ui/$shot" <<'PY'
import sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig = plt.figure(figsize=(6, 1.2))
fig.text(0.5, 0.5, "No screenshot in this build: run scripts/ui_check.sh, then scripts/docs.sh", ha="center", va="center")
fig.savefig(sys.argv[1])
PY
  fi
done
# Charts: scripts/charts.py writes charts/<name>.svg from the figures in the repository.
"$venv/bin/python" scripts/charts.py "$SRC/charts" >/dev/null

# The reference of each language, under reference/<language>/: a placeholder
# while MkDocs builds (so links to reference/<language>/index.html validate,
# and the generated folders, with their own license notes in Markdown, are
# not read as pages), the real one copied in after the build.
for l in rust java node c cli; do
  mkdir -p "$SRC/reference/$l"
  echo "<p>Built by scripts/docs.sh without --quick.</p>" > "$SRC/reference/$l/index.html"
done

# (Not --quiet: it hides the warnings --strict counts, and the build then passes.)
NO_MKDOCS_2_WARNING=1 "$venv/bin/mkdocs" build --strict -f mkdocs.yml 2>&1 | { grep -v '^INFO ' || true; }
echo "docs.sh: $(find "$SITE" -name '*.html' -not -path '*/reference/*' | wc -l) pages built into $SITE"
if [ "$quick" = 0 ]; then
  rm -rf "$SITE"/reference/{rust,java,node,c,cli}
  bash scripts/docs_reference.sh "$SITE/reference"
  "$venv/bin/python" scripts/docs_check.py "$SITE"
  bash scripts/docs_versions.sh "$venv"
fi
