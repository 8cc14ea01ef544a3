#!/usr/bin/env bash
# Sets up a fresh machine with what the demo uses (etcd, etcdctl, a C
# compiler, Python's venv; PostgreSQL only with --store postgres: see
# scripts/setup.sh --demo), builds etcdlock, starts a private single-node etcd
# on 127.0.0.1 and runs the main demo; the etcd it started is stopped at the
# end.
set -euo pipefail
cd "$(dirname "$0")"
postgres=""
prev=""
for a in "$@"; do
  if [ "$prev/$a" = --store/postgres ] || [ "$a" = --store=postgres ]; then postgres=--postgres; fi
  prev=$a
done
bash scripts/setup.sh --demo $postgres
export PATH="$HOME/.cargo/bin:$PATH"
if [ "${1:-}" != "--seeds" ]; then
  exec scripts/flash_sale.sh "$@"
fi
cargo run --quiet --release -p etcdlock --example seed_demo
