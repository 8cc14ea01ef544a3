"""The flash-sale example runs for real: several worker processes, no oversell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List

import etcdlock
from conftest import etcdctl, etcdctl_keys

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "flash_sale.py"


def run_example(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(EXAMPLE), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_flash_sale_sells_exactly_the_stock(endpoints: List[str], name: str) -> None:
    item = name + "-item"
    stock = 40
    ep = ",".join(endpoints)
    with etcdlock.Client(endpoints=endpoints) as c, c.lock(item + "/lock") as g:
        g.put(item + "/stock", str(stock))
    procs = [run_example("--endpoints", ep, "--item", item, "--buyers", "3", "--name", f"w{i}") for i in range(3)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(int(r["sold"]) for r in results) == stock
    assert all(r["remaining"] == 0 for r in results)
    orders = etcdctl_keys(endpoints, item + "/orders/")
    assert len(orders) == stock  # one order per unit, each under a distinct fencing token
    assert etcdctl(endpoints, "get", item + "/stock", "--print-value-only").strip() == "0"


def test_flash_sale_init_flag(endpoints: List[str], name: str) -> None:
    p = run_example("--endpoints", ",".join(endpoints), "--item", name, "--stock", "7", "--buyers", "2", "--init")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    r = json.loads(out)
    assert r["sold"] == 7 and r["remaining"] == 0
