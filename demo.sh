#!/usr/bin/env bash
# Sets up a fresh machine (etcd, protoc, ...), builds etcdlock, starts a
# private single-node etcd on 127.0.0.1 and runs the main demo; the etcd it
# started is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
if [ "${1:-}" != "--seeds" ]; then
  exec scripts/flash_sale.sh "$@"
fi
cargo run --quiet --release -p etcdlock --example seed_demo
