"""The blocking and the asyncio client offer the same operations; ping and the
asyncio semaphore behave like their blocking twins."""

from __future__ import annotations

import asyncio
import inspect
from typing import List

import pytest

import etcdlock

# What only one of the two has, and why.
ONLY_SYNC: set = set()
ONLY_ASYNC = {"connect"}  # AsyncClient connects on first use or on `await connect()`


def public(cls: type) -> set:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_client_and_async_client_have_the_same_surface() -> None:
    sync, aio = public(etcdlock.Client), public(etcdlock.AsyncClient)
    assert sync - aio == ONLY_SYNC, f"missing on AsyncClient: {sorted(sync - aio - ONLY_SYNC)}"
    assert aio - sync == ONLY_ASYNC, f"missing on Client: {sorted(aio - sync - ONLY_ASYNC)}"
    for n in sorted(sync & aio):
        a, b = getattr(etcdlock.Client, n), getattr(etcdlock.AsyncClient, n)
        if callable(a) and not isinstance(a, property):
            pa = list(inspect.signature(a).parameters)
            pb = list(inspect.signature(b).parameters)
            assert pa == pb, f"{n}: {pa} != {pb}"


def test_ping_answers_and_fails_fast_when_etcd_is_gone(endpoints: List[str]) -> None:
    with etcdlock.Client(endpoints) as c:
        rtt = c.ping()
        assert 0 < rtt < 2.0
    c.close()
    with pytest.raises(etcdlock.ClosedError):
        c.ping()

    async def main() -> float:
        async with etcdlock.AsyncClient(endpoints) as ac:
            return await ac.ping()

    assert 0 < asyncio.run(main()) < 2.0


def test_async_semaphore_admits_exactly_permits(endpoints: List[str], name: str) -> None:
    permits, tasks = 3, 12
    inside = 0
    most = 0
    entered = 0

    async def main() -> None:
        nonlocal inside, most, entered
        async with etcdlock.AsyncClient(endpoints) as c:
            sem = c.semaphore(name, permits, timeout=20)
            assert repr(sem).startswith("<etcdlock.AsyncSemaphore")

            async def one() -> None:
                nonlocal inside, most, entered
                async with sem as permit:
                    assert permit.is_held
                    inside += 1
                    entered += 1
                    most = max(most, inside)
                    await asyncio.sleep(0.05)
                    inside -= 1
                    assert permit.is_held

            await asyncio.gather(*(one() for _ in range(tasks)))
            assert sem.held == 0
            # acquire/release by hand, and locked() once every permit is taken here.
            for _ in range(permits):
                assert await sem.acquire()
            assert sem.locked() and sem.held == permits
            assert await sem.acquire(timeout=0) is False
            for _ in range(permits):
                await sem.release()
            with pytest.raises(etcdlock.NotHeldError):
                await sem.release()
            assert (await c.status(name)).holders == []

    asyncio.run(main())
    assert (entered, most) == (tasks, permits)
