"""Issue 32 in Python: lock-delay after a holder killed with SIGKILL,
permits released by id from another process, expiring permits, holder
metadata, and a latch and a barrier shared by three processes in two
languages (Python and the Rust CLI), with no keys left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List, Optional

import pytest

import etcdlock

from conftest import ROOT, etcdctl_keys

HOLDER = """
import sys, time, etcdlock
c = etcdlock.Client(endpoints=sys.argv[1].split(","), namespace=sys.argv[2], ttl=2)
g = c.acquire(sys.argv[3], lock_delay=3)
print(g.fencing_token, flush=True)
time.sleep(600)
"""


def cli() -> str:
    target = os.environ.get("CARGO_TARGET_DIR") or str(ROOT / "target")
    path = Path(target) / "debug" / "etcdlock"
    if not path.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "etcdlock-cli"], cwd=ROOT, check=True)
    return str(path)


def test_lock_delay_after_a_holder_killed_with_sigkill(endpoints: List[str], name: str) -> None:
    ns = f"peers-{name}/"
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, ",".join(endpoints), ns, "job"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        token = int(child.stdout.readline())
        c = etcdlock.Client(endpoints=endpoints, namespace=ns, ttl=10)
        got: dict = {}

        def wait() -> None:
            g = c.acquire("job", timeout=20)
            got["at"] = time.monotonic()
            got["guard"] = g

        t = threading.Thread(target=wait)
        t.start()
        # The waiter is queued behind the holder (its key is in etcd).
        deadline = time.monotonic() + 5
        while len(c.status("job").waiters) < 1:
            assert time.monotonic() < deadline, "the waiter never queued"
            time.sleep(0.02)
        killed = time.monotonic()
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        # When etcd removes the holder's key (its lease expires, TTL 2 s).
        gone: Optional[float] = None
        while gone is None:
            st = c.status("job")
            if not any(h.fencing_token == token for h in st.holders):
                gone = time.monotonic()
            else:
                assert time.monotonic() < killed + 5, "the killed holder's key never expired"
                time.sleep(0.02)
        t.join(20)
        assert "at" in got, "the waiter never got the lock"
        after_expiry, after_kill = got["at"] - gone, got["at"] - killed
        print(f"lock-delay 3 s, TTL 2 s: key gone {gone - killed:.2f} s after SIGKILL, lock granted {after_expiry:.2f} s after that ({after_kill:.2f} s after the kill)")
        assert after_expiry >= 3.0 - 0.05, f"granted {after_expiry:.2f} s after the key went (lock-delay 3 s)"
        assert after_kill < 2 + 3 + 1 + 2, f"granted {after_kill:.2f} s after the kill"
        g = got["guard"]

        # A clean unlock hands over at once, lock-delay or not.
        g.unlock()
        g = c.acquire("job", lock_delay=3)
        other = etcdlock.Client(endpoints=endpoints, namespace=ns, ttl=10)
        t0 = [0.0]
        res: dict = {}

        def wait2() -> None:
            res["guard"] = other.acquire("job", timeout=10)
            res["at"] = time.monotonic()

        t2 = threading.Thread(target=wait2)
        t2.start()
        while len(c.status("job").waiters) < 1:
            time.sleep(0.02)
        t0[0] = time.monotonic()
        g.unlock()
        t2.join(10)
        assert res["at"] - t0[0] < 0.5, f"clean unlock handed over in {res['at'] - t0[0]:.3f} s"
        res["guard"].unlock()
        assert not [k for k in etcdctl_keys(endpoints, f"{ns}job") if "etcdlock-delay" in k], "no lock-delay records left"
        other.close()
        c.close()
    finally:
        if child.poll() is None:
            child.kill()


def test_permits_have_ids_another_process_releases_and_a_lease_time(endpoints: List[str], name: str) -> None:
    ns = f"peers-{name}/"
    c = etcdlock.Client(endpoints=endpoints, namespace=ns, ttl=10)
    p = c.acquire_permit("pool", 2, metadata={"job": "transcode-42"})
    # Another process frees it by id (the permit's fencing token).
    out = subprocess.run(
        [sys.executable, "-c", "import sys, etcdlock; c = etcdlock.Client(endpoints=sys.argv[1].split(','), namespace=sys.argv[2]); print(c.release_permit('pool', int(sys.argv[3])))",
         ",".join(endpoints), ns, str(p.fencing_token)],
        capture_output=True, text=True, check=True,
    ).stdout
    assert out.strip() == "True"
    assert p.lost.wait(2), "the holder never heard of the release"
    assert p.loss_reason == "KeyDeleted"
    # An expiring permit frees itself after its lease time.
    start = time.monotonic()
    q = c.acquire_permit("pool", 1, lease_time=1.0)
    assert q.lost.wait(3)
    took = time.monotonic() - start
    assert q.loss_reason == "LeaseExpired" and 0.9 < took < 1.8, (q.loss_reason, took)
    c.close()


def test_metadata_is_in_status(client: etcdlock.Client, name: str) -> None:
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.acquire(name, metadata={"k": "v" * 2000})
    with pytest.raises(TypeError):
        client.acquire(name, metadata={"k": 1})  # type: ignore[dict-item]
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.acquire(name, lock_delay=-1)
    g = client.acquire(name, metadata={"app": "billing", "build": "1.2.3"})
    deadline = time.monotonic() + 2
    while True:
        holder = client.status(name).holder
        assert holder is not None
        if holder.metadata or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert holder.metadata == {"app": "billing", "build": "1.2.3"}
    assert holder.language == "python" and holder.pid == os.getpid()
    g.unlock()


def test_a_latch_and_a_barrier_across_three_processes_in_two_languages(endpoints: List[str], name: str) -> None:
    ns = f"peers-{name}/"
    env = {**os.environ, "ETCDLOCK_ENDPOINTS": ",".join(endpoints), "ETCDLOCK_NAMESPACE": ns, "ETCDLOCK_TTL": "4"}
    c = etcdlock.Client(endpoints=endpoints, namespace=ns, ttl=4)
    latch = c.latch("shards", 3)
    barrier = c.barrier("go", 3)
    py_party = """
