"""Benchmark: uncontended lock + unlock from Python, against the raw etcd floor.

Starts its own etcd (the testkit harness), then measures in one run:

* floor  - the raw etcd round trips an uncontended lock + unlock costs (one Txn
           that puts a key with a lease and reads the prefix's first key, then
           one Delete), with a plain etcd client (`_etcdlock._raw_floor`);
* core   - the Rust core's lock + unlock, no Python in the loop (`_core_bench`);
* python - `client.acquire(name)` + `guard.unlock()` from Python (blocking API);
* asyncio - the same through `AsyncClient`.

Prints p50/p99 in microseconds and the ratios to the floor and to the core.
Then the handoff (8 contenders, `--handoff` acquisitions after a tenth as many
as warm-up, 0 to skip), each contender its own client (connection and
session), looping acquire -> unlock on one name:

* python-handoff  - 8 threads, each with its own `Client`;
* asyncio-handoff - 8 tasks on one event loop, each with its own `AsyncClient`.

Handoff = when the next holder's acquire returned minus when the previous
holder called unlock, the definition of core_bench's rust_core_handoff
(ffi-c/bench/rust) and every binding's bench; printed as p50/p99 in
microseconds, the lock wait p50 and acquisitions/s.

Usage: python bench.py [-n 2000] [--handoff N] [--endpoints host:port]  (no --endpoints: start etcd)

The floor and core loops live in the native module only when it is built with
the `bench` feature (the published wheel has none):
    MATURIN_PEP517_ARGS="--features bench" pip install ./bindings-python
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

import etcdlock
from etcdlock import _etcdlock

if not hasattr(_etcdlock, "_raw_floor"):
    raise SystemExit(
        "bench.py: this etcdlock was built without the bench feature; install it with\n"
        '    MATURIN_PEP517_ARGS="--features bench" pip install ./bindings-python'
    )

ROOT = Path(__file__).resolve().parent.parent


def pct(xs: List[int], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p / 100 * len(s)))] / 1000.0


def python_sync(endpoints: List[str], n: int) -> List[int]:
    out = []
    with etcdlock.Client(endpoints=endpoints) as c:
        name = f"bench-py-{os.getpid()}"
        for _ in range(n):
            t0 = time.perf_counter_ns()
            g = c.acquire(name)
            g.unlock()
            out.append(time.perf_counter_ns() - t0)
    return out


def python_async(endpoints: List[str], n: int) -> List[int]:
    async def main() -> List[int]:
        out = []
        async with etcdlock.AsyncClient(endpoints=endpoints) as c:
            name = f"bench-aio-{os.getpid()}"
            for _ in range(n):
                t0 = time.perf_counter_ns()
                g = await c.acquire(name)
                await g.unlock()
                out.append(time.perf_counter_ns() - t0)
        return out

    return asyncio.run(main())


CONTENDERS = 8


class Turns:
    """What the contenders share; touched only by the holder of the lock."""

    def __init__(self, acquisitions: int) -> None:
        self.warm = acquisitions // 10
        self.total = self.warm + acquisitions
        self.taken = 0
        self.last_unlock: Optional[int] = None
        self.handoffs: List[int] = []
        self.waits: List[int] = []
        self.first: Optional[int] = None
        self.last = 0
        self.mu = threading.Lock()

    def acquired(self, t0: int, at: int) -> bool:
        """Record an acquisition made at `at` (asked at `t0`); True: the run is over."""
        with self.mu:
            k = self.taken
            self.taken += 1
            if self.warm <= k < self.total:
                if self.last_unlock is not None:
                    self.handoffs.append(at - self.last_unlock)
                self.waits.append(at - t0)
                if self.first is None:
                    self.first = at
                self.last = at
            self.last_unlock = time.perf_counter_ns()
            return k + 1 >= self.total

    def report(self) -> Dict[str, float]:
        span = (self.last - (self.first or 0)) / 1e9
        return {
            "p50": pct(self.handoffs, 50),
            "p99": pct(self.handoffs, 99),
            "wait_p50": pct(self.waits, 50),
            "per_s": (len(self.waits) - 1) / span if span > 0 else 0.0,
        }


def handoff_sync(endpoints: List[str], acquisitions: int) -> Dict[str, float]:
    turns = Turns(acquisitions)
    name = f"bench-py-handoff-{os.getpid()}"
    clients = [etcdlock.Client(endpoints=endpoints) for _ in range(CONTENDERS)]

    def contender(c: etcdlock.Client) -> None:
        while True:
            t0 = time.perf_counter_ns()
            g = c.acquire(name)
            done = turns.acquired(t0, time.perf_counter_ns())
            g.unlock()
            if done:
                return

    threads = [threading.Thread(target=contender, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    return turns.report()


def handoff_async(endpoints: List[str], acquisitions: int) -> Dict[str, float]:
    turns = Turns(acquisitions)
    name = f"bench-aio-handoff-{os.getpid()}"

    async def contender(c: etcdlock.AsyncClient) -> None:
        while True:
            t0 = time.perf_counter_ns()
            g = await c.acquire(name)
            done = turns.acquired(t0, time.perf_counter_ns())
            await g.unlock()
            if done:
                return

    async def main() -> None:
        clients = [await etcdlock.AsyncClient(endpoints=endpoints).connect() for _ in range(CONTENDERS)]
        try:
            await asyncio.gather(*(contender(c) for c in clients))
        finally:
            for c in clients:
                await c.close()

    asyncio.run(main())
    return turns.report()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--endpoints", default=None)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (reduces drift)")
    ap.add_argument("--handoff", type=int, default=None, help="acquisitions of the 8-contender handoff (default -n; 0: skip)")
    args = ap.parse_args()

    harness: "Optional[subprocess.Popen[str]]" = None
    if args.endpoints:
        endpoints = args.endpoints.split(",")
    else:
        target = os.environ.get("CARGO_TARGET_DIR") or str(ROOT / "target")
        path = os.environ.get("ETCD_HARNESS") or str(Path(target) / "debug" / "etcd-harness")
        harness = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert harness.stdout is not None
        endpoints = json.loads(harness.stdout.readline())["endpoints"]
    try:
        per = max(1, args.n // args.rounds)
        res: Dict[str, List[int]] = {"floor": [], "core": [], "python": [], "asyncio": []}
        # warm up connections and etcd
        _etcdlock._raw_floor(endpoints, 50)
        python_sync(endpoints, 50)
        for _ in range(args.rounds):
            res["floor"] += _etcdlock._raw_floor(endpoints, per)
            res["core"] += _etcdlock._core_bench(endpoints, per)
            res["python"] += python_sync(endpoints, per)
            res["asyncio"] += python_async(endpoints, per)
        f50, c50 = pct(res["floor"], 50), pct(res["core"], 50)
        print(f"uncontended lock+unlock, n={per * args.rounds} each, etcd {','.join(endpoints)}")
        print(f"{'':10}{'p50 us':>10}{'p99 us':>10}{'p50/floor':>11}{'p50/core':>10}")
        for k, xs in res.items():
            p50, p99 = pct(xs, 50), pct(xs, 99)
            print(f"{k:10}{p50:10.1f}{p99:10.1f}{p50 / f50:11.3f}{p50 / c50:10.3f}")
        acq = args.n if args.handoff is None else args.handoff
        if acq > 0:
            print(f"\n{CONTENDERS} contenders (a client each) on one lock, {acq} acquisitions each case: handoff (unlock -> next holder)")
            print(f"{'':16}{'p50 us':>10}{'p99 us':>10}{'wait p50 us':>13}{'acq/s':>8}")
            for k, fn in (("python-handoff", handoff_sync), ("asyncio-handoff", handoff_async)):
                h = fn(endpoints, acq)
                print(f"{k:16}{h['p50']:10.1f}{h['p99']:10.1f}{h['wait_p50']:13.1f}{h['per_s']:8.0f}")
    finally:
        if harness is not None and harness.stdin is not None:
            harness.stdin.close()
            harness.wait(30)


if __name__ == "__main__":
    main()
