"""Reentrancy (core's ``lock_reentrant``): the owner is the calling thread
(sync) or the running asyncio task; a re-entry is another handle of the same
hold; a lost hold is never re-entered. Against real etcd."""

from __future__ import annotations

import asyncio
import threading
from typing import List, Optional

import pytest

import etcdlock
from conftest import etcdctl, etcdctl_keys, wait_until
from etcdlock._reentry import task_owner, thread_owner


def in_thread(fn):  # type: ignore[no-untyped-def]
    """Run ``fn`` on a new thread (another owner) and return its result."""
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(60)
    assert out, "the other thread did not return"
    return out[0]


def test_same_thread_reenters_the_same_hold(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    g1 = client.acquire(name, reentrant=True)
    g2 = client.acquire(name, timeout=0, reentrant=True)
    g3 = client.try_lock(name, reentrant=True)
    assert g3 is not None
    assert g1 is not g2
    assert g1.fencing_token == g2.fencing_token == g3.fencing_token
    assert g1.key == g2.key == g3.key
    assert len(etcdctl_keys(endpoints, name + "/")) == 1
    # Another thread is another owner: it does not get in.
    assert in_thread(lambda: client.try_lock(name, reentrant=True)) is None
    assert client.try_lock(name) is None  # a plain try_lock neither
    g3.unlock()
    g2.unlock()
    assert g1.is_held and g1.state == "held"
    assert g2.state == "released"
    g1.unlock()
    assert g1.state == "released"
    assert etcdctl_keys(endpoints, name + "/") == []


def test_plain_acquire_is_not_reentrant(client: etcdlock.Client, name: str) -> None:
    g = client.acquire(name, reentrant=True)
    with pytest.raises(etcdlock.TimeoutError):
        client.acquire(name, timeout=0.2)
    g.unlock()


def test_another_thread_waits_for_the_last_handle(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    g1 = client.acquire(name, reentrant=True)
    g2 = client.acquire(name, reentrant=True)
    got: List[etcdlock.Guard] = []
    t = threading.Thread(target=lambda: got.append(client.acquire(name, timeout=60, reentrant=True)))
    t.start()
    wait_until(lambda: len(etcdctl_keys(endpoints, name + "/")) == 2, what="the other thread's waiter key")
    g2.unlock()
    assert g1.is_held and not got  # one handle still holds it
    g1.unlock()
    t.join(60)
    assert got and got[0].fencing_token > g1.fencing_token
    got[0].unlock()


def test_a_lost_hold_is_never_reentered(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    g1 = client.acquire(name, reentrant=True)
    g2 = client.acquire(name, reentrant=True)
    etcdctl(endpoints, "del", g1.key)
    assert g1.lost.wait(10)
    assert g1.loss_reason == "KeyDeleted"
    with pytest.raises(etcdlock.LockLostError):
        client.acquire(name, timeout=0, reentrant=True)
    with pytest.raises(etcdlock.LockLostError):
        client.acquire(name, reentrant=True)  # would wait if it queued: it does not
    assert etcdctl_keys(endpoints, name + "/") == []
    # Another owner takes a fresh hold meanwhile.
    other = in_thread(lambda: client.acquire(name, timeout=10, reentrant=True))
    assert other.fencing_token > g1.fencing_token
    in_thread(other.unlock)
    # Once every handle of the lost hold is unlocked, the owner takes a new one.
    for g in (g2, g1):
        with pytest.raises(etcdlock.LockLostError):
            g.unlock()
    g3 = client.acquire(name, timeout=10, reentrant=True)
    assert g3.fencing_token > other.fencing_token
    g3.unlock()


def test_rlock_is_threading_rlock_shaped(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    rl = client.lock(name, reentrant=True)
    assert isinstance(rl, etcdlock.RLock)
    with rl as g1:
        with rl as g2:
            assert g1.fencing_token == g2.fencing_token
            assert rl._recursion_count() == 2
            assert rl.locked()
            # Another thread: not the owner, cannot take it, cannot release it.
            assert in_thread(lambda: rl.acquire(blocking=False)) is False
            err = in_thread(lambda: pytest.raises(RuntimeError, rl.release).value)
            assert isinstance(err, etcdlock.NotHeldError)
        assert g2.state == "released" and g1.is_held
    assert not rl.locked() and g1.state == "released"
    assert etcdctl_keys(endpoints, name + "/") == []
    with pytest.raises(RuntimeError):
        rl.release()


def test_two_rlocks_of_one_name_in_one_thread_are_one_hold(client: etcdlock.Client, name: str) -> None:
    a, b = etcdlock.RLock(client, name), etcdlock.RLock(client, name)
    assert a.acquire() and b.acquire(timeout=0)
    assert a.guard is not None and b.guard is not None
    assert a.guard.fencing_token == b.guard.fencing_token
    b.release()
    a.release()


def test_owner_namespaces_are_apart() -> None:
    assert thread_owner() < 1 << 63

    async def main() -> "tuple[int, int, int]":
        mine = task_owner()
        await asyncio.sleep(0)
        assert task_owner() == mine  # one task, one owner
        t2 = await asyncio.create_task(_owner_of_task())
        return mine, t2, thread_owner()

    a, b, t = asyncio.run(main())
    assert a >= 1 << 63 and b >= 1 << 63 and a != b and t < 1 << 63


async def _owner_of_task() -> int:
    return task_owner()


def test_asyncio_owner_is_the_task(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints) as c:
            g1 = await c.acquire(name, reentrant=True)
            g2 = await c.acquire(name, timeout=0, reentrant=True)
            assert g1.fencing_token == g2.fencing_token and g1.key == g2.key

            async def other() -> Optional[etcdlock.AsyncGuard]:
                return await c.try_lock(name, reentrant=True)

            assert await asyncio.create_task(other()) is None
            waiter = asyncio.create_task(c.acquire(name, timeout=60, reentrant=True))
            await asyncio.to_thread(wait_until, lambda: len(etcdctl_keys(endpoints, name + "/")) == 2)
            await g2.unlock()
            assert g1.is_held and not waiter.done()
            await g1.unlock()
            g3 = await waiter
            assert g3.fencing_token > g1.fencing_token
            await g3.unlock()

            rl = c.lock(name, reentrant=True)
            assert isinstance(rl, etcdlock.AsyncRLock)
            async with rl as a1:
                async with rl as a2:
                    assert a1.fencing_token == a2.fencing_token
                    assert await asyncio.create_task(rl.acquire(timeout=0)) is False

                    async def release_elsewhere() -> None:
                        await rl.release()

                    with pytest.raises(RuntimeError):
                        await asyncio.create_task(release_elsewhere())
                assert a1.is_held and a2.state == "released"
            assert a1.state == "released"
            assert etcdctl_keys(endpoints, name + "/") == []

    asyncio.run(main())


def test_asyncio_lost_hold_is_never_reentered(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints) as c:
            g = await c.acquire(name, reentrant=True)
            await asyncio.to_thread(etcdctl, endpoints, "del", g.key)
            assert await g.wait_lost(10)
            with pytest.raises(etcdlock.LockLostError):
                await c.try_lock(name, reentrant=True)
            with pytest.raises(etcdlock.LockLostError):
                await g.unlock()
            g2 = await c.acquire(name, timeout=10, reentrant=True)
            assert g2.fencing_token > g.fencing_token
            await g2.unlock()

    asyncio.run(main())
