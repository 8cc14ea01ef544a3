"""The package's pytest plugin (``etcdlock.pytest_plugin``, the ``pytest11``
entry point ``etcdlock``): the fixtures reach these tests from the installed
package, not from conftest.py, and serve the test a user writes first: "my
job stops writing when it loses its lock", blocking and asyncio, for each
way a hold is lost."""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from typing import Any, Callable, Dict, List, Optional

import pytest

import etcdlock
import etcdlock.pytest_plugin

FIXTURES = list(etcdlock.pytest_plugin.__all__)


# The code under test: a job that writes while it holds its lock (its guard
# where a health check would read it).


class Export:
    """A row every 10 ms while holding the lock "export"; stops as soon as
    the hold is lost (the ``with`` then raises LockLostError: why)."""

    def __init__(self, client: etcdlock.Client, rows: "queue.Queue[int]") -> None:
        self.client, self.rows = client, rows
        self.guard: Optional[etcdlock.Guard] = None

    def run(self) -> None:
        with self.client.lock("export", timeout=5) as self.guard:
            row = 0
            while not self.guard.lost.wait(0.01):
                self.rows.put(row)
                row += 1


class AsyncExport:
    """``Export`` for asyncio."""

    def __init__(self, client: etcdlock.AsyncClient, rows: "asyncio.Queue[int]") -> None:
        self.client, self.rows = client, rows
        self.guard: Optional[etcdlock.AsyncGuard] = None

    async def run(self) -> None:
        async with self.client.lock("export", timeout=5) as self.guard:
            row = 0
            while not await self.guard.wait_lost(0.01):
                await self.rows.put(row)
                row += 1


def lose(store: etcdlock.MemStore, how: str) -> None:
    """Make the hold of "export" be lost, `how`: found in the store, as a
    test does when the job keeps its guard to itself."""
    (key,) = store.keys("export/")
    if how == "LeaseExpired":
        assert store.expire_lease(key.lease_id)
    elif how == "KeyDeleted":
        assert store.delete_key(key.key)
    else:
        store.stall(key.lease_id, 60)


@pytest.fixture
def etcdlock_client_options() -> Dict[str, Any]:
    """The plugin's fixture, overridden for this module: TTL 3 s for every
    client, so a stalled one loses its hold within ~2.5 s."""
    return {"ttl": 3}


# ConnectionLost (a stall, ~2.5 s) once, through asyncio; test_mem_store.py stalls a blocking client.
@pytest.mark.parametrize("how", ["LeaseExpired", "KeyDeleted"])
def test_the_job_stops_writing_when_it_loses_its_lock(etcdlock_store: etcdlock.MemStore, etcdlock_client: etcdlock.Client, how: str) -> None:
    rows: "queue.Queue[int]" = queue.Queue()
    job = Export(etcdlock_client, rows)
    pool = ThreadPoolExecutor(1)
    running = pool.submit(job.run)
    assert rows.get(timeout=5) == 0 and job.guard  # it holds the lock and writes
    assert [k.lease_id for k in etcdlock_store.keys("export/")] == [job.guard.lease_id]
    lose(etcdlock_store, how)
    assert job.guard.lost.wait(6)  # the loss is reported...
    written = rows.qsize()
    lost = running.exception(timeout=5)  # ...the job stops, and says why
    assert isinstance(lost, etcdlock.LockLostError), lost
    assert lost.reason == job.guard.loss_reason == how
    assert rows.qsize() <= written + 1, "at most the row it was writing at the report"
    assert etcdlock_store.keys("export/") == [], "its key is gone with the hold"
    pool.shutdown()


@pytest.mark.parametrize("how", ["LeaseExpired", "ConnectionLost"])
def test_the_async_job_stops_writing_when_it_loses_its_lock(
    etcdlock_store: etcdlock.MemStore, etcdlock_async_client: etcdlock.AsyncClient, how: str
) -> None:
    async def scenario() -> None:
        rows: "asyncio.Queue[int]" = asyncio.Queue()
        job = AsyncExport(etcdlock_async_client, rows)
        running = asyncio.create_task(job.run())
        assert await asyncio.wait_for(rows.get(), 5) == 0 and job.guard
        lose(etcdlock_store, how)
        assert await job.guard.wait_lost(6)
        written = rows.qsize()
        with pytest.raises(etcdlock.LockLostError) as lost:
            await asyncio.wait_for(running, 5)
        assert lost.value.reason == how
        assert rows.qsize() <= written + 1

    asyncio.run(scenario())


