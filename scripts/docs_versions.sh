#!/usr/bin/env bash
# Versioned docs: checks that `mike deploy VERSION latest`, what a release runs
# to publish the site (one folder per version on the gh-pages branch and a
# versions.json the theme's version selector reads), works on this site.
#
#   scripts/docs_versions.sh [VENV]   (VENV: the docs tools venv scripts/docs.sh
#                                      made, default $CARGO_TARGET_DIR/docs-venv)
#
# Run by scripts/docs.sh (not --quick) after the staging folder is built (it
# reads $ETCDLOCK_SITE_SRC). mike builds the site with mkdocs.yml into a
# temporary git repository (GIT_DIR: this checkout's branches are never
# touched, nothing is pushed), then this script checks what it committed:
# versions.json names the version with its alias, the version's pages carry
# the theme's mike provider (the selector; scripts/docs_check.py sees it
# rendered in Chromium), and the alias is a link to the version.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-$PWD/target}
venv=${1:-$T/docs-venv}
export ETCDLOCK_SITE_SRC=${ETCDLOCK_SITE_SRC:-$T/site-src}
[ -d "$ETCDLOCK_SITE_SRC" ] || { echo "docs_versions.sh: no $ETCDLOCK_SITE_SRC: run scripts/docs.sh first" >&2; exit 1; }
VERSION=0.1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git init -q -b main "$tmp/repo"
export GIT_DIR=$tmp/repo/.git GIT_AUTHOR_NAME=docs GIT_AUTHOR_EMAIL=docs@localhost \
  GIT_COMMITTER_NAME=docs GIT_COMMITTER_EMAIL=docs@localhost
git commit -q --allow-empty -m "the release's commit"
# mike builds into site_dir (mkdocs.yml reads ETCDLOCK_SITE_DIR): not target/site.
PATH=$venv/bin:$PATH ETCDLOCK_SITE_DIR=$tmp/site NO_MKDOCS_2_WARNING=1 "$venv/bin/mike" deploy -F mkdocs.yml "$VERSION" latest >"$tmp/mike.log" 2>&1 \
  || { cat "$tmp/mike.log" >&2; echo "docs_versions.sh: mike deploy failed" >&2; exit 1; }
fail=0
check() { if eval "$2"; then echo "  ok   $1"; else echo "  FAIL $1"; fail=1; fi; }
versions=$(git show gh-pages:versions.json 2>/dev/null | tr -d ' \n' || true)
check "gh-pages has versions.json: $versions" \
  "python3 -c 'import json,sys; v=json.loads(sys.argv[1]); sys.exit(0 if v[0][\"version\"]==\"$VERSION\" and \"latest\" in v[0][\"aliases\"] else 1)' '$versions'"
check "gh-pages has $VERSION/index.html with the mike version provider (the selector)" \
  "git show gh-pages:$VERSION/index.html | grep -q '\"provider\": *\"mike\"\\|provider.:.mike'"
check "gh-pages has $VERSION/install.html" "git cat-file -e gh-pages:$VERSION/install.html"
check "latest is an alias of $VERSION (a symbolic link)" \
  "[ \"\$(git ls-tree gh-pages latest | cut -c1-6)\" = 120000 ] && [ \"\$(git show gh-pages:latest)\" = $VERSION ]"
echo "docs_versions.sh: mike deploy $VERSION latest: $( [ $fail = 0 ] && echo ok || echo FAILED ) ($(git ls-tree -r --name-only gh-pages | wc -l) files on gh-pages)"
exit $fail
