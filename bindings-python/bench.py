"""Benchmark: uncontended lock + unlock from Python, against the raw etcd floor.

Starts its own etcd (the testkit harness), then measures in one run:

* floor  - the raw etcd round trips an uncontended lock + unlock costs (one Txn
           that puts a key with a lease and reads the prefix's first key, then
           one Delete), with a plain etcd client (`_etcdlock._raw_floor`);
* core   - the Rust core's lock + unlock, no Python in the loop (`_core_bench`);
* python - `client.acquire(name)` + `guard.unlock()` from Python (blocking API);
* asyncio - the same through `AsyncClient`.

Prints p50/p99 in microseconds and the ratios to the floor and to the core.
Usage: python bench.py [-n 2000] [--endpoints host:port]  (no --endpoints: start etcd)

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--endpoints", default=None)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (reduces drift)")
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
    finally:
        if harness is not None and harness.stdin is not None:
            harness.stdin.close()
            harness.wait(30)


if __name__ == "__main__":
    main()
