"""Semaphore, read-write lock, multi-lock, election and the queue view,
through the Python API (sync and asyncio), against real etcd. The recipes
themselves are core's (core/tests/{semaphore,rwlock,multi,election}.rs test
them at scale); these tests pin what Python adds: the shapes, the idioms, the
error mapping, and that nothing is left behind in etcd."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional

import pytest

import etcdlock
from conftest import etcdctl, etcdctl_keys, wait_until


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


# ---------------------------------------------------------------- semaphore


def test_three_permits_are_held_at_once_and_a_fourth_waits(endpoints: List[str], name: str) -> None:
    clients = [etcdlock.Client(endpoints=endpoints) for _ in range(2)]
    try:
        barrier = threading.Barrier(3, timeout=20)
        permits: List[etcdlock.Guard] = []
        mu = threading.Lock()

        def holder(i: int) -> None:
            g = clients[i % 2].acquire_permit(name, 3, timeout=20)
            with mu:
                permits.append(g)
            barrier.wait()  # passes only when 3 permits are held at the same time

        with ThreadPoolExecutor(3) as ex:
            list(ex.map(holder, range(3)))
        assert len({g.key for g in permits}) == 3
        assert sorted(etcdctl_keys(endpoints, name + "/")) == sorted(g.key for g in permits)
        assert all(g.is_held for g in permits)
        # A fourth: one try fails and writes nothing; a wait is served by a release.
        with pytest.raises(etcdlock.TimeoutError):
            clients[0].acquire_permit(name, 3, timeout=0)
        assert len(etcdctl_keys(endpoints, name + "/")) == 3
        got: List[etcdlock.Guard] = []
        t = threading.Thread(target=lambda: got.append(clients[1].acquire_permit(name, 3, timeout=20)))
        t.start()
        wait_until(lambda: len(etcdctl_keys(endpoints, name + "/")) == 4, what="the fourth contender's key")
        assert not got
        oldest = min(permits, key=lambda g: g.fencing_token)
        oldest.unlock()
        t.join(20)
        assert len(got) == 1 and got[0].is_held
        for g in permits[:]:
            g.unlock()
        got[0].unlock()
        assert etcdctl_keys(endpoints, name + "/") == []
    finally:
        for c in clients:
            c.close()


def test_semaphore_never_has_more_holders_than_permits(endpoints: List[str], name: str) -> None:
    clients = [etcdlock.Client(endpoints=endpoints) for _ in range(3)]
    try:
        active = peak = done = 0
        mu = threading.Lock()

        def contender(i: int) -> None:
            nonlocal active, peak, done
            sem = clients[i % 3].semaphore(name, 3, timeout=30)
            for _ in range(5):
                with sem as permit:
                    assert permit.is_held
                    with mu:
                        active += 1
                        peak = max(peak, active)
                    # A guarded write proves the permit is still ours in etcd.
                    permit.put(f"{name}-ledger/{permit.key.rsplit('/', 1)[1]}", b"x")
                    with mu:
                        active -= 1
                        done += 1

        with ThreadPoolExecutor(9) as ex:
            list(ex.map(contender, range(9)))
        assert done == 45
        assert 1 <= peak <= 3
        assert etcdctl_keys(endpoints, name + "/") == []
    finally:
        for c in clients:
            c.close()


def test_semaphore_handle_has_threading_shape(client: etcdlock.Client, name: str) -> None:
    sem = client.semaphore(name, 2)
    assert sem.acquire() is True
    assert sem.acquire(timeout=5) is True
    assert sem.held == 2
    assert sem.acquire(blocking=False) is False
    assert sem.acquire(timeout=0.2) is False
    with pytest.raises(ValueError):
        sem.acquire(blocking=False, timeout=1)
    sem.release()
    sem.release()
    with pytest.raises(etcdlock.NotHeldError) as e:
        sem.release()
    assert isinstance(e.value, RuntimeError)
    assert "permits=2 held=0" in repr(sem)


def test_semaphore_bad_input_and_mismatched_count(client: etcdlock.Client, name: str, endpoints: List[str]) -> None:
    for bad in (0, -1, etcdlock.MAX_PERMITS + 1, 2**40):
        with pytest.raises(etcdlock.InvalidArgumentError):
            client.acquire_permit(name, bad, timeout=1)
    with pytest.raises(TypeError):
        client.acquire_permit(name, "3", timeout=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.semaphore(name, 2.0)  # type: ignore[arg-type]
    with client.acquire_permit(name, 3) as g:
        with pytest.raises(etcdlock.InvalidArgumentError) as e:
            client.acquire_permit(name, 2, timeout=5)
        assert "3" in str(e.value)
        assert etcdctl_keys(endpoints, name + "/") == [g.key]
    assert etcdctl_keys(endpoints, name + "/") == []


# ------------------------------------------------------------ read-write lock


def test_readers_share_and_a_queued_writer_goes_before_later_readers(endpoints: List[str], name: str) -> None:
    a, b = etcdlock.Client(endpoints=endpoints), etcdlock.Client(endpoints=endpoints)
    try:
        r1 = a.acquire_read(name, timeout=5)
        r2 = b.acquire_read(name, timeout=5)  # overlaps r1
        assert r1.is_held and r2.is_held and r1.key.endswith("-r")
        assert b.try_lock(name) is None  # a writer is excluded while readers hold
        wrote: List[etcdlock.Guard] = []
        t = threading.Thread(target=lambda: wrote.append(b.acquire(name, timeout=20)))
        t.start()
        wait_until(lambda: len(etcdctl_keys(endpoints, name + "/")) == 3, what="the writer's key")
        # A reader after the waiting writer waits for it (FIFO: no writer starvation).
        with pytest.raises(etcdlock.TimeoutError):
            a.acquire_read(name, timeout=0)
        assert len(etcdctl_keys(endpoints, name + "/")) == 3
        later: List[etcdlock.Guard] = []
        t2 = threading.Thread(target=lambda: later.append(a.acquire_read(name, timeout=20)))
        t2.start()
        wait_until(lambda: len(etcdctl_keys(endpoints, name + "/")) == 4, what="the later reader's key")
        r1.unlock()
        assert not wrote
        r2.unlock()
        t.join(20)
        assert len(wrote) == 1 and wrote[0].is_held
        assert not later  # still behind the writer
        wrote[0].unlock()
        t2.join(20)
        assert len(later) == 1 and later[0].is_held
        later[0].unlock()
        assert etcdctl_keys(endpoints, name + "/") == []
    finally:
        a.close()
        b.close()


def test_an_etcdctl_lock_holder_excludes_python_readers(endpoints: List[str], name: str, client: etcdlock.Client) -> None:
    p = subprocess.Popen(
        ["etcdctl", "--endpoints", ",".join(endpoints), "lock", name],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "ETCDCTL_API": "3"},
    )
    try:
        assert p.stdout is not None
        held_key = p.stdout.readline().strip()  # etcdctl prints its key once it holds
        assert held_key.startswith(name + "/")
        with pytest.raises(etcdlock.TimeoutError):
            client.acquire_read(name, timeout=0.3)
        assert etcdctl_keys(endpoints, name + "/") == [held_key]
    finally:
        p.send_signal(signal.SIGINT)  # etcdctl unlocks / resigns on SIGINT only
        p.wait(10)
    with client.acquire_read(name, timeout=10) as g:
        assert g.is_held


# ---------------------------------------------------------------- multi-lock


def test_acquire_many_holds_all_names_with_one_revision(endpoints: List[str], name: str, client: etcdlock.Client) -> None:
    names = [f"{name}-a", f"{name}-b", f"{name}-c"]
    other = etcdlock.Client(endpoints=endpoints)
    try:
        with client.acquire_many(names, timeout=5) as m:
            assert isinstance(m, etcdlock.MultiGuard)
            assert m.names == names and m.is_held and m.loss is None
            assert len(set(m.fencing_tokens)) == 1  # one Txn created every key
            for n, k in zip(names, m.keys):
                assert etcdctl_keys(endpoints, n + "/") == [k]
                assert other.try_lock(n) is None
            # A one-try on an overlapping set fails and leaves no key anywhere.
            with pytest.raises(etcdlock.TimeoutError):
                other.acquire_many([f"{name}-z", names[1]], timeout=0)
            assert etcdctl_keys(endpoints, f"{name}-z/") == []
        assert not m.is_held
        for n in names:
            assert etcdctl_keys(endpoints, n + "/") == []
    finally:
        other.close()


def test_acquire_many_in_opposite_orders_never_deadlocks(endpoints: List[str], name: str) -> None:
    a, b = f"{name}-a", f"{name}-b"
    clients = [etcdlock.Client(endpoints=endpoints) for _ in range(2)]
    counter = {"n": 0, "in": 0, "bad": 0}
    mu = threading.Lock()

    def worker(i: int) -> None:
        order = [a, b] if i % 2 == 0 else [b, a]
        for _ in range(15):
            with clients[i % 2].acquire_many(order, timeout=30):
                with mu:
                    counter["in"] += 1
                    counter["bad"] += counter["in"] > 1
                with mu:
                    counter["in"] -= 1
                    counter["n"] += 1

    try:
        with ThreadPoolExecutor(4) as ex:
            list(ex.map(worker, range(4)))
        assert counter == {"n": 60, "in": 0, "bad": 0}
    finally:
        for c in clients:
            c.close()


def test_acquire_many_bad_input(client: etcdlock.Client, name: str) -> None:
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.acquire_many([])
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.acquire_many([f"{name}-{i}" for i in range(etcdlock.MAX_MULTI + 1)])
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.acquire_many([name, name])
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.acquire_many([name, ""])
    with pytest.raises(TypeError):
        client.acquire_many(name)  # a str is not a list of names
    with pytest.raises(etcdlock.InvalidArgumentError):
        client.acquire_many([name, "x\udc00"])


# ------------------------------------------------------------------ election


def test_campaign_proclaim_resign_and_observe(endpoints: List[str], name: str) -> None:
    a, b = etcdlock.Client(endpoints=endpoints), etcdlock.Client(endpoints=endpoints)
    try:
        assert a.leader(name) is None
        obs = b.observe(name)
        assert obs.next(timeout=5) is None  # "no leader" is a state too
        lead = a.campaign(name, "node-a", timeout=5)
        assert isinstance(lead, etcdlock.Leadership) and isinstance(lead, etcdlock.Guard)
        now = obs.next(timeout=5)
        assert now == etcdlock.Leader(key=lead.key, value=b"node-a", revision=lead.fencing_token, lease_id=lead.lease_id)
        assert b.leader(name) == now
        lead.proclaim(b"node-a v2")
        assert obs.next(timeout=5).value == b"node-a v2"  # type: ignore[union-attr]
        # etcdctl sees the same election.
        assert etcdctl(endpoints, "get", lead.key, "--print-value-only").strip() == "node-a v2"
        won: List[etcdlock.Leadership] = []
        t = threading.Thread(target=lambda: won.append(b.campaign(name, "node-b", timeout=20)))
        t.start()
        wait_until(lambda: len(etcdctl_keys(endpoints, name + "/")) == 2, what="the second candidate's key")
        lead.resign()
        t.join(20)
        assert len(won) == 1
        assert obs.next(timeout=5).value == b"node-b"  # type: ignore[union-attr]
        with won[0]:
            pass  # with resigns
        assert obs.next(timeout=5) is None
        assert b.leader(name) is None
        with pytest.raises(etcdlock.TimeoutError):
            obs.next(timeout=0.2)
    finally:
        a.close()
        b.close()


def test_a_deposed_leader_cannot_proclaim(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    lead = client.campaign(name, "v1")
    etcdctl(endpoints, "del", lead.key)
    assert lead.lost.wait(5) is True
    with pytest.raises(etcdlock.LockLostError):
        lead.proclaim("v2")
    assert etcdctl_keys(endpoints, name + "/") == []


def test_etcdctl_elect_and_python_follow_each_other(client: etcdlock.Client, endpoints: List[str], name: str) -> None:
    env = {**os.environ, "ETCDCTL_API": "3"}
    p = subprocess.Popen(["etcdctl", "--endpoints", ",".join(endpoints), "elect", name, "from-etcdctl"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        # etcdctl prints its key once its Campaign returned; a SIGINT before
        # that ends it without resigning (its key would stay for the lease TTL).
        assert p.stdout is not None
        etcdctl_key = p.stdout.readline().strip()
        obs = client.observe(name)
        first: Optional[etcdlock.Leader] = obs.next(timeout=10)
        assert first is not None and first.key == etcdctl_key
        assert first.value == b"from-etcdctl"
        with pytest.raises(etcdlock.TimeoutError):
            client.campaign(name, "py", timeout=0)
    finally:
        p.send_signal(signal.SIGINT)  # etcdctl unlocks / resigns on SIGINT only
        p.wait(10)
    lead = client.campaign(name, "from-python", timeout=10)
    try:
        w = subprocess.Popen(["etcdctl", "--endpoints", ",".join(endpoints), "elect", "-l", name], stdout=subprocess.PIPE, text=True, env=env)
        try:
            assert w.stdout is not None
            assert w.stdout.readline().strip() == lead.key
            assert w.stdout.readline().strip() == "from-python"
        finally:
            w.terminate()
            w.wait(10)
    finally:
        lead.resign()


# ---------------------------------------------------------------- queue view


def test_status_shows_holders_and_waiters_of_a_semaphore(endpoints: List[str], name: str, client: etcdlock.Client) -> None:
    g1 = client.acquire_permit(name, 2)
    g2 = client.acquire_permit(name, 2)
    waiting: List[etcdlock.Guard] = []
    t = threading.Thread(target=lambda: waiting.append(client.acquire_permit(name, 2, timeout=20)))
    t.start()
    wait_until(lambda: len(etcdctl_keys(endpoints, name + "/")) == 3, what="the waiter's key")
    st = client.status(name)
    assert st.name == name and st.revision > 0
    assert [c.key for c in st.holders] == [g1.key, g2.key]
    assert len(st.waiters) == 1 and not st.waiters[0].holds
    for c in st.holders + st.waiters:
        assert c.kind == "permit" and c.permits == 2
        assert c.owner is not None and c.owner.endswith(f":{os.getpid()}")
        assert c.lease_id == g1.lease_id and c.ttl_remaining is not None and 0 < c.ttl_remaining <= 15
    assert st.holders[0].fencing_token == g1.fencing_token
    g1.unlock()
    t.join(20)
    g2.unlock()
    waiting[0].unlock()
    empty = client.status(name)
    assert empty.holders == [] and empty.waiters == []


def test_status_of_a_read_write_lock_and_an_election(client: etcdlock.Client, name: str) -> None:
    r = client.acquire_read(name)
    st = client.status(name)
    assert [(c.kind, c.holds) for c in st.holders] == [("reader", True)]
    r.unlock()
    lead = client.campaign(name, b"leader-value")
    st = client.status(name)
    assert [(c.kind, c.value) for c in st.holders] == [("exclusive", b"leader-value")]
    lead.resign()


# ------------------------------------------------------------------- asyncio


def test_async_recipes(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as a, etcdlock.AsyncClient(endpoints=endpoints) as b:
            # Election with an async iterator of leaders.
            seen: List[Optional[bytes]] = []
            ready = asyncio.Event()

            async def follow() -> None:
                async for leader in await b.observe(name):
                    seen.append(None if leader is None else leader.value)
                    ready.set()
                    if len(seen) == 3:
                        return

            follower = asyncio.create_task(follow())
            await asyncio.wait_for(ready.wait(), 10)
            async with await a.campaign(name, "one") as lead:
                assert isinstance(lead, etcdlock.AsyncLeadership)
                assert (await b.leader(name)).value == b"one"  # type: ignore[union-attr]
                await lead.proclaim("two")
                st = await b.status(name)
                assert [c.key for c in st.holders] == [lead.key]
            await asyncio.wait_for(follower, 10)
            assert seen == [None, b"one", b"two"] or seen == [None, b"two", None]

            # Semaphore: a cancelled wait leaves no key.
            p1 = await a.acquire_permit(name + "-sem", 1)
            waiter = asyncio.create_task(b.acquire_permit(name + "-sem", 1))
            await asyncio.sleep(0)
            deadline = asyncio.get_running_loop().time() + 10
            while len(await asyncio.to_thread(etcdctl_keys, endpoints, name + "-sem/")) != 2:
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.02)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            deadline = asyncio.get_running_loop().time() + 10
            while len(await asyncio.to_thread(etcdctl_keys, endpoints, name + "-sem/")) != 1:
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.02)
            await p1.unlock()

            # Read lock and multi-lock.
            async with await a.acquire_read(name + "-rw") as r1, await b.acquire_read(name + "-rw") as r2:
                assert r1.is_held and r2.is_held
            async with await a.acquire_many([name + "-x", name + "-y"], timeout=5) as m:
                assert isinstance(m, etcdlock.AsyncMultiGuard) and m.is_held
                assert await m.wait_lost(0.05) is None
            assert not m.is_held

    run(main())


def test_multi_guard_guarded_operations_need_every_lock(endpoints: List[str], name: str, client: etcdlock.Client) -> None:
    names = [f"{name}-1", f"{name}-2"]
    m = client.acquire_many(names, timeout=5)  # no `with`: the test unlocks the lost hold itself
    for _ in [0]:
        m.put(f"{name}-ledger", "100")
        assert m.get(f"{name}-ledger") == b"100"
        assert m.delete(f"{name}-ledger") is True
        assert m.get(f"{name}-ledger") is None
        with pytest.raises(etcdlock.InvalidArgumentError):
            m.put(f"{names[1]}/inside", "x")
        m.put(f"{name}-ledger", "1")
        etcdctl(endpoints, "del", m.keys[1])
        with pytest.raises(etcdlock.LockLostError) as lost:
            m.put(f"{name}-ledger", "2")
        assert lost.value.reason == "KeyDeleted"
        assert m.loss == (names[1], "KeyDeleted")
        assert etcdctl(endpoints, "get", "--print-value-only", f"{name}-ledger").strip() == "1"
        with pytest.raises(etcdlock.LockLostError):
            m.unlock()

    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints) as ac:
            async with await ac.acquire_many(names, timeout=5) as am:
                await am.put(f"{name}-ledger", "3")
                assert await am.get(f"{name}-ledger") == b"3"
                assert await am.delete(f"{name}-ledger") is True

    asyncio.run(main())