import sys, etcdlock
c = etcdlock.Client()
with c.latch("shards", 3) as l:
    l.count_down()
with c.barrier("go", 3) as b:
    print(b.wait(timeout=20), flush=True)
c.close()
"""
    procs = [
        subprocess.Popen([sys.executable, "-c", py_party], env=env, stdout=subprocess.PIPE, text=True),
        subprocess.Popen([cli(), "latch", "shards", "--count", "3", "--count-down"], env=env, stdout=subprocess.PIPE, text=True),
    ]
    assert procs[1].wait(20) == 0
    latch.count_down()  # the third count-down: the Python child's and the CLI's came first or come now
    latch.wait(timeout=20)
    assert latch.count() == 0
    rust_party = subprocess.Popen([cli(), "barrier", "go", "--parties", "3", "--timeout", "20s"], env=env, stdout=subprocess.PIPE, text=True)
    mine = barrier.wait(timeout=20)
    outs = [procs[0].communicate(timeout=20)[0].strip(), rust_party.communicate(timeout=20)[0].strip()]
    assert procs[0].returncode == 0 and rust_party.returncode == 0, outs
    assert sorted([mine, int(outs[0]), int(outs[1])]) == [0, 1, 2]
    latch.close()
    barrier.close()
    c.close()
    # Every handle closed: the shared lease runs out within the TTL (4 s;
    # 2 s let a loaded machine's keep-alive miss and a party drop out).
    deadline = time.monotonic() + 10
    while etcdctl_keys(endpoints, ns):
        assert time.monotonic() < deadline, f"keys left: {etcdctl_keys(endpoints, ns)}"
        time.sleep(0.1)


def test_the_cli_once_and_a_python_once_job_exclude_each_other(endpoints: List[str], name: str, tmp_path: Path) -> None:
    """`etcdlock once` (a cron line) and ``@client.once`` take the same
    run-once record: while one runs the job, the other skips it."""
    etcdlock_cli = cli()  # built before anything below waits
    ns = f"once-{name}/"
    env = {**os.environ, "ETCDLOCK_ENDPOINTS": ",".join(endpoints), "ETCDLOCK_NAMESPACE": ns}
    started, gate = tmp_path / "started", tmp_path / "gate"
    job = subprocess.Popen(
        [etcdlock_cli, "once", "nightly", "--at-most", "60s", "--", "sh", "-c",
         f"touch {started}; while [ ! -e {gate} ]; do sleep 0.02; done"],
        env=env,
    )
    deadline = time.monotonic() + 20
    while not started.exists():
        assert time.monotonic() < deadline, "the CLI's job never started"
        time.sleep(0.02)
    c = etcdlock.Client(endpoints=endpoints, namespace=ns)
    ran: List[str] = []

    @c.once("nightly", at_most=60)
    def nightly() -> str:
        ran.append("python")
        return "ran"

    assert nightly() is None and ran == [], "Python ran a job the CLI runs"
    gate.touch()
    assert job.wait(20) == 0
    assert nightly() == "ran" and ran == ["python"], "the CLI's record outlived its job"

    @c.once("nightly", at_most=60, at_least=60)
    def held() -> str:
        return "held"

    assert held() == "held"
    skipped = subprocess.run(
        [etcdlock_cli, "once", "nightly", "--at-most", "60s", "--skipped-exit", "3", "--", "true"], env=env, timeout=20
    )
    assert skipped.returncode == 3, "the CLI ran a job Python holds (--at-least)"
    c.close()
