#!/bin/sh
# The Python client of CrossLanguageDeadlockTest: the Python binding built into a
# venv under the cargo target dir (dev profile, sharing the workspace's debug
# artifacts, as bindings-python/test.sh builds it). Run by the etcdlock module's
# Maven build (generate-test-resources, execution build-python-venv), so that
# `mvn verify` needs nothing built first; needs python3 with venv and pip
# (maturin comes from PyPI).
#   build_venv.sh CARGO_SKIP PYTHON DEFAULT_PYTHON WORKSPACE
# Builds nothing when CARGO_SKIP is true (the caller builds no native code) or
# when PYTHON (-Detcdlock.python) is not DEFAULT_PYTHON (the caller gave its own).
set -eu
[ "$1" = true ] && exit 0
[ "$2" = "$3" ] || exit 0
venv=$(dirname "$(dirname "$3")")
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.16,<2"
MATURIN_PEP517_ARGS="--profile dev" "$venv/bin/python" -m pip install -q --disable-pip-version-check \
  --force-reinstall --no-deps --no-build-isolation "$4/bindings-python"