def test_a_job_that_ignores_the_loss_fails_that_test(etcdlock_store: etcdlock.MemStore, etcdlock_client: etcdlock.Client) -> None:
    """The test above can fail: a job that does not watch its lock goes on
    writing after the loss is reported, and does not stop."""

    class Careless(Export):
        stop = False

        def run(self) -> None:
            with self.client.lock("export", timeout=5) as self.guard:
                row = 0
                while not self.stop:
                    self.rows.put(row)
                    row += 1
                    time.sleep(0.01)

    rows: "queue.Queue[int]" = queue.Queue()
    job = Careless(etcdlock_client, rows)
    pool = ThreadPoolExecutor(1)
    running = pool.submit(job.run)
    assert rows.get(timeout=5) == 0 and job.guard
    lose(etcdlock_store, "LeaseExpired")
    assert job.guard.lost.wait(5)
    written = rows.qsize()
    try:
        with pytest.raises(concurrent.futures.TimeoutError):
            running.exception(timeout=0.3)
        assert rows.qsize() > written + 1
    finally:
        job.stop = True
        pool.shutdown()


def test_each_test_gets_a_store_of_its_own(etcdlock_store: etcdlock.MemStore, etcdlock_client: etcdlock.Client, etcdlock_make_client: Callable[..., etcdlock.Client]) -> None:
    assert etcdlock_store.name.startswith("test_each_test_gets_a_store_of_its_own-")
    assert etcdlock_client.endpoints == etcdlock_store.endpoint
    assert etcdlock_client.ttl == 3, "etcdlock_client_options reach the client"
    assert etcdlock_make_client(ttl=5).ttl == 5, "make's options win"
    assert etcdlock_store.keys() == []
    assert etcdlock.MemStore(etcdlock_store.name).keys() == [], "another test's locks are not here"


def test_the_async_client_connects_in_the_tests_loop(etcdlock_store: etcdlock.MemStore, etcdlock_async_client: etcdlock.AsyncClient) -> None:
    assert etcdlock_async_client.endpoints is None, "not connected before the test's loop runs"

    async def scenario() -> List[int]:
        async with etcdlock_async_client.lock("a", timeout=5) as g:
            return [g.lease_id, *(k.lease_id for k in etcdlock_store.keys("a/"))]

    lease, held_on = asyncio.run(scenario())
    assert lease == held_on
    assert etcdlock_async_client.endpoints == etcdlock_store.endpoint


def test_the_fixtures_come_from_the_installed_entry_point(request: pytest.FixtureRequest) -> None:
    (ep,) = [e for e in metadata.entry_points(group="pytest11") if e.name == "etcdlock"]
    assert ep.value == "etcdlock.pytest_plugin"
    assert request.config.pluginmanager.get_plugin("etcdlock") is etcdlock.pytest_plugin
    # Not a conftest's: the suite's conftest.py defines none of them.
    import conftest

    assert [f for f in FIXTURES if hasattr(conftest, f)] == []
    assert FIXTURES == [
        "etcdlock_client_options",
        "etcdlock_store",
        "etcdlock_make_client",
        "etcdlock_client",
        "etcdlock_make_async_client",
        "etcdlock_async_client",
    ]


def test_a_clean_project_finds_the_fixtures_and_can_turn_them_off(tmp_path: Any) -> None:
    """A directory with one test module and no conftest.py, run by the
    venv's pytest: the fixtures are there; with ``-p no:etcdlock`` they are not."""
    (tmp_path / "test_user.py").write_text(
        "def test_store(etcdlock_store, etcdlock_client):\n"
        "    g = etcdlock_client.acquire('job', timeout=5)\n"
        "    assert etcdlock_store.expire_lease(g.lease_id) and g.lost.wait(5)\n"
        "    assert g.loss_reason == 'LeaseExpired'\n",
        encoding="utf-8",
    )
    def pytest_in(*args: str) -> "subprocess.CompletedProcess[str]":
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args, "test_user.py"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60)

    on = pytest_in()
    assert on.returncode == 0 and "1 passed" in on.stdout, on.stdout + on.stderr
    off = pytest_in("-p", "no:etcdlock")
    assert off.returncode != 0 and "fixture 'etcdlock_store' not found" in off.stdout, off.stdout
