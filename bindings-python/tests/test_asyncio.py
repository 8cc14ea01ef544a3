"""The behaviour suite again, through the asyncio API."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from typing import List

import pytest

import etcdlock
from conftest import etcdctl, etcdctl_keys


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


async def wait_keys(endpoints: List[str], prefix: str, n: int, timeout: float = 10) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(await asyncio.to_thread(etcdctl_keys, endpoints, prefix)) != n:
        assert loop.time() < deadline, f"timed out waiting for {n} keys under {prefix}"
        await asyncio.sleep(0.02)


def test_async_uncontended(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as c:
            assert c.ttl == 15
            async with c.lock(name, timeout=5) as g:
                assert isinstance(g, etcdlock.AsyncGuard)
                assert g.is_held and g.key.startswith(name + "/") and g.fencing_token > 0 and g.lease_id > 0
                assert etcdctl_keys(endpoints, name + "/") == [g.key]
            assert not g.is_held and g.state == "released"
            assert etcdctl_keys(endpoints, name + "/") == []

    run(main())


def test_async_lock_shape_and_try(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as c:
            lock = c.lock(name)
            assert await lock.acquire() is True and lock.locked()
            other = c.lock(name)
            assert await other.acquire(timeout=0) is False
            assert await other.acquire(timeout=0.2) is False
            assert await c.try_lock(name) is None
            await lock.release()
            with pytest.raises(etcdlock.NotHeldError):
                await lock.release()
            g = await c.try_lock(name)
            assert g is not None and g.is_held
            await g.unlock()
            await g.unlock()

    run(main())


def test_async_timeout_leaves_no_key(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as a, etcdlock.AsyncClient(endpoints=endpoints) as b:
            holder = await a.acquire(name)
            with pytest.raises(etcdlock.TimeoutError):
                async with b.lock(name, timeout=0.3):
                    pytest.fail("body ran without the lock")
            await wait_keys(endpoints, name + "/", 1)
            assert etcdctl_keys(endpoints, name + "/") == [holder.key]
            await holder.unlock()

    run(main())


def test_async_cancel_removes_waiter_key(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as c:
            holder = await c.acquire(name)
            task = asyncio.ensure_future(c.acquire(name))
            await wait_keys(endpoints, name + "/", 2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await wait_keys(endpoints, name + "/", 1)
            await holder.unlock()
            # the lock is free again, nobody left in the queue
            g = await c.try_lock(name)
            assert g is not None
            await g.unlock()

    run(main())


def test_async_fifo_and_fencing(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as c:
            holder = await c.acquire(name)
            order: List[int] = []
            tokens: List[int] = [holder.fencing_token]
            # One client per waiter: waiters of one client queue locally with
            # at most 2 keys in etcd at a time (core's window), so only
            # waiters of different clients each show a key queued in etcd.
            waiters = [await etcdlock.AsyncClient(endpoints=endpoints).connect() for _ in range(5)]

            async def waiter(i: int) -> None:
                async with waiters[i].lock(name, timeout=30) as g:
                    order.append(i)
                    tokens.append(g.fencing_token)

            tasks = []
            try:
                for i in range(5):
                    tasks.append(asyncio.ensure_future(waiter(i)))
                    await wait_keys(endpoints, name + "/", i + 2)
                await holder.unlock()
                await asyncio.gather(*tasks)
            finally:
                for w in waiters:
                    await w.close()
            assert order == list(range(5))
            assert tokens == sorted(tokens) and len(set(tokens)) == 6

    run(main())


def test_async_mutual_exclusion_counter(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as c1, etcdlock.AsyncClient(endpoints=endpoints) as c2:
            async def worker(c: etcdlock.AsyncClient) -> None:
                for _ in range(5):
                    async with c.lock(name, timeout=30) as g:
                        v = int(await g.get(name + "-n") or b"0")
                        await asyncio.sleep(0)
                        await g.put(name + "-n", str(v + 1))

            await asyncio.gather(*(worker(c) for c in (c1, c2, c1, c2)))
            async with c1.lock(name) as g:
                assert await g.get(name + "-n") == b"20"
                assert await g.delete(name + "-n") is True
                assert await g.delete(name + "-n") is False

    run(main())


def test_async_loss(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as c:
            g = await c.acquire(name)
            fired = threading.Event()
            g.on_lost(lambda r: fired.set())
            assert await g.wait_lost(0.05) is False
            await asyncio.to_thread(etcdctl, endpoints, "del", g.key)
            assert await g.wait_lost(10) is True
            assert g.loss_reason == "KeyDeleted" and g.lost.is_set()
            with pytest.raises(etcdlock.LockLostError) as ei:
                await g.put(name + "-x", "y")
            assert ei.value.reason == "KeyDeleted"
            with pytest.raises(etcdlock.LockLostError):
                await g.unlock()
            assert await asyncio.to_thread(fired.wait, 10)

    run(main())


def test_async_errors(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        with pytest.raises(etcdlock.UnavailableError):
            await etcdlock.AsyncClient(endpoints=["127.0.0.1:1"], connect_timeout=0.5).connect()
        with pytest.raises(etcdlock.InvalidArgumentError):
            await etcdlock.AsyncClient(endpoints=endpoints, ttl=0).connect()
        c = etcdlock.AsyncClient(endpoints=endpoints)
        with pytest.raises(etcdlock.InvalidArgumentError):
            await c.acquire("")
        with pytest.raises(TypeError):
            await c.acquire(3)  # type: ignore[arg-type]
        await c.close()
        with pytest.raises(etcdlock.ClosedError):
            await c.acquire(name)

    run(main())


def test_async_does_not_block_the_loop(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as c:
            holder = await c.acquire(name)
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.01)

            t = asyncio.ensure_future(ticker())
            with pytest.raises(etcdlock.TimeoutError):
                await c.acquire(name, timeout=0.5)
            t.cancel()
            assert ticks >= 20
            await holder.unlock()

    run(main())


def test_one_native_runtime_for_sync_and_async(endpoints: List[str], name: str) -> None:
    import os

    def thread_names() -> List[str]:
        names = []
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    names.append(f.read().strip())
            except OSError:
                pass
        return names

    with etcdlock.Client(endpoints=endpoints) as c, c.lock(name):
        pass
    # (etcdlock-log is the one thread that hands core's records to logging;
    # etcdlock-wake wakes loops without add_reader: neither is a runtime.)
    ours = ("etcdlock-log", "etcdlock-wake")
    before = sorted(n for n in thread_names() if n.startswith(("etcdlock", "tokio")) and n not in ours)

    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as ac:
            async with ac.lock(name):
                pass

    run(main())
    after = sorted(n for n in thread_names() if n.startswith(("etcdlock", "tokio")) and n not in ours)
    # asyncio ran on the runtime the blocking API already started: no new runtime threads
    # (only worker and blocking-pool threads of the one "etcdlock-rt" runtime;
    # a second runtime would bring "tokio-runtime-worker" threads)
    assert before and set(before) == {"etcdlock-rt"}
    assert set(after) == {"etcdlock-rt"}
    assert len(after) <= len(before) + 2


def test_async_calls_from_loops_in_threads_and_a_stopped_loop(endpoints: List[str], name: str) -> None:
    """Each loop gets its own completions: three loops in three threads take
    turns on one name (mutual exclusion across loops, no future settled on
    the wrong loop), and a call that completes while its loop is stopped is
    applied when the loop runs again."""
    guard = threading.Lock()
    inside = [0, 0]  # now, most at once
    rounds = [0]
    errors: List[BaseException] = []

    def worker() -> None:
        async def main() -> None:
            async with etcdlock.AsyncClient(endpoints=endpoints) as c:
                for _ in range(15):
                    async with c.lock(name, timeout=30):
                        with guard:
                            inside[0] += 1
                            inside[1] = max(inside)
                        await asyncio.sleep(0.001)
                        with guard:
                            inside[0] -= 1
                            rounds[0] += 1

        try:
            run(main())
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors and rounds[0] == 45 and inside[1] == 1

    loop = asyncio.new_event_loop()
    try:
        c = loop.run_until_complete(etcdlock.AsyncClient(endpoints=endpoints).connect())
        task = loop.create_task(c.acquire(name, timeout=10))
        loop.run_until_complete(asyncio.sleep(0))  # the call is on its way
        # The loop is not running while the lock is granted.
        deadline = 100
        while len(etcdctl_keys(endpoints, name + "/")) != 1 and deadline:
            deadline -= 1
            threading.Event().wait(0.05)
        assert deadline, "the lock was never granted"
        g = loop.run_until_complete(asyncio.wait_for(task, 10))
        assert g.is_held
        loop.run_until_complete(g.unlock())
        loop.run_until_complete(c.close())
    finally:
        loop.close()


def test_a_thread_holding_the_gil_never_stalls_the_runtime(endpoints: List[str], name: str) -> None:
    """asyncio completions never make a runtime worker wait for the GIL.
    Calls complete on two loops (as many as the runtime has workers) while a
    CPU-bound thread keeps the GIL for twice the TTL: a lock held by the same
    process must keep its lease (its keep-alive runs on those workers). When
    workers settled asyncio futures with loop.call_soon_threadsafe, each took
    the GIL to do so, both waited here, and the hold was lost."""
    import sys
    import time

    stop = threading.Event()
    started = threading.Barrier(3, timeout=30)
    rounds = [0, 0]
    errors: List[BaseException] = []

    def churn(i: int) -> None:
        async def main() -> None:
            async with etcdlock.AsyncClient(endpoints=endpoints) as c:
                await c.connect()
                started.wait()
                while not stop.is_set():
                    g = await c.acquire(f"{name}-{i}", timeout=30)
                    await g.unlock()
                    rounds[i] += 1

        try:
            run(main())
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    with etcdlock.Client(endpoints=endpoints, ttl=2) as c:
        held = c.acquire(name)
        threads = [threading.Thread(target=churn, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        started.wait()
        deadline = time.monotonic() + 10
        while min(rounds) == 0 and time.monotonic() < deadline:  # both loops are taking rounds
            time.sleep(0.01)
        assert min(rounds) > 0 and not errors
        old = sys.getswitchinterval()
        sys.setswitchinterval(30)  # nobody takes the GIL from this thread ...
        try:
            end = time.monotonic() + 4.0  # ... for twice the TTL
            while time.monotonic() < end:
                pass
        finally:
            sys.setswitchinterval(old)
        stop.set()
        for t in threads:
            t.join(30)
        assert not errors
        assert held.is_held, f"the hold was lost: {held.loss_reason}"
        assert etcdctl_keys(endpoints, name + "/") == [held.key]
        held.unlock()


# ===== How completions wake the loop =====
#
# `reader` (add_reader on a socket pair) is the Unix default; `threadsafe`
# (call_soon_threadsafe from one waker thread) serves Windows' Proactor loop
# and any loop without add_reader. test.sh runs this file and CPython's
# asyncio lock tests again with ETCDLOCK_PY_ASYNCIO_WAKEUP=threadsafe.

_FORCED = os.environ.get("ETCDLOCK_PY_ASYNCIO_WAKEUP") == "threadsafe"


def test_completions_mode_of_the_default_loop() -> None:
    from etcdlock import _etcdlock

    async def main() -> str:
        return _etcdlock._completions_mode()

    expected = "threadsafe" if (_FORCED or sys.platform == "win32") else "reader"
    assert asyncio.run(main()) == expected


class _NoReaderLoop(asyncio.SelectorEventLoop):
    """A loop shaped like Windows' Proactor loop: add_reader is not there."""

    def add_reader(self, fd, callback, *args):  # type: ignore[no-untyped-def,override]
        raise NotImplementedError


def test_a_loop_without_add_reader_is_woken_threadsafe(endpoints: List[str], name: str) -> None:
    from etcdlock import _etcdlock

    async def main() -> None:
        assert _etcdlock._completions_mode() == "threadsafe"
        async with etcdlock.AsyncClient(endpoints=endpoints) as c:
            async with c.lock(name, timeout=5) as g:
                assert g.is_held
                assert await c.try_lock(name) is None

                async def waiter() -> int:
                    async with c.lock(name, timeout=10) as g2:
                        return g2.fencing_token

                w = asyncio.ensure_future(waiter())
                await wait_keys(endpoints, name + "/", 2)
                token = g.fencing_token
            assert await asyncio.wait_for(w, 10) > token
            # Many completions in flight at once, settled in batches.
            counter = 0

            async def bump() -> None:
                nonlocal counter
                async with c.lock(name, timeout=30):
                    v = counter
                    await asyncio.sleep(0)
                    counter = v + 1

            await asyncio.gather(*(bump() for _ in range(20)))
            assert counter == 20

    loop = _NoReaderLoop()
    try:
        loop.run_until_complete(asyncio.wait_for(main(), 60))
    finally:
        loop.close()
