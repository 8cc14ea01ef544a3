"""`Client.deadlocks` (cycles of clients waiting on each other's holds),
`detect_deadlock=True` (the wait that would close a cycle raises
`DeadlockError`, and the other member is then served) and `Client.history`
(every hold and wait of a name from etcd's MVCC history, with its fencing
token), sync and asyncio, against real etcd."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from typing import Any, Dict, List

import pytest

import etcdlock
from conftest import wait_until
from etcdlock._common import _deadlocks, _history


class Waiter(threading.Thread):
    """One blocking acquire on a thread of its own: its guard or its error."""

    def __init__(self, client: etcdlock.Client, name: str, timeout: float, **kw: Any) -> None:
        super().__init__(daemon=True)
        self.args_ = (client, name, timeout, kw)
        self.guard: "etcdlock.Guard | None" = None
        self.error: "BaseException | None" = None
        self.took = 0.0
        self.start()

    def run(self) -> None:
        client, name, timeout, kw = self.args_
        t0 = time.monotonic()
        try:
            self.guard = client.acquire(name, timeout=timeout, **kw)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            self.error = e
        self.took = time.monotonic() - t0


def waiters(c: etcdlock.Client, name: str) -> int:
    return len(c.status(name).waiters)


def test_two_clients_deadlock_found_and_broken(endpoints: List[str], name: str) -> None:
    """A holds x and waits for y, B holds y and waits for x: `deadlocks`
    finds one cycle of two waits (the holders' tokens, this process, the
    language); with `detect_deadlock=True` on both waits, B's (the one that
    closes the cycle) raises `DeadlockError` naming it, and A is served once
    B lets y go."""
    x, y, prefix = f"{name}/x", f"{name}/y", f"{name}/"
    a = etcdlock.Client(endpoints=endpoints)
    b = etcdlock.Client(endpoints=endpoints)
    try:
        hx = a.acquire(x)
        hy = b.acquire(y)
        wa = Waiter(a, y, 60, detect_deadlock=True)
        wait_until(lambda: waiters(b, y) == 1, what="A's wait on y in etcd")
        d = b.deadlocks(prefix)
        assert (d.cycles, d.waits, d.clients, d.prefix) == ([], 1, 2, prefix)
        # B waits for x without the check: a deadlock, seen from either client.
        # (1 s: A's own checks while it waits fail A only on a cycle seen at
        # two checks in a row, at least 2 s apart.)
        wb = Waiter(b, x, 1)
        wait_until(lambda: waiters(a, x) == 1, what="B's wait on x in etcd")
        d = a.deadlocks(prefix)
        assert isinstance(d, etcdlock.Deadlocks) and d.revision > 0
        assert len(d.cycles) == 1 and len(d.cycles[0].edges) == 2, d
        edges = {e.name: e for e in d.cycles[0].edges}
        assert set(edges) == {x, y}
        assert (edges[x].fencing_token, edges[y].fencing_token) == (hx.fencing_token, hy.fencing_token)
        assert edges[x].holder == edges[y].waiter and edges[y].holder == edges[x].waiter
        assert edges[x].waiter.lease_id != edges[x].holder.lease_id
        for e in d.cycles[0].edges:
            assert isinstance(e, etcdlock.WaitEdge) and isinstance(e.waiter, etcdlock.Party)
            assert (e.waiter.pid, e.waiter.language, e.holder.language) == (os.getpid(), "python", "python")
            assert e.waiter.owner == f"{e.waiter.host}:{os.getpid()}"
            assert e.waiter_key.startswith(e.name + "/") and e.holder_key.startswith(e.name + "/")
            assert e.waiter_revision > e.fencing_token
        assert b.deadlocks(x).cycles == [], "a prefix of one name: no cycle"
        wb.join(30)
        assert isinstance(wb.error, etcdlock.TimeoutError), wb.error
        wait_until(lambda: waiters(a, x) == 0, what="B's timed-out key gone")
        # B again, with the check: DeadlockError, at once, naming the cycle.
        wd = Waiter(b, x, 60, detect_deadlock=True)
        wd.join(60)
        assert isinstance(wd.error, etcdlock.DeadlockError), wd.error
        assert wd.error.code == "Deadlock" and not wd.error.retryable
        assert f'"{x}"' in str(wd.error) and f'"{y}"' in str(wd.error), str(wd.error)
        assert wd.took < 10, f"Deadlock after {wd.took:.1f} s"
        assert waiters(a, x) == 0, "the refused wait left no key"
        assert wa.is_alive(), "A still waits (its wait closed no cycle)"
        # B backs off: A is served, with a larger token.
        hy.unlock()
        wa.join(30)
        assert wa.error is None and wa.guard is not None
        assert wa.guard.fencing_token > hy.fencing_token
        assert a.deadlocks(prefix).cycles == []
        wa.guard.unlock()
        hx.unlock()
    finally:
        a.close()
        b.close()


def test_two_owners_of_one_client(client: etcdlock.Client, name: str) -> None:
    """Two threads of one client, each holding a reentrant lock, one waiting
    for the other's (etcd sees one lease: the client's own wait graph finds
    the cycle): with `detect_deadlock=True` the wait that closes the cycle
    raises `DeadlockError` naming the owners, and the other, once this thread
    lets its hold go, acquires."""
    x, y = f"{name}/x", f"{name}/y"
    hy = client.acquire(y, reentrant=True)
    x_held = threading.Event()
    result: List[Any] = []

    def other() -> None:
        hx = client.acquire(x, timeout=30, reentrant=True)
        x_held.set()
        try:
            g = client.acquire(y, timeout=30, reentrant=True, detect_deadlock=True)
            result.append(g.fencing_token)
            g.unlock()
        except etcdlock.LockError as e:
            result.append(e)
        hx.unlock()

    t = threading.Thread(target=other)
    t.start()
    assert x_held.wait(30)
    wait_until(lambda: waiters(client, y) == 1, what="the other owner's wait on y in etcd")
    with pytest.raises(etcdlock.DeadlockError, match="owners of this client"):
        client.acquire(x, timeout=30, reentrant=True, detect_deadlock=True)
    hy.unlock()
    t.join(30)
    assert len(result) == 1 and isinstance(result[0], int) and result[0] > hy.fencing_token, result
    wait_until(lambda: client.list(f"{name}/") == [], what="both names free")


def test_detect_deadlock_keyword(client: etcdlock.Client, name: str) -> None:
    """Without a cycle the option changes nothing, on every path that waits
    (acquire, a Lock handle, an RLock); it is a bool."""
    g = client.acquire(name, timeout=5, detect_deadlock=True)
    g.unlock()
    with client.lock(name, timeout=5, detect_deadlock=True) as held:
        assert held.fencing_token > 0
    r = client.lock(name, reentrant=True, detect_deadlock=True)
    with r:
        with r:
            pass
    with pytest.raises(TypeError, match="detect_deadlock must be a bool"):
        client.acquire(name, timeout=5, detect_deadlock="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.acquire(name, timeout=5, detect_deadlocks=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="prefix must be a str"):
        client.deadlocks(5)  # type: ignore[arg-type]
    assert client.status(name).holders == []


def test_history_of_holds_and_waits(endpoints: List[str], name: str) -> None:
    """A holds, B waits, A tries again for 0.1 s, A releases, B holds: three
    entries, oldest first, with their clients, tokens, grants and ends."""
    a = etcdlock.Client(endpoints=endpoints)
    b = etcdlock.Client(endpoints=endpoints)
    try:
        t0 = time.time()
        h1 = a.acquire(name)
        w = Waiter(b, name, 30)
        wait_until(lambda: waiters(a, name) == 1, what="B's wait in etcd")
        with pytest.raises(etcdlock.TimeoutError):
            a.acquire(name, timeout=0.1)
        h1.unlock()
        w.join(30)
        assert w.guard is not None, w.error
        h = b.history(name)
        assert isinstance(h, etcdlock.History) and h.name == name
        assert [e.ended for e in h.entries] == ["released", "holding", "abandoned"]
        first, second, tried = h.entries
        assert all(isinstance(e, etcdlock.HistoryEntry) for e in h.entries)
        assert (first.fencing_token, second.fencing_token) == (h1.fencing_token, w.guard.fencing_token)
        assert first.granted_revision == h1.fencing_token
        assert second.granted_revision == first.ended_revision, "B was granted at A's release"
        assert (second.ended_revision, second.ended_at) == (None, None)
        assert (tried.granted_revision, tried.granted_at, tried.hold) == (None, None, None)
        assert tried.lease_id == first.lease_id != second.lease_id
        for e in h.entries:
            assert (e.kind, e.permits, e.language, e.pid) == ("exclusive", None, "python", os.getpid())
            assert e.key.startswith(name + "/") and e.owner
            assert t0 - 5 <= e.queued_at <= time.time() + 5, "seconds since the epoch"
            assert e.wait >= 0
        assert first.hold is not None and first.hold >= 0 and first.ended_at is not None
        assert 0 <= tried.wait < 5
        assert h.revision > second.fencing_token and 1 <= h.from_revision <= first.fencing_token
        assert t0 - 5 <= h.read_at <= time.time() + 5
        assert [e.ended for e in a.history(name, since=3600).entries] == ["released", "holding", "abandoned"]
        w.guard.unlock()
        assert [e.ended for e in a.history(name).entries] == ["released", "released", "abandoned"]
        with pytest.raises(etcdlock.InvalidArgumentError):
            a.history("")
        with pytest.raises(etcdlock.InvalidArgumentError):
            a.history(name, since=-1)
        with pytest.raises(TypeError, match="since must be a number of seconds"):
            a.history(name, since="1h")  # type: ignore[arg-type]
        assert a.history(f"{name}-never-used").entries == []
    finally:
        a.close()
        b.close()


def test_asyncio_deadlocks_history_and_detect(endpoints: List[str], name: str) -> None:
    """The same through AsyncClient: B (async) holds y and waits for x, which
    A (sync, waiting for y) holds: DeadlockError from B's awaited acquire."""
    x, y = f"{name}/x", f"{name}/y"
    a = etcdlock.Client(endpoints=endpoints)

    async def main() -> None:
        async with etcdlock.AsyncClient(endpoints=endpoints) as b:
            hx = a.acquire(x)
            hy = await b.acquire(y)
            wa = Waiter(a, y, 60)
            while len((await b.status(y)).waiters) != 1:
                await asyncio.sleep(0.01)
            d = await b.deadlocks(f"{name}/")
            assert (d.cycles, d.waits) == ([], 1)
            with pytest.raises(etcdlock.DeadlockError):
                await b.acquire(x, timeout=60, detect_deadlock=True)
            await hy.unlock()
            await asyncio.get_running_loop().run_in_executor(None, wa.join, 30)
            assert wa.guard is not None, wa.error
            h = await b.history(y, since=600.0)
            assert [e.ended for e in h.entries] == ["released", "holding"]
            assert h.entries[1].fencing_token == wa.guard.fencing_token
            wa.guard.unlock()
            hx.unlock()
            assert [e.ended for e in (await b.history(x)).entries] == ["released", "abandoned"]

    try:
        asyncio.run(main())
    finally:
        a.close()


