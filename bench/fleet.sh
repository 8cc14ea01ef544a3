#!/usr/bin/env bash
# Fleet: N clients on one 3-member etcd (issue 60, items 1 and 4). Each client
# has its own connection and lease, as N processes would have, and holds
# --locks locks on distinct names; 1 % more lock calls queue on names the
# fleet holds. The clients share processes (--per-process clients each):
# `etcdlock bench --fleet` for etcdlock, `go-mutex -fleet-clients` for Go's
# concurrency.Session + Mutex at the same TTL. For each N of --steps:
# etcdlock's fleet, then Go's (never both at once), each held for --hold
# seconds, then --probe seconds more while one probe client (etcdlock's, the
# same for both sides) locks and unlocks an uncontended name every 50 ms.
# Per step and side one JSON line, then a markdown table. Measured over the
# steady window (every hold in, every waiter queued, before the probe and
# the release):
# - etcd messages/s by gRPC method, summed over the members
#   (grpc_server_msg_received_total: one per unary request, one per stream
#   message such as a keep-alive), and per held-lock-minute;
# - etcd CPU s/s and RSS per member (process_cpu_seconds_total,
#   process_resident_memory_bytes), open files per member (/proc);
# - client CPU, RSS and open files per client (/proc of the fleet processes);
# - keep-alive gaps on a sample of clients (etcdlock: steps of a guard's
#   valid_until, i.e. time between the sends of two acknowledged
#   keep-alives; Go: time between two answers on a second KeepAlive channel
#   of the session's lease), p50/p99/max; lateness = gap - the side's
#   nominal interval (etcdlock: its keep-alive interval; Go: TTL/3);
# - holds lost, and false losses (lost while etcd still had the key under a
#   live lease, asked after the window);
# - the probe's lock+unlock p50/p99.
# etcd: 3 members on tmpfs (/dev/shm) by testkit's etcd-harness, loopback,
# free ports, etcd's default heartbeat (100 ms) and election timeout (1 s), a
# fresh cluster for each side of each step (etcd's RSS grows from the same
# start for both; the members' RSS before is in the JSON).
# Usage: bench/fleet.sh [--steps 100,1000,5000,10000] [--locks 10] [--ttl 15]
#        [--hold 60] [--probe 30] [--per-process 1000] [--sides etcdlock,go] [--quick]
# --quick: N=100, 10 locks, 15 s hold, 10 s probe (a smoke run of about a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=100,1000,5000,10000; LOCKS=10; TTL=15; HOLD=60; PROBE=30; PER=1000; SIDES=etcdlock,go
while [ $# -gt 0 ]; do case "$1" in
  --steps) STEPS=$2; shift 2;; --locks) LOCKS=$2; shift 2;; --ttl) TTL=$2; shift 2;;
  --hold) HOLD=$2; shift 2;; --probe) PROBE=$2; shift 2;; --per-process) PER=$2; shift 2;; --sides) SIDES=$2; shift 2;;
  --quick) STEPS=100; HOLD=15; PROBE=10; shift;;
  *) echo "usage: $0 [--steps N,N..] [--locks M] [--ttl S] [--hold S] [--probe S] [--per-process N] [--sides etcdlock,go] [--quick]" >&2; exit 2;; esac; done
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --quiet --release -p etcdlock-cli --features etcdlock-cli/bench -p etcdlock-testkit
(cd bench/go-mutex && GOFLAGS=-mod=mod go build -o "$CARGO_TARGET_DIR/release/go-mutex" .)
# 10,000 clients need more than 10,000 open files on each member and in the
# fleet's processes; every process started below (etcd too) inherits this.
ulimit -n "$(ulimit -Hn)"
echo "open files limit: $(ulimit -n) (hard $(ulimit -Hn)); fs.nr_open $(cat /proc/sys/fs/nr_open)" >&2
python3 bench/fleet_driver.py --harness "$CARGO_TARGET_DIR/release/etcd-harness" --bin "$CARGO_TARGET_DIR/release" --steps "$STEPS" \
  --locks "$LOCKS" --ttl "$TTL" --hold "$HOLD" --probe "$PROBE" --per-process "$PER" --sides "$SIDES"
