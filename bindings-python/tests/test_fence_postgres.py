"""examples/fence_postgres.py against a real PostgreSQL and etcd: holder A is
stopped (SIGSTOP) past its 2 s lease, B takes the lock and deposits, A wakes
and writes with its old token. With the fence the database refuses A and A
prints why; the control run without the fence shows the lost update.
scripts/fence_scenario.py plays it (the same driver for every language) and
starts and stops its own PostgreSQL (scripts/pg_harness.py) and etcd."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT, harness_path


def test_stale_write_refused_by_postgres_and_lost_without_the_fence() -> None:
    example = ROOT / "bindings-python" / "examples" / "fence_postgres.py"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "fence_scenario.py"), "--label", "python",
                        "--harness", harness_path(), "--", sys.executable, str(example)],
                       capture_output=True, text=True, timeout=120)
    print(r.stdout, r.stderr, sep="\n")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "2 passed, 0 failed"
