"""`Client.list` (every lock under a prefix, with kind, holder and local
queue) and `Client.release` (free a wedged holder by its fencing token),
sync and asyncio, against real etcd."""

from __future__ import annotations

import asyncio
import threading
from typing import List

import etcdlock
from conftest import wait_until


def test_list_shows_every_kind_with_language_and_local_queue(endpoints: List[str], name: str) -> None:
    a = etcdlock.Client(endpoints=endpoints)
    b = etcdlock.Client(endpoints=endpoints)
    try:
        held = a.acquire(f"{name}/mutex")
        done: List[etcdlock.Guard] = []
        threads = [threading.Thread(target=lambda: done.append(b.acquire(f"{name}/mutex", timeout=30).unlock() or 1)) for _ in range(5)]
        for t in threads:
            t.start()
        leader = a.campaign(f"{name}/election", b"node-a")
        permit = a.acquire_permit(f"{name}/sem", 3)
        reader = a.acquire_read(f"{name}/rw")

        def ready() -> bool:
            l = a.list(f"{name}/")
            return len(l) == 4 and all(s.kind for s in l) and any(
                w.local_waiters == 5 for s in l for w in s.waiters
            )

        wait_until(ready, what="every kind and b's local queue in the meta records")
        by = {s.name: s for s in a.list(f"{name}/")}
        assert list(by) == sorted(by), "sorted by name"
        m = by[f"{name}/mutex"]
        assert (m.kind, len(m.holders), len(m.waiters)) == ("mutex", 1, 2), m
        assert m.holders[0].fencing_token == held.fencing_token
        assert m.holders[0].language == "python" and not m.holders[0].foreign
        assert m.holders[0].pid is not None and m.holders[0].host
        assert [w.local_waiters for w in m.waiters] == [5, 5]
        assert by[f"{name}/election"].kind == "election"
        assert by[f"{name}/election"].holders[0].value == b"node-a"
        assert by[f"{name}/sem"].kind == "semaphore"
        assert by[f"{name}/rw"].kind == "rwlock"
        assert a.status(f"{name}/mutex").kind == "mutex"
        held.unlock()
        for t in threads:
            t.join(30)
        assert len(done) == 5
        leader.resign()
        permit.unlock()
        reader.unlock()
        wait_until(lambda: a.list(f"{name}/") == [], what="nothing left")
    finally:
        a.close()
        b.close()


def test_release_by_token_tells_the_wedged_holder(endpoints: List[str], name: str) -> None:
    holder = etcdlock.Client(endpoints=endpoints)
    admin = etcdlock.Client(endpoints=endpoints)
    try:
        g = holder.acquire(name)
        assert admin.release(name, g.fencing_token + 1) is False
        assert admin.release(name, g.fencing_token) is True
        assert g.lost.wait(5), "the holder learns of it"
        assert g.loss_reason == "KeyDeleted"
        assert admin.release(name, g.fencing_token) is False
        nxt = admin.try_lock(name)
        assert nxt is not None and nxt.fencing_token > g.fencing_token
        nxt.unlock()
    finally:
        holder.close()
        admin.close()


def test_list_and_release_awaitable(endpoints: List[str], name: str) -> None:
    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as c:
            g = await c.acquire(name)
            l = await c.list(name)
            assert [s.name for s in l] == [name] and l[0].holders[0].fencing_token == g.fencing_token
            assert await c.release(name, g.fencing_token) is True
            assert await c.list(name) == []

    asyncio.run(asyncio.wait_for(main(), 60))


def test_prometheus_text_uses_core_metric_names(endpoints: List[str], name: str) -> None:
    with etcdlock.Client(endpoints=endpoints) as c:
        g = c.acquire(name)
        text = c.prometheus(service="orders")
        assert "# TYPE etcdlock_acquire_seconds histogram\n" in text
        assert 'etcdlock_held{service="orders"} 1\n' in text
        assert 'etcdlock_acquire_seconds_count{service="orders",result="acquired"} 1\n' in text
        g.unlock()
        assert "etcdlock_held 0\n" in c.prometheus()
