"""A program ends cleanly however it leaves etcdlock: exit status 0, no crash.

An asyncio program whose last await settled an etcdlock future died at exit
about 1 run in 10 (SIGSEGV, or SIGABRT with "PyGILState_Release: thread state
must be current"): a runtime thread was still handing the result to the loop
when the interpreter began to finalize, and CPython kills such a thread
mid-call. Each program here runs 40 times in fresh interpreters; every run
must exit 0 with the expected output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import List

import pytest

RUNS = 40

PROGRAMS = {
    "asyncio-connect-close": """
import asyncio, etcdlock
async def main():
    async with etcdlock.AsyncClient() as client:
        pass
asyncio.run(main())
print("bye")
""",
    "asyncio-election-observe-many-permit": """
import asyncio, etcdlock
async def main():
    async with etcdlock.AsyncClient(namespace=NS) as client:
        async with await client.campaign("sched", "node-1") as leadership:
            await leadership.proclaim("node-1 v2")
            async for leader in await client.observe("sched"):
                break
        async with await client.acquire_many(["a", "b"], timeout=5):
            pass
        async with await client.acquire_permit("pool", 2):
            pass
asyncio.run(main())
print("bye")
""",
    "daemon-thread-waiting-at-exit": """
import threading, etcdlock
a = etcdlock.Client(namespace=NS)
b = etcdlock.Client(namespace=NS)
held = a.acquire("x")
started = threading.Event()
def wait():
    started.set()
    try:
        b.acquire("x")
    except etcdlock.LockError:
        pass
threading.Thread(target=wait, daemon=True).start()
started.wait()
print("bye")
""",
}


def run_once(code: str, ns: str, endpoints: List[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "ETCDLOCK_ENDPOINTS": ",".join(endpoints)}
    return subprocess.run(
        [sys.executable, "-c", f"NS = {ns!r}\n" + code], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_exit_cleanly_every_time(name: str, endpoints: List[str]) -> None:
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda i: run_once(PROGRAMS[name], f"exit-{name}-{os.getpid()}-{i}/", endpoints), range(RUNS)))
    bad = [(p.returncode, p.stderr[-300:]) for p in runs if p.returncode != 0 or p.stdout.split() != ["bye"]]
    assert not bad, f"{len(bad)} of {RUNS} runs of {name} did not exit cleanly; first: {bad[0]}"


HOLDER = """
import sys, time, etcdlock
if sys.argv[2] == "release":
    etcdlock.release_on_sigterm()
client = etcdlock.Client(ttl=10)
g = client.acquire(sys.argv[1])
print("held", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("release", [True, False])
def test_sigterm_with_release_on_sigterm_frees_the_lock_at_once(release: bool, endpoints: List[str], name: str) -> None:
    """With ``release_on_sigterm()`` a SIGTERMed holder's lock is free within
    1 s (the process exits 143 after its atexit handler revoked the lease);
    without it SIGTERM kills Python before atexit and the lock stays held until
    the TTL."""
    import etcdlock
    import signal
    import time

    env = {**os.environ, "ETCDLOCK_ENDPOINTS": ",".join(endpoints)}
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, name, "release" if release else "default"],
        env=env, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
        p.send_signal(signal.SIGTERM)
        with etcdlock.Client(endpoints=endpoints) as c:
            t0 = time.monotonic()
            if release:
                g = c.acquire(name, timeout=1)
                assert time.monotonic() - t0 <= 1.0
                g.unlock()
                assert p.wait(10) == 143
            else:
                assert p.wait(10) == -signal.SIGTERM
                with pytest.raises(etcdlock.TimeoutError):
                    c.acquire(name, timeout=1)
    finally:
        if p.poll() is None:
            p.kill()
