#!/usr/bin/env bash
# The live web view (`etcdlock ui`) in headless Chromium: scripts/ui_check.py
# against real etcd from the test harness, with clients in Rust (the CLI),
# Python and Node. Screenshots go to $CARGO_TARGET_DIR/site-shots/, where
# scripts/docs.sh takes them for docs/operations/ui.md.
#
# Needs the Python package and the Node module built (bindings-python/test.sh
# and bindings-node/test.sh build them; ./test.sh runs this suite after
# them), or ETCDLOCK_UI_PYTHON / ETCDLOCK_NODE_MODULE pointing at builds.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
T=$CARGO_TARGET_DIR

cargo build -q -p etcdlock-cli
cargo build -q -p etcdlock-testkit

py=${ETCDLOCK_UI_PYTHON:-$ROOT/bindings-python/.venv/bin/python}
node_module=${ETCDLOCK_NODE_MODULE:-$ROOT/bindings-node}
"$py" -c 'import etcdlock' 2>/dev/null || {
  echo "ui_check.sh: $py cannot import etcdlock: run bindings-python/test.sh first (or set ETCDLOCK_UI_PYTHON)" >&2; exit 1; }
compgen -G "$node_module/etcdlock.*.node" >/dev/null || {
  echo "ui_check.sh: no native module in $node_module: run bindings-node/test.sh first (or set ETCDLOCK_NODE_MODULE)" >&2; exit 1; }

# Selenium: the docs site's venv when scripts/docs.sh made it, else one of
# our own with the same pinned selenium.
venv=$T/docs-venv
if ! "$venv/bin/python" -c 'import selenium' 2>/dev/null; then
  venv=$T/ui-venv
  if ! "$venv/bin/python" -c 'import selenium' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "$(grep '^selenium==' docs/requirements.txt)"
  fi
fi
ETCDLOCK_UI_PYTHON=$py ETCDLOCK_NODE_MODULE=$node_module "$venv/bin/python" scripts/ui_check.py
