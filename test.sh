#!/usr/bin/env bash
# Runs every test suite against real etcd processes the harness starts on
# 127.0.0.1 (free ports, temp dirs) and stops. No mocks of etcd anywhere.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

step() { printf '\n==== %s ====\n' "$*"; }

step "Rust core, CLI and harness (cargo test)"
cargo build --quiet -p etcdlock-testkit -p etcdlock-cli
cargo test --quiet -p etcdlock -p etcdlock-testkit -p etcdlock-cli

step "seed demo (route 1 and route 2)"
cargo run --quiet -p etcdlock --example seed_demo >/dev/null

echo
echo "all suites passed"