def test_records_decode_by_field_name() -> None:
    """The one decoder: ids as decimal strings, milliseconds as seconds,
    unknown fields ignored, frozen dataclasses."""
    party: Dict[str, Any] = {"lease_id": "7587883003484955001", "owner": "h:1", "host": "h", "pid": 1, "language": "java", "new": 1}
    edge = {"waiter": party, "name": "x", "waiter_key": "x/1", "waiter_revision": "12", "holder": dict(party, lease_id="2"),
            "holder_key": "x/2", "fencing_token": "9", "later": [1]}
    d = _deadlocks(json.dumps({"prefix": "", "revision": "40", "clients": 2, "waits": 2, "cycles": [{"edges": [edge]}], "x": None}))
    assert d.revision == 40 and d.cycles[0].edges[0].waiter.lease_id == 7587883003484955001
    assert d.cycles[0].edges[0].holder.lease_id == 2 and d.cycles[0].edges[0].fencing_token == 9
    with pytest.raises(Exception):
        d.cycles[0].edges[0].name = "y"  # type: ignore[misc]
    entry = {"key": "n/1", "kind": "permit", "permits": 3, "lease_id": "5", "fencing_token": "6", "owner": None, "host": None,
             "pid": None, "language": None, "queued_ms": 1700000000000, "granted_revision": 7, "granted_ms": 1700000000500,
             "ended_revision": None, "ended_ms": None, "ended": "holding", "wait_ms": 500, "hold_ms": 1500, "future": True}
    h = _history(json.dumps({"name": "n", "revision": "9", "from_revision": "1", "read_ms": 1700000002000, "entries": [entry]}))
    e = h.entries[0]
    assert (e.kind, e.permits, e.queued_at, e.granted_at, e.wait, e.hold) == ("permit", 3, 1700000000.0, 1700000000.5, 0.5, 1.5)
    assert (e.ended_at, e.ended_revision, h.read_at, h.from_revision) == (None, None, 1700000002.0, 1)
